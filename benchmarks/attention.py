"""Attention speed against baselines in the same run.

1. attnkit's attention without weights vs ``F.scaled_dot_product_attention``
   (target: within 1.1x);
2. attnkit's attention with weights vs a plain matmul-softmax-matmul
   (target: within 1.5x);
3. local attention vs global attention as S grows with D fixed: time and
   peak memory (target: linear in S).

Usage:
    python benchmarks/attention.py              # full table, prints markdown
    python benchmarks/attention.py --quick      # smaller sizes, a smoke run
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.benchmark import Timer

from attnkit.attention import GlobalAttention, LocalAttention, dot_product_attention, key_mask, padding_mask


def reference_with_weights(q, k, v, mask):
    """What a user would write by hand: matmul, masked softmax, matmul."""
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights @ v, weights


def median_seconds(fn, min_run_time: float) -> float:
    return (
        Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
        .blocked_autorange(min_run_time=min_run_time)
        .median
    )


def dense_table(lengths: list[int], min_run_time: float) -> list[dict]:
    b, h, d = 32, 4, 32
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for n in lengths:
            g = torch.Generator().manual_seed(0)
            q, k, v = (torch.randn(b, h, n, d, generator=g).to(dtype) for _ in range(3))
            lengths_b = torch.randint(n // 2, n + 1, (b,), generator=g)
            mask = key_mask(padding_mask(lengths_b, n))  # (b, 1, 1, s): realistic padding
            with torch.inference_mode():
                sdpa = median_seconds(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), min_run_time)
                ours = median_seconds(lambda: dot_product_attention(q, k, v, mask), min_run_time)
                ref_w = median_seconds(lambda: reference_with_weights(q, k, v, mask), min_run_time)
                ours_w = median_seconds(lambda: dot_product_attention(q, k, v, mask, need_weights=True), min_run_time)
            rows.append(
                dict(
                    dtype=str(dtype).removeprefix("torch."),
                    t=n,
                    sdpa_ms=sdpa * 1e3,
                    ours_ms=ours * 1e3,
                    ratio=ours / sdpa,
                    ref_weights_ms=ref_w * 1e3,
                    ours_weights_ms=ours_w * 1e3,
                    ratio_weights=ours_w / ref_w,
                )
            )
    return rows


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))


def _local_child(kind: str, s: int, window: int, d: int) -> None:
    """Runs in a fresh process: prints the median time and the peak resident
    memory one forward adds (Linux: the peak is reset through /proc/self/clear_refs)."""
    torch.manual_seed(0)
    b = 1
    q, k, v = torch.randn(b, s, d), torch.randn(b, s, d), torch.randn(b, s, d)
    keep = torch.ones(b, s, dtype=torch.bool)
    if kind == "global":
        att = GlobalAttention(query_dim=d, key_dim=d, score="general")
    else:
        att = LocalAttention(query_dim=d, key_dim=d, mode=kind, window=window, score="general")
    with torch.inference_mode():
        att(q, k, v, keep)  # warm-up
        times = []
        for _ in range(3):
            start = time.perf_counter()
            att(q, k, v, keep)
            times.append(time.perf_counter() - start)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current resident size
        base = _rss_kib("VmRSS:")
        att(q, k, v, keep)
        peak = _rss_kib("VmHWM:")
    print(json.dumps({"seconds": sorted(times)[1], "peak_mib": max(peak - base, 0) / 1024}))


GLOBAL_LIMIT = 16384


def local_table(sizes: list[int], window: int, d: int = 64) -> list[dict]:
    rows = []
    for s in sizes:
        row = {"s": s}
        for kind in ("global", "local-m", "local-p"):
            if kind == "global" and s > GLOBAL_LIMIT:
                row["global_ms"] = row["global_mib"] = float("nan")  # (s, s) scores would not fit
                continue
            out = subprocess.run(
                [sys.executable, __file__, "--child", kind, str(s), str(window), str(d)],
                check=True,
                capture_output=True,
                text=True,
            )
            res = json.loads(out.stdout.strip().splitlines()[-1])
            row[f"{kind}_ms"] = res["seconds"] * 1e3
            row[f"{kind}_mib"] = res["peak_mib"]
        rows.append(row)
    return rows


def machine() -> str:
    return (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, short timing (smoke test)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, s, window, d = args.child
        _local_child(kind, int(s), int(window), int(d))
        return

    lengths = [16, 64] if args.quick else [16, 64, 256, 1024]
    local_sizes = [256, 1024] if args.quick else [1024, 4096, 16384, 65536]
    window = 8
    print(f"# attention benchmark — {time.strftime('%Y-%m-%d')} — {machine()}\n")
    print("## Dense attention, b=32 h=4 d=32, padding mask, median of repeated runs\n")
    print(
        "| dtype | t=s | SDPA ms | ours (no weights) ms | ratio | matmul-softmax-matmul ms | ours (weights) ms | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in dense_table(lengths, 0.05 if args.quick else 0.5):
        print(
            f"| {r['dtype']} | {r['t']} | {r['sdpa_ms']:.3f} | {r['ours_ms']:.3f} | {r['ratio']:.2f}x "
            f"| {r['ref_weights_ms']:.3f} | {r['ours_weights_ms']:.3f} | {r['ratio_weights']:.2f}x |"
        )
    print(
        f"\n## Local vs global attention (recurrent), b=1, t=s, d=64, D={window}, general score, median of 3 forwards, peak resident memory added by one\n"
    )
    print("| s | global ms | global peak MiB | local-m ms | local-m peak MiB | local-p ms | local-p peak MiB |")
    print("|---|---|---|---|---|---|---|")
    for r in local_table(local_sizes, window):
        print(
            f"| {r['s']} | {r['global_ms']:.1f} | {r['global_mib']:.1f} | {r['local-m_ms']:.1f} | "
            f"{r['local-m_mib']:.1f} | {r['local-p_ms']:.1f} | {r['local-p_mib']:.1f} |"
        )


if __name__ == "__main__":
    main()

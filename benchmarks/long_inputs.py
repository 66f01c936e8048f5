"""Memory of an encoder training step on long inputs: attention memory
must grow linearly with the length when no attention weights are requested.

    python benchmarks/long_inputs.py                     # lengths 256 .. 4096
    python benchmarks/long_inputs.py --lengths 1024 4096 --heads 4

Each (path, length) runs in its own process: build the Transformer-tiny encoder
(4 layers, d_model 128, 4 heads, FFN 256, sinusoidal positions), run one
untimed step at a short length, then one forward + backward over a single
sequence of ``length`` tokens, and report the growth of the peak resident
memory over the process's footprint before that step, and the step time.

Paths:
  fused     what training runs: no weights requested, so attention goes through
            F.scaled_dot_product_attention (flash kernel: no (t, s) matrix kept)
  explicit  the same model with a listener that asks for its weights at every
            attention site (``attention.sites.Weights``): the (heads, t, s) scores
            and weights of every layer are materialised and kept for the backward
            pass, the textbook implementation
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time

import torch


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def run(path: str, length: int, heads: int) -> dict:
    from attnkit.attention import sites
    from attnkit.config import ModelConfig, TransformerConfig
    from attnkit.models import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="encoder",
        d_model=128,
        layers=4,
        dropout=0.1,
        max_positions=length + 1,
        transformer=TransformerConfig(heads=heads, ffn=256),
    )
    model = build_model(cfg, src_vocab=8000, tgt_vocab=8000, pad_id=0, shared_vocab=True).train()
    need = path == "explicit"

    def step(n: int) -> None:
        tokens = torch.randint(4, 8000, (1, n))
        heard = (sites.Weights(),) if need else ()
        with sites.listening(*heard):
            out = model(tokens, torch.ones(1, n, dtype=torch.bool))
        out.memory.square().mean().backward()
        model.zero_grad(set_to_none=True)

    step(64)
    before = _rss_mib()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    step(length)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"path": path, "length": length, "growth_mib": peak - max(before, peak_before), "step_s": seconds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    p.add_argument("--paths", nargs="+", default=["fused", "explicit"], choices=["fused", "explicit"])
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(run(args.one[0], int(args.one[1]), args.heads)))
        return
    rows = []
    for path in args.paths:
        for n in args.lengths:
            out = subprocess.run(
                [sys.executable, __file__, "--one", path, str(n), "--heads", str(args.heads)],
                capture_output=True,
                text=True,
            )
            if out.returncode:
                print(f"{path} {n}: failed\n{out.stderr[-1500:]}", file=sys.stderr)
                continue
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"{path:<9} {n:>6} tokens: +{r['growth_mib']:8.1f} MiB  {r['step_s']:6.2f} s", flush=True)
    print(
        f"\n{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}; "
        f"encoder 4 x (d_model 128, {args.heads} heads, FFN 256), batch 1, forward + backward"
    )
    print("| path | tokens | peak memory growth MiB | MiB per 1k tokens | step s |\n|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['path']} | {r['length']} | {r['growth_mib']:.1f} | {r['growth_mib'] / r['length'] * 1000:.1f} | "
            f"{r['step_s']:.2f} |"
        )


if __name__ == "__main__":
    main()

"""One training step of Multi30k Transformer-tiny at a fixed (rows, length) shape: eager
float32 (as `attnkit train` runs it) against torch.compile with static shapes and against
bfloat16, in the same process, alternating. Also the machine's matmul peak in float32 and
bfloat16, which decides whether bf16 can pay at all.

    python benchmarks/compiled_step.py                  # length bucket 16 (256 rows of 4,096 tokens)
    python benchmarks/compiled_step.py --length 24 --steps 20 --variants eager compiled_model

Batches are real training pairs whose longer side (with EOS) is in (length - 8, length],
padded to exactly ``length``: the shape a bucketed, statically compiled trainer would see.

Variants:
  eager           the model and the fused projected loss (training/loss.py), float32
  eager_bf16      the same under bfloat16 autocast
  compiled_model  the model compiled with dynamic=False, the fused loss outside the graph
  compiled_step   model, output layer and label-smoothed loss in one static graph (float32)
  compiled_bf16   compiled_step under bfloat16 autocast inside the graph

Each variant's first steps (compilation included) are reported as its warm-up time.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("eager", "eager_bf16", "compiled_model", "compiled_step", "compiled_bf16")


def matmul_gflops(dtype: torch.dtype, n: int = 1024) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    torch.mm(a, b)
    t0 = time.perf_counter()
    torch.mm(a, b)
    return 2 * n**3 / (time.perf_counter() - t0) / 1e9


def batches(data: str, length: int, count: int, workdir: Path):
    from attnkit.config import load_config
    from attnkit.data import Tokenizer, multi30k, read_lines
    from attnkit.data.batching import collate

    cfg = load_config(ROOT / "configs/multi30k_en_de_transformer_tiny.yaml")
    src = read_lines(multi30k.locate("train", "en", root=data, variant="tok"))
    tgt = read_lines(multi30k.locate("train", "de", root=data, variant="tok"))
    tok = Tokenizer.train(cfg.tokenizer, src, tgt, workdir)
    s, t = tok.encode_src(src), tok.encode_tgt(tgt)
    pick = [i for i in range(len(s)) if length - 8 < max(len(s[i]), len(t[i])) + 1 <= length]
    rows = 4096 // length
    out = []
    for k in range(count):
        idx = [pick[(k * rows + j) % len(pick)] for j in range(rows)]
        b = collate([s[i] for i in idx], [t[i] for i in idx], idx)
        pad = lambda x: torch.nn.functional.pad(x, (0, length - x.shape[1]))
        out.append((pad(b.src), pad(b.src_mask), pad(b.tgt_in), pad(b.tgt_out)))
    return cfg, tok, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--variants",
        nargs="+",
        choices=VARIANTS,
        help="default: all, but the bf16 ones only where bf16 matmul beats float32",
    )
    p.add_argument("--length", type=int, default=16)
    p.add_argument("--steps", type=int, default=15, help="timed steps per variant and round")
    p.add_argument("--rounds", type=int, default=2, help="rounds over the variants (alternating)")
    p.add_argument(
        "--data",
        default=os.environ.get("ATTNKIT_MULTI30K"),
        help="Multi30k folder (default: $ATTNKIT_MULTI30K, else downloaded)",
    )
    args = p.parse_args()

    import tempfile

    from attnkit.data.tokenizer import PAD
    from attnkit.models import build_model
    from attnkit.training.loss import label_smoothed_loss, projected_label_smoothed_loss
    from attnkit.training.schedule import build_optimizer

    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    print(
        f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print(f"matmul peak: float32 {fp32:.1f} GFLOP/s, bfloat16 {bf16:.2f} GFLOP/s")
    if args.variants is None:
        args.variants = [v for v in VARIANTS if bf16 > fp32 or not v.endswith("bf16")]
        if len(args.variants) < len(VARIANTS):
            print("bfloat16 matmul is slower than float32 on this CPU (no AVX-512 BF16 / AMX): bf16 variants skipped")
    with tempfile.TemporaryDirectory() as work:
        cfg, tok, data = batches(args.data, args.length, 8, Path(work))
    eps = cfg.train.label_smoothing

    def fused(model, fwd, src, mask, tin, tout, bf):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf):
            h = fwd(src, mask, tin)
            s = projected_label_smoothed_loss(h, model.output_projection.weight, tout, smoothing=eps, pad_id=PAD)
        return s.loss, s.tokens

    def whole(model, src, mask, tin, tout, bf):  # one graph: the loss over every row, padding masked
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf):
            logits = model(src, mask, tin, project=False).hidden @ model.output_projection.weight.t()
        s = label_smoothed_loss(logits, tout, smoothing=eps, pad_id=PAD)
        return s.loss, s.tokens

    runs = {}
    for v in args.variants:
        torch.manual_seed(0)
        model = build_model(
            cfg.model, src_vocab=tok.src_vocab, tgt_vocab=tok.tgt_vocab, pad_id=PAD, shared_vocab=tok.joint
        ).train()
        opt = build_optimizer(cfg.train, model.parameters())
        bf = v.endswith("bf16")
        if v.startswith("eager"):
            fn = lambda m, *b, _bf=bf: fused(m, lambda *x: m(*x, project=False).hidden, *b, _bf)
        elif v == "compiled_model":
            graph = torch.compile(lambda *x, _m=model: _m(*x, project=False).hidden, dynamic=False)
            fn = lambda m, *b, _g=graph: fused(m, _g, *b, False)
        else:
            graph = torch.compile(whole, dynamic=False)
            fn = lambda m, *b, _g=graph, _bf=bf: _g(m, *b, _bf)
        runs[v] = {"model": model, "opt": opt, "fn": fn, "times": [], "tokens": 0}

    def step(r, k):
        src, mask, tin, tout = data[k % len(data)]
        loss, n = r["fn"](r["model"], src, mask, tin, tout)
        (loss / n).backward()
        r["opt"].step()
        r["opt"].zero_grad(set_to_none=True)
        return int((tout != PAD).sum())

    for r in runs.values():
        t0 = time.perf_counter()
        for k in range(3):
            step(r, k)
        r["warmup"] = time.perf_counter() - t0
    for _ in range(args.rounds):
        for r in runs.values():
            t0 = time.perf_counter()
            r["tokens"] += sum(step(r, k) for k in range(args.steps))
            r["times"].append(time.perf_counter() - t0)
    base = runs.get("eager")
    print(f"\nlength {args.length}, {4096 // args.length} rows, {args.rounds} rounds of {args.steps} steps")
    print("| variant | target tok/s | vs eager fp32 | warm-up s (3 steps: compilation or cache load) |")
    print("|---|---|---|---|")
    for v, r in runs.items():
        rate = r["tokens"] / sum(r["times"])
        rel = f"{rate / (base['tokens'] / sum(base['times'])):.2f}x" if base else "-"
        print(f"| {v} | {rate:.0f} | {rel} | {r['warmup']:.0f} |")


if __name__ == "__main__":
    main()

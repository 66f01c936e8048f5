"""Training throughput of the Multi30k Transformer-tiny config, against a
plain eager PyTorch baseline in the same run; and of the RNN config.

    python benchmarks/train_speed.py                       # all variants, 100 timed steps each
    python benchmarks/train_speed.py --variants eager bf16 --steps 50
    python benchmarks/train_speed.py --variants rnn_baseline rnn rnn_bf16

Each variant runs in its own process (so peak memory is its own): it tokenizes
the Multi30k training set with a sentencepiece model trained for the run,
builds the model, runs warm-up steps, then times --steps optimizer steps of
4,096-token batches and reports target (non-padding) tokens/s, the padding
fraction, the peak resident memory, and the model FLOP utilisation as the
trainer logs it (``attnkit.training.flops``): the model FLOPs of the step's real
tokens per second against a float32 square matmul measured in the same process.

Variants:
  eager     attnkit as trained by `attnkit train` (fp32)
  eager_fused_attention  the same, but every attention call on PyTorch's fused SDPA kernel
            (no small-input CPU path: attnkit.attention.kernels.SMALL_CPU_SCORES = 0)
  ddp2      eager, as `torchrun --nproc_per_node=2 -m attnkit train ... train.batch_tokens=2048`
            runs it: two processes of one thread each (torchrun's default), each on half of
            every 4,096-token update, DistributedDataParallel averaging the gradients over gloo
            (tokens/s and peak memory summed over both processes)
  taught    eager, learning a teacher's 8 words a position as well (`train.teacher`, word-level
            distillation at weight 0.5; random words and probabilities stand in for a teacher's)
  rdrop     eager with R-Drop (`train.rdrop=5`): every 4,096-token batch run twice in one
            doubled batch, the two passes' distributions pulled together (its fused loss)
  rdrop_autograd  the same objective written with autograd (log_softmax, kl_div): the baseline
            of rdrop's fused loss
  bf16      + bfloat16 autocast
  compile   + torch.compile(dynamic=True)
  compile_bf16
  baseline  torch.nn.Transformer of the same sizes, fp32 eager, nn.CrossEntropyLoss
            with label smoothing, torch's own dropout, batches of a fixed number
            of shuffled sentences (no length bucketing)
  rnn       the RNN config (configs/multi30k_en_de_rnn_luong.yaml: bi-LSTM + Luong
            attention, 1,024-token batches) as `attnkit train` runs it
  rnn_bf16  + bfloat16 autocast
  rnn_baseline  the same RNN model and batches, but the plain way: full logits
            (rows x vocabulary, padding included) and nn.CrossEntropyLoss
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = (
    "baseline",
    "eager",
    "eager_fused_attention",
    "ddp2",
    "taught",
    "rdrop",
    "rdrop_autograd",
    "bf16",
    "compile",
    "compile_bf16",
    "rnn_baseline",
    "rnn",
    "rnn_bf16",
)
CONFIGS = {
    "transformer": "configs/multi30k_en_de_transformer_tiny.yaml",
    "rnn": "configs/multi30k_en_de_rnn_luong.yaml",
}


def _data(data_dir: str, workdir: Path, arch: str):
    from attnkit.config import load_config
    from attnkit.data import Tokenizer, multi30k, read_lines

    cfg = load_config(ROOT / CONFIGS[arch])
    src = read_lines(multi30k.locate("train", "en", root=data_dir, variant="tok"))
    tgt = read_lines(multi30k.locate("train", "de", root=data_dir, variant="tok"))
    tok = (
        Tokenizer.load(workdir)
        if (workdir / "spm.joint.model").is_file()
        else Tokenizer.train(cfg.tokenizer, src, tgt, workdir)
    )
    return cfg, tok, tok.encode_src(src), tok.encode_tgt(tgt)


class _Baseline(torch.nn.Module):
    """The same sizes with torch's own modules: nn.Transformer (post-norm), shared embeddings."""

    def __init__(self, vocab: int, d: int, heads: int, ffn: int, layers: int, dropout: float) -> None:
        super().__init__()
        from attnkit.positions import sinusoid_table

        self.embed = torch.nn.Embedding(vocab, d, padding_idx=0)
        self.register_buffer("pe", sinusoid_table(torch.arange(1024), d))
        self.net = torch.nn.Transformer(d, heads, layers, layers, ffn, dropout, batch_first=True)
        self.drop = torch.nn.Dropout(dropout)
        self.scale = math.sqrt(d)

    def forward(self, src, tgt_in):
        e = lambda x: self.drop(self.embed(x) * self.scale + self.pe[: x.shape[1]])
        causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        h = self.net(
            e(src),
            e(tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src == 0,
            tgt_key_padding_mask=tgt_in == 0,
            memory_key_padding_mask=src == 0,
        )
        return h @ self.embed.weight.T


def _teacher_words(tgt: list[list[int]], vocab: int, top: int = 8):
    """Stand-in teacher words for timing: ``top`` random words a target position, random
    probabilities summing to 1 (what the loss reads costs the same whatever the words are)."""
    import numpy as np

    from attnkit.training.distillation import TeacherWords

    rng = np.random.default_rng(0)
    offsets = np.concatenate([[0], np.cumsum([len(t) + 1 for t in tgt])])
    n = int(offsets[-1])
    ids = rng.integers(4, vocab, size=(n, top), dtype=np.int32)
    return TeacherWords(ids, rng.dirichlet(np.ones(top), size=n).astype(np.float32), offsets)


def _rdrop_autograd(hidden, weight, target, *, smoothing: float, pad_id: int, alpha: float):
    """R-Drop's objective by autograd (``attnkit.training.loss.rdrop_loss``'s sums, unfused)."""
    import torch.nn.functional as F

    from attnkit.training.loss import LossSums

    b, keep = target.shape[0], target != pad_id
    logits = torch.cat([hidden[:b][keep], hidden[b:][keep]]) @ weight.T
    lprobs = torch.log_softmax(logits, dim=-1)
    n, tgt = logits.shape[0] // 2, target[keep].repeat(2)
    ce = F.cross_entropy(logits, tgt, label_smoothing=smoothing, reduction="sum")
    first, second = lprobs[:n], lprobs[n:]
    kl = F.kl_div(second, first, log_target=True, reduction="sum") + F.kl_div(
        first, second, log_target=True, reduction="sum"
    )
    return LossSums((ce + alpha / 2 * kl) / 2, ce.detach() / 2, keep.sum())


def run_variant(variant: str, data_dir: str, workdir: Path, steps: int, warmup: int) -> dict:
    from attnkit.data.batching import BucketBatcher, collate
    from attnkit.data.tokenizer import PAD
    from attnkit.models import build_model
    from attnkit.training.flops import device_peak, update_flops
    from attnkit.training.loss import projected_label_smoothed_loss, rdrop_loss
    from attnkit.training.schedule import build_optimizer

    rnn = variant.startswith("rnn")
    cfg, tok, src, tgt = _data(data_dir, workdir, "rnn" if rnn else "transformer")
    rank, world = 0, 1
    if variant == "ddp2":  # started by torchrun (see main)
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    m = cfg.model
    plain = variant in ("baseline", "rnn_baseline")  # full logits + nn.CrossEntropyLoss
    criterion = torch.nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=cfg.train.label_smoothing, reduction="sum")
    if variant == "baseline":
        model = _Baseline(tok.src_vocab, m.d_model, m.transformer.heads, m.transformer.ffn, m.encoder_layers, m.dropout)
        rng = random.Random(0)
        order = list(range(len(src)))
        rng.shuffle(order)
        per_batch = 4096 // max(len(s) + 1 for s in src[:2000])  # naive: a fixed count sized for long sentences
        per_batch = max(per_batch, 128)
        batches = [order[i : i + per_batch] for i in range(0, len(order), per_batch)]
        make = lambda idx: collate([src[i] for i in idx], [tgt[i] for i in idx], idx)
    else:
        model = build_model(m, src_vocab=tok.src_vocab, tgt_vocab=tok.tgt_vocab, pad_id=PAD, shared_vocab=tok.joint)
        batcher = BucketBatcher(src, tgt, batch_tokens=cfg.train.batch_tokens // world, seed=1)
        batches = batcher.epoch(0)[rank::world]  # rank r takes every world-th batch, as the trainer does
        make = batcher.collate
    model.train()
    opt = build_optimizer(cfg.train, model.parameters())
    fwd = torch.compile(model, dynamic=True) if "compile" in variant else model
    if world > 1:
        fwd = torch.nn.parallel.DistributedDataParallel(model)
    if variant == "eager_fused_attention":
        import importlib

        importlib.import_module("attnkit.attention.kernels").SMALL_CPU_SCORES = 0
    bf16 = variant.endswith("bf16")
    taught = _teacher_words(tgt, tok.tgt_vocab) if variant == "taught" else None

    def step(i: int) -> tuple[int, int]:
        b = make(batches[i % len(batches)])
        teacher = taught.rows(b.indices) if taught is not None else None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if plain:
                logits = fwd(b.src, b.tgt_in) if variant == "baseline" else fwd(b.src, b.src_mask, b.tgt_in).logits
                loss = criterion(logits.reshape(-1, logits.shape[-1]), b.tgt_out.reshape(-1))
            elif variant.startswith("rdrop"):  # the batch twice in one pass, as `attnkit train` does
                twice = [torch.cat([x, x]) for x in (b.src, b.src_mask, b.tgt_in)]
                hidden = fwd(*twice, project=False).hidden
                weight = model.output_projection.weight
                rdrop = _rdrop_autograd if variant == "rdrop_autograd" else rdrop_loss
                loss = rdrop(hidden, weight, b.tgt_out, smoothing=cfg.train.label_smoothing, pad_id=PAD, alpha=5.0).loss
            else:  # as `attnkit train` does it: output projection fused into the loss
                out = fwd(b.src, b.src_mask, b.tgt_in, project=False)
                loss = projected_label_smoothed_loss(
                    out.hidden,
                    model.output_projection.weight,
                    b.tgt_out,
                    smoothing=cfg.train.label_smoothing,
                    pad_id=PAD,
                    teacher=teacher,
                    teacher_weight=0.5,
                ).loss
        (loss / b.n_tgt_tokens).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        idx = batches[i % len(batches)]  # model FLOPs: the real tokens' (padding is waste)
        flops = update_flops(m, [len(src[j]) + 1 for j in idx], [len(tgt[j]) + 1 for j in idx], tok.tgt_vocab)
        flops *= 2 if variant.startswith("rdrop") else 1  # two passes of every batch
        return b.n_tgt_tokens, b.tgt_out.numel(), flops

    t0 = time.perf_counter()
    for i in range(warmup):
        step(i)
    t1 = time.perf_counter()
    real = padded = flops = 0
    for i in range(warmup, warmup + steps):
        r, p, f = step(i)
        real, padded, flops = real + r, padded + p, flops + f
    t2 = time.perf_counter()
    peak = device_peak(torch.device("cpu"))  # float32: bf16 variants are held to the same ceiling
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if world > 1:  # the whole job: tokens, FLOPs, memory and matmul peak summed over the processes
        totals = torch.tensor([real, padded, flops, rss, peak], dtype=torch.float64)
        dist.all_reduce(totals)
        real, padded, flops, rss, peak = totals.tolist()
        dist.destroy_process_group()
    return {
        "variant": variant,
        "tgt_tok_s": real / (t2 - t1),
        "warmup_s": t1 - t0,
        "steps": steps,
        "tflops": flops / (t2 - t1) / 1e12,
        "peak_tflops": peak / 1e12,
        "mfu": flops / (t2 - t1) / peak,
        "padding": 1 - real / padded,
        "peak_rss_mib": rss,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (compiled variants use 4x)")
    p.add_argument(
        "--data",
        default=os.environ.get("ATTNKIT_MULTI30K"),
        help="Multi30k folder (default: $ATTNKIT_MULTI30K, else downloaded)",
    )
    p.add_argument("--one", help=argparse.SUPPRESS)  # run a single variant in this process
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        warm = args.warmup * (4 if "compile" in args.one else 1)
        result = run_variant(args.one, args.data, Path(args.workdir), args.steps, warm)
        if os.environ.get("RANK", "0") == "0":
            print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as work:
        rows = []
        # the tokenizer, trained here once (from the first variant's config) for every process to load
        _data(args.data, Path(work), "rnn" if args.variants[0].startswith("rnn") else "transformer")
        for v in args.variants:
            launch = (
                [sys.executable]
                if v != "ddp2"
                else [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
            )
            out = subprocess.run(
                [
                    *launch,
                    __file__,
                    "--one",
                    v,
                    "--workdir",
                    work,
                    "--steps",
                    str(args.steps),
                    "--warmup",
                    str(args.warmup),
                    "--data",
                    args.data,
                ],
                capture_output=True,
                text=True,
            )
            if out.returncode:
                print(f"{v}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(
                f"{v:<13} {r['tgt_tok_s']:7.0f} tgt tok/s  padding {r['padding']:.1%}  peak RSS {r['peak_rss_mib']:.0f} MiB  "
                f"warm-up {r['warmup_s']:.0f} s  {r['tflops']:.3f} TFLOP/s = MFU {r['mfu']:.1%} of {r['peak_tflops']:.2f}",
                flush=True,
            )
    bases = {r["variant"]: r for r in rows if r["variant"] in ("baseline", "rnn_baseline")}
    print(f"\n{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print("| variant | tgt tok/s | vs baseline | padding | peak RSS MiB | warm-up s | TFLOP/s | MFU (of matmul peak) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        base = bases.get("rnn_baseline" if r["variant"].startswith("rnn") else "baseline")
        rel = f"{r['tgt_tok_s'] / base['tgt_tok_s']:.2f}x" if base else "-"
        print(
            f"| {r['variant']} | {r['tgt_tok_s']:.0f} | {rel} | {r['padding']:.1%} | {r['peak_rss_mib']:.0f} | "
            f"{r['warmup_s']:.0f} | {r['tflops']:.3f} | {r['mfu']:.1%} of {r['peak_tflops']:.2f} |"
        )


if __name__ == "__main__":
    main()

"""How fast does a recipe start learning? Training loss over the first updates
of several variants of one config, on the same data, with the same optimizer.

    python benchmarks/early_loss.py configs/multi30k_en_de_rnn_luong.yaml --steps 150 \\
        --variant b2048 train.batch_tokens=2048 --variant b1024 train.batch_tokens=1024

Each variant is a name and dotted overrides applied on top of the config (and of
``--common``). Every variant starts from the same seed, trains ``--steps``
updates with Adam at a constant learning rate (the config's ``train.lr``; no
warm-up, so the variants differ only in what the overrides change), and prints
the mean training NLL per nat and the wall-clock seconds every ``--every``
updates. Learning per *second* is what decides a time-budgeted run, so compare
rows at equal seconds as well as at equal updates.

This is the probe that chose the RNN config's 1,024-token batches (BENCHMARKS.md).
It is not a test: the numbers depend on the machine and are noisy at the start.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from attnkit.config import load_config
from attnkit.training.schedule import build_optimizer
from attnkit.training.trainer import Trainer


def run_variant(config: str, overrides: list[str], steps: int, every: int, name: str) -> list[tuple[int, float, float]]:
    with tempfile.TemporaryDirectory(prefix=f"early_loss_{name}_") as work:
        cfg = load_config(config, [f"out_dir={Path(work) / 'run'}", *overrides])
        trainer = Trainer(cfg, quiet=True)
        trainer._prepare()  # data, tokenizer and model exactly as `attnkit train` builds them
        return _train(trainer, steps, every, name)


def _train(trainer: Trainer, steps: int, every: int, name: str) -> list[tuple[int, float, float]]:
    model, tc = trainer.model, trainer.cfg.train
    optimizer = build_optimizer(tc, model.parameters())  # the run's optimizer, without its schedule
    model.train()
    batches = trainer.batcher.epoch(0)
    rows, window = [], []
    start = time.perf_counter()
    for i in range(steps):
        batch = trainer.batcher.collate(batches[i % len(batches)]).to(trainer.device)
        sums = trainer._loss(model, batch)
        (sums.loss / sums.tokens).backward()
        if tc.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.clip_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        window.append(float(sums.nll) / float(sums.tokens))
        if (i + 1) % every == 0:
            rows.append((i + 1, sum(window) / len(window), time.perf_counter() - start))
            print(f"{name:>12}  update {i + 1:5d}  train nll {rows[-1][1]:.3f}  {rows[-1][2]:6.1f} s", flush=True)
            window = []
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--every", type=int, default=25)
    p.add_argument("--common", nargs="*", default=[], help="overrides for every variant")
    p.add_argument("--variant", nargs="+", action="append", metavar=("NAME", "KEY=VALUE"), required=True)
    args = p.parse_args()
    results = {v[0]: run_variant(args.config, args.common + v[1:], args.steps, args.every, v[0]) for v in args.variant}
    print("\n| variant | " + " | ".join(f"update {s}" for s, _, _ in next(iter(results.values()))) + " |")
    print("|---|" + "---|" * len(next(iter(results.values()))))
    for name, rows in results.items():
        print(f"| {name} | " + " | ".join(f"{nll:.2f} ({sec:.0f} s)" for _, nll, sec in rows) + " |")


if __name__ == "__main__":
    main()

"""How many heads does the installed translator need? Michel et al. 2019's pruning curve.

    python benchmarks/head_pruning.py [--data DIR] [--importance-sentences 500] [--step 4]

``multi30k-en-de`` (4 + 4 layers, 4 heads each: 16 encoder self-attention, 16 decoder
self-attention and 16 cross-attention heads). Each head's importance (Michel et al. 2019, eq.
2: the mean over sentences of |d loss / d xi_h|, teacher-forced on the references) is taken on
the first N training sentences and normalised by its layer's l2 norm, as Michel et al. do.
Heads are then removed (zero ablation: ``attention.intervene``) in order of increasing
importance, ``--step`` at a time, and the validation set translated (beam 5) with the rest:
BLEU (sacrebleu, 13a, cased) against the number of heads removed, beside the same number
removed in random orders (three seeds), and each attention kind pruned alone (Voita et al.
2019 and Michel et al. 2019 plot them apart). Reported: the most heads removable for at most
0.5 BLEU on val, and which heads stay.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import time
from pathlib import Path

import numpy as np
import sacrebleu
import torch

import attnkit
from attnkit.attention.intervene import gating
from attnkit.heads.ablation import attention_modules, head_importance, removing
from machine import cpu_name

KINDS = ("encoder", "decoder", "cross")


def lines(folder: Path, name: str) -> list[str]:
    with gzip.open(folder / "raw" / f"{name}.gz", "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def bleu(model, modules, removed: list[tuple[str, int, int]], src: list[str], refs: list[str]) -> float:
    with gating(removing(modules, removed)):
        out = model.translate(src, beam=5)
    return sacrebleu.corpus_bleu(out, [refs]).score


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=os.environ.get("ATTNKIT_MULTI30K"), help="Multi30k folder")
    p.add_argument("--importance-sentences", type=int, default=500)
    p.add_argument("--step", type=int, default=4)
    args = p.parse_args()
    if args.data is None:
        raise SystemExit("give --data DIR (Multi30k, with raw/train.en.gz ...) or set ATTNKIT_MULTI30K")
    torch.set_num_threads(2)
    model = attnkit.load("multi30k-en-de")
    src, refs = lines(args.data, "val.en"), lines(args.data, "val.de")
    train_src, train_refs = lines(args.data, "train.en"), lines(args.data, "train.de")
    n = args.importance_sentences
    prepared = model.prepare(train_src[:n], targets=train_refs[:n])
    modules = attention_modules(model, prepared[0])
    t0 = time.perf_counter()
    importance = head_importance(model, prepared)
    print(f"# {cpu_name()}; importance on {n} training sentences in {time.perf_counter() - t0:.1f} s")
    scores = []
    for kind in KINDS:
        imp = importance[kind] / np.linalg.norm(importance[kind], axis=1, keepdims=True).clip(1e-12)
        print(f"# {kind} importance (layer-normalised), layers x heads:\n" + np.array2string(imp, precision=2))
        scores += [
            (float(imp[layer, head]), (kind, layer, head))
            for layer in range(imp.shape[0])
            for head in range(imp.shape[1])
        ]
    order = [h for _, h in sorted(scores)]
    total = len(order)
    t0 = time.perf_counter()
    base = bleu(model, modules, [], src, refs)
    print(f"# val BLEU with every head {base:.2f} ({time.perf_counter() - t0:.1f} s a pass)")
    print("removed | by importance | random (mean of 3) | " + " | ".join(f"{k} alone, by importance" for k in KINDS))
    rngs = [random.Random(seed) for seed in range(3)]
    shuffled = [rng.sample(order, total) for rng in rngs]
    best = 0
    for k in range(0, total + 1, args.step):
        by_importance = bleu(model, modules, order[:k], src, refs)
        rand = np.mean([bleu(model, modules, s[:k], src, refs) for s in shuffled])
        alone = []
        for kind in KINDS:
            own = [h for h in order if h[0] == kind]
            alone.append(f"{bleu(model, modules, own[:k], src, refs):.2f}" if k <= len(own) else "")
        print(f"{k} | {by_importance:.2f} | {rand:.2f} | " + " | ".join(alone), flush=True)
        if base - by_importance <= 0.5:
            best = k
    kept = sorted(order[best:])
    print(f"# up to {best} of {total} heads removed for at most 0.5 BLEU on val; the {total - best} that stay: "
          + ", ".join(f"{kind} {layer}.{head}" for kind, layer, head in kept))  # fmt: skip


if __name__ == "__main__":
    main()

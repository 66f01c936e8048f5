"""Heads whose roles are known: Olsson et al. 2022's induction result on a decoder trained to copy,
and positional heads on one trained to read a fixed offset, each found by the atlas and proven by
ablation against 20 random sets of as many heads.

    python benchmarks/head_ground_truth.py

The models are the tests' (``tests/induction_model.py``, a tiny Llama of 2 layers x 8 heads,
hidden 64): one trained 800 steps on random words with a segment repeated, one 300 steps on words
each a fixed permutation of the word four back. Each is scored by ``attnkit.heads`` on 8 inputs of
its task; the loss (nats per word; chance is ln 32 = 3.47) is taken on 64 held-out sequences
with the flagged heads zero-ablated together, and with 20 random sets of as many heads drawn
from the rest.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import attnkit  # noqa: E402
import induction_model as im  # noqa: E402  (the tests' models)
from attnkit.attention.intervene import gating  # noqa: E402
from attnkit.heads.ablation import attention_modules, removing  # noqa: E402
from attnkit.heads.atlas import head_atlas  # noqa: E402
from machine import cpu_name  # noqa: E402

HEADS = [(layer, head) for layer in range(2) for head in range(8)]


def losses(model, sequence, heads, first: int) -> tuple[float, float]:
    """(loss on the words before ``first``, loss from ``first`` on) with ``heads`` removed."""
    modules = attention_modules(model, model.prepare(["a b"], max_new_tokens=0)[0])
    draws = random.Random(1)
    tok = model.hf.tokenizer
    ids = torch.tensor([tok(" ".join(sequence(draws)))["input_ids"] for _ in range(64)])
    with torch.no_grad(), gating(removing(modules, [("decoder", li, h) for li, h in heads])):
        logits = model.hf.model(ids).logits[:, :-1]
    each = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    return float(each[:, 1:first].mean()), float(each[:, first:].mean())


def study(name: str, model, sequence, role: str, first: int) -> None:
    rng = random.Random(7)
    atlas = head_atlas(model.attention([" ".join(sequence(rng)) for _ in range(8)], max_new_tokens=0), "decoder")
    found = sorted({(li, h) for n, li, h, _ in atlas.flagged() if n == role})
    roles = {}
    for n, li, h, s in atlas.flagged():
        roles.setdefault((li, h), []).append(f"{n} {s:.2f}")
    print(
        f"## {name}: the atlas flags " + "; ".join(f"{li}.{h} " + ", ".join(r) for (li, h), r in sorted(roles.items()))
    )
    base = losses(model, sequence, [], first)
    gone = losses(model, sequence, found, first)
    rest = [x for x in HEADS if x not in found]
    draws = random.Random(0)
    rand = sorted(losses(model, sequence, draws.sample(rest, min(len(rest), len(found))), first)[1] for _ in range(20))
    print(f"every head: {base[0]:.2f} / {base[1]:.2f}; the {len(found)} {role} heads removed: {gone[0]:.2f} / "
          f"{gone[1]:.2f}; 20 random sets of {len(found)}: {rand[0]:.2f} to {rand[-1]:.2f} (median {rand[10]:.2f})")  # fmt: skip


def main() -> None:
    torch.set_num_threads(2)
    print(f"# {cpu_name()}")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        copier = attnkit.load(str(im.train(Path(tmp) / "copy")))
        print(f"# the copying model trained in {time.perf_counter() - t0:.0f} s; losses: first half / repeat")
        study("induction", copier, lambda r: im.repeated(r), "induction", im.SEGMENT + 1)
        t0 = time.perf_counter()
        reader = attnkit.load(str(im.train(Path(tmp) / "offset", sequence=im.offset_sequence, steps=300)))
        print(f"# the offset model trained in {time.perf_counter() - t0:.0f} s; losses: first {im.PERIOD} / the rest")
        study("positional", reader, im.offset_sequence, "positional", im.PERIOD + 1)


if __name__ == "__main__":
    main()

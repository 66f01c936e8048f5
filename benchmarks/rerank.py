"""Reranking a beam's outputs with a reverse model on Multi30k En->De (cased raw text).

Beam search ranks each output y of a source x by log P(y | x) / |y| alone. A reverse model
(German -> English) says how well y explains x: log P(x | y) / |x|. Reranking the beam by

    log P(y | x) / |y|  +  weight * log P(x | y) / |x|

prefers outputs that leave none of the source out and add nothing to it (the channel model of
Yee et al. 2019, "Simple and Effective Noisy Channel Modeling for Neural Machine Translation",
without their language model). For each beam size one search returns the whole beam and the
reverse model scores every output once; the val set alone chooses beam and weight (the highest
val BLEU; kept only if a paired bootstrap, sacreBLEU, 1,000 resamples, gives p < 0.05 against
beam 5 without reranking). test_2016_flickr is decoded afterwards with ``attnkit.inference.translate``
itself (``SearchOptions(rerank=weight)``), for the record.

    python benchmarks/rerank.py multi30k-en-de --reverse DE_EN_MODEL
    python benchmarks/rerank.py multi30k-en-de --ensemble multi30k-en-de-rnn --reverse DE_EN_MODEL
    python benchmarks/rerank.py multi30k-en-de --reverse DE_EN_MODEL --beams 5 --limit 100   # quick
    python benchmarks/rerank.py multi30k-en-de --reverse DE_EN_A DE_EN_B   # two reverse models as an ensemble
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sacrebleu.metrics import BLEU

from attnkit.data import multi30k, read_lines
from attnkit.inference.translate import Reverse, translate
from attnkit.loading.model_dir import load_translators
from attnkit.loading.packaged import resolve_model
from attnkit.search import SearchOptions
from machine import cpu_name
from mbr import paired_p, print_test

BEAMS = (5, 8, 12)
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0)


def candidates(decoder: Any, tok, sources: list[str], beam: int) -> tuple[list[list[str]], list[np.ndarray], float]:
    """Each source's whole beam (most probable first), the beam's scores, and the seconds it took."""
    start = time.perf_counter()
    found = translate(decoder, tok, sources, SearchOptions(beam=beam, n_best=beam))
    texts = [[text for text, _ in t.nbest] or [t.output] for t in found]
    scores = [np.array([s for _, s in t.nbest] or [t.score]) for t in found]
    return texts, scores, time.perf_counter() - start


def reverse_scores(reverse: Reverse, sources: list[str], lists: list[list[str]]) -> tuple[list[np.ndarray], float]:
    """log P(source | output) / (|source| + 1) for every output in ``lists``, and the seconds it took."""
    start = time.perf_counter()
    scores = reverse.per_source_token(sources, lists)
    return scores, time.perf_counter() - start


def picks(lists: list[list[str]], forward: list[np.ndarray], backward: list[np.ndarray], weight: float) -> list[str]:
    """Each list's best output by forward + weight * reverse score (ties: the beam's order)."""
    return [texts[int(np.argmax(f + weight * b))] for texts, f, b in zip(lists, forward, backward)]


def run(model: str, ensemble: list[str], reverse_names: list[str], data: str, beams: list[int], limit: int) -> None:
    paths = [resolve_model(Path(m) if Path(m).is_dir() else m) for m in [model, *ensemble]]
    models, tok, _ = load_translators(paths)
    decoder: Any = models if ensemble else models[0]
    reverse = Reverse.load(reverse_names)  # several: one vocabulary, scored as an ensemble
    reverse_name = " + ".join(reverse_names)
    name = " + ".join([model, *ensemble])
    loc = lambda split, lang, v="raw": multi30k.locate(split, lang, root=data, variant=v)
    val_src, val_ref = read_lines(loc("val", "en"))[:limit], read_lines(loc("val", "de"))[:limit]

    print(f"\n{name}, reverse model {reverse_name}: val BLEU (cased) by beam and weight")
    print("| beam | " + " | ".join(f"{w:g}" for w in WEIGHTS) + " | search s | reverse s |")
    print("|---" * (len(WEIGHTS) + 3) + "|")
    val: dict[tuple[int, float], list[str]] = {}
    for beam in beams:
        lists, forward, searched = candidates(decoder, tok, val_src, beam)
        backward, scored = reverse_scores(reverse, val_src, lists)
        row = []
        for weight in WEIGHTS:
            val[beam, weight] = picks(lists, forward, backward, weight)
            row.append(BLEU().corpus_score(val[beam, weight], [val_ref]).score)
        print(f"| {beam} | " + " | ".join(f"{b:.2f}" for b in row) + f" | {searched:.1f} | {scored:.1f} |", flush=True)
    if (5, 0.0) not in val:
        val[5, 0.0] = [t.output for t in translate(decoder, tok, val_src, SearchOptions(beam=5))]
    val_bleu = {key: BLEU().corpus_score(hyps, [val_ref]).score for key, hyps in val.items()}
    chosen = max(val, key=val_bleu.__getitem__)
    label = lambda k: f"beam {k[0]}" + (f", reverse weight {k[1]:g}" if k[1] else "")
    if chosen[1]:  # the library's reranking gives the same outputs as the grid's recombination
        options = SearchOptions(beam=chosen[0], rerank=chosen[1])
        direct = [t.output for t in translate(decoder, tok, val_src, options, reverse=reverse)]
        same = sum(a == b for a, b in zip(direct, val[chosen]))
        print(f"translate(rerank={chosen[1]:g}) on val: {same}/{len(direct)} outputs as the grid's")
    p = paired_p(val[5, 0.0], val[chosen], val_ref) if chosen != (5, 0.0) else 1.0
    if chosen == (5, 0.0):
        print("best on val: beam 5 without reranking")
    else:
        verdict = "beyond val's noise" if p < 0.05 else "within val's noise"
        print(f"best on val: {label(chosen)}, paired bootstrap against beam 5: p = {p:.3f} ({verdict})")

    rows = [(label(k), val_bleu[k], SearchOptions(beam=k[0], rerank=k[1])) for k in dict.fromkeys([(5, 0.0), chosen])]
    print_test(name, decoder, tok, data, limit, rows, reverse)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="an installed model's name or a model directory (En->De, raw text)")
    parser.add_argument("--ensemble", nargs="+", default=[], help="more models decoded together with it")
    parser.add_argument(
        "--reverse",
        nargs="+",
        required=True,
        help="a De->En model (name or directory) that reranks; several: an ensemble",
    )
    parser.add_argument("--beams", nargs="+", type=int, default=list(BEAMS))
    parser.add_argument("--limit", type=int, default=10_000, help="first N sentences of each set")
    parser.add_argument("--data", default=os.environ.get("ATTNKIT_MULTI30K"), help="Multi30k folder")
    args = parser.parse_args()
    print(f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    run(args.model, args.ensemble, args.reverse, args.data, args.beams, args.limit)


if __name__ == "__main__":
    main()

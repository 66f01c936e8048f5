"""Reranking a beam's outputs with other models on Multi30k En->De (cased raw text).

Beam search ranks each output y of a source x by log P(y | x) / |y| alone. A reverse model
(German -> English) says how well y explains x: log P(x | y) / |x| (the channel model of Yee et
al. 2019, "Simple and Effective Noisy Channel Modeling for Neural Machine Translation", without
their language model); a right-to-left model (English -> German, trained to write from the end,
Sennrich et al. 2016) how probable y is read in the other order: log P_r2l(y | x) / |y|.
Reranking the beam by

    log P(y | x) / |y|  +  w_reverse * log P(x | y) / |x|  +  w_r2l * log P_r2l(y | x) / |y|

prefers outputs that leave none of the source out and add nothing to it, and whose ends are as
good as their starts. For each beam size one search returns the whole beam and each reranking
model scores every output once; the val set alone chooses beam and weights (the highest val
BLEU; kept only if a paired bootstrap, sacreBLEU, 1,000 resamples, gives p < 0.05 against beam 5
without reranking). test_2016_flickr is decoded afterwards with ``attnkit.inference.translate``
itself (``SearchOptions(rerank=..., rerank_r2l=...)``), for the record.

    python benchmarks/rerank.py multi30k-en-de --reverse DE_EN_MODEL
    python benchmarks/rerank.py multi30k-en-de --ensemble multi30k-en-de-rnn --reverse DE_EN_MODEL
    python benchmarks/rerank.py multi30k-en-de --reverse DE_EN_MODEL --beams 5 --limit 100   # quick
    python benchmarks/rerank.py multi30k-en-de --reverse DE_EN_A DE_EN_B   # two reverse models as an ensemble
    python benchmarks/rerank.py multi30k-en-de --reverse DE_EN_MODEL --r2l R2L_MODEL   # both kinds
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
from attnkit.inference.translate import Rerankers, Reverse, RightToLeft, translate
from attnkit.loading.model_dir import load_translators
from attnkit.loading.packaged import resolve_model
from attnkit.search import SearchOptions
from machine import cpu_name
from mbr import paired_p, print_test

BEAMS = (5, 8, 12)
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0)
R2L_WEIGHTS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0)


def candidates(decoder: Any, tok, sources: list[str], beam: int) -> tuple[list[list[str]], list[np.ndarray], float]:
    """Each source's whole beam (most probable first), the beam's scores, and the seconds it took."""
    start = time.perf_counter()
    found = translate(decoder, tok, sources, SearchOptions(beam=beam, n_best=beam))
    texts = [[text for text, _ in t.nbest] or [t.output] for t in found]
    scores = [np.array([s for _, s in t.nbest] or [t.score]) for t in found]
    return texts, scores, time.perf_counter() - start


def picks(lists: list[list[str]], forward: list[np.ndarray], terms: list[tuple[float, list[np.ndarray]]]) -> list[str]:
    """Each list's best output by forward + the sum of weight * score over ``terms`` (ties: the
    beam's order)."""
    out = []
    for i, texts in enumerate(lists):
        total = forward[i] + sum((w * scores[i] for w, scores in terms), np.zeros(len(texts)))
        out.append(texts[int(np.argmax(total))])
    return out


def run(
    model: str,
    ensemble: list[str],
    reverse_names: list[str],
    r2l_names: list[str],
    data: str,
    beams: list[int],
    limit: int,
) -> None:
    paths = [resolve_model(Path(m) if Path(m).is_dir() else m) for m in [model, *ensemble]]
    models, tok, _ = load_translators(paths)
    decoder: Any = models if ensemble else models[0]
    reverse = Reverse.load(reverse_names) if reverse_names else None  # several: one vocabulary, an ensemble
    r2l = RightToLeft.load(r2l_names) if r2l_names else None
    name = " + ".join([model, *ensemble])
    loc = lambda split, lang, v="raw": multi30k.locate(split, lang, root=data, variant=v)
    val_src, val_ref = read_lines(loc("val", "en"))[:limit], read_lines(loc("val", "de"))[:limit]
    reverse_weights = WEIGHTS if reverse else (0.0,)
    r2l_weights = R2L_WEIGHTS if r2l else (0.0,)

    models_said = [f"reverse model {' + '.join(reverse_names)}"] * bool(reverse)
    models_said += [f"right-to-left model {' + '.join(r2l_names)}"] * bool(r2l)
    print(f"\n{name}, {' and '.join(models_said)}: val BLEU (cased) by beam and weights")
    val: dict[tuple[int, float, float], list[str]] = {}
    for beam in beams:
        lists, forward, searched = candidates(decoder, tok, val_src, beam)
        start = time.perf_counter()
        backward = reverse.per_token(val_src, lists) if reverse else []
        other_way = r2l.per_token(val_src, lists) if r2l else []
        scored = time.perf_counter() - start
        print(f"\nbeam {beam} (search {searched:.1f} s, reranking models {scored:.1f} s)")
        print("| right-to-left weight \\ reverse weight | " + " | ".join(f"{w:g}" for w in reverse_weights) + " |")
        print("|---" * (len(reverse_weights) + 1) + "|")
        for w_r2l in r2l_weights:
            row = []
            for w_rev in reverse_weights:
                terms = [(w_rev, backward)] * bool(reverse) + [(w_r2l, other_way)] * bool(r2l)
                val[beam, w_rev, w_r2l] = picks(lists, forward, terms)
                row.append(BLEU().corpus_score(val[beam, w_rev, w_r2l], [val_ref]).score)
            print(f"| {w_r2l:g} | " + " | ".join(f"{b:.2f}" for b in row) + " |", flush=True)
    if (5, 0.0, 0.0) not in val:
        val[5, 0.0, 0.0] = [t.output for t in translate(decoder, tok, val_src, SearchOptions(beam=5))]
    val_bleu = {key: BLEU().corpus_score(hyps, [val_ref]).score for key, hyps in val.items()}
    chosen = max(val, key=val_bleu.__getitem__)
    options = lambda k: SearchOptions(beam=k[0], rerank=k[1], rerank_r2l=k[2])
    label = lambda k: (
        f"beam {k[0]}"
        + (f", reverse weight {k[1]:g}" if k[1] else "")
        + (f", right-to-left weight {k[2]:g}" if k[2] else "")
    )
    if options(chosen).reranks:  # the library's reranking gives the same outputs as the grid's recombination
        direct = [
            t.output for t in translate(decoder, tok, val_src, options(chosen), rerankers=Rerankers(reverse, r2l))
        ]
        same = sum(a == b for a, b in zip(direct, val[chosen]))
        print(f"\ntranslate({label(chosen)}) on val: {same}/{len(direct)} outputs as the grid's")
    baseline = (5, 0.0, 0.0)
    if chosen == baseline:
        print("best on val: beam 5 without reranking")
    else:
        p = paired_p(val[baseline], val[chosen], val_ref)
        verdict = "beyond val's noise" if p < 0.05 else "within val's noise"
        print(f"best on val: {label(chosen)}, paired bootstrap against beam 5: p = {p:.3f} ({verdict})")
    # the best of each model alone, for the record, when both were given
    alone = [max((k for k in val if k[2] == 0 and k[1]), key=val_bleu.__getitem__, default=None)]
    alone += [max((k for k in val if k[1] == 0 and k[2]), key=val_bleu.__getitem__, default=None)]
    for k in alone:
        if k is not None and k != chosen and reverse and r2l:
            p = paired_p(val[k], val[chosen], val_ref)
            print(f"best with one model: {label(k)}, val {val_bleu[k]:.2f}; the chosen one against it: p = {p:.3f}")

    keys = dict.fromkeys([baseline, *[k for k in alone if k is not None and reverse and r2l], chosen])
    rows = [(label(k), val_bleu[k], options(k)) for k in keys]
    print_test(name, decoder, tok, data, limit, rows, reverse, r2l)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="an installed model's name or a model directory (En->De, raw text)")
    parser.add_argument("--ensemble", nargs="+", default=[], help="more models decoded together with it")
    parser.add_argument(
        "--reverse", nargs="+", default=[], help="a De->En model (name or directory) that reranks; several: an ensemble"
    )
    parser.add_argument(
        "--r2l", nargs="+", default=[], help="a right-to-left En->De model that reranks; several: an ensemble"
    )
    parser.add_argument("--beams", nargs="+", type=int, default=list(BEAMS))
    parser.add_argument("--limit", type=int, default=10_000, help="first N sentences of each set")
    parser.add_argument("--data", default=os.environ.get("ATTNKIT_MULTI30K"), help="Multi30k folder")
    args = parser.parse_args()
    print(f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    if not args.reverse and not args.r2l:
        parser.error("give --reverse, --r2l or both")
    run(args.model, args.ensemble, args.reverse, args.r2l, args.data, args.beams, args.limit)


if __name__ == "__main__":
    main()

"""Minimum Bayes risk decoding against beam search on Multi30k En->De (cased raw text).

For each beam size in the grid, one search returns the whole beam; its most probable output is
beam search's answer, its consensus (highest mean sentence BLEU against the others,
``attnkit.search.mbr_order``) MBR's. The val set alone chooses the setting: the (beam, MBR or
not) with the highest val BLEU, kept only if a paired bootstrap (sacreBLEU, 1,000 resamples) gives
p < 0.05 against beam 5. test_2016_flickr is decoded afterwards, with beam 5 and the chosen
setting, for the record.

    python benchmarks/mbr.py multi30k-en-de multi30k-en-de-rnn       # installed models, by name
    python benchmarks/mbr.py multi30k-en-de --ensemble multi30k-en-de-rnn
    python benchmarks/mbr.py multi30k-en-de --beams 8 16 --limit 100  # quick
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import torch
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from attnkit.data import multi30k, read_lines
from attnkit.evaluation import bleu, evaluate, moses_tokenize_lc
from attnkit.inference.translate import Rerankers, translate
from attnkit.loading.model_dir import load_translators
from attnkit.loading.packaged import resolve_model
from attnkit.search import SearchOptions, mbr_order
from machine import cpu_name

BEAMS = (5, 8, 12, 16, 24, 32)


def nbest(decoder: Any, tok, sources: list[str], beam: int) -> tuple[list[list[str]], float]:
    """Each source's whole beam of outputs, most probable first, and the seconds it took."""
    start = time.perf_counter()
    found = translate(decoder, tok, sources, SearchOptions(beam=beam, n_best=beam))
    seconds = time.perf_counter() - start
    return [[text for text, _ in t.nbest] or [t.output] for t in found], seconds


def consensus(lists: list[list[str]]) -> tuple[list[str], float]:
    """MBR's pick from each list, and the seconds the selection took."""
    start = time.perf_counter()
    picks = [texts[mbr_order(texts)[0][0]] for texts in lists]
    return picks, time.perf_counter() - start


def paired_p(baseline: list[str], system: list[str], refs: list[str]) -> float:
    """Paired bootstrap p-value of ``system``'s BLEU difference from ``baseline``'s."""
    test = PairedTest(
        [("baseline", baseline), ("system", system)], {"BLEU": BLEU()}, [refs], test_type="bs", n_samples=1000
    )
    _, results = test()
    return float(results["BLEU"][1].p_value)


def run(model: str, ensemble: list[str], data: str, beams: list[int], limit: int) -> None:
    paths = [resolve_model(Path(m) if Path(m).is_dir() else m) for m in [model, *ensemble]]
    models, tok, _ = load_translators(paths)
    decoder: Any = models if ensemble else models[0]
    name = " + ".join([model, *ensemble])
    loc = lambda split, lang, v="raw": multi30k.locate(split, lang, root=data, variant=v)
    val_src, val_ref = read_lines(loc("val", "en"))[:limit], read_lines(loc("val", "de"))[:limit]

    print(f"\n{name}: val BLEU (cased), one search per beam size")
    print("| beam | beam search | MBR | search s | MBR selection s |\n|---|---|---|---|---|")
    val: dict[tuple[int, bool], list[str]] = {}
    for beam in beams:
        lists, searched = nbest(decoder, tok, val_src, beam)
        val[beam, False] = [texts[0] for texts in lists]
        val[beam, True], selected = consensus(lists)
        b, m = (BLEU().corpus_score(val[beam, x], [val_ref]).score for x in (False, True))
        print(f"| {beam} | {b:.2f} | {m:.2f} | {searched:.1f} | {selected:.1f} |", flush=True)
    if (5, False) not in val:  # the baseline
        val[5, False] = [t.output for t in translate(decoder, tok, val_src, SearchOptions(beam=5))]
    val_bleu = {key: BLEU().corpus_score(hyps, [val_ref]).score for key, hyps in val.items()}
    chosen = max(val, key=val_bleu.__getitem__)
    p = paired_p(val[5, False], val[chosen], val_ref) if chosen != (5, False) else 1.0
    label = lambda k: f"beam {k[0]}" + (" + MBR" if k[1] else "")
    if chosen == (5, False):
        print("best on val: beam 5 itself")
    else:
        verdict = "beyond val's noise" if p < 0.05 else "within val's noise: beam 5 stays"
        print(f"best on val: {label(chosen)}, paired bootstrap against beam 5: p = {p:.3f} ({verdict})")

    rows = [(label(k), val_bleu[k], SearchOptions(beam=k[0], mbr=k[1])) for k in dict.fromkeys([(5, False), chosen])]
    print_test(name, decoder, tok, data, limit, rows)


def print_test(
    name: str, decoder: Any, tok, data: str, limit: int, rows: list, reverse: Any = None, r2l: Any = None
) -> None:
    """test_2016_flickr decoded with each row's (label, val BLEU, SearchOptions): a table of val,
    test tok-lc, test cased, chrF and seconds. ``reverse``, ``r2l``: the models options.rerank and
    options.rerank_r2l weigh."""
    loc = lambda lang, v="raw": multi30k.locate("test_2016_flickr", lang, root=data, variant=v)
    test_src, ref_raw, ref_tok = (read_lines(path)[:limit] for path in (loc("en"), loc("de"), loc("de", "tok")))
    print(f"\n{name}: test_2016_flickr, computed after the choice")
    print("| decoding | val cased | test tok-lc | test cased | chrF | seconds |\n|---|---|---|---|---|---|")
    for label, val, options in rows:
        reranking = dict(rerankers=Rerankers(reverse if options.rerank else None, r2l if options.rerank_r2l else None))
        test = evaluate(decoder, tok, test_src, ref_raw, options, **reranking)
        tok_lc = bleu(moses_tokenize_lc(test.hypotheses, "de"), ref_tok, tokenize="none", lowercase=True).score
        print(
            f"| {label} | {val:.2f} | {tok_lc:.2f} | {test.bleu.score:.2f} | {test.chrf.score:.2f} "
            f"| {test.seconds:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="installed models' names or model directories (raw-text models)")
    parser.add_argument("--ensemble", nargs="+", default=[], help="more models decoded together with each model")
    parser.add_argument("--beams", nargs="+", type=int, default=list(BEAMS))
    parser.add_argument("--limit", type=int, default=10_000, help="first N sentences of each set")
    parser.add_argument("--data", default=os.environ.get("ATTNKIT_MULTI30K"), help="Multi30k folder")
    args = parser.parse_args()
    print(f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    for model in args.models:
        run(model, args.ensemble, args.data, args.beams, args.limit)


if __name__ == "__main__":
    main()

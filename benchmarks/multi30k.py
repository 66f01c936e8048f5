"""The Multi30k En->De result: train the example configs, evaluate on
test_2016_flickr, measure decoding speed, and print the table BENCHMARKS.md uses.

    python benchmarks/multi30k.py                                   # both configs, 90-minute budget each
    python benchmarks/multi30k.py --configs configs/multi30k_en_de_transformer_tiny.yaml --max-minutes 90
    python benchmarks/multi30k.py --model-dir runs/bench/multi30k_en_de_transformer_tiny   # evaluate only
    python benchmarks/multi30k.py --model-dir multi30k-en-de        # an installed model, by name
    python benchmarks/multi30k.py --model-dir DIR --alpha dev       # length penalty chosen on val, then test
    python benchmarks/multi30k.py --model-dir DIR --length-penalty gnmt --alpha 0.6   # GNMT's penalty
    python benchmarks/multi30k.py --model-dir multi30k-en-de --ensemble multi30k-en-de-rnn   # decoded together
    python benchmarks/multi30k.py --smoke                           # minutes, tiny numbers: checks the script

Conventions (see ../shared/data/multi30k/README.md), for a model trained on the tok files
(data.multi30k_variant=tok, the published setup):
* tok: outputs against the tok references, sacreBLEU tokenize=none: comparable to the published 41.02;
* detok: outputs Moses-detokenized against the raw references, sacreBLEU 13a.
  A model trained on lowercased text cannot restore case, so this is reported
  case-insensitive (the signature says case:lc).
and for a model trained on the raw files (data.multi30k_variant=raw), which reads raw English:
* detok: its outputs as they are against the raw references, sacreBLEU 13a, cased;
* tok: its outputs lowercased, punctuation-normalised and Moses-tokenized as the tok files were
  (moses_tokenize_lc reproduces the tok references exactly), tokenize=none.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import torch

from attnkit.config import load_config
from attnkit.data import collate, multi30k, read_lines
from attnkit.evaluation import bleu, evaluate, moses_detokenize, moses_tokenize_lc
from attnkit.loading.model_dir import load_translators
from attnkit.loading.packaged import resolve_model
from attnkit.search import PENALTIES, SearchOptions, beam_search
from attnkit.training.trainer import train

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [ROOT / "configs/multi30k_en_de_transformer_tiny.yaml", ROOT / "configs/multi30k_en_de_rnn_luong.yaml"]


def train_throughput(model_dir: Path) -> tuple[float, float, int]:
    """(training seconds, mean target tokens/s, steps) from the run's log (NaN for an installed model)."""
    if not (model_dir / "log.jsonl").is_file():
        return float("nan"), float("nan"), 0
    records = [json.loads(line) for line in (model_dir / "log.jsonl").read_text().splitlines()]
    speeds = [r["tgt_tokens_per_s"] for r in records if r["kind"] == "train"][1:]  # skip the warm-up window
    end = [r for r in records if r["kind"] == "end"][-1]
    return end["train_seconds"], sum(speeds) / max(1, len(speeds)), end["step"]


def cache_speedup(model, tok, sources: list[str], beam: int = 5) -> tuple[float, float]:
    """Seconds for beam search over ``sources`` with the key/value cache and recomputing the prefix."""
    ids = tok.encode_src(sources)
    batch = collate(ids, None, list(range(len(ids))))
    times = []
    for use_cache in (True, False):
        start = time.perf_counter()
        beam_search(model, batch.src, batch.src_mask, SearchOptions(beam=beam), use_cache=use_cache)
        times.append(time.perf_counter() - start)
    return times[0], times[1]


ALPHA_GRIDS = {  # --alpha dev tries these on val
    "fairseq": (0.0, 0.4, 0.8, 1.0, 1.2, 1.6, 2.0),
    "gnmt": (0.0, 0.6, 1.0, 1.4, 1.8, 2.2, 2.6, 3.0),
}


def alpha_option(text: str) -> float | str:
    """--alpha: a non-negative number, or 'dev' (choose on val)."""
    if text == "dev":
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0 or 'dev', got {text!r}")
    return value


def dev_alpha(
    model, tok, data: str, limit: int, variant: str, penalty: str, langs: tuple[str, str] = ("en", "de")
) -> float:
    """The length penalty alpha with the best beam-5 BLEU on the val set (ties: the smaller alpha)."""
    src = read_lines(multi30k.locate("val", langs[0], root=data, variant=variant))[:limit]
    ref = read_lines(multi30k.locate("val", langs[1], root=data, variant=variant))[:limit]
    tokenize = "13a" if variant == "raw" else "none"
    grid = ALPHA_GRIDS[penalty]
    scores = {
        a: evaluate(model, tok, src, ref, SearchOptions(beam=5, alpha=a, penalty=penalty), tokenize=tokenize).bleu.score
        for a in grid
    }
    print(f"val BLEU by {penalty} alpha: " + ", ".join(f"{a:g}: {b:.2f}" for a, b in scores.items()), flush=True)
    return max(grid, key=lambda a: (scores[a], -a))


def run(
    model_dir: Path,
    data: str,
    test_limit: int,
    checkpoint: str,
    alpha: float | str | None = None,
    penalty: str = "fairseq",
    ensemble: list[Path] | None = None,
) -> dict:
    """Evaluate one model (a directory, or an installed model's name); ``alpha="dev"`` chooses the
    length penalty on val first (``dev_alpha``), None takes the style's default (``attnkit.search.PENALTIES``).
    ``ensemble``: more models decoded together with it (BLEU and speed of the ensemble; the
    training figures and the cache speed-up stay the first model's)."""
    model_dir = resolve_model(model_dir)
    cfg = load_config(model_dir / "config.yaml")
    variant = cfg.data.multi30k_variant
    src_lang, tgt_lang = cfg.data.src_lang, cfg.data.tgt_lang  # the model's direction
    packaged = (model_dir / "manifest.json").is_file()
    checkpoint = "best" if packaged else checkpoint  # an installed model has one set of weights
    models, tok, _ = load_translators(
        [model_dir, *(ensemble or [])], checkpoint_name=checkpoint, average_last=0 if packaged else 10
    )
    model = models[0]
    decoder: Any = models if ensemble else model
    if alpha == "dev":
        alpha = dev_alpha(decoder, tok, data, test_limit, variant, penalty, (src_lang, tgt_lang))
    else:
        alpha = SearchOptions(penalty=penalty, alpha=alpha).length_alpha
    loc = lambda lang, v: multi30k.locate("test_2016_flickr", lang, root=data, variant=v)
    src = read_lines(loc(src_lang, variant))[:test_limit]
    ref_tok = read_lines(loc(tgt_lang, "tok"))[:test_limit]
    ref_raw = read_lines(loc(tgt_lang, "raw"))[:test_limit]

    raw = variant == "raw"
    ref, tokenize = (ref_raw, "13a") if raw else (ref_tok, "none")
    beam5 = evaluate(decoder, tok, src, ref, SearchOptions(beam=5, alpha=alpha, penalty=penalty), tokenize=tokenize)
    greedy = evaluate(decoder, tok, src, ref, SearchOptions(beam=1), tokenize=tokenize)
    if raw:
        tok_bleu = bleu(moses_tokenize_lc(beam5.hypotheses, tgt_lang), ref_tok, tokenize="none", lowercase=True)
        greedy_tok_bleu = bleu(moses_tokenize_lc(greedy.hypotheses, tgt_lang), ref_tok, tokenize="none", lowercase=True)
        detok_bleu = beam5.bleu
    else:
        tok_bleu, greedy_tok_bleu = beam5.bleu, greedy.bleu
        detok_bleu = bleu(moses_detokenize(beam5.hypotheses, tgt_lang), ref_raw, tokenize="13a", lowercase=True)
    cached, uncached = cache_speedup(model, tok, src[:200])
    seconds, tok_s, steps = train_throughput(model_dir)
    return {
        "config": cfg.model.arch,
        "model_dir": " + ".join(map(str, [model_dir, *(ensemble or [])])),
        "checkpoint": checkpoint,
        "penalty": penalty,
        "alpha": alpha,
        "steps": steps,
        "train_minutes": seconds / 60,
        "train_tok_s": tok_s,
        "variant": variant,
        "bleu_tok": tok_bleu.score,
        "bleu_tok_sig": tok_bleu.signature,
        "bleu_detok": detok_bleu.score,
        "bleu_detok_sig": detok_bleu.signature,
        "chrf": beam5.chrf.score,
        "chrf_sig": beam5.chrf.signature,
        "greedy_bleu_tok": greedy_tok_bleu.score,
        "beam5_s": beam5.seconds,
        "beam5_sent_s": beam5.sentences_per_s,
        "greedy_s": greedy.seconds,
        "greedy_sent_s": greedy.sentences_per_s,
        "cache_speedup": uncached / cached,
        "sentences": len(src),
    }


def machine() -> str:
    return f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def table(rows: list[dict]) -> str:
    """The rows as the markdown table BENCHMARKS.md uses, with the signatures under it."""
    lines = [
        f"{machine()}",
        "| model | trained on | ckpt | length penalty α | steps | train min | train tgt tok/s | BLEU tok-lc | BLEU detok | chrF | greedy BLEU tok-lc | beam 5 s (sent/s) | greedy s (sent/s) | KV-cache speed-up (beam 5) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model_dir']} | {r['variant']} | {r['checkpoint']} | {r['penalty']} {r['alpha']:g} | {r['steps']} | {r['train_minutes']:.1f} | {r['train_tok_s']:.0f} "
            f"| {r['bleu_tok']:.2f} | {r['bleu_detok']:.2f} ({'cased' if r['variant'] == 'raw' else 'lc'}) | {r['chrf']:.2f} | {r['greedy_bleu_tok']:.2f} "
            f"| {r['beam5_s']:.1f} ({r['beam5_sent_s']:.0f}) | {r['greedy_s']:.1f} ({r['greedy_sent_s']:.0f}) "
            f"| {r['cache_speedup']:.1f}x |"
        )
    for r in rows:
        lines.append(
            f"\nSignatures ({r['model_dir']}): tok `{r['bleu_tok_sig']}`; detok `{r['bleu_detok_sig']}`; "
            f"chrF (on the {r['variant']} text) `{r['chrf_sig']}`. {r['sentences']} test sentences."
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", type=Path, default=CONFIGS)
    parser.add_argument(
        "--data",
        default=os.environ.get("ATTNKIT_MULTI30K"),
        help="Multi30k folder (default: $ATTNKIT_MULTI30K, else downloaded)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench")
    parser.add_argument("--max-minutes", type=float, default=90.0, help="training budget per config")
    parser.add_argument(
        "--model-dir",
        nargs="*",
        help="evaluate these trained models (directories or installed "
        "models' names, e.g. multi30k-en-de) instead of training",
    )
    parser.add_argument(
        "--ensemble", nargs="+", type=Path, default=None, help="more models decoded together with each --model-dir"
    )
    parser.add_argument("--checkpoint", default="average", choices=["best", "last", "average"])
    parser.add_argument(
        "--length-penalty",
        choices=sorted(PENALTIES),
        default="fairseq",
        help="beam search's length penalty: fairseq's |Y|^alpha (as published) or GNMT's",
    )
    parser.add_argument(
        "--alpha",
        type=alpha_option,
        default=None,
        help="length penalty alpha for beam 5: a number (default: the style's, 1 for fairseq), or 'dev' "
        "to pick it on the val set from ALPHA_GRIDS (the test set is never used to choose)",
    )
    parser.add_argument("--smoke", action="store_true", help="1-minute training, 100 test sentences")
    args = parser.parse_args()

    dirs = list(args.model_dir or [])
    if not dirs:
        for cfg_path in args.configs:
            out = args.out / cfg_path.stem
            overrides = [
                f"out_dir={out}",
                f"data.multi30k={args.data}",
                f"train.max_minutes={1 if args.smoke else args.max_minutes}",
            ]
            if args.smoke:
                overrides += ["train.eval_every=20", "train.bleu_every=0", "train.warmup=20"]
            train(load_config(cfg_path, overrides), resume=(out / "checkpoints" / "last.pt").is_file())
            dirs.append(out)
    limit = 100 if args.smoke else 1000
    rows = [run(d, args.data, limit, args.checkpoint, args.alpha, args.length_penalty, args.ensemble) for d in dirs]
    for r in rows:
        print(json.dumps(r, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()

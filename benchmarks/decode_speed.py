"""Decoding speed of a trained model on the Multi30k test set, against baselines in the same
process: beam 5 and greedy over the 1,000 test_2016_flickr sentences.

    python benchmarks/decode_speed.py --model-dir runs/bench/transformer_tiny_drop02
    python benchmarks/decode_speed.py --model-dir DIR --variants default memory_per_hypothesis --rounds 6

This machine's speed drifts by 25-30% within minutes, so separate processes cannot
measure a 10% change. Here every variant runs in the same process, the variants
alternating round by round (the order reversed every other round); the medians are
compared. Variants, each the current code with one speed setting undone:

* default: the library as it is;
* memory_per_hypothesis: beam search copies the encoder memory and the cross-attention
  caches to every hypothesis (as before grouped queries), instead of one per sentence
  (beam search only: its greedy rows measure the noise);
* fresh_logits: every step allocates new (rows, V) logits instead of reusing one buffer;
* one_worker: one decoding thread using every intra-op thread, instead of one worker
  thread per intra-op thread (``translate(workers=1)``);
* no_cache: the whole prefix recomputed every step (the key/value cache's baseline).

Every variant must produce the same translations as the default: the script checks it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import torch

from attnkit.data import multi30k, read_lines
from attnkit.inference import translate as translate_module
from attnkit.inference.translate import translate
from attnkit.loading.model_dir import load_model
from attnkit.models.transformer import TransformerState
from attnkit.search import SearchOptions, scoring
from attnkit.search import beam as beam_module
from attnkit.search import greedy as greedy_module

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def variant(name: str) -> Iterator[dict]:
    """Patch the library into variant ``name`` for the duration; yields translate() options."""
    patches: list[tuple[object, str, object]] = []

    def patch(owner: object, attr: str, value: object) -> None:
        patches.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, value)

    options = {}
    if name == "one_worker":
        options["workers"] = 1
    elif name == "memory_per_hypothesis":

        def expand(state: TransformerState, k: int) -> None:  # group stays 1: every row its own memory
            rows = torch.arange(len(state.encoder.mask), device=state.encoder.mask.device)
            state.reorder(rows.repeat_interleave(k))

        patch(TransformerState, "expand", expand)
    elif name == "fresh_logits":
        fresh = lambda output, hidden, width, buffer=None: scoring.best_tokens(output, hidden, width)
        patch(beam_module, "best_tokens", fresh)
        patch(greedy_module, "best_tokens", fresh)
    elif name == "no_cache":  # beam search only: translate() runs greedy search for beam 1
        patch(translate_module, "beam_search", partial(beam_module.beam_search, use_cache=False))
    elif name != "default":
        raise SystemExit(f"unknown variant {name!r}")
    try:
        yield options
    finally:
        for owner, attr, old in reversed(patches):
            setattr(owner, attr, old)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, required=True)
    ap.add_argument(
        "--data",
        default=os.environ.get("ATTNKIT_MULTI30K"),
        help="Multi30k folder (default: $ATTNKIT_MULTI30K, else downloaded)",
    )
    ap.add_argument("--checkpoint", default="average", help="best, last or average (of the last 10)")
    ap.add_argument("--variants", nargs="+", default=["default", "one_worker", "memory_per_hypothesis", "fresh_logits"])
    ap.add_argument("--beams", nargs="+", type=int, default=[5, 1])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--limit", type=int, default=0, help="first N test sentences only (0: all)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    model, tok, cfg = load_model(args.model_dir, checkpoint_name=args.checkpoint, average_last=10)
    src = read_lines(multi30k.locate("test_2016_flickr", "en", root=args.data, variant=cfg.data.multi30k_variant))
    src = src[: args.limit] if args.limit else src
    translate(model, tok, src[:100], SearchOptions(beam=max(args.beams)))  # warm-up
    seconds: dict[tuple[str, int], list[float]] = {}
    reference: dict[int, list[str]] = {}  # per beam: the first pass's translations
    for r in range(args.rounds):
        for name in args.variants if r % 2 == 0 else args.variants[::-1]:
            for beam in args.beams:
                with variant(name) as options:
                    start = time.perf_counter()
                    out = translate(model, tok, src, SearchOptions(beam=beam), **options)
                    seconds.setdefault((name, beam), []).append(time.perf_counter() - start)
                texts = [t.output for t in out]
                if reference.setdefault(beam, texts) != texts:
                    raise SystemExit(f"{name} beam {beam}: the translations differ from {args.variants[0]}'s")
    words = {beam: sum(map(len, tok.encode_tgt(reference[beam]))) for beam in args.beams}

    print(
        f"{args.model_dir} ({args.checkpoint}), {len(src)} sentences, {args.rounds} alternating rounds, "
        f"{platform.machine()}, {args.threads} threads, torch {torch.__version__}"
    )
    print(
        "| variant | beam | seconds per pass (all rounds) | median s | sentences/s | output subwords/s | speed vs the first |"
    )
    print("|---|---|---|---|---|---|---|")
    for beam in args.beams:
        base = statistics.median(seconds[(args.variants[0], beam)])
        for name in args.variants:
            runs = seconds[(name, beam)]
            med = statistics.median(runs)
            print(
                f"| {name} | {beam} | {', '.join(f'{s:.2f}' for s in runs)} | {med:.2f} | {len(src) / med:.0f} "
                f"| {words[beam] / med:.0f} | {base / med:.2f}x |"
            )


if __name__ == "__main__":
    main()

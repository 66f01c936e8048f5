"""``attnkit demo``: train a small attention model on the built-in date task
(no download), translate a few dates and draw the attention of one of them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..atomic import atomic_directory, save_figure, write_text
from ..config import config_from_dict, save_config
from ..data import readable
from ..data.dates import date_pairs
from ..inference.translate import translate
from ..inspection import capture, model_info
from ..inspection.figures import layer_name
from ..loading.model_dir import load_model
from ..models import RNNSeq2Seq, TransformerSeq2Seq
from ..plots import plot_alignment
from ..search import SearchOptions
from ..training.trainer import train
from ..viewer import write_html
from . import MARKER, check_demo_directory

EXAMPLES = ["22 november 2026", "sunday, 3 march 1985", "jul 4, 1976", "the 9 of october 2041"]


def demo_config(out_dir: Path, arch: str, max_steps: int, attention: str = "global") -> dict[str, Any]:
    data = out_dir / "data"
    model = (
        {
            "arch": "rnn",
            "d_model": 128,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "dropout": 0.1,
            "rnn": {
                "cell": "lstm",
                "hidden": 128,
                "attention": attention,
                "score": "general",
                "window": 3,
                "init_hidden": "zero",
            },
        }
        if arch == "rnn"
        else {
            "arch": "transformer",
            "d_model": 64,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "dropout": 0.1,
            "transformer": {"ffn": 128, "heads": 4},
        }
    )
    return {
        "out_dir": str(out_dir),
        "data": {
            "train_src": str(data / "train.src"),
            "train_tgt": str(data / "train.tgt"),
            "dev_src": str(data / "dev.src"),
            "dev_tgt": str(data / "dev.tgt"),
            "max_len": 40,
        },
        "tokenizer": {"kind": "bpe", "vocab_size": 160, "joint": True, "split_digits": True},
        "model": model,
        # a validation (and an attention snapshot of 3 dev dates) every eighth of the run; BLEU at half and end
        "train": {
            "max_steps": max_steps,
            "batch_tokens": 3000,
            "lr": 0.003,
            "warmup": 100,
            "eval_every": max(1, max_steps // 8),
            "bleu_every": 4,
            "attention_snapshots": 3,
            "log_every": 100,
            "label_smoothing": 0.1,
            "clip_norm": 1.0,
            "early_stop_metric": "bleu",
        },
    }


def run_demo(
    out_dir: str | Path = "runs/demo",
    *,
    arch: str = "transformer",
    max_steps: int = 800,
    seed: int = 1,
    attention: str = "global",
) -> dict[str, Any]:
    """Train, report exact match on held-out dates, and write attention.png and the
    interactive attention.html. ``attention`` picks the RNN's global, local-m or local-p attention.

    Everything is checked before any file is touched; the demo is built in a new directory
    beside ``out_dir`` and replaces an earlier demo there only once it is complete."""
    if attention != "global" and arch != "rnn":
        raise ValueError(f"`attention` {attention} is an RNN (Luong) attention; use it with `arch` rnn")
    out = Path(out_dir)
    check_demo_directory(out)
    final = config_from_dict(
        demo_config(out, arch, max_steps, attention), [f"train.seed={seed}"]
    )  # checks every setting
    with atomic_directory(out) as building:
        result = _build_demo(building, arch=arch, max_steps=max_steps, seed=seed, attention=attention)
        save_config(final, building / "config.yaml")  # the paths where the demo ends up
    print(
        f"attention heatmap: {out / 'attention.png'}\ninteractive viewer: {out / 'attention.html'}  (open it in a browser)\n"
        f"attention as it formed: attnkit view {out} -o forming.html  (a training-step slider)"
    )
    return {**result, "heatmap": str(out / "attention.png"), "viewer": str(out / "attention.html")}


def _build_demo(out: Path, *, arch: str, max_steps: int, seed: int, attention: str) -> dict[str, Any]:
    """The whole demo in directory ``out``; every path it records is relative to it."""
    (out / "data").mkdir(parents=True)
    src, tgt = date_pairs(20_500, seed)
    for name, lines in (
        ("train.src", src[:20_000]),
        ("train.tgt", tgt[:20_000]),
        ("dev.src", src[20_000:]),
        ("dev.tgt", tgt[20_000:]),
    ):
        (out / "data" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")

    started = time.perf_counter()
    cfg = config_from_dict(demo_config(out, arch, max_steps, attention), [f"train.seed={seed}"])
    summary = train(cfg, resumable=False)
    if "signal" in summary:  # Ctrl-C or SIGTERM: the half-built demo directory is discarded
        raise KeyboardInterrupt
    model, tok, _ = load_model(out, checkpoint_name="best")
    assert isinstance(model, (TransformerSeq2Seq, RNNSeq2Seq))  # the demo's config: arch transformer or rnn
    dev_src, dev_tgt = src[20_000:], tgt[20_000:]
    dev_out = translate(model, tok, dev_src, SearchOptions(beam=1))
    accuracy = sum(t.output == ref for t, ref in zip(dev_out, dev_tgt)) / len(dev_tgt)
    examples = translate(model, tok, EXAMPLES, SearchOptions(beam=1), need_weights=True)
    seconds = time.perf_counter() - started

    print()
    for t in examples:
        print(f"  {t.source:<26} -> {t.output}")
    print(f"\nexact match on {len(dev_tgt)} held-out dates: {accuracy:.1%}   (wall time {seconds:.0f} s)")
    fig = example_figure(examples[0], cfg, arch, attention)
    save_figure(fig, out / "attention.png")
    settings = cfg.model
    window = settings.rnn.window if examples[0].p_t is not None else None
    records = capture(model, tok, EXAMPLES, options=SearchOptions(beam=1), window=window)
    write_html(out / "attention.html", records, model_info(model, cfg), title=f"attnkit demo: {arch} on dates")
    result = {
        "accuracy": accuracy,
        "seconds": seconds,
        "steps": summary["step"],
        "examples": {t.source: t.output for t in examples},
    }
    write_text(out / MARKER, json.dumps({"arch": arch, "attention": attention, "seed": seed, **result}, indent=1))
    return result


def example_figure(first, cfg, arch: str, attention: str):
    """The demo's attention.png: the first example's cross-attention (the last layer, the mean of
    its heads; an RNN's one attention, with local-p's centres and windows)."""
    assert first.alignment is not None  # translated with need_weights
    weights = first.alignment[-1].mean(axis=0)  # the last layer, the mean of its heads
    local = first.p_t is not None
    settings = cfg.model
    window = settings.rnn.window if local else None
    layers, heads = first.alignment.shape[:2]
    kind = (
        f"RNN, Luong {attention} attention"
        if arch == "rnn"
        else f"Transformer cross-attention, {layer_name(-1, layers)}, mean of its {heads} heads"
    )
    return plot_alignment(
        weights,
        readable(first.src_pieces),
        readable(first.out_pieces),
        title=f"{kind}\n“{first.source}” → “{first.output}”",
        p_t=first.p_t,
        window=window,
    )

"""``attnkit demo``: train a small attention model on the built-in date task
(no download), translate a few dates and draw the attention of one of them."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .config import config_from_dict
from .data.dates import date_pairs
from .model_dir import load_model
from .inspection import capture, model_info
from .plots import plot_alignment, readable
from .training.trainer import train
from .translate import translate
from .viewer import write_html

MARKER = "demo.json"
EXAMPLES = ["22 november 2026", "sunday, 3 march 1985", "jul 4, 1976", "the 9 of october 2041"]


def demo_config(out_dir: Path, arch: str, max_steps: int, attention: str = "global") -> dict[str, Any]:
    data = out_dir / "data"
    model = (
        {"arch": "rnn", "cell": "lstm", "d_model": 128, "hidden": 128, "encoder_layers": 1, "decoder_layers": 1,
         "attention": attention, "score": "general", "window": 3, "dropout": 0.1,
         "init_hidden": "zero"}
        if arch == "rnn"
        else {"arch": "transformer", "d_model": 64, "ffn": 128, "heads": 4, "encoder_layers": 2, "decoder_layers": 2,
              "dropout": 0.1}
    )
    return {
        "out_dir": str(out_dir),
        "data": {"train_src": str(data / "train.src"), "train_tgt": str(data / "train.tgt"),
                 "dev_src": str(data / "dev.src"), "dev_tgt": str(data / "dev.tgt"), "max_len": 40},
        "tokenizer": {"kind": "bpe", "vocab_size": 160, "joint": True, "split_digits": True},
        "model": model,
        "train": {"max_steps": max_steps, "batch_tokens": 3000, "lr": 0.003, "warmup": 100, "eval_every": max_steps // 2,
                  "log_every": 100, "label_smoothing": 0.1, "clip_norm": 1.0, "early_stop_metric": "bleu"},
    }


def run_demo(
    out_dir: str | Path = "runs/demo", *, arch: str = "transformer", max_steps: int = 800, seed: int = 1,
    attention: str = "global",
) -> dict[str, Any]:
    """Train, report exact match on held-out dates, and write attention.png and the
    interactive attention.html. ``attention`` picks the RNN's global, local-m or local-p attention."""
    if attention != "global" and arch != "rnn":
        raise ValueError(f"--attention {attention} is an RNN (Luong) attention; use it with --arch rnn")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise ValueError(f"{out} exists and is not an attnkit demo directory; choose another --out")
        shutil.rmtree(out)  # only ever replaces an earlier demo
    (out / "data").mkdir(parents=True)
    src, tgt = date_pairs(20_500, seed)
    for name, lines in (("train.src", src[:20_000]), ("train.tgt", tgt[:20_000]), ("dev.src", src[20_000:]), ("dev.tgt", tgt[20_000:])):
        (out / "data" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / MARKER).write_text(json.dumps({"arch": arch, "seed": seed}), encoding="utf-8")

    started = time.perf_counter()
    cfg = config_from_dict(demo_config(out, arch, max_steps, attention), [f"train.seed={seed}"])
    summary = train(cfg)
    model, tok, _ = load_model(out, checkpoint_name="best")
    dev_src, dev_tgt = src[20_000:], tgt[20_000:]
    dev_out = translate(model, tok, dev_src)
    accuracy = sum(t.output == ref for t, ref in zip(dev_out, dev_tgt)) / len(dev_tgt)
    examples = translate(model, tok, EXAMPLES, need_weights=True)
    seconds = time.perf_counter() - started

    print()
    for t in examples:
        print(f"  {t.source:<26} -> {t.output}")
    print(f"\nexact match on {len(dev_tgt)} held-out dates: {accuracy:.1%}   (wall time {seconds:.0f} s)")
    first = examples[0]
    weights = first.alignment.mean(axis=(0, 1))  # average over layers and heads
    local = first.p_t is not None
    fig = plot_alignment(weights, readable(first.src_pieces), readable(first.out_pieces),
                         title=f"{arch} {attention if arch == 'rnn' else ''} attention: '{first.source}' -> '{first.output}'",
                         p_t=first.p_t, window=cfg.model.window if local else None)
    png = out / "attention.png"
    fig.savefig(png, dpi=120)
    records = capture(model, tok, EXAMPLES, window=cfg.model.window if local else None)
    html = write_html(out / "attention.html", records, model_info(model, cfg), title=f"attnkit demo: {arch} on dates")
    print(f"attention heatmap: {png}\ninteractive viewer: {html}  (open it in a browser)", file=sys.stdout)
    result = {"accuracy": accuracy, "seconds": seconds, "steps": summary["step"], "heatmap": str(png), "viewer": str(html),
              "examples": {t.source: t.output for t in examples}}
    (out / MARKER).write_text(json.dumps({"arch": arch, "attention": attention, "seed": seed, **result}, indent=1), encoding="utf-8")
    return result

"""``attnkit demo --task caption``: train an image captioner on digit scenes made from real
handwritten scans (no download), caption held-out scenes, score the captions and the
attention, and draw each word's attention over the image."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_directory, save_figure, write_text
from ..config import config_from_dict, save_config
from ..data.scenes import make_scenes, max_caption_words, write_truth
from ..evaluation.captioning import evaluate_captions, named_boxes
from ..loading.model_dir import load_model
from ..plots.images import plot_caption
from ..training.trainer import train
from ..viewer.captions import write_caption_html
from . import MARKER, check_demo_directory

TEST_SCENES = 1000
EXAMPLE_FILES = 4  # scene_N.png (and its truth, scene_N.json) written for `attnkit caption`


def caption_demo_config(out_dir: Path, arch: str, max_steps: int) -> dict[str, Any]:
    """CNN + RNN with Luong attention (as Show, Attend and Tell), or ViT + Transformer decoder."""
    model = (
        {
            "arch": "rnn",
            "d_model": 64,
            "layers": 1,
            "dropout": 0.1,
            "positions": "sinusoidal",
            "rnn": {"cell": "lstm", "hidden": 128, "attention": "global", "score": "general"},
            "image": {"encoder": "cnn"},
        }
        if arch == "rnn"
        else {
            "arch": "transformer",
            "d_model": 128,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "dropout": 0.1,
            "positions": "sinusoidal",
            "transformer": {"heads": 4, "ffn": 256, "norm_first": True},
            "image": {"encoder": "vit"},
        }
    )
    return {
        "out_dir": str(out_dir),
        "data": {"task": "caption", "scenes": {"image_size": 32, "train": 20000, "dev": 500}},
        "model": model,
        # configs/digit_scenes_caption_{rnn,vit}.yaml; the cosine decay ends at max_steps
        "train": {
            "max_steps": max_steps,
            "batch_tokens": 500,
            "lr": 0.003 if arch == "rnn" else 0.001,
            "schedule": "cosine",
            "warmup": 50 if arch == "rnn" else 200,
            "eval_every": max(1, max_steps // 4),
            "log_every": 100,
            "label_smoothing": 0.1,
            "clip_norm": 1.0,
            "early_stop_metric": "bleu",
        },
    }


STEPS = {"rnn": 1200, "transformer": 5000}  # the ViT plateaus for about 1,000 updates: about 17 minutes


def run_caption_demo(
    out_dir: str | Path = "runs/demo_caption", *, arch: str = "rnn", max_steps: int | None = None, seed: int = 1
) -> dict[str, Any]:
    """Train, report exact match and attention correctness on held-out scenes, and write
    caption.png (one panel per word), caption.html (hover a word) and scene_N.png examples.
    Checked before any file is touched; an earlier demo is replaced only once this one is complete."""
    max_steps = max_steps or STEPS[arch]
    out = Path(out_dir)
    check_demo_directory(out)
    final = config_from_dict(caption_demo_config(out, arch, max_steps), [f"train.seed={seed}"])
    with atomic_directory(out) as building:
        result = _build(building, arch=arch, max_steps=max_steps, seed=seed)
        save_config(final, building / "config.yaml")
    print(
        f"attention over the image: {out / 'caption.png'}\ninteractive viewer: {out / 'caption.html'}  "
        f"(hover a word)\ncaption an image file: attnkit caption {out} {out / 'scene_1.png'}"
    )
    return {**result, "figure": str(out / "caption.png"), "viewer": str(out / "caption.html")}


def _build(out: Path, *, arch: str, max_steps: int, seed: int) -> dict[str, Any]:
    from PIL import Image

    started = time.perf_counter()
    cfg = config_from_dict(caption_demo_config(out, arch, max_steps), [f"train.seed={seed}"])
    summary = train(cfg, resumable=False)
    if "signal" in summary:  # Ctrl-C or SIGTERM: the half-built demo directory is discarded
        raise KeyboardInterrupt
    model, vocab, _ = load_model(out, checkpoint_name="best", task="caption")
    # test scenes: held-out scans, drawn apart from the dev scenes that chose the checkpoint
    scenes = make_scenes(TEST_SCENES, held_out=True, seed=seed + 1000, size=cfg.data.scenes.image_size)
    scores, captions = evaluate_captions(model, vocab, scenes, max_words=max_caption_words(cfg.data.scenes.digits))
    seconds = time.perf_counter() - started

    kind = (
        "CNN + LSTM, Luong global attention"
        if arch == "rnn"
        else "ViT + Transformer, last layer's cross-attention (mean of heads)"
    )
    print()
    for scene, cap in list(zip(scenes, captions))[:EXAMPLE_FILES]:
        print(f"  reference {' '.join(scene.words):<10} -> {' '.join(cap.words)}")
    print(f"\n{scores}\n(wall time {seconds:.0f} s)")
    first = captions[0]
    boxes, inside = named_boxes(first, scenes[0])
    fig = plot_caption(
        first.image,
        first.words,
        first.attention,
        boxes=boxes,
        inside=inside,
        title=f"{kind}: a held-out scene, each word's attention",
    )
    save_figure(fig, out / "caption.png", dpi=130)
    n = 12
    write_caption_html(
        out / "caption.html",
        captions[:n],
        [f"scene {i + 1}" for i in range(n)],
        scenes[:n],
        title=f"attnkit demo: {kind} on held-out digit scenes",
    )
    for i, s in enumerate(scenes[:EXAMPLE_FILES]):
        Image.fromarray(np.round(s.image * 255).astype(np.uint8)).save(out / f"scene_{i + 1}.png")
        write_truth(s, out / f"scene_{i + 1}.png")  # its words and boxes, which `attnkit caption` draws
    result = {
        "exact": scores.exact,
        "bleu": scores.bleu,
        "attention_correctness": scores.correctness.score,
        "uniform": scores.correctness.uniform,
        "seconds": seconds,
        "steps": summary["step"],
    }
    write_text(out / MARKER, json.dumps({"task": "caption", "arch": arch, "seed": seed, **result}, indent=1))
    return result

"""Image captioning on digit scenes: each 2-D position scheme, for the CNN + LSTM (Luong
attention) and the ViT + Transformer captioners, scored on held-out scenes.

    python benchmarks/caption_positions.py                           # both models x 4 schemes
    python benchmarks/caption_positions.py --models rnn --schemes sinusoidal none --steps 600
    python benchmarks/caption_positions.py --score runs/caption_vit   # a trained model dir only

Each run trains the committed config (configs/digit_scenes_caption_{rnn,vit}.yaml) with
``model.positions`` set, takes its best dev checkpoint (dev scenes: held-out scans), and
captions 1,000 test scenes made from held-out scans with another seed (greedy). It reports
exact match, BLEU, attention correctness (share of each correctly named digit's attention
inside its box; the Transformer's from the last decoder layer, mean over heads, and from
the mean of all layers) with the uniform baseline, and the training time. One JSON line
per run, then a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

from attnkit.config import load_config
from attnkit.data.scenes import make_scenes
from attnkit.evaluation.captioning import evaluate_captions
from attnkit.loading.model_dir import load_model
from attnkit.training.trainer import train

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {"rnn": REPO / "configs/digit_scenes_caption_rnn.yaml", "vit": REPO / "configs/digit_scenes_caption_vit.yaml"}
SCHEMES = ("sinusoidal", "learned", "fourier", "none")


def run(model: str, scheme: str, steps: int | None, seed: int, test: int, out: Path) -> dict:
    overrides = [f"out_dir={out}", f"model.positions={scheme}", f"train.seed={seed}"]
    if steps:
        overrides.append(f"train.max_steps={steps}")
    cfg = load_config(CONFIGS[model], overrides)
    started = time.perf_counter()
    summary = train(cfg, progress_bar=False, quiet=True)
    seconds = time.perf_counter() - started
    row = {"model": model, "positions": scheme, "steps": summary["step"], "train_s": round(seconds, 1)}
    return row | score(out, seed, test)


def score(model_dir: Path, seed: int, test: int) -> dict:
    """A trained captioner's scores on ``test`` scenes from held-out scans (seed + 1000)."""
    net, vocab, cfg = load_model(model_dir, task="caption")
    scenes = make_scenes(test, held_out=True, seed=seed + 1000, size=cfg.data.scenes.image_size)
    layered = cfg.model.arch == "transformer"  # attention per decoder layer: the last, and the mean of all
    row = {}
    for name, layer in (("last", -1), ("mean", None)) if layered else (("last", -1),):
        scores, _ = evaluate_captions(net, vocab, scenes, max_words=cfg.data.scenes.digits[1] + 2, layer=layer)
        row.update(exact=round(scores.exact, 1), bleu=round(scores.bleu, 1))
        row[f"correctness_{name}"] = round(scores.correctness.score, 3)
        row["uniform"] = round(scores.correctness.uniform, 3)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--schemes", nargs="+", choices=SCHEMES, default=list(SCHEMES))
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the config's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--test-scenes", type=int, default=1000)
    ap.add_argument("--score", type=Path, metavar="MODEL_DIR", help="only score this trained captioner (no training)")
    args = ap.parse_args()
    print(
        f"# {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
        file=sys.stderr,
    )
    if args.score:
        print(json.dumps({"model_dir": str(args.score)} | score(args.score, args.seed, args.test_scenes)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            for scheme in args.schemes:
                row = run(model, scheme, args.steps, args.seed, args.test_scenes, Path(tmp) / f"{model}_{scheme}")
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("\n| model | positions | exact match | BLEU | attention correctness | uniform | training |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        corr = f"{r['correctness_last']:.3f}" + (
            f" (all layers {r['correctness_mean']:.3f})" if "correctness_mean" in r else ""
        )
        name = "CNN + LSTM" if r["model"] == "rnn" else "ViT + Transformer"
        print(
            f"| {name} | {r['positions']} | {r['exact']:.1f}% | {r['bleu']:.1f} | {corr} | {r['uniform']:.3f} | "
            f"{r['train_s']:.0f} s |"
        )


if __name__ == "__main__":
    main()

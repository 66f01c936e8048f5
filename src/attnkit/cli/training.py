"""Commands that train: ``demo`` (a built-in task, start to finish) and ``train`` (a YAML config)."""

from __future__ import annotations

import argparse

from . import flags as F


def cmd_demo(args: argparse.Namespace) -> None:
    if args.task == "caption":
        from ..demos.captions import run_caption_demo

        if args.attention != "global":
            raise ValueError("--attention picks the date demo's RNN attention; the caption demo uses global attention")
        run_caption_demo(
            args.out_dir or "runs/demo_caption", arch=args.arch or "rnn", max_steps=args.steps, seed=args.seed
        )
        return
    from ..demos.dates import run_demo

    run_demo(
        args.out_dir or "runs/demo",
        arch=args.arch or "transformer",
        max_steps=args.steps or 800,
        seed=args.seed,
        attention=args.attention,
    )


def cmd_train(args: argparse.Namespace) -> int:
    """Train; a run stopped by SIGINT/SIGTERM saves and exits 128 + the signal's number."""
    from ..config import load_config
    from ..training.trainer import train

    summary = train(load_config(args.config, args.overrides, warn=True), resume=args.resume)
    return 128 + int(summary["signal"]) if "signal" in summary else 0


def add_commands(add) -> None:
    p = add(
        "demo",
        cmd_demo,
        "train a small attention model on a built-in task (dates, or captions of digit scenes) and draw its attention",
    )
    p.add_argument(
        "--task",
        choices=["dates", "caption"],
        default="dates",
        help="dates: rewrite dates in ISO form; caption: name the digits of an image in reading order",
    )
    F.out_dir(
        p,
        None,
        "demo directory (an earlier demo there is replaced, only once the new one is complete; "
        "default runs/demo, runs/demo_caption for --task caption)",
    )
    p.add_argument(
        "--arch",
        choices=["transformer", "rnn"],
        default=None,
        help="model to train (default: transformer for dates; rnn for captions: CNN + LSTM with Luong "
        "attention; transformer: ViT + Transformer decoder)",
    )
    p.add_argument(
        "--attention",
        choices=["global", "local-m", "local-p"],
        default="global",
        help="the RNN's Luong attention (local-p draws p_t and its window)",
    )
    p.add_argument(
        "--steps",
        type=F.positive_int,
        default=None,
        help="training steps (default 800; for captions 1200, or 5000 with --arch transformer: about 17 minutes)",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (data, initialisation, batches)")

    p = add("train", cmd_train, "train a model from a YAML config")
    p.add_argument("config", help="YAML config (see configs/)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. model.encoder_layers=2 train.bf16=true")
    p.add_argument("--resume", action="store_true", help="continue the run in the config's out_dir where it stopped")

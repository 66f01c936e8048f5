"""The ``attnkit`` command. Each subcommand parses its arguments and calls one
library function; user mistakes become one line on stderr and exit status 1."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__


FIGURE_FORMATS = (".png", ".svg", ".pdf")


def figure_path(path: str) -> Path:
    """Check a figure path's format before any work is done."""
    out = Path(path)
    if out.suffix.lower() not in FIGURE_FORMATS:
        raise ValueError(f"figure {path!r} must end in one of {', '.join(FIGURE_FORMATS)}")
    return out


def cmd_positions(args: argparse.Namespace) -> None:
    """Print and plot a sinusoidal positional encoding (seed 003)."""
    import numpy as np

    from .plots import plot_positional_encoding
    from .positions import SinusoidalPositionalEncoding

    out = figure_path(args.out)
    pe = SinusoidalPositionalEncoding(args.d_model, max_len=args.length)(args.length).numpy()
    np.set_printoptions(precision=3, suppress=True, linewidth=120)
    print(f"sinusoidal positional encoding, d_model={args.d_model}, positions 0..{args.length - 1}")
    print("PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d))\n")
    for pos in (0, 1, 2, args.length - 1):
        print(f"PE({pos:>3})[:8] = {pe[pos, :8]}")
    sim = pe @ pe.T
    print("\nsimilarity PE(i) . PE(i + k) depends on the offset k, not on i:")
    print("   k   " + "  ".join(f"i={i:<6}" for i in (0, 10, 40)))
    for k in (0, 1, 2, 5, 10, 20):
        if k + 40 < args.length:
            print(f"  {k:>3}  " + "  ".join(f"{sim[i, i + k]:8.3f}" for i in (0, 10, 40)))
    out.parent.mkdir(parents=True, exist_ok=True)
    plot_positional_encoding(pe, title=f"sinusoidal PE, d_model={args.d_model}").savefig(out, dpi=110)
    print(f"\nfigure: {out}")


def cmd_demo(args: argparse.Namespace) -> None:
    from .demo import run_demo

    run_demo(args.out, arch=args.arch, max_steps=args.steps, seed=args.seed)


def cmd_train(args: argparse.Namespace) -> None:
    from .config import load_config
    from .training.trainer import train

    train(load_config(args.config, args.overrides), resume=args.resume)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnkit", description="Attention mechanisms, models and views.")
    parser.add_argument("--version", action="version", version=f"attnkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="train a small attention model on a built-in date task and draw its attention")
    p.add_argument("--out", default="runs/demo", help="demo directory (default runs/demo; an earlier demo there is replaced)")
    p.add_argument("--arch", choices=["transformer", "rnn"], default="transformer", help="model to train (default transformer)")
    p.add_argument("--steps", type=int, default=800, help="training steps (default 800)")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("train", help="train a model from a YAML config")
    p.add_argument("config", help="YAML config (see configs/)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. model.encoder_layers=2 train.bf16=true")
    p.add_argument("--resume", action="store_true", help="continue the run in the config's out_dir where it stopped")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("positions", help="print and plot the sinusoidal positional encoding")
    p.add_argument("--d-model", type=int, default=128, help="encoding width (default 128)")
    p.add_argument("--length", type=int, default=100, help="number of positions (default 100)")
    p.add_argument("--out", default="positional_encoding.png", help="figure path (.png, .svg or .pdf)")
    p.set_defaults(func=cmd_positions)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # dotted overrides may come after options (`train cfg.yaml --resume model.layers=2`)
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError) as err:
        print(f"attnkit {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"attnkit {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

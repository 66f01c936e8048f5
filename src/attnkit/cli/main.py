"""The ``attnkit`` command. Each subcommand parses its arguments and calls one library
function; user mistakes become one line on stderr and exit status 1.

One vocabulary of flags: ``-o/--output`` for a file a command writes, ``--out-dir`` for
a directory, ``--device``, ``--beam``, ``--checkpoint`` with the same meaning and
default everywhere (``flags.py``)."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from ..errors import as_flags
from . import circuits, inspection, training, translation
from . import flags as F


def build_parser() -> argparse.ArgumentParser:
    parser = F.Parser(
        prog="attnkit",
        description="Attention mechanisms, models and views.",
        formatter_class=F.HelpFormatter,
        epilog=F.EXAMPLES["attnkit"],
    )
    parser.add_argument("--version", action="version", version=f"attnkit {F.version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = F.subcommand_adder(sub)
    for group in (training, translation, inspection, circuits):
        group.add_commands(add)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command: 0 on success, 1 for a bad value found at work, 2 for a command line
    that does not parse; either error is one line on stderr."""
    try:
        args = F.parse_args(build_parser(), argv)
    except F.UsageError as err:
        print(err, file=sys.stderr)
        return 2

    def one_line(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"attnkit {args.command}: warning: {message}", file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line  # a library's warning is one line, not its source line
            return args.func(args) or 0
    except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError) as err:
        print(f"attnkit {args.command}: error: {as_flags(str(err))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"attnkit {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ``attnkit`` command: one module per group of subcommands, one vocabulary of flags."""

from .main import build_parser, main

__all__ = ["build_parser", "main"]

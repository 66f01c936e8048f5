"""User-facing errors: the bad value, the nearest valid one, and all valid ones."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


def unknown_choice(kind: str, value: object, valid: Iterable[str]) -> ValueError:
    """A ValueError naming the bad value, the closest valid one and all valid ones."""
    valid = sorted(valid)
    close = difflib.get_close_matches(str(value), valid, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(f"unknown {kind} {value!r}{hint} (valid: {', '.join(valid)})")


def shorten(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters at a word boundary, "…" marking the cut."""
    if len(text) <= width:
        return text
    cut = text[: width - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


PARAMETER = re.compile(r"`([a-z][a-z0-9_]*)`")  # a library parameter named in a message: `max_new_tokens`


FLAG_OF = {"checkpoint_name": "checkpoint"}  # a parameter whose flag is not its name


def as_flags(message: str) -> str:
    """A library message as the command line says it: each parameter it names in backquotes becomes
    its flag (`max_new_tokens` -> --max-new-tokens)."""
    return PARAMETER.sub(lambda m: "--" + FLAG_OF.get(m.group(1), m.group(1)).replace("_", "-"), message)


def as_fields(message: str) -> str:
    """A library message as the studio's API says it: parameters by their request fields' names."""
    return PARAMETER.sub(lambda m: m.group(1), message)

"""User-facing errors: the bad value, the nearest valid one, and all valid ones."""

from __future__ import annotations

import difflib
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

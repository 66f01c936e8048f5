"""What one request to the studio may ask for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StudioLimits:
    """What one request to the studio (`attnkit serve`) may ask for (each is also a `attnkit serve` option)."""

    max_chars: int = 200_000  # characters of the sentence (and of a forced target)
    # subword tokens of the sentence (and of a forced target); a model's positions, and the memory
    # its forward and record need (estimated before it runs), may allow fewer
    max_tokens: int = 32_768
    max_beam: int = 16
    max_nbest: int = 16  # and never more than the beam
    page_mb: int = 32  # above this, a record's maps stay on the server: the page asks for overviews and tiles
    records_mb: int = 4096  # records held for the views' requests; the oldest go first

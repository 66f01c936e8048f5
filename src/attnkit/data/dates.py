"""A built-in translation task with a clear alignment: spelled-out dates -> ISO 8601.

    "sunday, 22 november 2026"   ->  "2026-11-22"
    "nov 22, 2026"               ->  "2026-11-22"

The target reorders the source (year first), so a good attention map is not a
diagonal: the year digits look at the year, the month at the month name, the
day at the day. Train it with ``tokenizer.split_digits=true`` so every digit is
a token. Generated from a seed; no download.
"""

from __future__ import annotations

import datetime as dt
import random

MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
FORMATS = (
    "{d} {month} {y}",
    "{weekday}, {d} {month} {y}",
    "{month} {d}, {y}",
    "{mon} {d} {y}",
    "{d} {mon} {y}",
    "the {d} of {month} {y}",
)


def render(date: dt.date, fmt: str) -> tuple[str, str]:
    """(source, target) for one date."""
    month = MONTHS[date.month - 1]
    src = fmt.format(d=date.day, month=month, mon=month[:3], y=date.year, weekday=DAYS[date.weekday()])
    return src, date.isoformat()


def date_pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    """n random (source, target) pairs between the years 1900 and 2099."""
    rng = random.Random(seed)
    start, span = dt.date(1900, 1, 1).toordinal(), (dt.date(2099, 12, 31) - dt.date(1900, 1, 1)).days
    pairs = [render(dt.date.fromordinal(start + rng.randrange(span + 1)), rng.choice(FORMATS)) for _ in range(n)]
    return [s for s, _ in pairs], [t for _, t in pairs]

"""Every file attnkit writes ends either as the old file or the complete new one.

Each writer writes to a temporary file in the target's directory, flushes it to
disk, and renames it over the target: a crash, ``kill -9`` or a full disk in the
middle leaves the previous file (or none) and at most a stray ``.*.tmp`` file,
never a half-written target.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def _fsync_dir(path: Path) -> None:
    try:  # make the rename itself durable
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed over ``path`` when the block
    ends without an exception, removed otherwise. Its name keeps ``path``'s suffix,
    for writers that choose a format by it (matplotlib, numpy)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a file to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """``open(path, mode)`` that replaces ``path`` only once the block completes."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files (mode 'w' or 'wb'), got {mode!r}")
    with atomic_path(path) as tmp, open(tmp, mode, encoding=None if "b" in mode else encoding) as f:
        yield f


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path) as f:
        f.write(text)
    return Path(path)


def write_table(path: str | Path, rows: list[dict], about: dict, what: str) -> Path:
    """One row a head (or any item) written atomically by ``path``'s suffix: .json as ``{**about,
    "heads": rows}``, .csv as the rows alone (columns in first-seen order); one line for another
    suffix, ``what`` naming the table."""
    path = Path(path)
    if path.suffix == ".json":
        return write_text(path, json.dumps({**about, "heads": rows}, indent=1) + "\n")
    if path.suffix == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, list(dict.fromkeys(k for row in rows for k in row)), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return write_text(path, buf.getvalue())
    raise ValueError(f"{what} are written as .json or .csv, not {path.suffix or 'a file without a suffix'}")


def save_figure(fig: Any, path: str | Path, *, dpi: int = 130) -> Path:
    """Save a matplotlib figure atomically (the format follows ``path``'s suffix)."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi)
    return Path(path)


@contextlib.contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """A new directory beside ``target`` to build in; when the block ends without an
    exception it replaces ``target`` (an earlier one, or nothing) whole, otherwise it is removed."""
    import shutil

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    building.chmod(0o755)  # mkdtemp makes it private; what is built here is an ordinary directory
    try:
        yield building
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    old = target.with_name(f".{target.name}.old.{os.getpid()}") if target.exists() else None
    if old is not None:
        target.rename(old)
    building.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def remove_stale(directory: str | Path) -> list[Path]:
    """Delete the temporary files a killed writer left in ``directory`` (``.NAME.XXXX.tmp*``).
    Call it only where no other writer is at work (a training run on start or resume)."""
    stale = [p for p in Path(directory).glob(".*.tmp*") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def numbered(path: Path, index: int, count: int) -> Path:
    """``path`` for one output of ``count``: name_1.png, name_2.png, ... when there are several."""
    return path if count == 1 else path.with_name(f"{path.stem}_{index + 1}{path.suffix}")

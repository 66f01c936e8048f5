"""``attnkit demo``: a built-in task trained start to finish (dates, or captions of digit scenes)."""

from __future__ import annotations

from pathlib import Path

MARKER = "demo.json"  # written last into a finished demo directory: an earlier demo there may be replaced


def check_demo_directory(out: Path) -> None:
    """A demo may write ``out`` only when it is absent, empty, or an earlier demo (it holds MARKER);
    a file or another directory there is refused before anything is touched."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out} is a file; the demo writes a directory (choose another `out_dir`)")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ValueError(f"{out} exists and is not an attnkit demo directory; choose another `out_dir`")

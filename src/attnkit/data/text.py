"""Reading parallel text: plain or .gz, one sentence per line, strict UTF-8.

Every problem is a one-line error naming the file (and line): a missing file,
bytes that are not UTF-8, source/target files of different lengths, nothing
left to train on. Empty lines are skipped with their pair and counted.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path


def read_lines(path: str | Path) -> list[str]:
    """All lines of a text file (plain or .gz), without line endings."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise ValueError(f"{path}: not a readable gzip file ({err})") from None
    return decode_lines(raw, str(path))


def decode_lines(raw: bytes, name: str) -> list[str]:
    """Strict UTF-8 bytes -> lines; the error names ``name`` and the line number."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{name}: line {line} is not valid UTF-8 (byte {raw[err.start]:#04x})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


@dataclass
class ParallelText:
    src: list[str]
    tgt: list[str]
    skipped_empty: int = 0  # pairs dropped because one side was empty

    def __len__(self) -> int:
        return len(self.src)


def read_parallel(src_path: str | Path, tgt_path: str | Path, *, allow_empty: bool = False) -> ParallelText:
    """Aligned sentence pairs; pairs with an empty side are skipped and counted."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise ValueError(
            f"parallel files differ in length: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)} "
            f"(line {min(len(src), len(tgt)) + 1} has no partner)"
        )
    pairs = [(s.strip(), t.strip()) for s, t in zip(src, tgt)]
    kept = [(s, t) for s, t in pairs if s and t]
    if not kept and not allow_empty:
        raise ValueError(f"no sentence pairs in {src_path} / {tgt_path} (all {len(pairs)} lines empty)")
    return ParallelText([s for s, _ in kept], [t for _, t in kept], len(pairs) - len(kept))

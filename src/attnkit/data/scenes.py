"""Captioning scenes made of real handwritten digits, with the place of every word known.

The 1,797 digit scans (8 x 8, 17 grey levels, from UCI) that scikit-learn bundles are split
once by scan: a held-out share of the scans is never used in training scenes. A scene puts
3-5 scans at random, non-overlapping places of a canvas (on a grid of slots, each scan
jittered inside its slot), adds noise, and reads its caption off the scene: the digits in
reading order, row by row from the top, each row from left to right. Rows are the slots'
rows, so the order never hangs on a pixel of jitter. Each word of the caption names one
digit whose box is known, which is what attention correctness
(``evaluation.attention_correctness``) needs.

scikit-learn is an optional dependency: ``pip install 'attnkit[images]'``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .images import Box

DIGIT = 8  # side of a scan, pixels
CAPTION_SLACK = 2  # words a caption may run past the most digits a scene holds before the search stops it


def max_caption_words(digits: tuple[int, int]) -> int:
    """The longest caption the search lets a captioner of scenes with ``digits`` (fewest, most)
    write: one word per digit, plus ``CAPTION_SLACK``, so a model that repeats itself is seen."""
    return digits[1] + CAPTION_SLACK


@dataclass
class Scene:
    image: np.ndarray  # (H, W) float32 in [0, 1]
    words: list[str]  # the caption: the digits in reading order (rows from the top, each from the left)
    boxes: list[Box]  # boxes[i]: where words[i] is


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The bundled scans as (n, 8, 8) float32 in [0, 1] and their labels (n,)."""
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError:
        raise ValueError("the digit scenes need scikit-learn: pip install 'attnkit[images]'") from None
    data = sk_load_digits()
    return (data.images / 16.0).astype(np.float32), data.target.astype(np.int64)


def split_scans(labels: np.ndarray, *, held_out: float = 0.25, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices of training and held-out scans: each digit split in the same proportion."""
    if not 0.0 < held_out < 1.0:
        raise ValueError(f"the held-out share must be in (0, 1), got {held_out}")
    rng = np.random.default_rng(seed)
    train: list[int] = []
    test: list[int] = []
    for digit in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == digit))
        cut = max(1, round(len(idx) * held_out))
        test.extend(idx[:cut])
        train.extend(idx[cut:])
    return np.sort(np.array(train)), np.sort(np.array(test))


def make_scene(
    scans: np.ndarray,
    labels: np.ndarray,
    pool: np.ndarray,
    rng: np.random.Generator,
    *,
    size: int = 32,
    count: tuple[int, int] = (3, 5),
    noise: float = 0.05,
) -> Scene:
    """One scene from the scans ``pool`` (indices into ``scans``/``labels``)."""
    slots_per_side = size // (DIGIT + 2)
    if slots_per_side < 2:
        raise ValueError(f"a {size}-pixel canvas is too small for several {DIGIT}-pixel digits")
    slot = size // slots_per_side
    lo, hi = count
    n = int(rng.integers(lo, hi + 1))
    if n > slots_per_side**2:
        raise ValueError(f"{n} digits do not fit on a {size}-pixel canvas")
    image = rng.normal(0.0, noise, (size, size)).astype(np.float32) if noise > 0 else np.zeros((size, size), np.float32)
    placed: list[tuple[Box, int]] = []
    for cell in sorted(rng.choice(slots_per_side**2, size=n, replace=False)):  # row-major: reading order
        r, c = divmod(int(cell), slots_per_side)
        top = r * slot + int(rng.integers(0, slot - DIGIT + 1))
        left = c * slot + int(rng.integers(0, slot - DIGIT + 1))
        scan = int(rng.choice(pool))
        image[top : top + DIGIT, left : left + DIGIT] += scans[scan]
        placed.append((Box(top, left, DIGIT, DIGIT), int(labels[scan])))
    return Scene(np.clip(image, 0.0, 1.0), [str(d) for _, d in placed], [b for b, _ in placed])


def make_scenes(
    n: int,
    *,
    held_out: bool = False,
    seed: int = 0,
    size: int = 32,
    count: tuple[int, int] = (3, 5),
    noise: float = 0.05,
) -> list[Scene]:
    """``n`` scenes from the training scans, or (``held_out``) from scans no training scene uses."""
    scans, labels = load_digits()
    train, test = split_scans(labels)
    rng = np.random.default_rng([seed, int(held_out)])
    pool = test if held_out else train
    return [make_scene(scans, labels, pool, rng, size=size, count=count, noise=noise) for _ in range(n)]


def truth_path(image: Path) -> Path:
    """Where an image file's truth lies: beside it, NAME.json."""
    return image.with_suffix(".json")


def write_truth(scene: Scene, image: Path) -> Path:
    """The scene's words and each one's box beside its image file (``truth_path``), for
    ``attnkit caption`` to draw: {"words": [...], "boxes": [[top, left, height, width], ...]}."""
    from ..atomic import write_text

    boxes = [[b.top, b.left, b.height, b.width] for b in scene.boxes]
    return write_text(truth_path(image), json.dumps({"words": scene.words, "boxes": boxes}))


def read_truth(image: Path, pixels: np.ndarray) -> Scene | None:
    """The scene of an image file whose truth lies beside it (``write_truth``), its pixels
    ``pixels``; None without one. A truth file that is not such JSON is one clear error."""
    path = truth_path(image)
    if not path.is_file():
        return None
    try:
        got = json.loads(path.read_text(encoding="utf-8"))
        words = [str(w) for w in got["words"]]
        boxes = [Box(*(int(x) for x in b)) for b in got["boxes"]]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f'{path}: not a truth file ({{"words": [...], "boxes": [[top, left, height, width], ...]}}): {e}'
        ) from None
    if len(words) != len(boxes):
        raise ValueError(f"{path}: {len(words)} words but {len(boxes)} boxes")
    return Scene(pixels, words, boxes)

"""Attention correctness (Liu et al. 2017, "Attention Correctness in Neural Image Captioning"):
for a word that names an object, the share of its attention that falls inside the object's box.

The attention is over a grid of regions (gh x gw) that tiles an H x W image; each region's
weight is spread evenly over its pixels, so a region the box cuts contributes in proportion
to its area inside the box. The uniform baseline, the share a model that attends everywhere
alike would get, is the box's share of the image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..data.images import Box


def _overlap(start: int, length: int, cells: int, size: int) -> np.ndarray:
    """Share of each of ``cells`` equal intervals tiling [0, size) that lies in [start, start + length)."""
    edges = np.linspace(0.0, size, cells + 1)
    inside = np.clip(np.minimum(edges[1:], start + length) - np.maximum(edges[:-1], start), 0.0, None)
    return inside / np.diff(edges)


def attention_in_box(weights: np.ndarray, box: Box, image_size: tuple[int, int]) -> float:
    """weights (gh, gw) over regions tiling an image of ``image_size`` (H, W) -> the share of
    their total inside ``box``."""
    if weights.ndim != 2:
        raise ValueError(f"weights must be a (rows, columns) grid, got shape {weights.shape}")
    h, w = image_size
    if box.top < 0 or box.left < 0 or box.top + box.height > h or box.left + box.width > w:
        raise ValueError(f"{box} is not inside the {h} x {w} image")
    total = float(weights.sum())
    if total <= 0:
        raise ValueError("the attention weights sum to zero")
    rows = _overlap(box.top, box.height, weights.shape[0], h)
    cols = _overlap(box.left, box.width, weights.shape[1], w)
    return float(rows @ weights @ cols) / total


@dataclass
class Correctness:
    score: float  # mean share of a naming word's attention inside its box
    uniform: float  # the same for uniform attention: mean box share of the image
    words: int  # words averaged over

    def __str__(self) -> str:
        return f"attention correctness {self.score:.3f} (uniform attention: {self.uniform:.3f}; {self.words} words)"


def attention_correctness(
    maps: Sequence[np.ndarray], boxes: Sequence[Box | None], image_size: tuple[int, int]
) -> Correctness:
    """Average over the words with a box (``None``: a word that names nothing, skipped)."""
    if len(maps) != len(boxes):
        raise ValueError(f"{len(maps)} attention maps but {len(boxes)} boxes")
    h, w = image_size
    pairs = [(m, b) for m, b in zip(maps, boxes) if b is not None]
    if not pairs:
        raise ValueError("no word has a box to score")
    scores = [attention_in_box(m, b, image_size) for m, b in pairs]
    uniform = [b.height * b.width / (h * w) for _, b in pairs]
    return Correctness(float(np.mean(scores)), float(np.mean(uniform)), len(pairs))

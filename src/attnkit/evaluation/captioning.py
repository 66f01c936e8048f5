"""How well a captioning model reads held-out scenes: caption exact match, BLEU, and
attention correctness (``correctness.py``) next to its uniform-attention baseline.

Attention correctness is scored on the words the model got right: word i of a caption
is scored when it equals word i of the reference, since only then is it known which
digit (which box) it names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.images import Box
from ..data.scenes import CAPTION_SLACK, Scene, read_truth
from ..data.vocabulary import WordVocabulary
from ..inference.caption import Caption, caption_images
from ..models.interface import ImageCaptioner
from ..search import SearchOptions
from .correctness import Correctness, attention_correctness, attention_in_box
from .metrics import bleu


@dataclass
class CaptionScores:
    exact: float  # % of captions equal to the reference
    bleu: float  # corpus BLEU of the words (sacreBLEU, tokenize none)
    correctness: Correctness
    scenes: int

    def __str__(self) -> str:
        return f"{self.scenes} held-out scenes: exact match {self.exact:.1f}%, BLEU {self.bleu:.1f}, {self.correctness}"


def named_boxes(caption: Caption, scene: Scene) -> tuple[list[Box | None], list[float | None]]:
    """For each word of ``caption``: the box of the digit it names (None unless the word equals
    the reference word in its place) and the share of its attention inside that box."""
    boxes = [
        scene.boxes[i] if i < len(scene.words) and scene.words[i] == w else None for i, w in enumerate(caption.words)
    ]
    inside = [
        None if b is None else attention_in_box(caption.attention[i], b, caption.image.shape[:2])
        for i, b in enumerate(boxes)
    ]
    return boxes, inside


def truth_boxes(path: Path, caption: Caption) -> tuple[list[Box | None] | None, list[float | None] | None]:
    """For an image file with its truth beside it (``data.scenes.write_truth``): each word's box
    (None where the word is not the true one in its place) and the share of its attention inside
    that box; (None, None) without one."""
    scene = read_truth(path, caption.image)
    return (None, None) if scene is None else named_boxes(caption, scene)


def score_captions(captions: Sequence[Caption], scenes: Sequence[Scene]) -> CaptionScores:
    """Compare ``captions`` with the scenes they were made from."""
    if len(captions) != len(scenes):
        raise ValueError(f"{len(captions)} captions for {len(scenes)} scenes")
    hyps = [" ".join(c.words) for c in captions]
    refs = [" ".join(s.words) for s in scenes]
    maps: list[np.ndarray] = []
    boxes: list[Box | None] = []
    for cap, scene in zip(captions, scenes):
        maps.extend(cap.attention)
        boxes.extend(named_boxes(cap, scene)[0])
    size = scenes[0].image.shape if scenes else (1, 1)
    exact = 100.0 * float(np.mean([h == r for h, r in zip(hyps, refs)])) if hyps else 0.0
    if any(b is not None for b in boxes):
        correct = attention_correctness(maps, boxes, size)
    else:
        correct = Correctness(float("nan"), float("nan"), 0)
    return CaptionScores(exact, bleu(hyps, refs, tokenize="none").score, correct, len(scenes))


def evaluate_captions(
    model: ImageCaptioner,
    vocab: WordVocabulary,
    scenes: Sequence[Scene],
    options: SearchOptions | None = None,
    *,
    layer: int | None = -1,
    max_words: int | None = None,
) -> tuple[CaptionScores, list[Caption]]:
    """Caption ``scenes`` (at most ``max_words`` words each; default: the longest scene's + 2)
    and score them; also returns the captions."""
    max_words = max_words or max(len(s.words) for s in scenes) + CAPTION_SLACK
    captions = caption_images(
        model, vocab, np.stack([s.image for s in scenes]), options, max_words=max_words, layer=layer
    )
    return score_captions(captions, scenes), captions

"""Caption images with a trained captioning model: image -> regions -> search -> words,
keeping each word's attention over the image regions.

An image file is read in colour (``data.images.read_image``: PNG, JPEG and whatever else
Pillow reads) and the model reads its luma; it must have the size the model was trained on (no silent resizing: a resized digit is
not what the model learned to read).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..data import collate_images
from ..data.images import greyscale, read_image
from ..data.scenes import max_caption_words
from ..data.vocabulary import WordVocabulary
from ..models.image import region_maps
from ..models.interface import ImageCaptioner
from ..search import SearchOptions, beam_search, greedy_search


@dataclass
class Caption:
    """One image's caption. ``attention`` (t, gh, gw): each word's attention over the grid of
    regions (``caption_images``' ``layer``; t words, the end-of-caption step left out);
    ``region``: the side of a region in pixels."""

    image: np.ndarray  # (H, W) greyscale or (H, W, 3) RGB in [0, 1], as given
    words: list[str]
    score: float
    attention: np.ndarray
    region: int


def caption_images(
    model: ImageCaptioner,
    vocab: WordVocabulary,
    images: np.ndarray,
    options: SearchOptions | None = None,
    *,
    max_words: int = 10,
    layer: int | None = -1,
    batch_size: int = 256,
) -> list[Caption]:
    """images (n, H, W) greyscale or (n, H, W, 3) RGB in [0, 1] -> a Caption each, with its words'
    attention: the mean over the heads of decoder layer ``layer`` (None: over every layer and head).
    The model reads the images' luma; each Caption keeps its image as given, in colour if it was."""
    if images.ndim not in (3, 4) or (images.ndim == 4 and images.shape[-1] != 3):
        raise ValueError(f"images must be (n, height, width) or (n, height, width, 3), got shape {images.shape}")
    shown, images = images, greyscale(images)
    options = options or SearchOptions(beam=1)
    options = SearchOptions(
        beam=options.beam, penalty=options.penalty, alpha=options.alpha, max_len_ratio=0.0, max_len_extra=max_words
    )
    device = model.output_projection.weight.device
    grid = model.region_grid(*images.shape[1:])
    region = images.shape[1] // grid[0]
    out: list[Caption] = []
    for start in range(0, len(images), batch_size):
        chunk = images[start : start + batch_size]
        originals = shown[start : start + batch_size]
        batch = collate_images(chunk, None, np.arange(len(chunk))).to(device)
        search = greedy_search if options.beam == 1 else beam_search
        with torch.inference_mode():
            result = search(model, batch.src, batch.src_mask, options, need_weights=True)
        for image, hyps in zip(originals, result.nbest):
            hyp = hyps[0]
            assert hyp.attention is not None  # searched with need_weights
            att = hyp.attention.mean(axis=(0, 1)) if layer is None else hyp.attention[layer].mean(0)
            weights = att[: len(hyp.tokens)]  # (t, r)
            out.append(Caption(image, vocab.tgt_pieces(hyp.tokens), hyp.score, region_maps(weights, grid), region))
    return out


def caption_files(
    model_dir: str | Path,
    paths: list[Path],
    options: SearchOptions | None = None,
    *,
    weights: dict | None = None,
) -> list[Caption]:
    """`attnkit caption`: caption image files and print one line per image."""
    from ..loading.model_dir import load_model

    model, vocab, cfg = load_model(model_dir, task="caption", **(weights or {}))
    size = cfg.data.scenes.image_size
    images = np.stack([read_image(p, size) for p in paths])  # every file checked before any output
    captions = caption_images(model, vocab, images, options, max_words=max_caption_words(cfg.data.scenes.digits))
    for path, cap in zip(paths, captions):
        print(f"{path}\t{' '.join(cap.words)}")
    return captions

"""The image-attention viewer: one self-contained HTML file (no network) in which hovering
over a word of a caption lays that word's attention over the image, region by region."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..atomic import write_text
from ..data.scenes import Scene
from ..evaluation.captioning import named_boxes
from ..inference.caption import Caption
from .html import DIGITS, fill_template


def caption_json(cap: Caption, name: str, scene: Scene | None = None) -> dict:
    """One image as the page draws it: pixels 0-255, words, maps (t, gh, gw); with its scene,
    the reference, the box of each correctly named digit and the attention share inside it."""
    boxes = inside = None
    if scene is not None:
        found, shares = named_boxes(cap, scene)
        boxes = [None if b is None else vars(b) for b in found]
        inside = [None if x is None else round(x, DIGITS) for x in shares]
    return {
        "name": name,
        "words": cap.words,
        "image": np.round(np.clip(cap.image, 0, 1) * 255).astype(int).tolist(),  # grey or RGB, as given
        "attention": np.round(cap.attention.astype(np.float64), DIGITS).tolist(),
        "reference": " ".join(scene.words) if scene is not None else None,
        "boxes": boxes,
        "inside": inside,
    }


def caption_page(
    captions: Sequence[Caption],
    names: Sequence[str],
    scenes: Sequence[Scene] | None = None,
    *,
    title: str = "attnkit: attention over an image",
    live: dict | None = None,
) -> str:
    """The page: ``captions`` to view, or (``live``: the studio's description) none yet, with
    controls that ask the server to caption a new held-out scene or an uploaded image."""
    if not captions and live is None:
        raise ValueError("nothing to view: no captions")
    if len(names) != len(captions) or (scenes is not None and len(scenes) != len(captions)):
        raise ValueError("one name (and scene, if given) per caption")
    data = {
        "examples": [
            caption_json(c, n, None if scenes is None else scenes[i]) for i, (c, n) in enumerate(zip(captions, names))
        ],
        "live": live,
    }
    return fill_template("captions.html", data, title=title, COLOURS="colours.js")


def write_caption_html(
    path: str | Path,
    captions: Sequence[Caption],
    names: Sequence[str],
    scenes: Sequence[Scene] | None = None,
    *,
    title: str = "attnkit: attention over an image",
) -> Path:
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"the viewer is written as .html, got {str(path)!r}")
    return write_text(path, caption_page(captions, names, scenes, title=title))

"""Images as the captioner reads them: one reader for files and uploads, kept in colour,
and the pixel box that names where an object is.

Nothing here knows about the digit scenes; ``data.scenes`` is one source of images and boxes.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

# ITU-R BT.601 luma, the weights PIL's "L" mode uses
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


@dataclass(frozen=True)
class Box:
    """A rectangle of pixels: rows top .. top+height-1, columns left .. left+width-1."""

    top: int
    left: int
    height: int
    width: int

    def overlaps(self, other: Box) -> bool:
        return (
            self.top < other.top + other.height
            and other.top < self.top + self.height
            and self.left < other.left + other.width
            and other.left < self.left + self.width
        )


def open_rgb(raw: bytes, *, name: str = "the image") -> PILImage:
    """The bytes of an image file (PNG, JPEG, ...) as an RGB PIL image (a greyscale file gives
    three equal channels); ValueError with one line naming ``name`` for bytes that are not an image."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(raw)) as img:
            img.load()
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise ValueError(f"{name} is not a readable image ({type(err).__name__})") from None


def decode_image(raw: bytes, size: int, *, name: str = "the image") -> np.ndarray:
    """The bytes of an image file (PNG, JPEG, ...) -> (size, size, 3) RGB float32 in [0, 1].

    Raises ValueError with one line naming ``name`` for bytes that are not an image or an
    image of another size."""
    rgb = open_rgb(raw, name=name)
    if rgb.size != (size, size):
        w, h = rgb.size
        raise ValueError(f"{name} is {w} x {h} pixels; this model reads {size} x {size} images")
    return np.asarray(rgb, dtype=np.float32) / 255.0


def read_image(path: str | Path, size: int) -> np.ndarray:
    """An image file -> (size, size, 3) RGB float32 in [0, 1]; one-line errors."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image not found: {path}")
    return decode_image(path.read_bytes(), size, name=str(path))


def greyscale(images: np.ndarray) -> np.ndarray:
    """(..., H, W, 3) RGB -> (..., H, W) luma; (..., H, W) greyscale is returned as it is."""
    if images.shape[-1] == 3 and images.ndim >= 3:
        return (images @ LUMA).astype(np.float32)
    return images.astype(np.float32, copy=False)

"""Reading images: files and uploads through one reader, in colour; the model's luma matches PIL's."""

import numpy as np
import pytest
from PIL import Image

from attnkit.data.images import Box, decode_image, greyscale, read_image


def test_read_image_keeps_colour_and_gives_one_line_errors(tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "rgb.png")
    np.testing.assert_allclose(read_image(tmp_path / "rgb.png", 32), pixels / 255.0, atol=1e-6)
    grey = pixels[..., 0]
    Image.fromarray(grey).save(tmp_path / "grey.png")
    image = read_image(tmp_path / "grey.png", 32)
    assert image.shape == (32, 32, 3)
    np.testing.assert_allclose(image, np.stack([grey / 255.0] * 3, -1), atol=1e-6)
    Image.fromarray(grey[:, :20]).save(tmp_path / "small.png")
    with pytest.raises(ValueError, match=r"small.png is 20 x 32 pixels; this model reads 32 x 32 images"):
        read_image(tmp_path / "small.png", 32)
    (tmp_path / "bad.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="bad.png is not a readable image"):
        read_image(tmp_path / "bad.png", 32)
    with pytest.raises(FileNotFoundError, match="image not found"):
        read_image(tmp_path / "none.png", 32)
    with pytest.raises(ValueError, match="^the upload is not a readable image"):
        decode_image(b"\x89PNG broken", 32, name="the upload")


def test_greyscale_is_pils_luma_and_leaves_grey_images_alone():
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    reference = np.asarray(Image.fromarray(pixels).convert("L"), dtype=np.float32) / 255.0
    # PIL rounds its luma to whole grey levels: within half a level
    np.testing.assert_allclose(greyscale(pixels / np.float32(255.0)), reference, atol=0.5 / 255 + 1e-6)
    grey = rng.random((2, 16, 16), dtype=np.float32)
    assert greyscale(grey) is grey or np.array_equal(greyscale(grey), grey)
    assert greyscale(rng.random((2, 16, 16, 3))).shape == (2, 16, 16)


def test_boxes_overlap_only_when_they_share_a_pixel():
    a = Box(0, 0, 4, 4)
    assert a.overlaps(Box(3, 3, 2, 2)) and not a.overlaps(Box(4, 0, 2, 2)) and not a.overlaps(Box(0, 4, 2, 2))

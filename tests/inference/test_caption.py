"""Captioning an image file: reading it, the overlay figure's geometry, scoring, the viewer."""

import numpy as np
import pytest
from PIL import Image

from attnkit.data.scenes import Box, Scene
from attnkit.evaluation.captioning import score_captions
from attnkit.inference.caption import Caption, read_image
from attnkit.plots.images import plot_caption, upsample
from attnkit.viewer.captions import caption_page


def test_read_image_gives_grey_levels_and_one_line_errors(tmp_path):
    pixels = (np.arange(32 * 32).reshape(32, 32) % 256).astype(np.uint8)
    Image.fromarray(pixels).save(tmp_path / "a.png")
    Image.fromarray(np.stack([pixels] * 3, -1)).save(tmp_path / "rgb.jpg", quality=100)
    np.testing.assert_allclose(read_image(tmp_path / "a.png", 32), pixels / 255.0, atol=1e-6)
    assert read_image(tmp_path / "rgb.jpg", 32).shape == (32, 32)
    Image.fromarray(pixels[:, :20]).save(tmp_path / "small.png")
    with pytest.raises(ValueError, match=r"is 20 x 32 pixels; this model reads 32 x 32 images"):
        read_image(tmp_path / "small.png", 32)
    (tmp_path / "bad.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="not a readable image"):
        read_image(tmp_path / "bad.png", 32)
    with pytest.raises(FileNotFoundError):
        read_image(tmp_path / "none.png", 32)


def test_overlay_lights_exactly_the_pixels_of_the_attended_region():
    image = np.zeros((16, 12), np.float32)
    weights = np.zeros((4, 3))
    weights[2, 1] = 1.0  # region at row 2, column 1: pixels 8..11 x 4..7
    pixels = upsample(weights, image.shape)
    assert pixels.shape == (16, 12) and pixels[8:12, 4:8].min() == 1.0 and pixels.sum() == 16
    fig = plot_caption(image, ["7"], weights[None], boxes=[Box(8, 4, 4, 4)], inside=[1.0])
    panel = fig.axes[1]
    base, heat = panel.images
    assert base.get_extent() == heat.get_extent() == [-0.5, 11.5, 15.5, -0.5]  # the same pixel grid
    np.testing.assert_array_equal(heat.get_array(), pixels)
    assert "100% in box" in panel.get_title()
    with pytest.raises(ValueError, match="words"):
        plot_caption(image, ["7", "1"], weights[None])


def _scene_and_caption(words, hyp):
    boxes = [Box(0, 0, 8, 8), Box(8, 8, 8, 8)]
    attention = np.zeros((len(hyp), 2, 2))
    attention[0, 0, 0] = 1.0  # word 0 looks at its box
    if len(hyp) > 1:
        attention[1] = 0.25  # word 1 looks everywhere
    image = np.zeros((16, 16), np.float32)
    return Scene(image, words, boxes), Caption(image, hyp, 0.0, attention, 8)


def test_scores_count_only_correctly_named_words():
    scene, right = _scene_and_caption(["3", "5"], ["3", "5"])
    _, wrong = _scene_and_caption(["3", "5"], ["3", "6"])
    scores = score_captions([right, wrong], [scene, scene])
    assert scores.exact == 50.0
    # words scored: right[0] (1.0), right[1] (0.25), wrong[0] (1.0); wrong[1] names the wrong digit
    assert scores.correctness.words == 3
    assert scores.correctness.score == pytest.approx((1.0 + 0.25 + 1.0) / 3)
    assert scores.correctness.uniform == pytest.approx(0.25)
    html = caption_page([right, wrong], ["a", "b"], [scene, scene])
    assert '"inside":[1.0,0.25]' in html and '"inside":[1.0,null]' in html and "</script>" in html
    with pytest.raises(ValueError, match="one name"):
        caption_page([right], ["a", "b"])


def test_caption_command_prints_each_image_and_draws_its_attention(tiny_captioner, tmp_path, capsys):
    from attnkit.cli import main
    from attnkit.data.scenes import make_scenes

    for i, scene in enumerate(make_scenes(2, held_out=True, seed=5)):
        Image.fromarray(np.round(scene.image * 255).astype(np.uint8)).save(tmp_path / f"s{i}.png")
    out = tmp_path / "att.png"
    assert (
        main(["caption", str(tiny_captioner), str(tmp_path / "s0.png"), str(tmp_path / "s1.png"), "-o", str(out)]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{tmp_path / 's0.png'}\t") and lines[1].startswith(f"{tmp_path / 's1.png'}\t")
    words = [line.split("\t")[1] for line in lines[:2]]
    for i, w in enumerate(words):  # an untrained model may say nothing; a figure for each caption with words
        assert (tmp_path / f"att_{i + 1}.png").is_file() == bool(w)


def test_loaded_captioner_captions_arrays_with_attention_over_its_grid(tiny_captioner):
    from attnkit.inference.caption import caption_images
    from attnkit.loading.model_dir import load_model

    model, vocab, _cfg = load_model(tiny_captioner, task="caption")
    images = np.random.default_rng(0).random((3, 32, 32)).astype(np.float32)
    for cap in caption_images(model, vocab, images, max_words=4):
        assert len(cap.words) <= 4 and cap.attention.shape == (len(cap.words), 8, 8) and cap.region == 4
        np.testing.assert_allclose(cap.attention.sum(axis=(1, 2)), 1.0, atol=1e-5)

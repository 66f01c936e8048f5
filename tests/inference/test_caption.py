"""Captioning an image file: reading it, the overlay figure's geometry, scoring, the viewer."""

import numpy as np
import pytest
from PIL import Image

from attnkit.data.scenes import Box, Scene
from attnkit.evaluation.captioning import score_captions
from attnkit.inference.caption import Caption
from attnkit.plots.images import plot_caption, upsample
from attnkit.search import SearchOptions
from attnkit.viewer.captions import caption_page


def test_overlay_lights_exactly_the_pixels_of_the_attended_region():
    image = np.zeros((16, 12), np.float32)
    weights = np.zeros((4, 3))
    weights[2, 1] = 1.0  # region at row 2, column 1: pixels 8..11 x 4..7
    pixels = upsample(weights, image.shape)
    assert pixels.shape == (16, 12) and pixels[8:12, 4:8].min() == 1.0 and pixels.sum() == 16
    image[9:11, 5:7] = 1.0  # a patch of ink inside the attended region
    fig = plot_caption(image, ["7"], weights[None], boxes=[Box(8, 4, 4, 4)], inside=[1.0])
    (base,), (heat,) = fig.axes[0].images, fig.axes[1].images
    assert base.get_extent() == heat.get_extent() == [-0.5, 11.5, 15.5, -0.5]  # the same pixel grid
    np.testing.assert_array_equal(heat.get_array(), pixels)
    assert heat.get_alpha() is None and heat.norm.vmin == 0.0 and heat.norm.vmax == 1.0  # opaque, fixed 0-1
    assert "100% in box" in fig.axes[1].get_title()
    (ink,) = fig.axes[1].collections[0].allsegs  # the ink's outline: around pixels 9..10 x 5..6
    outline = np.concatenate(ink)
    assert (
        outline[:, 0].min() >= 4 and outline[:, 0].max() <= 7 and outline[:, 1].min() >= 8 and outline[:, 1].max() <= 11
    )
    colour = plot_caption(np.stack([image] * 3, -1), ["7"], weights[None])
    assert colour.axes[0].images[0].get_array().shape == (16, 12, 3)  # a colour image is shown in colour
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
    assert all(words)  # this fixture's model always writes words, so a figure is checked for each image
    for i in range(2):
        assert (tmp_path / f"att_{i + 1}.png").stat().st_size > 1000


def test_loaded_captioner_captions_arrays_with_attention_over_its_grid(tiny_captioner):
    from attnkit.inference.caption import caption_images
    from attnkit.loading.model_dir import load_model

    model, vocab, _cfg = load_model(tiny_captioner, task="caption")
    images = np.random.default_rng(0).random((3, 32, 32)).astype(np.float32)
    for cap in caption_images(model, vocab, images, max_words=4):
        assert len(cap.words) <= 4 and cap.attention.shape == (len(cap.words), 8, 8) and cap.region == 4
        np.testing.assert_allclose(cap.attention.sum(axis=(1, 2)), 1.0, atol=1e-5)


def test_attnkit_load_gives_a_captioner_whose_record_is_the_searchs_attention(tiny_captioner, tmp_path):
    """A captioner through attnkit.load: its record of the caption (teacher-forced, one forward
    pass) equals the attention the search kept while writing it, layer by layer; its walk-through
    recomputes the recorded weights; verbs it lacks are one line."""
    import attnkit
    from attnkit.data.scenes import max_caption_words
    from attnkit.inference.caption import caption_images

    model = attnkit.load(tiny_captioner)
    assert model.capabilities.writes == "caption" and model.capabilities.reads == "image"
    image = np.random.default_rng(1).random((32, 32, 3)).astype(np.float32)
    Image.fromarray((image * 255).round().astype(np.uint8)).save(tmp_path / "noise.png")
    (prepared,) = model.prepare([str(tmp_path / "noise.png")], targets=[" ".join(model.vocab.words[4:7])])
    record = model.capture(prepared)
    assert record.grid == (8, 8) and len(record.src_tokens) == 64 and record.kinds == ["encoder", "decoder", "cross"]
    cross = record.get("cross")  # (layers, heads, words + </s>, regions)
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)
    # the search's own attention for its own caption: the same numbers from the recorded forward pass
    (own,) = model.prepare([str(tmp_path / "noise.png")], options=SearchOptions(beam=1))
    found = caption_images(
        model.model, model.vocab, own.image[None], max_words=max_caption_words(model.cfg.data.scenes.digits)
    )[0]
    assert found.words == own.tgt_out_tokens[:-1]
    mine = model.capture(own).select("cross", -1, "mean")[: len(found.words)].reshape(found.attention.shape)
    np.testing.assert_allclose(mine, found.attention, atol=1e-5)
    walk = model.walkthrough(prepared, kind="cross", layer=-1, head=1, query=2)
    np.testing.assert_allclose(walk.weights, cross[-1, 1, 2], atol=1e-6)
    assert model.caption(tmp_path / "noise.png") == own.output
    with pytest.raises(ValueError, match="is a captioner: it does not translate \\(it can: caption\\)"):
        model.translate("a b")


def test_the_head_atlas_and_ablation_run_on_a_captioner(tiny_captioner, tmp_path, capsys):
    from attnkit.cli import main
    from attnkit.data.scenes import make_scenes

    for i, scene in enumerate(make_scenes(2, held_out=True, seed=5)):
        Image.fromarray(np.round(scene.image * 255).astype(np.uint8)).save(tmp_path / f"s{i}.png")
    listed = tmp_path / "images.txt"
    listed.write_text(f"{tmp_path / 's0.png'}\n{tmp_path / 's1.png'}\n")
    table = tmp_path / "atlas.csv"
    code = main(
        ["heads", str(tiny_captioner), "-i", str(listed), "--detect", "all", "--ablate", "zero", "--table", str(table)]
    )
    out = capsys.readouterr().out
    assert code == 0 and "loss (nats per output token) with every head" in out
    assert "cross-attention: 1 layers x 2 heads over 2 input(s)" in out and "importance (Michel" in out
    rows = table.read_text().splitlines()
    assert rows[0].startswith("kind,layer,head,") and "ablation" in rows[0] and len(rows) > 1


def test_an_images_truth_beside_it_gives_each_correctly_named_word_its_box(tmp_path):
    """The demo writes each example scene's words and boxes beside its image; `attnkit caption`
    outlines a word's true box where the word is the true one in its place, in either figure."""
    from matplotlib.patches import Rectangle

    from attnkit.data.scenes import read_truth, write_truth
    from attnkit.evaluation.captioning import truth_boxes
    from attnkit.plots.images import plot_caption_methods
    from attnkit.plots.layout import WIDTH

    scene, caption = _scene_and_caption(["3", "5"], ["3", "6"])
    image = tmp_path / "scene.png"
    assert truth_boxes(image, caption) == (None, None)  # no truth beside it: no boxes
    write_truth(scene, image)
    assert read_truth(image, scene.image).boxes == scene.boxes
    boxes, inside = truth_boxes(image, caption)
    assert boxes == [Box(0, 0, 8, 8), None] and inside == [1.0, None]  # "6" is not the scene's second digit
    coloured = Caption(np.stack([caption.image] * 3, -1), caption.words, 0.0, caption.attention, 8)
    assert truth_boxes(image, coloured) == (boxes, inside)  # a colour file's truth reads the same
    maps = caption.attention.reshape(2, 2, 2)
    shares = [[1.0, None], [0.25, None]]  # per method, each word's share inside its box
    fig = plot_caption_methods(caption.image, caption.words, [("a", maps), ("b", maps)], boxes=boxes, inside=shares)
    outlined = [ax for ax in fig.axes if any(isinstance(p, Rectangle) for p in ax.patches)]
    assert len(outlined) == 2  # the first word's panel in each method's row
    assert [ax.get_xlabel() for ax in outlined] == ["100% in box", "25% in box"]  # each under its own panel
    assert fig.get_figwidth() <= WIDTH
    (tmp_path / "scene.json").write_text('{"words": ["3"], "boxes": [[0, 0, 8]]}')
    with pytest.raises(ValueError, match="not a truth file"):
        truth_boxes(image, caption)


def test_caption_attributions_draw_the_true_boxes_beside_the_image(tiny_captioner, tmp_path, capsys):
    """`attnkit caption --attribute all` on a scene whose truth lies beside it names the model in
    its title and outlines the boxes of the words it names rightly."""
    from attnkit.cli import main
    from attnkit.data.scenes import make_scenes, write_truth

    (scene,) = make_scenes(1, held_out=True, seed=5)
    image = tmp_path / "scene.png"
    grey = np.round(scene.image * 255).astype(np.uint8)
    Image.fromarray(np.stack([grey] * 3, -1)).save(image)  # a colour file, as images usually are
    write_truth(scene, image)
    out = tmp_path / "methods.png"
    assert main(["caption", str(tiny_captioner), str(image), "--attribute", "all", "-o", str(out)]) == 0
    assert out.stat().st_size > 10_000

"""A vision-language decoder (a tiny LLaVA saved with its processor): the image's tokens in its
decoder's sequence, every map exact against transformers' eager attention, its outputs unchanged,
and each word's attention over the image in the record, the file, the figure, the page and the
studio."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

import attnkit
from tiny_hf import build_vision_language


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    return build_vision_language(tmp_path_factory.mktemp("vl") / "llava")


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    from PIL import Image

    path = tmp_path_factory.mktemp("img") / "photo.png"
    rng = np.random.default_rng(0)
    Image.fromarray((rng.random((40, 60, 3)) * 255).astype(np.uint8)).save(path)  # wider than tall: cropped
    return path


def _eager(llava):
    import transformers as T

    return T.LlavaForConditionalGeneration.from_pretrained(llava, attn_implementation="eager").eval()


def test_a_word_s_attention_over_the_image_is_exact(llava, photo):
    model = attnkit.load(str(llava))
    can = model.capabilities
    assert can.images and can.continues and can.kinds == ("encoder", "decoder")
    assert can.summary == "vision-language model"
    image = model.read_image(photo.read_bytes(), str(photo))
    assert image.shape == (32, 32, 3)  # the processor's centre crop
    p = model.prepare_image(image, "a dog runs", max_new_tokens=3)
    first, rows, columns = p.image_tokens
    assert (rows, columns) == (4, 4) and p.tgt_in_tokens[first : first + 16] == [
        f"img {r},{c}" for r in range(4) for c in range(4)
    ]
    assert p.tgt_in_tokens[first + 16 : first + 19] == ["a", "dog", "runs"] and len(p.tgt_in_ids) == len(p.src_ids) + 3
    assert p.src_tokens[0] == "[CLS]" and len(p.src_tokens) == 17  # the vision tower's positions
    record = model.capture(p)
    eager = _eager(llava)
    pixels = model.hf.pixels(image)
    with torch.no_grad():
        out = eager(
            input_ids=torch.tensor([p.tgt_in_ids]), pixel_values=pixels, output_attentions=True, use_cache=False
        )
        tower = eager.model.vision_tower(pixels, output_attentions=True)
        mine = model.hf.outputs(p.tgt_in_ids, pixels=pixels)
    for layer, want in enumerate(out.attentions):
        np.testing.assert_allclose(record.get("decoder")[layer], want[0].numpy(), atol=1e-5)
    for layer, want in enumerate(tower.attentions):
        np.testing.assert_allclose(record.get("encoder")[layer], want[0].numpy(), atol=1e-5)
    scale = float(out.logits.abs().max())
    assert float((mine.logits - out.logits).abs().max()) <= 1e-5 * scale  # attnkit's function: the same outputs
    # its continuation is the eager model's greedy one, with the image
    with torch.no_grad():
        greedy = eager.generate(
            torch.tensor([p.src_ids]), pixel_values=pixels, max_new_tokens=3, do_sample=False, pad_token_id=0
        )
    assert greedy[0].tolist() == p.tgt_in_ids


def test_gemma3_s_image_tokens_see_one_another_as_its_own_attention_does(tmp_path, photo):
    """Gemma 3: the image's tokens attend to one another both ways (its token types), its
    language model alternates a sliding-window layer and a global one, its tower has no class
    token; every map and its outputs equal eager attention's, its continuation eager's."""
    import transformers as T

    from tiny_hf import build_gemma3_vision

    path = build_gemma3_vision(tmp_path / "gemma3")
    model = attnkit.load(str(path))
    assert model.capabilities.images and model.capabilities.summary == "vision-language model"
    image = model.read_image(photo.read_bytes(), str(photo))
    p = model.prepare_image(image, "<start_of_image> a dog runs", max_new_tokens=3)
    first, rows, columns = p.image_tokens
    assert (rows, columns) == (4, 4) and p.tgt_in_tokens[first - 1] == "<start_of_image>"
    assert len(p.src_tokens) == 64 and p.src_tokens[0] == "0,0"  # 8 x 8 patches, no [CLS]
    record = model.capture(p)
    eager = T.Gemma3ForConditionalGeneration.from_pretrained(path, attn_implementation="eager").eval()
    pixels = model.hf.pixels(image)
    ids = torch.tensor([p.tgt_in_ids])
    types = (ids == eager.config.image_token_index).long()
    with torch.no_grad():
        out = eager(input_ids=ids, pixel_values=pixels, token_type_ids=types, output_attentions=True, use_cache=False)
        tower = eager.model.vision_tower(pixels, output_attentions=True)
        mine = model.hf.outputs(p.tgt_in_ids, pixels=pixels)
    decoder = record.get("decoder")
    for layer, want in enumerate(out.attentions):
        np.testing.assert_allclose(decoder[layer], want[0].numpy(), atol=1e-5)
    assert decoder[0, :, first, first + 15].min() > 0  # the image's first token sees its last
    for layer, want in enumerate(tower.attentions):
        np.testing.assert_allclose(record.get("encoder")[layer], want[0].numpy(), atol=1e-5)
    assert float((mine.logits - out.logits).abs().max()) <= 1e-5 * float(out.logits.abs().max())
    with torch.no_grad():
        prompt = torch.tensor([p.src_ids])
        greedy = eager.generate(
            prompt,
            pixel_values=pixels,
            token_type_ids=(prompt == eager.config.image_token_index).long(),
            max_new_tokens=3,
            do_sample=False,
            pad_token_id=0,
        )
    assert greedy[0].tolist() == p.tgt_in_ids


def test_its_text_alone_and_what_it_refuses(llava, photo):
    model = attnkit.load(str(llava))
    text = model.prepare(["a dog runs"], max_new_tokens=2)[0]
    assert text.image_tokens is None and model.capture(text).kinds == ["decoder"]  # no image: no tower
    image = model.read_image(photo.read_bytes(), str(photo))
    with pytest.raises(ValueError, match="one image with its text"):
        model.prepare_image(image, "<image> a <image> dog")
    with pytest.raises(ValueError, match="gradient methods read its text alone"):
        model.scorer(model.prepare_image(image, "a dog", max_new_tokens=0))


def test_the_file_the_figure_and_the_page_keep_the_image_tokens(llava, photo, tmp_path):
    from attnkit.inspection import load_records, save_records
    from attnkit.inspection.figures import record_figure

    model = attnkit.load(str(llava))
    record = model.capture(
        model.prepare_image(model.read_image(photo.read_bytes(), "photo"), "a dog", max_new_tokens=2)
    )
    path = save_records(tmp_path / "r.npz", [record], model.info)
    back = load_records(path)[0][0]
    assert back.image_tokens == record.image_tokens and back.image is not None
    np.testing.assert_allclose(back.get("decoder"), record.get("decoder"), atol=1e-6)
    fig = record_figure(back)  # the decoder's words over the image's tokens
    assert len(fig.axes) >= 5 and "image's 4 x 4 tokens" in fig.get_suptitle()
    run = [sys.executable, "-m", "attnkit"]
    page = tmp_path / "page.html"
    r = subprocess.run(
        [*run, "view", str(llava), "a dog runs", "--image", str(photo), "--max-new-tokens", "2", "-o", str(page)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    data = page.read_text()
    assert '"image_tokens": [1, 4, 4]' in data or '"image_tokens":[1,4,4]' in data
    r = subprocess.run([*run, "capture", str(llava), "a dog", "--image", str(tmp_path / "none.png"), "-o", "x.npz"],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "--image" in r.stderr and "Traceback" not in r.stderr


def test_an_image_for_a_text_model_is_one_line(tmp_path, photo):
    from tiny_hf import build

    gpt2 = build("gpt2", tmp_path / "gpt2")
    r = subprocess.run(
        [sys.executable, "-m", "attnkit", "capture", str(gpt2), "a dog", "--image", str(photo), "-o", "x.npz"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "--image is for a vision-language model" in r.stderr


def test_the_studio_takes_an_image_beside_the_text(llava, photo):
    import base64

    from starlette.testclient import TestClient

    from attnkit.server.app import create_app
    from attnkit.server.schema import Models
    from attnkit.server.service import Studio

    with TestClient(
        create_app(Studio([str(llava)])), raise_server_exceptions=False, base_url="http://127.0.0.1"
    ) as client:
        models = client.get("/api/models").json()
        Models.model_validate(models)
        can = models["models"][0]["capabilities"]
        assert can["images"] and can["reads"] == "text" and can["summary"] == "vision-language model"
        image = "data:image/png;base64," + base64.b64encode(photo.read_bytes()).decode()
        r = client.post("/api/translate", json={"text": "a dog", "image": image, "max_new_tokens": 2})
        assert r.status_code == 200, r.text
        example = r.json()["example"]
        assert example["image_tokens"] == [1, 4, 4] and example["image"].startswith("data:image/png")
        assert example["tgt_in_tokens"][1:3] == ["img 0,0", "img 0,1"] and len(example["src_tokens"]) == 17
        plain = client.post("/api/translate", json={"text": "a dog", "max_new_tokens": 2})
        assert plain.status_code == 200 and plain.json()["example"]["image_tokens"] is None
        bad = client.post("/api/translate", json={"text": "a dog", "image": "not base64!"})
        assert bad.status_code == 422 and "not valid base64" in bad.json()["error"]


@pytest.mark.slow  # drives chromium
def test_the_page_lays_a_word_s_attention_over_the_image(browser, llava, photo, tmp_path):
    from attnkit.viewer import write_html

    model = attnkit.load(str(llava))
    record = model.capture(
        model.prepare_image(model.read_image(photo.read_bytes(), "photo"), "a dog", max_new_tokens=2)
    )
    path = write_html(tmp_path / "page.html", [record], model.info)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("#lines line", state="attached")
    page.select_option("#kind", "decoder")
    page.click("#tabs [data-tab=image]")
    page.wait_for_selector("#patch-heat")
    first, rows, columns = record.image_tokens
    after = first + rows * columns
    chips = page.locator("#image-view .chip").all_inner_texts()
    assert chips == record.tgt_in_tokens[after:]  # the words that read the image, none of its tokens
    on = page.inner_text("#image-view .chip.on")
    query = after + chips.index(on)
    assert query == record.prompt_length  # the first word written
    box = page.eval_on_selector(
        "#patch-heat", "c => { const b = c.getBoundingClientRect(); return [b.left, b.top, b.width]; }"
    )
    cell = box[2] / columns
    page.mouse.move(box[0] + 2.5 * cell, box[1] + 1.5 * cell)  # token row 1, column 2
    readout = page.inner_text("#readout")
    want = record.select("decoder", -1, "mean")[query, first + 1 * columns + 2]
    assert f"image token 1,2: weight {want:.4f}" in readout, readout
    page.select_option("#kind", "encoder")  # the vision tower's patches over one another
    page.wait_for_selector("#patch-heat")
    assert page.locator("#image-view .chip").count() == 0
    assert errors == [], errors

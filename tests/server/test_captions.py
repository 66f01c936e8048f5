"""The studio's captioning: /api/caption for uploaded images and new held-out scenes, the
live caption page, and bad requests answered with what is wrong."""

import base64
import io

import numpy as np
import pytest
from PIL import Image
from starlette.testclient import TestClient

from attnkit.data.vocabulary import WordVocabulary
from attnkit.server.app import create_app
from attnkit.server.schema import Caption, Models
from attnkit.server.service import Studio


def png(size=(32, 32)) -> str:
    buf = io.BytesIO()
    Image.fromarray(np.zeros(size[::-1], np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def client(tiny_captioner):
    with TestClient(
        create_app(Studio([str(tiny_captioner)])), raise_server_exceptions=False, base_url="http://127.0.0.1"
    ) as c:
        yield c


def test_a_captioner_is_served_as_a_model_that_can_caption(client):
    models = client.get("/api/models").json()
    Models.model_validate(models)
    (m,) = models["models"]
    can = m["capabilities"]
    assert m["name"] == "model" and can["reads"] == "image" and can["writes"] == "caption" and can["forced"]
    assert can["verbs"] == ["caption"] and can["summary"] == "captioner" and "rollout" not in can["attributions"]
    assert m["info"]["image_size"] == 32 and m["info"]["image_encoder"] == "vit"
    assert '"live":{"models"' in client.get("/").text  # the studio, with the captioner in it
    page = client.get("/captions")
    assert page.status_code == 200 and 'id="upload"' in page.text and '"models":[{' in page.text


def test_the_studio_shows_a_captioners_words_over_the_regions(client, tiny_captioner):
    r = client.post("/api/translate", json={"model": "model", "text": "blank.png", "image": png()})
    assert r.status_code == 200, r.text
    ex = r.json()["example"]
    assert ex["grid"] == [8, 8] and len(ex["src_tokens"]) == 64 and ex["src_tokens"][0] == "0,0"
    assert ex["tgt_out_tokens"][-1] == "</s>" and ex["output"] == r.json()["translation"]
    cross = np.array(ex["maps"]["cross"])
    assert cross.shape[2:] == (len(ex["tgt_out_tokens"]), 64)
    np.testing.assert_allclose(cross.sum(-1), 1, atol=64 * 5e-5)  # 64 weights, each rounded to 4 digits
    # a caption can be forced, as a translation can
    word = WordVocabulary.load(tiny_captioner).words[-1]
    forced = client.post("/api/translate", json={"model": "model", "text": "x", "image": png(), "target": word})
    assert forced.status_code == 200, forced.text
    assert forced.json()["forced"] and forced.json()["example"]["tgt_out_tokens"] == [word, "</s>"]
    r = client.post("/api/translate", json={"model": "model", "text": "x", "image": png(), "target": "zebra"})
    assert r.status_code == 422 and "'zebra' is not a word model knows" in r.json()["error"]
    walk = client.post(
        "/api/explain",
        json={"model": "model", "text": "x", "image": png(), "target": word, "kind": "cross", "query": 0},
    )
    assert walk.status_code == 200, walk.text
    assert walk.json()["max_error"] < 1e-5 and len(walk.json()["weights"]) == 64
    r = client.post("/api/attribute", json={"model": "model", "text": "x", "image": png(), "method": "rollout"})
    assert r.status_code == 422 and "rollout is not run on a captioner" in r.json()["error"]
    r = client.post("/api/attribute", json={"model": "model", "text": "x", "image": png(), "method": "attention"})
    assert r.status_code == 200, r.text
    assert len(r.json()["tokens"]) == 64


def test_caption_an_uploaded_image_and_a_held_out_scene(client):
    r = client.post("/api/caption", json={"model": "model", "image": png()})
    assert r.status_code == 200, r.text
    Caption.model_validate(r.json())  # what the OpenAPI document declares
    ex = r.json()["example"]
    assert ex["name"] == "your image" and ex["reference"] is None and len(ex["image"]) == 32
    assert len(ex["attention"]) == len(ex["words"]) and all(len(a) == 8 and len(a[0]) == 8 for a in ex["attention"])
    r = client.post("/api/caption", json={"scene": 3})  # one captioner: the model may be left out
    assert r.status_code == 200, r.text
    ex = r.json()["example"]
    assert ex["reference"] and len(ex["boxes"]) == len(ex["words"]) == len(ex["inside"])
    assert (
        client.post("/api/caption", json={"scene": 3}).json()["example"]["image"] == ex["image"]
    )  # same seed, same scene


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"image": png((20, 32))}, 422, "the image is 20 x 32 pixels; this model reads 32 x 32 images"),
        ({"image": "data:image/png;base64,bm90IGFuIGltYWdl"}, 422, "not a readable image"),
        ({"image": "***"}, 422, "not valid base64"),
        ({"image": 5}, 422, "'image' must be a base64 string"),
        ({"scene": -1}, 422, "'scene' must be >= 0"),
        ({"model": "nope", "scene": 1}, 404, "unknown captioning model 'nope'; this server has: model"),
    ],
)
def test_bad_caption_requests_say_what_is_wrong(client, body, status, message):
    r = client.post("/api/caption", json=body)
    assert r.status_code == status and message in r.json()["error"]


def test_text_models_and_captioners_share_one_studio(trained_toys, tiny_captioner):
    studio = Studio([str(trained_toys["rnn"]), str(tiny_captioner)])
    with TestClient(create_app(studio), raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        assert [m["name"] for m in c.get("/api/models").json()["models"]] == [trained_toys["rnn"].name, "model"]
        r = c.post("/api/translate", json={"model": "model", "text": "a b"})
        assert r.status_code == 422 and "is an image model: send the image" in r.json()["error"]
        r = c.post("/api/translate", json={"model": trained_toys["rnn"].name, "text": "a b", "image": png()})
        assert r.status_code == 422 and "reads text: leave 'image' out" in r.json()["error"]
        r = c.post("/api/caption", json={"model": trained_toys["rnn"].name, "scene": 1})
        assert r.status_code == 404 and "unknown captioning model" in r.json()["error"]

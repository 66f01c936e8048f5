"""The studio's captioning: /api/caption for uploaded images and new held-out scenes, the
live caption page, and bad requests answered with what is wrong."""

import base64
import io

import numpy as np
import pytest
from PIL import Image
from starlette.testclient import TestClient

from attnkit.server.app import create_app
from attnkit.server.schema import Caption
from attnkit.server.service import Studio


def png(size=(32, 32)) -> str:
    buf = io.BytesIO()
    Image.fromarray(np.zeros(size[::-1], np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def client(tiny_captioner):
    with TestClient(create_app(Studio([str(tiny_captioner)])), raise_server_exceptions=False) as c:
        yield c


def test_a_captioner_alone_is_served_on_the_caption_page(client):
    models = client.get("/api/models").json()
    assert models["models"] == [] and [c["name"] for c in models["captioners"]] == ["model"]
    assert models["captioners"][0]["image_size"] == 32 and models["captioners"][0]["image_encoder"] == "vit"
    for path in ("/", "/captions"):
        page = client.get(path)
        assert page.status_code == 200 and 'id="upload"' in page.text and '"captioners":[{' in page.text


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


def test_text_and_caption_models_are_kept_apart(trained_toys, tiny_captioner):
    studio = Studio([str(trained_toys["rnn"]), str(tiny_captioner)])
    with TestClient(create_app(studio), raise_server_exceptions=False) as c:
        assert "upload" not in c.get("/").text and 'id="upload"' in c.get("/captions").text
        r = c.post("/api/translate", json={"model": "model", "text": "a b"})
        assert r.status_code == 404 and "unknown model 'model'" in r.json()["error"]
        r = c.post("/api/caption", json={"model": trained_toys["rnn"].name, "scene": 1})
        assert r.status_code == 404 and "unknown captioning model" in r.json()["error"]

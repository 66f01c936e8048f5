"""The API declared once: every answer the server gives is an instance of the model the OpenAPI
document declares for it, and the document covers every route and resolves every reference."""

import json

import pytest
from starlette.testclient import TestClient

from attnkit.server.app import create_app
from attnkit.server.schema import ANSWERS, SPACE, Models, openapi, parse_request

pytestmark = pytest.mark.slow  # a trained toy model


@pytest.fixture(scope="module")
def client(studio):
    with TestClient(create_app(studio), base_url="http://127.0.0.1") as c:
        yield c


def test_every_answer_is_what_the_document_declares(client, names):
    Models.model_validate(client.get("/api/models").json())
    for model in names.values():
        r = client.post("/api/translate", json={"model": model, "text": "a b c", "beam": 3, "nbest": 2})
        assert r.status_code == 200
        ANSWERS["translate"].model_validate(r.json())
        r = client.post("/api/explain", json={"model": model, "text": "a b c", "kind": "cross", "query": 1})
        assert r.status_code == 200
        ANSWERS["explain"].model_validate(r.json())


def test_the_document_covers_every_route_and_resolves_its_references(client, studio, names):
    doc = client.get("/api/openapi.json").json()
    served = {n: m.model.capabilities for n, m in studio.models.items()}
    assert doc == json.loads(json.dumps(openapi(served, studio.limits))) and doc["openapi"].startswith("3.1")
    routes = {r.path for r in create_app(studio).routes if r.path.startswith("/api/")}
    # this server's contract: no served model embeds (a text encoder's) or captions, so those routes are not in it
    assert routes - {"/api/openapi.json"} - set(doc["paths"]) == {"/api/embed", "/api/caption"}
    assert set(doc["paths"]) < routes and set(openapi()["paths"]) == routes - {"/api/openapi.json"}
    schemas = doc["components"]["schemas"]
    refs = set()

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                refs.add(node["$ref"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    assert refs and all(r.startswith("#/components/schemas/") and r.split("/")[-1] in schemas for r in refs)
    translate = schemas["TranslateRequest"]["oneOf"]  # one variant per served model
    assert [v["properties"]["model"]["const"] for v in translate] == sorted(names.values())
    beam = translate[0]["properties"]["beam"]
    assert beam["minimum"] == 1 and beam["default"] == 5 and beam["maximum"] == studio.limits.max_beam
    text = translate[0]["properties"]["text"]
    assert text["minLength"] == 1 and text["pattern"] == f"[^{SPACE}]" and text["maxLength"] == studio.limits.max_chars
    assert all(v["properties"]["max_new_tokens"] == {"type": "null"} for v in translate)  # translators generate none
    by_model = {v["oneOf"][0]["properties"]["model"]["const"]: v for v in schemas["AttributeRequest"]["oneOf"]}
    rnn_sides = [s["properties"]["side"] for s in by_model[names["rnn"]]["oneOf"]]
    assert rnn_sides == [{"anyOf": [{"const": "output"}, {"type": "null"}]}]  # no encoder self-attention
    rnn_methods = by_model[names["rnn"]]["oneOf"][0]["properties"]["method"]["anyOf"][0]["enum"]
    assert rnn_methods[0] == "grad-attention" and "value-norm" not in rnn_methods and "rollout" not in rnn_methods
    # an integer as JSON Schema has it: 3.0 is one
    assert client.post("/api/translate", json={"model": names["rnn"], "text": "a b", "beam": 3.0}).status_code == 200


@pytest.mark.parametrize(
    "call, body, message",
    [
        ("translate", {}, "'text' is required"),
        ("translate", {"text": 3}, "'text' must be a string"),
        ("translate", {"text": "a", "beam": 2.5}, "'beam' must be an integer"),
        ("explain", {"text": "a", "kind": "up"}, "'kind' must be 'encoder', 'decoder' or 'cross', got 'up'"),
        ("explain", {"text": "a", "layer": 99}, "'layer' must be <= 63, got 99"),
        ("caption", {"scene": -1}, "'scene' must be >= 0, got -1"),
        ("embed", [1], "the request body must be a JSON object"),
    ],
)
def test_a_request_that_does_not_fit_its_model_is_one_line(call, body, message):
    with pytest.raises(ValueError) as err:
        parse_request(call, body)
    assert str(err.value) == message


def test_defaults_are_filled_in():
    assert parse_request("translate", {"text": "a", "unused": 1}) == {
        "model": None, "text": "a", "beam": 5, "nbest": 1, "target": None, "max_new_tokens": None,
        "packed": False, "image": None, "audio": None,
    }  # fmt: skip


def test_the_documented_text_rule_is_the_servers_own():
    """A text must hold a character the server does not strip as space (str.isspace); the
    document's pattern names those characters itself, as ECMA's \\s (JSON Schema's) is not Python's."""
    import re

    spaces = re.compile(f"[{SPACE}]")
    assert all(bool(spaces.fullmatch(chr(c))) == chr(c).isspace() for c in range(0x110000))

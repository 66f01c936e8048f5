"""A property-based fuzz of every route of the studio: whatever the request (any JSON, any keys,
values of any type or size, bodies that are not JSON), the answer is never a 5xx, and the server
still answers a good request afterwards."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from attnkit.server.app import create_app

pytestmark = pytest.mark.slow  # a trained toy model and a few hundred requests

KEYS = ["model", "text", "target", "beam", "nbest", "kind", "layer", "head", "query", "image", "scene", "x"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=300),
    st.sampled_from(["encoder", "decoder", "cross", "", " ", "a b c", "data:image/png;base64,AAAA", "x" * 5000]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
ROUTES = ["/api/translate", "/api/explain", "/api/embed", "/api/caption"]


@pytest.fixture(scope="module")
def client(studio):
    with TestClient(create_app(studio), raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        yield c


def _body(draw_model, names):
    return st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6).map(
        lambda d: d if not draw_model else {**d, "model": names["transformer"]}
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_json_body_gets_a_5xx(client, names, data):
    route = data.draw(st.sampled_from(ROUTES))
    body = data.draw(_body(data.draw(st.booleans()), names))
    if data.draw(st.booleans()):  # a served model, so the request reaches the model's checks
        body["model"] = data.draw(st.sampled_from(list(names.values())))
    r = client.post(route, content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code < 500, (route, body, r.text)
    assert "error" in r.json() if r.status_code >= 400 else True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(ROUTES), raw=st.binary(max_size=200))
def test_no_raw_body_gets_a_5xx(client, route, raw):
    assert client.post(route, content=raw, headers={"content-type": "application/json"}).status_code < 500
    assert client.post(route, content=raw).status_code == 415  # no JSON content type: refused before it is read


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=st.dictionaries(st.sampled_from(["model", "scheme", "x"]), st.text(max_size=40), max_size=3))
def test_no_query_gets_a_5xx(client, params):
    assert client.get("/api/positions", params=params).status_code < 500
    assert client.get("/api/models", params=params).status_code == 200


def test_the_server_still_answers_after_the_fuzz(client, names):
    r = client.post("/api/translate", json={"model": names["transformer"], "text": "a b c"})
    assert r.status_code == 200 and r.json()["translation"] == r.json()["example"]["output"]

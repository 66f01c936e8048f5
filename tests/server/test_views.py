"""The studio's views of a held record: overviews, exact tiles, each query's strongest keys and
every head's summaries, against transformers' own eager maps; and what is refused."""

import base64

import numpy as np
import pytest
import torch
from starlette.testclient import TestClient

from attnkit.heads.detectors import SINK_KEYS
from attnkit.server.app import create_app
from attnkit.server.limits import StudioLimits
from attnkit.server.schema import Atlas, Heads, Overview, Tile, Top, Translation
from attnkit.server.service import Studio
from tiny_hf import WORDS, build

TEXT = " ".join(WORDS[i % 24] for i in range(0, 7 * 50, 7))  # 50 words, a few tokens each at most


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A tiny Llama (grouped key/value heads, RoPE, causal), its maps kept on the server
    (page_mb=0), with transformers' own eager maps of the same input."""
    import transformers as T

    path = build("llama", tmp_path_factory.mktemp("views") / "llama")
    studio = Studio([str(path)], limits=StudioLimits(page_mb=0), device="cpu")
    with TestClient(create_app(studio), raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = client.post("/api/translate", json={"text": TEXT, "max_new_tokens": 0})
        assert r.status_code == 200, r.text
        answer = r.json()
        Translation.model_validate(answer)
        ids = studio.models["llama"].model.hf.encode_text(TEXT)
        model = T.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
        with torch.no_grad():
            eager = model(torch.tensor([ids]), output_attentions=True).attentions
        yield client, answer, np.stack([a[0].numpy() for a in eager])  # (layers, heads, t, t)


def _floats(data: str, shape) -> np.ndarray:
    return np.frombuffer(base64.b64decode(data), dtype="<f4").reshape(shape)


def test_a_long_record_stays_on_the_server(served):
    _, answer, eager = served
    ex = answer["example"]
    assert ex["maps"] == {} and ex["packed"] is None and ex["remote"] == {"decoder": list(eager.shape)}
    assert len(answer["record"]) == 16 and len(ex["tgt_in_tokens"]) == eager.shape[2]


@pytest.mark.parametrize("head", [1, "mean"])
@pytest.mark.parametrize("reduce", ["max", "mean"])
def test_an_overview_pools_the_eager_map(served, head, reduce):
    client, answer, eager = served
    dense = eager[1, head] if head != "mean" else eager[1].mean(0)
    t = dense.shape[0]
    body = {"record": answer["record"], "kind": "decoder", "layer": 1, "head": head, "rows": 7, "cols": 9}
    r = client.post("/api/overview", json={**body, "reduce": reduce})
    assert r.status_code == 200, r.text
    found = Overview.model_validate(r.json())
    rows, cols = (np.arange(8) * t) // 7, (np.arange(10) * t) // 9
    fn = np.max if reduce == "max" else np.mean
    expected = [[fn(dense[rows[i] : rows[i + 1], cols[j] : cols[j + 1]]) for j in range(9)] for i in range(7)]
    assert found.shape == [t, t] and (found.rows, found.cols) == (7, 9)
    np.testing.assert_allclose(_floats(found.data, (7, 9)), expected, atol=1e-6)
    again = client.post("/api/overview", json={**body, "reduce": reduce}).json()  # answered from the cache
    assert again["data"] == r.json()["data"]
    zoomed = client.post("/api/overview", json={**body, "reduce": reduce, "rows": 50, "region": [10, 20, 3, 8]})
    assert zoomed.status_code == 200, zoomed.text
    assert (zoomed.json()["rows"], zoomed.json()["cols"]) == (10, 5)  # one pixel per cell: the cells themselves
    np.testing.assert_allclose(_floats(zoomed.json()["data"], (10, 5)), dense[10:20, 3:8], atol=1e-6)


def test_a_tile_is_the_eager_block_and_top_keys_its_strongest(served):
    client, answer, eager = served
    t = eager.shape[2]
    body = {"record": answer["record"], "kind": "decoder", "layer": 0, "head": 3}
    r = client.post("/api/tile", json={**body, "row": t - 20, "col": 5, "rows": 64, "cols": 10})
    assert r.status_code == 200, r.text
    tile = Tile.model_validate(r.json())
    assert (tile.rows, tile.cols) == (20, 10)  # cut to the map's edge
    np.testing.assert_allclose(_floats(tile.data, (20, 10)), eager[0, 3, t - 20 :, 5:15], atol=1e-6)
    r = client.post("/api/top", json={**body, "first": 10, "count": 5, "k": 4})
    assert r.status_code == 200, r.text
    top = Top.model_validate(r.json())
    expected = torch.topk(torch.from_numpy(eager[0, 3, 10:15]), 4, dim=-1)
    np.testing.assert_allclose(top.weights, expected.values.numpy(), atol=1e-6)
    picked = np.take_along_axis(eager[0, 3, 10:15], np.array(top.keys), axis=1)
    np.testing.assert_allclose(picked, expected.values.numpy(), atol=1e-6)


def test_head_summaries_are_the_eager_maps_definitions(served):
    client, answer, eager = served
    r = client.post("/api/heads", json={"record": answer["record"], "kind": "decoder", "sink": 1, "band": 4})
    assert r.status_code == 200, r.text
    heads = Heads.model_validate(r.json())
    assert [x.layer for x in heads.layers] == list(range(eager.shape[0]))
    t = eager.shape[2]
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    for layer in heads.layers:
        w = eager[layer.layer].astype(np.float64)  # (h, t, t), causal
        logw = np.log(np.where(w > 0, w, 1))
        entropy = -(w * logw).sum(-1)
        expected = {
            "entropy": entropy.mean(-1),
            "normalised": (np.where(i[:, 0] > 0, entropy / np.log(np.maximum(i[:, 0] + 1, 2)), 0)).mean(-1),
            "max_weight": w.max(-1).mean(-1),
            "sink": w[..., 0].mean(-1),
            "local": (w * (np.abs(i - j) <= 4)).sum(-1).mean(-1),
            "distance": (w * np.abs(i - j)).sum(-1).mean(-1),
        }
        for name, value in expected.items():
            np.testing.assert_allclose(layer.stats[name], value, atol=1e-5, err_msg=f"layer {layer.layer}: {name}")


def test_the_atlas_scores_the_eager_maps_and_ablates_each_head(served):
    client, answer, eager = served
    r = client.post("/api/atlas", json={"record": answer["record"], "kind": "decoder", "ablate": "zero"})
    assert r.status_code == 200, r.text
    atlas = Atlas.model_validate(r.json())
    assert (atlas.layers, atlas.heads) == eager.shape[:2]
    scores = {d.name: np.array(d.values) for d in atlas.detectors}
    assert {"previous_token", "induction", "sink", "positional", "broad"} <= set(scores)
    t = eager.shape[2]
    w = eager.astype(np.float64)  # (layers, h, t, t), causal
    # causal: the sink counts the queries that see SINK_KEYS keys or more
    np.testing.assert_allclose(scores["sink"], w[..., SINK_KEYS - 1 :, 0].mean(-1), atol=1e-5)
    np.testing.assert_allclose(scores["previous_token"], w[..., np.arange(1, t), np.arange(t - 1)].mean(-1), atol=1e-5)
    assert atlas.ablation is not None and atlas.ablation.measure.startswith("loss")
    effect = np.array(atlas.ablation.effect, dtype=float)
    assert effect.shape == eager.shape[:2] and np.isfinite(effect).all() and np.abs(effect).max() > 0
    assert (np.array(atlas.ablation.importance) >= 0).all()
    again = client.post("/api/atlas", json={"record": answer["record"], "kind": "decoder", "ablate": "zero"})
    assert again.json()["ablation"] == r.json()["ablation"]  # kept: the model does not run again


def test_the_atlas_runs_each_head_over_a_cache(served):
    """Each decoder head alone over a StreamingLLM cache: its weight outside it equals the eager
    maps', its cost is measured, its estimate beside it; the head list's column appears only for
    inputs past its own cache."""
    client, answer, eager = served
    body = {"record": answer["record"], "kind": "decoder", "streaming": {"sinks": 4, "window": 28}}
    r = client.post("/api/atlas", json=body)
    assert r.status_code == 200, r.text
    atlas = Atlas.model_validate(r.json())
    c = atlas.streaming
    assert c is not None and (c.sinks, c.window) == (4, 28) and c.measure.startswith("loss")
    outside = np.array(c.outside, dtype=float)
    w = eager.astype(np.float64)  # (layers, h, t, t)
    t = w.shape[-1]
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    dropped = (j <= i) & (j >= 4) & (j <= i - 28)
    np.testing.assert_allclose(outside, (w * dropped).sum(-1)[..., 32:].mean(-1), atol=1e-5)
    cost = np.array(c.cost, dtype=float)
    assert cost.shape == eager.shape[:2] and np.isfinite(cost).all() and np.abs(cost).max() > 0
    assert np.isfinite(np.array(c.estimate, dtype=float)).all()
    # the text's words repeat every 24: it ends with a copy, the share of it predicted is measured
    assert c.needle is not None and c.needle_base is not None and c.needle_drop is not None
    needle = np.array(c.needle, dtype=float)
    assert needle.shape == cost.shape and ((needle >= 0) & (needle <= 1)).all()
    streams = (cost <= c.threshold) & (needle >= c.needle_base - c.needle_drop)
    assert c.classes == np.where(streams, "streaming", "retrieval").tolist()
    heads = client.post("/api/heads", json={"record": answer["record"], "kind": "decoder", "layer": 0}).json()
    assert "outside" not in heads["layers"][0]["stats"]  # the head list's cache is 4 + 1,020: none past it


@pytest.mark.parametrize(
    "call, body, status, message",
    [
        ("overview", {"record": "nope", "kind": "decoder"}, 404, "unknown record 'nope'"),
        ("overview", {"kind": "cross"}, 422, "this model has no cross-attention maps (it has: decoder)"),
        ("overview", {"kind": "decoder", "layer": 9}, 422, "layer 9 out of range"),
        ("overview", {"kind": "decoder", "head": 99}, 422, "head 99 out of range: 4 head(s)"),
        ("overview", {"kind": "decoder", "rows": 0}, 422, "'rows' must be >= 1"),
        ("tile", {"kind": "decoder", "row": 10_000}, 422, "tile at (10000, 0) out of range"),
        ("overview", {"kind": "decoder", "region": [5, 5, 0, 9]}, 422, "region 5..5 x 0..9 out of range"),
        ("overview", {"kind": "decoder", "region": [0, 1]}, 422, "'region'"),
        ("top", {"kind": "decoder", "first": 10_000}, 422, "query 10000 out of range"),
        ("heads", {"kind": "decoder", "layer": -9}, 422, "layer -9 out of range"),
        ("atlas", {"kind": "cross"}, 422, "this record has no cross attention; it has decoder"),
        ("atlas", {"kind": "decoder", "ablate": "half"}, 422, "'ablate' must be 'zero' or 'mean'"),
        ("atlas", {"record": "nope", "kind": "decoder"}, 404, "unknown record 'nope'"),
        ("atlas", {"kind": "decoder", "streaming": {"window": 4096}}, 422, "holds every key of an input of"),
        ("atlas", {"kind": "decoder", "streaming": {"window": 0}}, 422, "'streaming.window' must be >= 1"),
    ],
)
def test_bad_view_requests_say_what_is_wrong(served, call, body, status, message):
    client, answer, _ = served
    r = client.post(f"/api/{call}", json={"record": answer["record"], **body})
    assert r.status_code == status and message in r.json()["error"], r.text

import dataclasses
import json

import numpy as np
import pytest
import torch

from attnkit.config import config_from_dict
from attnkit.data import Tokenizer
from attnkit.data.tokenizer import PAD
from attnkit.inference.translate import translate
from attnkit.inspection import (
    capture,
    capture_ids,
    head_statistics,
    load_records,
    model_info,
    save_records,
)
from attnkit.loading.model_dir import load_model
from attnkit.models import build_model
from formed import formed

SENTENCES = ["a b c d", "h g f e d c b"]


def _fresh(toy_dir, **model):
    """An untrained model with the toy tokenizer and other model settings."""
    tok = Tokenizer.load(toy_dir)
    cfg = config_from_dict({"model": model})
    net = build_model(cfg.model, src_vocab=tok.src_vocab, tgt_vocab=tok.tgt_vocab, pad_id=PAD, shared_vocab=tok.joint)
    return net.eval(), tok, cfg


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_shapes_tokens_and_distributions(trained_toys, arch):
    model, tok, _cfg = load_model(trained_toys[arch])
    records = capture(model, tok, SENTENCES)
    for r, _sentence in zip(records, SENTENCES):
        s, t = len(r.src_tokens), len(r.tgt_in_tokens)
        assert r.src_tokens[-1] == "</s>" and r.tgt_in_tokens[0] == "<s>" and r.tgt_out_tokens[-1] == "</s>"
        assert r.tgt_in_tokens[1:] == r.tgt_out_tokens[:-1]
        assert r.output and set(r.output.split()) <= set("abcdefgh")  # a (toy) translation
        expected = {"cross": (t, s)} if arch == "rnn" else {"encoder": (s, s), "decoder": (t, t), "cross": (t, s)}
        assert set(r.maps) == set(expected)
        for kind, shape in expected.items():
            maps = r.maps[kind]
            assert maps.shape[2:] == shape and maps.dtype == np.float32
            np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)
        if arch == "transformer":  # decoder self-attention is causal
            dec = r.maps["decoder"]
            assert np.all(np.triu(np.ones((t, t)), 1)[None, None] * dec == 0)


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_teacher_forced_maps_equal_the_decoders_own(trained_toys, arch):
    """One forward pass over the translation gives the cross-attention the search saw step by step."""
    model, tok, _ = load_model(trained_toys[arch])
    found = translate(model, tok, SENTENCES, need_weights=True)
    for r, tr in zip(capture(model, tok, SENTENCES), found):
        np.testing.assert_allclose(r.maps["cross"], tr.alignment, atol=1e-5)


def test_forced_target_and_local_p_centres(trained_toys):
    model, tok, cfg = _fresh(
        trained_toys["rnn"],
        arch="rnn",
        d_model=16,
        tie_embeddings=False,
        rnn={"hidden": 32, "attention": "local-p", "window": 2},
    )
    [r] = capture(model, tok, ["a b c d e f"], targets=["f e d"], window=cfg.model.rnn.window)
    assert r.output == "f e d" and r.tgt_out_tokens[-1] == "</s>"
    assert r.p_t is not None and r.p_t.shape == (len(r.tgt_in_tokens),) and r.window == 2
    assert np.all((r.p_t >= 0) & (r.p_t <= len(r.src_tokens) - 1))
    w = r.maps["cross"][0, 0]
    cols = np.arange(w.shape[1])
    for row, centre in zip(w, r.p_t):  # local-p: nothing outside [p_t - D, p_t + D]
        assert np.all(row[np.abs(cols - centre) > 2 + 1e-6] == 0)


def test_encoder_only_model(trained_toys):
    model, tok, _ = _fresh(
        trained_toys["transformer"], arch="encoder", d_model=16, layers=3, transformer={"heads": 2, "ffn": 32}
    )
    [r] = capture(model, tok, ["a b c"])
    assert set(r.maps) == {"encoder"} and r.maps["encoder"].shape[:2] == (3, 2)
    assert r.output == "" and r.tgt_in_tokens == []


def test_save_load_round_trip(trained_toys, tmp_path):
    model, tok, cfg = load_model(trained_toys["transformer"])
    records = capture(model, tok, SENTENCES)
    path = save_records(tmp_path / "maps.npz", records, model_info(model, cfg))
    back, info = load_records(path)
    assert info["arch"] == "transformer" and info["heads"] == cfg.model.transformer.heads
    for a, b in zip(records, back):
        assert dataclasses.replace(a, maps={}) == dataclasses.replace(b, maps={})
        for kind in a.maps:
            np.testing.assert_array_equal(a.maps[kind], b.maps[kind])
    with np.load(path) as z:  # readable without attnkit: each layer's q, k and log-sum-exp
        layers, heads, t, s = records[0].maps.shape("cross")
        assert z["0/cross/0/q"].shape[:2] == (heads, t) and z["0/cross/0/k"].shape[:2] == (heads, s)
        assert z["0/cross/0/lse"].shape == (heads, t) and f"0/cross/{layers - 1}/q" in z


@pytest.mark.parametrize(
    "model",
    [
        {"arch": "transformer", "positions": scheme, "d_model": 16, "layers": 2, "transformer": {"heads": 2, "ffn": 32}}
        for scheme in ("sinusoidal", "rope", "alibi", "t5", "relative")
    ]
    + [{"arch": "encoder", "d_model": 16, "layers": 2, "positions": "alibi", "transformer": {"heads": 4, "ffn": 32}}],
    ids=["sinusoidal", "rope", "alibi", "t5", "relative", "encoder-alibi"],
)
def test_the_record_equals_the_models_own_weights(trained_toys, model):
    """Every map formed from the record (q and k after positions, the bias, the rules, the
    log-sum-exp) equals the weights the model itself forms on its explicit path, to 1e-6."""
    net, tok, _ = _fresh(trained_toys["transformer"], **model)
    src = tok.encode_src(["a b c d e"])[0] + [3]
    tgt = [2] + tok.encode_tgt(["e d c"])[0]
    maps, _ = capture_ids(net, src, None if model["arch"] == "encoder" else tgt)
    s, t = torch.tensor([src]), torch.tensor([tgt])
    with torch.no_grad():  # the weights the model forms on its explicit path, heard at its sites
        if model["arch"] == "encoder":
            _, own, _ = formed(lambda: net.encode(s, torch.ones_like(s, dtype=torch.bool)))
        else:
            _, own, _ = formed(lambda: net(s, torch.ones_like(s, dtype=torch.bool), t))
    for kind in maps:
        assert maps.factored(kind)
        expected = torch.stack([w[0] for w in own[kind]]).numpy()
        np.testing.assert_allclose(maps[kind], expected, atol=1e-6)


def test_files_of_the_first_version_still_read(tmp_path):
    """Version 1 kept formed maps only; they read as maps of formed calls."""
    maps = np.random.default_rng(0).random((2, 3, 4, 5)).astype(np.float32)
    meta = {
        "format": "attnkit-attention",
        "version": 1,
        "model": {"arch": "transformer"},
        "examples": [
            {"source": "a b", "output": "b a", "src_tokens": list("abcde"), "tgt_in_tokens": list("wxyz"),
             "tgt_out_tokens": list("xyz") + ["</s>"], "window": None, "kinds": ["cross"]}
        ],
    }  # fmt: skip
    np.savez_compressed(tmp_path / "v1.npz", meta=np.array(json.dumps(meta)), **{"0/cross": maps})
    [r], info = load_records(tmp_path / "v1.npz")
    assert info == {"arch": "transformer"} and not r.maps.factored("cross")
    np.testing.assert_array_equal(r.maps["cross"], maps)
    np.testing.assert_allclose(r.view("cross", 1, "mean").overview((2, 5)).max(), maps[1].mean(0).max(), atol=1e-6)
    meta["version"] = 4
    np.savez(tmp_path / "v3.npz", meta=np.array(json.dumps(meta)), **{"0/cross": maps})
    with pytest.raises(ValueError, match="format version 4; this attnkit reads up to 3"):
        load_records(tmp_path / "v3.npz")


def test_forming_more_maps_than_memory_holds_is_one_line(trained_toys, monkeypatch):
    from attnkit import memory

    model, tok, _ = load_model(trained_toys["transformer"])
    [r] = capture(model, tok, ["a b c"])
    monkeypatch.setattr(memory, "available_bytes", lambda: 10)
    with pytest.raises(ValueError, match=r"forming every cross-attention map .* needs 0.0 GB and 0.0 GB is free"):
        r.maps["cross"]
    assert r.view("cross", 0, 0).top_keys(1)[1].shape == (len(r.tgt_in_tokens), 1)  # views still answer


def test_bad_files_and_arguments(trained_toys, tmp_path):
    model, tok, _ = load_model(trained_toys["transformer"])
    with pytest.raises(ValueError, match="empty sentence"):
        capture(model, tok, ["a b", "  "])
    with pytest.raises(ValueError, match="2 sentences but 1 targets"):
        capture(model, tok, ["a b", "c d"], targets=["b a"])
    with pytest.raises(ValueError, match=".npz"):
        save_records(tmp_path / "maps.json", [], {})
    with pytest.raises(FileNotFoundError):
        load_records(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="junk.npz is not an .npz file"):
        load_records(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", meta=np.array('{"format": "something else"}'))
    with pytest.raises(ValueError, match="not an attnkit attention file"):
        load_records(tmp_path / "other.npz")
    [r] = capture(model, tok, ["a b"])
    with pytest.raises(ValueError, match="layer 5 out of range"):
        r.select("cross", 5, 0)
    with pytest.raises(ValueError, match="head 7 out of range"):
        r.select("cross", 0, 7)


def test_head_statistics_extremes():
    from attnkit.inspection import AttentionRecord

    s = 5
    uniform = np.full((1, 2, s, s), 1 / s, dtype=np.float32)
    onehot = np.broadcast_to(np.eye(s, dtype=np.float32), (1, 2, s, s)).copy()
    maps = np.concatenate([uniform, onehot], 0)  # layer 0 uniform, layer 1 one-hot
    st = head_statistics([AttentionRecord("x", ["t"] * s, {"encoder": maps})], "encoder")
    np.testing.assert_allclose(st.normalised[0], 1.0, atol=1e-5)
    np.testing.assert_allclose(st.entropy[0], np.log(s), atol=1e-5)
    np.testing.assert_allclose(st.normalised[1], 0.0, atol=1e-5)
    np.testing.assert_allclose(st.max_weight[1], 1.0)
    assert "most focused: layer 1" in st.report()


def test_head_statistics_figure_marks_sinks_and_only_them():
    """A head that parks its weight on the first key is marked with that weight; a head that is
    just as focused on other keys (the diagonal) is not."""
    from attnkit.heads.atlas import head_atlas
    from attnkit.inspection import AttentionRecord
    from attnkit.inspection.diagnostics import head_statistics_figure

    s = 6
    sink = np.zeros((1, 2, s, s), dtype=np.float32)
    sink[..., 0] = 1.0
    diagonal = np.broadcast_to(np.eye(s, dtype=np.float32), (1, 2, s, s)).copy()
    record = AttentionRecord("x", ["t"] * s, {"encoder": np.concatenate([sink, diagonal], 0)})
    st = head_statistics([record], "encoder")
    st.sink = head_atlas([record], "encoder", ["sink"]).scores["sink"]  # as `attnkit heads -o` sets it
    np.testing.assert_allclose(st.sink, [[1, 1], [1 / s, 1 / s]], atol=1e-6)
    np.testing.assert_allclose(st.max_weight, 1.0)  # both layers equally focused
    texts = [t.get_text() for ax in head_statistics_figure([st]).axes for t in ax.texts]
    assert texts.count("1.00\n1st key 1.00") == 2 and texts.count("1.00") == 2  # layer 0's heads, not layer 1's


def test_model_info_claims_only_what_the_model_has(trained_toys):
    """An RNN has no heads and no positional scheme: the viewer's header must not say it has."""
    from attnkit.loading.model_dir import load_model

    model, _, cfg = load_model(trained_toys["rnn"])
    info = model_info(model, cfg)
    assert info["arch"] == "rnn" and "heads" not in info and "positions" not in info
    assert info["attention"] == cfg.model.rnn.attention and info["cell"] == cfg.model.rnn.cell


def test_a_figure_names_a_run_by_its_folder(tmp_path):
    from attnkit.inspection.capture import source_label

    info = {"arch": "transformer", "d_model": 64, "heads": 4, "positions": "t5"}
    run = tmp_path / "demo_t5"
    run.mkdir()
    assert source_label(info, str(run)) == "demo_t5, Transformer (d_model 64, 4 heads, t5 positions)"
    assert source_label({**info, "name": "multi30k-en-de"}, str(run)) == "multi30k-en-de"  # installed: its name
    assert source_label(info, str(tmp_path / "maps.npz")) == "Transformer (d_model 64, 4 heads, t5 positions)"

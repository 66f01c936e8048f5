"""Sites: every attention call reaches every listener with its true kind and layer, for every
batch row and beam size; listeners nest; hooks read and replace activations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnkit
from attnkit.attention import record, sites
from attnkit.attention.intervene import gating
from attnkit.attention.record import MapView

SENTENCES = ["A dog runs.", "Two men in red shirts are playing football in a park."]


@pytest.fixture(scope="module")
def translator():
    return attnkit.load("multi30k-en-de")


@pytest.fixture(scope="module")
def rnn():
    return attnkit.load("multi30k-en-de-rnn-local-p")


def _named_right(call) -> bool:
    """The call's kind and layer are its site's, and the site's name says them."""
    site = call.site
    end = "cross" if site.kind == "cross" else "attn"
    return (call.kind, call.layer) == (site.kind, site.layer) and site.name.endswith(f".{site.layer}.{end}")


@pytest.mark.parametrize("beam", [1, 2, 5])
def test_a_bare_recording_of_a_translation_names_every_call(translator, beam):
    with record.recording() as rec:
        translator.translate(SENTENCES[0], beam=beam)
    assert rec.calls and all(_named_right(c) for c in rec.calls)
    layers = {kind: sorted({c.layer for c in rec.calls if c.kind == kind}) for kind in ("encoder", "decoder", "cross")}
    assert layers == {"encoder": [0, 1, 2, 3], "decoder": [0, 1, 2, 3], "cross": [0, 1, 2, 3]}
    cross = [c for c in rec.calls if c.kind == "cross"]
    decoder = [c for c in rec.calls if c.kind == "decoder"]
    assert len(cross) == len(decoder)  # every decoding step's cross-attention, every hypothesis
    assert max(c.row for c in cross) == beam - 1  # beam search decodes `beam` rows once the first step has run
    for c in cross[:8]:
        np.testing.assert_allclose(MapView(c, "mean").dense().sum(-1), 1.0, atol=1e-5)


def test_an_rnn_translation_is_one_cross_call_per_step(rnn):
    with record.recording() as rec:
        out = rnn.translate(SENTENCES[0], beam=3)
    assert rec.calls and all(_named_right(c) for c in rec.calls)
    assert {c.site.name for c in rec.calls} == {"decoder.0.cross"}
    assert {c.row for c in rec.calls} == {0, 1, 2}
    assert all("p_t" in c.extra for c in rec.calls)  # local-p: each step's window centre
    assert out


def test_nested_recordings_both_receive_every_call(translator):
    with record.recording() as outer:
        with record.recording() as inner:
            assert record.active() is inner
            translator.translate(SENTENCES[0], beam=2)
        assert record.active() is outer
        translator.translate(SENTENCES[0], beam=1)
    assert inner.calls
    assert len(outer.calls) > len(inner.calls)
    assert [(c.site, c.row) for c in outer.calls[: len(inner.calls)]] == [(c.site, c.row) for c in inner.calls]


def test_every_batch_row_is_recorded_and_is_its_sentences_own(translator):
    """A batch of two sentences of different lengths: row 1's encoder map is what that sentence
    alone gives, on its real tokens, and 0 on the padding."""
    model, tok = translator.module, translator.tok
    ids = [i + [2] for i in tok.encode_src(SENTENCES)]  # each ends in </s>
    n = max(map(len, ids))
    src = torch.tensor([i + [0] * (n - len(i)) for i in ids])
    mask = torch.tensor([[True] * len(i) + [False] * (n - len(i)) for i in ids])
    with torch.no_grad(), record.recording() as rec:
        model.encode(src, mask)
    first = [c for c in rec.calls if c.site.name == "encoder.0.attn"]
    assert [c.row for c in first] == [0, 1]
    for row, own in enumerate(ids):
        with torch.no_grad(), record.recording() as alone:
            model.encode(torch.tensor([own]), torch.ones(1, len(own), dtype=torch.bool))
        batched = MapView(first[row], "mean").dense()
        single = MapView(alone.calls[0], "mean").dense()
        np.testing.assert_allclose(batched[: len(own), : len(own)], single, atol=1e-5)
        assert np.all(batched[:, len(own) :] == 0)  # padding gets no weight


def test_rows_keeps_only_the_rows_asked_for(translator):
    with record.recording(rows=[1]) as rec:
        translator.translate(SENTENCES, beam=1)
    assert rec.calls and {c.row for c in rec.calls} == {1}


def test_the_model_lists_its_sites_in_the_order_they_run(translator, rnn):
    names = [s.name for s in translator.module.sites()]
    assert len(names) == len(set(names))
    assert names[:5] == [
        "encoder.0.resid_pre",
        "encoder.0.attn",
        "encoder.0.attn.z",
        "encoder.0.mlp_out",
        "encoder.0.resid_post",
    ]
    assert "decoder.3.cross.z" in names and names[-2:] == ["decoder.norm", "logits"]
    assert [s.name for s in rnn.module.sites()] == ["decoder.0.cross", "decoder.0.cross.z", "logits"]


def test_a_hook_on_a_head_output_is_gating_by_another_name(translator):
    """Zeroing head 2 of decoder.1.cross by a hook gives what gating that head does, to the bit."""
    model = translator.module
    src = torch.tensor([translator.tok.encode_src(SENTENCES[:1])[0] + [2]])
    mask = torch.ones_like(src, dtype=torch.bool)
    tgt = torch.tensor([[1, 5, 6, 7]])

    def zero_head(z, site):
        z = z.clone()
        z[:, 2] = 0
        return z

    with torch.no_grad():
        clean = model(src, mask, tgt).logits
        with sites.listening(sites.Hooks({"decoder.1.cross.z": zero_head})):
            hooked = model(src, mask, tgt).logits
        gate = torch.ones(4)
        gate[2] = 0
        with gating({"decoder.1.cross": gate}):
            gated = model(src, mask, tgt).logits
        cross = model.decoder_layers[1].cross_attn
        with gating({cross: gate}):
            by_module = model(src, mask, tgt).logits
    assert not torch.equal(clean, hooked)
    assert torch.equal(hooked, gated) and torch.equal(gated, by_module)


def test_a_residual_hook_replaces_the_stream(translator):
    model = translator.module
    src = torch.tensor([translator.tok.encode_src(SENTENCES[:1])[0] + [2]])
    mask = torch.ones_like(src, dtype=torch.bool)
    tgt = torch.tensor([[1, 5, 6]])
    cache = sites.Cache()
    with torch.no_grad(), sites.listening(cache):
        clean = model(src, mask, tgt).logits
    assert torch.equal(cache.tensors["logits"][0], clean)
    post = cache.tensors["decoder.3.resid_post"][0]
    with torch.no_grad(), sites.listening(sites.Hooks({"decoder.3.resid_post": lambda x, site: torch.zeros_like(x)})):
        zeroed = model(src, mask, tgt).logits
    assert post.shape == (1, 3, model.output.in_features) and not torch.equal(clean, zeroed)
    with torch.no_grad(), sites.listening(sites.Hooks({"decoder.3.resid_post": lambda x, site: post})):
        same = model(src, mask, tgt).logits
    assert torch.equal(same, clean)


def test_an_attention_module_attnkit_did_not_name_is_refused_not_skipped(tmp_path):
    """A transformers attention module without a site, called while something listens, is one
    line: its call is never silently missing from a record."""
    from tiny_hf import build

    model = attnkit.load(build("llama", tmp_path / "llama"), device="cpu")
    layer = model.hf.model.model.layers[1].self_attn
    delattr(layer, sites.SITE_ATTR)
    with pytest.raises(ValueError, match="attnkit did not name this LlamaAttention module"):
        model.attention("the dog runs")
    assert model.generate("the dog runs", max_new_tokens=2)  # with nothing listening it runs as before

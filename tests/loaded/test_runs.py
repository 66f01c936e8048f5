"""A notebook's verbs over named sites: ``sites``, ``run(hooks=...)``, ``cache(sites=...)`` and
``show(record)``, on an attnkit translator and on a transformers decoder, checked against the
model run alone, gating, and the identities of activation patching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnkit
from attnkit.attention.intervene import gating
from attnkit.attention.record import MapView
from tiny_hf import build

CLEAN, CORRUPT = "the dog runs in the park", "the man runs in the snow"


@pytest.fixture(scope="module")
def translator():
    return attnkit.load("multi30k-en-de")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return attnkit.load(build("llama", tmp_path_factory.mktemp("hf") / "llama"), device="cpu")


def test_sites_are_named_the_same_way_for_both_engines(translator, llama):
    ours = [s.name for s in translator.sites()]
    theirs = [s.name for s in llama.sites()]
    assert ours[:2] == ["encoder.0.resid_pre", "encoder.0.attn"] and ours[-1] == "logits"
    assert theirs == [
        *(f"blocks.{i}.{r}" for i in range(2) for r in ("resid_pre", "attn", "attn.z", "mlp_out", "resid_post")),
        "final_norm",
        "logits",
    ]
    assert all(s.heads == 4 for s in llama.sites() if s.role in ("attn", "z"))


def test_cache_keeps_every_site_and_the_logits_are_the_models_own(llama, translator):
    found = llama.cache(CLEAN)
    ids = torch.tensor([found.prepared.tgt_in_ids])
    with torch.no_grad():
        alone = llama.hf.model(input_ids=ids).logits
    assert torch.equal(found.logits, alone) and torch.equal(found["logits"], alone)
    assert set(found.keys()) == {s.name for s in llama.sites()}
    assert found["blocks.1.resid_post"].shape == (1, ids.shape[1], 32)
    assert found["blocks.0.attn.z"].shape == (1, 4, ids.shape[1], 8)  # (b, h, t, d) before the heads merge
    # an attention site's call gives the same exact weights the record does
    record = llama.capture(found.prepared)
    np.testing.assert_allclose(MapView(found["blocks.1.attn"], 2).dense(), record.maps["decoder"][1, 2], atol=1e-6)
    t = translator.cache("A dog runs.", target="Ein Hund rennt.", sites=["decoder.3.cross", "logits"])
    assert t.tokens == ["<s>", "Ein", "Hund", "rennt", "."] and t.logits.shape[:2] == (1, 5)
    assert set(t.keys()) == {"decoder.3.cross", "logits"}


def test_a_head_zeroed_by_a_hook_is_the_head_gated(llama):
    def zero_head(z, site):
        z = z.clone()
        z[:, 1] = 0
        return z

    hooked = llama.run(CLEAN, hooks={"blocks.1.attn.z": zero_head})
    gate = torch.ones(4)
    gate[1] = 0
    with gating({"blocks.1.attn": gate}):
        gated = llama.run(CLEAN)
    assert torch.equal(hooked.logits, gated.logits)
    assert not torch.equal(hooked.logits, llama.run(CLEAN).logits)


@pytest.mark.parametrize("model", ["llama", "translator"])
def test_patching_the_last_residual_stream_gives_the_corrupted_logits(model, llama, translator):
    """Activation patching's identities: the last layer's output patched in from the corrupted
    run gives the corrupted run's logits exactly; patched from the clean run itself, the clean ones."""
    m, last, texts = (
        (llama, "blocks.1.resid_post", (CLEAN, CORRUPT))
        if model == "llama"
        else (translator, "decoder.3.resid_post", ("A dog runs.", "A cat sleeps."))
    )
    target = None if model == "llama" else "Ein Hund rennt."
    clean, corrupt = (m.cache(t, sites=[last], target=target) for t in texts)
    patched = m.run(texts[0], hooks={last: lambda x, site: corrupt[last]}, target=target)
    torch.testing.assert_close(patched.logits, corrupt.logits, rtol=0, atol=1e-5)
    same = m.run(texts[0], hooks={last: lambda x, site: clean[last]}, target=target)
    assert torch.equal(same.logits, clean.logits)


def test_an_attention_hook_reads_the_call(llama):
    seen = []
    llama.run(CLEAN, hooks={"blocks.0.attn": lambda call, site: seen.append((site.name, tuple(call.q.shape)))})
    assert seen == [("blocks.0.attn", (1, 4, 7, 8))]


@pytest.mark.parametrize(
    "ask, message",
    [
        (
            lambda m: m.run(CLEAN, hooks={"blocks.7.attn": print}),
            r"no site 'blocks.7.attn': did you mean 'blocks.1.attn'",
        ),
        (lambda m: m.cache(CLEAN, sites=["logit"]), r"no site 'logit': did you mean 'logits'"),
        (lambda m: m.run(CLEAN, target="x"), "a decoder-only model runs over its text as given"),
        (lambda m: m.run([CLEAN]), "run and cache take one text, not list"),
    ],
)
def test_a_bad_run_is_one_line(llama, ask, message):
    with pytest.raises(ValueError, match=message):
        ask(llama)


def test_show_takes_a_record_already_made(translator):
    record = translator.attention("A dog runs.", beam=1)
    view = translator.show(record)
    assert "Hund" in view._repr_html_()
    with pytest.raises(ValueError, match="for text to capture"):
        translator.show(record, beam=2)


def test_an_attention_hook_sees_the_weights_and_cannot_return_a_pattern(llama):
    shapes = []
    llama.run(CLEAN, hooks={"blocks.1.attn": lambda call, site: shapes.append(tuple(call.weights.shape))})
    assert shapes == [(1, 4, 7, 7)]  # formed for the hook alone
    with pytest.raises(ValueError, match="to change what its heads write, hook blocks.1.attn.z"):
        llama.run(CLEAN, hooks={"blocks.1.attn": lambda call, site: torch.zeros(1)})


@pytest.mark.parametrize(
    "name, message",
    [("blocks.1.attnn", "is not an attention site"), ("blocks.1.resid_post", "is not an attention site")],
)
def test_a_gate_on_no_attention_site_is_one_line(name, message):
    with pytest.raises(ValueError, match=message), gating({name: torch.ones(4)}):
        pass


def test_gates_named_by_module_reach_that_model_alone(tmp_path):
    """Two loaded copies share their site names; a gate given by one's module gates it alone."""
    path = build("llama", tmp_path / "llama")
    a, b = (attnkit.load(path, device="cpu") for _ in range(2))
    gate = torch.zeros(4)
    with gating({a.hf.model.model.layers[1].self_attn: gate}):
        gated_a, gated_b = a.run(CLEAN).logits, b.run(CLEAN).logits
    assert not torch.equal(gated_a, a.run(CLEAN).logits) and torch.equal(gated_b, b.run(CLEAN).logits)


def test_a_transformers_model_in_training_mode_is_not_recorded_silently(llama):
    llama.hf.model.train()
    try:
        with (
            pytest.raises(ValueError, match="heard in training mode: attnkit records a model in eval mode"),
            attnkit.attention.record.recording(),
        ):
            llama.hf.model(input_ids=torch.tensor([[2, 5, 6]]))
    finally:
        llama.hf.model.eval()


def test_an_encoder_decoder_names_its_encoders_norm(tmp_path):
    """T5's encoder ends in a norm: ``encoder.norm`` sits between the encoder's last layer and the
    decoder, and what it holds is what the encoder gives the cross-attention."""
    t5 = attnkit.load(build("t5", tmp_path / "t5"), device="cpu")
    names = [s.name for s in t5.sites()]
    at = names.index("encoder.norm")
    assert names[at - 1 : at + 2] == ["encoder.1.resid_post", "encoder.norm", "decoder.0.resid_pre"]
    assert names[-2:] == ["decoder.norm", "logits"]
    found = t5.cache("the dog runs", target="der Hund", sites=["encoder.norm"])
    with torch.no_grad():
        alone = t5.hf.model.get_encoder()(input_ids=torch.tensor([found.prepared.src_ids])).last_hidden_state
    assert torch.equal(found["encoder.norm"], alone)

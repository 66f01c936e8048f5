"""Direct logit attribution against the model's own logits (the terms sum to it) and against the
same attribution written by hand from GPT-2's weights (ln_f's scale frozen with its own eps,
c_proj's rows of each head, the tied unembedding), and the logit lens against the model's last
layer; a model whose stream is not a sum of writes (post-norm) is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnkit
from attnkit import circuits
from tiny_hf import build

TEXT, ANSWER, FOIL = "the dog runs in the park and the dog", " runs", " park"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {f: attnkit.load(build(f, root / f), device="cpu") for f in ("gpt2", "llama", "qwen2", "bart", "bert")}


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2"])
def test_the_terms_sum_to_the_models_logit(models, family):
    m = models[family]
    found = circuits.direct_logit_attribution(m, TEXT, ANSWER, FOIL)
    assert found.values.sum() + found.constant == pytest.approx(found.logit, abs=1e-5)
    logits = m.run(TEXT).logits[0, -1]
    a, f = m.answer_token(ANSWER), m.answer_token(FOIL)
    assert found.logit == pytest.approx(float(logits[a] - logits[f]), abs=1e-6)
    alone = circuits.direct_logit_attribution(m, TEXT, ANSWER)  # no foil: the answer's own logit
    assert alone.values.sum() + alone.constant == pytest.approx(float(logits[a]), abs=1e-5)
    assert found.grid().shape == (2, 4) and found.names[0] == "embed"


def test_each_gpt2_head_is_its_hand_written_attribution(models):
    m = models["gpt2"]
    net = m.hf.model
    found = circuits.direct_logit_attribution(m, TEXT, ANSWER, FOIL)
    ids = torch.tensor([m.hf.encode_text(TEXT)])
    kept = {}
    hooks = [
        block.attn.c_proj.register_forward_pre_hook(lambda mod, args, i=i: kept.update({i: args[0].detach()}))
        for i, block in enumerate(net.transformer.h)
    ]
    pre = {}  # the stream into ln_f
    hooks.append(net.transformer.ln_f.register_forward_pre_hook(lambda mod, args: pre.update(x=args[0].detach())))
    with torch.no_grad():
        net(input_ids=ids)
    for h in hooks:
        h.remove()
    ln = net.transformer.ln_f
    x = pre["x"][0, -1]
    sigma = torch.sqrt(x.var(unbiased=False) + ln.eps)
    u = net.lm_head.weight[m.answer_token(ANSWER)] - net.lm_head.weight[m.answer_token(FOIL)]
    d = net.config.n_embd // net.config.n_head
    for li, block in enumerate(net.transformer.h):
        w = block.attn.c_proj.weight  # Conv1D: (in, out)
        for h in range(net.config.n_head):
            write = kept[li][0, -1, h * d : (h + 1) * d] @ w[h * d : (h + 1) * d]
            by_hand = float(((write - write.mean()) / sigma * ln.weight).detach() @ u.detach())
            assert found.values[found.names.index(f"blocks.{li}.attn.h{h}")] == pytest.approx(by_hand, abs=1e-5)


def _family(tmp_path, model_type):
    import families

    return attnkit.load(families.saved(model_type, tmp_path / model_type), device="cpu")


@pytest.mark.parametrize("model_type", ["olmo2", "gemma3_text", "glm4"])
def test_a_norm_on_each_blocks_output_is_frozen_and_the_terms_still_sum(tmp_path, model_type):
    """OLMo 2 normalises each block's output before adding it to the stream; Gemma 3 and GLM-4
    normalise both sides of each block (sandwich norms)."""
    m = _family(tmp_path, model_type)
    found = circuits.direct_logit_attribution(m, TEXT, ANSWER, FOIL)
    assert found.values.sum() + found.constant == pytest.approx(found.logit, abs=1e-5)


def test_each_olmo2_head_is_its_hand_written_attribution(tmp_path):
    """A head's write through OLMo 2's post-attention RMSNorm (its scale frozen at the attention's
    output, with its own eps), the final norm (frozen likewise) and the unembedding."""
    m = _family(tmp_path, "olmo2")
    net = m.hf.model
    found = circuits.direct_logit_attribution(m, TEXT, ANSWER, FOIL)
    kept, hooks = {}, []
    for i, layer in enumerate(net.model.layers):
        o = layer.self_attn.o_proj
        hooks.append(o.register_forward_pre_hook(lambda mod, a, i=i: kept.update({("z", i): a[0].detach()})))
        hooks.append(o.register_forward_hook(lambda mod, a, out, i=i: kept.update({("out", i): out.detach()})))
    hooks.append(net.model.norm.register_forward_pre_hook(lambda mod, a: kept.update(final=a[0].detach())))
    with torch.no_grad():
        net(input_ids=torch.tensor([m.hf.encode_text(TEXT)]))
    for h in hooks:
        h.remove()

    def rms(x, norm):
        return torch.sqrt(x.pow(2).mean() + norm.variance_epsilon)

    u = net.lm_head.weight[m.answer_token(ANSWER)] - net.lm_head.weight[m.answer_token(FOIL)]
    final = net.model.norm
    x = kept["final"][0, -1]
    e = net.config.hidden_size // net.config.num_attention_heads
    with torch.no_grad():
        for i, layer in enumerate(net.model.layers):
            post = layer.post_attention_layernorm
            out = kept[("out", i)][0, -1]
            for h in range(net.config.num_attention_heads):
                write = (
                    kept[("z", i)][0, -1, h * e : (h + 1) * e] @ layer.self_attn.o_proj.weight[:, h * e : (h + 1) * e].T
                )
                written = write / rms(out, post) * post.weight  # the block's norm, frozen at its output
                by_hand = float((written / rms(x, final) * final.weight) @ u)
                assert found.values[found.names.index(f"blocks.{i}.attn.h{h}")] == pytest.approx(by_hand, abs=1e-5)


def test_the_logit_lens_at_the_last_layer_is_the_models_prediction(models):
    m = models["llama"]
    lens = circuits.logit_lens(m, TEXT, ANSWER, FOIL, k=3)
    logits = m.run(TEXT).logits[0, -1]
    best = torch.topk(torch.softmax(logits, -1), 3)
    assert [t for t, _ in lens.top[-1]] == m.output_tokens(best.indices.tolist())
    np.testing.assert_allclose([p for _, p in lens.top[-1]], best.values.tolist(), rtol=1e-5)
    a, f = m.answer_token(ANSWER), m.answer_token(FOIL)
    assert lens.answer[-1] == pytest.approx(float(logits[a] - logits[f]), abs=1e-5)
    assert lens.layers == [0, 1] and lens.rank[-1] == int((logits > logits[a]).sum())


@pytest.mark.parametrize(
    "family, message",
    [
        ("bart", "feed-forward block is not one module"),  # post-norm: its stream is no sum of writes
        ("bert", "it writes no tokens, so it has no logits to attribute"),
    ],
)
def test_a_stream_that_is_not_a_sum_of_writes_is_refused(models, family, message):
    with pytest.raises(ValueError, match=message):
        circuits.direct_logit_attribution(
            models[family], TEXT, ANSWER, FOIL, target="the" if family == "bart" else None
        )


def test_a_post_norm_translator_is_refused():
    m = attnkit.load("multi30k-en-de")  # post-norm: LN(x + f(x))
    with pytest.raises(ValueError, match="layer 0's output is not its input plus its attention and MLP"):
        circuits.direct_logit_attribution(m, "A dog runs.", "Hund", target="Ein")

"""Heads over a StreamingLLM cache: the kernel against masked attention, a streaming head against
transformers' eager attention with that head's mask built by hand, the record's mass outside the
cache against the dense map, the replayed output change against the head recomputed, and the
classes on a model whose heads' roles are known."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
import torch

import attnkit
import induction_model
import tiny_hf
from attnkit.attention import kernels
from attnkit.attention.intervene import streaming
from attnkit.attention.record import head_stats, recording
from attnkit.heads import context
from attnkit.heads.probes import probe_inputs


def _band(t: int, s: int, sinks: int, window: int) -> torch.Tensor:
    i = torch.arange(t)[:, None] + s - t
    j = torch.arange(s)[None, :]
    return (j <= i) & ((j < sinks) | (j > i - window))


@pytest.mark.parametrize("cap, sink, rule", [(None, False, None), (0.7, True, None), (None, True, 6)])
def test_the_cache_kernel_is_masked_attention(cap, sink, rule):
    b, h, t, s, d = 2, 3, 9, 14, 8
    q, k, v = torch.randn(b, h, t, d), torch.randn(b, h, s, d), torch.randn(b, h, s, d)
    bias = torch.randn(1, h, t, s)
    logit = torch.randn(1, h, 1) if sink else None
    allowed = _band(t, s, 2, 4)
    if rule is not None:
        allowed &= torch.arange(s)[None, :] > torch.arange(t)[:, None] + s - t - rule
    additive = kernels.additive_term(allowed[None, None].expand(1, h, t, s), bias)
    want, _ = kernels.explicit(q, k, v, scale=0.3, additive=additive, cap=cap, sink=logit)
    got, lse = kernels.sink_window(q, k, v, scale=0.3, sinks=2, window=4, additive=bias, cap=cap, sink=logit,
                                   rule_window=rule)  # fmt: skip
    assert torch.allclose(got, want, atol=1e-6)
    scores = kernels.scaled(q, k, 0.3, cap) + additive
    full = scores.logsumexp(-1) if logit is None else torch.logaddexp(scores.logsumexp(-1), logit)
    assert torch.allclose(lse, full, atol=1e-5)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return attnkit.load(str(tiny_hf.build("llama", tmp_path_factory.mktemp("llama"), positions=64)))


def test_a_streaming_head_is_eager_attention_with_its_mask_built_by_hand(llama):
    import transformers
    from transformers import AttentionInterface
    from transformers.models.llama.modeling_llama import eager_attention_forward

    layer, head, sinks, window = 1, 2, 2, 5

    def by_hand(module, q, k, v, mask, **kwargs):
        t, s = q.shape[2], k.shape[2]
        allowed = _band(t, s, s, 1).expand(q.shape[0], q.shape[1], t, s).clone()  # causal
        if module.layer_idx == layer:
            allowed[:, head] = _band(t, s, sinks, window)
        return eager_attention_forward(module, q, k, v, torch.zeros(allowed.shape).masked_fill(~allowed, -torch.inf),
                                       **kwargs)  # fmt: skip

    AttentionInterface.register("attnkit_test_by_hand", by_hand)
    hf = llama.hf.model
    config = copy.deepcopy(hf.config)  # from_config sets the implementation on the config it is given
    eager = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="attnkit_test_by_hand")
    eager.load_state_dict(hf.state_dict())
    eager.eval()
    ids = torch.randint(5, 30, (2, 40))
    gate = torch.ones(hf.config.num_attention_heads)
    gate[head] = 0.0
    with torch.no_grad():
        plain = hf(ids).logits
        with streaming({f"blocks.{layer}.attn": gate}, sinks=sinks, window=window):
            got = hf(ids).logits
        want = eager(ids).logits
    assert (got - want).abs().max() < 1e-6
    assert (got - plain).abs().max() > 1e-3  # the cache changed the model


def _record(model, text: str):
    with recording(values=True) as rec:
        model.capture(model.prepare([text], max_new_tokens=0)[0])
    return rec


def test_the_mass_outside_the_cache_is_the_dense_maps(llama):
    text = " ".join(random.Random(0).choices(tiny_hf.WORDS, k=40))
    record = llama.capture(llama.prepare([text], max_new_tokens=0)[0])
    for layer in range(record.maps.shape("decoder")[0]):
        call = record.maps.call("decoder", layer)
        got = context.outside_mass(call, 3, 7)
        h, t, s = call.shape
        dense = np.stack([record.view("decoder", layer, i).dense() for i in range(h)])
        want = (dense * ~_band(t, s, 3, 7).numpy()).sum(-1)
        assert np.abs(got - want).max() < 1e-6
        assert want.max() > 0.1  # the cache drops real weight
        past = np.arange(t) + s - t >= 10
        stats = head_stats(call, cache=(3, 7))  # the head list's column: the same, streamed
        assert np.abs(stats["outside"] - want[:, past].mean(-1)).max() < 1e-6
    assert "outside" not in head_stats(call, cache=(4, 1020))  # no query past the cache


def test_the_replayed_change_is_the_head_recomputed_over_the_cache(llama):
    text = " ".join(random.Random(1).choices(tiny_hf.WORDS, k=40))
    prepared = llama.prepare([text], max_new_tokens=0)
    outside, change, queries = context.replayed(llama, prepared, sinks=2, window=6)
    record = llama.capture(prepared[0])
    with recording(values=True) as rec:
        llama.capture(prepared[0])
    for layer, call in enumerate(c for c in rec.calls if c.kind == "decoder"):
        q, k, v = call.q[None].float(), call.k[None].float(), call.v[None].float()
        h, t, s = call.shape
        k, v = kernels.groups(k, h), kernels.groups(v, h)
        causal = kernels.additive_term(_band(t, s, s, 1)[None, None], None)
        cached = kernels.additive_term(_band(t, s, 2, 6)[None, None], None)
        full, _ = kernels.explicit(q, k, v, scale=call.scale, additive=causal)
        cut, _ = kernels.explicit(q, k, v, scale=call.scale, additive=cached)
        each = ((cut - full).norm(dim=-1) / full.norm(dim=-1))[0]  # (h, t)
        past = torch.arange(t) + s - t >= 8
        assert queries == int(past.sum())
        assert np.abs(change[layer] - each[:, past].mean(-1).numpy()).max() < 1e-5
        mass = context.outside_mass(record.maps.call("decoder", layer), 2, 6)
        assert np.abs(outside[layer] - mass[:, past.numpy()].mean(-1)).max() < 1e-6


def test_the_first_order_estimate_follows_the_cost(llama):
    text = " ".join(random.Random(2).choices(tiny_hf.WORDS, k=48))
    prepared = llama.prepare([text], max_new_tokens=0)
    needs = context.context_needs(llama, prepared, sinks=1, window=3)
    assert needs is not None and needs.cost is not None and needs.estimate is not None
    assert np.isfinite(needs.cost).all() and np.isfinite(needs.estimate).all()
    r = np.corrcoef(needs.cost.ravel(), needs.estimate.ravel())[0, 1]
    assert r > 0.8, r
    # the estimate is the gradient on a gate between each head's full and cached outputs
    modules = context._decoder_modules(llama, prepared[0])
    gates = {m: torch.ones(n, requires_grad=True) for m, n in modules.values()}
    with streaming(gates, sinks=1, window=3):
        value, count = context.measure(llama, prepared).terms[0]()
        grads = torch.autograd.grad(value / count, [gates[m] for m, _ in modules.values()])
    want = np.stack([-g.numpy() for g in grads])
    assert np.abs(needs.estimate - want).max() < 1e-6
    # one head alone over a cache covering every key costs nothing
    whole = context.streaming_costs(llama, prepared, sinks=0, window=100, heads=[("decoder", 0, 0)])
    assert whole is not None and abs(whole[1][0, 0]) < 1e-6
    classes = needs.classes()
    assert set(classes.ravel()) <= {"streaming", "retrieval"}
    assert ((needs.effect() <= needs.threshold) == (classes == "streaming")).all()
    curve, within = context.streaming_curve(llama, prepared, needs, steps=2, budget=0.0)
    assert curve[0] == (0, pytest.approx(needs.base, abs=1e-6)) and curve[-1][0] == needs.shape[0] * needs.shape[1]
    assert within == 0 or curve[1][1] - curve[0][1] <= 0.0


def test_bad_caches_are_one_line(llama):
    prepared = llama.prepare(["the dog runs in the park"], max_new_tokens=0)
    with pytest.raises(ValueError, match="holds every key"):
        context.context_needs(llama, prepared, sinks=4, window=1020)
    with pytest.raises(ValueError, match="window"):
        context.check_cache(4, 0)
    with pytest.raises(ValueError, match="no head 9"):
        context.streaming_costs(llama, prepared, 1, 2, heads=[("decoder", 0, 9)])


def test_an_encoder_has_no_cache(tmp_path):
    bert = attnkit.load(str(tiny_hf.build("bert", tmp_path / "bert")))
    prepared = bert.prepare(["the dog runs in the park"])
    with pytest.raises(ValueError, match="no decoder self-attention"):
        context.context_needs(bert, prepared, sinks=1, window=2)
    with pytest.raises(ValueError, match="encoder attention"), streaming({"encoder.0.attn": torch.zeros(4)}):
        bert.capture(prepared[0])


def test_the_classes_separate_a_copying_head_from_a_local_one(copier_path):
    """The induction model's previous-token head reads one key back: over a cache of the first key
    and the last four it loses nothing; its induction head copies from a segment back and
    breaks."""
    model = attnkit.load(str(copier_path))
    prepared = model.prepare(probe_inputs(model, "repeated", tokens=2 * induction_model.SEGMENT + 1, inputs=8),
                             max_new_tokens=0)  # fmt: skip
    records = [model.capture(p) for p in prepared]
    from attnkit.heads.atlas import head_atlas

    atlas = head_atlas(records, "decoder", ["previous_token", "induction"])
    prev = np.unravel_index(np.argmax(atlas.scores["previous_token"]), atlas.shape)
    copy = np.unravel_index(np.argmax(atlas.scores["induction"]), atlas.shape)
    needs = context.context_needs(model, prepared, sinks=1, window=4)
    assert needs is not None and needs.cost is not None
    classes = needs.classes()
    assert classes[prev] == "streaming" and classes[copy] == "retrieval", needs.report()
    assert needs.outside[copy] > 0.5 > needs.outside[prev]
    assert needs.cost[copy] > 10 * max(needs.cost[prev], needs.threshold)
    # the repeat is a needle: the model copies it, the induction head over the cache breaks it
    assert needs.needle is not None and needs.needle_base is not None and needs.needle_base > 0.9
    assert needs.needle[prev] >= needs.needle_base - context.NEEDLE_DROP
    assert needs.needle[copy] < needs.needle_base - 0.3, needs.report()
    assert "needle" in needs.report() and all("needle" in row for row in needs.rows())


def test_the_needle_accuracy_is_the_models_own_next_token(llama):
    """A head alone streaming: the needle's accuracy is the share of the copy's tokens after its
    first where transformers' own logits put the next token first, counted by hand."""
    rng = random.Random(5)
    hay, pin = rng.choices(tiny_hf.WORDS, k=30), rng.choices(tiny_hf.WORDS, k=6)
    texts = [" ".join(hay[:10] + pin + hay[10:] + pin), " ".join(pin + hay + pin)]
    prepared = llama.prepare(texts, max_new_tokens=0)
    modules = context._decoder_modules(llama, prepared[0])
    module, n = modules["decoder", 1]
    got = context.streaming_costs(llama, prepared, sinks=1, window=4, heads=[("decoder", 1, 0)])
    assert got is not None and got.needle is not None and got.needle_base is not None
    assert np.isnan(got.needle[0, 0]) and not np.isnan(got.needle[1, 0])
    gate = torch.ones(n)
    gate[0] = 0.0
    for gates, want in ((None, got.needle_base), ({module: gate}, got.needle[1, 0])):
        right = total = 0
        for p in prepared:
            ids = torch.tensor(p.tgt_in_ids)
            copy_at = len(ids) - len(llama.hf.tokenizer(" " + " ".join(pin), add_special_tokens=False)["input_ids"])
            with torch.no_grad(), streaming(gates or {}, sinks=1, window=4):
                logits = llama.hf.model(ids[None]).logits[0]
            at = torch.arange(copy_at, len(ids) - 1)
            right += int((logits[at].argmax(-1) == ids[at + 1]).sum())
            total += len(at)
        assert want == pytest.approx(right / total, abs=1e-12)
    # an input that ends with no copy: no needle measured
    plain = llama.prepare([" ".join(hay)], max_new_tokens=0)
    assert context.streaming_costs(llama, plain, sinks=1, window=4, heads=[("decoder", 0, 0)]).needle is None
    # a copy the model wrote itself is its own prediction: no needle measured either
    written = llama.prepare([texts[1]], max_new_tokens=8)
    assert written[0].output
    assert context.streaming_costs(llama, written, sinks=1, window=4, heads=[("decoder", 0, 0)]).needle is None


def test_the_layers_before_a_head_are_taken_not_run_again(llama):
    """A head's cost from its layer on, the layers before it given from the exact run, is its cost
    from the whole forward, and the layers before it are not called."""
    text = " ".join(random.Random(3).choices(tiny_hf.WORDS, k=40))
    prepared = llama.prepare([text], max_new_tokens=0)
    got = context.streaming_costs(llama, prepared, sinks=1, window=4)
    assert got is not None
    base, costs = got.base, got.cost
    modules = context._decoder_modules(llama, prepared[0])
    measured = context.measure(llama, prepared)
    calls = []
    first = llama.hf.model.model.layers[0].self_attn
    handle = first.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        for (_, layer), (module, n) in modules.items():
            gate = torch.ones(n)
            gate[1] = 0.0
            with torch.no_grad(), streaming({module: gate}, sinks=1, window=4):
                whole = measured.mean() - base
            assert abs(costs[layer, 1] - whole) < 1e-6
        kept = context._Kept(llama, measured)
        calls.clear()
        with torch.no_grad():
            kept.mean(modules["decoder", 1][0])
        assert calls == []  # layer 0 gave its kept output: its attention never ran
        with torch.no_grad():
            kept.mean(modules["decoder", 0][0])
        assert calls == [1]
    finally:
        handle.remove()
    assert np.isfinite(costs).all() and (costs != 0).any()

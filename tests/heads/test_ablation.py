"""Ablating heads: attnkit's gates against the same head zeroed by hand in the model (a hook on
the output projection's input, where the heads are concatenated), and Michel et al.'s
importance against autograd on an explicit gate in that hook. Exact: 1e-5 on losses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnkit
import tiny_hf
from attnkit.attention.intervene import gating
from attnkit.heads.ablation import (
    ablation_effects,
    attention_modules,
    bleu_drops,
    head_importance,
    head_means,
    output_loss,
)

TEXTS = ["the dog runs on the grass in the park .", "two children are playing in the snow ."]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    model = attnkit.load(str(tiny_hf.build("llama", tmp_path_factory.mktemp("llama"))))
    return model, model.prepare(TEXTS, max_new_tokens=0)


def _by_hand(model, layer, head, prepared, gate=None, replace=None):
    """The loss with ``head`` of decoder layer ``layer`` scaled by ``gate`` (0: removed; or plus
    (1 - gate) ``replace``), by a pre-hook on that layer's o_proj (the heads side by side)."""
    attn = model.hf.model.model.layers[layer].self_attn
    d = attn.head_dim

    def hook(module, args):
        x = args[0].clone()
        g = gate if gate is not None else torch.tensor(0.0)
        part = x[..., head * d : (head + 1) * d] * g
        if replace is not None:
            part = part + (1 - g) * replace
        x = torch.cat([x[..., : head * d], part, x[..., (head + 1) * d :]], -1)
        return (x,)

    handle = attn.o_proj.register_forward_pre_hook(hook)
    try:
        total, n = 0.0, 0
        for p in prepared:
            lp, _ = model.scorer(p).forward(1)
            total -= float(lp.detach().sum())
            n += lp.numel()
        return total / n
    finally:
        handle.remove()


def test_zero_and_mean_ablation_equal_the_head_removed_by_hand(llama):
    model, prepared = llama
    _, base, effects = ablation_effects(model, prepared, "zero")
    assert effects["decoder"].shape == (2, 4)
    for layer, head in ((0, 1), (1, 3)):
        expected = float(_by_hand(model, layer, head, prepared)) - base
        assert effects["decoder"][layer, head] == pytest.approx(expected, abs=1e-5)
    means = head_means(model, prepared)
    module = model.hf.model.model.layers[1].self_attn
    d = module.head_dim
    *_, mean_effects = ablation_effects(model, prepared, "mean", heads=[("decoder", 1, 2)])
    expected = float(_by_hand(model, 1, 2, prepared, replace=means[module][2])) - base
    assert mean_effects["decoder"][1, 2] == pytest.approx(expected, abs=1e-5)
    assert np.isnan(mean_effects["decoder"][0, 0])
    assert means[module].shape == (4, d)


def test_importance_is_the_gradient_on_an_explicit_gate(llama):
    model, prepared = llama
    found = head_importance(model, prepared)["decoder"]
    for layer in range(2):
        expected = torch.zeros(4)
        for p in prepared:
            gates = torch.ones(4, requires_grad=True)
            attn = model.hf.model.model.layers[layer].self_attn
            d = attn.head_dim

            def hook(module, args, gates=gates, d=d):
                x = args[0]
                return (x * gates.repeat_interleave(d),)

            handle = attn.o_proj.register_forward_pre_hook(hook)
            try:
                lp, _ = model.scorer(p).forward(1)
                (grad,) = torch.autograd.grad(-lp.mean(), [gates])
            finally:
                handle.remove()
            expected += grad.abs()
        np.testing.assert_allclose(found[layer], (expected / len(prepared)).numpy(), atol=1e-5)
    assert all(p.grad is None for p in model.hf.model.parameters())  # the model itself untouched


def test_a_gate_of_ones_changes_nothing_and_bad_heads_are_one_line(llama):
    model, prepared = llama
    modules = attention_modules(model, prepared[0])
    ones = {m: torch.ones(n) for m, n in modules.values()}
    assert output_loss(model, prepared, ones) == pytest.approx(output_loss(model, prepared), abs=1e-6)
    with pytest.raises(ValueError, match="no head 9 in layer 1 of the decoder attention"):
        ablation_effects(model, prepared, heads=[("decoder", 1, 9)])
    with pytest.raises(ValueError, match="ablation is 'zero' or 'mean'"):
        ablation_effects(model, prepared, "half")
    with gating({}):
        assert output_loss(model, prepared) > 0


def test_a_translators_heads_ablate_as_by_hand_and_gates_reach_beam_search():
    model = attnkit.load("multi30k-en-de")
    prepared = model.prepare(["A man is riding a bike .", "Two dogs play in the snow ."])
    modules = attention_modules(model, prepared[0])
    cross = model.module.decoder_layers[1].cross_attn
    assert modules["cross", 1] == (cross, 4) and modules["encoder", 0][0] is model.module.encoder.layers[0].self_attn
    _, base, effects = ablation_effects(model, prepared, heads=[("cross", 1, 2), ("encoder", 3, 0)])
    d = cross.head_dim

    def zero_head(head):
        def hook(module, args):
            x = args[0].clone()
            x[..., head * d : (head + 1) * d] = 0
            return (x,)

        return hook

    for (kind, layer, head), module in ((("cross", 1, 2), cross), (("encoder", 3, 0), modules["encoder", 3][0])):
        handle = module.out_proj.register_forward_pre_hook(zero_head(head))
        try:
            expected = output_loss(model, prepared) - base
        finally:
            handle.remove()
        assert effects[kind][layer, head] == pytest.approx(expected, abs=1e-5)
    # module by module, not call by call: every decoding step of the beam search is gated, in the
    # decoding threads too (64 sentences: two workers on two threads)
    texts = ["A little girl is climbing a tree in the park .", "A man sells fruit at a market ."] * 32
    seeing = model.translate(texts)
    every_cross = {m: torch.zeros(n) for (k, _), (m, n) in modules.items() if k == "cross"}
    with gating(every_cross):
        blind = model.translate(texts)
    assert all(b != s for b, s in zip(blind, seeing)) and len(set(blind[::2])) == 1


@pytest.mark.parametrize("name", ["multi30k-en-de-rnn", "multi30k-en-de-rnn-local-p"])
def test_an_rnns_one_attention_ablates_as_its_context_zeroed_by_hand(name):
    model = attnkit.load(name)
    prepared = model.prepare(["A man is riding a bike .", "Two dogs play in the snow ."])
    modules = attention_modules(model, prepared[0])
    assert list(modules) == [("cross", 0)] and modules["cross", 0] == (model.module.attention, 1)
    measured, base, effects = ablation_effects(model, prepared, "zero")
    assert measured.short == "loss" and effects["cross"].shape == (1, 1)
    d = model.module.hidden_size  # h~_t = tanh(W_c [c_t; h_t]): the context is the first d features

    def hook(module, args):
        x = args[0].clone()
        x[..., :d] = 0
        return (x,)

    handle = model.module.combine.register_forward_pre_hook(hook)
    try:
        expected = output_loss(model, prepared) - base
    finally:
        handle.remove()
    assert effects["cross"][0, 0] == pytest.approx(expected, abs=1e-5) and expected > 0.5
    importance = head_importance(model, prepared)["cross"]
    assert importance.shape == (1, 1) and importance[0, 0] > 0


def test_an_encoders_measure_is_the_share_of_its_sentence_vector_lost(tmp_path):
    model = attnkit.load(str(tiny_hf.build("bert", tmp_path / "bert")))
    prepared = model.prepare(TEXTS)
    measured, base, effects = ablation_effects(model, prepared, "zero", heads=[("encoder", 1, 0)])
    assert measured.short == "vector lost" and base == pytest.approx(0.0, abs=1e-6)
    bert = model.hf.model
    layer = bert.encoder.layer[1].attention
    d = bert.config.hidden_size // bert.config.num_attention_heads

    def vectors(hook=None):
        handle = layer.output.dense.register_forward_pre_hook(hook) if hook else None
        try:
            out = []
            for text in TEXTS:
                ids = model.hf.tokenizer(text, return_tensors="pt")
                with torch.no_grad():
                    out.append(bert(**ids).last_hidden_state.mean(1)[0])
            return out
        finally:
            if handle:
                handle.remove()

    def zero_head(module, args):
        x = args[0].clone()
        x[..., :d] = 0
        return (x,)

    clean, ablated = vectors(), vectors(zero_head)
    expected = np.mean([1 - float(a @ c) / float(c @ c) for a, c in zip(ablated, clean)])
    assert effects["encoder"][1, 0] == pytest.approx(expected, abs=1e-5) and abs(expected) > 1e-4
    assert np.isnan(effects["encoder"][0, 0])


def test_a_translators_bleu_drop_is_sacrebleu_with_the_head_removed_by_hand():
    import sacrebleu

    model = attnkit.load("multi30k-en-de")
    src = ["A man is riding a bike .", "Two dogs play in the snow .", "A woman sings on a stage ."]
    refs = ["Ein Mann fährt Fahrrad .", "Zwei Hunde spielen im Schnee .", "Eine Frau singt auf einer Bühne ."]
    prepared = model.prepare(src)
    base, drops = bleu_drops(model, prepared, refs, heads=[("cross", 3, 3)], beam=2)
    assert base == pytest.approx(sacrebleu.corpus_bleu(model.translate(src, beam=2), [refs]).score, abs=1e-9)
    cross = model.module.decoder_layers[3].cross_attn
    d = cross.head_dim

    def hook(module, args):
        x = args[0].clone()
        x[..., 3 * d :] = 0
        return (x,)

    handle = cross.out_proj.register_forward_pre_hook(hook)
    try:
        by_hand = sacrebleu.corpus_bleu(model.translate(src, beam=2), [refs]).score
    finally:
        handle.remove()
    assert drops["cross"][3, 3] == pytest.approx(base - by_hand, abs=1e-9) and np.isnan(drops["cross"][0, 0])
    with pytest.raises(ValueError, match="3 sentences but 2 references"):
        bleu_drops(model, prepared, refs[:2])


def test_the_measure_forms_no_map_and_refuses_a_gradient_that_would_not_fit(llama, monkeypatch):
    """What ablation and importance run records nothing (no layer's T x T weights are formed) and
    gives the same scores as the recorded pass (1e-5); an importance gradient larger than the free
    memory is one line before any work."""
    from attnkit import memory
    from attnkit.heads import ablation

    model, prepared = llama
    scorer = model.scorer(prepared[0])
    recorded, calls = scorer.forward(1)
    alone, none = scorer.forward(1, maps=False)
    assert calls and none == []
    np.testing.assert_allclose(alone.detach().numpy(), recorded.detach().numpy(), atol=1e-5)
    longest = max(len(p.tgt_in_ids) for p in prepared)  # a decoder's one sequence, prompt included
    need = ablation.gradient_bytes(model.network(), longest)
    assert need > 4 * longest * model.network().get_input_embeddings().weight.shape[0]  # the scores at least
    monkeypatch.setattr(memory, "available_bytes", lambda: need)  # less than the headroom allows
    with pytest.raises(ValueError, match=f"importance gradient of an input of {longest} tokens needs"):
        head_importance(model, prepared)
    # the ablation's forward is estimated too: the scores and their log-softmax at least
    forward = ablation.forward_bytes(model.network(), longest)
    assert 2 * 4 * longest * model.network().get_input_embeddings().weight.shape[0] < forward < need
    monkeypatch.setattr(memory, "available_bytes", lambda: forward)
    with pytest.raises(ValueError, match=f"model's forward over an input of {longest} tokens needs"):
        ablation.ablation_effects(model, prepared)


def test_an_accelerators_free_memory_counts_what_pytorch_holds_cached(monkeypatch):
    """CUDA's free memory leaves out the blocks PyTorch's allocator keeps for reuse after a step;
    the estimate counts them free, so a step that follows a larger one is not refused."""
    import torch

    from attnkit import memory

    gib = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10 * gib, 140 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 50 * gib)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 20 * gib)
    assert memory.device_bytes("cuda:0") == 40 * gib
    memory.check_fits(32 * gib, "a step", "less", "cuda:0")  # 0.8 of it may be planned
    with pytest.raises(ValueError, match="a step needs 35.4 GB and 42.9 GB is free: less"):
        memory.check_fits(33 * gib, "a step", "less", "cuda:0")

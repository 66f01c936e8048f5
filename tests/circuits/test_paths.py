"""Pattern and value patching, path patching, composition scores and QK attribution against
independent references: the same patches written by hand as torch hooks on GPT-2's own modules
(c_attn's query, key and value columns of one head, c_proj's rows of one head), the composition
scores and the score's terms computed by hand from GPT-2's weights, and the model's own scores;
a head recomputed from its own call is the model's own output on every kind of attention term
(grouped keys, learned sinks, soft-caps)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnkit
import families
from attnkit import circuits
from attnkit.circuits import paths, qk, reading
from tiny_hf import build

TEXT = "the dog runs in the park and the dog"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {f: attnkit.load(build(f, root / f), device="cpu") for f in ("gpt2", "llama", "qwen2", "bart")}


def _family(tmp_path, model_type):
    return attnkit.load(families.saved(model_type, tmp_path / model_type), device="cpu")


@pytest.fixture(scope="module")
def pairs(models):
    return circuits.repeated_pairs(models["gpt2"], n=2, length=6)


def _gpt2_run(model, text, hooks):
    """GPT-2's logits at the last position with torch hooks {module: (kind, fn)}, no attnkit site."""
    net = model.hf.model
    handles = [
        m.register_forward_pre_hook(fn) if kind == "pre" else m.register_forward_hook(fn)
        for m, (kind, fn) in hooks.items()
    ]
    try:
        with torch.no_grad():
            return net(input_ids=torch.tensor([model.hf.encode_text(text)])).logits[0, -1]
    finally:
        for h in handles:
            h.remove()


def _diff(model, logits, pair):
    return float(logits[model.answer_token(pair.answer)] - logits[model.answer_token(pair.foil)])


def _output_of(model, text, module, pre=None):
    """``module``'s output on a run of ``text`` (with ``pre``, a pre-hook on another module)."""
    kept = {}
    hooks = {module: ("post", lambda m, a, o: kept.update(x=o.detach()))}
    _gpt2_run(model, text, hooks | (pre or {}))
    return kept["x"]


def _columns_from(given, columns):
    """A forward hook that puts ``given``'s ``columns`` into the module's output."""

    def hook(m, a, o):
        o = o.clone()
        for cols in columns:
            o[..., cols] = given[..., cols]
        return o

    return hook


def _columns(net, part, head):
    d = net.config.n_embd
    e = d // net.config.n_head
    return slice(part * d + head * e, part * d + (head + 1) * e)


@pytest.mark.parametrize("of", ["patterns", "values"])
def test_pattern_and_value_patching_are_the_same_patch_by_hand(models, pairs, of):
    gpt2 = models["gpt2"]
    net = gpt2.hf.model
    found = circuits.activation_patching(gpt2, pairs, of=of)
    for i, pair in enumerate(pairs):
        for j, unit in enumerate(found.units):
            c_attn = net.transformer.h[unit.layer].attn.c_attn
            parts = (0, 1) if of == "patterns" else (2,)  # a pattern is its queries and keys
            patch = _columns_from(_output_of(gpt2, pair.clean, c_attn), [_columns(net, x, unit.head) for x in parts])
            want = _diff(gpt2, _gpt2_run(gpt2, pair.corrupt, {c_attn: ("post", patch)}), pair)
            assert found.values[i, j] == pytest.approx(want, abs=1e-5)


def test_a_head_recomputed_from_its_own_call_is_its_output(models, tmp_path):
    """Grouped keys (Llama), learned sinks (GPT-OSS) and soft-capped scores (Gemma 2)."""
    for model in (models["llama"], _family(tmp_path, "gpt_oss"), _family(tmp_path, "gemma2")):
        calls = circuits.patching.calls_of(model, TEXT, None, {"blocks.1.attn.z"})
        z = model.cache(TEXT, sites=["blocks.1.attn.z"])["blocks.1.attn.z"][0]
        for head in range(z.shape[0]):
            got = reading.head_output(calls["blocks.1.attn.z"], head)
            torch.testing.assert_close(got, z[head].float(), atol=1e-5, rtol=1e-5)


def _write(net, layer, head, text, model):
    """One GPT-2 head's write into the stream (t, d), by hand: its slice of c_proj's input times its rows."""
    proj = net.transformer.h[layer].attn.c_proj
    kept = {}
    _gpt2_run(model, text, {proj: ("pre", lambda m, a: kept.update(x=a[0].detach()))})
    e = net.config.n_embd // net.config.n_head
    rows = slice(head * e, (head + 1) * e)
    return kept["x"][0, :, rows] @ proj.weight[rows]


def test_path_patching_is_the_same_two_passes_by_hand(models, pairs):
    gpt2 = models["gpt2"]
    net = gpt2.hf.model
    senders = [circuits.Unit("blocks.0.attn.z", 0, h) for h in (0, 3)]
    receivers = [circuits.Unit("blocks.1.attn.z", 1, h) for h in (1, 2)]
    found = paths.path_patching(gpt2, pairs, senders=senders, receivers=receivers)
    assert found.values.shape == (2, 2, 2, 3)
    block, c_attn = net.transformer.h[1], net.transformer.h[1].attn.c_attn
    for n, pair in enumerate(pairs):
        for i, a in enumerate(senders):
            delta = _write(net, 0, a.head, pair.clean, gpt2) - _write(net, 0, a.head, pair.corrupt, gpt2)
            # pass 1: the receivers' inputs with the sender's change added to the stream into block 1
            added = {block: ("pre", lambda m, args, delta=delta: (args[0] + delta[None], *args[1:]))}
            given = _output_of(gpt2, pair.corrupt, c_attn, added)
            for j, b in enumerate(receivers):
                for k, part in enumerate((0, 1, 2)):  # q, k, v of that head alone
                    patch = _columns_from(given, [_columns(net, part, b.head)])
                    want = _diff(gpt2, _gpt2_run(gpt2, pair.corrupt, {c_attn: ("post", patch)}), pair)
                    assert found.values[n, i, j, k] == pytest.approx(want, abs=1e-5)
    assert np.isfinite(found.effect).all() and len(found.table()) == 2 * 2 * 3


def _gpt2_heads(net, layer):
    """GPT-2's W_Q, W_K, W_V (d, h, e) with ln_1's weight folded in and centred over d, and W_O
    (h, e, d) centred over d, as TransformerLens folds and centres them."""
    blk = net.transformer.h[layer]
    d, h = net.config.n_embd, net.config.n_head
    e = d // h
    w = blk.ln_1.weight[:, None] * blk.attn.c_attn.weight  # (d, 3d)
    w = w - w.mean(0, keepdim=True)
    q, k, v = (w[:, i * d : (i + 1) * d].reshape(d, h, e) for i in range(3))
    o = blk.attn.c_proj.weight.reshape(h, e, d)
    return q, k, v, o - o.mean(-1, keepdim=True)


def _score(x, y):
    return float(torch.linalg.matrix_norm(x @ y) / (torch.linalg.matrix_norm(x) * torch.linalg.matrix_norm(y)))


def test_composition_scores_are_the_weights_by_hand(models):
    gpt2 = models["gpt2"]
    net = gpt2.hf.model
    found = paths.composition_scores(gpt2, TEXT)
    heads = net.config.n_head
    assert found.shape == (2 * heads, 2 * heads, 3)
    assert np.isnan(found[:heads, :heads]).all() and np.isnan(found[heads:]).all()  # no later layer reads them
    _, _, v0, o0 = _gpt2_heads(net, 0)
    q1, k1, v1, o1 = _gpt2_heads(net, 1)
    with torch.no_grad():
        for a in range(heads):
            ov = v0[:, a] @ o0[a]  # (d, d)
            for b in range(heads):
                qk_b = q1[:, b] @ k1[:, b].T
                want = [_score(ov, qk_b), _score(ov, qk_b.T), _score(ov, v1[:, b] @ o1[b])]
                np.testing.assert_allclose(found[a, heads + b], want, atol=1e-5)


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2"])
def test_the_score_terms_sum_to_the_models_score(models, family):
    m = models[family]
    found = qk.qk_attribution(m, TEXT, "blocks.1.attn", 2, 7, 3)
    call = m.cache(TEXT, sites=["blocks.1.attn"]).calls["blocks.1.attn"]
    own = call.scale * float(call.q[2, 7] @ call.k[call.kv_head(2), 3])
    assert found.terms.sum() == pytest.approx(own, abs=1e-5 * (1 + abs(own)))
    assert found.score == pytest.approx(own, abs=1e-6)
    assert found.names[0] == "embed" and found.names[-1] == "constant"
    assert found.terms.shape == (len(found.names), len(found.names))
    assert 0 < found.weight < 1 and found.by_query.sum() == pytest.approx(found.terms.sum())


@pytest.mark.parametrize("model_type", ["phi", "gpt_neox", "gemma", "qwen3"])
def test_the_score_terms_sum_on_partial_rotary_parallel_and_offset_norms(tmp_path, model_type):
    """Phi's rotary positions cover part of each head; GPT-NeoX's attention and MLP read one stream
    in parallel; Gemma's norm scales by 1 + weight; Qwen3 normalises each head's queries and keys
    (frozen at their scale, as the input norm is)."""
    m = _family(tmp_path, model_type)
    found = qk.qk_attribution(m, TEXT, "blocks.1.attn", 1, 6, 2)
    assert found.terms.sum() == pytest.approx(found.score, abs=1e-5 * (1 + abs(found.score)))


def test_each_gpt2_score_term_is_its_hand_written_bilinear_form(models):
    gpt2 = models["gpt2"]
    net = gpt2.hf.model
    i, j, head = 7, 3, 2
    found = qk.qk_attribution(gpt2, TEXT, "blocks.1.attn", head, i, j)
    blk = net.transformer.h[1]
    x = {}
    _gpt2_run(gpt2, TEXT, {blk: ("pre", lambda m, a: x.update(x=a[0][0].detach()))})
    d, e = net.config.n_embd, net.config.n_embd // net.config.n_head

    def frozen(p):  # ln_1 at position p with its scale frozen: v -> (v - mean v) w / sigma_p
        sigma = torch.sqrt(x["x"][p].var(unbiased=False) + blk.ln_1.eps)
        return lambda v: (v - v.mean()) * blk.ln_1.weight / sigma

    w, b = blk.attn.c_attn.weight, blk.attn.c_attn.bias
    wq, wk = w[:, head * e : (head + 1) * e], w[:, d + head * e : d + (head + 1) * e]
    bq, bk = b[head * e : (head + 1) * e], b[d + head * e : d + (head + 1) * e]
    embed = net.transformer.wte.weight[gpt2.hf.encode_text(TEXT)] + net.transformer.wpe.weight[: len(x["x"])]
    with torch.no_grad():
        q_embed = frozen(i)(embed[i]) @ wq
        k_embed = frozen(j)(embed[j]) @ wk
        q_const = (blk.ln_1.bias @ wq) + bq
        k_const = (blk.ln_1.bias @ wk) + bk
    scale = e**-0.5
    at = {n: found.names.index(n) for n in ("embed", "constant")}
    assert found.terms[at["embed"], at["embed"]] == pytest.approx(scale * float(q_embed @ k_embed), abs=1e-6)
    assert found.terms[at["constant"], at["embed"]] == pytest.approx(scale * float(q_const @ k_embed), abs=1e-6)
    assert found.terms[at["embed"], at["constant"]] == pytest.approx(scale * float(q_embed @ k_const), abs=1e-6)
    w0 = _write(net, 0, 1, TEXT, gpt2)  # head 0.1's write at the key's position
    at_head = found.names.index("blocks.0.attn.h1")
    with torch.no_grad():
        want = scale * float(q_embed @ (frozen(j)(w0[j]) @ wk))
    assert found.terms[at["embed"], at_head] == pytest.approx(want, abs=1e-6)


def test_what_qk_attribution_cannot_decompose_is_refused(models, tmp_path):
    gpt2 = models["gpt2"]
    cases = [
        (lambda: qk.qk_attribution(gpt2, TEXT, "blocks.1.attn", 9, 7, 3), "has heads 0 to 3, not 9"),
        (lambda: qk.qk_attribution(gpt2, TEXT, "blocks.1.attn", 0, 3, 7), "query 3 cannot see key 7"),
        (lambda: qk.qk_attribution(gpt2, TEXT, "blocks.1.mlp_out", 0, 3, 2), "no attention site 'blocks.1.mlp_out'"),
        (lambda: qk.qk_attribution(gpt2, TEXT, "blocks.1.attn", 0, 30, 2), "position 30 is outside"),
        (
            lambda: qk.qk_attribution(models["bart"], "a dog", "decoder.0.cross", 0, 1, 0, target="ein"),
            "is cross-attention",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    llama = models["llama"]  # queries made non-linear in the stream: refused, not split
    handle = llama.hf.model.model.layers[1].self_attn.q_proj.register_forward_hook(lambda m, a, o: o * o.abs())
    try:
        with pytest.raises(ValueError, match="queries are not an affine read of its stream"):
            qk.qk_attribution(llama, TEXT, "blocks.1.attn", 0, 6, 2)
    finally:
        handle.remove()


def test_bad_path_patching_input_is_one_line(models, pairs):
    gpt2 = models["gpt2"]
    cases = [
        (lambda: paths.path_patching(gpt2, pairs, via=("x",)), "unknown path 'x'"),
        (
            lambda: paths.path_patching(gpt2, pairs, senders=[circuits.Unit("blocks.0.attn.z", 0, 4)]),
            "has heads 0 to 3, not 4",
        ),
        (
            lambda: paths.path_patching(gpt2, pairs, senders=[circuits.Unit("blocks.0.mlp_out", 0, 0)]),
            "no head-output site",
        ),
        (
            lambda: paths.path_patching(gpt2, [circuits.Pair("the dog runs", "a dog", " in", " on")]),
            "path patching needs them equal",
        ),
        (lambda: circuits.attribution_patching(gpt2, pairs, of="patterns"), "not patterns"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_path_patching_stands_where_the_weights_give_no_composition(tmp_path):
    """Qwen3's query and key norms make its queries depend on the stream's scale: its paths are
    patched as any, its composition scores are NaN with the reason."""
    m = _family(tmp_path, "qwen3")
    found = paths.path_patching(
        m,
        circuits.repeated_pairs(m, n=1, length=6),
        senders=[circuits.Unit("blocks.0.attn.z", 0, 0)],
        receivers=[circuits.Unit("blocks.1.attn.z", 1, 1)],
    )
    assert np.isfinite(found.values).all() and np.isnan(found.composition).all()
    assert found.unweighted is not None and "not affine" in found.unweighted

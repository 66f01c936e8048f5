import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_explain import _fresh

from attnkit.inspection import prepare
from attnkit.inspection.explain import attention_module
from attnkit.inspection.multihead import explain_layer, scaling_study, softmax_jacobian_norm
from attnkit.loading.model_dir import load_model
from attnkit.plots.multihead import plot_layer_walk


def test_the_layer_equals_torch_multi_head_attention(trained_toys):
    """Every head's map and the layer's output, against PyTorch's own multi-head attention fed the
    same input and weights (attnkit's projections share nn.MultiheadAttention's layout), 1e-5."""
    model, tok, _ = load_model(trained_toys["transformer"])
    [p] = prepare(model, tok, ["a b c d e f"])
    walk = explain_layer(model, p, kind="encoder", layer=0)
    m = attention_module(model, "encoder", 0)
    x = torch.from_numpy(walk.x)[:, None]  # (t, batch 1, d_model), as the functional form takes it
    out, weights = F.multi_head_attention_forward(
        x, x, x, m.d_model, m.num_heads, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0,
        m.out_proj.weight, m.out_proj.bias, training=False, need_weights=True, average_attn_weights=False,
    )  # fmt: skip
    np.testing.assert_allclose(walk.weights, weights[0].detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(walk.out, out[:, 0].detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(walk.out, walk.model_out, atol=1e-5)
    assert walk.output_error < 1e-5 and walk.weight_error < 1e-5
    assert walk.concat.shape == (len(p.src_tokens), m.d_model)
    np.testing.assert_allclose(walk.concat[:, m.head_dim : 2 * m.head_dim], walk.z[1])  # head 1's columns


@pytest.mark.parametrize("kind", ["decoder", "cross"])
def test_decoder_and_cross_layers_rebuild_the_output(trained_toys, kind):
    model, tok, _ = load_model(trained_toys["transformer"])
    [p] = prepare(model, tok, ["a b c d e"])
    walk = explain_layer(model, p, kind=kind, layer=-1)
    assert walk.output_error < 1e-5 and walk.weight_error < 1e-5
    np.testing.assert_allclose(walk.weights.sum(-1), 1.0, atol=1e-6)
    if kind == "decoder":  # causal: no weight above the diagonal
        assert np.all(np.triu(walk.weights[0], 1) == 0)
    else:
        assert walk.k.shape[1] == len(p.src_tokens) and walk.q.shape[1] == len(p.tgt_in_tokens)
    assert "matches the layer's output" in walk.report()


@pytest.mark.parametrize("positions", ["rope", "alibi", "t5"])
def test_positions_inside_attention(trained_toys, positions):
    """RoPE rotates q and k before the heads meet them; ALiBi and T5 add a bias: both reach the output."""
    model, tok = _fresh(trained_toys["transformer"], positions=positions)
    [p] = prepare(model, tok, ["a b c d e f"], targets=["f e d c"])
    walk = explain_layer(model, p, kind="encoder", layer=0)
    assert walk.output_error < 1e-5 and walk.weight_error < 1e-5


def test_refusals(trained_toys):
    model, tok = _fresh(trained_toys["transformer"], positions="relative")
    [p] = prepare(model, tok, ["a b c"])
    with pytest.raises(ValueError, match="relative value term"):
        explain_layer(model, p, kind="encoder", layer=0)
    rnn, rtok, _ = load_model(trained_toys["rnn"])
    [rp] = prepare(rnn, rtok, ["a b"])
    with pytest.raises(ValueError, match="not multi-head attention"):
        explain_layer(rnn, rp, kind="cross", layer=0)
    with pytest.raises(ValueError, match="at least 2 keys"):
        scaling_study([4], keys=1)


def test_softmax_jacobian_norm_equals_autograd():
    scores = torch.randn(5, 7, dtype=torch.float64)
    a = torch.softmax(scores, -1)
    for row, s in zip(softmax_jacobian_norm(a), scores):
        jac = torch.autograd.functional.jacobian(lambda v: torch.softmax(v, -1), s)
        assert row.item() == pytest.approx(torch.linalg.matrix_norm(jac).item(), abs=1e-12)


def test_scaling_study_measures_the_papers_footnote():
    """Vaswani et al.'s footnote 4: q · k of unit-variance components has variance d_k; divided by
    sqrt(d_k), 1. Undivided, the softmax saturates: its largest weight rises toward 1 and its
    gradient falls; divided, both stay where d_k = 1 put them."""
    s = scaling_study([1, 4, 16, 64, 256], keys=16, samples=2048)
    np.testing.assert_allclose(s.variance[0], s.d_k, rtol=0.1)
    np.testing.assert_allclose(s.variance[1], 1.0, rtol=0.1)
    assert np.all(np.diff(s.largest[0]) > 0) and s.largest[0, -1] > 0.85
    assert np.ptp(s.largest[1]) < 0.1 and np.ptp(s.gradient[1]) < 0.05
    assert s.gradient[0, -1] < s.gradient[1, -1] / 2


def test_the_figure_draws_every_step(trained_toys):
    model, tok, _ = load_model(trained_toys["transformer"])
    [p] = prepare(model, tok, ["a b c d"])
    walk = explain_layer(model, p, kind="cross", layer=0)
    fig = plot_layer_walk(walk, scaling_study([1, 4, 16], samples=64), model="toy")
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    assert any("1. Project" in t for t in texts) and any("4. Why divide" in t for t in texts)
    assert sum(f"head {h}:" in t for t in texts for h in range(walk.heads)) == walk.heads
    sizes = [t.get_fontsize() for t in fig.findobj(lambda a: hasattr(a, "get_fontsize")) if t.get_text()]
    assert min(sizes) >= 8.0  # 9 px or more at a docs column's 880 px

"""Value-norm (Kobayashi et al. 2020): each head's f(x) = (x W_V + b_V) W_O, checked against an
explicit per-head computation from the layer's raw parameters, and the invariant that the
layer's output is the sum of the weighted vectors plus the output bias."""

import numpy as np
import torch

from attnkit import MultiHeadAttention
from attnkit.attribution import encoder_value_norms, layer_value_norms, value_norm_scores
from attnkit.config import ModelConfig, TransformerConfig
from attnkit.inspection import Prepared
from attnkit.models import build_model
from formed import formed


@torch.no_grad()
def test_value_vectors_rebuild_the_layers_output():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    out = mha(x, x, x, need_weights=True)
    f = mha.value_vectors(x)  # (b, h, s, d_model)
    rebuilt = torch.einsum("bhqk,bhkd->bqd", out.weights, f) + mha.out_proj.bias
    torch.testing.assert_close(rebuilt, out.context, atol=1e-5, rtol=1e-5)
    # explicitly, head by head, from the packed in-projection and the out-projection's columns
    w_v, b_v = mha.in_proj_weight[32:48], mha.in_proj_bias[32:48]
    for h in range(4):
        cols = slice(4 * h, 4 * h + 4)
        explicit = (x @ w_v[cols].T + b_v[cols]) @ mha.out_proj.weight[:, cols].T
        torch.testing.assert_close(f[:, h], explicit, atol=1e-6, rtol=1e-5)


def test_layer_norms_equal_an_explicit_loop():
    rng = np.random.default_rng(0)
    weights = torch.tensor(rng.dirichlet(np.ones(5), size=(3, 4)), dtype=torch.float32)  # (h, q, k)
    vectors = torch.tensor(rng.normal(size=(3, 5, 8)), dtype=torch.float32)  # (h, k, d)
    per_head, combined = layer_value_norms(weights, vectors)
    for i in range(4):
        for j in range(5):
            for h in range(3):
                assert abs(per_head[h, i, j] - np.linalg.norm(weights[h, i, j] * vectors[h, j])) < 1e-5
            total = sum(weights[h, i, j] * vectors[h, j] for h in range(3))
            assert abs(combined[i, j] - np.linalg.norm(total)) < 1e-5
    scores = value_norm_scores(combined[None].numpy())
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6)


def test_an_encoders_value_norms_use_each_layers_own_input():
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="encoder",
        d_model=16,
        layers=2,
        dropout=0.0,
        max_positions=16,
        transformer=TransformerConfig(heads=4, ffn=32),
    )
    model = build_model(cfg, src_vocab=20, tgt_vocab=20, pad_id=0, shared_vocab=True).eval()
    ids = [5, 6, 7, 8, 2]
    norms = encoder_value_norms(model, Prepared("x", ids, [str(i) for i in ids]))
    assert norms.shape == (2, 5, 5)
    # the same from hooks of our own: each layer's input and weights, the explicit per-head sum
    seen = []
    sites = [s.module for s in model.attention_sites() if s.kind == "encoder"]
    hooks = [m.register_forward_hook(lambda mod, a, o: seen.append((mod, a[2]))) for m in sites]
    with torch.no_grad():
        _, maps, _ = formed(lambda: model.encode(torch.tensor([ids]), torch.ones(1, 5, dtype=torch.bool)))
    for h in hooks:
        h.remove()
    for layer, ((mod, x), w) in enumerate(zip(seen, maps["encoder"], strict=True)):
        f = mod.value_vectors(x)[0].detach()
        expected = torch.stack([torch.einsum("hk,hkd->kd", w[0, :, i], f).norm(dim=-1) for i in range(5)])
        np.testing.assert_allclose(norms[layer], expected.numpy(), atol=1e-5)

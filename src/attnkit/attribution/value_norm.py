"""Value-norm attention (Kobayashi et al. 2020, "Attention is Not Only a Weight: Analyzing
Transformers with Vector Norms"): a weight says how much a position attends to a token, but
the token's contribution is a vector, and its size matters.

For one self-attention layer, head h sends position i the vector

    a^h_ij f^h(x_j),   f^h(x) = (x W_V^h + b_V^h) W_O^h          (the output bias b_O aside)

so the layer's output at i is sum_h sum_j a^h_ij f^h(x_j) + b_O. The measures are

    per head:     || a^h_ij f^h(x_j) || = a^h_ij || f^h(x_j) ||
    the layer:    || sum_h a^h_ij f^h(x_j) ||                     (Kobayashi et al.'s ||sum a f||)

A large weight on a token whose transformed vector is short (a frequent token, [CLS], [SEP]
or a full stop, as the paper finds) contributes little; the norms show it. Rows are shown
normalised to sum to 1 where methods are compared on one scale.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..attention.record import AttentionCall, MapView


def value_vectors(call: AttentionCall, w_o: Tensor) -> Tensor:
    """f^h(x_j) = v^h_j W_O^h of a call recorded with its values: (h, s, d_model), from its v
    (h_kv, s, d) and the output projection W_O (d_model, h x d). A grouped-query head reads its
    group's values."""
    if call.v is None:
        raise ValueError("value vectors need a recording that keeps the values (values=True)")
    heads, kv_heads, head_dim = call.heads, call.v.shape[0], call.v.shape[-1]
    values = call.v.float().cpu().repeat_interleave(heads // kv_heads, dim=0)  # (h, s, d)
    w = w_o.detach().float().cpu().view(w_o.shape[0], heads, head_dim)
    return torch.einsum("hsd,mhd->hsm", values, w)


def call_value_norms(call: AttentionCall, w_o: Tensor) -> Tensor:
    """The layer's (q, k) norms || sum_h a^h_ij f^h(x_j) || of a call recorded with its values."""
    weights = torch.stack([torch.from_numpy(MapView(call, h).dense()) for h in range(call.heads)])
    return layer_value_norms(weights, value_vectors(call, w_o))[1]


def layer_value_norms(weights: Tensor, vectors: Tensor) -> tuple[Tensor, Tensor]:
    """weights (h, q, k) of one layer, vectors f^h(x_j) (h, k, d) -> (per head (h, q, k) norms
    || a^h_ij f^h(x_j) ||, the layer's (q, k) norms || sum_h a^h_ij f^h(x_j) ||)."""
    if weights.shape[0] != vectors.shape[0] or weights.shape[2] != vectors.shape[1]:
        raise ValueError(f"weights {tuple(weights.shape)} do not fit value vectors {tuple(vectors.shape)}")
    per_head = weights * vectors.norm(dim=-1)[:, None, :]
    combined = torch.einsum("hqk,hkd->qkd", weights, vectors).norm(dim=-1)
    return per_head, combined


def value_norm_scores(norms: np.ndarray) -> np.ndarray:
    """The last layer's (q, k) norms, each row divided by its sum: where position i's update comes from."""
    last = np.asarray(norms[-1], dtype=np.float64)
    return last / np.maximum(last.sum(-1, keepdims=True), 1e-12)

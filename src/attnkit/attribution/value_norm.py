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

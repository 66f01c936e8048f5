"""Raw attention and attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in
Transformers", section 3).

Self-attention mixes a layer's input with the residual connection that carries the input past
it. Rollout models that as an equal mix, per layer l:

    A'_l = 0.5 * mean_h A_l + 0.5 * I,   rows renormalised to sum to 1,

and follows the information from the top layer L down to the input tokens by the product

    R = A'_L A'_(L-1) ... A'_1,

so R[i, j] is how much of top-layer position i comes from input token j (each row sums to 1).
"""

from __future__ import annotations

import numpy as np


def _check(maps: np.ndarray) -> np.ndarray:
    maps = np.asarray(maps, dtype=np.float64)
    if maps.ndim != 4 or maps.shape[-1] != maps.shape[-2]:
        raise ValueError(f"self-attention maps must be (layers, heads, tokens, tokens), got shape {tuple(maps.shape)}")
    if not np.isfinite(maps).all() or (maps < 0).any():
        raise ValueError("attention weights must be finite and >= 0")
    return maps


def raw_attention(maps: np.ndarray, layer: int = -1, head: int | str = "mean") -> np.ndarray:
    """One layer's attention (the mean of its heads, or ``head``): (tokens, tokens)."""
    maps = _check(maps)
    if not -maps.shape[0] <= layer < maps.shape[0]:
        raise ValueError(f"layer {layer} out of range: the maps have {maps.shape[0]} layers")
    if head == "mean":
        return maps[layer].mean(axis=0)
    if not isinstance(head, int) or not 0 <= head < maps.shape[1]:
        raise ValueError(f"head {head!r} out of range: the maps have {maps.shape[1]} heads")
    return maps[layer, head]


def residual_attention(maps: np.ndarray) -> np.ndarray:
    """A'_l = 0.5 mean_h A_l + 0.5 I, rows renormalised: (layers, tokens, tokens)."""
    maps = _check(maps)
    mixed = 0.5 * maps.mean(axis=1) + 0.5 * np.eye(maps.shape[-1])
    return mixed / mixed.sum(axis=-1, keepdims=True)


def rollout(maps: np.ndarray) -> np.ndarray:
    """R = A'_L ... A'_1 (``residual_attention``): (top-layer positions, input tokens), rows sum to 1."""
    residual = residual_attention(maps)
    out = residual[0]
    for layer in residual[1:]:
        out = layer @ out
    return out

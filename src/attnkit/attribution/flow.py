"""Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", section 4).

The layers form a graph: a node per (layer, position), l = 0 (the input tokens) .. L, and an
edge from (l, i) down to (l - 1, j) whose capacity is A'_l[i, j], the residual-mixed attention
of rollout (``rollout.residual_attention``). The flow of top-layer position i to input token j
is the value of the maximum flow from (L, i) to (0, j); each row is then normalised to sum to 1.

Where rollout multiplies the weights along every path, flow takes the bottleneck of the best
set of paths: a token reached only through one weak edge gets little, however strong the rest.

Fast: scipy's max-flow (Dinic's algorithm, in C) on integer capacities. scipy counts in 32-bit
integers, so the weights are scaled by 2^30: a row of A' sums to 1, so no flow can pass 2^30,
and each capacity is off by at most 2^-31 (about 5e-10), the flow values by at most that
times the edges of a cut (tested against networkx's real-valued max-flow to 1e-7).
"""

from __future__ import annotations

import numpy as np

from .rollout import residual_attention

SCALE = 2.0**30  # capacities as integers: weight * SCALE, rounded (scipy's flows are 32-bit)


def flow_graph(residual: np.ndarray):
    """The layered graph of ``residual`` (layers, s, s) as a scipy CSR matrix of int64 capacities:
    node l * s + i is position i of layer l (0: the input)."""
    from scipy.sparse import csr_array

    layers, s, _ = residual.shape
    rows, cols, caps = [], [], []
    grid_i, grid_j = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
    for layer in range(1, layers + 1):
        rows.append((layer * s + grid_i).ravel())
        cols.append(((layer - 1) * s + grid_j).ravel())
        caps.append(np.rint(residual[layer - 1] * SCALE).astype(np.int64).ravel())
    n = (layers + 1) * s
    return csr_array((np.concatenate(caps), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))


def attention_flow(maps: np.ndarray) -> np.ndarray:
    """(top-layer positions, input tokens) attention flow of self-attention ``maps``
    (layers, heads, s, s); each row sums to 1."""
    from scipy.sparse.csgraph import maximum_flow

    residual = residual_attention(maps)
    layers, s, _ = residual.shape
    graph = flow_graph(residual)
    top = layers * s
    out = np.zeros((s, s))
    for i in range(s):
        for j in range(s):
            out[i, j] = maximum_flow(graph, top + i, j, method="dinic").flow_value / SCALE
    return out / out.sum(axis=1, keepdims=True)

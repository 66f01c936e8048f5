"""Attention flow: attnkit's (scipy's Dinic max-flow in C on the layered graph) against the
reference construction with networkx's max-flow, on the same maps, in the same run.

    python benchmarks/attention_flow.py [--tokens 35] [--layers 6] [--heads 12] [--repeats 3]

The maps are random softmax attention (the speed of max-flow does not hang on what the
weights mean); both results are checked equal to 1e-7.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnkit.attribution import attention_flow, residual_attention
from machine import cpu_name


def networkx_flow(maps: np.ndarray) -> np.ndarray:
    import networkx as nx

    res = residual_attention(maps)
    layers, s, _ = res.shape
    g = nx.DiGraph()
    for layer in range(1, layers + 1):
        for i in range(s):
            for j in range(s):
                g.add_edge((layer, i), (layer - 1, j), capacity=float(res[layer - 1, i, j]))
    out = np.array([[nx.maximum_flow_value(g, (layers, i), (0, j)) for j in range(s)] for i in range(s)])
    return out / out.sum(1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=35)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(args.layers, args.heads, args.tokens, args.tokens)) * 3
    maps = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    print(f"CPU: {cpu_name()}; {args.tokens} tokens, {args.layers} layers, {args.heads} heads")
    attention_flow(maps[:1, :1, :3, :3] / maps[:1, :1, :3, :3].sum(-1, keepdims=True))  # imports scipy: not timed
    ours = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        flow = attention_flow(maps)
        ours.append(time.perf_counter() - t)
    t = time.perf_counter()
    reference = networkx_flow(maps)
    theirs = time.perf_counter() - t
    err = float(np.abs(flow - reference).max())
    print(f"attnkit (scipy Dinic): median {np.median(ours):.3f} s of {args.repeats}")
    print(f"networkx reference:    {theirs:.3f} s (one run)")
    print(f"speed-up {theirs / np.median(ours):.1f}x; largest difference {err:.1e}")


if __name__ == "__main__":
    main()

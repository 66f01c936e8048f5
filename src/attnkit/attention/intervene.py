"""Reaching into the heads: scale or replace each head's output before the heads are merged.

Every multi-head attention call computes z_h = sum_j w_ij v_j per head h, then merges the heads
through the output projection: out = W^O [z_1; ...; z_H]. While ``gating(...)`` is open, each
call whose module it names instead merges

    z'_h = g_h z_h + (1 - g_h) m_h

with a gate g (h,) per module (1: the head as it is, 0: ablated) and a replacement m (h, d)
(zero ablation: 0; mean ablation: the head's mean output over a dataset, ``collecting``).
A gate that requires grad makes d loss / d g_h the head importance of Michel et al. 2019
("Are Sixteen Heads Really Better than One?", eq. 2: the gate xi_h at 1).

Modules are named by identity, not by the order of calls, so incremental decoding (each step
calls every layer again) and beam search are gated like one forward pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor


@dataclass
class Gates:
    """Per attention module (by id): its gate (h,) and, where set, its replacement (h, d)."""

    gates: dict[int, Tensor] = field(default_factory=dict)
    means: dict[int, Tensor] = field(default_factory=dict)


@dataclass
class Collector:
    """Sums of each module's head outputs over every query position (for mean ablation)."""

    sums: dict[int, Tensor] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)

    def means(self) -> dict[int, Tensor]:
        return {m: s / max(1, self.counts[m]) for m, s in self.sums.items()}


_gates: ContextVar[Gates | None] = ContextVar("attnkit_gates", default=None)
_collector: ContextVar[Collector | None] = ContextVar("attnkit_collector", default=None)


@contextmanager
def gating(gates: dict[Any, Tensor], means: dict[Any, Tensor] | None = None) -> Iterator[Gates]:
    """Within: the heads of each module in ``gates`` (module -> gate (h,)) are scaled by their
    gate, the rest of each head's output (1 - g) taken from ``means`` (module -> (h, d)) or 0."""
    g = Gates({id(m): x for m, x in gates.items()}, {id(m): x for m, x in (means or {}).items()})
    token = _gates.set(g)
    try:
        yield g
    finally:
        _gates.reset(token)


@contextmanager
def collecting() -> Iterator[Collector]:
    """Within: every attention module's head outputs are summed over its query positions."""
    c = Collector()
    token = _collector.set(c)
    try:
        yield c
    finally:
        _collector.reset(token)


def heads_out(module: Any, context: Tensor, *, head_dim: int = 1) -> Tensor:
    """A call's per-head outputs ``context`` (b, h, t, d) as they go on to be merged (``head_dim``
    2: laid out (b, t, h, d)), gated where a ``gating`` names ``module``; collected where a
    ``collecting`` is open."""
    collector = _collector.get()
    if collector is not None:
        z = context.detach().transpose(1, head_dim) if head_dim != 1 else context.detach()
        total = z.float().sum((0, 2))  # (h, d)
        key = id(module)
        collector.sums[key] = collector.sums.get(key, torch.zeros_like(total)) + total
        collector.counts[key] = collector.counts.get(key, 0) + z.shape[0] * z.shape[2]
    g = _gates.get()
    if g is None or id(module) not in g.gates:
        return context
    gate = g.gates[id(module)].to(context.device, context.dtype)  # differentiable: a gate's grad reaches it
    shape = [1] * context.dim()
    shape[head_dim] = gate.shape[0]
    out = context * gate.view(shape)
    mean = g.means.get(id(module))
    if mean is not None:
        m = mean.to(context.device, context.dtype)
        m = m[None, :, None, :] if head_dim == 1 else m[None, None, :, :]
        out = out + (1 - gate.view(shape)) * m
    return out

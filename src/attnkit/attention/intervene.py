"""Reaching into the heads: scale or replace each head's output before the heads are merged.

Every multi-head attention call computes z_h = sum_j w_ij v_j per head h, then merges the heads
through the output projection: out = W^O [z_1; ...; z_H]. While ``gating(...)`` is open, each
call whose module it names instead merges

    z'_h = g_h z_h + (1 - g_h) m_h

with a gate g (h,) per module (1: the head as it is, 0: ablated) and a replacement m (h, d)
(zero ablation: 0; mean ablation: the head's mean output over a dataset, ``collecting``).
A gate that requires grad makes d loss / d g_h the head importance of Michel et al. 2019
("Are Sixteen Heads Really Better than One?", eq. 2: the gate xi_h at 1).

Each gate sits at an attention site's head outputs (``attention.sites``: ``decoder.1.cross.z``),
named by the site, its module or the site's name, never by the order of calls, so
incremental decoding (each step calls every layer again) and beam search are gated like one
forward pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from . import kernels
from .caches import Policy, Rules, SinkWindow
from .sites import Attended, Listener, Site, listening, site_of


def z_name(where: Any) -> str:
    """The head-output site's name of an attention module, a site or a site's name (``decoder.1.cross``
    or ``decoder.1.cross.z``); one line for anything else."""
    return _gated(where)[0]


def _gated(where: Any) -> tuple[str, int | None]:
    """(the head-output site's name, the module it belongs to by identity, where it was named by its
    module or by a site that has one: two models with the same site names, an ensemble, are gated
    apart; None for a name)."""
    if isinstance(where, str):
        name = where.removesuffix(".z")
        if name.rsplit(".", 1)[-1] not in ("attn", "cross"):
            raise ValueError(
                f"{where!r} is not an attention site (blocks.3.attn, decoder.1.cross): it has no heads to gate"
            )
        return f"{name}.z", None
    site = where if isinstance(where, Site) else site_of(where)
    if site is None or site.role not in ("attn", "z"):
        raise ValueError(f"{type(where).__name__} is not an attention module attnkit has named: it cannot be gated")
    return site.name if site.role == "z" else site.z.name, None if site.module is None else id(site.module)


class Gates(Listener):
    """Per head-output site (by name): its gate (h,) and, where set, its replacement (h, d)."""

    def __init__(
        self, gates: dict[str, Tensor], means: dict[str, Tensor], owners: dict[str, int | None] | None = None
    ) -> None:
        self.gates, self.means, self.owners = gates, means, owners or {}

    def wants(self, site: Site) -> bool:
        if site.role != "z" or site.name not in self.gates:
            return False
        owner = self.owners.get(site.name)
        return owner is None or owner == id(site.module)

    def activation(self, site: Site, x: Tensor) -> Tensor:
        gate = self.gates[site.name].to(x.device, x.dtype)  # differentiable: a gate's grad reaches it
        g = gate.view(1, -1, 1, 1)
        out = x * g
        mean = self.means.get(site.name)
        if mean is not None:
            out = out + (1 - g) * mean.to(x.device, x.dtype)[None, :, None, :]
        return out


class Collector(Listener):
    """Sums of each site's head outputs over every query position (for mean ablation)."""

    def __init__(self) -> None:
        self.sums: dict[str, Tensor] = {}
        self.counts: dict[str, int] = {}

    def wants(self, site: Site) -> bool:
        return site.role == "z"

    def activation(self, site: Site, x: Tensor) -> None:
        total = x.detach().float().sum((0, 2))  # (h, d)
        self.sums[site.name] = self.sums.get(site.name, torch.zeros_like(total)) + total
        self.counts[site.name] = self.counts.get(site.name, 0) + x.shape[0] * x.shape[2]

    def means(self) -> dict[str, Tensor]:
        """{head-output site name: (h, d)}."""
        return {m: s / max(1, self.counts[m]) for m, s in self.sums.items()}


@contextmanager
def gating(gates: dict[Any, Tensor], means: dict[Any, Tensor] | None = None) -> Iterator[Gates]:
    """Within: the heads of each attention in ``gates`` (a module, a site or a site's name ->
    gate (h,)) are scaled by their gate, the rest of each head's output (1 - g) taken from
    ``means`` (keyed the same way -> (h, d)) or 0."""
    named = {m: _gated(m) for m in gates}
    g = Gates(
        {named[m][0]: x for m, x in gates.items()},
        {z_name(m): x for m, x in (means or {}).items()},
        dict(named.values()),
    )
    with listening(g):
        yield g


@contextmanager
def collecting() -> Iterator[Collector]:
    """Within: every attention site's head outputs are summed over its query positions."""
    c = Collector()
    with listening(c):
        yield c


def cached_attention(call: Attended, heads: Tensor, policy: Policy) -> tuple[Tensor, Tensor]:
    """The attention of ``heads`` (n,) of one call over the keys a cache ``policy`` keeps
    (``attention.caches``), every other rule of the call kept: (z (b, n, t, d_v), lse (b, n, t), the
    learned sink counted). One line for a call no cache serves: not a decoder's self-attention, or
    scores that do not factor through q . k."""
    site = call.site
    if site.kind != "decoder":
        raise ValueError(
            f"{site.name} is {site.kind} attention: a key-value cache policy applies to a decoder's "
            "self-attention, whose queries come one at a time"
        )
    if not call.factored or call.q is None or call.k is None or call.v is None:
        raise ValueError(f"{site.name}'s scores do not factor through q . k: its keys cannot be cached")
    idx = heads.to(call.q.device)
    k, v = (kernels.groups(x, call.q.shape[1]) for x in (call.k, call.v))
    if call.group > 1:  # a sentence's beam hypotheses share its keys
        k, v = k.repeat_interleave(call.group, 0), v.repeat_interleave(call.group, 0)

    def take(x: Tensor | None) -> Tensor | None:  # (b_kv|1, h|1, ...) -> query rows, the chosen heads
        if x is None:
            return None
        if x.shape[0] > 1 and call.group > 1:
            x = x.repeat_interleave(call.group, 0)
        return x.index_select(1, idx) if x.shape[1] > 1 else x

    additive = kernels.additive_term(call.mask, call.bias)
    if additive is not None and additive.dim() < 4:
        additive = additive.reshape((1,) * (4 - additive.dim()) + tuple(additive.shape))
    rules = Rules(call.scale, take(additive), call.cap, take(call.sink), call.window if call.causal else None)
    return policy.attend(call.q.index_select(1, idx), k.index_select(1, idx), v.index_select(1, idx), rules)


class Caching(Listener):
    """Per head-output site (by name): its gate (h,) between each head's own attention (1) and its
    attention over what a cache ``policy`` keeps (0)."""

    def __init__(self, gates: dict[str, Tensor], owners: dict[str, int | None], policy: Policy) -> None:
        self.gates, self.owners, self.policy = gates, owners, policy
        self.pending: dict[str, tuple[Tensor, Tensor]] = {}  # z site -> (heads replaced, their streaming z)

    def wants(self, site: Site) -> bool:
        name = site.name if site.role == "z" else f"{site.name}.z"
        if site.role not in ("attn", "z") or name not in self.gates:
            return False
        owner = self.owners.get(name)
        return owner is None or owner == id(site.module)

    def attended(self, call: Attended) -> None:
        site = call.site
        gate = self.gates[site.z.name]
        if len(gate) != site.heads:
            raise ValueError(f"{site.name} has {site.heads} heads; its gate has {len(gate)}")
        chosen = torch.arange(len(gate)) if gate.requires_grad else torch.nonzero(gate.detach() != 1).flatten().cpu()
        if not len(chosen):
            return
        z, _ = cached_attention(call, chosen, self.policy)
        self.pending[site.z.name] = (chosen, z)

    def activation(self, site: Site, x: Tensor) -> Tensor | None:
        got = self.pending.pop(site.name, None)
        if got is None:
            return None
        chosen, z = got
        g = self.gates[site.name].to(x.device, x.dtype)[chosen].view(1, -1, 1, 1)
        idx = chosen.to(x.device)
        out = x.clone()
        out[:, idx] = g * x.index_select(1, idx) + (1 - g) * z.to(x.dtype)
        return out


@contextmanager
def caching(gates: dict[Any, Tensor], policy: Policy) -> Iterator[Caching]:
    """Within: each head of each attention in ``gates`` (a module, a site or a site's name -> gate
    (h,)) mixes its own output (g = 1) with its output over what the cache ``policy`` keeps (g = 0;
    ``attention.caches``: StreamingLLM, H2O, SnapKV)."""
    named = {m: _gated(m) for m in gates}
    c = Caching({named[m][0]: x for m, x in gates.items()}, dict(named.values()), policy)
    with listening(c):
        yield c


def streaming(gates: dict[Any, Tensor], *, sinks: int = 4, window: int = 1020):
    """``caching`` with a StreamingLLM cache: the first ``sinks`` keys and the ``window`` most
    recent (defaults Xiao et al. 2023's 4 + 1,020)."""
    return caching(gates, SinkWindow(sinks, window))

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

from .sites import Listener, Site, listening, site_of


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

"""Through which path one head reaches another: path patching, and the composition scores of the
weights beside it.

Path patching (Wang et al. 2022; Goldowsky-Dill et al. 2023), as ``patching`` does it, from the
corrupted run towards the clean one: the sender head A's write into the stream is changed to its
clean write *on the path to the receiver head B alone*, through B's query, key or value. First
the corrupted text runs with A's change in write, W_O,A (z_A clean - z_A corrupted), added to the
stream into B's layer, and B's queries, keys and values are read there; then the corrupted text
runs again with only B's output recomputed from those queries (or keys, or values) and its own
others, every rule of its call as it was, and everything after B computed as it comes. The
metric, normalised as ``patching`` normalises it, is A's effect through that one path.

Composition scores (Elhage et al. 2021) ask the same of the weights: how much of what A writes,
W_OV,A = W_V,A W_O,A, B's query, key or value reads, ||W_OV,A M_B|| / (||W_OV,A|| ||M_B||) with
M_B = W_QK,B (Q-composition), W_QK,B^T (K) or W_OV,B (V), in the stream's basis: each norm's
weight folded into the weights that read through it, and, where the norms centre (LayerNorm),
each write centred, as TransformerLens folds and centres its weights by default. The weights are
found by running each attention module on the basis vectors (``reading``), so every family is
read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor

from ..attention.sites import Attended, Site
from .pairs import Pair, metric_of
from .patching import Unit, _normalised, _pairs, _read
from .reading import attend, beside, check, freeze, read, recomputing, run_to
from .streams import logit_stack, writers

VIA = ("q", "k", "v")


@dataclass
class PathPatching:
    """Each sender head's effect on each receiver head through its query, key and value.

    senders, receivers   heads (``Unit``s at ``.z`` sites, every position)
    via                  the receivers' inputs patched: q, k, v
    values               (pairs, senders, receivers, via): the metric of each path-patched run
    clean, corrupt       (pairs,) the clean and corrupted runs' metrics
    composition          (senders, receivers, via): the weights' composition scores (NaN where
                         the receiver does not read the sender: the same layer or earlier)
    unweighted           why there are no composition scores (all NaN), where the weights do not
                         make them (a read that is not affine: a norm on the queries or keys)
    """

    metric: str
    senders: list[Unit]
    receivers: list[Unit]
    via: tuple[str, ...]
    values: np.ndarray
    clean: np.ndarray
    corrupt: np.ndarray
    composition: np.ndarray
    unweighted: str | None = None

    @property
    def effect(self) -> np.ndarray:
        """(senders, receivers, via): 0 the corrupted run, 1 the clean one; NaN where B does not read A."""
        n = self.values.shape[0]
        flat = _normalised(self.values.reshape(n, -1), self.clean, self.corrupt)
        return flat.reshape(self.values.shape[1:])

    def table(self) -> list[dict[str, Any]]:
        """One row per path (sender, receiver, via), largest effect first, its composition score beside it."""
        effect = self.effect
        rows = [
            {
                "sender": a.label,
                "receiver": b.label,
                "via": v,
                "effect": float(effect[i, j, k]),
                "composition": float(self.composition[i, j, k]),
            }
            for i, a in enumerate(self.senders)
            for j, b in enumerate(self.receivers)
            for k, v in enumerate(self.via)
            if b.layer > a.layer
        ]
        return sorted(rows, key=lambda r: -abs(r["effect"]))


def _heads(model: Any, given: list[Unit] | None, what: str) -> list[Unit]:
    """Every head of the self-attention sites of the stack the logits read, or ``given`` checked."""
    sites = {s.z.name: s for s in model.sites() if s.role == "attn"}
    if given is None:
        stack = logit_stack(model)[0]
        return [
            Unit(z, s.layer, h)
            for z, s in sites.items()
            if s.kind != "cross" and z.startswith(stack + ".")
            for h in range(s.heads)
        ]
    for u in given:
        site = sites.get(u.site)
        if site is None:
            raise ValueError(f"no head-output site {u.site!r} for a {what} (blocks.1.attn.z, decoder.0.attn.z)")
        if site.kind == "cross":
            raise ValueError(f"{u.site}: a cross-attention {what} reads the encoder's stream, not its own")
        if u.head is None or not 0 <= u.head < site.heads:
            raise ValueError(f"{u.site} has heads 0 to {site.heads - 1}, not {u.head}")
        if u.position is not None:
            raise ValueError(f"path patching takes heads at every position, not {u.label}")
    return list(given)


def path_patching(
    model: Any,
    pairs: list[Pair],
    *,
    senders: list[Unit] | None = None,
    receivers: list[Unit] | None = None,
    via: tuple[str, ...] = VIA,
    metric: str = "logit_diff",
) -> PathPatching:
    """Every sender head's effect on every receiver head of a later layer (default every head) through
    the receiver's ``via`` (q, k, v), over ``pairs``: two forward passes per path and pair."""
    read_metric = metric_of(metric)
    for v in via:
        if v not in VIA:
            raise ValueError(f"unknown path {v!r}: a receiver reads its sender through q, k or v")
    a_s, b_s = _heads(model, senders, "sender"), _heads(model, receivers, "receiver")
    stacks = {u.site.split(".")[0] for u in a_s + b_s}
    if len(stacks) > 1:
        raise ValueError(f"senders and receivers are in {' and '.join(sorted(stacks))}: a path stays in one stack")
    (stack,) = stacks
    have = {s.z.name: s for s in model.sites() if s.role == "attn"}
    runs = _pairs(model, pairs)
    values = np.full((len(runs), len(a_s), len(b_s), len(via)), np.nan)
    clean, corrupt = np.empty(len(runs)), np.empty(len(runs))
    layers = sorted({b.layer for b in b_s})
    for n, p in enumerate(runs):
        text, target = p.pair.corrupt, p.pair.target
        with torch.no_grad():
            clean[n] = float(_read(model.run(p.pair.clean, target=target), read_metric, p))
            corrupt[n] = float(_read(model.run(text, target=target), read_metric, p))
            writes = _sender_writes(model, p.pair, stack, a_s, max(layers))
            for i, a in enumerate(a_s):
                for layer in (x for x in layers if x > a.layer):
                    delta = writes[i]
                    assert delta is not None  # a sender before a receiver's layer is among its writers
                    got = _receiver_inputs(model, text, target, stack, layer, delta, have)
                    for j, b in enumerate(b_s):
                        if b.layer != layer:
                            continue
                        for k, v in enumerate(via):
                            hooks = recomputing(b.site, cast(int, b.head), {v: getattr(got[b.site], v)[0]})
                            values[n, i, j, k] = float(
                                _read(model.run(text, target=target, hooks=hooks), read_metric, p)
                            )
    unweighted = None
    try:
        composition = composition_scores(
            model, runs[0].pair.clean, runs[0].pair.target, senders=a_s, receivers=b_s, via=via
        )
    except ValueError as err:  # the paths stand; the weights alone do not say it
        composition, unweighted = np.full(values.shape[1:], np.nan), str(err)
    return PathPatching(metric, a_s, b_s, tuple(via), values, clean, corrupt, composition, unweighted)


def _sender_writes(model: Any, pair: Pair, stack: str, senders: list[Unit], upto: int) -> list[Tensor | None]:
    """Each sender's clean write less its corrupted one, (t, d): found as the stream's writers of
    each run (which also checks that the stream is their sum: a path is a term of it)."""
    full = [writers(model, x, stack, layer=upto, target=pair.target) for x in (pair.clean, pair.corrupt)]
    if full[0].x.shape != full[1].x.shape:
        raise ValueError(
            f"the clean text is {full[0].x.shape[0]} tokens and the corrupted one {full[1].x.shape[0]}: "
            "path patching needs them equal"
        )
    out: list[Tensor | None] = []
    for u in senders:
        name = f"{u.site.removesuffix('.z')}.h{u.head}"
        at = full[0].names.index(name) if name in full[0].names else None  # None: no receiver reads it
        out.append(None if at is None else full[0].terms[at] - full[1].terms[at])
    return out


def _receiver_inputs(
    model: Any, text: str, target: str | None, stack: str, layer: int, delta: Tensor, have: dict[str, Site]
) -> dict[str, Attended]:
    """The calls of ``layer``'s self-attention sites when ``delta`` (t, d) is added to the stream into
    the layer (the rest of the pass not run), keyed by head-output site."""
    sites = [s for s in have.values() if s.layer == layer and s.kind != "cross" and s.name.startswith(stack + ".")]
    out: dict[str, Attended] = {}

    def added(x: Tensor, site: Site) -> Tensor:
        return x + delta.to(x.dtype)[None]

    def keep(call: Attended, site: Site) -> None:
        out[site.z.name] = call

    hooks = {f"{stack}.{layer}.resid_pre": added} | {s.name: keep for s in sites[:-1]}
    last = run_to(model, sites[-1], text, target, [], hooks).call
    assert last is not None  # the layer's last site was reached
    out[sites[-1].z.name] = last
    return out


# -- composition scores -------------------------------------------------------------------------


@dataclass
class HeadWeights:
    """One self-attention site's heads in the stream's basis (row vectors: x W), norms folded.

    w_q (h, d, d_head), w_k and w_v (h_kv, d, d_head), w_o (h, d_head, d): each head's output
    rows (a norm after the block folded in), centred where the norms centre. A projection not
    asked for is None."""

    site: Site
    w_q: Tensor | None
    w_k: Tensor | None
    w_v: Tensor | None
    w_o: Tensor
    centres: bool

    def qkv(self) -> tuple[Tensor, Tensor, Tensor]:
        """All three reads (each asked for)."""
        assert self.w_q is not None and self.w_k is not None and self.w_v is not None
        return self.w_q, self.w_k, self.w_v


@torch.no_grad()
def head_weights(
    model: Any, site: Site, text: str, target: str | None = None, reads: tuple[str, ...] = VIA
) -> HeadWeights:
    """``site``'s W_Q, W_K, W_V (those of ``reads``; its norm's weight folded in) and W_O, found by
    running its module on the basis vectors at the first position (where rotary positions rotate
    nothing) and its output projection on each head's basis; each read checked affine on a random
    input."""
    r = read(model, site, text, target)
    t, d = r.h.shape
    frozen = freeze(model, r.norm, r.x, r.h, f"{site.name}'s input norm")
    rows = torch.zeros(d + 2, t, d, dtype=r.h.dtype)
    rows[:d, 0] = torch.eye(d, dtype=r.h.dtype)
    probe = torch.randn(d, generator=torch.Generator().manual_seed(0), dtype=r.h.dtype)
    rows[d + 1, 0] = probe
    parts = [attend(model, site, text, rows[i : i + 256], target) for i in range(0, d + 2, 256)]
    q, k, v = (torch.cat([getattr(c, n).float() for c in parts])[:, :, 0] for n in ("q", "k", "v"))  # (d + 2, h, e)
    weights: list[Tensor | None] = []
    for name, x in zip(VIA, (q, k, v)):
        if name not in reads:
            weights.append(None)
            continue
        w = x[:d] - x[d]  # (d, h, e)
        check(model, probe.float() @ w.flatten(1), (x[d + 1] - x[d]).flatten(), f"{site.name}'s read is not affine")
        w = frozen.weight.float()[:, None, None] * w
        if frozen.centres:  # a LayerNorm reads only the centred stream
            w = w - w.mean(0, keepdim=True)
        weights.append(w.permute(1, 0, 2).contiguous())
    w_o = _output_rows(model, site, text, target, int(q.shape[1]), int(v.shape[2]))
    if frozen.centres:
        w_o = w_o - w_o.mean(-1, keepdim=True)
    return HeadWeights(site, weights[0], weights[1], weights[2], w_o, frozen.centres)


def _output_rows(model: Any, site: Site, text: str, target: str | None, heads: int, e: int) -> Tensor:
    """W_O (h, e, d): what each head's output writes, found as the affine module its merged output
    enters; a norm the attention's output then passes (OLMo 2's, Gemma 3's) folded in by its weight."""
    from .streams import _affine, _projection

    seen: list = []
    after: list = []

    def keep(into: list):
        return lambda m, a, o: into.append((m, a[0].detach(), o.detach())) if a and isinstance(o, Tensor) else None

    handles = [m.register_forward_hook(keep(seen)) for m in site.module.modules() if _affine(m)]
    handles += [m.register_forward_hook(keep(after)) for m in beside(model, site.module)]
    try:
        run = model.cache(text, sites=[site.z.name], target=target)
    finally:
        for h in handles:
            h.remove()
    module, written = _projection(model, site, run[site.z.name], seen)
    basis = torch.eye(heads * e, dtype=run[site.z.name].dtype)[None]
    out = (module(basis)[0] - module(torch.zeros_like(basis[:, :1]))[0]).reshape(heads, e, -1).float()
    for m, given, y in after:
        if given.shape != written.shape or not torch.allclose(given, written, rtol=1e-5, atol=1e-6):
            continue
        if torch.allclose(y, given, rtol=1e-6, atol=1e-7):  # a dropout: nothing to fold
            continue
        try:
            frozen = freeze(model, m, given[0], y[0], f"the norm after {site.name}")
        except ValueError:
            continue
        out = out - out.mean(-1, keepdim=True) if frozen.centres else out
        return out * frozen.weight.float()
    return out


def _scores(u1: Tensor, v1: Tensor, u2: Tensor, v2: Tensor) -> Tensor:
    """||U1 V1 U2 V2|| / (||U1 V1|| ||U2 V2||) of one sender's low-rank factors (d, e), (e, d) with
    every receiver's (r, d, f), (r, f, d), through e x f matrices (no d x d matrix is formed): (r,)."""
    g1, h1 = u1.T @ u1, v1 @ v1.T
    g2, h2 = u2.transpose(1, 2) @ u2, v2 @ v2.transpose(1, 2)
    m = v1 @ u2  # (r, e, f)
    product = (m * (g1 @ m @ h2)).sum((1, 2))  # trace(M^T G1 M H2)
    norms = (g1 * h1.T).sum() * (g2 * h2.transpose(1, 2)).sum((1, 2))
    return torch.sqrt(product.clamp(min=0) / norms)


def composition_scores(
    model: Any,
    text: str,
    target: str | None = None,
    *,
    senders: list[Unit] | None = None,
    receivers: list[Unit] | None = None,
    via: tuple[str, ...] = VIA,
) -> np.ndarray:
    """Elhage et al.'s Q-, K- and V-composition of every sender head with every receiver head of a
    later layer, (senders, receivers, via); NaN where the receiver is not later. ``text`` is any
    input the model takes (the weights do not depend on it)."""
    a_s, b_s = _heads(model, senders, "sender"), _heads(model, receivers, "receiver")
    have = {s.z.name: s for s in model.sites() if s.role == "attn"}
    weights = {z: head_weights(model, have[z], text, target) for z in {u.site for u in a_s + b_s}}
    out = np.full((len(a_s), len(b_s), len(via)), np.nan)
    reads: dict[str, list[tuple[Tensor, Tensor]]] = {v: [] for v in via}
    for b in b_s:
        wb, hb = weights[b.site], int(cast(int, b.head))
        bq, bk, bv = wb.qkv()
        kv = hb * bk.shape[0] // bq.shape[0]
        wq, wk = bq[hb], bk[kv]
        both = {"q": (wq, wk.T), "k": (wk, wq.T), "v": (bv[kv], wb.w_o[hb])}
        for v in via:
            reads[v].append(both[v])
    stacked = {v: (torch.stack([x for x, _ in r]), torch.stack([y for _, y in r])) for v, r in reads.items()}
    later = np.array([[b.layer > a.layer for b in b_s] for a in a_s])
    for i, a in enumerate(a_s):
        if not later[i].any():
            continue
        wa, ha = weights[a.site], int(cast(int, a.head))
        av = wa.qkv()[2]
        ov = (av[ha * av.shape[0] // wa.w_o.shape[0]], wa.w_o[ha])
        for k, v in enumerate(via):
            out[i, :, k] = np.where(later[i], _scores(*ov, *stacked[v]).numpy(), np.nan)
    return out

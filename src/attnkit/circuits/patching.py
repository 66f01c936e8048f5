"""Activation patching and attribution patching over a model's named sites.

Activation patching (denoising, as TransformerLens's ``patching`` module does it): run the
corrupted text with one unit's activation taken from the clean run, every other activation the
corrupted run's own, and read the metric. A unit is one head's output before the heads merge
(``<attention site>.z``: at every position, or at one), or one layer's residual stream into it
(``<stack>.<layer>.resid_pre``) at one position. Its effect, normalised over the pairs,

    (mean patched - mean corrupted) / (mean clean - mean corrupted),

is 1 when the unit alone restores the clean behaviour and 0 when it carries none of it.

Attribution patching (Nanda 2023; Syed et al. 2023) estimates every unit's patched metric from
one forward and one backward pass of the corrupted run: metric(corrupted) + <clean - corrupted,
d metric / d activation>, the first-order change. ``agreement`` says how far it follows the
activation patching it approximates.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor

from ..attention.sites import Attended, Site
from ..loaded.recompute import layers_recomputed, replaying
from .pairs import Pair, answer_token, metric_of
from .reading import recomputing

OF = ("heads", "heads_by_position", "resid", "patterns", "values")
APART = ("patterns", "values")  # a head's pattern or values patched apart from the rest of its call


@dataclass(frozen=True)
class Unit:
    """One patched activation: ``site`` (a head-output ``.z`` site or a ``resid_pre`` site), its
    layer, the head (None: the whole stream) and the position (None: every position)."""

    site: str
    layer: int
    head: int | None = None
    position: int | None = None

    @property
    def label(self) -> str:
        where = self.site.removesuffix(".z") + (f".h{self.head}" if self.head is not None else "")
        return where + (f"@{self.position}" if self.position is not None else "")


@dataclass
class Patching:
    """Patched metrics of every unit over the pairs.

    method     "activation" (each patch run) or "attribution" (each estimated, to first order)
    of         heads, heads_by_position or resid
    units      what was patched, in site order
    values     (pairs, units): the metric of each patched run (attribution: its estimate)
    clean      (pairs,): the clean runs' metric; ``corrupt``: the corrupted runs'
    tokens     the first pair's clean tokens, {stack: tokens} (a position's label)
    """

    method: str
    of: str
    metric: str
    units: list[Unit]
    values: np.ndarray
    clean: np.ndarray
    corrupt: np.ndarray
    tokens: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _normalised(self.values, self.clean, self.corrupt)  # one line when the corruption changes nothing

    @property
    def effect(self) -> np.ndarray:
        """Each unit's normalised effect (units,): 0 the corrupted run, 1 the clean one."""
        return _normalised(self.values, self.clean, self.corrupt)

    def interval(self, level: float = 0.95, *, boot: int = 1000, seed: int = 0) -> np.ndarray:
        """A bootstrap confidence interval of each unit's effect over the pairs, (units, 2): the
        pairs resampled with replacement ``boot`` times."""
        rng = np.random.default_rng(seed)
        n = len(self.clean)
        draws = np.empty((boot, len(self.units)))
        for b in range(boot):
            pick = rng.integers(0, n, n)
            draws[b] = _normalised(self.values[pick], self.clean[pick], self.corrupt[pick], check=False)
        tail = (1 - level) / 2 * 100
        return np.nanpercentile(draws, [tail, 100 - tail], axis=0).T

    def table(self, *, level: float = 0.95) -> list[dict[str, Any]]:
        """One row per unit, largest effect first: site, layer, head, position, effect and its
        interval (a table to sort, filter or plot)."""
        low_high = self.interval(level)
        rows = [
            {
                "unit": u.label,
                "site": u.site,
                "layer": u.layer,
                "head": u.head,
                "position": u.position,
                "effect": float(e),
                "low": float(lo),
                "high": float(hi),
            }
            for u, e, (lo, hi) in zip(self.units, self.effect, low_high)
        ]
        return sorted(rows, key=lambda r: -abs(r["effect"]))

    def grid(self, site: str | None = None) -> np.ndarray:
        """The effects as an array: heads (layers, heads) for one attention kind's sites (``site``
        a site-name prefix: "blocks", "decoder", "decoder.*.cross"; default the first), heads by
        position (layers, heads, positions), a stream (layers, positions)."""
        chosen = [i for i, u in enumerate(self.units) if _matches(u.site, site or _first_stack(self.units))]
        if not chosen:
            raise ValueError(f"no units at {site!r}")
        units = [self.units[i] for i in chosen]
        if len({u.site for u in units}) > len({u.layer for u in units}):
            raise ValueError(
                f"{site or _first_stack(self.units)!r} covers two sites a layer: name one kind "
                "(decoder.*.attn or decoder.*.cross)"
            )
        layers = sorted({u.layer for u in units})
        heads = max((u.head or 0) for u in units) + 1
        positions = max((u.position or 0) for u in units) + 1
        shape = {"heads": (len(layers), heads), "heads_by_position": (len(layers), heads, positions)}
        out = np.full(shape.get(self.of, (len(layers), positions)), np.nan)
        for i, u in zip(chosen, units):
            row = layers.index(u.layer)
            at = (row, u.head) if self.of == "heads" else (row, u.head, u.position) if u.head is not None else None
            out[at if at is not None else (row, u.position)] = self.effect[i]
        return out


def agreement(approximate: Patching, exact: Patching) -> float:
    """Pearson's correlation of two patchings' effects over the same units (how far attribution
    patching follows the activation patching it approximates)."""
    if [u.label for u in approximate.units] != [u.label for u in exact.units]:
        raise ValueError("the two patchings cover different units")
    return float(np.corrcoef(approximate.effect, exact.effect)[0, 1])


def _matches(name: str, pattern: str) -> bool:
    import fnmatch

    return fnmatch.fnmatch(name, pattern + "*") or name.startswith(pattern + ".")


def _first_stack(units: list[Unit]) -> str:
    site = units[0].site.removesuffix(".z")
    return site.split(".")[0] + (".*.cross" if site.endswith(".cross") else "")


def _normalised(values: np.ndarray, clean: np.ndarray, corrupt: np.ndarray, *, check: bool = True) -> np.ndarray:
    span = float(clean.mean() - corrupt.mean())
    if abs(span) <= 1e-6 * (1 + abs(float(clean.mean()))):
        if check:
            raise ValueError(
                f"the corruption does not change the metric (clean {clean.mean():.4g}, corrupted "
                f"{corrupt.mean():.4g}): there is nothing for a patch to restore"
            )
        return np.full(values.shape[1], np.nan)
    return (values.mean(0) - corrupt.mean()) / span


# -- runs ---------------------------------------------------------------------------------------


@dataclass
class _Pair:
    """One pair as it runs: the answer's and foil's ids, its target, the clean cache."""

    pair: Pair
    answer: int
    foil: int
    clean: Any = None  # the clean run's cache (``Run``)


def _pairs(model: Any, pairs: list[Pair]) -> list[_Pair]:
    if not pairs:
        raise ValueError("no pairs to patch")
    token = answer_token(model, "patch")
    forced = model.capabilities.forced
    out = []
    for i, p in enumerate(pairs, 1):
        if forced and p.target is None:
            raise ValueError(f"pair {i}: {model.name} translates: a pair needs target, the output before the answer")
        if not forced and p.target is not None:
            raise ValueError(f"pair {i}: {model.name} continues its text: put the whole text in clean, not in target")
        out.append(_Pair(p, token(p.answer), token(p.foil)))
    return out


def _units(model: Any, of: str) -> list[Unit]:
    if of not in OF:
        raise ValueError(f"unknown patching of {of!r}; choose from {', '.join(OF)}")
    have: list[Site] = model.sites()
    if of == "resid":
        return [Unit(s.name, s.layer) for s in have if s.role == "resid_pre"]  # positions filled per input
    if of in APART:
        return [
            Unit(s.z.name, s.layer, h) for s in have if s.role == "attn" and s.kind != "cross" for h in range(s.heads)
        ]
    return [Unit(s.name, s.layer, h) for s in have if s.role == "z" for h in range(s.heads)]


def _with_positions(units: list[Unit], lengths: dict[str, int], of: str) -> list[Unit]:
    """Units at every position where ``of`` patches one position at a time."""
    if of in ("heads", *APART):
        return units
    return [Unit(u.site, u.layer, u.head, p) for u in units for p in range(lengths[_stack(u.site)])]


def _stack(site: str) -> str:
    return site.split(".")[0]


def _tokens(model: Any, run: Any) -> dict[str, list[str]]:
    """Each stack's positions: the source's for an encoder, the run's rows for the stack the logits read."""
    return {
        stack: (run.prepared.src_tokens if stack == "encoder" else run.tokens)
        for stack in {_stack(s.name) for s in model.sites() if s.role == "resid_pre"}
    }


def _read(run: Any, metric, p: _Pair) -> Tensor:
    if run.logits is None or run.logits.dim() != 3:
        raise ValueError("the model gives no logits per position to read the answer from")
    return metric(run.logits[0, -1], p.answer, p.foil)


def _shape(run: Any) -> tuple[int, int]:
    return len(run.prepared.src_ids), len(run.tokens)


def _check_lengths(i: int, clean: Any, corrupt: Any) -> None:
    if _shape(clean) != _shape(corrupt):
        shown = lambda run: " ".join(run.prepared.src_tokens or run.tokens)
        raise ValueError(
            f"pair {i}: the clean text is {max(_shape(clean))} tokens and the corrupted one {max(_shape(corrupt))} "
            f"({shown(clean)} | {shown(corrupt)}): patching needs them equal"
        )


def _part(x: Tensor, unit: Unit, start: int) -> tuple | None:
    """The index of ``unit`` in one call's activation ``x`` (its positions from ``start``), or None
    where the unit's position is not in this call (a step-by-step decoder's earlier step)."""
    lead: tuple = (slice(None),) if unit.head is None else (slice(None), unit.head)
    if unit.position is None:
        return lead
    local = unit.position - start
    return (*lead, local) if 0 <= local < x.shape[-2] else None


def _patch(clean: Tensor, unit: Unit):
    """A hook that puts ``unit``'s clean activation into the run (call by call: a step-by-step
    decoder calls a site once per position)."""
    start = 0

    def hook(x: Tensor, site: Site) -> Tensor:
        nonlocal start
        t = x.shape[-2]
        window = clean[..., start : start + t, :].to(x.dtype)
        part = _part(x, unit, start)
        start += t
        if part is None:
            return x
        y = x.clone()
        y[part] = window[part]
        return y

    return hook


def _prepared_pairs(model: Any, pairs: list[Pair], units: list[Unit], of: str):
    """Each pair with its clean run cached at every unit's site, the units at every position, the
    corrupted run, the first pair's tokens."""
    names = sorted({u.site for u in units})
    runs, first = _pairs(model, pairs), None
    for i, p in enumerate(runs, 1):
        p.clean = model.cache(p.pair.clean, sites=names, target=p.pair.target)
        if first is None:
            first = p.clean
        if of not in ("heads", *APART) and _shape(p.clean) != _shape(first):
            raise ValueError(
                f"pair {i} is {max(_shape(p.clean))} tokens and pair 1 {max(_shape(first))}: patching one position "
                "at a time needs every pair the same length"
            )
    assert first is not None
    tokens = _tokens(model, first)
    return runs, _with_positions(units, {k: len(v) for k, v in tokens.items()}, of), tokens


def activation_patching(model: Any, pairs: list[Pair], *, of: str = "heads", metric: str = "logit_diff") -> Patching:
    """Patch each unit (``of``: heads, heads_by_position or resid) from the clean run into the
    corrupted one, for every pair (the same length in tokens as each other): one forward pass per
    unit and pair."""
    read = metric_of(metric)
    runs, units, tokens = _prepared_pairs(model, pairs, _units(model, of), of)
    values = np.empty((len(runs), len(units)))
    clean, corrupt = np.empty(len(runs)), np.empty(len(runs))
    with torch.no_grad():
        for i, p in enumerate(runs):
            clean[i] = float(_read(p.clean, read, p))
            base = model.run(p.pair.corrupt, target=p.pair.target)
            _check_lengths(i + 1, p.clean, base)
            corrupt[i] = float(_read(base, read, p))
            calls = calls_of(model, p.pair.clean, p.pair.target, {u.site for u in units}) if of in APART else {}
            for j, u in enumerate(units):
                hooks = _apart(calls[u.site], u, of) if of in APART else {u.site: _patch(p.clean[u.site], u)}
                patched = model.run(p.pair.corrupt, target=p.pair.target, hooks=hooks)
                values[i, j] = float(_read(patched, read, p))
    return Patching("activation", of, metric, units, values, clean, corrupt, tokens)


def calls_of(model: Any, text: str, target: str | None, z_sites: set[str]) -> dict[str, Attended]:
    """The attention call of each head-output site's attention on a run of ``text`` (one call each,
    its q, k and v), keyed by the head-output site."""
    calls: dict[str, Attended] = {}

    def keep(call: Attended, site: Site) -> None:
        if not call.factored or call.q is None or call.k is None or call.v is None:
            raise ValueError(f"{site.name}'s scores do not factor through q . k: its pattern and values are one")
        if site.name + ".z" in calls:
            raise ValueError(f"{site.name} attends step by step: its pattern cannot be patched as one call")
        calls[site.name + ".z"] = call

    model.run(text, target=target, hooks={z.removesuffix(".z"): keep for z in z_sites})
    return calls


def _apart(clean: Attended, unit: Unit, of: str) -> dict[str, Any]:
    """Hooks that give ``unit``'s head the clean call's pattern (``of`` patterns: its queries and
    keys) or its values (values), the rest of the call the run's own."""
    assert unit.head is not None and clean.q is not None and clean.k is not None and clean.v is not None
    given = {"q": clean.q[0], "k": clean.k[0]} if of == "patterns" else {"v": clean.v[0]}
    return recomputing(unit.site, unit.head, given)


def patched_together(model: Any, pairs: list[Pair], units: list[Unit], *, metric: str = "logit_diff") -> float:
    """The normalised effect of patching ``units`` all at once (a circuit's heads together) from
    the clean run into the corrupted one, over ``pairs``."""
    if not units:
        raise ValueError("no units to patch together")
    read = metric_of(metric)
    heads = {s.name: s.heads for s in model.sites() if s.role == "z"}
    streams = {s.name for s in model.sites() if s.role == "resid_pre"}
    for u in units:
        if u.site not in heads and u.site not in streams:
            raise ValueError(f"no site {u.site!r} to patch (a head's .z site or a resid_pre site)")
        if u.site in heads and (u.head is None or not 0 <= u.head < heads[u.site]):
            raise ValueError(f"{u.site} has heads 0 to {heads[u.site] - 1}, not {u.head}")
        if u.site in streams and u.head is not None:
            raise ValueError(f"{u.site} is a residual stream: it has no heads")
    runs, _, _ = _prepared_pairs(model, pairs, units, "heads")
    values, clean, corrupt = (np.empty((len(runs), 1)), np.empty(len(runs)), np.empty(len(runs)))
    with torch.no_grad():
        for i, p in enumerate(runs):
            clean[i] = float(_read(p.clean, read, p))
            corrupt[i] = float(_read(model.run(p.pair.corrupt, target=p.pair.target), read, p))
            hooks = {
                site: _patch_all(p.clean[site], [u for u in units if u.site == site])
                for site in {u.site for u in units}
            }
            values[i, 0] = float(_read(model.run(p.pair.corrupt, target=p.pair.target, hooks=hooks), read, p))
    return float(_normalised(values, clean, corrupt)[0])


def _patch_all(clean: Tensor, units: list[Unit]):
    """One hook that patches every unit of one site."""
    hooks = [_patch(clean, u) for u in units]

    def hook(x: Tensor, site: Site) -> Tensor:
        for h in hooks:
            x = h(x, site)
        return x

    return hook


def attribution_patching(model: Any, pairs: list[Pair], *, of: str = "heads", metric: str = "logit_diff") -> Patching:
    """Every unit's patched metric estimated to first order from one forward and one backward pass
    of each corrupted run: metric + <clean - corrupted, gradient> over the unit's activation."""
    read = metric_of(metric)
    if of in APART:
        raise ValueError(f"attribution patching takes {', '.join(x for x in OF if x not in APART)}, not {of}")
    runs, units, tokens = _prepared_pairs(model, pairs, _units(model, of), of)
    names = sorted({u.site for u in units})
    values = np.empty((len(runs), len(units)))
    clean, corrupt = np.empty(len(runs)), np.empty(len(runs))
    for i, p in enumerate(runs):
        clean[i] = float(_read(p.clean, read, p))
        kept: dict[str, list[Tensor]] = {}
        hooks = {n: _keeping(kept, n) for n in names} | _leaves(model, names)
        with layers_recomputed(model, f"attribution patching of pair {i + 1}"), _last_position_read(model):
            run = model.run(p.pair.corrupt, target=p.pair.target, hooks=hooks, grad=True)
            _check_lengths(i + 1, p.clean, run)
            value = _read(run, read, p)
            value.backward()
        corrupt[i] = float(value.detach())
        grads = {
            n: torch.cat([cast(Tensor, x.grad) for x in xs], -2)
            for n, xs in kept.items()
            if all(x.grad is not None for x in xs)
        }
        acts = {n: torch.cat([x.detach() for x in xs], -2) for n, xs in kept.items()}
        for j, u in enumerate(units):
            if u.site not in grads:  # nothing downstream of it reaches the metric
                values[i, j] = corrupt[i]
                continue
            part = _part(acts[u.site], u, 0)
            delta = p.clean[u.site].to(acts[u.site].dtype) - acts[u.site]
            values[i, j] = corrupt[i] + float((delta[part] * grads[u.site][part]).sum())
    return Patching("attribution", of, metric, units, values, clean, corrupt, tokens)


@contextmanager
def _last_position_read(model: Any) -> Iterator[None]:
    """The output layer given the last position alone, the one the metric reads: the logits of
    every position (T x V) and their gradient are never formed."""
    logits = next((s for s in model.sites() if s.role == "logits" and s.module is not None), None)
    if logits is None:
        yield
        return
    handle = logits.module.register_forward_pre_hook(lambda module, args: (args[0][:, -1:], *args[1:]))
    try:
        yield
    finally:
        handle.remove()


def _keeping(kept: dict[str, list[Tensor]], name: str):
    """A hook that keeps a site's activation with its gradient."""

    def hook(x: Tensor, site: Site) -> Tensor | None:
        again = replaying()  # a layer recomputed for the backward pass: its first run kept x
        if not x.requires_grad:  # upstream of every parameter that asks for gradients
            x = x.detach().requires_grad_(True)
            if not again:
                kept.setdefault(name, []).append(x)
            return x
        if not again:
            x.retain_grad()
            kept.setdefault(name, []).append(x)
        return None

    return hook


def _leaves(model: Any, names: list[str]) -> dict[str, Any]:
    """Each stack's first residual stream made a leaf of the graph (where it is not kept already),
    so that every activation after it carries a gradient whatever the parameters ask."""
    out = {}
    for s in model.sites():
        if s.role == "resid_pre" and s.layer == 0 and s.name not in names:
            out[s.name] = lambda x, site: x.detach().requires_grad_(True)
    return out

"""Which heads need the whole context: each head's attention over a StreamingLLM cache, measured.

StreamingLLM (Xiao et al. 2023, sec. 3.2) keeps the first ``sinks`` keys (the attention sink) and
the ``window`` most recent ones; DuoAttention (Xiao et al. 2024) lets "streaming" heads run so and
keeps every key for the "retrieval" heads that need them. For each head of a decoder's
self-attention, with every other head exact:

outside    the mass of each query's weights on the keys the cache drops (sum over j outside the
           sinks and the window of w_ij), exact from the record: 1 - exp(lse' - lse), lse' the
           log-sum-exp over the kept keys (a learned sink logit counted in both)
change     |z'_i - z_i| / |z_i|: how far the head's output moves when it attends over the cache
           only (z' = softmax over the kept keys, renormalised, times their values)
cost       the model's measure (``ablation.measure``: its output tokens' loss, nats per token)
           with that head alone streaming, less the measure with every head exact: one forward
           per head, the cache applied for real
estimate   the first-order cost, -d measure / d g_h at g = 1 (DuoAttention's gate between the
           head's full and streaming outputs, eq. 1): every head from one forward and one backward
needle     where every input ends with a copy of an earlier span (the needle probe, a repeated
           sequence; not a continuation the model wrote itself): the share of the copy's tokens after its first that the model predicts
           (its most likely next token is the copy's), with that head alone streaming; read from
           the same forward as the cost (Wu et al.'s and DuoAttention's needle retrieval)

outside and change are means over the queries that see more keys than the cache holds (query
position i' >= sinks + window); the others lose nothing. A head is ``streaming`` when its cost
(where measured, else its estimate) is at most the threshold and, where the needle is measured,
streaming costs it at most ``NEEDLE_DROP`` of its accuracy; else ``retrieval``.

``streaming_curve`` answers DuoAttention's question: with the heads made streaming cheapest first,
the measure at each count of streaming heads, and how many can stream for at most a stated loss.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from .. import memory
from ..atomic import write_table
from ..attention import kernels
from ..attention.caches import Policy, SinkWindow, SnapKV
from ..attention.intervene import cached_attention, caching, streaming, z_name
from ..attention.record import AttentionCall
from ..attention.sites import Attended, Listener, Site, listening
from ..inspection.capture import Prepared
from ..loaded.recompute import layers_recomputed, replaying
from ..memory import check_fits
from .ablation import Head, Mapper, _each, _grids, attention_modules, forward_bytes, measure
from .detectors import copied_span

SINKS, WINDOW = 4, 1020  # StreamingLLM's cache: 4 attention sinks and 1,020 recent keys
THRESHOLD = 0.01  # nats per token a streaming head may cost
NEEDLE_DROP = 0.05  # the share of the needle's tokens a streaming head may lose
KIND = "decoder"  # the attention a key-value cache serves: a decoder's self-attention


def check_cache(sinks: int, window: int, longest: int | None = None) -> None:
    """One line for a cache no input can use: no room, or room for every key of the longest input."""
    if sinks < 0 or window < 1:
        raise ValueError(f"a cache keeps `sinks` >= 0 and a `window` of at least 1 key; got {sinks} and {window}")
    if longest is not None and sinks + window >= longest:
        raise ValueError(
            f"a cache of {sinks} sink{'' if sinks == 1 else 's'} + a {window:,}-key window holds every key of an input of {longest:,} tokens: "
            f"nothing is dropped; give a `window` below {max(1, longest - sinks):,} or longer inputs"
        )


@torch.no_grad()
def outside_mass(call: AttentionCall, sinks: int = SINKS, window: int = WINDOW) -> np.ndarray:
    """Each query's weight (h, t) on the keys a cache of ``sinks`` + ``window`` drops, exactly, from
    a recorded decoder self-attention call's q, k and log-sum-exp: 1 - exp(lse' - lse), lse' over the
    kept keys only (``kernels.sink_window``: t x (sinks + window) scores, never the whole map)."""
    check_cache(sinks, window)
    if call.kind != KIND:
        raise ValueError(f"a {call.kind} attention is read whole: a key-value cache serves a decoder's self-attention")
    if call.weights is not None:  # a score that does not factor: its weights themselves
        _, t, s = call.shape
        i = torch.arange(t)[:, None] + s - t
        kept = kernels.sink_window_kept(i, torch.arange(s)[None, :], sinks, window)
        w = call.weights.float()
        return (w.sum(-1) - (w * kept).sum(-1)).numpy()
    q, k, lse = (x for x in (call.q, call.k, call.lse))
    assert q is not None and k is not None and lse is not None  # a factored call
    kept_lse = _kept_lse(call, q, k, sinks, window)
    return _outside(kept_lse, lse.float()).cpu().numpy()


def _kept_lse(call: AttentionCall, q: Tensor, k: Tensor, sinks: int, window: int) -> Tensor:
    """The log-sum-exp (h, t) over the kept keys of a recorded call, its rules kept."""
    h = q.shape[0]
    key_mask = None if call.key_mask is None else call.key_mask[None, None, None, :]
    mask = None if call.mask is None else call.mask[None]
    allowed = key_mask if mask is None else (mask if key_mask is None else mask & key_mask)
    additive = kernels.additive_term(allowed, None if call.bias is None else call.bias[None])
    k_all = kernels.groups(k[None], h)
    _, lse = kernels.sink_window(
        q[None],
        k_all,
        k_all,  # the values do not matter here
        scale=call.scale,
        sinks=sinks,
        window=window,
        additive=additive,
        cap=call.cap,
        sink=None if call.sink is None else call.sink[None],
        rule_window=call.window,
    )
    return lse[0]


def _outside(kept_lse: Tensor, lse: Tensor) -> Tensor:
    """1 - exp(lse' - lse), 0 for a query that sees no key."""
    return torch.where(torch.isfinite(lse), 1 - torch.exp(kept_lse - lse), 0.0)


class Replay(Listener):
    """Over one or more forward passes, at every decoder self-attention site: each head's mass
    outside the cache and its output change (``outside``, ``change``), summed over the queries that
    see more keys than the cache holds, and how many those are. With ``grads``, also each head's
    <dL/dz, z' - z> summed over every query once the pass's gradient is taken (``leaves``: the
    decoder's first residual stream, made a leaf): the first-order change of the loss L when the
    head runs over the cache, DuoAttention's gate gradient without differentiating the cache."""

    def __init__(self, policy: Policy, counted_from: int, *, grads: bool = False) -> None:
        self.policy, self.counted_from, self.grads = policy, counted_from, grads
        self.sums: dict[str, Tensor] = {}  # attention site -> (2, h): outside, change
        self.counts: dict[str, int] = {}
        self.firsts: dict[str, Tensor] = {}  # attention site -> (h,): sum of <dL/dz, z' - z>
        self.leaves: list[Tensor] = []
        self.pending: dict[str, tuple[Tensor, Tensor, Tensor]] = {}  # z site -> (z', outside, counted)

    def wants(self, site: Site) -> bool:
        first = self.grads and site.role == "resid_pre" and site.layer == 0
        return site.kind == KIND and (site.role in ("attn", "z") or first)

    def attended(self, call: Attended) -> None:
        if replaying():  # a layer recomputed for the backward pass: this call was heard already
            return
        assert call.q is not None  # ``cached_attention`` refuses a call without q, k and v
        with torch.no_grad():
            z, kept_lse = cached_attention(call, torch.arange(call.q.shape[1]), self.policy)
            lse = call.lse if call.lse is not None else _full_lse(call)
        t, s = call.q.shape[2], z.shape[2] if call.k is None else call.k.shape[2]
        counted = (torch.arange(t, device=z.device) + s - t) >= self.counted_from  # (t,)
        self.pending[call.site.z.name] = (z, _outside(kept_lse, lse.float()), counted)

    def activation(self, site: Site, x: Tensor) -> Tensor | None:
        if replaying():
            return None
        if site.role == "resid_pre":  # the gradient is taken with respect to it (made a leaf where it is none)
            leaf = x if x.requires_grad else x.detach().requires_grad_(True)
            self.leaves.append(leaf)
            return None if leaf is x else leaf
        got = self.pending.pop(site.name, None)
        if got is None:
            return None
        z, outside, counted = got
        with torch.no_grad():
            diff = z.to(x.dtype) - x
            change = diff.float().norm(dim=-1) / x.float().norm(dim=-1).clamp_min(1e-30)  # (b, h, t)
            use = counted.to(z.dtype)[None, None, :]
            parts = torch.stack([(outside * use).sum((0, 2)), (change * use).sum((0, 2))]).double()
        name = site.name.removesuffix(".z")
        self.sums[name] = self.sums.get(name, torch.zeros_like(parts)) + parts.cpu()
        self.counts[name] = self.counts.get(name, 0) + int(counted.sum()) * x.shape[0]
        if self.grads and x.requires_grad:
            x.register_hook(lambda g, name=name, diff=diff: self._first(name, g, diff))
        return None

    def _first(self, name: str, grad: Tensor, diff: Tensor) -> None:
        part = (grad.double() * diff.double()).sum((0, 2, 3)).cpu()  # (h,)
        self.firsts[name] = self.firsts.get(name, torch.zeros_like(part)) + part


def _full_lse(call: Attended) -> Tensor:
    """Each query's log-sum-exp over every key it may see (b, h, t), for a call whose kernel kept none."""
    assert call.q is not None and call.k is not None and call.v is not None
    heads = call.q.shape[1]
    k = kernels.groups(call.k, heads)
    if call.group > 1:
        k = k.repeat_interleave(call.group, 0)
    additive = kernels.additive_term(call.mask, call.bias)
    if additive is not None and call.group > 1 and additive.shape[0] > 1:
        additive = additive.repeat_interleave(call.group, 0)
    _, lse = kernels.fused_with_lse(call.q, k, k, scale=call.scale, causal=call.causal, additive=additive)
    return lse if call.sink is None else torch.logaddexp(lse, call.sink.float())


@dataclass
class ContextNeeds:
    """What each head of a decoder's self-attention (layers, heads) loses over a cache of ``sinks``
    + ``window`` keys, with every other head exact (the measures of the module docstring)."""

    sinks: int
    window: int
    measure: str
    base: float  # the measure with every head exact
    outside: np.ndarray
    change: np.ndarray
    queries: int  # queries past the cache, over every input (per head)
    estimate: np.ndarray | None = None
    cost: np.ndarray | None = None  # NaN where not measured
    threshold: float = THRESHOLD
    inputs: int = 0
    retrieval: np.ndarray | None = None  # Wu et al.'s retrieval score, beside the classes (``heads.detectors``)
    notes: list[str] = field(default_factory=list)
    needle: np.ndarray | None = None  # the needle's accuracy with each head alone streaming (NaN: not measured)
    needle_base: float | None = None  # the needle's accuracy with every head exact

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.outside.shape[0]), int(self.outside.shape[1])

    def effect(self) -> np.ndarray:
        """Each head's cost where measured, else its first-order estimate (NaN: neither)."""
        out = np.full(self.shape, np.nan) if self.estimate is None else self.estimate.astype(float).copy()
        if self.cost is not None:
            out = np.where(np.isnan(self.cost), out, self.cost)
        return out

    def classes(self) -> np.ndarray:
        """ "streaming" (costs at most ``threshold``) or "retrieval" per head ("" where neither
        cost nor estimate was found)."""
        effect = self.effect()
        streams = effect <= self.threshold
        if self.needle is not None and self.needle_base is not None:
            streams &= np.isnan(self.needle) | (self.needle >= self.needle_base - NEEDLE_DROP)
        return np.where(np.isnan(effect), "", np.where(streams, "streaming", "retrieval"))

    def rows(self) -> list[dict]:
        """One row per (layer, head), every measure and the class."""
        layers, heads = self.shape
        classes = self.classes()
        out = []
        for li in range(layers):
            for h in range(heads):
                row: dict[str, Any] = {"layer": li, "head": h}
                for name in ("outside", "change", "estimate", "cost", "needle", "retrieval"):
                    values = getattr(self, name)
                    if values is not None and not np.isnan(values[li, h]):
                        row[name] = round(float(values[li, h]), 6)
                row["class"] = str(classes[li, h])
                out.append(row)
        return out

    def write(self, path: Path) -> None:
        """Every head's measures and class as JSON (with the cache and the threshold) or CSV, by suffix."""
        about = {"sinks": self.sinks, "window": self.window, "threshold": self.threshold, "measure": self.measure}
        if self.needle_base is not None:
            about |= {"needle_base": round(self.needle_base, 6), "needle_drop": NEEDLE_DROP}
        write_table(path, self.rows(), {**about, "base": round(self.base, 6)}, "the heads' needs")

    def report(self) -> str:
        """A table of every head, costliest first, then the count of each class."""
        layers, heads = self.shape
        effect, classes = self.effect(), self.classes()
        lines = [
            f"decoder self-attention: {layers} layers x {heads} heads, each alone over a cache of {self.sinks} "
            f"sink{'' if self.sinks == 1 else 's'} + {self.window:,} recent keys ({self.queries:,} queries past it over {self.inputs} input(s)); "
            f"{self.measure} with every head exact: {self.base:.4f}",
            "  layer head  outside  change  " + ("estimate  " if self.estimate is not None else "")
            + ("cost      " if self.cost is not None else "") + ("needle  " if self.needle is not None else "")
            + ("retrieval  " if self.retrieval is not None else "") + "class",
        ]  # fmt: skip
        order = np.argsort(-np.nan_to_num(effect, nan=-np.inf), axis=None, kind="stable")
        for i in order:
            li, h = divmod(int(i), heads)
            cells = [f"  {li:>5} {h:>4}  {self.outside[li, h]:7.4f}  {self.change[li, h]:6.3f}"]
            for values, width in ((self.estimate, 8), (self.cost, 8)):
                if values is not None:
                    cells.append("" if np.isnan(values[li, h]) else f"{values[li, h]:+{width}.4f}")
            if self.needle is not None:
                cells.append("      " if np.isnan(self.needle[li, h]) else f"{self.needle[li, h]:6.3f}")
            if self.retrieval is not None:
                cells.append(f"{self.retrieval[li, h]:9.2f}")
            lines.append("  ".join(c if c else " " * 9 for c in cells) + f"  {classes[li, h]}")
        counts = {c: int((classes == c).sum()) for c in ("streaming", "retrieval")}
        basis = "cost" if self.cost is not None and not np.isnan(self.cost).all() else "first-order estimate"
        needle = (
            f" and it keeps the needle's accuracy within {NEEDLE_DROP:g} of {self.needle_base:.3f} (every head exact)"
            if self.needle is not None and self.needle_base is not None
            else ""
        )
        lines.append(
            f"{counts['streaming']} streaming, {counts['retrieval']} retrieval: streaming where the head's {basis} "
            f"is at most {self.threshold:g} ({self.measure.split(' (')[0]}){needle}"
        )
        if self.cost is not None and self.estimate is not None:
            both = ~np.isnan(self.cost) & ~np.isnan(self.estimate)
            if both.sum() > 2 and np.std(self.cost[both]) > 0 and np.std(self.estimate[both]) > 0:
                r = np.corrcoef(self.cost[both], self.estimate[both])[0, 1]
                lines.append(f"first-order estimate against cost: Pearson r {r:.3f} over {int(both.sum())} heads")
        return "\n".join(lines + self.notes)


def _decoder_modules(model: Any, prepared: Prepared) -> dict[tuple[str, int], tuple[Any, int]]:
    """(kind, layer) -> (module, heads) of every decoder self-attention, from the sites the model
    named (from a recorded forward where its sites carry no module)."""
    named = [s for s in model.sites() if s.role == "attn" and s.kind == KIND]
    if named and all(s.module is not None for s in named):
        modules = {(KIND, s.layer): (s.module, s.heads) for s in named}
    else:
        modules = {key: got for key, got in attention_modules(model, prepared).items() if key[0] == KIND}
    if not modules:
        raise ValueError(
            f"{model.name} has no decoder self-attention: a key-value cache policy applies to a model that writes "
            "one token at a time"
        )
    return modules


def replayed(
    model: Any, prepared: list[Prepared], sinks: int = SINKS, window: int = WINDOW, *, policy: Policy | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """(outside (layers, heads), change (layers, heads), queries past the cache) of every decoder
    self-attention head over ``prepared``, from one forward pass each (nothing kept). ``policy``:
    another cache than StreamingLLM's ``sinks`` + ``window`` (``attention.caches``), its queries
    counted from where it first drops a key (SnapKV: after its prompt)."""
    modules = _decoder_modules(model, prepared[0])
    policy = policy or SinkWindow(sinks, window)
    replay = Replay(policy, _first_dropping(policy))
    with torch.no_grad(), listening(replay):
        for term in measure(model, prepared).terms:
            term()
    outside, change = _grids(modules, np.nan)[KIND], _grids(modules, np.nan)[KIND]
    counted = 0
    for (_, layer), (module, n) in modules.items():
        name = z_name(module).removesuffix(".z")
        sums, count = replay.sums.get(name), replay.counts.get(name, 0)
        counted = max(counted, count)
        if sums is not None and count:
            outside[layer, :n], change[layer, :n] = (sums / count).numpy()
    return outside, change, counted


def _first_dropping(policy: Policy) -> int:
    """The first query position whose cache may lack a key it could see."""
    return policy.prompt if isinstance(policy, SnapKV) else policy.budget


def cache_losses(model: Any, prepared: list[Prepared], policy: Policy | None, *, last: int) -> float:
    """The loss (nats per token) of the last ``last`` output tokens of each input with every
    decoder self-attention head over the cache ``policy`` (None: every key), applied in the forward
    pass: the loss-against-budget curves of StreamingLLM, H2O and SnapKV (each paper's fig. of
    perplexity or accuracy against cache size)."""
    modules = _decoder_modules(model, prepared[0])
    for p in prepared:
        n = model.forward_positions(p)
        if last < 1 or last >= n:
            raise ValueError(
                f"`last` is the tokens scored at each input's end: 1..{n - 1} for {n:,} tokens, got {last}"
            )
        if policy is not None:
            policy.check(n)
    gates = {m: torch.zeros(h) for m, h in modules.values()}
    total, count = 0.0, 0
    with torch.no_grad():
        for p in prepared:
            scorer = model.scorer(p)
            if policy is None:
                log_probs, _ = scorer.forward(1, maps=False)
            else:
                with caching(gates, policy):
                    log_probs, _ = scorer.forward(1, maps=False)
            tail = log_probs[0, -last:]
            total, count = total - float(tail.sum()), count + tail.numel()
    return total / count


class Costs(NamedTuple):
    """``streaming_costs``' answer: the measure with every head exact, each head's change of it
    (layers, heads), and where every input ends with a copy, the needle's accuracy with every head
    exact and with each head streaming (NaN where not measured)."""

    base: float
    cost: np.ndarray
    needle: np.ndarray | None = None
    needle_base: float | None = None


def streaming_costs(
    model: Any,
    prepared: list[Prepared],
    sinks: int = SINKS,
    window: int = WINDOW,
    heads: list[Head] | None = None,
    *,
    mapper: Mapper = _each,
) -> Costs | None:
    """The measure with every head exact, and (layers, heads) its change with each head alone
    streaming (``heads``: only those, the rest NaN): one forward per head, from the head's layer
    on (the layers before it give what they gave with every head exact: ``_Kept``); the needle's
    accuracy from the same forwards where every input ends with a copy (``Needle``). None on the
    processes but the first (``mapper`` as in ``ablation.ablation_effects``)."""
    modules = _decoder_modules(model, prepared[0])
    measured = measure(model, prepared)
    chosen = heads if heads is not None else [(KIND, li, h) for (_, li), (_, n) in modules.items() for h in range(n)]
    for kind, layer, head in chosen:
        if (kind, layer) not in modules or not 0 <= head < modules[kind, layer][1]:
            raise ValueError(f"no head {head} in layer {layer} of the {kind} attention")
    needle = Needle.of(model, prepared)
    with needle.listening():
        kept = _Kept(model, measured)
    base, needle_base = kept.base, needle.accuracy()

    def cost(at: Head) -> tuple[float, float | None]:
        module, n = modules[at[0], at[1]]
        gate = torch.ones(n)
        gate[at[2]] = 0.0
        with torch.no_grad(), streaming({module: gate}, sinks=sinks, window=window), needle.listening():
            return kept.mean(module) - base, needle.accuracy()

    found = mapper(list(chosen), cost)
    if found is None:
        return None
    out, hits = _grids(modules, np.nan)[KIND], _grids(modules, np.nan)[KIND]
    for (_, layer, head), (value, accuracy) in zip(chosen, found):
        out[layer, head] = value
        hits[layer, head] = np.nan if accuracy is None else accuracy
    if needle_base is None:
        return Costs(base, out)
    return Costs(base, out, hits, needle_base)


class Needle(Listener):
    """The needle's accuracy over forward passes, one per input in order: at the logits site, the
    share of the copy's tokens (after its first, which nothing before it names) that the model's
    most likely next token gets right. Inert where some input does not end with a copy of an
    earlier span (``detectors.copied_span``), ends with a continuation the model wrote (a copy
    there is the model's own prediction) or the model names no logits site."""

    def __init__(self, targets: list[tuple[Tensor, Tensor]] | None) -> None:
        self.targets = targets  # per input: (query positions, the next tokens there)
        self.hits: list[int] = []

    @classmethod
    def of(cls, model: Any, prepared: list[Prepared]) -> Needle:
        if not any(s.role == "logits" for s in model.sites()):
            return cls(None)
        targets = []
        for p in prepared:
            span = copied_span(list(p.tgt_in_tokens))
            own = bool(p.output)  # a continuation the model wrote: its own most likely tokens, right by construction
            if own or p.tgt_in_ids is None or span is None or len(p.tgt_in_ids) != len(p.tgt_in_tokens):
                return cls(None)
            ids, answer = torch.as_tensor(p.tgt_in_ids), span[1]
            at = torch.arange(answer, len(ids) - 1)
            targets.append((at, ids[at + 1]))
        return cls(targets)

    def wants(self, site: Site) -> bool:
        return site.role == "logits"

    def activation(self, site: Site, x: Tensor) -> Tensor | None:
        if self.targets is not None and len(self.hits) < len(self.targets):
            at, want = self.targets[len(self.hits)]
            top = x[0, at.to(x.device)].argmax(-1)  # (positions,): the model's most likely next tokens
            self.hits.append(int((top == want.to(top.device)).sum()))
        else:
            self.hits.append(-1)  # more forwards than inputs: not one per input
        return None

    @contextlib.contextmanager
    def listening(self) -> Iterator[None]:
        self.hits = []
        if self.targets is None:
            yield
            return
        with listening(self):
            yield

    def accuracy(self) -> float | None:
        """The share right over the passes heard since ``listening`` began (None: inert, or the
        passes were not one per input)."""
        if self.targets is None or len(self.hits) != len(self.targets) or min(self.hits, default=-1) < 0:
            return None
        return sum(self.hits) / sum(len(at) for at, _ in self.targets)


class _Kept:
    """Each layer's output of each input with every head exact, and the measure then: a run that
    changes a head of some layer takes every layer that runs before it from here."""

    def __init__(self, model: Any, measured: Any) -> None:
        self.measured = measured
        self.layers = [s for s in model.sites() if s.role == "resid_pre" and s.module is not None]
        self.outputs: list[dict[int, Any]] = []  # per input: layer module id -> its output
        self.order: list[int] = []  # layer module ids in the order a forward calls them
        total, count, held = 0.0, 0, 0
        budget = memory.HEADROOM * memory.available_bytes() / 2  # half of what is free, at most
        with torch.no_grad():
            for term in measured.terms:
                seen: dict[int, Any] = {}
                calls: list[int] = []

                def keep(module: Any, args: Any, output: Any, seen=seen, calls=calls) -> None:
                    seen[id(module)] = output
                    calls.append(id(module))

                handles = [s.module.register_forward_hook(keep) for s in self.layers]
                try:
                    value, n = term()
                finally:
                    for h in handles:
                        h.remove()
                total, count = total + float(value), count + n
                held += sum(x.numel() * x.element_size() for x in seen.values() if isinstance(x, Tensor))
                once = len(set(calls)) == len(calls) and all(isinstance(x, Tensor) for x in seen.values())
                self.outputs.append(seen if once and held <= budget else {})  # else: the input runs whole
                self.order = self.order or calls
        self.base = total / max(1, count)

    def mean(self, attention: Any) -> float:
        """The measure with the layers before the one holding ``attention`` taken from the exact run."""
        holder = next((s.module for s in self.layers if _holds(s.module, attention)), None)
        before = self.order[: self.order.index(id(holder))] if holder is not None and id(holder) in self.order else []
        by_id = {id(s.module): s.module for s in self.layers}
        total, count = 0.0, 0
        for i, term in enumerate(self.measured.terms):
            cached = self.outputs[i]
            skipped = [by_id[m] for m in before if m in cached]
            own = [vars(m).get("forward") for m in skipped]
            try:
                for m in skipped:
                    m.forward = _giving(cached[id(m)])
                value, n = term()
            finally:
                for m, forward in zip(skipped, own, strict=True):
                    if forward is None:
                        vars(m).pop("forward", None)
                    else:
                        m.forward = forward
            total, count = total + float(value), count + n
        return total / max(1, count)


def _giving(output: Any) -> Callable[..., Any]:
    """A layer's forward that gives ``output`` whatever it is called with."""
    return lambda *args, **kwargs: output


def _holds(layer: Any, attention: Any) -> bool:
    return any(m is attention for m in layer.modules())


def streaming_estimates(
    model: Any, prepared: list[Prepared], sinks: int = SINKS, window: int = WINDOW, *, mapper: Mapper = _each
) -> np.ndarray | None:
    """Every head's first-order cost of streaming (layers, heads): -d measure / d g_h at g = 1, g_h
    the gate between its full (1) and streaming (0) outputs, which is <d measure / d z_h, z'_h - z_h>
    (z' its output over the cache, from ``Replay``): one forward and one backward per input, each
    layer recomputed in the backward (``loaded.recompute``: memory that grows with the layers'
    inputs), the cache never differentiated. None on the processes but the first."""
    modules = _decoder_modules(model, prepared[0])
    measured = measure(model, prepared)
    policy = SinkWindow(sinks, window)

    def gradients(index: int) -> tuple[dict[str, Tensor], int]:
        replay = Replay(policy, sinks + window, grads=True)
        with layers_recomputed(model, f"the streaming costs' gradient over input {index + 1}"), listening(replay):
            value, count = measured.terms[index]()
            if not replay.leaves:
                raise ValueError(
                    f"{model.name}'s decoder names no residual stream: its heads' gradients are out of reach"
                )
            torch.autograd.grad(value, replay.leaves)
        return replay.firsts, count

    found = mapper(list(range(len(prepared))), gradients)
    if found is None:
        return None
    out = _grids(modules, 0.0)[KIND]
    tokens = sum(count for _, count in found)  # the measure is the mean over every input's tokens
    for (_, layer), (module, n) in modules.items():
        name = z_name(module).removesuffix(".z")
        out[layer, :n] = sum(f[name].numpy() for f, _ in found if name in f) / max(1, tokens)
    return out


def context_needs(
    model: Any,
    prepared: list[Prepared],
    *,
    sinks: int = SINKS,
    window: int = WINDOW,
    threshold: float = THRESHOLD,
    exact: bool = True,
    mapper: Mapper = _each,
    progress: Callable[[str], None] | None = None,
) -> ContextNeeds | None:
    """Every decoder self-attention head's needs (``ContextNeeds``) over ``prepared``: the record's
    measures, the first-order estimate and, with ``exact``, each head's cost (a forward per head).
    None on the processes but the first."""
    if not prepared:
        raise ValueError("no inputs to measure the heads on")
    longest = max(model.forward_positions(p) for p in prepared)
    check_cache(sinks, window, longest)
    network = model.network()
    device = next(network.parameters()).device
    check_fits(forward_bytes(network, longest), f"a forward over {longest:,} tokens", "give shorter inputs", device)
    tell = progress or (lambda _: None)
    tell("replaying the cache on every head")
    outside, change, queries = replayed(model, prepared, sinks, window)
    with torch.no_grad():
        base = measure(model, prepared).mean()
    tell("first-order costs (one backward per input)")
    estimate = streaming_estimates(model, prepared, sinks, window, mapper=mapper)
    got: Costs | None = None
    if exact:
        tell("each head alone over the cache")
        got = streaming_costs(model, prepared, sinks, window, mapper=mapper)
        if got is None:
            return None
    if estimate is None:
        return None
    return ContextNeeds(
        sinks, window, measure(model, prepared).name, base, outside, change, queries, estimate,
        None if got is None else got.cost, threshold, len(prepared),
        needle=None if got is None else got.needle, needle_base=None if got is None else got.needle_base,
    )  # fmt: skip


def streaming_curve(
    model: Any,
    prepared: list[Prepared],
    needs: ContextNeeds,
    *,
    steps: int = 10,
    budget: float | None = None,
) -> tuple[list[tuple[int, float]], int | None]:
    """DuoAttention's question: with the heads made streaming together, cheapest first by
    ``needs.effect()``, the measure at ``steps`` + 1 counts from none to all ([(streaming heads,
    measure)]); and, for a ``budget`` (the most the measure may rise), the largest count measured
    within it (None without a budget)."""
    modules = _decoder_modules(model, prepared[0])
    layers, heads = needs.shape
    order = np.argsort(np.nan_to_num(needs.effect(), nan=np.inf), axis=None, kind="stable")
    total = layers * heads
    counts = sorted({round(total * i / steps) for i in range(steps + 1)})
    measured = measure(model, prepared)
    curve = []
    for n in counts:
        gates = {m: torch.ones(h) for m, h in modules.values()}
        by_layer = {layer: modules[KIND, layer][0] for (_, layer) in modules}
        for i in order[:n]:
            layer, head = divmod(int(i), heads)
            gates[by_layer[layer]][head] = 0.0
        with torch.no_grad(), streaming(gates, sinks=needs.sinks, window=needs.window):
            curve.append((n, measured.mean()))
    within = None
    if budget is not None:
        base = curve[0][1]
        fits = [n for n, value in curve if value - base <= budget]
        within = max(fits) if fits else 0
    return curve, within

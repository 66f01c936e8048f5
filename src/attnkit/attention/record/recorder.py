"""The recorder: a listener of every attention site (``attention.sites``) that keeps each call
of each batch row as an ``AttentionCall``, its kind and layer the site's own."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
from torch import Tensor

from ..sites import Attended, Listener, Site, Tap, listening
from .calls import AttentionCall, lse_of

VALUE_PARTS = ("x", "queries", "keys", "values")  # kept by a ``values`` recording only


def _four(x: Tensor) -> Tensor:
    """A mask or bias broadcastable to (b, h, t, s) as 4-D."""
    return x.reshape((1,) * (4 - x.dim()) + tuple(x.shape))


def _row(x: Tensor, i: int) -> Tensor:
    """Row ``i`` of a 4-D mask or bias whose batch may be broadcast (1)."""
    return x[i if x.shape[0] > 1 else 0]


class Recorder(Listener):
    """Every attention call made while it is open, one ``AttentionCall`` per call and batch row.

    ``values``: keep v too (value-norm, the walk-through) and each call's inputs; ``graph``:
    attention sites form their weights in the autograd graph and each call keeps them (gradient
    methods); ``dtype``: how q, k and v are kept (float16 halves a long input's record);
    ``rows``: which batch rows to keep (None: every row); ``sites``: which attention sites, by
    name (None: every one)."""

    def __init__(
        self,
        *,
        values: bool = False,
        graph: bool = False,
        dtype: torch.dtype = torch.float32,
        rows: Sequence[int] | None = None,
        sites: set[str] | None = None,
    ) -> None:
        self.values = values
        self.graph = graph
        self.weights = graph  # a graph recording asks each site for its weights
        self.dtype = dtype
        self.rows = None if rows is None else tuple(rows)
        self.sites = sites
        self.calls: list[AttentionCall] = []
        self._layers: dict[str, int] = {}

    def wants(self, site: Site) -> bool:
        return site.role == "attn" and (self.sites is None or site.name in self.sites)

    def attended(self, call: Attended) -> None:
        rows = range(call.batch) if self.rows is None else [i for i in self.rows if i < call.batch]
        graph = self._graph(call)
        for i in rows:
            self.calls.append(self._keep_row(call, i, graph))

    def _graph(self, call: Attended) -> list[Tap] | None:
        if not self.graph:
            return None
        if call.taps is not None:
            return call.taps
        return None if call.weights is None else [Tap(call.weights)]

    def _keep_row(self, call: Attended, i: int, graph: list[Tap] | None) -> AttentionCall:
        site = call.site
        extra = {name: x[i].detach() for name, x in call.extra.items() if self.values or name not in VALUE_PARTS}
        common: dict[str, Any] = {"graph": graph, "module": site.module, "site": site, "row": i, "extra": extra}
        if not call.factored:
            assert call.weights is not None  # a call that does not factor gives its weights
            return self._call(site.kind, site.layer, weights=call.weights[i], **common)
        assert call.q is not None and call.k is not None  # a factored call gives q and k
        j = i // call.group  # the key row its queries read
        t, s = call.q.shape[-2], call.k.shape[-2]
        key_mask = rule = None
        if call.mask is not None:
            m = _row(_four(call.mask), j)  # (h|1, t|1, s)
            if m.shape[0] == 1 and m.shape[1] == 1:
                key_mask = m[0, 0].expand(s)
            else:
                rule = m.expand(-1, t, s)
        bias = None if call.bias is None else _row(_four(call.bias), j).expand(-1, t, s)
        kept = self._call(
            site.kind,
            site.layer,
            q=call.q[i],
            k=call.k[j],
            scale=call.scale,
            causal=call.causal,
            window=call.window,
            key_mask=key_mask,
            mask=rule,
            bias=bias,
            cap=call.cap,
            sink=None
            if call.sink is None
            else _row(call.sink.reshape((1,) * (3 - call.sink.dim()) + tuple(call.sink.shape)), i),
            v=call.v[j] if self.values and call.v is not None else None,
            **common,
        )
        exact = call.lse is not None and kept.q is not None and kept.q.dtype == call.q.dtype
        kept.lse = call.lse[i].detach().float() if exact else lse_of(kept)  # type: ignore[index]  # exact: lse given
        return kept

    def add(self, kind: str, layer: int | None = None, **parts: Any) -> AttentionCall:
        """Keep one call made by hand; its layer, if not given, is its place among the calls of its kind."""
        if layer is None:
            layer = self._layers.get(kind, 0)
            self._layers[kind] = layer + 1
        return self._append(self._call(kind, layer, **parts))

    def _call(self, kind: str, layer: int, **parts: Any) -> AttentionCall:
        """One call, its tensors detached and kept in the recording's dtype."""
        keep: dict[str, Any] = {
            name: (None if x is None else self._keep(name, x)) if isinstance(x, Tensor) or x is None else x
            for name, x in parts.items()
        }
        call = AttentionCall(kind, layer, **keep)
        if call.lse is not None and call.q is not None and call.q.dtype != parts["q"].dtype:
            call.lse = lse_of(call)  # of the q and k kept (rounded): every row sums to 1 again
        return call

    def _append(self, call: AttentionCall) -> AttentionCall:
        self.calls.append(call)
        return call

    def add_scores(
        self,
        site: Site | None,
        q: Tensor,
        k: Tensor,
        *,
        scale: float,
        causal: bool = False,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
    ) -> AttentionCall:
        """Keep row 0 of a call whose weights are softmax(scale q k^T + bias) under ``mask``
        (q (b, h, t, d); k (b, h_kv, s, d)), its log-sum-exp taken here; made by hand, or at
        ``site``."""
        where = site or Site("", "encoder", self._layers.get("encoder", 0))
        if site is None:
            self._layers["encoder"] = where.layer + 1
        call = Attended(where, q=q, k=k, scale=scale, causal=causal, mask=mask, bias=bias)
        return self._append(self._keep_row(call, 0, None))

    def _keep(self, name: str, x: Tensor) -> Tensor:
        if name == "graph":
            return x
        x = x.detach()
        if name in ("q", "k", "v") and x.is_floating_point():
            return x.to(self.dtype)
        if name in ("lse", "bias", "weights", "sink"):
            return x.float()
        return x

    def by_kind(self) -> dict[str, list[AttentionCall]]:
        out: dict[str, list[AttentionCall]] = {}
        for c in self.calls:
            out.setdefault(c.kind, []).append(c)
        return out


_recorder: ContextVar[Recorder | None] = ContextVar("attnkit_recorder", default=None)


def active() -> Recorder | None:
    """The innermost open recorder, or None."""
    return _recorder.get()


@contextmanager
def recording(
    *,
    values: bool = False,
    graph: bool = False,
    dtype: torch.dtype = torch.float32,
    rows: Sequence[int] | None = None,
    sites: set[str] | None = None,
) -> Iterator[Recorder]:
    """Within: every attention call of every model (``sites``: of those attention sites, by name) is
    handed to the yielded recorder (and to any recorder open around it)."""
    if dtype not in (torch.float16, torch.float32):
        raise ValueError(f"a record keeps q and k in float16 or float32, not {dtype}")
    rec = Recorder(values=values, graph=graph, dtype=dtype, rows=rows, sites=sites)
    token = _recorder.set(rec)
    try:
        with listening(rec):
            yield rec
    finally:
        _recorder.reset(token)

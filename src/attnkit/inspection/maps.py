"""A record's attention maps, kind by kind and layer by layer, formed only where asked.

``Maps`` holds each kind's recorded calls (``attnkit.attention.record.AttentionCall``, one per
layer). ``maps.view(kind, layer, head)`` is a ``MapView`` (blocks, overviews, top keys,
statistics: nothing formed in full); ``maps.layer(kind, layer)`` forms one layer's
(heads, t, s) weights; ``maps[kind]`` forms every layer's (layers, heads, t, s) array, as
short inputs' consumers (figures, rollout, the page) read it, and keeps it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import torch

from ..attention.record import AttentionCall, MapView
from ..memory import check_fits
from ..models.interface import ATTENTION_KINDS as KINDS
from ..models.interface import KIND_LABELS as LABELS


def dense_calls(kind: str, maps: np.ndarray) -> list[AttentionCall]:
    """Calls holding formed maps (layers, heads, t, s), one per layer."""
    return [AttentionCall(kind, i, weights=torch.from_numpy(np.ascontiguousarray(m))) for i, m in enumerate(maps)]


class Maps(Mapping[str, np.ndarray]):
    """{kind: (layers, heads, queries, keys)} with each layer a recorded call."""

    def __init__(
        self, calls: Mapping[str, list[AttentionCall]] | None = None, dense: Mapping[str, np.ndarray] | None = None
    ) -> None:
        self.calls: dict[str, list[AttentionCall]] = {k: list(v) for k, v in (calls or {}).items() if v}
        self._formed: dict[str, np.ndarray] = {}
        for kind, a in (dense or {}).items():
            self.calls[kind] = dense_calls(kind, a)
            self._formed[kind] = a

    @classmethod
    def of(cls, maps: Mapping[str, np.ndarray] | Maps) -> Maps:
        return maps if isinstance(maps, Maps) else cls(dense=maps)

    def __iter__(self) -> Iterator[str]:
        return iter([k for k in KINDS if k in self.calls] + [k for k in self.calls if k not in KINDS])

    def __len__(self) -> int:
        return len(self.calls)

    def __contains__(self, kind: object) -> bool:
        return kind in self.calls

    def _calls(self, kind: str) -> list[AttentionCall]:
        if kind not in self.calls:
            have = ", ".join(self) or "none"
            raise ValueError(f"this model has no {LABELS.get(kind, kind)} maps (it has: {have})")
        return self.calls[kind]

    def shape(self, kind: str) -> tuple[int, int, int, int]:
        """(layers, heads, queries, keys) of ``kind``, without forming anything."""
        calls = self._calls(kind)
        return (len(calls), *calls[0].shape)

    def nbytes(self) -> int:
        """What the record holds in memory: q, k, log-sum-exp, masks, biases, formed weights."""
        parts = ("q", "k", "lse", "key_mask", "mask", "bias", "weights", "v")
        held = {
            id(x): x.numel() * x.element_size()
            for calls in self.calls.values()
            for c in calls
            for x in (getattr(c, part) for part in parts)
            if x is not None  # a tensor shared by layers (T5's bias) counts once
        }
        return sum(held.values()) + sum(a.nbytes for a in self._formed.values())

    def dense_bytes(self, itemsize: int = 4) -> int:
        """Every map of every kind formed: layers x heads x queries x keys x ``itemsize``."""
        return sum(int(np.prod(self.shape(kind), dtype=np.int64)) * itemsize for kind in self.calls)

    def call(self, kind: str, layer: int) -> AttentionCall:
        calls = self._calls(kind)
        if not -len(calls) <= layer < len(calls):
            n = len(calls)
            raise ValueError(f"layer {layer} out of range: the {LABELS.get(kind, kind)} has {n} layer(s) (0..{n - 1})")
        return calls[layer]

    def view(self, kind: str, layer: int, head: int | str) -> MapView:
        """One head's map (or the heads' mean: ``head="mean"``) as a view."""
        return MapView(self.call(kind, layer), head)

    def layer(self, kind: str, layer: int) -> np.ndarray:
        """One layer's (heads, t, s) weights, formed."""
        if kind in self._formed:
            return self._formed[kind][layer]
        call = self.call(kind, layer)
        h, t, s = call.shape
        check_fits(
            2 * h * t * s * 4,
            f"forming a {LABELS.get(kind, kind)} layer's {h} maps of {t:,} x {s:,}",
            "look through the record's views instead (a head, a block, an overview) or give a shorter input",
        )
        return np.stack([MapView(call, h).dense() for h in range(call.heads)]).astype(self.dtype(kind))

    def dtype(self, kind: str) -> np.dtype:
        """float16 for a record kept in float16 (a long input's), else float32."""
        if kind in self._formed:
            return self._formed[kind].dtype
        first = self._calls(kind)[0]
        half = first.q is not None and first.q.dtype == torch.float16
        return np.dtype(np.float16 if half else np.float32)

    def __getitem__(self, kind: str) -> np.ndarray:
        if kind not in self._formed:
            layers, h, t, s = self.shape(kind)
            check_fits(
                layers * h * t * s * self.dtype(kind).itemsize + h * t * s * 8,
                f"forming every {LABELS.get(kind, kind)} map ({layers} layers x {h} heads of {t:,} x {s:,})",
                "look through the record's views instead (a layer, a head, an overview) or give a shorter input",
            )
            self._formed[kind] = np.stack([self.layer(kind, i) for i in range(len(self._calls(kind)))])
        return self._formed[kind]

    def factored(self, kind: str) -> bool:
        """Whether ``kind``'s maps are kept as q, k and log-sum-exp (not formed)."""
        return self._calls(kind)[0].weights is None

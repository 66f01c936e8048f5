"""The methods by name, over a captured record: what `attnkit attribute` runs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..inspection.capture import AttentionRecord
from .flow import attention_flow
from .rollout import raw_attention, rollout

# name -> (self-attention maps (layers, heads, s, s) -> (s, s) scores), what it is
METHODS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "attention": (raw_attention, "raw attention, last layer, mean of heads"),
    "rollout": (rollout, "attention rollout"),
    "flow": (attention_flow, "attention flow"),
}


def attribute(record: AttentionRecord, methods: list[str]) -> dict[str, np.ndarray]:
    """{method: (top-layer positions, input tokens) scores} of ``record``'s encoder self-attention."""
    if "encoder" not in record.maps:
        raise ValueError(
            "this model has no encoder self-attention (an RNN's encoder is recurrent): rollout and flow "
            "follow a stack of self-attention layers"
        )
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r} (valid: {', '.join(METHODS)})")
    maps = record.maps["encoder"]
    return {m: METHODS[m][0](maps) for m in methods}

"""Looking inside models: capture every attention map (and save it), the Q/K/V
walk-through of one query, per-head statistics, and positional-scheme arrays."""

from .capture import (
    AttentionRecord,
    Prepared,
    capture,
    capture_ids,
    load_records,
    model_info,
    prepare,
    save_records,
)
from .diagnostics import HeadStats, head_statistics
from .explain import Walkthrough, attention_module, explain

__all__ = [
    "AttentionRecord",
    "HeadStats",
    "Prepared",
    "Walkthrough",
    "attention_module",
    "capture",
    "capture_ids",
    "explain",
    "head_statistics",
    "load_records",
    "model_info",
    "prepare",
    "save_records",
]

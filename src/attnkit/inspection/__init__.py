"""Looking inside models: where attention comes from (a model directory, a pretrained
encoder or a saved file: ``attnkit.loaded``), every attention map captured and saved, the Q/K/V
walk-through of one query, per-head statistics, contextual vectors and positional figures."""

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

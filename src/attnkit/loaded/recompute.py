"""Each layer of a loaded model recomputed in the backward pass instead of kept for it (activation
checkpointing, Chen et al. 2016), with the memory it keeps counted as it is kept: gradients over
long inputs in memory that grows with the layers' inputs, not with everything each layer holds."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from .. import memory


def replaying() -> bool:
    """Whether the code running is a layer recomputed for the backward pass (``layers_recomputed``):
    a hook that keeps what it sees must keep nothing again."""
    return _REPLAYING.get()


_REPLAYING: ContextVar[bool] = ContextVar("attnkit_replaying", default=False)


@contextmanager
def layers_recomputed(model: Any, what: str) -> Iterator[None]:
    """Each layer's forward recomputed in the backward pass instead of kept for it (non-reentrant
    activation checkpointing): what the graph holds grows with the layers' inputs alone, plus one
    layer recomputed at a time. The first layer is kept whole, which measures what one layer
    holds. What is kept is counted as it is kept; the run stops with one line once that, with one
    layer's recomputation, passes the memory the system could give at the start (the count
    overstates: a view is counted as its own copy), never leaving the operating system to end it.

    A recomputed layer runs in the context (the listeners) of its first run, with its hooks told
    they replay (``_REPLAYING``): they must act on the graph as they did, and keep nothing again."""
    budget = memory.HEADROOM * memory.available_bytes()
    kept, layer = [0], [-1]  # bytes kept; what the first layer kept (-1: not yet run)

    def pack(t: Tensor) -> Tensor:
        kept[0] += t.numel() * t.element_size()
        if kept[0] + max(layer[0], 0) > budget:
            raise ValueError(
                f"{what} keeps more than {budget / 1e9:.1f} GB for its backward pass (what is free): "
                "give a shorter input"
            )
        return t

    def checkpointed(forward: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if layer[0] < 0:
                before = kept[0]
                out = forward(*args, **kwargs)
                layer[0] = kept[0] - before
                return out
            context, runs = contextvars.copy_context(), [0]

            def body(*a: Any, **k: Any) -> Any:
                runs[0] += 1
                return forward(*a, **k) if runs[0] == 1 else context.run(_replay, forward, *a, **k)

            return checkpoint(body, *args, use_reentrant=False, **kwargs)

        return call

    layers = [s.module for s in model.sites() if s.role == "resid_pre" and s.module is not None]
    own = [vars(m).get("forward") for m in layers]  # a forward set on the instance (a wrapper), put back
    try:
        for m in layers:
            m.forward = checkpointed(m.forward)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield
    finally:
        for m, forward in zip(layers, own, strict=True):
            if forward is None:
                vars(m).pop("forward", None)
            else:
                m.forward = forward


def _replay(forward: Any, *args: Any, **kwargs: Any) -> Any:
    _REPLAYING.set(True)
    return forward(*args, **kwargs)

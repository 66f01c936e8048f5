"""Does the model need a head? Its loss with the head ablated, and its importance by gradient.

For a model that writes (a translator, a language model, a captioner) the measure is the mean
negative log-likelihood of its output tokens on a set of inputs, teacher-forced: each input's
own output (its translation, a forced target, or for a language model each next token). A
head is ablated by replacing its output z_h before the heads are merged (``attention.
intervene``): by 0 (zero ablation) or by its mean over every query of the inputs (mean
ablation, which keeps the head's constant contribution). Its effect: the loss with it ablated
less the loss with every head.

Importance (Michel et al. 2019, eq. 2): I_h = mean over the inputs x of | d L(x) / d xi_h | at
xi = 1, xi_h a gate on head h's output: the loss's first-order change when the head is removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ..attention.intervene import collecting, gating
from ..inspection.capture import Prepared

MODES = ("zero", "mean")
Head = tuple[str, int, int]  # kind, layer, head


def attention_modules(model: Any, prepared: Prepared) -> dict[tuple[str, int], tuple[Any, int]]:
    """(kind, layer) -> (the attention module that computes it, its heads), from one recorded
    forward pass of ``prepared``."""
    record = model.capture(prepared)
    out = {}
    for kind in record.kinds:
        for layer in range(record.maps.shape(kind)[0]):
            call = record.maps.call(kind, layer)
            if call.module is None:
                raise ValueError(f"the {kind} attention of {model.name} cannot be reached to ablate its heads")
            out[kind, layer] = (call.module, call.heads)
    return out


def _grids(modules: dict[tuple[str, int], tuple[Any, int]], fill: float) -> dict[str, np.ndarray]:
    """One (layers, heads) array per attention kind of ``modules``, filled with ``fill``."""
    shapes: dict[str, tuple[int, int]] = {}
    for (kind, layer), (_, n) in modules.items():
        layers, heads = shapes.get(kind, (0, 0))
        shapes[kind] = (max(layers, layer + 1), max(heads, n))
    return {kind: np.full(shape, fill) for kind, shape in shapes.items()}


def _scored(model: Any, prepared: list[Prepared]) -> Iterator[torch.Tensor]:
    """Each input's output log-probabilities (1, rows) under the open gates."""
    if not model.capabilities.writes:
        raise ValueError(
            f"{model.name} is {model.capabilities.a}: ablation measures the loss of the tokens a model writes"
        )
    for p in prepared:
        log_probs, _ = model.scorer(p).forward(1)
        yield log_probs


def output_loss(model: Any, prepared: list[Prepared], gates: dict | None = None, means: dict | None = None) -> float:
    """Mean negative log-likelihood per output token over ``prepared`` (gates: module -> (h,))."""
    total, n = 0.0, 0
    with torch.no_grad(), gating(gates or {}, means):
        for lp in _scored(model, prepared):
            total -= float(lp.sum())
            n += lp.numel()
    return total / max(1, n)


def head_means(model: Any, prepared: list[Prepared]) -> dict[Any, torch.Tensor]:
    """Every attention module's mean head outputs (h, d) over every query of ``prepared``."""
    modules = {id(m): m for m, _ in attention_modules(model, prepared[0]).values()}
    with torch.no_grad(), collecting() as c:
        for _ in _scored(model, prepared):
            pass
    return {modules[k]: v for k, v in c.means().items() if k in modules}


def ablation_effects(
    model: Any, prepared: list[Prepared], mode: str = "zero", heads: list[Head] | None = None
) -> tuple[float, dict[str, np.ndarray]]:
    """The loss with every head, and per kind (layers, heads) the loss with each head ablated
    alone less it (``heads``: only those, the rest NaN)."""
    if mode not in MODES:
        raise ValueError(f"ablation is 'zero' or 'mean', not {mode!r}")
    if not prepared:
        raise ValueError("no inputs to measure the loss on")
    modules = attention_modules(model, prepared[0])
    means = head_means(model, prepared) if mode == "mean" else None
    base = output_loss(model, prepared)
    out = _grids(modules, np.nan)
    chosen = heads if heads is not None else [(k, li, h) for (k, li), (_, n) in modules.items() for h in range(n)]
    for kind, layer, head in chosen:
        if (kind, layer) not in modules or not 0 <= head < modules[kind, layer][1]:
            raise ValueError(f"no head {head} in layer {layer} of the {kind} attention")
        module, n = modules[kind, layer]
        gate = torch.ones(n)
        gate[head] = 0.0
        out[kind][layer, head] = output_loss(model, prepared, {module: gate}, means) - base
    return base, out


def head_importance(model: Any, prepared: list[Prepared]) -> dict[str, np.ndarray]:
    """Michel et al.'s importance of every head, I_h = mean over the inputs x of | d L(x) / d xi_h |
    at xi = 1, L(x) the mean negative log-likelihood of x's output tokens; per kind (layers,
    heads). The model's own parameters get no gradient."""
    if not prepared:
        raise ValueError("no inputs to measure the loss on")
    modules = attention_modules(model, prepared[0])
    gates = {m: torch.ones(n, requires_grad=True) for m, n in modules.values()}
    order = list(gates)
    sums = [torch.zeros(len(gates[m])) for m in order]
    with gating(gates):
        for lp in _scored(model, prepared):
            grads = torch.autograd.grad(-lp.mean(), [gates[m] for m in order], allow_unused=True)
            for s, g in zip(sums, grads):
                if g is not None:
                    s += g.abs()
    out = _grids(modules, 0.0)
    for (kind, li), (module, n) in modules.items():
        out[kind][li, :n] = (sums[order.index(module)] / len(prepared)).numpy()
    return out

"""Does the model need a head? What the model loses with the head ablated, and its importance
by gradient.

What is measured depends on what the model gives (its ``scorer``):

- a model that writes (a translator, a language model, a captioner): the mean negative
  log-likelihood of its output tokens on a set of inputs, teacher-forced: each input's own output
  (its translation, a forced target, or for a language model each next token);
- an encoder: the share of its sentence vector v (the mean of its top layer, as
  sentence-transformers pools it) that is lost, 1 - <v', v> / |v|^2 with v' the vector with the
  head ablated: 0 when nothing changes, 1 when nothing of v is left along v.

A head is ablated by replacing its output z_h before the heads are merged (``attention.
intervene``): by 0 (zero ablation) or by its mean over every query of the inputs (mean
ablation, which keeps the head's constant contribution). Its effect: the measure with it ablated
less the measure with every head.

Importance (Michel et al. 2019, eq. 2): I_h = mean over the inputs x of | d L(x) / d xi_h | at
xi = 1, xi_h a gate on head h's output: the measure's first-order change when the head is removed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from ..attention.intervene import collecting, gating, z_name
from ..inspection.capture import Prepared
from ..memory import check_fits

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


def removing(modules: dict[tuple[str, int], tuple[Any, int]], heads: list[Head]) -> dict[Any, torch.Tensor]:
    """The gates (``attention.intervene.gating``) that remove ``heads`` together: 0 on each of
    them, 1 on every other head of their modules."""
    gates: dict[Any, torch.Tensor] = {}
    for kind, layer, head in heads:
        if (kind, layer) not in modules or not 0 <= head < modules[kind, layer][1]:
            raise ValueError(f"no head {head} in layer {layer} of the {kind} attention")
        module, n = modules[kind, layer]
        gates.setdefault(module, torch.ones(n))[head] = 0.0
    return gates


def _grids(modules: dict[tuple[str, int], tuple[Any, int]], fill: float) -> dict[str, np.ndarray]:
    """One (layers, heads) array per attention kind of ``modules``, filled with ``fill``."""
    shapes: dict[str, tuple[int, int]] = {}
    for (kind, layer), (_, n) in modules.items():
        layers, heads = shapes.get(kind, (0, 0))
        shapes[kind] = (max(layers, layer + 1), max(heads, n))
    return {kind: np.full(shape, fill) for kind, shape in shapes.items()}


@dataclass
class Measure:
    """What ablation measures on a model, per input: ``name`` (with its unit) and ``terms``, one
    function per input giving (the sum of its terms, how many) under the gates open when called."""

    name: str
    short: str  # for a table's cell: "loss", "vector lost"
    terms: list[Callable[[], tuple[torch.Tensor, int]]]

    def mean(self) -> float:
        total, n = 0.0, 0
        for term in self.terms:
            value, count = term()
            total, n = total + float(value), n + count
        return total / max(1, n)


LOSS = "loss (nats per output token)"
LOST = "share of the sentence vector lost"


def measure(model: Any, prepared: list[Prepared]) -> Measure:
    """The model's measure on ``prepared``: its output tokens' loss, or for an encoder the share of
    its sentence vector lost (against the vector of the model as it is, taken here, ungated)."""
    if not prepared:
        raise ValueError("no inputs to measure the loss on")
    scorers = [model.scorer(p) for p in prepared]
    if not scorers[0].pooled:
        return Measure(LOSS, "loss", [partial(_token_loss, s) for s in scorers])
    with torch.no_grad():
        clean = [float(s.forward(1, maps=False)[0].reshape(())) for s in scorers]
    return Measure(LOST, "vector lost", [partial(_vector_lost, s, c) for s, c in zip(scorers, clean)])


def _token_loss(scorer: Any) -> tuple[torch.Tensor, int]:
    log_probs, _ = scorer.forward(1, maps=False)  # no map formed: memory grows with the tokens, not their square
    return -log_probs.sum(), log_probs.numel()


def _vector_lost(scorer: Any, clean: float) -> tuple[torch.Tensor, int]:
    score, _ = scorer.forward(1, maps=False)  # <v', v> / |v|: the vector along the clean one
    return 1 - score.reshape(()) / clean, 1


def output_loss(model: Any, prepared: list[Prepared], gates: dict | None = None, means: dict | None = None) -> float:
    """The model's measure (``measure``) over ``prepared`` with the gates ``gates`` (module -> (h,))."""
    with torch.no_grad(), gating(gates or {}, means):
        return measure(model, prepared).mean()


def head_means(model: Any, prepared: list[Prepared], measured: Measure | None = None) -> dict[Any, torch.Tensor]:
    """Every attention module's mean head outputs (h, d) over every query of ``prepared`` (run
    through ``measured``, the model's measure on them, when it is at hand)."""
    modules = [m for m, _ in attention_modules(model, prepared[0]).values()]
    with torch.no_grad(), collecting() as c:
        for term in (measured or measure(model, prepared)).terms:
            term()
    found = c.means()
    return {m: found[z_name(m)] for m in modules if z_name(m) in found}


Mapper = Callable[[list, Callable], "list | None"]  # items, fn -> fn over the items (None: another process's)


def _each(items: list, fn: Callable) -> list:
    return [fn(x) for x in items]


def ablation_effects(
    model: Any, prepared: list[Prepared], mode: str = "zero", heads: list[Head] | None = None, *, mapper: Mapper = _each
) -> tuple[Measure, float, dict[str, np.ndarray]] | None:
    """The model's measure (``measure``), its value with every head, and per kind (layers, heads)
    its value with each head ablated alone less that (``heads``: only those, the rest NaN).
    ``mapper`` runs the heads (``training.distributed.map_sharded``: shared out over processes;
    None on every process but the first)."""
    if mode not in MODES:
        raise ValueError(f"ablation is 'zero' or 'mean', not {mode!r}")
    if not prepared:
        raise ValueError("no inputs to measure the loss on")
    network = model.network()
    longest = max(model.forward_positions(p) for p in prepared)
    check_fits(
        forward_bytes(network, longest),
        f"the model's forward over an input of {longest:,} tokens",
        "give shorter inputs (--probe-tokens)",
        _device(network),
    )
    modules = attention_modules(model, prepared[0])
    measured = measure(model, prepared)
    means = head_means(model, prepared, measured) if mode == "mean" else None
    with torch.no_grad():
        base = measured.mean()
    chosen = heads if heads is not None else [(k, li, h) for (k, li), (_, n) in modules.items() for h in range(n)]
    for at in chosen:
        removing(modules, [at])  # every head named exists

    def ablated(at: Head) -> float:
        with torch.no_grad(), gating(removing(modules, [at]), means):
            return measured.mean() - base

    found = mapper(list(chosen), ablated)
    if found is None:
        return None
    out = _grids(modules, np.nan)
    for (kind, layer, head), effect in zip(chosen, found):
        out[kind][layer, head] = effect
    return measured, base, out


def _table(network: torch.nn.Module) -> tuple[int, int, int]:
    """The model's largest matrix, its token table: (its rows V, its width d, the parameters outside it)."""
    tables = [p for p in network.parameters() if p.dim() == 2]
    if not tables:
        return 0, 0, 0
    table = max(tables, key=lambda p: p.numel())
    rest = sum(p.numel() for p in network.parameters()) - table.numel()
    return max(table.shape), min(table.shape), rest


def _device(network: torch.nn.Module) -> torch.device:
    return next(network.parameters()).device


def forward_bytes(network: torch.nn.Module, tokens: int) -> int:
    """About the memory one input's forward without gradients holds, from the model's shape: per
    token its output scores and their log-softmax (2 V, float32) and the widest activations one
    layer holds at a time (about 16 d: queries, keys, values, the feed-forward's 4 d and its
    gates); no layer's activations outlive the next layer. The ablation measure runs this
    forward once per head. On a model of SmolLM2-135M's shape it is 430 kB a token; a head's
    ablation peaked at 393 (benchmarks/atlas_scale.py, 4,033 tokens)."""
    vocab, width, _ = _table(network)
    return 4 * tokens * (2 * vocab + 16 * width)


def gradient_bytes(network: torch.nn.Module, tokens: int) -> int:
    """About the memory one input's gradient pass holds, from the model's shape alone: per token,
    its output scores three times over (scores, log-softmax, their gradient: 3 V for a table of V
    tokens of width d) and about 24 activations of width d a layer, a layer holding about 12 d^2
    parameters: 2 P / d for the P parameters outside the table (float32). On a model of
    SmolLM2-135M's shape it is 2.07 MB a token; the pass took 2.0 (benchmarks/atlas_scale.py)."""
    vocab, width, rest = _table(network)
    return 4 * tokens * (3 * vocab + 2 * rest // max(1, width))


def head_importance(
    model: Any, prepared: list[Prepared], *, mapper: Mapper = _each, measured: Measure | None = None
) -> dict[str, np.ndarray] | None:
    """Michel et al.'s importance of every head, I_h = mean over the inputs x of | d L(x) / d xi_h |
    at xi = 1, L(x) the model's measure on x (``measure``: the mean negative log-likelihood of its
    output tokens, or the share of an encoder's sentence vector lost); per kind (layers, heads).
    The model's own parameters get no gradient. ``mapper`` runs the inputs (as in
    ``ablation_effects``); ``measured``: the model's measure on them, when it is at hand."""
    if not prepared:
        raise ValueError("no inputs to measure the loss on")
    longest = max(model.forward_positions(p) for p in prepared)
    check_fits(
        gradient_bytes(model.network(), longest),
        f"the importance gradient of an input of {longest:,} tokens",
        "give shorter inputs (--probe-tokens), or fewer at once",
        _device(model.network()),
    )
    modules = attention_modules(model, prepared[0])
    measured = measured or measure(model, prepared)

    def gradients(index: int) -> dict[tuple[str, int], np.ndarray]:
        gates = {m: torch.ones(n, requires_grad=True) for m, n in modules.values()}
        with gating(gates):
            value, count = measured.terms[index]()
            order = list(modules)
            grads = torch.autograd.grad(value / count, [gates[modules[k][0]] for k in order], allow_unused=True)
        return {k: (np.zeros(modules[k][1]) if g is None else g.abs().numpy()) for k, g in zip(order, grads)}

    found = mapper(list(range(len(prepared))), gradients)
    if found is None:
        return None
    out = _grids(modules, 0.0)
    for (kind, layer), (_, n) in modules.items():
        out[kind][layer, :n] = sum(g[kind, layer] for g in found) / len(prepared)
    return out


def bleu_drops(
    model: Any,
    prepared: list[Prepared],
    references: list[str],
    mode: str = "zero",
    heads: list[Head] | None = None,
    *,
    beam: int = 5,
    mapper: Mapper = _each,
) -> tuple[float, dict[str, np.ndarray]] | None:
    """A translator's BLEU (sacrebleu, 13a, cased) on the sources of ``prepared`` against
    ``references``, translated with every head, and per kind (layers, heads) how far it falls with
    each head ablated alone (beam ``beam``): (BLEU, drops), None on the processes but the first
    (``mapper`` as in ``ablation_effects``)."""
    from ..evaluation.metrics import bleu

    if "translate" not in model.capabilities.verbs:
        raise ValueError(f"{model.name} is {model.capabilities.a}: BLEU scores a translator's translations")
    if len(references) != len(prepared):
        raise ValueError(f"{len(prepared)} sentences but {len(references)} references")
    modules = attention_modules(model, prepared[0])
    means = head_means(model, prepared) if mode == "mean" else None
    sources = [p.source for p in prepared]

    def score(gates: dict) -> float:
        with torch.no_grad(), gating(gates, means):
            return bleu(list(model.translate(sources, beam=beam)), references).score

    base = score({})
    chosen = heads if heads is not None else [(k, li, h) for (k, li), (_, n) in modules.items() for h in range(n)]
    found = mapper(list(chosen), lambda at: base - score(removing(modules, [at])))
    if found is None:
        return None
    out = _grids(modules, np.nan)
    for (kind, layer, head), drop in zip(chosen, found):
        out[kind][layer, head] = drop
    return base, out

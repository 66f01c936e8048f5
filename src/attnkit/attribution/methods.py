"""The methods by name, over a captured record (and, for value-norm, the model that made it):
what `attnkit attribute` runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np

from ..attention.multihead import MultiHeadAttention
from ..inspection.capture import AttentionRecord, Prepared
from ..inspection.explain import forward_calls
from ..models.interface import EncoderModel, Seq2SeqModel
from .flow import attention_flow
from .rollout import raw_attention, rollout
from .value_norm import layer_value_norms, value_norm_scores

# name -> (self-attention maps (layers, heads, s, s) -> (s, s) scores), what it is
METHODS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "attention": (raw_attention, "raw attention, last layer, mean of heads"),
    "rollout": (rollout, "attention rollout"),
    "flow": (attention_flow, "attention flow"),
}
# methods that need the model itself, not only its maps
MODEL_METHODS = {"value-norm": "value-norm ‖Σ_h a f(x)‖, last layer"}
ALL_METHODS = [*METHODS, *MODEL_METHODS]
LABELS = {**{name: label for name, (_, label) in METHODS.items()}, **MODEL_METHODS}  # what a figure calls each


def encoder_value_norms(model: Seq2SeqModel | EncoderModel, prepared: Prepared) -> np.ndarray:
    """(layers, s, s): || sum_h a^h_ij f^h(x_j) || of every encoder self-attention layer
    (``value_norm``), from one forward pass over ``prepared``."""
    sites = [site for site in model.attention_sites() if site.kind == "encoder"]
    if not sites or not all(isinstance(site.module, MultiHeadAttention) for site in sites):
        raise ValueError("value-norm follows a stack of multi-head self-attention layers; this model has none")
    calls = forward_calls(model, prepared, [site.module for site in sites])
    layers = []
    for site, [(args, kwargs, output)] in zip(sites, calls):
        value = args[2] if len(args) > 2 else kwargs["value"]
        vectors = cast(MultiHeadAttention, site.module).value_vectors(value)[0]  # (h, s, d_model)
        _, combined = layer_value_norms(output.weights[0].float(), vectors.float())
        layers.append(combined.detach().cpu().numpy())
    return np.stack(layers)


def attribute(
    record: AttentionRecord, methods: list[str], *, value_norms: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """{method: (top-layer positions, input tokens) scores} of ``record``'s encoder self-attention;
    value-norm takes the model's (layers, s, s) ``value_norms`` (``LoadedModel.value_norms``)."""
    if "encoder" not in record.maps:
        raise ValueError(
            "this model has no encoder self-attention (an RNN's encoder is recurrent): rollout and flow "
            "follow a stack of self-attention layers"
        )
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r} (valid: {', '.join(ALL_METHODS)})")
    maps = record.maps["encoder"].astype(np.float32)
    out = {m: METHODS[m][0](maps) for m in methods if m in METHODS}
    if "value-norm" in methods:
        if value_norms is None:
            raise ValueError("value-norm needs the model's value vectors: give a model, not a saved .npz")
        out["value-norm"] = value_norm_scores(value_norms)
    return {m: out[m] for m in methods}

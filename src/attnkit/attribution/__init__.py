"""Beyond raw attention: what a model's output draws on, by methods that correct raw attention
(rollout, flow, value-norm) and by its gradients (gradient-weighted attention, integrated
gradients, input x gradient), one method per module, each citing its paper with its formula.

Every method gives a (rows, input tokens) score matrix, each row summing to 1: rows are a
translator's output tokens (or a decoder-only model's next tokens), or an encoder's top-layer
positions (``methods`` says which method reads which side). Rollout and flow take attention maps
as ``capture`` records them, (layers, heads, queries, keys) per kind; value-norm also takes the
model's value vectors, the gradient methods a ``Scorer`` (the model ready for gradients).
"""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .flow import attention_flow
    from .gradients import (
        GRADIENT_METHODS,
        Scorer,
        gradient_attention,
        input_x_gradient,
        integrated_gradients,
        relevance,
    )
    from .methods import (
        METHODS,
        SIDES,
        Attribution,
        applicable,
        attribute,
        attribute_caption,
        attribute_model,
        encoder_value_norms,
        sides,
        value_norms_of,
    )
    from .names import ALL_METHODS, CAPTION_METHODS, LABELS, MODEL_METHODS
    from .rollout import raw_attention, residual_attention, rollout
    from .value_norm import layer_value_norms, value_norm_scores

exports(
    __name__,
    {
        "flow": ("attention_flow",),
        "gradients": (
            "GRADIENT_METHODS",
            "Scorer",
            "gradient_attention",
            "input_x_gradient",
            "integrated_gradients",
            "relevance",
        ),
        "methods": (
            "METHODS",
            "SIDES",
            "Attribution",
            "applicable",
            "attribute",
            "attribute_caption",
            "attribute_model",
            "encoder_value_norms",
            "sides",
            "value_norms_of",
        ),
        "names": ("ALL_METHODS", "CAPTION_METHODS", "LABELS", "MODEL_METHODS"),
        "rollout": ("raw_attention", "residual_attention", "rollout"),
        "value_norm": ("layer_value_norms", "value_norm_scores"),
    },
)

__all__ = [
    "ALL_METHODS",
    "CAPTION_METHODS",
    "GRADIENT_METHODS",
    "LABELS",
    "METHODS",
    "MODEL_METHODS",
    "SIDES",
    "Attribution",
    "Scorer",
    "applicable",
    "attention_flow",
    "attribute",
    "attribute_caption",
    "attribute_model",
    "encoder_value_norms",
    "gradient_attention",
    "input_x_gradient",
    "integrated_gradients",
    "layer_value_norms",
    "raw_attention",
    "relevance",
    "residual_attention",
    "rollout",
    "sides",
    "value_norm_scores",
    "value_norms_of",
]

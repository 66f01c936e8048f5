"""Beyond raw attention: what a model's output draws on, by methods that correct raw attention
(rollout, flow, value-norm), one method per module, each citing its paper with its formula.

Every method returns a (queries at the top, input positions) score matrix; rollout and flow
take attention maps as ``capture`` records them, (layers, heads, queries, keys) per kind;
value-norm also takes the model, for its value vectors.
"""

from .flow import attention_flow
from .methods import ALL_METHODS, LABELS, METHODS, MODEL_METHODS, attribute, encoder_value_norms
from .rollout import raw_attention, residual_attention, rollout
from .value_norm import layer_value_norms, value_norm_scores

__all__ = [
    "ALL_METHODS",
    "LABELS",
    "METHODS",
    "MODEL_METHODS",
    "attention_flow",
    "attribute",
    "encoder_value_norms",
    "layer_value_norms",
    "raw_attention",
    "residual_attention",
    "rollout",
    "value_norm_scores",
]

"""Beyond raw attention: what a model's output draws on, by methods that correct raw attention
(rollout, flow), one method per module, each citing its paper with its formula.

Every method takes attention maps as ``capture`` records them, (layers, heads, queries, keys)
per kind, and returns a (queries at the top, input positions) score matrix.
"""

from .flow import attention_flow
from .methods import METHODS, attribute
from .rollout import raw_attention, residual_attention, rollout

__all__ = ["METHODS", "attention_flow", "attribute", "raw_attention", "residual_attention", "rollout"]

"""What models return, shared by the RNN and the Transformer so search and
visualisation rely on nothing else.

Attention maps (only when asked):
    encoder: per encoder layer (b, h, s, s)
    decoder: per decoder layer (b, h, t, t) self-attention
    cross:   per decoder layer (b, h, t, s); an RNN has one "layer" with h = 1
    p_t:     (b, t) local attention window centres (RNN local-m / local-p)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass(slots=True)
class AttentionMaps:
    encoder: list[Tensor] = field(default_factory=list)
    decoder: list[Tensor] = field(default_factory=list)
    cross: list[Tensor] = field(default_factory=list)
    p_t: Tensor | None = None


@dataclass(slots=True)
class EncoderOutput:
    """memory (b, s, d) encoder states; mask (b, s) True on real tokens;
    final: a recurrent encoder's last state per layer, which starts the decoder."""

    memory: Tensor
    mask: Tensor
    attention: AttentionMaps | None = None
    final: Tensor | tuple[Tensor, Tensor] | None = None


@dataclass(slots=True)
class DecoderOutput:
    """logits (b, t, V) for the next tokens; attention when asked.

    hidden (b, t, d): the features the output layer (``model.output``, a Linear
    without bias) projects to the logits. With ``project=False`` a model returns
    only these (logits None), so the training loss can fuse the projection."""

    logits: Tensor | None
    attention: AttentionMaps | None = None
    hidden: Tensor | None = None

"""What models return, shared by the RNN and the Transformer so search and
visualisation rely on nothing else. Attention is not returned: every attention call is
heard at its site (``attnkit.attention.sites``)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass(slots=True)
class EncoderOutput:
    """memory (b, s, d) encoder states; mask (b, s) True on real tokens;
    final: a recurrent encoder's last state per layer, which starts the decoder."""

    memory: Tensor
    mask: Tensor
    final: Tensor | tuple[Tensor, Tensor] | None = None


@dataclass(slots=True)
class DecoderOutput:
    """logits (b, t, V) for the next tokens.

    hidden (b, t, d): the features the output layer (``model.output``, a Linear
    without bias) projects to the logits. With ``project=False`` a model returns
    only these (logits None), so the training loss can fuse the projection."""

    logits: Tensor | None
    hidden: Tensor | None = None

"""What a notebook's forward pass over named sites returns (``LoadedModel.run`` and ``cache``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from ..attention.record import AttentionCall
from ..errors import unknown_choice
from ..inspection.capture import Prepared


@dataclass
class Run:
    """One forward pass over one input.

    prepared     the input as it ran (ids, tokens, the output side it was given)
    tokens       the positions of ``logits``' rows: the decoder's input (an encoder-decoder, a
                 decoder-only model: row i scores the token after tokens[i]) or the input (an encoder)
    logits       (1, t, V) (a transformers model with a classifier head: its (1, labels)), or None
                 for an encoder
    output       an encoder's last layer (1, s, d), or None
    activations  ``cache``: {site name: tensor} as each site left it (batch first)
    calls        ``cache``: {attention site name: AttentionCall}, every weight exact from it
                 (``attnkit.attention.record.MapView``) and no map formed until asked

    ``run["blocks.3.resid_post"]`` reads either."""

    prepared: Prepared
    tokens: list[str]
    logits: Tensor | None = None
    output: Tensor | None = None
    activations: dict[str, Tensor] = field(default_factory=dict)
    calls: dict[str, AttentionCall] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Tensor | AttentionCall:
        if name in self.activations:
            return self.activations[name]
        if name in self.calls:
            return self.calls[name]
        raise KeyError(str(unknown_choice("cached site", name, [*self.activations, *self.calls])))

    def __contains__(self, name: object) -> bool:
        return name in self.activations or name in self.calls

    def keys(self) -> list[str]:
        return [*self.activations, *self.calls]

"""What a loaded model can do (``Capabilities``): what the commands, the studio and its page ask
of a model instead of its class."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ..attribution.gradients import GRADIENT_METHODS
from ..models.interface import ATTENTION_KINDS

if TYPE_CHECKING:
    pass


DEFAULT_NEW_TOKENS = 20  # a decoder-only model's continuation, unless asked otherwise
# longer inputs keep their record's q and k in float16: half the memory, and one more fused pass
# for the log-sum-exp of the rounded q and k (so that every row still sums to 1)
COMPACT_FROM = 32_768
GRADIENT_NAMES = tuple(GRADIENT_METHODS)


@dataclass(frozen=True)
class Capabilities:
    """What a loaded model can do: what the CLI, the studio and its page ask of a model instead
    of its class.

    reads          "text", "image" or "audio" (a WAV file): what a user gives it
    writes         what it adds to its input: "translation" (an output searched from the source,
                   or forced with a target), "continuation" (the prompt continued), "caption"
                   (words for an image; forced with a target too), or None (an encoder)
    kinds          its attention kinds (encoder, decoder, cross)
    verbs          what it does beyond attention() and show(): translate, generate, encode, caption,
                   transcribe
    attributions   the methods ``attribute`` runs on it (``attnkit.attribution``)
    walkthrough    the Q/K/V (or Luong) walk-through of one head and query
    contextual     its tokens' vectors at every depth (``attnkit embed``, the studio's embed tab)
    positions      position tables drawn from its own weights (``attnkit positions --model``)
    circuits       its residual stream is named layer by layer and read into token logits: the
                   causal analyses of ``attnkit.circuits`` (patching, paths, logit attribution,
                   QK and OV) run on it
    images         an image may go beside its text (a vision-language model: ``prepare_image``
                   with the text about it), its decoder attending over the image's tokens
    """

    reads: str
    writes: str | None
    kinds: tuple[str, ...]
    verbs: tuple[str, ...] = ()
    attributions: tuple[str, ...] = ()
    walkthrough: bool = True
    contextual: bool = False
    positions: bool = False
    circuits: bool = False
    images: bool = False

    @property
    def forced(self) -> bool:
        """Whether a given output (``target``) can be scored instead of the model's own."""
        return self.writes in ("translation", "caption")

    @property
    def continues(self) -> bool:
        """A decoder-only model: it continues its input, its self-attention over its own output."""
        return self.writes == "continuation"

    @property
    def by_side(self) -> dict[str, tuple[str, ...]]:
        """The methods ``attribute`` runs on each side of the model it explains, the default side
        first: of ``attributions``, those that explain that side (flow is for self-attention: an
        encoder-decoder's encoder side, not its output)."""
        from ..attribution.methods import applicable_to, sides_of

        sides = sides_of(self.kinds, decoder_only=self.continues)
        return {
            side: tuple(
                m
                for m in applicable_to(self.kinds, side, with_model=True, decoder_only=self.continues)
                if m in self.attributions
            )
            for side in sides
        }

    @property
    def summary(self) -> str:
        """What the model is, in a few words: "encoder-decoder", "decoder-only model", "text
        encoder", "image encoder", "captioner"."""
        if self.writes is None:
            return f"{self.reads} encoder"
        if self.images:
            return "vision-language model"
        if self.reads == "audio":
            return "speech encoder-decoder"
        return {"translation": "encoder-decoder", "continuation": "decoder-only model", "caption": "captioner"}[
            self.writes
        ]

    @property
    def a(self) -> str:
        """``summary`` with its article, for a sentence: "an encoder-decoder"."""
        return ("an " if self.summary[0] in "aeiou" else "a ") + self.summary

    def as_json(self) -> dict:
        fields = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        return {**fields, "forced": self.forced, "summary": self.summary}


def kinds_in(have: set[str]) -> tuple[str, ...]:
    return tuple(k for k in ATTENTION_KINDS if k in have)


MAP_METHODS = ("attention", "rollout", "flow")  # from the maps alone (rollout and flow: self-attention)

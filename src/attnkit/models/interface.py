"""The model interface: what search, training, capture and explain may use of a model.

Nothing outside ``models/`` touches a model's layers; it goes through these
protocols. A new architecture (an image encoder, a decoder-only model) plugs in
by implementing them, and a test checks that every built-in model does.

    Seq2SeqModel   encode -> init_state -> decode_step ... ; forward (teacher forcing);
                   output_projection (the Linear from features to logits);
                   sites (every named place: attention calls, head outputs, the residual
                   stream); attention_sites (every attention module, with its kind and layer);
                   position_schemes (its positional modules)
    DecodingState  expand(k) for beam search, reorder(index) for surviving rows
    ImageCaptioner a Seq2SeqModel over image regions; region_grid (rows, columns of regions)
    (both)         input_embedding (the module giving the source's input vectors)
    EncoderModel   encode; hidden_states (every layer's output); token_vectors
                   (the static embedding table's rows); attention_sites; position_schemes

Every model is an ``nn.Module``; of its methods, Seq2SeqModel and EncoderModel name the
two the rest of attnkit calls: parameters() (to find the model's device) and eval().

Shapes as in ``attnkit.attention``: b batch, s source, t target, d width, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, TypeVar, runtime_checkable

from torch import Tensor, nn

from ..attention.sites import Site
from .outputs import DecoderOutput, EncoderOutput

ATTENTION_KINDS = ("encoder", "decoder", "cross")
KIND_LABELS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}


# One attention module of a model (``attention.sites.Site``): its name, ``kind`` (encoder,
# decoder or cross), its layer index, heads, and the module (``MultiHeadAttention``, or an RNN's
# Luong attention).
AttentionSite = Site


def find_site(model: Seq2SeqModel | EncoderModel, kind: str, layer: int) -> AttentionSite:
    """The attention module of ``kind`` in ``layer`` (negative counts from the top),
    or a ValueError naming what the model has."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; choose from {', '.join(ATTENTION_KINDS)}")
    sites = [s for s in model.attention_sites() if s.kind == kind]
    if not sites:
        have = sorted({s.kind for s in model.attention_sites()}, key=ATTENTION_KINDS.index)
        raise ValueError(
            f"this model ({type(model).__name__}) has no {KIND_LABELS[kind]} (it has: {', '.join(have) or 'none'})"
        )
    if not -len(sites) <= layer < len(sites):
        raise ValueError(
            f"layer {layer} out of range: the {KIND_LABELS[kind]} has {len(sites)} layer(s) (0..{len(sites) - 1})"
        )
    return sites[layer]


class SourceEncoder(Protocol):
    """What a recurrent encoder-decoder reads its source with (``rnn.RNNEncoder``; a captioner's
    ``image.ImageRNNEncoder``): its layers, (memory (b, s, h), the final states) of a source, and
    the module its input enters by."""

    layers: int

    def __call__(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Any]: ...

    def input_module(self) -> nn.Module: ...


class SourceEmbedding(Protocol):
    """What a Transformer embeds its source with (``transformer.TokenEmbedding``; a captioner's
    ``image.RegionEmbedding``): (b, s, d_model) vectors of a source, its positional scheme, and
    the module its input enters by."""

    @property
    def positions(self) -> nn.Module | None: ...

    def __call__(self, src: Tensor) -> Tensor: ...

    def input_module(self) -> nn.Module: ...


@runtime_checkable
class DecodingState(Protocol):
    """Incremental decoding state of a batch of rows (one row per hypothesis)."""

    def expand(self, k: int) -> None:
        """Decode k rows (beam hypotheses) per current row, each run of k rows consecutive."""
        ...

    def reorder(self, index: Tensor, same_sources: bool = False) -> None:
        """Keep rows ``index`` (in that order). ``same_sources``: every kept row decodes
        the same source sentence as the row it replaces, so the encoder side is unchanged."""
        ...


# A model's own decoding state: what its init_state returns and its decode_step takes. A bare
# ``Seq2SeqModel`` (any state) is what search, training, capture and explain accept.
StateT = TypeVar("StateT", bound=DecodingState)


@runtime_checkable
class Seq2SeqModel(Protocol[StateT]):
    """An encoder-decoder: source tokens in, next-token features and logits out."""

    @property
    def output_projection(self) -> nn.Linear:
        """The output layer: features (…, d) -> logits (…, V). Search scores only the
        rows it needs with it; the training loss fuses it into the loss."""
        ...

    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOutput:
        """src (b, s) token ids, src_mask (b, s) True on real tokens."""
        ...

    def init_state(self, encoder_out: EncoderOutput) -> StateT: ...

    def decode_step(self, state: StateT, prev_tokens: Tensor, project: bool = True) -> DecoderOutput:
        """Feed target tokens (b, n) after the state's prefix; ``project=False``: features only."""
        ...

    def __call__(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, project: bool = True) -> DecoderOutput:
        """Teacher forcing over every target position at once."""
        ...

    def sites(self) -> list[Site]:
        """Every named site (``attention.sites``), in the order a forward pass reaches them."""
        ...

    def attention_sites(self) -> list[AttentionSite]:
        """Every attention module, encoder layers first, then decoder self- and cross-attention."""
        ...

    def input_embedding(self) -> nn.Module:
        """The module whose output is the source's input vectors, one per token or image region,
        before positions: (b, s, d), or an image's (b, d, rows, columns). Gradient attributions
        (``attnkit.attribution``) attribute to it."""
        ...

    def position_schemes(self) -> list[nn.Module]:
        """The positional modules (``attnkit.positions``), each once, encoder side first."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...  # nn.Module's

    def eval(self) -> nn.Module: ...  # nn.Module's


@runtime_checkable
class ImageCaptioner(Seq2SeqModel[StateT], Protocol):
    """A Seq2SeqModel whose source is an image: ``encode(images (b, H, W), pixel_mask (b, H, W))``,
    its memory one row per image region, row-major over the region grid."""

    def region_grid(self, height: int, width: int) -> tuple[int, int]:
        """(rows, columns) of regions of a height x width image."""
        ...


@runtime_checkable
class EncoderModel(Protocol):
    """An encoder alone (BERT-style): contextual vectors for every token."""

    def encode(self, tokens: Tensor, mask: Tensor) -> EncoderOutput: ...

    def hidden_states(self, tokens: Tensor, mask: Tensor, *, use_positions: bool = True) -> list[Tensor]:
        """Every layer's output, the embedding layer's first ((layers + 1) x (b, s, d)).
        ``use_positions=False`` leaves the position embeddings out (to show what attention does
        without them)."""
        ...

    def token_vectors(self, tokens: Tensor) -> Tensor:
        """The static embedding table's rows for ``tokens`` (…, d): no position, no context."""
        ...

    def sites(self) -> list[Site]: ...

    def attention_sites(self) -> list[AttentionSite]: ...

    def input_embedding(self) -> nn.Module:
        """The token table whose output (b, s, d) gradient attributions attribute to."""
        ...

    def position_schemes(self) -> list[nn.Module]: ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...  # nn.Module's

    def eval(self) -> nn.Module: ...  # nn.Module's

"""Attention models: RNN encoder-decoder (Luong), Transformer encoder-decoder, BERT-style encoder.

Every model satisfies a protocol of ``interface.py``: a ``Seq2SeqModel`` (encode,
init_state, decode_step, forward, output_projection, attention_sites) with its
``DecodingState`` (expand, reorder), or an ``EncoderModel``. Search, training,
capture and explain use models through these protocols only.
"""

from ..config import ARCHS
from .factory import build_model
from .interface import (
    ATTENTION_KINDS,
    KIND_LABELS,
    AttentionSite,
    DecodingState,
    EncoderModel,
    ImageCaptioner,
    Seq2SeqModel,
    find_site,
)
from .outputs import DecoderOutput, EncoderOutput
from .rnn import RNNEncoder, RNNSeq2Seq, RNNState
from .transformer import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    TokenEmbedding,
    TransformerEncoder,
    TransformerEncoderModel,
    TransformerSeq2Seq,
    TransformerState,
)

__all__ = [
    "ARCHS",
    "ATTENTION_KINDS",
    "KIND_LABELS",
    "AttentionSite",
    "DecoderLayer",
    "DecoderOutput",
    "DecodingState",
    "EncoderLayer",
    "EncoderModel",
    "EncoderOutput",
    "FeedForward",
    "ImageCaptioner",
    "RNNEncoder",
    "RNNSeq2Seq",
    "RNNState",
    "Seq2SeqModel",
    "TokenEmbedding",
    "TransformerEncoder",
    "TransformerEncoderModel",
    "TransformerSeq2Seq",
    "TransformerState",
    "build_model",
    "find_site",
]

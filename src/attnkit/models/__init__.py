"""Attention models: RNN encoder-decoder (Luong), Transformer encoder-decoder, BERT-style encoder.

Every seq2seq model exposes ``encode(src, src_mask)``, ``init_state(encoder_out)``,
``decode_step(state, prev_tokens)`` and ``forward(src, src_mask, tgt_in)``, each
returning attention maps when ``need_weights=True``, and a decoding state with
``expand(k)`` (k beam hypotheses per sentence) and ``reorder(index)``; search and
visualisation rely on nothing else.
"""

from .factory import ARCHS, build_model
from .outputs import AttentionMaps, DecoderOutput, EncoderOutput
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
    "AttentionMaps",
    "DecoderLayer",
    "DecoderOutput",
    "EncoderLayer",
    "EncoderOutput",
    "FeedForward",
    "RNNEncoder",
    "RNNSeq2Seq",
    "RNNState",
    "TokenEmbedding",
    "TransformerEncoder",
    "TransformerEncoderModel",
    "TransformerSeq2Seq",
    "TransformerState",
    "build_model",
]

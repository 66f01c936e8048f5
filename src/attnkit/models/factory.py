"""The one place a model config becomes a model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from torch import nn

from ..attention import build_recurrent_attention
from ..config import ModelConfig, check_captioner, check_model, check_tied_embeddings
from ..positions import AbsolutePositions, AttentionPositions, build_positions
from ..positions.grid import build_grid_positions
from .image import (
    ConvRegions,
    ImageRNNEncoder,
    PatchRegions,
    RegionEmbedding,
    RNNCaptioner,
    TransformerCaptioner,
)
from .rnn import RNNEncoder, RNNSeq2Seq
from .transformer import (
    DecoderLayer,
    EncoderLayer,
    TokenEmbedding,
    TransformerEncoder,
    TransformerEncoderModel,
    TransformerSeq2Seq,
)


def _embedding(vocab: int, dim: int, pad_id: int) -> nn.Embedding:
    emb = nn.Embedding(vocab, dim, padding_idx=pad_id)
    nn.init.normal_(emb.weight, std=dim**-0.5)
    nn.init.zeros_(emb.weight[pad_id]) if pad_id >= 0 else None
    return emb


def _positions(cfg: ModelConfig, *, causal: bool) -> AbsolutePositions | AttentionPositions | None:
    return build_positions(
        cfg.positions, d_model=cfg.d_model, num_heads=cfg.transformer.heads, max_len=cfg.max_positions, causal=causal
    )


def _attention_positions(cfg: ModelConfig, count: int, *, causal: bool) -> Sequence[AttentionPositions | None]:
    """One scheme per layer for Shaw's relative positions (learned per layer in the paper);
    one shared by all layers for the others (T5 shares its bias table; RoPE and ALiBi have no parameters)."""
    first = _positions(cfg, causal=causal)
    if not isinstance(first, AttentionPositions):
        return [None] * count
    if cfg.positions == "relative":
        return [first] + [cast(AttentionPositions, _positions(cfg, causal=causal)) for _ in range(count - 1)]
    return [first] * count


def _encoder(cfg: ModelConfig) -> TransformerEncoder:
    layers = [
        EncoderLayer(
            cfg.d_model,
            cfg.transformer.heads,
            cfg.transformer.ffn,
            dropout=cfg.dropout,
            attention_dropout=cfg.transformer.attention_dropout,
            activation_dropout=cfg.transformer.activation_dropout,
            norm_first=cfg.transformer.norm_first,
            positions=p,
        )
        for p in _attention_positions(cfg, cfg.encoder_layers, causal=False)
    ]
    return TransformerEncoder(layers, d_model=cfg.d_model, norm_first=cfg.transformer.norm_first)


def _token_embedding(cfg: ModelConfig, embedding: nn.Embedding, *, causal: bool) -> TokenEmbedding:
    absolute = _positions(cfg, causal=causal)
    return TokenEmbedding(
        embedding, positions=absolute if isinstance(absolute, AbsolutePositions) else None, dropout=cfg.dropout
    )


def build_model(
    cfg: ModelConfig, *, src_vocab: int, tgt_vocab: int, pad_id: int, shared_vocab: bool
) -> TransformerSeq2Seq | RNNSeq2Seq | TransformerEncoderModel:
    """Build the model ``cfg.arch`` names (its keys checked by ``config.check_model``);
    ``shared_vocab`` allows tying source and target embeddings."""
    check_model(cfg)
    check_tied_embeddings(cfg, shared_vocab=shared_vocab)
    if cfg.multihead:
        src_emb = _embedding(src_vocab, cfg.d_model, pad_id)
        if cfg.arch == "encoder":
            return TransformerEncoderModel(embed=_token_embedding(cfg, src_emb, causal=False), encoder=_encoder(cfg))
        tgt_emb = src_emb if cfg.tie_embeddings else _embedding(tgt_vocab, cfg.d_model, pad_id)
        decoder_layers = [
            DecoderLayer(
                cfg.d_model,
                cfg.transformer.heads,
                cfg.transformer.ffn,
                dropout=cfg.dropout,
                attention_dropout=cfg.transformer.attention_dropout,
                activation_dropout=cfg.transformer.activation_dropout,
                norm_first=cfg.transformer.norm_first,
                positions=p,
            )
            for p in _attention_positions(cfg, cfg.decoder_layers, causal=True)
        ]
        return TransformerSeq2Seq(
            src_embed=_token_embedding(cfg, src_emb, causal=False),
            tgt_embed=_token_embedding(cfg, tgt_emb, causal=True),
            encoder=_encoder(cfg),
            decoder_layers=decoder_layers,
            d_model=cfg.d_model,
            vocab_size=tgt_vocab,
            norm_first=cfg.transformer.norm_first,
            tie_output=cfg.tie_embeddings,
        )

    src_emb = _embedding(src_vocab, cfg.d_model, pad_id)
    tgt_emb = src_emb if cfg.tie_embeddings else _embedding(tgt_vocab, cfg.d_model, pad_id)
    decoder = _rnn_decoder(cfg, tgt_emb, tgt_vocab)  # before the encoder: the order parameters are drawn in
    return RNNSeq2Seq(
        encoder=RNNEncoder(
            src_emb, cell=cfg.rnn.cell, hidden=cfg.rnn.hidden, layers=cfg.encoder_layers, dropout=cfg.dropout
        ),
        **decoder,
    )


def _rnn_decoder(cfg: ModelConfig, tgt_emb: nn.Embedding, vocab: int) -> dict:
    """The RNN decoder's keyword arguments (``RNNSeq2Seq`` and ``RNNCaptioner``): Luong attention and the cell."""
    attention = build_recurrent_attention(
        cfg.rnn.attention,
        query_dim=cfg.rnn.hidden,
        key_dim=cfg.rnn.hidden,
        score=cfg.rnn.score,
        window=cfg.rnn.window,
        dropout=cfg.transformer.attention_dropout,
    )
    return dict(
        tgt_embedding=tgt_emb,
        attention=attention,
        cell=cfg.rnn.cell,
        hidden=cfg.rnn.hidden,
        layers=cfg.decoder_layers,
        vocab_size=vocab,
        dropout=cfg.dropout,
        input_feeding=cfg.rnn.input_feeding,
        init_hidden=cfg.rnn.init_hidden,
        tie_output=cfg.tie_embeddings and cfg.d_model == cfg.rnn.hidden,
    )


def _region_embedding(cfg: ModelConfig, width: int, image_size: int) -> RegionEmbedding:
    regions = (
        ConvRegions(width, region=cfg.image.region)
        if cfg.image.encoder == "cnn"
        else PatchRegions(width, region=cfg.image.region)
    )
    positions = build_grid_positions(cfg.positions, d_model=width, max_grid=image_size // cfg.image.region)
    return RegionEmbedding(regions, positions=positions, dropout=cfg.dropout)


def build_captioner(
    cfg: ModelConfig, *, vocab: int, pad_id: int, image_size: int
) -> RNNCaptioner | TransformerCaptioner:
    """An image encoder (``cfg.image.encoder``) with the decoder of ``cfg.arch``, for
    square images of ``image_size`` pixels; ``model.positions`` is the regions' 2-D scheme
    (and the Transformer decoder's 1-D one)."""
    check_model(cfg)
    check_captioner(cfg)
    tgt_emb = _embedding(vocab, cfg.d_model, pad_id)
    if cfg.arch == "transformer":
        embed = _region_embedding(cfg, cfg.d_model, image_size)
        encoder = (
            _encoder(cfg)
            if cfg.image.encoder == "vit"
            else TransformerEncoder([], d_model=cfg.d_model, norm_first=cfg.transformer.norm_first)
        )
        return TransformerCaptioner(
            src_embed=embed,
            tgt_embed=_token_embedding(cfg, tgt_emb, causal=True),
            encoder=encoder,
            decoder_layers=[
                DecoderLayer(
                    cfg.d_model,
                    cfg.transformer.heads,
                    cfg.transformer.ffn,
                    dropout=cfg.dropout,
                    attention_dropout=cfg.transformer.attention_dropout,
                    activation_dropout=cfg.transformer.activation_dropout,
                    norm_first=cfg.transformer.norm_first,
                )
                for _ in range(cfg.decoder_layers)
            ],
            d_model=cfg.d_model,
            vocab_size=vocab,
            norm_first=cfg.transformer.norm_first,
            tie_output=cfg.tie_embeddings,
        )
    embed = _region_embedding(cfg, cfg.rnn.hidden, image_size)
    return RNNCaptioner(
        encoder=ImageRNNEncoder(embed, cell=cfg.rnn.cell, hidden=cfg.rnn.hidden, layers=cfg.decoder_layers),
        **_rnn_decoder(cfg, tgt_emb, vocab),
    )

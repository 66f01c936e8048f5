"""Vaswani et al. 2017: the Transformer encoder-decoder, and the encoder alone (BERT-style).

    src tokens -> embeddings (* sqrt(d_model)) + absolute positions -> N x EncoderLayer -> memory
    tgt tokens -> embeddings + positions -> N x DecoderLayer(self-attn, cross-attn to memory) -> logits

Layers are pre-norm (x + f(LN(x)), a final LayerNorm per stack) or post-norm
(LN(x + f(x)), as in the paper). Positional schemes that act inside attention
(relative, t5, rope, alibi) are passed to the self-attention of every layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import KVCache, MultiHeadAttention, sites
from ..attention.sites import Site, attention_site, layer_sites
from ..positions import AbsolutePositions, AttentionPositions
from .dropout import Dropout
from .interface import SourceEmbedding
from .outputs import DecoderOutput, EncoderOutput

if TYPE_CHECKING:  # BERT's embedding stands in for TokenEmbedding in an encoder
    from .bert import BertEmbedding

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class TokenEmbedding(nn.Module):
    """Token vectors scaled by sqrt(d_model) (sec. 3.4), plus absolute positions, then dropout."""

    def __init__(
        self,
        embedding: nn.Embedding,
        *,
        positions: AbsolutePositions | None,
        dropout: float,
        scale: bool = True,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.positions = positions
        self.scale = math.sqrt(embedding.embedding_dim) if scale else 1.0
        self.dropout = Dropout(dropout)

    def forward(self, tokens: Tensor, offset: int = 0, use_positions: bool = True) -> Tensor:
        """tokens (b, t) at positions offset .. offset+t-1 -> (b, t, d_model)."""
        x = self.embedding(tokens) * self.scale
        if self.positions is not None and use_positions:
            t = tokens.shape[1]
            pe = (
                self.positions(t)
                if offset == 0
                else self.positions(torch.arange(offset, offset + t, device=tokens.device))
            )
            x = x + pe.to(x.dtype)
        return self.dropout(x)

    def lookup(self, tokens: Tensor) -> Tensor:
        """The table's rows for ``tokens``: no scaling, position or dropout."""
        return self.embedding(tokens)

    def input_module(self) -> nn.Module:
        """What makes the input vectors before positions: the token table."""
        return self.embedding


class FeedForward(nn.Module):
    """Sec. 3.3: FFN(x) = W_2 act(W_1 x + b_1) + b_2.

    ``dropout`` acts on the hidden activation (fairseq's ``--activation-dropout``,
    tensor2tensor's ``relu_dropout``). The paper has none there (sec. 5.4), nor do
    fairseq's and BERT's defaults: 0 unless asked for.
    """

    def __init__(self, d_model: int, ffn: int, *, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r} (valid: {', '.join(ACTIVATIONS)})")
        self.w_1 = nn.Linear(d_model, ffn)
        self.w_2 = nn.Linear(ffn, d_model)
        self.act = ACTIVATIONS[activation]
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.act(self.w_1(x))))


class _Sublayers(nn.Module):
    """Residual connections around sublayers, pre-norm (x + f(LN(x))) or post-norm (LN(x + f(x)))."""

    def __init__(self, d_model: int, count: int, *, dropout: float, norm_first: bool, eps: float) -> None:
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(d_model, eps=eps) for _ in range(count))
        self.layer_sites: dict[str, Site] = {}  # resid_pre, resid_post, mlp_out, once named
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def _enter(self, x: Tensor, i: int) -> Tensor:
        return self.norms[i](x) if self.norm_first else x

    def _leave(self, x: Tensor, y: Tensor, i: int) -> Tensor:
        x = x + self.dropout(y)
        return x if self.norm_first else self.norms[i](x)

    def _at(self, role: str, x: Tensor) -> Tensor:
        """``x`` at this layer's ``role`` site (resid_pre, mlp_out, resid_post)."""
        return sites.activation(self.layer_sites.get(role), x)

    def _feed_forward(self, x: Tensor, ffn: nn.Module, i: int) -> Tensor:
        x = self._leave(x, self._at("mlp_out", ffn(self._enter(x, i))), i)
        return self._at("resid_post", x)


class EncoderLayer(_Sublayers):
    """Self-attention then feed-forward, each with a residual connection and LayerNorm."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn: int,
        *,
        dropout: float,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        norm_first: bool = True,
        activation: str = "relu",
        positions: AttentionPositions | None = None,
        eps: float = 1e-5,
    ) -> None:
        super().__init__(d_model, 2, dropout=dropout, norm_first=norm_first, eps=eps)
        self.self_attn = MultiHeadAttention(d_model, num_heads, attention_dropout, positions=positions)
        self.feed_forward = FeedForward(d_model, ffn, dropout=activation_dropout, activation=activation)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (b, s, d), mask (b, 1, 1, s) -> (b, s, d)."""
        x = self._at("resid_pre", x)
        h = self._enter(x, 0)
        x = self._leave(x, self.self_attn(h, h, h, mask).context, 0)
        return self._feed_forward(x, self.feed_forward, 1)

    def name_sites(self, stack: str, layer: int) -> list[Site]:
        """Name this layer's sites (``encoder.3.attn``, ...): every one, in the order they run."""
        self.layer_sites = layer_sites(stack, "encoder", layer, self)
        attn = attention_site("encoder", layer, self.self_attn.num_heads, self.self_attn, stack=stack)
        ls = self.layer_sites
        return [ls["resid_pre"], attn, attn.z, ls["mlp_out"], ls["resid_post"]]


class DecoderLayer(_Sublayers):
    """Masked self-attention, cross-attention to the encoder memory, feed-forward."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn: int,
        *,
        dropout: float,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        norm_first: bool = True,
        activation: str = "relu",
        positions: AttentionPositions | None = None,
        eps: float = 1e-5,
    ) -> None:
        super().__init__(d_model, 3, dropout=dropout, norm_first=norm_first, eps=eps)
        self.self_attn = MultiHeadAttention(d_model, num_heads, attention_dropout, positions=positions)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, attention_dropout)
        self.feed_forward = FeedForward(d_model, ffn, dropout=activation_dropout, activation=activation)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        memory_mask: Tensor,
        *,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        group: int = 1,
    ) -> Tensor:
        """x (b, t, d) -> (b, t, d). ``memory`` has b / ``group`` rows: each run of ``group`` rows
        of x (a sentence's beam hypotheses) attends to one memory row."""
        x = self._at("resid_pre", x)
        h = self._enter(x, 0)
        x = self._leave(x, self.self_attn(h, h, h, None, causal=True, cache=self_cache).context, 0)
        h = self._enter(x, 1)
        cross = self.cross_attn(h, memory, memory, memory_mask, cache=cross_cache, group=group)
        x = self._leave(x, cross.context, 1)
        return self._feed_forward(x, self.feed_forward, 2)

    def name_sites(self, layer: int) -> list[Site]:
        """Name this layer's sites (``decoder.1.attn``, ``decoder.1.cross``, ...), in the order they run."""
        self.layer_sites = layer_sites("decoder", "decoder", layer, self)
        own = attention_site("decoder", layer, self.self_attn.num_heads, self.self_attn)
        cross = attention_site("cross", layer, self.cross_attn.num_heads, self.cross_attn)
        ls = self.layer_sites
        return [ls["resid_pre"], own, own.z, cross, cross.z, ls["mlp_out"], ls["resid_post"]]


class TransformerEncoder(nn.Module):
    """A stack of encoder layers over embedded tokens (shared by seq2seq and BERT-style models)."""

    def __init__(self, layers: list[EncoderLayer], *, d_model: int, norm_first: bool, eps: float = 1e-5) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = nn.LayerNorm(d_model, eps=eps) if norm_first else nn.Identity()
        self.norm_site = Site("encoder.norm", "encoder", -1, "final", module=self.final_norm)
        self.sites = [site for i, layer in enumerate(layers) for site in layer.name_sites("encoder", i)]
        self.sites.append(self.norm_site)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (b, s, d), mask (b, s) -> (b, s, d)."""
        attn_mask = mask[:, None, None, :]
        for layer in self.layers:
            x = layer(x, attn_mask)
        return sites.activation(self.norm_site, self.final_norm(x))


@dataclass
class TransformerState:
    """Incremental decoding state: the encoder output, one self- and one cross-attention cache per layer.

    After ``expand(k)`` each sentence decodes ``group`` = k rows (its beam
    hypotheses, consecutive), while the encoder memory and the cross-attention
    caches keep one row per sentence: the hypotheses share them (see
    ``MultiHeadAttention``'s ``group``)."""

    encoder: EncoderOutput
    self_caches: list[KVCache]
    cross_caches: list[KVCache]
    step: int = 0  # target tokens consumed so far
    group: int = 1  # decoding rows per sentence

    def expand(self, k: int) -> None:
        """Decode k rows (beam hypotheses) per current row, each run of k rows consecutive."""
        if self.step:  # prefixes already decoded: copy them to every hypothesis
            index = torch.arange(len(self.encoder.mask) * self.group, device=self.encoder.mask.device)
            for c in self.self_caches:
                c.reorder(index.repeat_interleave(k))
        self.group *= k

    def reorder(self, index: Tensor, same_sources: bool = False) -> None:
        """Keep decoding rows ``index``: beam search's surviving hypotheses.

        same_sources: every row keeps a row decoding the same source sentence
        (beams reordered within their sentence), so the encoder memory and the
        cross-attention caches are unchanged and are not copied. Otherwise, with
        ``group`` > 1, the kept rows must stay in runs of ``group`` rows of one
        sentence (the sentences' rows are selected, whole)."""
        for c in self.self_caches:
            c.reorder(index)
        if same_sources:
            return
        sources = index
        if self.group > 1:
            owner = (index // self.group).view(-1, self.group)
            sources = owner[:, 0]
            if len(index) % self.group or not bool((owner == sources[:, None]).all()):
                raise ValueError(f"reorder must keep whole groups of {self.group} rows per sentence")
        for c in self.cross_caches:
            c.reorder(sources)
        enc = self.encoder
        self.encoder = EncoderOutput(enc.memory.index_select(0, sources), enc.mask.index_select(0, sources))


class TransformerSeq2Seq(nn.Module):
    """Encoder-decoder Transformer with ``encode``, ``init_state``, ``decode_step``, ``forward``."""

    def __init__(
        self,
        *,
        src_embed: SourceEmbedding,
        tgt_embed: TokenEmbedding,
        encoder: TransformerEncoder,
        decoder_layers: list[DecoderLayer],
        d_model: int,
        vocab_size: int,
        norm_first: bool,
        tie_output: bool,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.encoder = encoder
        self.decoder_layers = nn.ModuleList(decoder_layers)
        self.decoder_norm = nn.LayerNorm(d_model, eps=eps) if norm_first else nn.Identity()
        self.output = nn.Linear(d_model, vocab_size, bias=False)
        if tie_output:
            self.output.weight = tgt_embed.embedding.weight
        self.norm_site = Site("decoder.norm", "decoder", -1, "final", module=self.decoder_norm)
        self.logits_site = Site("logits", "output", -1, "logits", module=self.output)
        decoder = [site for i, layer in enumerate(decoder_layers) for site in layer.name_sites(i)]
        self._sites = [*encoder.sites, *decoder, self.norm_site, self.logits_site]

    @property
    def output_projection(self) -> nn.Linear:
        return self.output

    def sites(self) -> list[Site]:
        return list(self._sites)

    def attention_sites(self) -> list[Site]:
        return attention_order(self._sites)

    def input_embedding(self) -> nn.Module:
        return self.src_embed.input_module()

    def position_schemes(self) -> list[nn.Module]:
        return unique_modules(
            [self.src_embed.positions, self.tgt_embed.positions]
            + [cast(MultiHeadAttention, s.module).positions for s in self.attention_sites()]
        )

    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOutput:
        """src (b, s) token ids, src_mask (b, s) True on real tokens."""
        return EncoderOutput(self.encoder(self.src_embed(src), src_mask), src_mask)

    def init_state(self, encoder_out: EncoderOutput) -> TransformerState:
        n = len(self.decoder_layers)
        return TransformerState(encoder_out, [KVCache() for _ in range(n)], [KVCache(static=True) for _ in range(n)])

    def _decode(
        self, x: Tensor, enc: EncoderOutput, state: TransformerState | None, project: bool = True
    ) -> DecoderOutput:
        memory_mask = enc.mask[:, None, None, :]
        group = 1 if state is None else state.group
        for i, layer in enumerate(self.decoder_layers):
            x = layer(
                x,
                enc.memory,
                memory_mask,
                self_cache=None if state is None else state.self_caches[i],
                cross_cache=None if state is None else state.cross_caches[i],
                group=group,
            )
        x = sites.activation(self.norm_site, self.decoder_norm(x))
        logits = sites.activation(self.logits_site, self.output(x)) if project else None
        return DecoderOutput(logits, x)

    def decode_step(self, state: TransformerState, prev_tokens: Tensor, project: bool = True) -> DecoderOutput:
        """Feed the next target tokens (b, n) (usually n = 1); the caches hold the prefix."""
        x = self.tgt_embed(prev_tokens, offset=state.step)
        out = self._decode(x, state.encoder, state, project)
        state.step += prev_tokens.shape[1]
        return out

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, project: bool = True) -> DecoderOutput:
        """Teacher forcing: logits (b, t, V) for every target position at once
        (with ``project=False`` only the features before the output layer)."""
        enc = self.encode(src, src_mask)  # the source is embedded first (gradient methods replace its vectors)
        return self._decode(self.tgt_embed(tgt_in), enc, None, project)


class TransformerEncoderModel(nn.Module):
    """The encoder alone (BERT-style): contextual vectors for every token."""

    def __init__(self, *, embed: TokenEmbedding | BertEmbedding, encoder: TransformerEncoder) -> None:
        super().__init__()
        self.embed = embed
        self.encoder = encoder

    def encode(self, tokens: Tensor, mask: Tensor) -> EncoderOutput:
        """tokens (b, s), mask (b, s) True on real tokens -> memory (b, s, d)."""
        return EncoderOutput(self.encoder(self.embed(tokens), mask), mask)

    def forward(self, tokens: Tensor, mask: Tensor) -> EncoderOutput:
        return self.encode(tokens, mask)

    def hidden_states(self, tokens: Tensor, mask: Tensor, *, use_positions: bool = True) -> list[Tensor]:
        """The embedding layer's output, then each layer's ((layers + 1) x (b, s, d)), before
        the final LayerNorm of a pre-norm stack."""
        x = self.embed(tokens, use_positions=use_positions)
        states = [x]
        attn_mask = mask[:, None, None, :]
        for layer in self.encoder.layers:
            x = layer(x, attn_mask)
            states.append(x)
        return states

    def token_vectors(self, tokens: Tensor) -> Tensor:
        return self.embed.lookup(tokens)

    def input_embedding(self) -> nn.Module:
        return self.embed.input_module()

    def sites(self) -> list[Site]:
        return list(self.encoder.sites)

    def attention_sites(self) -> list[Site]:
        return attention_order(self.encoder.sites)

    def position_schemes(self) -> list[nn.Module]:
        return unique_modules(
            [getattr(self.embed, "positions", None)]
            + [cast(MultiHeadAttention, s.module).positions for s in self.attention_sites()]
        )


def attention_order(named: list[Site]) -> list[Site]:
    """The attention sites among ``named``: encoder layers first, then decoder self- and cross-attention."""
    return [site for kind in sites.ATTENTION_KINDS for site in named if site.role == "attn" and site.kind == kind]


def unique_modules(modules: Sequence[nn.Module | None]) -> list[nn.Module]:
    """The modules that are there, each once (layers may share one scheme), in order."""
    out: list[nn.Module] = []
    for m in modules:
        if m is not None and all(m is not o for o in out):
            out.append(m)
    return out

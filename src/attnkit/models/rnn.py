"""Luong, Pham & Manning 2015: an RNN encoder-decoder with attention.

src -> embeddings -> bidirectional LSTM/GRU -> h̄_s (b, s, H)
step t: h_t = RNN([emb(y_{t-1}); h̃_{t-1}], h_{t-1})      (input feeding, sec. 3.3)
        c_t = attention(h_t, h̄)                           (global, local-m or local-p)
        h̃_t = tanh(W_c [c_t; h_t])                        (eq. 5)
        p(y_t) = softmax(W_s h̃_t)                         (eq. 6)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..attention import GlobalAttention, LocalAttention, sites
from ..attention.sites import Listener, Site, attention_site
from ..config import INIT_HIDDEN
from ..errors import unknown_choice
from .dropout import Dropout
from .interface import SourceEncoder
from .outputs import DecoderOutput, EncoderOutput

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}  # config.RNN_CELLS
Hidden = Tensor | tuple[Tensor, Tensor]


class RNNEncoder(nn.Module):
    """Bidirectional LSTM/GRU; each direction has H/2 units so states are H wide."""

    def __init__(self, embedding: nn.Embedding, *, cell: str, hidden: int, layers: int, dropout: float) -> None:
        super().__init__()
        if hidden % 2:
            raise ValueError(f"the bidirectional encoder needs an even hidden size, got {hidden}")
        self.embedding = embedding
        self.dropout = Dropout(dropout)
        self.rnn = CELLS[cell](
            embedding.embedding_dim,
            hidden // 2,
            layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.layers = layers

    def input_module(self) -> nn.Module:
        """What makes the input vectors: the token table."""
        return self.embedding

    def forward(self, src: Tensor, mask: Tensor) -> tuple[Tensor, Hidden]:
        """src (b, s), mask (b, s) -> states (b, s, H), final state per layer (layers, b, H)."""
        x = self.dropout(self.embedding(src))
        lengths = mask.sum(1).clamp(min=1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, final = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])

        def join(h: Tensor) -> Tensor:  # (layers * 2, b, H/2) -> (layers, b, H): forward ++ backward
            h = h.view(self.layers, 2, *h.shape[1:])
            return torch.cat([h[:, 0], h[:, 1]], dim=-1)

        final = tuple(join(h) for h in final) if isinstance(final, tuple) else join(final)
        return out, final


@dataclass
class RNNState:
    """Decoding state: encoder output, prepared keys, RNN state, the fed-back h̃_{t-1}, step count."""

    encoder: EncoderOutput
    prepared: Tensor
    hidden: Hidden
    feed: Tensor  # (b, H)
    step: int = 0

    def expand(self, k: int) -> None:
        """Decode k rows (beam hypotheses) per current row, each run of k rows consecutive."""
        self.reorder(torch.arange(len(self.feed), device=self.feed.device).repeat_interleave(k))

    def reorder(self, index: Tensor, same_sources: bool = False) -> None:
        """Keep batch rows ``index``; same_sources: see ``TransformerState.reorder``."""
        if not same_sources:
            enc = self.encoder
            self.encoder = EncoderOutput(enc.memory.index_select(0, index), enc.mask.index_select(0, index))
            self.prepared = self.prepared.index_select(0, index)
        if isinstance(self.hidden, tuple):
            self.hidden = cast(Hidden, tuple(h.index_select(1, index) for h in self.hidden))  # an LSTM's (h, c)
        else:
            self.hidden = self.hidden.index_select(1, index)
        self.feed = self.feed.index_select(0, index)


class RNNSeq2Seq(nn.Module):
    """Encoder-decoder with Luong attention; ``encode``, ``init_state``, ``decode_step``, ``forward``."""

    def __init__(
        self,
        *,
        encoder: SourceEncoder,
        tgt_embedding: nn.Embedding,
        attention: GlobalAttention | LocalAttention,
        cell: str,
        hidden: int,
        layers: int,
        vocab_size: int,
        dropout: float,
        input_feeding: bool = True,
        init_hidden: str = "last",
        tie_output: bool = False,
    ) -> None:
        super().__init__()
        if init_hidden not in INIT_HIDDEN:
            raise unknown_choice("model.rnn.init_hidden", init_hidden, INIT_HIDDEN)
        self.init_hidden = init_hidden
        if encoder.layers != layers:
            raise ValueError(
                f"the RNN decoder starts from the encoder's final states, so model.encoder_layers "
                f"({encoder.layers}) must equal model.decoder_layers ({layers})"
            )
        self.encoder = encoder
        self.tgt_embedding = tgt_embedding
        self.attention = attention
        self.attention_site = attention_site("cross", 0, 1, attention)  # one attention, over the source, one "head"
        self.input_feeding = input_feeding
        self.hidden_size = hidden
        emb = tgt_embedding.embedding_dim
        self.rnn = CELLS[cell](
            emb + (hidden if input_feeding else 0),
            hidden,
            layers,
            batch_first=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.combine = nn.Linear(2 * hidden, hidden, bias=False)  # W_c
        self.dropout = Dropout(dropout)
        self.output = nn.Linear(hidden, vocab_size, bias=False)  # W_s
        self.logits_site = Site("logits", "output", -1, "logits", module=self.output)
        if tie_output:
            if emb != hidden:
                raise ValueError(f"tying output and target embeddings needs d_model == hidden, got {emb} and {hidden}")
            self.output.weight = tgt_embedding.weight

    @property
    def output_projection(self) -> nn.Linear:
        return self.output  # W_s

    def sites(self) -> list[Site]:
        return [self.attention_site, self.attention_site.z, self.logits_site]

    def attention_sites(self) -> list[Site]:
        return [self.attention_site]

    def input_embedding(self) -> nn.Module:
        return self.encoder.input_module()

    def position_schemes(self) -> list[nn.Module]:
        return []  # the recurrence orders the tokens

    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOutput:
        memory, final = self.encoder(src, src_mask)
        return EncoderOutput(memory, src_mask, final)

    def init_state(self, encoder_out: EncoderOutput) -> RNNState:
        memory = encoder_out.memory
        final = encoder_out.final if self.init_hidden == "last" else None
        if final is None:
            zeros = memory.new_zeros(self.rnn.num_layers, memory.shape[0], self.hidden_size)
            final = (zeros, zeros) if isinstance(self.rnn, nn.LSTM) else zeros
        return RNNState(
            encoder=EncoderOutput(memory, encoder_out.mask),
            prepared=self.attention.prepare_keys(memory),
            hidden=final,
            feed=memory.new_zeros(memory.shape[0], self.hidden_size),
        )

    def _attend(self, h: Tensor, state: RNNState, weights: bool, positions: Tensor):
        enc = state.encoder
        return self.attention(
            h, enc.memory, enc.memory, enc.mask, weights, positions=positions, prepared=state.prepared
        )

    def _attentional(self, h: Tensor, context: Tensor) -> Tensor:
        return torch.tanh(self.combine(torch.cat([context, h], dim=-1)))  # h̃_t, eq. 5

    def _project(self, attentional: Tensor, project: bool) -> DecoderOutput:
        """One output GEMM over every position (not one per step); dropout before W_s."""
        features = self.dropout(attentional)
        logits = sites.activation(self.logits_site, self.output(features)) if project else None
        return DecoderOutput(logits, features)

    def decode_step(self, state: RNNState, prev_tokens: Tensor, project: bool = True) -> DecoderOutput:
        """Feed target tokens (b, n) one at a time (input feeding needs h̃ of the previous step);
        the n steps are one call at the attention's site."""
        heard = sites.listeners(self.attention_site)
        outputs: list[Tensor] = []
        steps: list[tuple[Tensor, Tensor | None, sites.Tap, Tensor]] = []  # (weights, p_t, tap, h_t) per step
        emb = self.dropout(self.tgt_embedding(prev_tokens))  # (b, n, e)
        for i in range(prev_tokens.shape[1]):
            x = emb[:, i : i + 1]
            if self.input_feeding:
                x = torch.cat([x, state.feed[:, None]], dim=-1)
            h, state.hidden = self.rnn(x, state.hidden)  # (b, 1, H)
            att = self._attend(h, state, bool(heard), torch.tensor([state.step], device=h.device))
            attentional = self._attentional(h, att.context)
            state.feed = attentional[:, 0]
            state.step += 1
            outputs.append(attentional)
            if heard:
                steps.append((att.weights, getattr(att, "p_t", None), att.tap, h))
        if heard:
            weights, centres, taps, queries = zip(*steps)
            p_t = None if centres[0] is None else torch.cat(cast(list[Tensor], centres), 1)
            self._heard(heard, torch.cat(weights, 1), p_t, list(taps), torch.cat(queries, 1), state.encoder.memory)
        return self._project(outputs[0] if len(outputs) == 1 else torch.cat(outputs, 1), project)

    def _heard(
        self,
        heard: tuple[Listener, ...],
        weights: Tensor,
        p_t: Tensor | None,
        taps: list,
        queries: Tensor,
        memory: Tensor,
    ) -> None:
        """One call at the attention's site: the formed weights (b, t, s), as one head (Luong's scores
        are one small map, and concat's do not factor through q . k), each step's in the graph, p_t
        (b, t), and the decoder states h_t (b, t, H) and encoder states (b, s, H) it read."""
        extra = {"queries": queries, "keys": memory, "values": memory}
        if p_t is not None:
            extra["p_t"] = p_t
        call = sites.Attended(self.attention_site, factored=False, weights=weights[:, None], taps=taps, extra=extra)
        sites.attended(heard, call)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, project: bool = True) -> DecoderOutput:
        """Teacher forcing over all target positions (``project=False``: features only)."""
        state = self.init_state(self.encode(src, src_mask))
        if self.input_feeding:
            return self.decode_step(state, tgt_in, project)
        # Without input feeding the RNN runs over the whole target at once, then attention for all t.
        h, _ = self.rnn(self.dropout(self.tgt_embedding(tgt_in)), state.hidden)  # (b, t, H)
        heard = sites.listeners(self.attention_site)
        att = self._attend(h, state, bool(heard), torch.arange(tgt_in.shape[1], device=h.device))
        if heard:
            self._heard(heard, att.weights, getattr(att, "p_t", None), [att.tap], h, state.encoder.memory)
        return self._project(self._attentional(h, att.context), project)

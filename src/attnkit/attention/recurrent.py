"""Luong, Pham & Manning 2015, sec. 3: global and local attention for recurrent decoders.

Queries are decoder states h_t (b, t, d_q); keys and values the encoder states
h̄_s (b, s, d_k) / (b, s, d_v); ``key_mask`` (b, s) marks real source tokens
(right padding). A decoder running step by step calls with t = 1 and, for
local-m, the step index as ``positions``; ``prepare_keys`` lets it do the
key-only part of the score once per sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import unknown_choice
from . import sites
from .attend import AttentionOutput, attend, masked_softmax
from .scores import ScoreFunction, build_score


class GlobalAttention(nn.Module):
    """Luong et al. 2015, sec. 3.1 / eq. 7: a_t = softmax(score(h_t, h̄_s)) over all source states."""

    def __init__(
        self,
        *,
        query_dim: int,
        key_dim: int,
        score: str | ScoreFunction = "general",
        hidden_dim: int | None = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.score = (
            score
            if isinstance(score, ScoreFunction)
            else build_score(score, query_dim=query_dim, key_dim=key_dim, hidden_dim=hidden_dim)
        )
        self.dropout = dropout

    def prepare_keys(self, keys: Tensor) -> Tensor:
        """Key-only part of the score, (b, s, ·); pass it back as ``prepared``."""
        return self.score.prepare_keys(keys)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor,
        key_mask: Tensor | None = None,
        need_weights: bool = False,
        *,
        positions: Tensor | None = None,
        prepared: Tensor | None = None,
    ) -> AttentionOutput:
        """Context (b, t, d_v) and, when asked, weights (b, t, s).

        ``positions`` (decoder step indices) is accepted for the same call
        signature as local attention and ignored: global attention sees every key."""
        prepared = self.score.prepare_keys(keys) if prepared is None else prepared
        scores = self.score.score(query, prepared)  # (b, t, s)
        mask = None if key_mask is None else key_mask[:, None, :]
        out = attend(scores, values, mask, dropout=self.dropout, training=self.training)
        context = sites.heads(sites.site_of(self), out.context[:, None])[:, 0]  # one head, gated where asked
        weights = cast(Tensor, out.weights)  # attend returns its weights
        return AttentionOutput(context, weights if need_weights else None, sites.Tap(weights))


@dataclass(slots=True)
class LocalAttentionOutput:
    """What local attention returns.

    context: (b, t, d_v).
    weights: (b, t, s) dense alignment (zero outside the window), only when asked.
    p_t: (b, t) the window centres (aligned source positions), always: draw them.
    """

    context: Tensor
    weights: Tensor | None
    p_t: Tensor
    tap: sites.Tap | None = None  # the weights the values were mixed with, in the graph, and their spread


class LocalAttention(nn.Module):
    """Luong et al. 2015, sec. 3.2: attend to the window [p_t - D, p_t + D] only.

    * ``local-m`` (monotonic): p_t = t, weights from eq. 7 inside the window.
    * ``local-p`` (predictive): p_t = S * sigmoid(v_p^T tanh(W_p h_t)) (eq. 9),
      S the source length; a_t(s) = align(h_t, h̄_s) * exp(-(s - p_t)^2 / (2 sigma^2))
      with sigma = D / 2 (eq. 10), align being the softmax over the window.
      As in the paper the Gaussian-weighted alignment is not renormalised, so a
      local-p row sums to at most 1.

    Only the 2D+1 keys of each window are gathered, so time and memory are
    O(t * D), not O(t * s).
    """

    MODES = ("local-m", "local-p")

    def __init__(
        self,
        *,
        query_dim: int,
        key_dim: int,
        mode: str = "local-p",
        window: int = 10,
        score: str | ScoreFunction = "general",
        hidden_dim: int | None = None,
        predictor_dim: int | None = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if mode not in self.MODES:
            raise unknown_choice("local attention mode", mode, self.MODES)
        if window < (1 if mode == "local-p" else 0):
            raise ValueError(f"window half-width D must be >= {1 if mode == 'local-p' else 0} for {mode}, got {window}")
        self.mode = mode
        self.window = window
        self.dropout = dropout
        self.score = (
            score
            if isinstance(score, ScoreFunction)
            else build_score(score, query_dim=query_dim, key_dim=key_dim, hidden_dim=hidden_dim)
        )
        if mode == "local-p":
            p = predictor_dim or query_dim
            self.W_p = nn.Linear(query_dim, p, bias=False)
            self.v_p = nn.Linear(p, 1, bias=False)

    def prepare_keys(self, keys: Tensor) -> Tensor:
        return self.score.prepare_keys(keys)

    def centres(self, query: Tensor, source_lengths: Tensor, positions: Tensor | None) -> Tensor:
        """p_t (b, t): the step index (local-m) or the predicted position (local-p, eq. 9)."""
        b, t, _ = query.shape
        if self.mode == "local-p":
            return source_lengths[:, None].to(query.dtype) * torch.sigmoid(
                self.v_p(torch.tanh(self.W_p(query)))
            ).squeeze(-1)
        if positions is None:
            positions = torch.arange(t, device=query.device)
        return positions.expand(b, t).to(query.dtype)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor,
        key_mask: Tensor | None = None,
        need_weights: bool = False,
        *,
        positions: Tensor | None = None,
        prepared: Tensor | None = None,
    ) -> LocalAttentionOutput:
        """Attend within each query's window.

        Args:
            query: (b, t, d_q) decoder states.
            keys, values: (b, s, d_k), (b, s, d_v) encoder states.
            key_mask: (b, s) True on real source tokens.
            need_weights: also return the dense (b, t, s) alignment.
            positions: (t,) or (b, t) decoder step indices for local-m
                (default 0 .. t-1); ignored by local-p.
            prepared: ``prepare_keys(keys)``, to reuse across decoder steps.
        """
        b, t, _ = query.shape
        s = keys.shape[1]
        if values.shape[:2] != keys.shape[:2] or query.shape[0] != b or keys.shape[0] != b:
            raise ValueError(
                f"shape mismatch: query {tuple(query.shape)}, keys {tuple(keys.shape)}, values {tuple(values.shape)}"
            )
        prepared = self.score.prepare_keys(keys) if prepared is None else prepared
        lengths = torch.full((b,), s, device=keys.device) if key_mask is None else key_mask.sum(-1)
        p_t = self.centres(query, lengths, positions)  # (b, t)

        D, W = self.window, 2 * self.window + 1
        offsets = torch.arange(W, device=keys.device)
        lo = torch.ceil(p_t.detach() - D).long()  # first integer position inside the window
        idx = lo[..., None] + offsets  # (b, t, W)
        inside = (idx >= 0) & (idx < s) & (idx <= p_t.detach()[..., None] + D)
        idx = idx.clamp(0, s - 1)
        if key_mask is not None:
            inside &= key_mask.gather(1, idx.view(b, -1)).view(b, t, W)

        k_win = _gather_rows(prepared, idx)  # (b, t, W, ·)
        v_win = _gather_rows(values, idx)  # (b, t, W, d_v)
        scores = self.score.score(query[:, :, None, :], k_win)  # (b, t, 1, W)
        window_mask = inside[:, :, None, :]

        def spread(x: Tensor) -> Tensor:  # window (b, t, W) -> the dense (b, t, s) map
            return x.new_zeros(b, t, s).scatter_add(-1, idx, x.reshape(b, t, W) * inside)

        if self.mode == "local-m":
            out = attend(scores, v_win, window_mask, dropout=self.dropout, training=self.training)
            weights = cast(Tensor, out.weights).squeeze(2)  # attend always returns its weights
            context = out.context.squeeze(2)
            tap = sites.Tap(cast(Tensor, out.weights), spread)
        else:
            sigma = D / 2.0
            gauss = torch.exp(-((idx.to(p_t.dtype) - p_t[..., None]) ** 2) / (2.0 * sigma**2))  # (b, t, W)
            weights = masked_softmax(scores, window_mask).squeeze(2) * gauss
            mixing = F.dropout(weights, self.dropout, self.training) if self.dropout > 0.0 else weights
            context = (mixing[:, :, None, :] @ v_win).squeeze(2)  # (b, t, d_v)
            tap = sites.Tap(weights, spread)

        dense = None
        if need_weights:
            dense = weights.new_zeros(b, t, s).scatter_add_(-1, idx, weights * inside)
        return LocalAttentionOutput(sites.heads(sites.site_of(self), context[:, None])[:, 0], dense, p_t, tap)


def _gather_rows(x: Tensor, idx: Tensor) -> Tensor:
    """x (b, s, f), idx (b, t, W) -> (b, t, W, f) without materialising (b, t, s, f)."""
    b, t, W = idx.shape
    flat = idx.reshape(b, t * W, 1).expand(b, t * W, x.shape[-1])
    return x.gather(1, flat).view(b, t, W, x.shape[-1])


ATTENTION_TYPES = ("global", "local-m", "local-p")


def build_recurrent_attention(
    kind: str,
    *,
    query_dim: int,
    key_dim: int,
    score: str = "general",
    window: int = 10,
    hidden_dim: int | None = None,
    dropout: float = 0.0,
) -> GlobalAttention | LocalAttention:
    """Global, local-m or local-p attention by name."""
    if kind == "global":
        return GlobalAttention(
            query_dim=query_dim, key_dim=key_dim, score=score, hidden_dim=hidden_dim, dropout=dropout
        )
    if kind in LocalAttention.MODES:
        return LocalAttention(
            query_dim=query_dim,
            key_dim=key_dim,
            mode=kind,
            window=window,
            score=score,
            hidden_dim=hidden_dim,
            dropout=dropout,
        )
    raise unknown_choice("attention type", kind, ATTENTION_TYPES)


__all__ = [
    "ATTENTION_TYPES",
    "GlobalAttention",
    "LocalAttention",
    "LocalAttentionOutput",
    "build_recurrent_attention",
]

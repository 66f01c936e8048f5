"""Vaswani et al. 2017, sec. 3.2.2: multi-head attention, self and cross, with a key/value cache.

MultiHead(Q, K, V) = Concat(head_1 .. head_h) W^O,
head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

Shapes: ``b`` batch, ``t`` queries, ``s`` keys, ``h`` heads, ``d`` = d_model / h.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..positions.base import AttentionPositions
from . import sites
from .attend import AttentionOutput, dot_product_attention
from .masks import as_attention_mask


@dataclass(slots=True)
class KVCache:
    """Projected keys and values of one attention layer, kept across decoding steps.

    Self-attention appends each step's keys/values. Cross-attention
    (``static=True``) projects the encoder memory once and reuses it.
    k, v: (b, h, s, d). Keys are stored after any rotary transform.
    """

    k: Tensor | None = None
    v: Tensor | None = None
    static: bool = False

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (b',), e.g. the surviving hypotheses of a beam."""
        if self.k is not None:
            assert self.v is not None  # keys and values are set together
            self.k = self.k.index_select(0, index)
            self.v = self.v.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention.

    Args:
        d_model: model width; must be divisible by ``num_heads``.
        num_heads: h.
        dropout: dropout on the attention weights (training only).
        bias: whether the Q/K/V and output projections have biases.
        positions: a scheme acting inside attention (RoPE, ALiBi, T5, Shaw);
            used for self-attention, where queries and keys share positions.

    The Q, K and V projections are stored as one (3 d_model, d_model) matrix
    so self-attention runs one GEMM for all three (the same layout as
    ``torch.nn.MultiheadAttention``'s ``in_proj_weight``).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        positions: AttentionPositions | None = None,
    ) -> None:
        super().__init__()
        if d_model <= 0 or num_heads <= 0:
            raise ValueError(f"d_model and num_heads must be positive, got {d_model}, {num_heads}")
        if d_model % num_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}; "
                f"valid head counts: {[h for h in range(1, d_model + 1) if d_model % h == 0]}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        self.positions = positions
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d_model, d_model))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d_model)) if bias else None
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)
        if bias:
            nn.init.zeros_(self.out_proj.bias)

    def _project(self, x: Tensor, part: slice) -> Tensor:
        w = self.in_proj_weight[part]
        b = None if self.in_proj_bias is None else self.in_proj_bias[part]
        return F.linear(x, w, b)

    def _split_heads(self, x: Tensor) -> tuple[Tensor, ...]:
        """(b, t, n * d_model) -> n tensors (b, h, t, d)."""
        b, t, _ = x.shape
        return x.view(b, t, -1, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)

    def head_projections(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Q W^Q, K W^K, V W^V split into heads: (b, h, t, d), (b, h, s, d), (b, h, s, d),
        before any positional transform (what ``explain`` walks through)."""
        self._check_inputs(query, key, value)
        return self._projections(query, key, value, None)

    def value_vectors(self, value: Tensor) -> Tensor:
        """What each head adds to the output per unit of attention: f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h,
        (b, h, s, d_model) (Kobayashi et al. 2020; the output bias b_O is left out, as it is
        the same for every token). The layer's output is sum_h sum_j a^h_ij f^h(x_j) + b_O."""
        v = self._split_heads(self._project(value, slice(2 * self.d_model, 3 * self.d_model)))[0]
        w_o = self.out_proj.weight.view(self.d_model, self.num_heads, self.head_dim)  # (d_model, h, d)
        return torch.einsum("bhsd,mhd->bhsm", v, w_o)

    def output_projection(self) -> tuple[Tensor, Tensor | None]:
        """W^O (d_model, h x d) and its bias: what each head's values are projected by."""
        return self.out_proj.weight, self.out_proj.bias

    def forward(
        self,
        query: Tensor,
        key: Tensor | None,
        value: Tensor | None,
        mask: Tensor | None = None,
        need_weights: bool = False,
        *,
        causal: bool = False,
        cache: KVCache | None = None,
        group: int = 1,
    ) -> AttentionOutput:
        """Attend from ``query`` (b, t, d_model) to ``key``/``value`` (b, s, d_model).

        Args:
            mask: bool, True = may attend; (t, s), (b, t|1, s) or (b, h|1, t|1, s).
                With a cache, s counts the cached keys too. With ``group`` > 1, b is
                the key/value batch.
            need_weights: also return per-head weights (b, h, t, s).
            causal: forbid attending to later positions (decoder self-attention).
            cache: incremental decoding state; updated in place. For
                self-attention pass only the new tokens as query/key/value;
                once a static (cross-attention) cache is filled, key and value
                are not used and may be None.
            group: query rows per key/value row. The query batch is ``group`` x
                the key/value batch, and consecutive query rows share one
                key/value row: the beam hypotheses of one sentence share its
                encoder memory. Their queries then meet the keys in one matmul,
                and the memory and its cache are kept once per sentence, not
                once per hypothesis. Not for self-attention.

        Returns:
            AttentionOutput with context (b, t, d_model) and weights or None.
        """
        if group > 1 and (key is query or self.positions is not None or causal):
            raise ValueError("group > 1 is for cross-attention (queries sharing keys), not self-attention")
        cached_k = cache.k if cache is not None and cache.static else None
        reuse = cached_k is not None
        self._check_inputs(query, None if reuse else key, None if reuse else value, group)
        if cached_k is not None and cached_k.shape[0] * group != query.shape[0]:
            raise ValueError(
                f"the cache holds {cached_k.shape[0]} key rows, which does not fit {query.shape[0]} queries "
                f"in groups of {group}"
            )
        q, k, v = self._projections(query, key, value, cache if reuse else None)
        # Relative schemes act on self-attention: queries sit after the cached keys.
        positions = self.positions if not (cache is not None and cache.static) else None
        offset = len(cache) if cache is not None and not cache.static else 0
        q_pos = None
        if positions is not None:
            q_pos = torch.arange(offset, offset + q.shape[-2], device=q.device)
            q = positions.rotate(q, q_pos)
            k = positions.rotate(k, torch.arange(offset, offset + k.shape[-2], device=q.device))
        if cache is not None and not reuse:
            k, v = self._update_cache(cache, k, v)
        k_pos = bias = None
        if positions is not None:
            assert q_pos is not None  # set with the rotation above
            k_pos = torch.arange(k.shape[-2], device=q.device)
            bias = positions.score_bias(q, q_pos, k_pos)
        site = sites.site_of(self)
        heard = sites.listeners(site)
        explicit = need_weights or sites.needs_weights(heard) or (positions is not None and positions.needs_weights)
        mask = self._check_mask(mask, q.shape[-2], k.shape[-2])
        context, weights = self._grouped_attention(
            q, k, v, mask, bias, causal=causal, need_weights=explicit, group=group
        )
        if heard:  # q and k after positions, the rules: any weight later, exactly
            call = sites.Attended(cast(sites.Site, site), q, k, v, self.head_dim**-0.5, causal, mask, bias, group)
            call.weights, call.extra = weights, {"x": query}
            sites.attended(heard, call)
        if positions is not None and positions.needs_weights:
            # explicit weights were asked for, and both positions set above; the scheme has a value term
            assert weights is not None and q_pos is not None and k_pos is not None
            context = context + cast(Tensor, positions.value_term(weights, q_pos, k_pos))
        context = sites.heads(site, context)  # read, gated or ablated before the heads merge
        b, _, t, _ = context.shape
        context = self.out_proj(context.transpose(1, 2).reshape(b, t, self.d_model))
        return AttentionOutput(context, weights if need_weights else None)

    def _projections(
        self, query: Tensor, key: Tensor | None, value: Tensor | None, filled: KVCache | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v (b, h, ·, d), with as few GEMMs as the call allows: one for self-attention,
        none for the keys and values of a filled cross-attention cache."""
        d = self.d_model
        if filled is not None:  # cross-attention memory projected on an earlier step
            (q,) = self._split_heads(self._project(query, slice(0, d)))
            assert filled.k is not None and filled.v is not None  # filled: keys and values are set
            return q, filled.k, filled.v
        if key is None or value is None:
            raise ValueError("key and value are needed unless a filled cross-attention cache holds them")
        if key is query and value is query:
            q, k, v = self._split_heads(self._project(query, slice(None)))  # one GEMM for Q, K, V
            return q, k, v
        (q,) = self._split_heads(self._project(query, slice(0, d)))
        if key is value:
            k, v = self._split_heads(self._project(key, slice(d, None)))
        else:
            (k,) = self._split_heads(self._project(key, slice(d, 2 * d)))
            (v,) = self._split_heads(self._project(value, slice(2 * d, None)))
        return q, k, v

    @staticmethod
    def _update_cache(cache: KVCache, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append this step's keys/values (self-attention) or store the projected memory (cross)."""
        if cache.k is not None:
            assert cache.v is not None  # keys and values are set together
            k = torch.cat([cache.k, k], dim=-2)
            v = torch.cat([cache.v, v], dim=-2)
        if cache.static:  # kept for every later step: contiguous once, not copied by each matmul
            k, v = k.contiguous(), v.contiguous()
        cache.k, cache.v = k, v
        return k, v

    def _grouped_attention(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        bias: Tensor | None,
        *,
        causal: bool,
        need_weights: bool,
        group: int,
    ) -> tuple[Tensor, Tensor | None]:
        """Scaled dot-product attention -> context (b, h, t, d), weights (b, h, t, s) or None.
        With ``group`` > 1 each key/value row's ``group`` query rows go in as one block."""
        t_q = q.shape[-2]
        if group > 1:  # (n * g, h, t, d) -> (n, h, g * t, d): each sentence's queries in one block
            q = q.unflatten(0, (k.shape[0], group)).transpose(1, 2).flatten(2, 3)
            if mask is not None and mask.shape[-2] > 1:
                mask = mask.repeat(*([1] * (mask.dim() - 2)), group, 1)
        out = dot_product_attention(
            q,
            k,
            v,
            mask,
            bias=bias,
            causal=causal,
            need_weights=need_weights,
            dropout=self.dropout,
            training=self.training,
        )
        context, weights = out.context, out.weights
        if group > 1:  # back to one row per query: (n, h, g * t, .) -> (n * g, h, t, .)
            context = context.unflatten(2, (group, t_q)).transpose(1, 2).flatten(0, 1)
            if weights is not None:
                weights = weights.unflatten(2, (group, t_q)).transpose(1, 2).flatten(0, 1)
        return context, weights

    def _check_inputs(self, query: Tensor, key: Tensor | None, value: Tensor | None, group: int = 1) -> None:
        given = [x for x in (query, key, value) if x is not None]
        if any(x.dim() != 3 for x in given):
            raise ValueError(
                f"query, key and value must be (b, t, d_model); got shapes {[tuple(x.shape) for x in given]}"
            )
        if any(x.shape[-1] != self.d_model for x in given):
            raise ValueError(f"expected last dimension d_model={self.d_model}; got {[x.shape[-1] for x in given]}")
        if group < 1:
            raise ValueError(f"group must be >= 1, got {group}")
        if (
            key is not None
            and value is not None
            and (key.shape[:2] != value.shape[:2] or key.shape[0] * group != query.shape[0])
        ):
            grouping = f" (group={group} query rows per key row)" if group > 1 else ""
            raise ValueError(
                f"batch/length mismatch{grouping}: query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )

    def _check_mask(self, mask: Tensor | None, t: int, s: int) -> Tensor | None:
        mask = as_attention_mask(mask)
        if mask is not None and (mask.shape[-1] != s or mask.shape[-2] not in (1, t)):
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not fit {t} queries x {s} keys (expected (..., t or 1, s))"
            )
        return mask

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, dropout={self.dropout}"

"""Why a head attends where it does: its score at one cell decomposed into what wrote the query's
and the key's streams.

A head's score at query i and key j is scale q_i . k_j (plus any positional bias). The stream at
each position is a sum of writers (``streams.writers``: the embeddings, each earlier head, each
attention bias, each MLP), and with the layer's norm frozen at its value at i and at j the query
and the key are affine in the stream (``reading``): q_i = sum_a q_i(a) + q_i(constant), each
term the projection and the rotation of one writer alone (RoPE rotates each term as it rotates
the whole), the constant the projection's bias and the norm's shift. So

    scale q_i . k_j = sum over a, b of scale q_i(a) . k_j(b)

exactly: term [a, b] is how much writer a at the query and writer b at the key made the cell
bright (or dark). The terms are checked to sum to the model's own score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .reading import Frozen, Read, attend, attention_site, check, freeze, read
from .streams import writers

CHUNK = 64  # writers run through the attention module at once


@dataclass
class QKAttribution:
    """One head's score at (query, key), by the writers of the two streams.

    names       the writers ("embed", "blocks.0.attn.h3", "blocks.0.mlp", ...), then "constant"
                (the projections' biases and the norm's shift)
    terms       (writers, writers): [a, b] = scale q(a) . k(b), a the query's writer, b the key's
    score       the model's own scale q . k at the cell (terms.sum())
    bias        any additive term at the cell (ALiBi, a relative-position bias; 0 where none)
    weight      the cell's attention weight
    """

    site: str
    head: int
    query: int
    key: int
    names: list[str]
    terms: np.ndarray
    score: float
    bias: float
    weight: float
    tokens: list[str]

    @property
    def by_query(self) -> np.ndarray:
        """Each writer's share through the query (writers,): the terms summed over the key's writers."""
        return self.terms.sum(1)

    @property
    def by_key(self) -> np.ndarray:
        """Each writer's share through the key (writers,)."""
        return self.terms.sum(0)

    def table(self, top: int | None = None) -> list[dict[str, Any]]:
        """The (query writer, key writer) pairs, largest first: to sort, filter or plot."""
        order = np.argsort(-np.abs(self.terms), axis=None)
        rows = []
        for flat in order[: top if top is not None else order.size]:
            a, b = np.unravel_index(flat, self.terms.shape)
            rows.append(
                {
                    "query_writer": self.names[a],
                    "key_writer": self.names[b],
                    "score": float(self.terms[a, b]),
                    "share": float(self.terms[a, b] / self.score) if self.score else float("nan"),
                }
            )
        return rows


def qk_attribution(
    model: Any,
    text: str,
    site: str,
    head: int,
    query: int = -1,
    key: int | None = None,
    *,
    target: str | None = None,
) -> QKAttribution:
    """Head ``head`` of the self-attention ``site``: its score at (``query``, ``key``) of ``text``
    decomposed into the bilinear terms of what wrote the two positions' streams. ``query``
    defaults to the last position, ``key`` to the key the head attends to most from there."""
    at = attention_site(model, site)
    if not 0 <= head < at.heads:
        raise ValueError(f"{site} has heads 0 to {at.heads - 1}, not {head}")
    stack = site.split(".")[0]
    if key is None:
        key = _brightest(model, text, site, head, query, target)
    w = writers(model, text, stack, [query, key], layer=at.layer, target=target, keep=(site,))
    call = w.run.calls[site]
    if call.cap is not None:
        raise ValueError(f"{site}'s scores are soft-capped (cap {call.cap:g}): a capped score is not a sum of terms")
    i, j = w.positions
    seen = call.allowed(head, slice(i, i + 1), slice(j, j + 1))
    if seen is not None and not bool(seen.reshape(-1)[0]):
        raise ValueError(f"{site} head {head}: query {i} cannot see key {j}, so it has no score there")
    r = read(model, at, text, target)
    frozen = freeze(model, r.norm, r.x[[i, j]], r.h[[i, j]], f"{site}'s input norm")
    q, k = _parts(model, at, text, target, w.terms, frozen, (i, j), r)
    kv = call.kv_head(head)
    q_i, k_j = q[:, head, i].double(), k[:, kv, j].double()
    check(
        model,
        q_i.sum(0),
        call.q[head, i].double(),
        f"{site}'s queries are not an affine read of its stream (a norm or another non-linear step after the projection)",
    )
    check(
        model,
        k_j.sum(0),
        call.k[kv, j].double(),
        f"{site}'s keys are not an affine read of its stream (a norm or another non-linear step after the projection)",
    )
    terms = call.scale * q_i @ k_j.T
    score = float(call.scale * (call.q[head, i].double() @ call.k[kv, j].double()))
    bias = 0.0 if call.bias is None else float(call.bias[head if call.bias.shape[0] > 1 else 0, i, j])
    return QKAttribution(
        site,
        head,
        i,
        j,
        [*w.names, "constant"],
        terms.numpy(),
        score,
        bias,
        float(call.block(head, slice(i, i + 1), slice(j, j + 1))[0, 0]),
        list(w.run.tokens),
    )


def _brightest(model: Any, text: str, site: str, head: int, query: int, target: str | None) -> int:
    """The key ``head`` attends to most from ``query``."""
    call = model.cache(text, sites=[site], target=target).calls[site]
    _, t, _ = call.shape
    if not -t <= query < t:
        raise ValueError(f"position {query} is outside the {t} positions of the input")
    i = query % t
    return int(call.block(head, slice(i, i + 1), slice(0, call.shape[2]))[0].argmax())


@torch.no_grad()
def _parts(model, site, text, target, terms: Tensor, frozen: Frozen, at: tuple[int, int], r: Read):
    """q and k of each writer alone (writers + 1, heads, t, d): the writer's frozen-normed write at
    the two positions run through the attention module (any norm inside it frozen too), less the
    module's answer to nothing; the last row the constant (the norm's shift)."""
    n, _, d = terms.shape
    t = r.h.shape[0]
    i, j = at
    rows = torch.zeros(n + 2, t, d, dtype=terms.dtype)
    normed = frozen.linear(terms)  # terms (writers, 2, d): at i, then at j (the same where i = j)
    rows[:n, j] = normed[:, 1]
    rows[:n, i] = normed[:, 0]
    rows[n, [i, j]] = frozen.shift  # the constant; row n + 1 stays 0: the module's answer to nothing
    qs, ks = [], []
    for start in range(0, n + 2, CHUNK):
        call = attend(model, site, text, rows[start : start + CHUNK], target, r.inner)
        assert call.q is not None and call.k is not None  # a factored call (``attend`` checks)
        qs.append(call.q.detach().float())
        ks.append(call.k.detach().float())
    q, k = torch.cat(qs), torch.cat(ks)
    zero_q, zero_k = q[-1:], k[-1:]
    return torch.cat([q[:n] - zero_q, q[n : n + 1]]), torch.cat([k[:n] - zero_k, k[n : n + 1]])

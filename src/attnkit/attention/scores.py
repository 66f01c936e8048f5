"""Score functions: how well each key matches each query.

A score function maps queries ``q (..., t, d_q)`` and keys ``k (..., s, d_k)``
to unnormalised scores ``(..., t, s)``; turning scores into weights and
mixing values is :func:`attnkit.attention.attend.attend`'s job.

Keys are usually fixed while queries arrive one decoder step at a time, so
every score splits into ``prepare_keys(k)`` (work that depends on keys only,
done once per source sentence) and ``score(q, prepared)`` (per step).
``forward(q, k)`` does both.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..errors import unknown_choice


def scaled_dot(q: Tensor, k: Tensor) -> Tensor:
    """Vaswani et al. 2017, eq. 1: q^T k / sqrt(d_k); (..., t, d), (..., s, d) -> (..., t, s)."""
    return (q * (1.0 / math.sqrt(k.shape[-1]))) @ k.transpose(-2, -1)


class ScoreFunction(nn.Module):
    """Base class: ``forward(q, k) == score(q, prepare_keys(k))``."""

    formula: str  # the score, as `explain` shows it; set by each subclass
    terms_formula: str  # what each row of ``terms`` is
    factor_formula = ""  # what ``query_factor`` is, where the terms are a product with each key

    def __init__(self, *, query_dim: int, key_dim: int) -> None:
        super().__init__()
        if query_dim <= 0 or key_dim <= 0:
            raise ValueError(f"query_dim and key_dim must be positive, got {query_dim}, {key_dim}")
        self.query_dim = query_dim
        self.key_dim = key_dim

    def prepare_keys(self, k: Tensor) -> Tensor:
        """Key-only part of the score; (..., s, d_k) -> (..., s, ·)."""
        self._check_dim(k, self.key_dim, "key")
        return k

    def score(self, q: Tensor, prepared: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        """Scores (..., t, s) for queries (..., t, d_q) against keys (..., s, d_k)."""
        return self.score(q, self.prepare_keys(k))

    def terms(self, q: Tensor, k: Tensor) -> Tensor:
        """The per-dimension terms of one query's scores: q (d_q,), k (s, d_k) -> (s, ·), each
        row summing to that key's score (for a dot product, q ⊙ k_j)."""
        raise NotImplementedError(f"{type(self).__name__} has no per-dimension terms")

    def query_factor(self, q: Tensor) -> Tensor | None:
        """The vector that ``terms`` multiplies each key by, dimension by dimension (for a dot product,
        q itself); None where the terms are no such product."""
        return None

    @staticmethod
    def _check_dim(x: Tensor, expected: int, what: str) -> None:
        if x.shape[-1] != expected:
            raise ValueError(f"{what} last dimension is {x.shape[-1]}, expected {expected}")


class DotScore(ScoreFunction):
    """Luong et al. 2015, eq. 8 (dot): score(q, k) = q^T k. No parameters."""

    formula = "q · k"
    terms_formula = "q ⊙ k"

    def __init__(self, *, query_dim: int, key_dim: int | None = None) -> None:
        key_dim = query_dim if key_dim is None else key_dim
        if key_dim != query_dim:
            raise ValueError(f"dot score needs query_dim == key_dim, got {query_dim} and {key_dim}")
        super().__init__(query_dim=query_dim, key_dim=key_dim)

    def score(self, q: Tensor, prepared: Tensor) -> Tensor:
        self._check_dim(q, self.query_dim, "query")
        return q @ prepared.transpose(-2, -1)  # (..., t, s)

    factor_formula = "q"

    def terms(self, q: Tensor, k: Tensor) -> Tensor:
        return q * self.prepare_keys(k)

    def query_factor(self, q: Tensor) -> Tensor | None:
        return q


class ScaledDotScore(DotScore):
    """Vaswani et al. 2017, eq. 1: score(q, k) = q^T k / sqrt(d_k).

    The scaling keeps the variance of the score at ~1 for unit-variance inputs,
    so a large d_k does not saturate the softmax.
    """

    formula = "q · k / √d"
    terms_formula = "q ⊙ k / √d"

    def score(self, q: Tensor, prepared: Tensor) -> Tensor:
        self._check_dim(q, self.query_dim, "query")
        return scaled_dot(q, prepared)  # (..., t, s)

    factor_formula = "q / √d"

    def terms(self, q: Tensor, k: Tensor) -> Tensor:
        return q * self.prepare_keys(k) / math.sqrt(k.shape[-1])

    def query_factor(self, q: Tensor) -> Tensor | None:
        return q / math.sqrt(self.key_dim)


class GeneralScore(ScoreFunction):
    """Luong et al. 2015, eq. 8 (general, bilinear): score(q, k) = q^T W_a k.

    Computed as (W_a^T q) . k so the per-step cost is one projection of the query.
    """

    formula = "(W_aᵀ q) · k"
    terms_formula = "(W_aᵀ q) ⊙ k"

    def __init__(self, *, query_dim: int, key_dim: int) -> None:
        super().__init__(query_dim=query_dim, key_dim=key_dim)
        self.W_a = nn.Parameter(torch.empty(query_dim, key_dim))
        nn.init.xavier_uniform_(self.W_a)

    def score(self, q: Tensor, prepared: Tensor) -> Tensor:
        self._check_dim(q, self.query_dim, "query")
        return (q @ self.W_a) @ prepared.transpose(-2, -1)  # (..., t, s)

    factor_formula = "W_aᵀ q"

    def terms(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ self.W_a) * self.prepare_keys(k)  # (W_a^T q) ⊙ k_j

    def query_factor(self, q: Tensor) -> Tensor | None:
        return q @ self.W_a


class _TanhScore(ScoreFunction):
    """Shared form v^T tanh(A q + B k): ``prepare_keys`` gives B k once."""

    v_a: nn.Parameter  # (a,), set by each subclass

    def __init__(self, *, query_dim: int, key_dim: int, hidden_dim: int | None) -> None:
        super().__init__(query_dim=query_dim, key_dim=key_dim)
        self.hidden_dim = hidden_dim or key_dim
        if self.hidden_dim <= 0:
            raise ValueError(f"hidden_dim must be positive, got {hidden_dim}")

    def _project_query(self, q: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def score(self, q: Tensor, prepared: Tensor) -> Tensor:
        self._check_dim(q, self.query_dim, "query")
        aq = self._project_query(q)  # (..., t, a)
        energy = torch.tanh(aq.unsqueeze(-2) + prepared.unsqueeze(-3))  # (..., t, s, a)
        return energy @ self.v_a  # (..., t, s)

    def terms(self, q: Tensor, k: Tensor) -> Tensor:
        return self.v_a * torch.tanh(self._project_query(q) + self.prepare_keys(k))  # v_a ⊙ tanh(...)


class ConcatScore(_TanhScore):
    """Luong et al. 2015, eq. 8 (concat): score(q, k) = v_a^T tanh(W_a [q; k]).

    W_a is one (a, d_q + d_k) matrix as in the paper; applying it to the
    concatenation equals applying its query and key column blocks separately,
    which is how it is computed (the key block once per sentence).
    """

    formula = "v_a · tanh(W_a [q; k])"
    terms_formula = "v_a ⊙ tanh(W_a [q; k])"

    def __init__(self, *, query_dim: int, key_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__(query_dim=query_dim, key_dim=key_dim, hidden_dim=hidden_dim)
        a = self.hidden_dim
        self.W_a = nn.Parameter(torch.empty(a, query_dim + key_dim))
        self.v_a = nn.Parameter(torch.empty(a))
        nn.init.xavier_uniform_(self.W_a)
        nn.init.uniform_(self.v_a, -1.0 / math.sqrt(a), 1.0 / math.sqrt(a))

    def prepare_keys(self, k: Tensor) -> Tensor:
        self._check_dim(k, self.key_dim, "key")
        return k @ self.W_a[:, self.query_dim :].T  # (..., s, a)

    def _project_query(self, q: Tensor) -> Tensor:
        return q @ self.W_a[:, : self.query_dim].T


class AdditiveScore(_TanhScore):
    """Bahdanau et al. 2015, eq. A.1.2: score(q, k) = v_a^T tanh(W_a q + U_a k)."""

    formula = "v_a · tanh(W_a q + U_a k)"
    terms_formula = "v_a ⊙ tanh(W_a q + U_a k)"

    def __init__(self, *, query_dim: int, key_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__(query_dim=query_dim, key_dim=key_dim, hidden_dim=hidden_dim)
        a = self.hidden_dim
        self.W_a = nn.Linear(query_dim, a, bias=False)
        self.U_a = nn.Linear(key_dim, a, bias=False)
        self.v_a = nn.Parameter(torch.empty(a))
        nn.init.uniform_(self.v_a, -1.0 / math.sqrt(a), 1.0 / math.sqrt(a))

    def prepare_keys(self, k: Tensor) -> Tensor:
        self._check_dim(k, self.key_dim, "key")
        return self.U_a(k)  # (..., s, a)

    def _project_query(self, q: Tensor) -> Tensor:
        return self.W_a(q)


SCORES: dict[str, type[ScoreFunction]] = {
    "dot": DotScore,
    "scaled_dot": ScaledDotScore,
    "general": GeneralScore,
    "bilinear": GeneralScore,
    "concat": ConcatScore,
    "additive": AdditiveScore,
}


def build_score(
    name: str, *, query_dim: int, key_dim: int | None = None, hidden_dim: int | None = None
) -> ScoreFunction:
    """Build a score function by name: dot, scaled_dot, general (bilinear), concat, additive."""
    if name not in SCORES:
        raise unknown_choice("score function", name, sorted(SCORES))
    key_dim = query_dim if key_dim is None else key_dim
    cls = SCORES[name]
    if issubclass(cls, _TanhScore):
        return cls(query_dim=query_dim, key_dim=key_dim, hidden_dim=hidden_dim)
    return cls(query_dim=query_dim, key_dim=key_dim)

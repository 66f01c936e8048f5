"""What search returns, and the length penalty that ranks hypotheses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast, overload

import numpy as np
import torch
from torch import Tensor

from ..attention.sites import Listener, Weights
from ..models.interface import Seq2SeqModel
from .options import PENALTIES


@overload
def length_penalty(length: int, alpha: float, penalty: str = "fairseq") -> float: ...
@overload
def length_penalty(length: Tensor, alpha: float, penalty: str = "fairseq") -> Tensor: ...
def length_penalty(length: int | Tensor, alpha: float, penalty: str = "fairseq") -> float | Tensor:
    """lp(|Y|) for ``penalty`` (see ``PENALTIES``); alpha = 0 ranks by log-probability alone."""
    if penalty == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if penalty == "fairseq":
        return float(length) ** alpha if isinstance(length, int) else length.float() ** alpha
    raise ValueError(f"unknown length penalty {penalty!r}; choose from {', '.join(PENALTIES)}")


@dataclass
class Hypothesis:
    """One output: token ids (no BOS/EOS), its length-normalised score, its log-probability,
    whether it ended with EOS (False: cut at the length limit), and, when asked,
    cross-attention (layers, heads, t, s) and local-attention centres p_t (t,),
    where t counts the tokens plus the EOS step when there is one."""

    tokens: list[int]
    score: float
    log_prob: float
    finished: bool = True
    attention: np.ndarray | None = None
    p_t: np.ndarray | None = None


@dataclass
class SearchResult:
    """n-best lists, one per input sentence in input order, best first."""

    nbest: list[list[Hypothesis]]

    @property
    def best(self) -> list[list[int]]:
        return [hyps[0].tokens for hyps in self.nbest]


def max_lengths(src_mask: Tensor, ratio: float, extra: int) -> Tensor:
    """Per-sentence output limit: ratio * source length + extra tokens (b,). The source
    length is the count of real positions (tokens, or an image's pixels)."""
    return (src_mask.flatten(1).sum(1).float() * ratio).long() + extra


def alignments(model: Seq2SeqModel, asked: bool) -> tuple[Listener, ...]:
    """The listeners a search opens around each decoding step: the cross-attention's weights at
    every layer's site (``attention.sites.Weights``), when ``asked``; none otherwise."""
    if not asked:
        return ()
    return (Weights({s.name for s in model.attention_sites() if s.kind == "cross"}),)


def stack_cross(heard: tuple[Listener, ...]) -> tuple[Tensor, Tensor | None]:
    """One decoding step's cross-attention, as its sites handed it over -> (b, layers, heads, s)
    of the last query, p_t (b,) or None."""
    taken = cast(Weights, heard[0]).take()
    cross = torch.stack([w[:, :, -1] for _, w, _ in taken], dim=1)
    p_t = next((p[:, -1] for _, _, p in taken if p is not None), None)
    return cross, p_t

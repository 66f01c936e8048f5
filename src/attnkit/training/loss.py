"""Szegedy et al. 2016: label-smoothed cross-entropy, summed over non-padding target tokens.

loss = (1 - eps) * NLL(y) + eps * mean_v(-log p(v)): the target distribution puts
1 - eps on the reference and spreads eps uniformly over the vocabulary. The
caller divides by the number of target tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class LossSums:
    loss: Tensor  # summed smoothed loss (differentiable)
    nll: Tensor  # summed negative log-likelihood (for perplexity)
    tokens: Tensor  # number of target tokens (a tensor: no host sync in the training step)


def label_smoothed_loss(logits: Tensor, target: Tensor, *, smoothing: float, pad_id: int) -> LossSums:
    """logits (b, t, V), target (b, t) -> sums over tokens where target != pad_id."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), got {smoothing}")
    keep = target != pad_id  # (b, t)
    # Padding is masked by multiplication: boolean-indexing the (b, t, V) logits
    # would copy them forward and scatter them back in the backward pass.
    lprobs = torch.log_softmax(logits.float(), dim=-1)  # (b, t, V)
    nll = -lprobs.gather(-1, target[..., None]).squeeze(-1) * keep  # (b, t)
    if smoothing == 0.0:
        loss = nll
    else:  # sum * (eps / V) rather than mean: mean's backward divides the whole (b, t, V) gradient
        loss = (1.0 - smoothing) * nll - (lprobs.sum(-1) * (smoothing / lprobs.shape[-1])) * keep
    return LossSums(loss.sum(), nll.detach().sum(), keep.sum())

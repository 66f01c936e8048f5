"""Next-token scoring shared by greedy and beam search: the output projection,
each row's best tokens and its log-normaliser.

Neither search needs a full log-softmax: a token's log-probability is its logit
minus the row's log-sum-exp, and only the best few tokens per row are ever
looked at. So the (rows, V) logits, the largest tensor decoding makes (1,280
rows x 8,000 words = 41 MB per beam step), are read twice (top-k, then one exp
pass in place) and never copied. Computing them a block of rows at a time, to
keep each block in cache through the three passes, was measured and is slower
(BENCHMARKS.md, issue 7).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


def logsumexp_(logits: Tensor, top: Tensor) -> Tensor:
    """log sum exp over the last dim given each row's maximum ``top`` (rows, 1), computed
    in the logits' own memory, which it overwrites: decoding does not need them again,
    and allocating (rows, V) temporaries every step costs more than the arithmetic."""
    return top + logits.sub_(top).exp_().sum(dim=-1, keepdim=True).log_()


def best_tokens(output: nn.Linear, hidden: Tensor, width: int) -> tuple[Tensor, Tensor, Tensor]:
    """hidden (rows, d) -> the ``width`` highest logits per row, best first (rows, width),
    their token ids (rows, width), and each row's log-sum-exp over the vocabulary (rows, 1).
    Log-probabilities are ``logits - lse``."""
    logits = F.linear(hidden, output.weight, output.bias).float()
    if width == 1:
        best, words = logits.max(dim=-1, keepdim=True)
    else:
        best, words = logits.topk(min(width, logits.shape[-1]), dim=-1)
    return best, words, logsumexp_(logits, best[:, :1])

"""Next-token scoring shared by greedy and beam search: the output projection,
each row's best tokens and its log-normaliser.

Neither search needs a full log-softmax: a token's log-probability is its logit
minus the row's log-sum-exp, and only the best few tokens per row are ever
looked at. So the (rows, V) logits, the largest tensor decoding makes (1,280
rows x 8,000 words = 41 MB per beam step), are read twice (top-k, then one exp
pass in place) and never copied. Computing them a block of rows at a time, to
keep each block in cache through the three passes, was measured and is slower
(BENCHMARKS.md, "Tried, not adopted").

The logits can be written into a buffer the caller keeps across steps. On CPU
a fresh (1,280, 8,000) tensor is 41 MB, above glibc's largest mmap threshold:
every step would map new pages and fault each one in (300,000 page faults over
beam 5 on the Multi30k test set), where a reused buffer faults once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def logsumexp_(logits: Tensor, top: Tensor) -> Tensor:
    """log sum exp over the last dim given each row's maximum ``top`` (rows, 1), computed
    in the logits' own memory, which it overwrites: decoding does not need them again,
    and allocating (rows, V) temporaries every step costs more than the arithmetic."""
    return top + logits.sub_(top).exp_().sum(dim=-1, keepdim=True).log_()


def best_tokens(
    output: nn.Linear, hidden: Tensor, width: int, buffer: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """hidden (rows, d) -> the ``width`` highest logits per row, best first (rows, width),
    their token ids (rows, width), and each row's log-sum-exp over the vocabulary (rows, 1).
    Log-probabilities are ``logits - lse``. ``buffer``: float32 (at least rows, V) to
    compute the logits in (overwritten), used when the weights are float32 too and no
    gradient is being recorded (search runs under ``torch.inference_mode``)."""
    weight, bias = output.weight, output.bias
    if (
        buffer is not None
        and hidden.dtype == weight.dtype == buffer.dtype == torch.float32
        and not torch.is_grad_enabled()
    ):
        logits = buffer[: hidden.shape[0]]
        if bias is None:
            torch.mm(hidden, weight.t(), out=logits)
        else:
            torch.addmm(bias, hidden, weight.t(), out=logits)
    else:
        logits = F.linear(hidden, weight, bias).float()
    if width == 1:
        best, words = logits.max(dim=-1, keepdim=True)
    else:
        best, words = logits.topk(min(width, logits.shape[-1]), dim=-1)
    return best, words, logsumexp_(logits, best[:, :1])

"""Next-token scoring shared by greedy and beam search: the output projection,
each row's best tokens and its log-normaliser.

Neither search needs a full log-softmax: a token's log-probability is its logit
minus the row's log-sum-exp, and only the best few tokens per row are ever
looked at. So the (rows, V) logits, the largest tensor decoding makes (1,280
rows x 8,000 words = 41 MB per beam step), are read twice (top-k, then one exp
pass in place) and never copied.

The logits can be written into a buffer the caller keeps across steps. On CPU
a fresh (1,280, 8,000) tensor is 41 MB, above glibc's largest mmap threshold:
every step would map new pages and fault each one in (300,000 page faults over
beam 5 on the Multi30k test set), where a reused buffer faults once.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def logsumexp_(logits: Tensor, top: Tensor) -> Tensor:
    """log sum exp over the last dim given each row's maximum ``top`` (rows, 1), computed
    in the logits' own memory, which it overwrites: decoding does not need them again,
    and allocating (rows, V) temporaries every step costs more than the arithmetic."""
    return top + logits.sub_(top).exp_().sum(dim=-1, keepdim=True).log_()


def _logits(output: nn.Linear, hidden: Tensor, buffer: Tensor | None) -> Tensor:
    """hidden (rows, d) -> float32 logits (rows, V), in ``buffer`` when it can hold them (float32
    weights, no gradient recorded: search runs under ``torch.inference_mode``)."""
    weight, bias = output.weight, output.bias
    if (
        buffer is not None
        and hidden.dtype == weight.dtype == buffer.dtype == torch.float32
        and not torch.is_grad_enabled()
    ):
        logits = buffer[: hidden.shape[0]]
        if bias is None:
            return torch.mm(hidden, weight.t(), out=logits)
        return torch.addmm(bias, hidden, weight.t(), out=logits)
    return F.linear(hidden, weight, bias).float()


def best_tokens(
    output: nn.Linear, hidden: Tensor, width: int, buffer: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """hidden (rows, d) -> the ``width`` highest logits per row, best first (rows, width),
    their token ids (rows, width), and each row's log-sum-exp over the vocabulary (rows, 1).
    Log-probabilities are ``logits - lse``. ``buffer``: float32 (at least rows, V) to
    compute the logits in (overwritten), used when the weights are float32 too and no
    gradient is being recorded (search runs under ``torch.inference_mode``)."""
    logits = _logits(output, hidden, buffer)
    if width == 1:
        best, words = logits.max(dim=-1, keepdim=True)
    else:
        best, words = logits.topk(min(width, logits.shape[-1]), dim=-1)
    return best, words, logsumexp_(logits, best[:, :1])


def ensemble_best_tokens(
    outputs: list[nn.Linear], hidden: list[Tensor], width: int, buffers: tuple[Tensor, Tensor] | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """``best_tokens`` for an ensemble: each model's features ``hidden[m]`` (rows, d_m) through its
    own ``outputs[m]``; the scores are log of the models' mean probability, log(1/M sum_m p_m),
    already normalised (the returned log-normaliser is 0). ``buffers``: two float32 (at least
    rows, V) tensors to compute in (overwritten; see ``best_tokens``), the running log-sum and
    one model's log-probabilities, so that no (rows, V) tensor is allocated per step."""
    mixed: Tensor | None = None
    for output, h in zip(outputs, hidden):
        logits = _logits(output, h, None if buffers is None else buffers[0 if mixed is None else 1])
        log_probs = torch.log_softmax(logits, dim=-1, out=logits)
        mixed = log_probs if mixed is None else torch.logaddexp(mixed, log_probs, out=mixed)
    assert mixed is not None  # at least one model
    best, words = mixed.topk(min(width, mixed.shape[-1]), dim=-1)
    return best.sub_(math.log(len(outputs))), words, best.new_zeros(best.shape[0], 1)

"""Next-token scoring: top-k logits + log-sum-exp give the same log-probabilities
as a plain log-softmax over the whole vocabulary."""

import pytest
import torch
from torch import nn

from attnkit.search import scoring


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("in_buffer", [False, True])
@pytest.mark.parametrize("width", [1, 4, 10])
def test_best_tokens_match_log_softmax(width, in_buffer, bias):
    torch.manual_seed(0)
    output = nn.Linear(16, 50, bias=bias)
    hidden = torch.randn(37, 16)
    logits = output(hidden)
    want_logits, want_words = logits.topk(width, dim=-1)
    buffer = torch.full((40, 50), float("nan")) if in_buffer else None  # larger than needed, stale contents
    with torch.no_grad():
        best, words, lse = scoring.best_tokens(output, hidden, width, buffer)
    assert best.shape == words.shape == (37, width) and lse.shape == (37, 1)
    torch.testing.assert_close(best, want_logits, rtol=0, atol=1e-6)
    assert torch.equal(words, want_words)
    torch.testing.assert_close(best - lse, logits.log_softmax(-1).gather(1, want_words), rtol=0, atol=1e-5)


def test_width_beyond_the_vocabulary_is_capped():
    output = nn.Linear(8, 5, bias=True)
    best, words, _ = scoring.best_tokens(output, torch.randn(3, 8), 10)
    assert best.shape == (3, 5)
    assert sorted(words[0].tolist()) == list(range(5))


def test_a_buffer_of_another_dtype_is_not_used():
    output = nn.Linear(8, 5, bias=False).to(torch.bfloat16)
    hidden = torch.randn(3, 8, dtype=torch.bfloat16)
    buffer = torch.zeros(3, 5)
    with torch.no_grad():
        best, _, _ = scoring.best_tokens(output, hidden, 2, buffer)
    assert best.dtype == torch.float32 and torch.equal(buffer, torch.zeros(3, 5))

"""Next-token scoring: top-k logits + log-sum-exp give the same log-probabilities
as a plain log-softmax over the whole vocabulary."""

import pytest
import torch
from torch import nn

from attnkit.search import scoring


@pytest.mark.parametrize("width", [1, 4, 10])
def test_best_tokens_match_log_softmax(width):
    torch.manual_seed(0)
    output = nn.Linear(16, 50, bias=False)
    hidden = torch.randn(37, 16)
    logits = output(hidden)
    want_logits, want_words = logits.topk(width, dim=-1)
    best, words, lse = scoring.best_tokens(output, hidden, width)
    assert best.shape == words.shape == (37, width) and lse.shape == (37, 1)
    torch.testing.assert_close(best, want_logits, rtol=0, atol=1e-6)
    assert torch.equal(words, want_words)
    torch.testing.assert_close(best - lse, logits.log_softmax(-1).gather(1, want_words), rtol=0, atol=1e-5)


def test_width_beyond_the_vocabulary_is_capped():
    output = nn.Linear(8, 5, bias=True)
    best, words, _ = scoring.best_tokens(output, torch.randn(3, 8), 10)
    assert best.shape == (3, 5)
    assert sorted(words[0].tolist()) == list(range(5))

import pytest
import torch

from attnkit.attention import (
    as_attention_mask,
    causal_mask,
    combine,
    key_mask,
    padding_mask,
    window_mask,
)


def test_padding_mask():
    m = padding_mask(torch.tensor([3, 1]), 4)
    assert m.tolist() == [[True, True, True, False], [True, False, False, False]]
    assert key_mask(m).shape == (2, 1, 1, 4)


def test_causal_square_and_cached():
    assert torch.equal(causal_mask(3), torch.ones(3, 3, dtype=torch.bool).tril())
    # the last 2 queries of a 4-long sequence: bottom-right aligned
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    with pytest.raises(ValueError, match="s >= t"):
        causal_mask(3, 2)


def test_window_mask():
    m = window_mask(torch.tensor([0.0, 2.5]), 5, 1)
    assert m.tolist() == [[True, True, False, False, False], [False, False, True, True, False]]


def test_as_attention_mask_shapes_and_errors():
    assert as_attention_mask(torch.ones(3, 4, dtype=torch.bool)).shape == (1, 1, 3, 4)
    assert as_attention_mask(torch.ones(2, 1, 4, dtype=torch.bool)).shape == (2, 1, 1, 4)
    with pytest.raises(ValueError, match="boolean"):
        as_attention_mask(torch.ones(3, 4))
    with pytest.raises(ValueError, match="2 \\(t, s\\), 3"):
        as_attention_mask(torch.ones(4, dtype=torch.bool))


def test_combine():
    a = torch.tensor([True, False, True])
    b = torch.tensor([True, True, False])
    assert combine(a, None, b).tolist() == [True, False, False]
    assert combine(None) is None

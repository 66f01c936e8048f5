"""Sinusoidal and learned absolute positions."""

import math

import pytest
import torch

from attnkit import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from attnkit.positions import build_positions


@pytest.mark.parametrize("d_model", [8, 7])
def test_sinusoidal_matches_the_formula(d_model):
    pe = SinusoidalPositionalEncoding(d_model, max_len=50)(50)
    assert pe.shape == (50, d_model)
    for pos in range(50):
        for j in range(d_model):
            i2 = j - j % 2  # the "2i" of the formula
            angle = pos / 10000 ** (i2 / d_model)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, j].item() - expected) < 1e-6


def test_sinusoidal_same_position_same_vector_any_length():
    enc = SinusoidalPositionalEncoding(16, max_len=20)
    long = enc(40)  # past max_len: computed on the fly
    torch.testing.assert_close(enc(5), long[:5], rtol=0, atol=0)
    torch.testing.assert_close(enc(torch.tensor([3, 30])), long[[3, 30]], rtol=0, atol=0)
    assert long.abs().max() <= 1.0


def test_learned_lookup_and_overlong_input():
    emb = LearnedPositionalEmbedding(8, max_len=10)
    torch.testing.assert_close(emb(4), emb.embedding.weight[:4])
    with pytest.raises(ValueError, match=r"position 11 is past the learned table \(max_len=10\)"):
        emb(12)


def test_build_positions_names():
    assert isinstance(build_positions("sinusoidal", d_model=8, num_heads=2), SinusoidalPositionalEncoding)
    assert build_positions("none", d_model=8, num_heads=2) is None
    with pytest.raises(ValueError, match="unknown positional scheme 'rotary'.*valid: alibi"):
        build_positions("rotary", d_model=8, num_heads=2)
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3"):
        build_positions("rope", d_model=10, num_heads=3)
    with pytest.raises(ValueError, match="sequence length must be >= 0"):
        SinusoidalPositionalEncoding(8)(-1)

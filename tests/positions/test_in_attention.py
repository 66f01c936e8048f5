"""Relative (Shaw), T5, RoPE and ALiBi: formulas and shift invariance."""

import math

import pytest
import torch

from attnkit.attention import scaled_dot
from attnkit.positions import (
    ALiBi,
    RelativePositions,
    RotaryPositions,
    T5RelativeBias,
    alibi_slopes,
    build_positions,
    t5_bucket,
)

H, DH = 4, 8


def scores(scheme, q, k, q_pos, k_pos):
    """Everything a scheme does to the attention scores."""
    q, k = scheme.rotate(q, q_pos), scheme.rotate(k, k_pos)
    s = scaled_dot(q, k)
    bias = scheme.score_bias(q, q_pos, k_pos)
    return s if bias is None else s + bias


@pytest.mark.parametrize("name", ["relative", "t5", "rope", "alibi"])
def test_scores_unchanged_when_all_positions_shift(name):
    scheme = build_positions(name, d_model=H * DH, num_heads=H)
    for p in scheme.parameters():
        torch.nn.init.normal_(p)
    q, k = torch.randn(2, H, 5, DH), torch.randn(2, H, 7, DH)
    base = scores(scheme, q, k, torch.arange(5), torch.arange(7))
    for shift in (1, 13, 200):
        moved = scores(scheme, q, k, torch.arange(5) + shift, torch.arange(7) + shift)
        torch.testing.assert_close(moved, base, rtol=0, atol=1e-4)


def test_shaw_matches_paper_equations():
    k_clip = 3
    rel = RelativePositions(DH, max_distance=k_clip)
    q, k, _v = torch.randn(1, H, 5, DH), torch.randn(1, H, 6, DH), torch.randn(1, H, 6, DH)
    pos_q, pos_k = torch.arange(5), torch.arange(6)
    bias = rel.score_bias(q, pos_q, pos_k)
    w = torch.softmax(scaled_dot(q, k) + bias, -1)
    term = rel.value_term(w, pos_q, pos_k)
    for i in range(5):
        for j in range(6):
            a_k = rel.key_table[max(-k_clip, min(k_clip, j - i)) + k_clip]
            e = (q[0, :, i] * (k[0, :, j] + a_k)).sum(-1) / math.sqrt(DH)  # eq. 4
            torch.testing.assert_close(scaled_dot(q, k)[0, :, i, j] + bias[0, :, i, j], e)
        z = sum(w[0, :, i, j, None] * rel.value_table[max(-k_clip, min(k_clip, j - i)) + k_clip] for j in range(6))
        torch.testing.assert_close(term[0, :, i], z)  # eq. 3's a^V part


def t5_reference(rel, bidirectional, num_buckets=32, max_distance=128):
    """The T5 bucket rule for one integer distance (key - query), written from the paper's description."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        if rel > 0:
            bucket += num_buckets
        n = abs(rel)
    else:
        n = max(-rel, 0)
    exact = num_buckets // 2
    if n < exact:
        return bucket + n
    far = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (num_buckets - exact))
    return bucket + min(far, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets(bidirectional):
    rel = torch.arange(-300, 301)
    got = t5_bucket(rel, bidirectional=bidirectional, num_buckets=32, max_distance=128)
    assert got.tolist() == [t5_reference(r, bidirectional) for r in rel.tolist()]
    bias = T5RelativeBias(H, bidirectional=bidirectional).score_bias(
        torch.randn(1, H, 3, DH), torch.arange(3), torch.arange(4)
    )
    assert bias.shape == (1, H, 3, 4)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_unreached_buckets_are_those_no_short_offset_falls_in(bidirectional):
    """The buckets a model trained on sequences of at most reach + 1 tokens never trained: by the
    reference bucketing above, and never one that some offset within reach falls in."""
    from attnkit.inspection.positions import unreached_buckets

    for reach in (5, 41, 300):
        got = unreached_buckets(reach, num_buckets=32, max_distance=128, bidirectional=bidirectional)
        seen = {t5_reference(r, bidirectional) for r in range(-reach, reach + 1)}
        assert got == sorted(set(range(32)) - seen)
    near = unreached_buckets(41, num_buckets=32, max_distance=128, bidirectional=bidirectional)
    assert (16 in near) == bidirectional  # "after, distance 0" is reached by no offset at all
    assert 31 in near and 0 not in near and 7 not in near  # the farthest bucket is not trained; the nearest are


def test_rope_is_the_rotation_matrix():
    rope = RotaryPositions(DH)
    x = torch.randn(1, 1, 4, DH, dtype=torch.float64)
    got = rope.rotate(x.float(), torch.arange(4)).double()
    for m in range(4):
        for i in range(DH // 2):
            theta = m * 10000 ** (-2 * i / DH)
            rot = torch.tensor(
                [[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]], dtype=torch.float64
            )
            torch.testing.assert_close(
                got[0, 0, m, 2 * i : 2 * i + 2], rot @ x[0, 0, m, 2 * i : 2 * i + 2], rtol=0, atol=1e-5
            )
    torch.testing.assert_close(got.norm(dim=-1), x.norm(dim=-1), rtol=0, atol=1e-5)  # rotations keep length
    with pytest.raises(ValueError, match="even head_dim, got 7"):
        RotaryPositions(7)


def test_alibi_slopes_and_bias():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    # 12 heads: the 8-head sequence, then every other slope of the 16-head sequence
    expected = [2.0 ** -(i + 1) for i in range(8)] + [2.0 ** -(0.5 * (2 * i + 1)) for i in range(4)]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected))
    bias = ALiBi(2).score_bias(torch.randn(1, 2, 3, DH), torch.arange(3), torch.arange(3))
    torch.testing.assert_close(bias[0, 0], -torch.tensor([[0.0, 1, 2], [1, 0, 1], [2, 1, 0]]) * 2.0**-4)

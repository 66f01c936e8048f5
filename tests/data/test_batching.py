"""Token-count bucketing: budget respected, every example once, deterministic, little padding."""

import numpy as np
import pytest

from attnkit.data import BOS, EOS, PAD, BucketBatcher, inference_batches


@pytest.fixture
def corpus():
    rng = np.random.default_rng(0)
    src = [list(rng.integers(4, 50, rng.integers(1, 40))) for _ in range(2000)]
    tgt = [list(rng.integers(4, 50, max(1, len(s) + rng.integers(-3, 4)))) for s in src]
    return src, tgt


def test_batches_cover_each_example_once_within_budget(corpus):
    b = BucketBatcher(*corpus, batch_tokens=512, seed=3)
    batches = b.epoch(0)
    seen = np.sort(np.concatenate(batches))
    assert np.array_equal(seen, np.arange(2000))
    for idx in batches:
        batch = b.collate(idx)
        assert batch.src.shape[0] * max(batch.src.shape[1], batch.tgt_out.shape[1]) <= 512
    assert b.padding_fraction() < 0.1


def test_deterministic_per_seed_and_epoch(corpus):
    a = BucketBatcher(*corpus, batch_tokens=512, seed=3)
    b = BucketBatcher(*corpus, batch_tokens=512, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a.epoch(1), b.epoch(1)))
    assert not all(np.array_equal(x, y) for x, y in zip(a.epoch(1), a.epoch(2)))


def test_collate_layout():
    b = BucketBatcher([[5, 6], [7]], [[8], [9, 10, 11]], batch_tokens=100, seed=0)
    batch = b.collate(np.array([0, 1]))
    assert batch.src.tolist() == [[5, 6, EOS], [7, EOS, PAD]]
    assert batch.src_mask.tolist() == [[True, True, True], [True, True, False]]
    assert batch.tgt_in.tolist() == [[BOS, 8, PAD, PAD], [BOS, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, EOS, PAD, PAD], [9, 10, 11, EOS]]
    assert batch.n_tgt_tokens == 6


def test_inference_batches_sorted_and_complete(corpus):
    batches = inference_batches(corpus[0], 400)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(2000))


def test_budget_smaller_than_an_example():
    with pytest.raises(ValueError, match="batch_tokens=3 is smaller than the longest example"):
        BucketBatcher([[1, 2, 3, 4]], [[1]], batch_tokens=3, seed=0)

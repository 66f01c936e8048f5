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


class _Sampler:
    """A stand-in for subword sampling: draw k adds (k + i) % lengthen ids to pair i's target."""

    def __init__(self, corpus, lengthen):
        self.corpus, self.lengthen, self.calls = corpus, lengthen, []

    def __call__(self, epoch):
        k = len(self.calls)
        self.calls.append(epoch)
        src, tgt = self.corpus
        return src, [t + [7] * ((k + i) % self.lengthen) for i, t in enumerate(tgt)]


def test_each_epoch_is_drawn_once_and_kept_for_a_resumed_run(corpus, tmp_path):
    draw = _Sampler(corpus, 3)
    a = BucketBatcher(*corpus, batch_tokens=512, seed=3, resample=draw, max_len=100)
    a.draws = tmp_path / "subwords"
    a.epoch(0), a.epoch(1)
    first = a.epoch(1)  # the same epoch again: no new draw
    assert draw.calls == [0, 1]
    i = int(first[0][0])
    assert a.tgt[i] == corpus[1][i] + [7] * ((1 + i) % 3)  # the second draw's targets
    assert a.tgt_len[i] == len(a.tgt[i]) + 1
    for idx in first:  # batches cut from the drawn lengths
        batch = a.collate(idx)
        assert batch.src.shape[0] * max(batch.src.shape[1], batch.tgt_out.shape[1]) <= 512

    # a resumed run (a new batcher on the same file) reads epoch 1's draw back instead of drawing
    again = _Sampler(corpus, 3)
    b = BucketBatcher(*corpus, batch_tokens=512, seed=3, resample=again, max_len=100)
    b.draws = a.draws
    resumed = b.epoch(1)
    assert again.calls == [] and b.tgt == a.tgt and b.src == a.src
    assert all(np.array_equal(x, y) for x, y in zip(first, resumed))
    b.epoch(2)
    assert again.calls == [2] and b.kept_draw(2) is not None
    assert sorted(p.name for p in a.draws.iterdir()) == ["epoch_0.npz", "epoch_1.npz", "epoch_2.npz"]
    b.prune_draws(2)  # a checkpoint in epoch 2: the draws before it are done with
    assert sorted(p.name for p in a.draws.iterdir()) == ["epoch_2.npz"]
    c = BucketBatcher(*corpus, batch_tokens=512, seed=3, resample=_Sampler(corpus, 3), max_len=100)
    c.draws = a.draws
    c.epoch(1)  # no longer kept: drawn anew
    assert c.resample.calls == [1]
    short = BucketBatcher(corpus[0][:-1], corpus[1][:-1], batch_tokens=512, seed=3, resample=draw)
    short.draws = a.draws
    with pytest.raises(ValueError, match="holds a draw of 2000 pairs, not 1999"):
        short.epoch(2)


def test_a_sampled_side_too_long_keeps_its_fixed_segmentation(corpus):
    src, tgt = corpus
    b = BucketBatcher(src, tgt, batch_tokens=512, seed=0, resample=_Sampler(corpus, 50), max_len=45)
    b.epoch(0)
    assert max(map(len, b.tgt)) <= 45
    lengthened = [i for i in range(len(tgt)) if len(b.tgt[i]) > len(tgt[i])]
    kept = [i for i in range(len(tgt)) if len(tgt[i]) + i % 50 > 45]
    assert lengthened and kept and all(b.tgt[i] == tgt[i] for i in kept)
    with pytest.raises(ValueError, match="resampling gave"):
        BucketBatcher(src, tgt, batch_tokens=512, seed=0, resample=lambda e: (src, tgt[:-1])).epoch(0)

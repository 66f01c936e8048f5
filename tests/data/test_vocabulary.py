"""The caption word vocabulary and the image batches."""

import numpy as np
import pytest

from attnkit.data import BOS, EOS, PAD, UNK, ImageBatcher
from attnkit.data.vocabulary import WordVocabulary


def test_words_round_trip_and_specials_keep_the_tokenizer_ids(tmp_path):
    vocab = WordVocabulary.from_captions(["3 1 4", "1 5 9 2"])
    assert vocab.words[:4] == ["<pad>", "<unk>", "<s>", "</s>"] and (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    assert vocab.tgt_vocab == 4 + 6
    ids = vocab.encode_tgt(["9 1 7"])
    assert ids[0][2] == UNK and vocab.decode_tgt(ids) == ["9 1 <unk>"]
    vocab.save(tmp_path)
    assert WordVocabulary.load(tmp_path).words == vocab.words
    (tmp_path / "words.txt").write_text("a\na\n")
    with pytest.raises(ValueError, match="not a caption vocabulary"):
        WordVocabulary.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="words.txt"):
        WordVocabulary.load(tmp_path / "nowhere")


def test_image_batches_cover_every_scene_once_per_epoch_within_the_token_budget():
    rng = np.random.default_rng(0)
    images = rng.random((50, 8, 8)).astype(np.float32)
    tgt = [[4] * int(rng.integers(1, 6)) for _ in range(50)]
    batcher = ImageBatcher(images, tgt, batch_tokens=24, seed=3)
    batches = batcher.epoch(0)
    assert sorted(np.concatenate(batches).tolist()) == list(range(50))
    for idx in batches:
        b = batcher.collate(idx)
        assert b.src.shape == (len(idx), 8, 8) and b.src_mask.all()
        assert b.tgt_in.numel() <= 24 and (b.tgt_in[:, 0] == BOS).all()
        np.testing.assert_array_equal(b.src.numpy(), images[idx])
        assert b.n_tgt_tokens == sum(len(tgt[i]) + 1 for i in idx)
    assert [list(b) for b in batcher.epoch(0)] == [list(b) for b in batches]  # a pure function of (seed, epoch)
    assert [list(b) for b in batcher.epoch(1)] != [list(b) for b in batches]
    with pytest.raises(ValueError, match="smaller than the longest caption"):
        ImageBatcher(images, tgt, batch_tokens=3, seed=0)

import pytest

from attnkit.config import TokenizerConfig
from attnkit.data import Tokenizer
from attnkit.data.dates import date_pairs


@pytest.mark.parametrize("joint", [True, False])
@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_train_save_load_roundtrip(tmp_path, joint, kind):
    src, tgt = date_pairs(500, 0)
    tok = Tokenizer.train(TokenizerConfig(kind=kind, vocab_size=60, joint=joint, split_digits=True), src, tgt, tmp_path)
    again = Tokenizer.load(tmp_path)
    assert again.joint == joint and again.src_vocab == tok.src_vocab
    ids = again.encode_tgt(tgt[:20])
    assert again.decode_tgt(ids) == tgt[:20]
    assert "1" in again.src_pieces("1 may 2000")  # split_digits


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown tokenizer.kind 'wordpiece'"):
        Tokenizer.train(TokenizerConfig(kind="wordpiece"), ["a"], ["b"], tmp_path)
    with pytest.raises(FileNotFoundError, match="no tokenizer in"):
        Tokenizer.load(tmp_path)


def test_readable_labels_keep_word_boundaries():
    from attnkit.data.tokenizer import readable

    pieces = ["▁c", "ott", "on", "▁shirt", ".", "▁", "<unk>", "▁lä", "dt", ","]
    assert readable(pieces) == ["c", "·ott", "·on", "shirt", ".", "␣", "<unk>", "lä", "·dt", ","]
    assert readable(["ab", "▁cd"]) == ["ab", "cd"]  # a sentence's first piece starts a word

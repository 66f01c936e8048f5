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

    pieces = ["▁c", "ott", "on", "▁shirt", ".", "␣", "<unk>", "▁lä", "dt", ","]
    assert readable(pieces) == ["c", "##ott", "##on", "shirt", ".", "␣", "<unk>", "lä", "##dt", ","]
    assert readable(["ab", "▁cd"]) == ["ab", "cd"]  # a sentence's first piece starts a word


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_sampled_segmentations_spell_the_same_text(tmp_path, kind):
    src, tgt = date_pairs(300, 1)
    tok = Tokenizer.train(TokenizerConfig(kind=kind, vocab_size=80), src, tgt, tmp_path)
    fixed = tok.encode_tgt(tgt)
    s1, t1 = tok.sample(src, tgt, 0.1)
    _, t2 = tok.sample(src, tgt, 0.1)
    assert t1 != t2 and t1 != fixed  # every call draws anew
    assert tok.decode_tgt(t1) == tok.decode_tgt(t2) == tgt  # only the split differs
    assert tok.src.decode(s1) == src
    if kind == "bpe":  # BPE-dropout: skipping merges only splits pieces further
        assert all(len(a) >= len(b) for a, b in zip(t1, fixed))
        assert sum(map(len, t1)) > sum(map(len, fixed))


@pytest.mark.parametrize("joint", [True, False])
def test_right_to_left_targets_run_last_piece_first(tmp_path, joint):
    src, tgt = date_pairs(300, 2)
    cfg = TokenizerConfig(vocab_size=60, joint=joint, right_to_left=True)
    tok = Tokenizer.train(cfg, src, tgt, tmp_path)
    forward = Tokenizer.load(tmp_path)
    backward = Tokenizer.load(tmp_path, right_to_left=True)
    assert tok.right_to_left and backward.right_to_left and not forward.right_to_left
    ids = backward.encode_tgt(tgt)
    assert ids == [row[::-1] for row in forward.encode_tgt(tgt)]  # sentencepiece's pieces, last first
    assert backward.decode_tgt(ids) == tgt  # text out reads left to right
    assert backward.encode_src(src) == forward.encode_src(src)  # the source is read as it is
    assert backward.tgt_pieces(ids[0]) == forward.tgt_pieces(ids[0])  # the model's own order
    _, sampled = backward.sample(src, tgt, 0.1)
    assert backward.decode_tgt(sampled) == tgt
    assert not backward.same_as(forward) and backward.same_as(Tokenizer.load(tmp_path, right_to_left=True))

"""Word-level distillation: the teacher's words (``training.distillation``) and a run that learns them."""

import json

import numpy as np
import pytest
import torch

from attnkit.config import config_from_dict
from attnkit.data.batching import collate
from attnkit.loading.model_dir import load_model
from attnkit.training.distillation import TeacherWords, load_teacher, teacher_words
from attnkit.training.trainer import train
from checkpoints import assert_same_weights


def _pairs(tok, reversal, n=40):
    lines = (reversal / "train.src").read_text().splitlines()[:n]
    targets = (reversal / "train.tgt").read_text().splitlines()[:n]
    return tok.encode_src(lines), tok.encode_tgt(targets)


@pytest.mark.parametrize("top", [1, 5])
def test_the_teachers_words_are_its_most_likely_words_one_pair_at_a_time(trained_toys, reversal, top):
    """Batched and length-sorted, each row is what the model gives that pair alone."""
    model, tok, _ = load_model(trained_toys["transformer"])
    src, tgt = _pairs(tok, reversal)
    words = teacher_words([model], src, tgt, top=top, batch_tokens=64)
    assert words.ids.shape == words.probs.shape == (sum(len(t) + 1 for t in tgt), top)
    np.testing.assert_allclose(words.probs.sum(1), 1.0, rtol=1e-5)
    for i in (0, 7, 39):
        b = collate([src[i]], [tgt[i]], np.array([i]))
        with torch.no_grad():
            p = torch.softmax(model(b.src, b.src_mask, b.tgt_in).logits[0], -1)  # (t, V)
        best, ids = p.topk(top, -1)
        ours_ids, ours_probs = words.rows(np.array([i]))
        assert torch.equal(ours_ids, ids)
        torch.testing.assert_close(ours_probs, best / best.sum(-1, keepdim=True), rtol=1e-4, atol=1e-5)


def test_several_teachers_average_their_probabilities(trained_toys, reversal):
    teacher = load_teacher(f"{trained_toys['transformer']},{trained_toys['rnn']}")
    src, tgt = _pairs(teacher.tokenizer, reversal, n=5)
    vocab = teacher.models[0].output_projection.weight.shape[0]
    words = teacher_words(teacher.models, src, tgt, top=vocab)  # every word: nothing renormalised
    b = collate(src, tgt, np.arange(5))
    with torch.no_grad():
        p = sum(torch.softmax(m(b.src, b.src_mask, b.tgt_in).logits, -1) for m in teacher.models) / 2
    ids, probs = words.rows(np.arange(5))
    dense = torch.zeros(len(ids), vocab).scatter_(1, ids, probs)
    torch.testing.assert_close(dense, p[b.tgt_out != 0], rtol=1e-4, atol=1e-6)


def test_rows_follow_the_batch_order_and_the_table_round_trips(tmp_path):
    offsets = np.array([0, 2, 5, 6])
    ids = np.arange(12, dtype=np.int32).reshape(6, 2)
    words = TeacherWords(ids, np.full((6, 2), 0.5, dtype=np.float32), offsets)
    got, _ = words.rows(np.array([2, 0, 1]))
    assert got[:, 0].tolist() == [10, 0, 2, 4, 6, 8]
    assert words.fits([[1], [1, 2], []]) and not words.fits([[1], [1], []])
    words.save(tmp_path / "t.npz")
    back = TeacherWords.load(tmp_path / "t.npz")
    assert np.array_equal(back.ids, ids) and np.array_equal(back.offsets, offsets)


def _student(toy_config, reversal, out, teacher, **train_keys):
    cfg = toy_config(reversal, out, "transformer", teacher=str(teacher), **train_keys)
    cfg["tokenizer"] = {"vocab_size": 16}  # not the teacher's: the run takes the teacher's
    return cfg


def test_a_student_takes_the_teachers_vocabulary_and_learns_its_words(trained_toys, reversal, toy_config, tmp_path):
    source = trained_toys["transformer"]
    cfg = _student(toy_config, reversal, tmp_path / "student", source, teacher_weight=1.0)
    train(config_from_dict(cfg), quiet=True)
    out = tmp_path / "student"
    assert (out / "spm.joint.model").read_bytes() == (source / "spm.joint.model").read_bytes()
    assert (out / "teacher.npz").is_file()
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    bleu = [r["dev_bleu"] for r in log if r["kind"] == "valid"]
    # taught by the teacher's words alone (no reference in its loss) for the teacher's 400 updates, it
    # learns the task nearly as well (the teacher: dev BLEU about 90)
    assert bleu[-1] > 80


def test_a_stopped_student_resumes_with_the_kept_words(trained_toys, reversal, toy_config, tmp_path):
    source = trained_toys["transformer"]
    straight = _student(toy_config, reversal, tmp_path / "straight", source, max_steps=30, eval_every=10)
    train(config_from_dict(straight), quiet=True)
    stopped = _student(toy_config, reversal, tmp_path / "stopped", source, max_steps=20, eval_every=10)
    train(config_from_dict(stopped), quiet=True)
    stopped["train"]["max_steps"] = 30
    stopped["train"]["teacher"] = str(tmp_path / "gone")  # not read again: the run keeps its table
    with pytest.raises(ValueError, match="cannot change train.teacher when resuming"):
        train(config_from_dict(stopped), resume=True, quiet=True)
    stopped["train"]["teacher"] = str(source)
    train(config_from_dict(stopped), resume=True, quiet=True)
    assert_same_weights(tmp_path / "stopped", tmp_path / "straight")


def test_a_table_of_other_pairs_is_refused(trained_toys, reversal, toy_config, tmp_path):
    cfg = _student(toy_config, reversal, tmp_path / "s", trained_toys["transformer"], max_steps=10, eval_every=10)
    train(config_from_dict(cfg), quiet=True)
    table = tmp_path / "s" / "teacher.npz"
    words = TeacherWords.load(table)
    TeacherWords(words.ids[:-1], words.probs[:-1], words.offsets[:-1]).save(table)
    cfg["train"]["max_steps"] = 20
    with pytest.raises(ValueError, match="teacher's words of other pairs than this run's: remove it"):
        train(config_from_dict(cfg), resume=True, quiet=True)


def test_a_new_run_asks_the_teacher_again(trained_toys, reversal, toy_config, tmp_path):
    """A table left by a run stopped before its first checkpoint is not read by the next new run."""
    out = tmp_path / "s"
    out.mkdir()
    ids = np.ones((2, 1), dtype=np.int32)
    TeacherWords(ids, np.ones((2, 1), dtype=np.float32), np.array([0, 2])).save(out / "teacher.npz")
    train(config_from_dict(_student(toy_config, reversal, out, trained_toys["transformer"], max_steps=1)), quiet=True)
    assert len(TeacherWords.load(out / "teacher.npz").offsets) == 2801  # every training pair's words


def test_bad_teachers_are_refused_before_anything_is_written(trained_toys, reversal, toy_config, tmp_path):
    out = tmp_path / "s"
    cfg = _student(toy_config, reversal, out, tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"train\.teacher=.*nowhere: model directory not found"):
        train(config_from_dict(cfg), quiet=True)
    other = toy_config(reversal, tmp_path / "other", "transformer", max_steps=1, eval_every=1)
    other["tokenizer"] = {"vocab_size": 16}  # fewer pieces than the teacher's 21
    train(config_from_dict(other), quiet=True)
    cfg = _student(toy_config, reversal, out, trained_toys["transformer"], init_from=str(tmp_path / "other"))
    with pytest.raises(ValueError, match="have different vocabularies: the student learns the teacher's words"):
        train(config_from_dict(cfg), quiet=True)
    cfg = _student(toy_config, reversal, out, f"{trained_toys['transformer']},{tmp_path / 'other'}")
    with pytest.raises(ValueError, match="have different vocabularies; teachers need one"):
        train(config_from_dict(cfg), quiet=True)
    cfg = _student(toy_config, reversal, out, trained_toys["transformer"])
    cfg["tokenizer"]["sampling"] = 0.1
    with pytest.raises(ValueError, match=r"needs a fixed segmentation \(tokenizer.sampling=0, not 0.1\)"):
        train(config_from_dict(cfg), quiet=True)
    assert not out.exists()

import pytest
import torch

from attnkit.loading.model_dir import average_checkpoints, load_checkpoint, save_atomic


def test_atomic_save_leaves_no_temporary(tmp_path):
    path = tmp_path / "c.pt"
    save_atomic({"model": {"w": torch.ones(2)}}, path)
    save_atomic({"model": {"w": torch.zeros(2)}}, path)
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.zeros(2))


def test_corrupt_and_missing_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"definitely not a checkpoint")
    with pytest.raises(ValueError, match="bad.pt is not a readable checkpoint") as err:
        load_checkpoint(bad)
    assert "\n" not in str(err.value)
    truncated = tmp_path / "cut.pt"
    save_atomic({"model": {"w": torch.ones(1000)}}, truncated)
    truncated.write_bytes(truncated.read_bytes()[:500])
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(truncated)
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "none.pt")
    other = tmp_path / "other.pt"
    torch.save({"weights": 1}, other)
    with pytest.raises(ValueError, match="not an attnkit checkpoint"):
        load_checkpoint(other)


def test_average_is_the_mean(tmp_path):
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"{i}.pt")
        save_atomic({"model": {"w": torch.full((2,), float(i)), "n": torch.tensor(7)}}, paths[-1])
    avg = average_checkpoints(paths)
    assert torch.equal(avg["w"], torch.ones(2)) and avg["n"] == 7
    save_atomic({"model": {"v": torch.ones(1)}}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="different parameters"):
        average_checkpoints([paths[0], tmp_path / "x.pt"])

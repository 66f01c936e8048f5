"""Digit scenes: real scans placed without overlap, captions read off the scene, held-out scans apart."""

import numpy as np
import pytest

pytest.importorskip("sklearn")

from attnkit.data.scenes import DIGIT, Box, load_digits, make_scenes, split_scans


def test_scans_split_by_scan_with_every_digit_on_both_sides():
    scans, labels = load_digits()
    assert scans.shape == (1797, 8, 8) and scans.min() >= 0.0 and scans.max() <= 1.0
    train, test = split_scans(labels)
    assert not set(train) & set(test) and len(train) + len(test) == len(labels)
    assert set(labels[train]) == set(labels[test]) == set(range(10))


def test_scenes_place_real_scans_in_their_boxes_in_reading_order():
    scans, labels = load_digits()
    for scene in make_scenes(20, seed=3, noise=0.0):
        assert 3 <= len(scene.words) <= 5 and len(scene.words) == len(scene.boxes)
        rows = [b.top // 10 for b in scene.boxes]  # 10-pixel slots on a 32-pixel canvas
        assert [(r, b.left) for r, b in zip(rows, scene.boxes)] == sorted(
            (r, b.left) for r, b in zip(rows, scene.boxes)
        )
        for i, a in enumerate(scene.boxes):
            assert a.top >= 0 and a.top + DIGIT <= 32 and a.left >= 0 and a.left + DIGIT <= 32
            assert not any(a.overlaps(b) for b in scene.boxes[i + 1 :])
            patch = scene.image[a.top : a.top + DIGIT, a.left : a.left + DIGIT]
            # without noise the patch is exactly a scan of the digit its word names
            match = [k for k in np.flatnonzero(labels == int(scene.words[i])) if np.array_equal(scans[k], patch)]
            assert match
        covered = np.zeros((32, 32), bool)
        for b in scene.boxes:
            covered[b.top : b.top + b.height, b.left : b.left + b.width] = True
        assert not scene.image[~covered].any()  # nothing outside the boxes


def test_held_out_scenes_use_only_held_out_scans():
    scans, labels = load_digits()
    _, test = split_scans(labels)
    for scene in make_scenes(10, held_out=True, seed=1, noise=0.0):
        for b in scene.boxes:
            patch = scene.image[b.top : b.top + DIGIT, b.left : b.left + DIGIT]
            users = {int(k) for k in np.flatnonzero((scans == patch).all(axis=(1, 2)))}
            assert users & set(test.tolist()), "a held-out scene used a scan that is not held out"


def test_scenes_are_a_function_of_the_seed():
    a, b = make_scenes(3, seed=7), make_scenes(3, seed=7)
    assert all(np.array_equal(x.image, y.image) and x.words == y.words for x, y in zip(a, b))
    assert Box(0, 0, 8, 8).overlaps(Box(7, 7, 8, 8)) and not Box(0, 0, 8, 8).overlaps(Box(8, 0, 8, 8))


def test_without_scikit_learn_the_scenes_say_how_to_get_it(monkeypatch, capsys, tmp_path):
    from attnkit.cli import main

    monkeypatch.setitem(__import__("sys").modules, "sklearn.datasets", None)  # import fails as if not installed
    with pytest.raises(ValueError, match=r"pip install 'attnkit\[images\]'"):
        load_digits()
    assert main(["demo", "--task", "caption", "--out-dir", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnkit demo: error: the digit scenes need scikit-learn") and len(err.splitlines()) == 1
    assert not (tmp_path / "d").exists()

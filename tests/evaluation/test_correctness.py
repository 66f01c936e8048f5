"""Attention correctness on hand-made maps whose answers are known."""

import numpy as np
import pytest

from attnkit.data.images import Box
from attnkit.evaluation.correctness import attention_correctness, attention_in_box


def test_all_weight_on_a_region_inside_the_box_scores_one():
    w = np.zeros((4, 4))
    w[1, 2] = 1.0  # region rows 8-15, columns 16-23 of a 32 x 32 image
    assert attention_in_box(w, Box(8, 16, 8, 8), (32, 32)) == pytest.approx(1.0)
    assert attention_in_box(w, Box(0, 0, 8, 8), (32, 32)) == pytest.approx(0.0)


def test_uniform_attention_scores_the_box_share_of_the_image():
    w = np.full((4, 4), 1 / 16)
    assert attention_in_box(w, Box(3, 5, 8, 8), (32, 32)) == pytest.approx(64 / 1024)


def test_a_region_cut_by_the_box_counts_by_its_area_inside():
    w = np.zeros((4, 4))
    w[0, 0] = 1.0  # pixels 0-7 x 0-7; the box covers rows 4-11, columns 0-7: half of it
    assert attention_in_box(w, Box(4, 0, 8, 8), (32, 32)) == pytest.approx(0.5)
    w = np.array([[3.0, 1.0]])  # two regions of a 8 x 16 image; box = the right half
    assert attention_in_box(w, Box(0, 8, 8, 8), (8, 16)) == pytest.approx(0.25)  # weights need not sum to 1


def test_correctness_averages_naming_words_beside_the_uniform_baseline():
    on = np.zeros((4, 4))
    on[0, 0] = 1.0
    result = attention_correctness(
        [on, np.full((4, 4), 1 / 16), on], [Box(0, 0, 8, 8), Box(0, 0, 16, 16), None], (32, 32)
    )
    assert result.words == 2
    assert result.score == pytest.approx((1.0 + 0.25) / 2)
    assert result.uniform == pytest.approx((64 / 1024 + 256 / 1024) / 2)
    assert "uniform attention" in str(result)


@pytest.mark.parametrize(
    "args, message",
    [
        ((np.ones(4), Box(0, 0, 8, 8), (32, 32)), "grid"),
        ((np.ones((2, 2)), Box(30, 0, 8, 8), (32, 32)), "not inside"),
        ((np.zeros((2, 2)), Box(0, 0, 8, 8), (32, 32)), "zero"),
    ],
)
def test_bad_maps_and_boxes_are_errors(args, message):
    with pytest.raises(ValueError, match=message):
        attention_in_box(*args)

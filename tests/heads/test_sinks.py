"""Sink accounting against the dense maps: the first token's weight, the delimiters', the value-norm
share, and a learned sink's share, which equals what its row's weights lack (GPT-OSS)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import attnkit
import families
import tiny_hf
from attnkit.heads import sinks
from attnkit.heads.detectors import DELIMITERS, SINK_KEYS


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return attnkit.load(str(tiny_hf.build("llama", tmp_path_factory.mktemp("llama"), positions=64)))


def test_the_measures_are_the_dense_maps(llama):
    words = random.Random(0).choices(tiny_hf.WORDS, k=30)
    text = " ".join(w if i % 7 else w + " ." for i, w in enumerate(words))
    record = sinks.recorded_with_values(llama, llama.prepare([text], max_new_tokens=0)[0])
    keys = record.keys("decoder")
    delim = np.array([j > 0 and k in DELIMITERS for j, k in enumerate(keys)])
    assert delim.any()
    account = sinks.sink_account([record], "decoder")
    for layer in range(record.maps.shape("decoder")[0]):
        call = record.maps.call("decoder", layer)
        h, t, s = call.shape
        w = np.stack([record.view("decoder", layer, i).dense() for i in range(h)])  # (h, t, s)
        counted = np.arange(t) + s - t + 1 >= SINK_KEYS
        norms = call.v.float().norm(dim=-1).repeat_interleave(h // call.v.shape[0], 0).numpy()  # (h, s)
        want = {
            "first": w[:, counted, 0].mean(-1),
            "delimiters": (w[:, counted] * delim).sum(-1).mean(-1),
            "value_share": (w[:, counted, 0] * norms[:, :1] / (w[:, counted] * norms[:, None]).sum(-1)).mean(-1),
            "value_ratio": norms[:, 0] / norms[:, 1:].mean(-1),
        }
        for name, x in want.items():
            np.testing.assert_allclose(account.measures[name][layer], x, atol=1e-6, err_msg=name)
        assert (account.measures["learned"][layer] == 0).all()  # Llama has no learned sink
    assert account.sink_share == float((account.measures["first"] > 0.3).mean())
    assert "sink heads (first token > 0.3" in account.report()


def test_a_learned_sink_takes_what_the_weights_lack():
    from attnkit.pretrained import hf

    model = families.build("gpt_oss")
    feed = families.inputs(model)
    rec, _ = hf.from_object(model, tokenizer="(ids)").forward(feed["input_ids"][0].tolist())
    for call in rec.calls:
        h, t, s = call.shape
        got, n = sinks.sink_sums(call, [str(i) for i in range(s)])
        lack = []
        from attnkit.attention.record import MapView

        for head in range(h):
            w = MapView(call, head).dense()
            lack.append((1 - w.sum(-1))[np.arange(t) + s - t + 1 >= SINK_KEYS].mean())
        np.testing.assert_allclose(got["learned"] / n, np.array(lack), atol=1e-5)
        assert (got["learned"] / n).max() > 0.05
        assert np.isnan(got["value_ratio"]).all()  # this record kept no values


def test_sinks_need_inputs():
    with pytest.raises(ValueError, match="no inputs"):
        sinks.sink_account([], "decoder")
    torch.manual_seed(0)

"""The model-FLOP formulas against PyTorch's own count (torch.utils.flop_counter) of a real
training step, and the MFU the trainer logs."""

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attnkit.config import ModelConfig, RNNConfig, TransformerConfig
from attnkit.data.tokenizer import PAD
from attnkit.models import build_model
from attnkit.training.flops import rnn_flops, transformer_flops, update_flops
from attnkit.training.loss import projected_label_smoothed_loss

VOCAB = 97


def _counted_step(m: ModelConfig, batch: int, src_len: int, tgt_len: int) -> int:
    """FLOPs PyTorch counts in one forward + backward as the trainer runs it (fused output loss)."""
    model = build_model(m, src_vocab=VOCAB, tgt_vocab=VOCAB, pad_id=PAD, shared_vocab=True)
    src = torch.randint(4, VOCAB, (batch, src_len))
    tgt_in, tgt_out = torch.randint(4, VOCAB, (batch, tgt_len)), torch.randint(4, VOCAB, (batch, tgt_len))
    with FlopCounterMode(display=False) as counter:
        out = model(src, src != PAD, tgt_in, project=False)
        loss = projected_label_smoothed_loss(
            out.hidden, model.output_projection.weight, tgt_out, smoothing=0.1, pad_id=PAD
        ).loss
        loss.backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("layers,d,ffn,heads", [(2, 32, 64, 4), (1, 48, 96, 3)])
def test_transformer_formula_equals_pytorch_count(layers, d, ffn, heads):
    m = ModelConfig(
        arch="transformer",
        d_model=d,
        encoder_layers=layers,
        decoder_layers=layers,
        transformer=TransformerConfig(ffn=ffn, heads=heads),
    )
    batch, s, t = 3, 7, 5
    counted = _counted_step(m, batch, s, t)
    assert transformer_flops(m, [s] * batch, [t] * batch, VOCAB) == pytest.approx(counted, rel=1e-9)


def test_rnn_formula_equals_pytorch_count_without_the_lstm_cells():
    """PyTorch's counter sees the attention, the attentional layer and the output layer but not
    the fused LSTM kernels: the formula less its gate FLOPs equals the count."""
    m = ModelConfig(arch="rnn", d_model=16, encoder_layers=1, decoder_layers=1, dropout=0.0, rnn=RNNConfig(hidden=24))
    batch, s, t = 2, 9, 4
    counted = _counted_step(m, batch, s, t)
    gates = 3 * 2 * (2 * 4 * 12 * (16 + 12) * batch * s + 4 * 24 * (16 + 24 + 24) * batch * t)
    assert rnn_flops(m, [s] * batch, [t] * batch, VOCAB) - gates == pytest.approx(counted, rel=1e-9)


def test_padding_is_not_counted():
    m = ModelConfig(
        arch="transformer",
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        transformer=TransformerConfig(ffn=64, heads=4),
    )
    whole = transformer_flops(m, [9, 9], [7, 7], VOCAB)
    assert transformer_flops(m, [9, 3], [7, 2], VOCAB) < whole
    assert transformer_flops(m, [9], [7], VOCAB) * 2 == pytest.approx(whole)
    assert update_flops(ModelConfig(arch="encoder"), [3], [3], VOCAB) is None


def test_matmul_peak_is_2n_cubed_over_the_fastest_product(monkeypatch):
    """With the clock replaced by one whose products take 0.5 s, 0.25 s and 0.4 s: 2 n^3 / 0.25."""
    import attnkit.training.flops as flops

    ticks = iter([0.0, 0.5, 1.0, 1.25, 2.0, 2.4])
    monkeypatch.setattr(flops.time, "perf_counter", lambda: next(ticks))
    assert flops.matmul_peak.__wrapped__("cpu", n=64, reps=3) == 2 * 64**3 / 0.25


def test_trainer_logs_mfu(trained_toys):
    records = [json.loads(line) for line in (trained_toys["transformer"] / "log.jsonl").read_text().splitlines()]
    mfu = [r["mfu"] for r in records if r["kind"] == "train"]
    assert mfu and all(0 < x < 1.5 for x in mfu)

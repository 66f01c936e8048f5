"""Learnable Fourier features (Li et al. 2021): the features' defining properties, shapes,
errors, training signal, and the scheme wired into a Transformer by name."""

import pytest
import torch

from attnkit.config import ModelConfig, TransformerConfig
from attnkit.models import build_model
from attnkit.positions import FourierPositions, build_positions


def test_features_are_unit_frequency_pairs_with_shift_invariant_products():
    torch.manual_seed(0)
    pe = FourierPositions(32, dims=2, features=16)
    x = torch.randn(50, 2) * 20
    r = pe.features_of(x)
    assert r.shape == (50, 16)
    # each frequency contributes cos^2 + sin^2 = 1, scaled by 1/F: |r_x|^2 = (F/2)/F
    torch.testing.assert_close(r.pow(2).sum(-1), torch.full((50,), 0.5))
    # r_x . r_y = (1/F) sum_k cos(w_k . (x - y)): a function of the offset only
    shift = torch.tensor([[3.5, -7.0]])
    here = (r * pe.features_of(x + 1.0)).sum(-1)
    moved = (pe.features_of(x + shift) * pe.features_of(x + shift + 1.0)).sum(-1)
    torch.testing.assert_close(here, moved, atol=1e-5, rtol=1e-5)
    w = pe.frequencies.detach()
    expected = torch.cos((x[:1] - x[1:2]) @ w.t()).sum() / 16
    torch.testing.assert_close((r[0] * r[1]).sum(), expected, atol=1e-6, rtol=1e-5)


def test_initial_frequencies_follow_gamma():
    torch.manual_seed(0)
    pe = FourierPositions(8, features=20000, gamma=4.0)
    assert abs(pe.frequencies.std().item() - 1 / 4.0) < 0.01  # W_r ~ N(0, gamma^-2)


def test_one_dimensional_scheme_encodes_token_positions_and_learns():
    torch.manual_seed(0)
    pe = build_positions("fourier", d_model=16, num_heads=4)
    assert isinstance(pe, FourierPositions)
    table = pe(12)
    assert table.shape == (12, 16)
    torch.testing.assert_close(pe(torch.arange(5, 9)), table[5:9])  # an offset decoder's positions
    assert pe(5000).shape == (5000, 16)  # no table, no maximum length
    table.pow(2).sum().backward()
    assert pe.frequencies.grad is not None and pe.frequencies.grad.abs().sum() > 0  # the frequencies are trained


def test_two_dimensional_positions_take_coordinates():
    pe = FourierPositions(16, dims=2)
    rows, cols = torch.meshgrid(torch.arange(3.0), torch.arange(4.0), indexing="ij")
    assert pe.encode(torch.stack([rows.flatten(), cols.flatten()], -1)).shape == (12, 16)
    with pytest.raises(ValueError, match="takes coordinates"):
        pe(5)
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        pe.encode(torch.zeros(4, 3))


@pytest.mark.parametrize(
    "kwargs, message", [(dict(features=7), "even"), (dict(gamma=0.0), "gamma"), (dict(dims=0), "dimension")]
)
def test_bad_settings_are_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FourierPositions(16, **kwargs)


def test_a_transformer_with_fourier_positions_learns_and_moves_its_frequencies():
    """A few dozen Adam steps on one fixed batch: the loss falls by more than half, and the
    gradient reaches the Fourier frequencies, which move."""
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="transformer",
        d_model=16,
        layers=1,
        dropout=0.0,
        positions="fourier",
        transformer=TransformerConfig(heads=2, ffn=32),
    )
    model = build_model(cfg, src_vocab=20, tgt_vocab=20, pad_id=0, shared_vocab=True)
    schemes = [m for m in model.position_schemes() if isinstance(m, FourierPositions)]
    before = [m.frequencies.detach().clone() for m in schemes]
    src = torch.randint(3, 20, (4, 7))
    tgt = torch.randint(3, 20, (4, 6))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        logits = model(src, src != 0, tgt).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 20), tgt.roll(-1, 1).reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert schemes and losses[-1] < 0.5 * losses[0], losses[::10]
    assert all(not torch.equal(m.frequencies, b) for m, b in zip(schemes, before))

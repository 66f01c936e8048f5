import pytest
import torch

from attnkit.models.dropout import Dropout, fast_dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keep_rate_scale_and_gradient(p):
    x = torch.ones(400_000, requires_grad=True)
    y = fast_dropout(x, p)
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.005
    assert abs(y.mean().item() - 1.0) < 0.01  # inverted dropout keeps the expectation
    assert torch.allclose(y[kept], torch.full_like(y[kept], y[kept][0].item()))
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # d(x * mask * s)/dx = mask * s


def test_eval_identity_and_shapes():
    d = Dropout(0.3)
    x = torch.randn(3, 5, 7)
    assert d(x).shape == x.shape
    d.eval()
    assert d(x) is x
    assert fast_dropout(x, 0.0) is x
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        Dropout(1.0)


def test_follows_torch_seed():
    x = torch.ones(1000)
    torch.manual_seed(5)
    a = fast_dropout(x, 0.3)
    torch.manual_seed(5)
    assert torch.equal(a, fast_dropout(x, 0.3))

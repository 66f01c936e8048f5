import pytest
import torch
import torch.nn.functional as F

from attnkit.training import label_smoothed_loss


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_matches_pytorch_cross_entropy_with_label_smoothing(eps):
    logits = torch.randn(3, 5, 11)
    target = torch.randint(1, 11, (3, 5))
    target[1, 3:] = 0  # padding
    ours = label_smoothed_loss(logits, target, smoothing=eps, pad_id=0)
    ref = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, label_smoothing=eps, reduction="sum")
    torch.testing.assert_close(ours.loss, ref)
    nll = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, reduction="sum")
    torch.testing.assert_close(ours.nll, nll)
    assert ours.tokens == 13


def test_padding_gets_no_gradient():
    logits = torch.randn(2, 4, 7, requires_grad=True)
    target = torch.tensor([[1, 2, 0, 0], [3, 4, 5, 6]])
    label_smoothed_loss(logits, target, smoothing=0.1, pad_id=0).loss.backward()
    assert (logits.grad[0, 2:] == 0).all() and (logits.grad[1] != 0).any()


def test_bad_smoothing():
    with pytest.raises(ValueError, match=r"label smoothing must be in \[0, 1\), got 1.5"):
        label_smoothed_loss(torch.randn(1, 1, 3), torch.ones(1, 1, dtype=torch.long), smoothing=1.5, pad_id=0)

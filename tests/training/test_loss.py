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


# ---------------------------------------------------------------- fused projection + loss
from attnkit.training.loss import projected_label_smoothed_loss  # noqa: E402


def _reference(hidden, weight, target, eps):
    return label_smoothed_loss(hidden @ weight.t(), target, smoothing=eps, pad_id=0)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_projected_loss_equals_logits_loss_with_gradients(eps):
    torch.manual_seed(0)
    hidden = torch.randn(3, 6, 8, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(13, 8, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, 13, (3, 6))
    target[0, 4:] = 0
    target[2, 1:] = 0
    ref = _reference(hidden, weight, target, eps)
    ref_grads = torch.autograd.grad(ref.loss * 0.37, (hidden, weight))
    ours = projected_label_smoothed_loss(hidden, weight, target, smoothing=eps, pad_id=0)
    grads = torch.autograd.grad(ours.loss * 0.37, (hidden, weight))
    torch.testing.assert_close(ours.loss, ref.loss)
    torch.testing.assert_close(ours.nll, ref.nll)
    assert ours.tokens == ref.tokens == 11
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    assert (grads[0][2, 1:] == 0).all()  # padding positions get no gradient


def test_projected_loss_backward_is_once_only():
    """The backward reuses the saved logits' memory, so a second backward is refused, not wrong."""
    hidden = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    loss = projected_label_smoothed_loss(
        hidden, weight, torch.tensor([[1, 2, 0], [3, 6, 5]]), smoothing=0.2, pad_id=0
    ).loss
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError):
        loss.backward()


def test_projected_loss_float32_workspace_is_reused_safely():
    """float32 CPU borrows the shared logits buffer; interleaved forwards must not corrupt each other."""
    torch.manual_seed(2)
    weight = torch.randn(50, 16, requires_grad=True)
    batches = [(torch.randn(4, 5, 16, requires_grad=True), torch.randint(1, 50, (4, 5))) for _ in range(2)]
    expected = []
    for h, t in batches:
        expected.append(torch.autograd.grad(_reference(h, weight, t, 0.1).loss, (h, weight)))
    first, second = (projected_label_smoothed_loss(h, weight, t, smoothing=0.1, pad_id=0) for h, t in batches)
    for sums, (h, _), exp in ((second, batches[1], expected[1]), (first, batches[0], expected[0])):
        for g, r in zip(torch.autograd.grad(sums.loss, (h, weight)), exp):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)
    with torch.inference_mode():  # no gradient wanted: the buffer is handed straight back
        projected_label_smoothed_loss(batches[0][0], weight, batches[0][1], smoothing=0.1, pad_id=0)
    h, t = batches[0]
    g = torch.autograd.grad(projected_label_smoothed_loss(h, weight, t, smoothing=0.1, pad_id=0).loss, (h, weight))
    torch.testing.assert_close(g[0], expected[0][0], rtol=1e-4, atol=1e-5)


def test_projected_loss_under_bf16_autocast_is_close():
    torch.manual_seed(3)
    hidden = torch.randn(4, 5, 32, requires_grad=True)
    weight = torch.randn(40, 32, requires_grad=True)
    target = torch.randint(1, 40, (4, 5))
    ref = _reference(hidden, weight, target, 0.1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = projected_label_smoothed_loss(hidden, weight, target, smoothing=0.1, pad_id=0)
    ours.loss.backward()
    assert abs(ours.loss.item() - ref.loss.item()) / ref.loss.item() < 2e-2
    assert hidden.grad.dtype == torch.float32 and weight.grad.dtype == torch.float32

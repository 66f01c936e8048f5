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
from attnkit.training.loss import _workspace, projected_label_smoothed_loss  # noqa: E402


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
    for no_gradient in (torch.inference_mode, torch.no_grad):  # (validation) the buffer is handed straight back
        with no_gradient():
            projected_label_smoothed_loss(batches[0][0], weight, batches[0][1], smoothing=0.1, pad_id=0)
        assert not _workspace.lent
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


# ---------------------------------------------------------------- word-level distillation
def _teacher(n, vocab, k, generator):
    """Top-k words (distinct per row) and probabilities summing to 1."""
    ids = torch.stack([torch.randperm(vocab - 1, generator=generator)[:k] + 1 for _ in range(n)])
    probs = torch.rand(n, k, generator=generator, dtype=torch.float64).softmax(-1)
    return ids, probs


@pytest.mark.parametrize("eps,lam", [(0.0, 0.5), (0.1, 0.5), (0.1, 1.0), (0.1, 0.0)])
def test_distillation_equals_cross_entropy_with_the_mixed_target_distribution(eps, lam):
    """PyTorch's cross-entropy with probability targets is the reference: the target
    distribution is (1 - lambda) * ((1 - eps) onehot(y) + eps / V) + lambda * teacher."""
    g = torch.Generator().manual_seed(3)
    vocab, k = 17, 4
    hidden = torch.randn(3, 6, 8, dtype=torch.float64, generator=g, requires_grad=True)
    weight = torch.randn(vocab, 8, dtype=torch.float64, generator=g, requires_grad=True)
    target = torch.randint(1, vocab, (3, 6), generator=g)
    target[0, 4:] = 0
    target[2, 2:] = 0
    keep = target != 0
    n = int(keep.sum())
    ids, probs = _teacher(n, vocab, k, g)
    dense = torch.zeros(n, vocab, dtype=torch.float64)
    dense.scatter_(1, ids, probs)
    smoothed = F.one_hot(target[keep], vocab).double() * (1 - eps) + eps / vocab
    mixed = (1 - lam) * smoothed + lam * dense
    logits = (hidden @ weight.t())[keep]
    ref = F.cross_entropy(logits, mixed, reduction="sum")
    ref_grads = torch.autograd.grad(ref * 0.61, (hidden, weight))
    ours = projected_label_smoothed_loss(
        hidden, weight, target, smoothing=eps, pad_id=0, teacher=(ids, probs), teacher_weight=lam
    )
    grads = torch.autograd.grad(ours.loss * 0.61, (hidden, weight))
    torch.testing.assert_close(ours.loss, ref)
    torch.testing.assert_close(ours.nll, F.cross_entropy(logits, target[keep], reduction="sum"))
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want)


def test_distillation_float32_cpu_path_matches_float64():
    """The training path (float32, the borrowed CPU buffer) agrees with the float64 computation."""
    g = torch.Generator().manual_seed(4)
    h64 = torch.randn(4, 7, 16, dtype=torch.float64, generator=g)
    w64 = torch.randn(40, 16, dtype=torch.float64, generator=g)
    target = torch.randint(1, 40, (4, 7), generator=g)
    ids, probs = _teacher(28, 40, 5, g)
    results = []
    for dtype in (torch.float64, torch.float32):
        h, w = h64.to(dtype).requires_grad_(), w64.to(dtype).requires_grad_()
        sums = projected_label_smoothed_loss(
            h, w, target, smoothing=0.1, pad_id=0, teacher=(ids, probs.to(dtype)), teacher_weight=0.5
        )
        results.append((sums.loss, *torch.autograd.grad(sums.loss, (h, w))))
    for want, got in zip(*results):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)


def test_distillation_refuses_a_teacher_of_other_positions_and_a_bad_weight():
    hidden, weight = torch.randn(1, 3, 4), torch.randn(9, 4)
    target = torch.tensor([[1, 2, 0]])
    teacher = (torch.ones(3, 2, dtype=torch.long), torch.full((3, 2), 0.5))
    with pytest.raises(ValueError, match="the teacher gives 3 positions, the batch has 2"):
        projected_label_smoothed_loss(
            hidden, weight, target, smoothing=0.1, pad_id=0, teacher=teacher, teacher_weight=0.5
        )
    with pytest.raises(ValueError, match=r"teacher weight must be in \[0, 1\], got 1.5"):
        projected_label_smoothed_loss(
            hidden, weight, target, smoothing=0.1, pad_id=0, teacher=teacher, teacher_weight=1.5
        )


from attnkit.training.loss import rdrop_loss  # noqa: E402


def _rdrop_reference(hidden, weight, target, eps, alpha, pad):
    """The paper's objective from PyTorch's own losses, on one pass's scale."""
    b = target.shape[0]
    logits = hidden @ weight.T  # (2b, t, V)
    keep = (target != pad).repeat(2, 1)
    tgt = target.repeat(2, 1)
    ce = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), label_smoothing=eps, reduction="none", ignore_index=pad)
    lp = torch.log_softmax(logits, -1)
    kl12 = F.kl_div(lp[b:], lp[:b], log_target=True, reduction="none").sum(-1)  # KL(p1 || p2)
    kl21 = F.kl_div(lp[:b], lp[b:], log_target=True, reduction="none").sum(-1)
    kl = ((kl12 + kl21) * keep[:b]).sum()
    return (ce.sum() + alpha / 2 * kl) / 2


@pytest.mark.parametrize("eps,alpha", [(0.0, 5.0), (0.1, 0.0), (0.1, 5.0)])
def test_rdrop_equals_the_paper_objective_from_pytorch_losses(eps, alpha):
    torch.manual_seed(0)
    hidden = torch.randn(6, 5, 8, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(11, 8, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, 11, (3, 5))
    target[0, 3:] = 0
    target[2, 1:] = 0
    sums = rdrop_loss(hidden, weight, target, smoothing=eps, pad_id=0, alpha=alpha)
    ref = _rdrop_reference(hidden, weight, target, eps, alpha, 0)
    torch.testing.assert_close(sums.loss, ref)
    assert int(sums.tokens) == int((target != 0).sum())
    g = torch.autograd.grad(sums.loss, (hidden, weight))
    g_ref = torch.autograd.grad(ref, (hidden, weight))
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b)
    assert g[0][:3][(target == 0)].abs().max() == 0  # padding gets no gradient


def test_rdrop_of_two_identical_passes_is_the_smoothed_loss():
    torch.manual_seed(1)
    one = torch.randn(3, 4, 8, dtype=torch.float64)
    weight = torch.randn(9, 8, dtype=torch.float64)
    target = torch.randint(1, 9, (3, 4))
    target[1, 2:] = 0
    sums = rdrop_loss(torch.cat([one, one]), weight, target, smoothing=0.1, pad_id=0, alpha=5.0)
    plain = label_smoothed_loss(one @ weight.T, target, smoothing=0.1, pad_id=0)
    torch.testing.assert_close(sums.loss, plain.loss)
    torch.testing.assert_close(sums.nll, plain.nll)


def test_rdrop_refuses_one_pass_and_a_negative_weight():
    hidden, weight, target = torch.randn(3, 4, 8), torch.randn(9, 8), torch.ones(3, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="two passes"):
        rdrop_loss(hidden, weight, target, smoothing=0.1, pad_id=0, alpha=5.0)
    with pytest.raises(ValueError, match=">= 0"):
        rdrop_loss(torch.cat([hidden, hidden]), weight, target, smoothing=0.1, pad_id=0, alpha=-1.0)


def test_rdrop_float32_cpu_path_matches_float64_twice_in_a_row():
    """The float32 CPU path borrows the shared logits buffer: two steps running give the float64 figures."""
    torch.manual_seed(2)
    hidden = torch.randn(8, 6, 16, dtype=torch.float64)
    weight = torch.randn(50, 16, dtype=torch.float64)
    target = torch.randint(1, 50, (4, 6))
    target[3, 2:] = 0
    ref = _rdrop_reference(hidden.requires_grad_(), weight.requires_grad_(), target, 0.1, 5.0, 0)
    g_ref = torch.autograd.grad(ref, (hidden, weight))
    for _ in range(2):
        h, w = hidden.detach().float().requires_grad_(), weight.detach().float().requires_grad_()
        sums = rdrop_loss(h, w, target, smoothing=0.1, pad_id=0, alpha=5.0)
        sums.loss.backward()
        torch.testing.assert_close(sums.loss.double(), ref.detach(), rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(h.grad.double(), g_ref[0], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(w.grad.double(), g_ref[1], rtol=1e-4, atol=1e-5)


def test_rdrop_interleaved_passes_and_one_without_gradients_share_the_buffer_safely():
    torch.manual_seed(3)
    weight = torch.randn(40, 8, dtype=torch.float64)
    batches = [(torch.randn(6, 4, 8, dtype=torch.float64), torch.randint(1, 40, (3, 4))) for _ in range(2)]
    expected = []
    for h, t in batches:
        h, w = h.clone().requires_grad_(), weight.clone().requires_grad_()
        expected.append(torch.autograd.grad(_rdrop_reference(h, w, t, 0.1, 5.0, 0), (h, w)))
    inputs = [(h.float().requires_grad_(), weight.float().requires_grad_(), t) for h, t in batches]
    with torch.no_grad():  # no gradient wanted: the buffer is handed straight back
        rdrop_loss(*inputs[0], smoothing=0.1, pad_id=0, alpha=5.0)
    assert not _workspace.lent
    first, second = (rdrop_loss(h, w, t, smoothing=0.1, pad_id=0, alpha=5.0) for h, w, t in inputs)
    for sums, (h, w, _), exp in ((second, inputs[1], expected[1]), (first, inputs[0], expected[0])):
        for g, r in zip(torch.autograd.grad(sums.loss, (h, w)), exp):
            torch.testing.assert_close(g.double(), r, rtol=1e-4, atol=1e-5)


def test_rdrop_under_bf16_autocast_is_close():
    torch.manual_seed(4)
    hidden = torch.randn(8, 5, 32, dtype=torch.float64)
    weight = torch.randn(40, 32, dtype=torch.float64)
    target = torch.randint(1, 40, (4, 5))
    h, w = hidden.float().requires_grad_(), weight.float().requires_grad_()
    ref = _rdrop_reference(hidden.requires_grad_(), weight.requires_grad_(), target, 0.1, 5.0, 0)
    g_ref = torch.autograd.grad(ref, (hidden, weight))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = rdrop_loss(h, w, target, smoothing=0.1, pad_id=0, alpha=5.0)
    ours.loss.backward()
    assert abs(ours.loss.item() - ref.item()) / ref.item() < 2e-2
    assert h.grad.dtype == torch.float32 and w.grad.dtype == torch.float32
    for g, r in zip((h.grad, w.grad), g_ref):  # bf16 products: the gradients' direction, not every digit
        assert torch.nn.functional.cosine_similarity(g.double().flatten(), r.flatten(), dim=0) > 0.99

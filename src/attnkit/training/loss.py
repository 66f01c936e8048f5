"""Szegedy et al. 2016: label-smoothed cross-entropy, summed over non-padding target tokens.

loss = (1 - eps) * NLL(y) + eps * mean_v(-log p(v)): the target distribution puts
1 - eps on the reference and spreads eps uniformly over the vocabulary. The
caller divides by the number of target tokens.

Two forms compute the same numbers:

- ``label_smoothed_loss(logits, ...)`` from logits any model produced;
- ``projected_label_smoothed_loss(hidden, weight, ...)`` fuses the output
  projection into the loss (the training hot path). It projects only the
  non-padding positions, and its backward turns the saved logits into their
  gradient in place: softmax - (1 - eps) * onehot(y) - eps / V. Autograd's
  version keeps the logits *and* the log-probabilities, materialises a
  (tokens, V) one-hot scatter and a (tokens, V) uniform term, and adds them:
  five passes over the largest tensor of the step instead of two.

Word-level knowledge distillation (Hinton et al. 2015; Kim & Rush 2016, eq. 6) joins the fused
form: given a teacher's k most likely words and their probabilities q at each position, the loss
is (1 - lambda) * smoothed CE + lambda * CE(q, p), the cross-entropy of the student's p against
the teacher's top-k distribution (its KL divergence less the teacher's own entropy). It is one
target distribution, so the logits' gradient stays softmax - target, a sparse correction of k
columns per row.

R-Drop (Liang et al. 2021) runs every training batch twice, with two dropout masks, and adds
alpha / 2 * (KL(p1 || p2) + KL(p2 || p1)) to the two passes' smoothed losses: the model is asked
to give the same distribution whichever units dropout removed. ``rdrop_loss`` takes the two
passes' hidden states and returns the sums on one pass's token scale (halved), so the caller's
division by the batch's target tokens is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class LossSums:
    loss: Tensor  # summed smoothed loss (differentiable)
    nll: Tensor  # summed negative log-likelihood (for perplexity)
    tokens: Tensor  # number of target tokens (a tensor: no host sync in the training step)


def _check(smoothing: float) -> None:
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), got {smoothing}")


def label_smoothed_loss(logits: Tensor, target: Tensor, *, smoothing: float, pad_id: int) -> LossSums:
    """logits (b, t, V), target (b, t) -> sums over tokens where target != pad_id."""
    _check(smoothing)
    keep = target != pad_id  # (b, t)
    # Padding is masked by multiplication: boolean-indexing the (b, t, V) logits
    # would copy them forward and scatter them back in the backward pass.
    lprobs = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)  # (b, t, V)
    nll = -lprobs.gather(-1, target[..., None]).squeeze(-1) * keep  # (b, t)
    if smoothing == 0.0:
        loss = nll
    else:  # sum * (eps / V) rather than mean: mean's backward divides the whole (b, t, V) gradient
        loss = (1.0 - smoothing) * nll - (lprobs.sum(-1) * (smoothing / lprobs.shape[-1])) * keep
    return LossSums(loss.sum(), nll.detach().sum(), keep.sum())


class _Workspace:
    """One reusable buffer for the (tokens, V) logits, lent from a forward to its backward.

    A fresh buffer of this size (~130 MB for 4,096 tokens x 8,000 words) comes
    from the operating system on every step and costs a page fault per 4 KiB
    touched: more time than the projection itself on a small CPU. A second
    forward before the first backward (or a backward that never comes) simply
    gets a fresh tensor, so reuse is never wrong, only sometimes not done."""

    def __init__(self) -> None:
        self.buffer: Tensor | None = None
        self.lent = False

    def take(self, rows: int, cols: int, like: Tensor) -> Tensor:
        size = rows * cols
        buf = self.buffer
        stale = buf is not None and buf.is_inference() and not torch.is_inference_mode_enabled()
        if self.lent or stale or buf is None or buf.device != like.device or buf.numel() < size:
            if self.lent:
                return like.new_empty(rows, cols, dtype=torch.float32)
            buf = self.buffer = like.new_empty(max(size, 1), dtype=torch.float32)
        self.lent = True
        return buf[:size].view(rows, cols)

    def give_back(self) -> None:
        self.lent = False


_workspace = _Workspace()


def _operands(rows: Tensor, weight: Tensor) -> tuple[Tensor, Tensor]:
    """The fused losses' inputs in autocast's dtype (else the weight's); detached where no gradient
    is wanted (validation), so the function keeps nothing for a backward and hands its buffer back."""
    if torch.is_autocast_enabled(rows.device.type):
        dtype = torch.get_autocast_dtype(rows.device.type)
        rows, weight = rows.to(dtype), weight.to(dtype)
    else:
        rows = rows.to(weight.dtype)
    if not torch.is_grad_enabled():
        rows, weight = rows.detach(), weight.detach()
    return rows, weight


class _ProjectedLoss(torch.autograd.Function):
    """hidden (n, d), weight (V, d), target (n,), optionally a teacher's words (n, k) and their
    probabilities (n, k) with its weight lambda -> (summed loss, summed NLL of the target).

    Only two passes touch the (n, V) tensor besides the GEMMs: ``exp(logits - max)``
    in place in the forward, and its scaling into the softmax gradient in the
    backward. The target logit and the sum of all logits (for the smoothing term)
    come from the small tensors: sum_v h . w_v = h . (sum_v w_v); likewise the
    gradient's uniform and one-hot parts are applied to W and h directly."""

    @staticmethod
    def forward(
        ctx,
        hidden: Tensor,
        weight: Tensor,
        target: Tensor,
        smoothing: float,
        teacher_ids: Tensor | None,
        teacher_probs: Tensor | None,
        teacher_weight: float,
    ) -> tuple[Tensor, Tensor]:
        n, vocab = hidden.shape[0], weight.shape[0]
        if hidden.dtype == torch.float32 and hidden.device.type == "cpu":
            logits = _workspace.take(n, vocab, hidden)
            buffer = _workspace.buffer  # set by take()
            ctx.borrowed = buffer is not None and logits.data_ptr() == buffer.data_ptr()
            torch.mm(hidden, weight.t(), out=logits)  # (n, V)
        else:
            ctx.borrowed = False
            logits = torch.mm(hidden, weight.t())
            logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # bf16 GEMM, fp32 softmax
        target_logit = logits.gather(1, target[:, None]).squeeze(1)
        distil = teacher_ids is not None and teacher_probs is not None and teacher_weight > 0.0
        if distil:  # sum_k q_k * logit_k, read before the logits are overwritten
            assert teacher_ids is not None and teacher_probs is not None
            teacher_logit = (logits.gather(1, teacher_ids) * teacher_probs).sum()
        top = logits.amax(dim=1)
        exp = logits.sub_(top[:, None]).exp_()  # in place: the logits are not needed again
        total = exp.sum(dim=1)
        lse = top + total.log()
        nll = (lse - target_logit).sum()
        loss = nll
        if smoothing > 0.0:  # eps * mean_v(lse - logit_v)
            logit_sum = torch.mv(hidden, weight.sum(0)).to(logits.dtype).sum()
            loss = (1.0 - smoothing) * loss + smoothing * (lse.sum() - logit_sum / vocab)
        if distil:  # each row's q sums to 1: CE(q, p) = lse - sum_k q_k logit_k
            loss = (1.0 - teacher_weight) * loss + teacher_weight * (lse.sum() - teacher_logit)
        else:
            teacher_weight = 0.0
        ctx.smoothing, ctx.teacher_weight = smoothing, teacher_weight
        nll = nll.clone()  # its own tensor: with eps = 0 it would otherwise be the loss itself
        ctx.mark_non_differentiable(nll)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ids = teacher_ids if distil else target[:, None]  # placeholders when there is no teacher
            probs = teacher_probs if distil else exp.new_zeros(n, 1)
            ctx.save_for_backward(hidden, weight, target, exp, total, ids, probs)
        elif ctx.borrowed:
            _workspace.give_back()
        return loss, nll

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor | None):
        # d loss / d logits = softmax - target distribution, times grad_loss; the target distribution
        # is (1 - lambda) * ((1 - eps) onehot(y) + eps / V) + lambda * q
        hidden, weight, target, exp, total, teacher_ids, teacher_probs = ctx.saved_tensors
        eps, lam, vocab = ctx.smoothing, ctx.teacher_weight, exp.shape[1]
        probs = exp.mul_((grad_loss / total)[:, None]).to(hidden.dtype)  # grad_loss * softmax, in place
        w = weight.to(hidden.dtype)
        uniform, onehot = grad_loss * (1.0 - lam) * (eps / vocab), grad_loss * (1.0 - lam) * (1.0 - eps)
        taught = (grad_loss * lam) * teacher_probs.to(hidden.dtype)  # (n, k)
        grad_hidden = grad_weight = None
        if ctx.needs_input_grad[0]:
            grad_hidden = torch.mm(probs, w)
            grad_hidden -= onehot * w[target]
            if eps > 0.0:
                grad_hidden -= uniform * w.sum(0)
            if lam > 0.0:  # sum_k q_k w_{id_k}: (n, 1, k) @ (n, k, d)
                grad_hidden -= torch.bmm(taught[:, None, :], w[teacher_ids]).squeeze(1)
        if ctx.needs_input_grad[1]:
            grad_weight = torch.mm(probs.t(), hidden)
            grad_weight.index_add_(0, target, hidden * -onehot)
            if eps > 0.0:
                grad_weight -= uniform * hidden.sum(0)
            if lam > 0.0:
                rows = (hidden[:, None, :] * -taught[:, :, None]).flatten(0, 1)  # (n k, d)
                grad_weight.index_add_(0, teacher_ids.flatten(), rows)
            grad_weight = grad_weight.to(weight.dtype)
        if ctx.borrowed:
            _workspace.give_back()
        return grad_hidden, grad_weight, None, None, None, None, None


def projected_label_smoothed_loss(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    *,
    smoothing: float,
    pad_id: int,
    teacher: tuple[Tensor, Tensor] | None = None,
    teacher_weight: float = 0.0,
) -> LossSums:
    """hidden (b, t, d) features before the output layer, weight (V, d) its weight (no bias),
    target (b, t) -> the same sums as ``label_smoothed_loss(hidden @ weight.T, target, ...)``.

    ``teacher``: word ids (n, k) and probabilities (n, k), each row summing to 1, for the n
    non-padding positions in row-major order (sentence by sentence); the loss becomes
    (1 - teacher_weight) * smoothed CE + teacher_weight * CE(teacher, student)."""
    _check(smoothing)
    if not 0.0 <= teacher_weight <= 1.0:
        raise ValueError(f"teacher weight must be in [0, 1], got {teacher_weight}")
    keep = target != pad_id
    rows, weight = _operands(hidden[keep], weight)  # (n, d): padding is never projected
    ids, probs = teacher if teacher is not None else (None, None)
    if ids is not None and ids.shape[0] != rows.shape[0]:
        raise ValueError(f"the teacher gives {ids.shape[0]} positions, the batch has {rows.shape[0]}")
    loss, nll = _ProjectedLoss.apply(rows, weight, target[keep], float(smoothing), ids, probs, float(teacher_weight))
    return LossSums(loss, nll, keep.sum())


class _RDropLoss(torch.autograd.Function):
    """hidden (2n, d): the n non-padding positions' features from one pass, then from the other;
    weight (V, d); target (n,) -> (summed loss on one pass's scale, summed NLL of the target).

    With p1, p2 the passes' next-word distributions and D = log p1 - log p2, the symmetric KL is
    sum_v (p1 - p2) D, and its gradient on pass 1's logits p1 * (D - E_p1[D]) + p1 - p2 (on pass 2's,
    -p2 * (D - E_p2[D]) + p2 - p1). Autograd keeps and walks every intermediate (log-probabilities,
    probabilities, differences, products: each a pass over a (2n, V) or (n, V) tensor); this
    keeps p (2n, V) and D (n, V) and makes the logits' gradient in place, reusing one buffer."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, target: Tensor, smoothing: float, alpha: float):
        rows, vocab = hidden.shape[0], weight.shape[0]
        n = rows // 2
        ctx.borrowed = hidden.dtype == torch.float32 and hidden.device.type == "cpu"
        if ctx.borrowed:  # logits (2n), probabilities (2n) and one gradient half (n), in one buffer
            buf = _workspace.take(5 * n, vocab, hidden)
            logits, probs, spare = buf[: 2 * n], buf[2 * n : 4 * n], buf[4 * n :]
            torch.mm(hidden, weight.t(), out=logits)
        else:
            logits = torch.mm(hidden, weight.t())
            logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # bf16 GEMM, fp32 softmax
            probs, spare = torch.empty_like(logits), None
        target_logit = logits[:n].gather(1, target[:, None]).sum() + logits[n:].gather(1, target[:, None]).sum()
        top = logits.amax(dim=1)
        logits.sub_(top[:, None])
        torch.exp(logits, out=probs)
        total = probs.sum(dim=1)
        probs.div_(total[:, None])
        log_total = total.log()
        lse = top + log_total
        nll = lse.sum() - target_logit
        loss = nll
        if smoothing > 0.0:  # eps * mean_v(lse - logit_v), the logits' sum from the small tensors
            logit_sum = torch.mv(hidden, weight.sum(0)).to(lse.dtype).sum()
            loss = (1.0 - smoothing) * loss + smoothing * (lse.sum() - logit_sum / vocab)
        diff = logits[:n].sub_(log_total[:n, None]).sub_(logits[n:]).add_(log_total[n:, None])  # D, in place
        p1, p2 = probs[:n], probs[n:]
        kl = torch.dot(p1.flatten(), diff.flatten()) - torch.dot(p2.flatten(), diff.flatten())
        loss = (loss + (alpha / 2.0) * kl) / 2.0
        nll = nll / 2.0
        ctx.smoothing, ctx.alpha = smoothing, alpha
        ctx.mark_non_differentiable(nll)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(hidden, weight, target, probs, diff)
            ctx.spare = spare
        elif ctx.borrowed:
            _workspace.give_back()
        return loss, nll

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor | None):
        hidden, weight, target, probs, diff = ctx.saved_tensors
        eps, half = ctx.smoothing, ctx.alpha / 2.0
        n, vocab = diff.shape
        p1, p2 = probs[:n], probs[n:]
        m1 = torch.bmm(p1[:, None, :], diff[:, :, None]).view(n, 1)  # E_p1[D], E_p2[D]
        m2 = torch.bmm(p2[:, None, :], diff[:, :, None]).view(n, 1)
        # each pass's logits' gradient (before the constant target terms): p + alpha/2 * (its KL part)
        g1 = torch.sub(diff, m1, out=ctx.spare) if ctx.spare is not None else diff - m1
        g1.mul_(p1).mul_(half).add_(p1, alpha=1.0 + half).sub_(p2, alpha=half)
        g2 = diff.sub_(m2).mul_(p2).mul_(-half).add_(p2, alpha=1.0 + half).sub_(p1, alpha=half)
        scale = grad_loss / 2.0
        w, h1, h2 = weight.to(hidden.dtype), hidden[:n], hidden[n:]
        onehot, uniform = 1.0 - eps, eps / vocab
        grad_hidden = grad_weight = None
        if ctx.needs_input_grad[0]:
            grad_hidden = torch.cat([torch.mm(g1.to(w.dtype), w), torch.mm(g2.to(w.dtype), w)])
            grad_hidden -= onehot * w[target].repeat(2, 1)
            if eps > 0.0:
                grad_hidden -= uniform * w.sum(0)
            grad_hidden *= scale
        if ctx.needs_input_grad[1]:
            grad_weight = torch.mm(g1.t().to(h1.dtype), h1)
            grad_weight.addmm_(g2.t().to(h2.dtype), h2)
            grad_weight.index_add_(0, target, (h1 + h2) * -onehot)
            if eps > 0.0:
                grad_weight -= uniform * hidden.sum(0)
            grad_weight = (grad_weight * scale).to(weight.dtype)
        if ctx.borrowed:
            _workspace.give_back()
        return grad_hidden, grad_weight, None, None, None


def rdrop_loss(
    hidden: Tensor, weight: Tensor, target: Tensor, *, smoothing: float, pad_id: int, alpha: float
) -> LossSums:
    """hidden (2b, t, d): the batch's features before the output layer from two passes, the first b
    rows one pass and the last b the other; weight (V, d) the output layer's; target (b, t).

    loss = (CE_1 + CE_2) / 2 + alpha / 4 * (KL(p1 || p2) + KL(p2 || p1)), summed over the
    non-padding positions, with CE the label-smoothed cross-entropy: the paper's per-pair objective
    CE_1 + CE_2 + alpha / 2 * (KL + KL), halved to one pass's scale. ``nll`` is the two passes' mean."""
    _check(smoothing)
    if alpha < 0.0:
        raise ValueError(f"the R-Drop weight must be >= 0, got {alpha}")
    b = target.shape[0]
    if hidden.shape[0] != 2 * b:
        raise ValueError(
            f"R-Drop needs two passes of the batch: {hidden.shape[0]} rows of hidden states for {b} targets"
        )
    keep = target != pad_id
    rows, weight = _operands(torch.cat([hidden[:b][keep], hidden[b:][keep]]), weight)  # (2n, d)
    loss, nll = _RDropLoss.apply(rows, weight, target[keep], float(smoothing), float(alpha))
    return LossSums(loss, nll, keep.sum())

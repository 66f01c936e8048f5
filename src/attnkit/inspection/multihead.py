"""Multi-head attention of one layer, step by step (Vaswani et al. 2017, section 3.2), on one input:

    Q = X W^Q,  K = M W^K,  V = M W^V               (M = X in self-attention, the encoder's output in cross)
    split each into h heads of d_k = d_model / h columns
    A_h = softmax(Q_h K_hᵀ / sqrt(d_k) (+ bias, mask))      every head's map
    Z_h = A_h V_h                                           every head's output
    out = [Z_1 | ... | Z_h] W^O + b^O                       concatenated, then projected

recomputed from the layer's recorded q, k and v and checked against the model's own forward
pass; and why the scores are divided by sqrt(d_k), measured (``scaling_study``): with q and k of
unit-variance components, q · k has variance d_k, so without the division the softmax saturates
(its largest weight tends to 1 and its gradient to 0 as d_k grows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..models.interface import EncoderModel, Seq2SeqModel, find_site
from .capture import LABELS, Prepared, capture_ids
from .explain import attention_module, cpu


@dataclass
class LayerWalk:
    """One multi-head layer on one input: every intermediate of every head, and the checks."""

    kind: str
    layer: int
    queries: list[str]
    keys: list[str]
    x: np.ndarray  # (t, d_model) the layer's query-side input (after LayerNorm when pre-norm)
    q: np.ndarray  # (h, t, d_k) after any positional rotation, as the heads use them
    k: np.ndarray  # (h, s, d_k)
    v: np.ndarray  # (h, s, d_k)
    scale: float  # 1 / sqrt(d_k)
    weights: np.ndarray  # (h, t, s) recomputed: softmax(q kᵀ scale + bias) under the mask
    unscaled: np.ndarray  # (h, t, s) the same without the scale: what-if
    z: np.ndarray  # (h, t, d_k) A_h V_h
    w_o: np.ndarray  # (d_model, d_model) W^O as applied: out = concat @ w_o.T + b_o
    out: np.ndarray  # (t, d_model) recomputed
    model_out: np.ndarray  # (t, d_model) the layer's output in the model's forward pass
    weight_error: float  # largest |A_h - the record's weights| (the kernel's log-sum-exp)
    allowed: np.ndarray  # (h, t, s) the cells each query may attend to

    @property
    def heads(self) -> int:
        return int(self.q.shape[0])

    @property
    def d_k(self) -> int:
        return int(self.q.shape[-1])

    @property
    def concat(self) -> np.ndarray:
        """(t, h d_k) the heads' outputs side by side, head 0 first."""
        return np.concatenate(list(self.z), axis=-1)

    @property
    def output_error(self) -> float:
        return float(np.abs(self.out - self.model_out).max())

    def score_variance(self) -> np.ndarray:
        """(h,) the variance of each head's raw scores q · k over the cells it may attend to."""
        raw = np.einsum("htd,hsd->hts", self.q, self.k)
        return np.array([raw[h][self.allowed[h]].var() for h in range(self.heads)])

    def largest(self, weights: np.ndarray) -> np.ndarray:
        """(h,) each head's largest weight, averaged over the queries."""
        return weights.max(-1).mean(-1)

    def report(self) -> str:
        t, s, d_model = self.q.shape[1], self.k.shape[1], self.x.shape[-1]
        h, d_k = self.heads, self.d_k
        memory = "X" if self.kind != "cross" else "M"
        lines = [
            f"{LABELS[self.kind]}, layer {self.layer}: {h} heads of d_k = {d_model} / {h} = {d_k}; "
            f"{t} queries, {s} keys",
            "",
            f"Q = X W^Q            ({t} x {d_model}), split into {h} heads of ({t} x {d_k})",
            f"K = {memory} W^K, V = {memory} W^V   ({s} x {d_model}) each, split the same way",
            f"A_h = softmax(Q_h K_hᵀ x {self.scale:.4g})   (1/sqrt({d_k}); {t} x {s}) for each head",
            f"Z_h = A_h V_h        ({t} x {d_k}); concatenated ({t} x {h * d_k}), then x W^O ({d_model} x {d_model})",
            *(["M: the encoder's output, the keys' and values' input"] if self.kind == "cross" else []),
            "",
            f"{'head':>4}  {'var(q.k)':>9}  {'largest weight':>14}  {'unscaled':>8}  {'|Z_h W^O_h|':>11}",
        ]
        var, big, big_raw = self.score_variance(), self.largest(self.weights), self.largest(self.unscaled)
        w_o = self.w_o.reshape(d_model, h, d_k)
        for i in range(h):
            part = np.linalg.norm(self.z[i] @ w_o[:, i].T, axis=-1).mean()  # this head's share of the output
            lines.append(f"{i:>4}  {var[i]:9.2f}  {big[i]:14.3f}  {big_raw[i]:8.3f}  {part:11.3f}")
        lines += [
            "",
            "largest weight: each query's, averaged; unscaled: the same softmax without 1/sqrt(d_k) (a what-if);",
            "|Z_h W^O_h|: the mean length of what the head adds to each query's output",
            f"check: the heads' maps match the record's to {self.weight_error:.1e}, "
            f"[Z_0 | ... | Z_{h - 1}] W^O + b^O matches the layer's output to {self.output_error:.1e}",
        ]
        return "\n".join(lines)


@torch.no_grad()
def explain_layer(
    model: Seq2SeqModel | EncoderModel,
    prepared: Prepared,
    *,
    kind: str = "encoder",
    layer: int = -1,
    source: torch.Tensor | None = None,
) -> LayerWalk:
    """Every head of one multi-head attention layer recomputed from one recorded forward pass
    over ``prepared``, and the layer's output rebuilt from them (``source``: an image model's
    pixels, its input instead of ``prepared``'s ids)."""
    site = find_site(model, kind, layer)
    module = attention_module(model, kind, layer)
    if module.positions is not None and module.positions.needs_weights:
        raise ValueError("this layer adds a relative value term (Shaw et al.): the diagram draws plain heads")
    if kind != "encoder" and prepared.tgt_in_ids is None:
        raise ValueError(f"{LABELS[kind]} needs a target side")
    seen: list[torch.Tensor] = []
    hook = module.register_forward_hook(lambda _m, _i, output: seen.append(output.context))
    try:
        maps, _ = capture_ids(model, prepared.src_ids, prepared.tgt_in_ids, values=True, source=source)
    finally:
        hook.remove()
    call = maps.call(kind, site.layer)
    assert call.q is not None and call.k is not None and call.v is not None  # a values recording
    h, t, s = call.shape
    q, k, v = call.q.float(), call.k.float(), call.v.float()
    k, v = (x.repeat_interleave(h // x.shape[0], 0) for x in (k, v))  # grouped keys: each query head's own
    allowed = torch.stack([_allowed(call, i, t, s) for i in range(h)])
    bias = torch.zeros(h, t, s) if call.bias is None else call.bias.float().expand(h, t, s)
    raw = q @ k.transpose(-1, -2)  # by hand, not the kernel: the check is against what the model ran
    weights = _softmax(raw * call.scale + bias, allowed)
    unscaled = _softmax(raw + bias, allowed)
    record = torch.stack([call.block(i, slice(0, t), slice(0, s)).cpu() for i in range(h)])
    z = weights @ v
    w_o, b_o = module.output_projection()
    out = z.transpose(0, 1).reshape(t, h * z.shape[-1]) @ w_o.float().T
    if b_o is not None:
        out = out + b_o.float()
    if len(seen) != 1:
        raise ValueError(f"the layer ran {len(seen)} times in one forward pass: no one output to check against")
    model_out = seen[0][call.row].float()
    return LayerWalk(
        kind=kind,
        layer=site.layer,
        queries=list(prepared.queries(kind)),
        keys=list(prepared.keys(kind)),
        x=cpu(call.extra["x"].float()),
        q=cpu(q),
        k=cpu(k),
        v=cpu(v),
        scale=call.scale,
        weights=cpu(weights),
        unscaled=cpu(unscaled),
        z=cpu(z),
        w_o=cpu(w_o.float()),
        out=cpu(out),
        model_out=cpu(model_out),
        weight_error=float((weights - record).abs().max()),
        allowed=cpu(allowed).astype(bool),
    )


def _allowed(call, head: int, t: int, s: int) -> torch.Tensor:
    allowed = call.allowed(head, slice(0, t), slice(0, s))
    return torch.ones(t, s, dtype=torch.bool) if allowed is None else allowed.cpu().expand(t, s)


def _softmax(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)


@dataclass
class Scaling:
    """What the division by sqrt(d_k) does, measured on random q and k with independent
    unit-variance components (the assumption of Vaswani et al.'s footnote 4): per d_k, the
    variance of the scores, the softmax's mean largest weight over ``keys`` keys and the mean
    Frobenius norm of its Jacobian (how much gradient reaches the scores), without and with it."""

    d_k: np.ndarray  # (n,)
    keys: int
    samples: int
    variance: np.ndarray  # (2, n) unscaled, scaled
    largest: np.ndarray  # (2, n)
    gradient: np.ndarray  # (2, n)


def softmax_jacobian_norm(weights: torch.Tensor) -> torch.Tensor:
    """||diag(a) - a aᵀ||_F of each row a of ``weights`` (..., s), in closed form:
    sum a_i² - 2 sum a_i³ + (sum a_i²)²."""
    a2 = (weights**2).sum(-1)
    return (a2 - 2 * (weights**3).sum(-1) + a2**2).clamp_min(0).sqrt()


def scaling_study(d_ks: list[int], *, keys: int = 16, samples: int = 4096, seed: int = 0) -> Scaling:
    """Measure ``Scaling`` for each d_k in ``d_ks`` from ``samples`` queries, each against its own
    ``keys`` keys, drawn with a fixed seed."""
    if keys < 2 or samples < 2 or not d_ks or min(d_ks) < 1:
        raise ValueError("the scaling study needs d_k >= 1, at least 2 keys and 2 samples")
    g = torch.Generator().manual_seed(seed)
    out = np.zeros((3, 2, len(d_ks)))
    for n, d in enumerate(d_ks):
        q = torch.randn(samples, 1, d, generator=g, dtype=torch.float64)
        k = torch.randn(samples, keys, d, generator=g, dtype=torch.float64)
        raw = (q * k).sum(-1)  # (samples, keys)
        for i, scores in enumerate((raw, raw / math.sqrt(d))):
            a = torch.softmax(scores, -1)
            out[:, i, n] = scores.var().item(), a.max(-1).values.mean().item(), softmax_jacobian_norm(a).mean().item()
    return Scaling(np.array(d_ks), keys, samples, *out)

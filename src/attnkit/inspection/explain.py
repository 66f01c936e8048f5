"""The Q/K/V walk-through: for one query token of one head,
recompute attention step by step from the layer's own weights and inputs,

    q = x_i W^Q,  K = X W^K,  V = X W^V          (one head's slice)
    e_j = q . k_j                                 raw scores
    e_j / sqrt(d_k) (+ positional bias)           scaled scores
    a = softmax(scaled)                           weights
    z = sum_j a_j v_j                             the head's output for token i

and check the result against what the model computed in its forward pass.
The softmax without the 1/sqrt(d_k) scaling is shown too: with d_k-dimensional
q and k the raw scores grow like sqrt(d_k) and the softmax saturates.

An RNN decoder's Luong attention is walked through the same way, with its own
score (Luong et al. 2015, eq. 8; the query is the decoder state h_t, keys and
values the encoder states):

    dot      e_s = h_t . h̄_s                     terms: h_t ⊙ h̄_s
    general  e_s = (W_a^T h_t) . h̄_s             terms: (W_a^T h_t) ⊙ h̄_s
    concat   e_s = v_a . tanh(W_a [h_t; h̄_s])     terms: v_a ⊙ tanh(...)

and, for local attention, the window [p_t - D, p_t + D] (local-p: p_t = S
sigmoid(v_p^T tanh(W_p h_t)), weights softmax-in-window x exp(-(s - p_t)^2 / 2 (D/2)^2)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import torch

from ..attention.multihead import MultiHeadAttention
from ..attention.record import AttentionCall
from ..attention.recurrent import GlobalAttention, LocalAttention
from ..models.interface import AttentionSite, EncoderModel, Seq2SeqModel, find_site
from .capture import LABELS, Prepared, capture_ids


def attention_module(model: Seq2SeqModel | EncoderModel, kind: str, layer: int) -> MultiHeadAttention:
    """The multi-head attention of ``kind`` in ``layer`` (negative counts from the top)."""
    site = find_site(model, kind, layer)
    if not isinstance(site.module, MultiHeadAttention):
        raise ValueError(f"this model's {LABELS[site.kind]} is {type(site.module).__name__}, not multi-head attention")
    return site.module


@dataclass
class Walkthrough:
    """All intermediate values for query ``query`` of ``head`` (vectors are one head's, d_k wide)."""

    kind: str
    layer: int
    head: int
    query: int
    query_token: str
    key_tokens: list[str]
    q: np.ndarray  # (d_k,)
    k: np.ndarray  # (s, d_k)
    v: np.ndarray  # (s, d_k)
    raw: np.ndarray  # (s,) q . k_j
    scale: float  # 1 / sqrt(d_k)
    bias: np.ndarray | None  # (s,) positional score bias, if the model has one
    scaled: np.ndarray  # (s,) raw * scale + bias, -inf where masked
    weights: np.ndarray  # (s,) softmax(scaled)
    unscaled_weights: np.ndarray  # (s,) softmax(raw + bias): what attention would be without the scaling
    context: np.ndarray  # (d_k,) sum_j weights_j v_j (+ relative value term)
    model_weights: np.ndarray  # (s,) the same weights from the model's own forward pass
    score: str = "q · k / √d_k"  # the score function
    terms_formula: str = "q ⊙ k"  # what each row of ``terms`` is
    terms: np.ndarray | None = None  # (s, ·) per-dimension terms; row j sums to raw[j] (default q ⊙ k_j)
    allowed: np.ndarray | None = None  # (s,) keys this query may attend to (causal mask, local window)
    p_t: float | None = None  # local attention: the window centre
    window: int | None = None  # local attention: the half-width D
    gauss: np.ndarray | None = None  # (s,) local-p: exp(-(s - p_t)^2 / (2 (D/2)^2))
    recurrent: bool = False  # Luong attention of an RNN decoder: one head, no 1/sqrt(d_k) step
    x: np.ndarray | None = None  # (d_model,) the layer input of the query token (after LayerNorm when pre-norm)
    q_formula: str = "= x W^Q"  # what q is (a model run by transformers: as its layer computed it, positions applied)
    # an RNN's score as a product with each key: the query's side of it (general: W_aᵀ h_t), and its name
    factor: np.ndarray | None = None
    factor_formula: str = ""

    def __post_init__(self) -> None:
        if self.terms is None:
            self.terms = self.q[None, :] * self.k
        if self.allowed is None:
            self.allowed = np.isfinite(self.scaled)

    @property
    def factor_transforms(self) -> bool:
        """Whether what an RNN's score multiplies each key by is other than h_t itself (general: W_aᵀ h_t)."""
        return self.factor is not None and self.factor_formula != "h_t"

    @property
    def in_window(self) -> np.ndarray:
        """(s,) the softmax of the scores over the keys this query may attend to, 0 elsewhere: local-p's
        weights before its Gaussian."""
        assert self.allowed is not None  # set by __post_init__
        out = np.zeros_like(self.raw, dtype=np.float64)
        inside = self.scaled[self.allowed].astype(np.float64)
        if inside.size:
            e = np.exp(inside - inside.max())
            out[self.allowed] = e / e.sum()
        return out

    @property
    def kind_label(self) -> str:
        """The attention's name: ``encoder self-attention``, ``cross-attention``."""
        return LABELS[self.kind]

    @property
    def query_label(self) -> str:
        """The query as `plot` labels its row: a cross-attention row by the token it predicts."""
        if self.kind == "cross":
            return f"query {self.query}: the decoder state that predicts {self.query_token!r}"
        return f"query {self.query} {self.query_token!r}"

    @property
    def max_error(self) -> float:
        """Largest difference between the recomputed weights and the model's."""
        return float(np.abs(self.weights - self.model_weights).max())

    def report(self, dims: int = 6) -> str:
        if self.recurrent:
            return self._recurrent_report(dims)
        np_opts: dict[str, Any] = dict(precision=3, suppress_small=True, max_line_width=140)
        d_k = self.q.shape[0]
        fmt = lambda a: np.array2string(a[:dims], **np_opts) + (" ..." if a.shape[0] > dims else "")
        lines = [
            f"{LABELS[self.kind]}, layer {self.layer}, head {self.head}, {self.query_label}; d_k = {d_k}",
            "",
            f"q {self.q_formula:<16} {fmt(self.q)}",
            "keys and values of each token (first dims):",
        ]
        width = max(len(t) for t in self.key_tokens)
        for j, t in enumerate(self.key_tokens):
            lines.append(f"  {t:<{width}}  k {fmt(self.k[j])}   v {fmt(self.v[j])}")
        lines += [
            "",
            f"{'token':<{width}}  {'q.k':>8}  {'/sqrt(d_k)':>10}"
            + ("  {:>8}".format("+bias") if self.bias is not None else "")
            + f"  {'softmax':>8}  {'unscaled':>8}",
        ]
        for j, t in enumerate(self.key_tokens):
            masked = not np.isfinite(self.scaled[j])
            row = f"{t:<{width}}  {self.raw[j]:8.3f}  {self.raw[j] * self.scale:10.3f}"
            if self.bias is not None:
                row += f"  {self.scaled[j]:8.3f}" if not masked else f"  {'masked':>8}"
            row += f"  {self.weights[j]:8.3f}  {self.unscaled_weights[j]:8.3f}" + ("   (masked)" if masked else "")
            lines.append(row)
        lines += [
            "",
            f"scaling by 1/sqrt({d_k}) = {self.scale:.3f}: largest weight {self.weights.max():.3f}, "
            f"entropy {entropy(self.weights):.2f} nats",
            f"without it (softmax saturates): largest weight {self.unscaled_weights.max():.3f}, "
            f"entropy {entropy(self.unscaled_weights):.2f} nats",
            f"z = sum_j a_j v_j  {fmt(self.context)}",
            f"check: recomputed weights match the model's forward pass to {self.max_error:.1e}",
        ]
        return "\n".join(lines)

    def _recurrent_report(self, dims: int) -> str:
        np_opts: dict[str, Any] = dict(precision=3, suppress_small=True, max_line_width=140)
        fmt = lambda a: np.array2string(a[:dims], **np_opts) + (" ..." if a.shape[0] > dims else "")
        lines = [
            f"{LABELS[self.kind]} (Luong), {self.query_label}; score e_s = {self.score}",
            "",
            f"q = h_t, the decoder state   {fmt(self.q)}",
        ]
        if self.factor_transforms:
            assert self.factor is not None  # set where it transforms
            lines.append(f"{self.factor_formula}, which multiplies each h̄_s   {fmt(self.factor)}")
        if self.p_t is not None:
            assert self.window is not None  # local attention: set with p_t
            n = len(self.key_tokens)
            lo, hi = max(0, math.ceil(self.p_t - self.window)), min(n - 1, math.floor(self.p_t + self.window))
            whole = " (the whole input)" if lo == 0 and hi == n - 1 else ""
            lines.append(
                f"window centre p_t = {self.p_t:.2f}, half-width D = {self.window}: "
                f"keys {lo} .. {hi} of 0 .. {n - 1}{whole}"
            )
        width = max(len(t) for t in self.key_tokens)
        head = f"{'token':<{width}}  {'score':>8}  {'softmax':>8}" + (
            f"  {'gauss':>8}" if self.gauss is not None else ""
        )
        lines += ["", head + f"  {'weight':>8}"]
        assert self.allowed is not None  # set by __post_init__
        align = self.in_window
        for j, t in enumerate(self.key_tokens):
            if not self.allowed[j]:
                lines.append(
                    f"{t:<{width}}  {self.raw[j]:8.3f}  {'outside':>8}"
                    + (f"  {'':>8}" if self.gauss is not None else "")
                    + f"  {0.0:8.3f}"
                )
                continue
            row = f"{t:<{width}}  {self.raw[j]:8.3f}  {align[j]:8.3f}"
            if self.gauss is not None:
                row += f"  {self.gauss[j]:8.3f}"
            lines.append(row + f"  {self.weights[j]:8.3f}")
        lines += [
            "",
            f"weights sum to {self.weights.sum():.3f}"
            + (" (local-p: softmax x Gaussian, not renormalised)" if self.gauss is not None else ""),
            f"c_t = sum_s a_s h̄_s  {fmt(self.context)}",
            f"check: recomputed weights match the model's forward pass to {self.max_error:.1e}",
        ]
        return "\n".join(lines)


def entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


@torch.no_grad()
def explain(
    model: Seq2SeqModel | EncoderModel,
    prepared: Prepared,
    *,
    kind: str = "encoder",
    layer: int = -1,
    head: int = 0,
    query: int = 0,
    source: torch.Tensor | None = None,
) -> Walkthrough:
    """Recompute one head's attention for query position ``query`` of ``prepared`` from one
    forward pass recorded with its values (an RNN decoder's Luong attention has one head: 0).
    ``source``: an image model's (1, H, W) pixels, its input instead of ``prepared``'s ids."""
    site = find_site(model, kind, layer)
    if kind != "encoder" and prepared.tgt_in_ids is None:
        raise ValueError(f"{LABELS[kind]} needs a target side")
    maps, _ = capture_ids(model, prepared.src_ids, prepared.tgt_in_ids, values=True, source=source)
    call = maps.call(kind, site.layer)
    if call.weights is not None:  # formed weights: an RNN decoder's Luong attention
        return _explain_recurrent(call, prepared, site, head, query)
    if call.v is None or "x" not in call.extra:
        raise ValueError(f"no walk-through for {type(site.module).__name__}")
    walk = explain_recorded(call, prepared, head=head, query=query)
    positions = getattr(call.module, "positions", None) if kind != "cross" else None
    context = walk.context
    if positions is not None and positions.needs_weights:  # Shaw et al.'s relative values: a value term too
        _, t, s = call.shape
        device = call.q.device if call.q is not None else None
        full = torch.zeros(1, call.heads, t, s, device=device)
        full[0, head, walk.query] = torch.from_numpy(walk.weights).to(device)
        term = positions.value_term(full, torch.arange(t, device=device), torch.arange(s, device=device))
        context = context + cpu(cast(torch.Tensor, term)[0, head, walk.query])
    return replace(
        walk,
        x=cpu(call.extra["x"][walk.query].float()),
        context=context,
        score=Walkthrough.score,
        q_formula=Walkthrough.q_formula,
    )


def explain_recorded(call: AttentionCall, prepared: Prepared, *, head: int, query: int) -> Walkthrough:
    """The walk-through of one attention call recorded inside a transformers model
    (``attnkit.pretrained.hf``): its q, k and v after positions (RoPE rotates them first),
    its scaling, T5's position bias and the mask, recomputed into weights and checked
    against the weights the record gives (from the kernel's log-sum-exp)."""
    assert call.q is not None and call.k is not None and call.v is not None  # a values recording
    heads = call.heads
    if not 0 <= head < heads:
        raise ValueError(f"head {head} out of range: the layer has {heads} heads (0..{heads - 1})")
    q_tokens, k_tokens = prepared.queries(call.kind), prepared.keys(call.kind)
    query = _query_index(query, q_tokens)
    kv = call.kv_head(head)  # grouped key/value heads: the group this query head reads
    q, k, v = (x.float().cpu() for x in (call.q[head, query], call.k[kv], call.v[kv]))  # wherever the model ran
    raw = k @ q
    s = k.shape[0]
    bias = None if call.bias is None else call.bias[head if call.bias.shape[0] > 1 else 0, query].float().cpu()
    if bias is not None and not bias.any():
        bias = None  # T5's cross-attention passes a bias of zeros: nothing to show
    extra = torch.zeros(s) if bias is None else bias.clone()  # what is added to the scaled scores
    allowed = call.allowed(head, slice(query, query + 1), slice(0, s))
    allowed = torch.ones(s, dtype=torch.bool) if allowed is None else allowed[0].cpu()
    neg = torch.tensor(float("-inf"))
    score = raw * call.scale if call.cap is None else call.cap * torch.tanh(raw * call.scale / call.cap)  # soft-capped
    scaled = torch.where(allowed, score + extra, neg)
    if call.sink is not None:  # a learned sink: one more logit in the softmax, a key with no value
        sink = call.sink[head if call.sink.shape[0] > 1 else 0, query if call.sink.shape[1] > 1 else 0]
        weights = torch.softmax(torch.cat([scaled, sink.float().cpu()[None]]), -1)[:-1]
    else:
        weights = torch.softmax(scaled, -1)
    unscaled = torch.softmax(torch.where(allowed, raw + extra, neg), -1)
    scale_text = (
        ""
        if call.scale == 1.0
        else " / √d_k"
        if abs(call.scale - q.shape[0] ** -0.5) < 1e-9
        else f" × {call.scale:.4g}"
    )
    return Walkthrough(
        kind=call.kind,
        layer=call.layer,
        head=head,
        query=query,
        query_token=q_tokens[query],
        key_tokens=list(k_tokens),
        q=cpu(q),
        k=cpu(k),
        v=cpu(v),
        raw=cpu(raw),
        scale=call.scale,
        bias=None if bias is None else cpu(bias),
        scaled=cpu(scaled),
        weights=cpu(weights),
        unscaled_weights=cpu(unscaled),
        context=cpu(weights @ v),
        model_weights=cpu(call.block(head, slice(query, query + 1), slice(0, s))[0].cpu()),
        score=f"q · k{scale_text}" + (" + position bias" if bias is not None else ""),
        q_formula="(its layer's, positions applied)",  # after the projection, RoPE rotating q and k
        allowed=cpu(allowed).astype(bool),
    )


def cpu(x: torch.Tensor) -> np.ndarray:
    return x.detach().float().cpu().numpy()


def _query_index(query: int, q_tokens: list[str]) -> int:
    if not -len(q_tokens) <= query < len(q_tokens):
        raise ValueError(f"query {query} out of range: {len(q_tokens)} tokens (0..{len(q_tokens) - 1})")
    return query % len(q_tokens)


def _explain_recurrent(
    call: AttentionCall, prepared: Prepared, site: AttentionSite, head: int, query: int
) -> Walkthrough:
    """Luong attention of decoder step ``query``: its score, window (local) and weights, recomputed
    from the recorded decoder states, encoder states and window centres."""
    module = cast(GlobalAttention | LocalAttention, site.module)
    if head != 0:
        raise ValueError(f"head {head} out of range: the RNN's attention has one head (0)")
    q_tokens, k_tokens = prepared.queries("cross"), prepared.keys("cross")
    query = _query_index(query, q_tokens)
    states = call.extra["queries"].float()  # (t, H) decoder states h_t
    keys, values = call.extra["keys"].float(), call.extra["values"].float()  # (s, H) encoder states
    model_weights = call.block(0, slice(query, query + 1), slice(0, keys.shape[0]))[0]
    h = states[query]
    s = keys.shape[0]
    terms = module.score.terms(h, keys)  # (s, ·)
    factor = module.score.query_factor(h)  # what the terms multiply each encoder state by
    raw = terms.sum(-1)
    positions = torch.arange(s, device=keys.device, dtype=raw.dtype)
    allowed = torch.ones(s, dtype=torch.bool, device=keys.device)
    p_t = window = gauss = None
    if isinstance(module, LocalAttention):
        window = module.window
        p_t = float(call.extra["p_t"][query])
        allowed = (positions >= math.ceil(p_t - window)) & (positions <= p_t + window)
    scaled = torch.where(allowed, raw, torch.tensor(float("-inf"), device=raw.device))
    weights = torch.softmax(scaled, -1)
    if isinstance(module, LocalAttention) and module.mode == "local-p":
        assert window is not None and p_t is not None  # set above for local attention
        sigma = window / 2.0
        g = torch.exp(-((positions - p_t) ** 2) / (2.0 * sigma**2))
        weights = weights * g
        gauss = cpu(g)
    weights_np = cpu(weights)
    return Walkthrough(
        kind="cross",
        layer=site.layer,
        head=0,
        query=query,
        query_token=q_tokens[query],
        key_tokens=list(k_tokens),
        x=cpu(h),
        q=cpu(h),
        k=cpu(keys),
        v=cpu(values),
        raw=cpu(raw),
        scale=1.0,
        bias=None,
        scaled=cpu(scaled),
        weights=weights_np,
        unscaled_weights=weights_np,
        context=weights_np @ cpu(values),
        model_weights=cpu(model_weights),
        score=module.score.formula.replace("q", "h_t").replace("k", "h̄_s"),
        terms_formula=module.score.terms_formula.replace("q", "h_t").replace("k", "h̄_s"),
        terms=cpu(terms),
        factor=None if factor is None else cpu(factor),
        factor_formula=module.score.factor_formula.replace("q", "h_t"),
        allowed=cpu(allowed).astype(bool),
        p_t=p_t,
        window=window,
        gauss=gauss,
        recurrent=True,
    )

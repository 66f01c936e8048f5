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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..attention.multihead import MultiHeadAttention
from ..models.interface import AttentionSite, EncoderModel, Seq2SeqModel, find_site
from .capture import LABELS, Prepared


def attention_module(model: Seq2SeqModel | EncoderModel, kind: str, layer: int) -> MultiHeadAttention:
    """The multi-head attention of ``kind`` in ``layer`` (negative counts from the top)."""
    return _multi_head(find_site(model, kind, layer))


def _multi_head(site: AttentionSite) -> MultiHeadAttention:
    if not isinstance(site.module, MultiHeadAttention):
        raise ValueError(f"the Q/K/V walk-through needs multi-head attention; this model's {LABELS[site.kind]} "
                         f"is {type(site.module).__name__}")
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
    x: np.ndarray            # (d_model,) the layer input of the query token (after LayerNorm when pre-norm)
    q: np.ndarray            # (d_k,)
    k: np.ndarray            # (s, d_k)
    v: np.ndarray            # (s, d_k)
    raw: np.ndarray          # (s,) q . k_j
    scale: float             # 1 / sqrt(d_k)
    bias: np.ndarray | None  # (s,) positional score bias, if the model has one
    scaled: np.ndarray       # (s,) raw * scale + bias, -inf where masked
    weights: np.ndarray      # (s,) softmax(scaled)
    unscaled_weights: np.ndarray  # (s,) softmax(raw + bias): what attention would be without the scaling
    context: np.ndarray      # (d_k,) sum_j weights_j v_j (+ relative value term)
    model_weights: np.ndarray  # (s,) the same weights from the model's own forward pass

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
        np_opts = dict(precision=3, suppress_small=True, max_line_width=140)
        d_k = self.q.shape[0]
        fmt = lambda a: np.array2string(a[:dims], **np_opts) + (" ..." if a.shape[0] > dims else "")  # noqa: E731
        lines = [
            f"{LABELS[self.kind]}, layer {self.layer}, head {self.head}, {self.query_label}; d_k = {d_k}",
            "",
            f"q = x W^Q          {fmt(self.q)}",
            "keys and values of each token (first dims):",
        ]
        width = max(len(t) for t in self.key_tokens)
        for j, t in enumerate(self.key_tokens):
            lines.append(f"  {t:<{width}}  k {fmt(self.k[j])}   v {fmt(self.v[j])}")
        lines += ["", f"{'token':<{width}}  {'q.k':>8}  {'/sqrt(d_k)':>10}" + ("  {:>8}".format("+bias") if self.bias is not None else "")
                  + f"  {'softmax':>8}  {'unscaled':>8}"]
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
) -> Walkthrough:
    """Recompute one head's attention for query position ``query`` of ``prepared``."""
    site = find_site(model, kind, layer)
    module = _multi_head(site)
    if kind != "encoder" and prepared.tgt_in_ids is None:
        raise ValueError(f"{LABELS[kind]} needs a target side")
    if not 0 <= head < module.num_heads:
        raise ValueError(f"head {head} out of range: the layer has {module.num_heads} heads (0..{module.num_heads - 1})")
    q_tokens, k_tokens = prepared.queries(kind), prepared.keys(kind)  # labelled as `plot` and the viewer do
    if not -len(q_tokens) <= query < len(q_tokens):
        raise ValueError(f"query {query} out of range: {len(q_tokens)} tokens (0..{len(q_tokens) - 1})")
    query %= len(q_tokens)

    seen: dict = {}

    def hook(mod, args, kwargs, output):
        seen.update(args=args, kwargs=kwargs, output=output)

    model.eval()
    device = next(model.parameters()).device
    src = torch.tensor([prepared.src_ids], device=device)
    mask = torch.ones_like(src, dtype=torch.bool)
    handle = module.register_forward_hook(hook, with_kwargs=True)
    try:
        if prepared.tgt_in_ids is None:
            model.encode(src, mask, need_weights=True)
        else:
            model(src, mask, torch.tensor([prepared.tgt_in_ids], device=device), need_weights=True)
    finally:
        handle.remove()

    x_q, x_k, x_v = seen["args"][:3]
    hd, h = module.head_dim, module.num_heads
    Q, K, V = (x.float() for x in module.head_projections(x_q, x_k, x_v))  # (1, h, ·, hd)
    x_q = x_q.float()
    t, s = Q.shape[2], K.shape[2]
    positions = module.positions if kind != "cross" else None
    bias = None
    if positions is not None:
        q_pos, k_pos = torch.arange(t, device=device), torch.arange(s, device=device)
        Q, K = positions.rotate(Q, q_pos), positions.rotate(K, k_pos)
        full = positions.score_bias(Q, q_pos, k_pos)
        bias = None if full is None else full.expand(1, h, t, s)[0, head, query].float()
    q, k, v = Q[0, head, query], K[0, head], V[0, head]
    raw = k @ q
    scale = 1.0 / math.sqrt(hd)
    allowed = torch.ones(s, dtype=torch.bool, device=device)
    if seen["kwargs"].get("causal", False):
        allowed = torch.arange(s, device=device) <= query
    logits_scaled = raw * scale + (bias if bias is not None else 0.0)
    logits_raw = raw + (bias if bias is not None else 0.0)
    neg = torch.tensor(float("-inf"), device=device)
    scaled = torch.where(allowed, logits_scaled, neg)
    weights = torch.softmax(scaled, -1)
    unscaled = torch.softmax(torch.where(allowed, logits_raw, neg), -1)
    context = weights @ v
    if positions is not None and positions.needs_weights:
        full_w = torch.zeros(1, h, t, s, device=device)
        full_w[0, head, query] = weights
        q_pos, k_pos = torch.arange(t, device=device), torch.arange(s, device=device)
        context = context + positions.value_term(full_w, q_pos, k_pos)[0, head, query]
    model_weights = seen["output"].weights[0, head, query].float()
    cpu = lambda x: x.detach().cpu().numpy()  # noqa: E731
    return Walkthrough(
        kind=kind, layer=site.layer,
        head=head, query=query, query_token=q_tokens[query], key_tokens=list(k_tokens),
        x=cpu(x_q[0, query]), q=cpu(q), k=cpu(k), v=cpu(v), raw=cpu(raw), scale=scale,
        bias=None if bias is None else cpu(bias), scaled=cpu(scaled), weights=cpu(weights),
        unscaled_weights=cpu(unscaled), context=cpu(context), model_weights=cpu(model_weights),
    )

"""Gradient attributions: what a model's output token used, read from its gradients.

Each row explains one output token y_t by the gradient of its log-probability log p(y_t | ...),
one backward pass per row (a ``Scorer`` runs the model and names the rows and columns).

Gradient-weighted attention (Chefer, Gur & Wolf 2021, "Transformer Interpretability Beyond
Attention Visualization", rule 5; and "Generic Attention-model Explainability for Interpreting
Bi-Modal and Encoder-Decoder Transformers", rules 6-11). Per attention layer l

    Ā_l = E_h[(∂y_t/∂A_l ⊙ A_l)^+]              (heads weighted by the gradient, negatives dropped)

and the relevance follows the layers in the order the model runs them:

    self-attention stack     R = I;  per layer  R += Ā_l R;          row t of R − I
    encoder-decoder          R_ss = I, R_tt = I, R_ts = 0;
        encoder layer            R_ss += Ā_ss R_ss
        decoder self-attention   R_tt += Ā_tt R_tt;   R_ts += Ā_tt R_ts
        cross-attention          R_ts += R̄_tt Ā_ts R̄_ss                row t of R_ts
    one attention over the source (an RNN with Luong attention):  row t of Ā_ts

R̄ is R with its identity taken out, rows normalised, the identity put back (their eqs. 8-9).
The cross-attention rule is written so that row t collects the cross-attention of every target
position that t draws on (R̄_tt on the left): the paper's transposed form would keep, in a
causal decoder, only token t's own cross-attention. Without gradients (Ā_l = mean_h A_l) the
same rules are how ``rollout`` follows an encoder-decoder.

Integrated gradients (Sundararajan, Taly & Yan 2017) and input x gradient (Shrikumar et al. 2016),
computed by captum on the source's input vectors (the model's ``input_embedding``, before
positions), from an all-zero baseline: a token's (or image region's) score is the L2 norm of its
vector's attribution.

Every method's rows are normalised to sum to 1, to compare with attention on one scale. A row of
gradient-weighted attention is all zero where no attention weight raises the token's probability
(with one head over non-negative features, an RNN captioner's CNN regions, that happens).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from ..attention.record import Tap
from .names import GRADIENT_LABELS

# one attention call (or an RNN's steps over one attention): its kind and the weights it mixed with
Calls = list[tuple[str, list[Tap]]]
STRUCTURES = ("self", "seq2seq", "recurrent")
IG_STEPS = 32  # Gauss-Legendre points of integrated gradients (completeness holds to about 1e-3 here)


@dataclass
class Scorer:
    """A model made ready for gradients on one input.

    rows: the output tokens explained (row t: the token predicted at query position t);
    cols: the input tokens (or image regions) they are attributed to;
    structure: how its attention layers stack ("self", "seq2seq" or "recurrent");
    embedding: the module whose first output in a forward pass is the input vectors;
    forward(copies, maps=True): the model on ``copies`` rows of the input -> ((copies, rows)
    log-probabilities of the output tokens, or another score per row, the attention calls in the
    order they ran; ``maps`` false: none, nothing recorded, the fused kernels alone)."""

    rows: list[str]
    cols: list[str]
    structure: str
    embedding: nn.Module
    forward: Callable[..., tuple[Tensor, Calls]]
    pooled: bool = False  # one row for a pooled output (an encoder's sentence vector): every query's mean

    def __post_init__(self) -> None:
        if self.structure not in STRUCTURES:
            raise ValueError(f"unknown structure {self.structure!r}")

    @contextmanager
    def _replaced(self, vectors: Tensor | None, seen: list[Tensor]) -> Iterator[None]:
        """The embedding's first output in each forward pass is ``vectors`` (when given) and is
        kept in ``seen``; later calls (a shared table embedding the target) pass through."""

        def hook(module, args, output):
            if seen:
                return output
            out = output if vectors is None else vectors
            seen.append(out)
            return out

        handle = self.embedding.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()

    def vectors(self) -> Tensor:
        """The input vectors (1, cols, d) or an image's (1, d, rows, columns), detached."""
        seen: list[Tensor] = []
        with torch.no_grad(), self._replaced(None, seen):
            self.forward(1)
        return seen[0].detach()

    def scores_from(self, vectors: Tensor) -> Tensor:
        """(copies, rows) log-probabilities with the input vectors replaced by ``vectors``."""
        seen: list[Tensor] = []
        with self._replaced(vectors, seen):
            scores, _ = self.forward(vectors.shape[0])
        return scores


def _layer(taps: list[Tap], parts: list[Tensor]) -> Tensor:
    """(heads, queries, keys) of one layer from per-tap tensors of the taps' shapes."""
    full = torch.cat([tap.spread(p) for tap, p in zip(taps, parts)], dim=-2)
    if full.dim() == 3:  # (b, t, s): one head
        full = full[:, None]
    return full[0]


def _bar(r: Tensor) -> Tensor:
    """R̄: identity out, rows normalised, identity back (Chefer et al.'s eqs. 8-9)."""
    eye = torch.eye(r.shape[-1], dtype=r.dtype, device=r.device)
    rest = r - eye
    return rest / rest.sum(-1, keepdim=True).clamp_min(1e-12) + eye


def relevance(layers: list[tuple[str, Tensor]], structure: str) -> Tensor:
    """The relevance (queries at the top, input tokens) of per-layer (queries, keys) matrices Ā_l
    given in the order the model ran them (see the module docstring)."""
    if structure == "recurrent":
        return sum((a for kind, a in layers if kind == "cross"), torch.zeros(()))
    if structure == "self":
        n = layers[0][1].shape[-1]
        eye = torch.eye(n, dtype=layers[0][1].dtype)
        r = eye.clone()
        for _, a in layers:
            r = r + a @ r
        return r - eye
    cross = [a for kind, a in layers if kind == "cross"]
    t, s = cross[0].shape
    r_ss, r_tt = torch.eye(s, dtype=cross[0].dtype), torch.eye(t, dtype=cross[0].dtype)
    r_ts = torch.zeros(t, s, dtype=cross[0].dtype)
    for kind, a in layers:
        if kind == "encoder":
            r_ss = r_ss + a @ r_ss
        elif kind == "decoder":
            r_tt, r_ts = r_tt + a @ r_tt, r_ts + a @ r_ts
        else:
            r_ts = r_ts + _bar(r_tt) @ a @ _bar(r_ss)
    return r_ts


def normalise_rows(scores: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (a row of zeros stays zeros)."""
    scores = np.asarray(scores, dtype=np.float64)
    return scores / np.maximum(scores.sum(-1, keepdims=True), 1e-12)


def gradient_attention(scorer: Scorer) -> np.ndarray:
    """(output tokens, input tokens) gradient-weighted attention relevance, rows summing to 1."""
    scores, calls = scorer.forward(1)
    flat = [tap.weights for _, taps in calls for tap in taps]
    rows = []
    for t in range(len(scorer.rows)):
        grads = torch.autograd.grad(scores[0, t], flat, retain_graph=True, allow_unused=True)
        layers, i = [], 0
        for kind, taps in calls:
            parts = [
                (torch.zeros_like(tap.weights) if g is None else g) * tap.weights
                for tap, g in zip(taps, grads[i : i + len(taps)])
            ]
            i += len(taps)
            layers.append((kind, _layer(taps, parts).clamp_min(0).mean(0).detach()))
        found = relevance(layers, scorer.structure)
        rows.append(found.mean(0) if scorer.pooled else found[t])
    return normalise_rows(torch.stack(rows).double().numpy())


def attention_relevance(layers: list[tuple[str, np.ndarray]], structure: str) -> np.ndarray:
    """The same rules without gradients (Ā_l = mean_h A_l), from captured (heads, q, k) maps in
    run order: an encoder-decoder's rollout. Rows sum to 1."""
    mean = [(kind, torch.from_numpy(np.asarray(m, dtype=np.float64)).mean(0)) for kind, m in layers]
    return normalise_rows(relevance(mean, structure).numpy())


def _token_scores(attribution: Tensor) -> Tensor:
    """(1, cols, d) or an image's (1, d, rows, columns) attribution -> (cols,) L2 norms."""
    if attribution.dim() == 4:
        attribution = attribution.flatten(2).transpose(1, 2)
    return attribution[0].norm(dim=-1)


def integrated_gradients(scorer: Scorer, *, steps: int = IG_STEPS) -> np.ndarray:
    """(output tokens, input tokens) integrated gradients (captum), rows summing to 1."""
    from captum.attr import IntegratedGradients

    x = scorer.vectors()
    ig = IntegratedGradients(scorer.scores_from)
    rows = [
        _token_scores(
            ig.attribute(
                x,
                baselines=torch.zeros_like(x),
                target=t,
                n_steps=steps,
                method="gausslegendre",
                internal_batch_size=steps,
            )
        )
        for t in range(len(scorer.rows))
    ]
    return normalise_rows(torch.stack(rows).detach().double().numpy())


def input_x_gradient(scorer: Scorer) -> np.ndarray:
    """(output tokens, input tokens) input x gradient (captum), rows summing to 1."""
    from captum.attr import InputXGradient

    x = scorer.vectors()
    ixg = InputXGradient(scorer.scores_from)
    rows = [_token_scores(ixg.attribute(x.clone().requires_grad_(), target=t)) for t in range(len(scorer.rows))]
    return normalise_rows(torch.stack(rows).detach().double().numpy())


GRADIENT_METHODS: dict[str, tuple[Callable[[Scorer], np.ndarray], str]] = {
    name: (fn, GRADIENT_LABELS[name])
    for name, fn in (
        ("grad-attention", gradient_attention),
        ("integrated-gradients", integrated_gradients),
        ("input-x-gradient", input_x_gradient),
    )
}

"""What each head and MLP writes into the answer: direct logit attribution, and the logit lens.

Direct logit attribution reads each writer of the residual stream (``streams.stream``) through
the final norm, its scale frozen at its value, and the unembedding: the logit of the answer (less
the foil's, given one) each term adds. The terms and the constant (the norm's shift and the
unembedding's bias) sum to the model's own logit.

The logit lens (nostalgebraist 2020) reads each layer's output through the final norm as it is
(its scale the layer's own) and the unembedding: where in depth the answer appears.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .pairs import answer_token
from .streams import logit_stack, stream


@dataclass
class LogitAttribution:
    """Each term's direct effect on the logit of ``answer`` (less ``foil``'s, when given).

    names, layers, heads   the terms (``streams.Stream``'s)
    values                 (terms,) each term's logit
    constant               what no term writes (the final norm's shift, the unembedding's bias)
    logit                  the model's own: values.sum() + constant
    """

    names: list[str]
    layers: list[int]
    heads: list[int | None]
    values: np.ndarray
    constant: float
    logit: float
    answer: str
    foil: str | None
    tokens: list[str]

    def grid(self, site: str | None = None) -> np.ndarray:
        """The heads' values as (layers, heads), of the attention sites whose name starts with
        ``site`` (default every head, sites of a layer side by side: self-attention then cross)."""
        rows = [
            (n, layer, h, v)
            for n, layer, h, v in zip(self.names, self.layers, self.heads, self.values)
            if h is not None and (site is None or n.startswith(site + "."))
        ]
        if not rows:
            raise ValueError(f"no heads at {site!r}")
        sites = list(dict.fromkeys(n.rsplit(".h", 1)[0] for n, *_ in rows))
        per_layer = max(sum(1 for s in sites if int(s.split(".")[1]) == layer) for layer in {r[1] for r in rows})
        heads = max(r[2] for r in rows) + 1
        layers = sorted({r[1] for r in rows})
        out = np.full((len(layers), per_layer * heads), np.nan)
        for n, layer, h, v in rows:
            mine = [s for s in sites if int(s.split(".")[1]) == layer]
            out[layers.index(layer), mine.index(n.rsplit(".h", 1)[0]) * heads + h] = v
        return out

    def table(self) -> list[dict[str, Any]]:
        """One row per term, largest first."""
        rows = [
            {"term": n, "layer": layer, "head": h, "logit": float(v)}
            for n, layer, h, v in zip(self.names, self.layers, self.heads, self.values)
        ]
        return sorted(rows, key=lambda r: -abs(r["logit"]))


def direct_logit_attribution(
    model: Any, text: str, answer: str, foil: str | None = None, *, target: str | None = None, position: int = -1
) -> LogitAttribution:
    """Each head's and MLP's direct effect on the logit of ``answer`` (one token; less ``foil``'s)
    at ``position`` of ``text`` (default the last: the next token)."""
    token = answer_token(model, "attribute")
    _check_target(model, target)
    a = token(answer)
    f = token(foil) if foil is not None else None
    s = stream(model, text, target=target, position=position)
    with torch.no_grad():
        logits = s.read.linear(s.terms)
        constant = s.read.constant
        values = logits[:, a] - (logits[:, f] if f is not None else 0)
        const = constant[a] - (constant[f] if f is not None else 0)
        own = s.logits[a] - (s.logits[f] if f is not None else 0)
    return LogitAttribution(
        s.names, s.layers, s.heads, values.double().numpy(), float(const), float(own), answer, foil, s.tokens
    )


def _check_target(model: Any, target: str | None) -> None:
    if model.capabilities.forced and target is None:
        raise ValueError(f"{model.name} translates: give target, the output before the answer")


@dataclass
class Lens:
    """The logit lens at one position: each layer's output read as the final layer's is.

    layers     the layers (their ``resid_post``), in order
    top        each layer's most likely next tokens, [(token, probability), ...]
    answer     the answer's (logit less the foil's, given one; else its log-probability) per layer
    rank       the answer's rank per layer (0: the most likely)
    """

    layers: list[int]
    top: list[list[tuple[str, float]]]
    answer: np.ndarray
    rank: np.ndarray
    position: int


def logit_lens(
    model: Any,
    text: str,
    answer: str | None = None,
    foil: str | None = None,
    *,
    target: str | None = None,
    position: int = -1,
    k: int = 5,
) -> Lens:
    """Each layer's output at ``position`` through the final norm and the unembedding: its ``k``
    most likely tokens, and the answer's standing when one is given."""
    stack, final, logits_site = logit_stack(model)
    _check_target(model, target)
    outs = [s for s in model.sites() if s.role == "resid_post" and s.name.startswith(stack + ".")]
    run = model.cache(text, sites=[s.name for s in outs], target=target)
    t = len(run.tokens)
    if not -t <= position < t:
        raise ValueError(f"position {position} is outside the {t} positions of the input")
    p = position % t
    a = model.answer_token(answer) if answer is not None else None
    f = model.answer_token(foil) if foil is not None else None
    top, standing, rank = [], [], []
    with torch.no_grad():
        for s in outs:
            x = run[s.name][:, p : p + 1]
            logits = logits_site.module(final.module(x) if final is not None else x)[0, 0].float()
            probs = torch.softmax(logits, -1)
            best = torch.topk(probs, min(k, probs.numel()))
            ids = best.indices.tolist()
            top.append(list(zip(model.output_tokens(ids), best.values.tolist())))
            if a is not None:
                standing.append(float(logits[a] - logits[f]) if f is not None else float(torch.log(probs[a])))
                rank.append(int((logits > logits[a]).sum()))
    return Lens([s.layer for s in outs], top, np.array(standing), np.array(rank), p)

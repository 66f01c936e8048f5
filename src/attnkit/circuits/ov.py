"""What a head writes: its OV circuit from the tokens to the logits, and how much it copies.

A head that attends to a key writes W_V W_O of the key's stream. Read from the token embeddings
to the logits, that is the head's full OV circuit (Elhage et al. 2021)

    OV_h = W_E W_V,h W_O,h W_U        (vocabulary x vocabulary; row t: the logits raised by t)

with the layer's input norm's weight folded into W_V (its scale left out) and the final norm read
with its scale frozen at the text's last position (positive numbers, which scale the circuit and
change neither its signs, its ranks nor its copying score), a
norm after the attention block folded into W_O, and the logits centred over the vocabulary (a
softmax ignores a shift every logit shares), as TransformerLens does by default. Its copying
score is sum(eigenvalues) / sum(|eigenvalues|): 1 for a head whose circuit raises the token it
reads, -1 for one that suppresses it. The vocabulary x vocabulary matrix is never formed: its
non-zero eigenvalues are those of W_O,h W_U W_E W_V,h (head size squared), and W_U W_E is formed
once for every head.

W_E is the token embedding as the first layer's stream reads it (any scale the model multiplies
it by included; absolute positions, which every token shares, left out as the literature does);
W_U is the final norm and the unembedding, probed through their own modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor, nn

from ..memory import check_fits
from .patching import Unit
from .paths import _heads, head_weights
from .reading import close
from .streams import _reader, logit_stack

CHUNK = 8192  # vocabulary rows embedded at once


@dataclass
class OVCircuits:
    """Heads' OV circuits, read on the tokens of one text.

    names       the heads ("blocks.0.attn.h3"), with their ``layers`` and ``heads``
    copying     (heads,) Elhage et al.'s copying score of each head's full OV circuit, in [-1, 1]
    sources     the text's distinct tokens, in order of first appearance (``at``: those positions)
    ranks       (heads, sources) where each source token ranks among the tokens its own row raises
                (0: the head raises the token it reads above every other: it copies it)
    raised      per head, per source, the ``k`` tokens it raises most, [(token, centred logit), ...]:
                the head's write were it to attend to the token's embedding alone (the layer's
                norm applied), read as the final norm reads the text's last position
    """

    names: list[str]
    layers: list[int]
    heads: list[int]
    copying: np.ndarray
    sources: list[str]
    at: list[int]
    ranks: np.ndarray
    raised: list[list[list[tuple[str, float]]]]

    @property
    def copies(self) -> np.ndarray:
        """Each head's share of the text's tokens that it raises above every other token (heads,)."""
        return (self.ranks == 0).mean(1)

    def table(self) -> list[dict[str, Any]]:
        """One row per head, the most copying first: to sort, filter or plot."""
        rows = [
            {
                "head": n,
                "layer": layer,
                "index": h,
                "copying": float(c),
                "copies": float(s),
                "top": " ".join(t for t, _ in raised[0][:3]) if raised else "",
            }
            for n, layer, h, c, s, raised in zip(
                self.names, self.layers, self.heads, self.copying, self.copies, self.raised
            )
        ]
        return sorted(rows, key=lambda r: -r["copying"])

    def grid(self) -> np.ndarray:
        """The copying scores as (layers, heads): NaN where a layer has fewer heads."""
        layers = sorted(set(self.layers))
        out = np.full((len(layers), max(self.heads) + 1), np.nan)
        for layer, h, c in zip(self.layers, self.heads, self.copying):
            out[layers.index(layer), h] = c
        return out


@torch.no_grad()
def ov_circuits(
    model: Any, text: str, *, heads: list[Unit] | None = None, k: int = 5, target: str | None = None
) -> OVCircuits:
    """The full OV circuit of each self-attention head of the stack the logits read (``heads``:
    some of them): its copying score, and on ``text``'s tokens the ``k`` tokens each raises most."""
    stack, final, logits_site = logit_stack(model)
    mine = [u for u in _heads(model, heads, "head") if u.site.startswith(stack + ".")]
    sites = {s.z.name: s for s in model.sites() if s.role == "attn" and s.kind != "cross"}
    mine = [u for u in mine if u.site in sites]
    if not mine:
        raise ValueError(f"{model.name}: no self-attention head of its {stack} stack was given")
    embed, ids = token_embedding(model, text, stack, target)
    unembed = _unembedding(model, text, stack, final, logits_site, target)  # (d, V), centred over V
    vocab = unembed.shape[1]
    check_fits(3 * 4 * unembed.shape[0] * vocab, "the OV circuits' unembedding", "a model of a smaller vocabulary")
    ue = torch.zeros(unembed.shape[0], unembed.shape[0], dtype=torch.float64)
    for i in range(0, min(vocab, embed.num_rows), CHUNK):
        rows = embed(torch.arange(i, min(i + CHUNK, vocab, embed.num_rows)))
        ue += unembed[:, i : i + rows.shape[0]].double() @ rows.double()
    distinct = list(dict.fromkeys(ids))
    source = embed(torch.tensor(distinct)).float()  # (n, d)
    weights = {z: head_weights(model, sites[z], text, target, reads=("v",)) for z in {u.site for u in mine}}
    copying, ranks, raised = [], [], []
    at = torch.arange(len(distinct))
    centres = next(iter(weights.values())).centres
    normed = source - source.mean(-1, keepdim=True) if centres else source
    normed = normed / normed.pow(2).mean(-1, keepdim=True).sqrt()  # each token alone through the norm
    for u in mine:
        w, h = weights[u.site], int(cast(int, u.head))
        assert w.w_v is not None
        wv, wo = w.w_v[h * w.w_v.shape[0] // w.w_o.shape[0]], w.w_o[h]  # (d, e), (e, d)
        eig = torch.linalg.eigvals(wo.double() @ ue @ wv.double())
        copying.append(float(eig.sum().real / eig.abs().sum()) if float(eig.abs().sum()) > 0 else 0.0)
        logits = (normed @ wv @ wo) @ unembed  # (n, V)
        own = logits[at, torch.tensor(distinct)]
        ranks.append((logits > own[:, None]).sum(1).numpy())
        best = torch.topk(logits, min(k, vocab))
        raised.append(
            [
                list(zip(model.output_tokens(i.tolist()), [float(v) for v in vals]))
                for i, vals in zip(best.indices, best.values)
            ]
        )
    return OVCircuits(
        [f"{u.site[: -len('.z')]}.h{u.head}" for u in mine],
        [u.layer for u in mine],
        [int(cast(int, u.head)) for u in mine],
        np.array(copying),
        model.output_tokens(distinct),
        [ids.index(t) for t in distinct],
        np.array(ranks),
        raised,
    )


@dataclass
class Embedding:
    """A stack's token embedding as its first layer's stream reads it: ``module`` times ``scale``."""

    module: nn.Module
    scale: float
    num_rows: int

    def __call__(self, ids: Tensor) -> Tensor:
        return self.module(ids).float() * self.scale


def token_embedding(model: Any, text: str, stack: str, target: str | None = None) -> tuple[Embedding, list[int]]:
    """The embedding module that reads the stack's token ids, checked on ``text``: the first
    layer's input less the same input with that module's output zeroed (what positions and token
    types add stays) is its output times one number; one line for a model that changes the
    embeddings before the stream (a norm, a projection)."""
    seen: list[tuple[nn.Module, Tensor, Tensor]] = []

    def keep(m: nn.Module, args: tuple, output: Any) -> None:
        if args and isinstance(args[0], Tensor) and isinstance(output, Tensor):
            seen.append((m, args[0].detach(), output.detach()))

    handles = [m.register_forward_hook(keep) for m in model.network().modules() if isinstance(m, nn.Embedding)]
    first = f"{stack}.0.resid_pre"
    try:
        run = model.cache(text, sites=[first], target=target)
    finally:
        for handle in handles:
            handle.remove()
    p = run.prepared
    ids = p.tgt_in_ids if p.tgt_in_ids is not None and stack != "encoder" else p.src_ids
    x = run[first][0].float()
    want = torch.tensor(ids)
    tokens = [
        (m, o[0].float())
        for m, i, o in seen
        if i.numel() == len(ids) and torch.equal(i.flatten().cpu(), want) and o.shape[-1] == x.shape[-1]
    ]
    if not tokens:
        raise ValueError(f"{model.name}: no embedding of its {stack} stack's tokens has the stream's width")
    module, out = max(tokens, key=lambda mo: cast(nn.Embedding, mo[0]).num_embeddings)
    handle = module.register_forward_hook(lambda m, a, o: torch.zeros_like(o))
    try:
        rest = model.cache(text, sites=[first], target=target)[first][0].float()
    finally:
        handle.remove()
    scale = float(((x - rest) * out).sum() / (out * out).sum().clamp(min=1e-30))
    if not close(scale * out + rest, x):
        raise ValueError(
            f"{model.name}: its {stack} stack's first input is not its token embedding (times one number) "
            "plus what the positions add (a norm or a projection between), so its OV circuits have no token basis"
        )
    return Embedding(module, scale, cast(nn.Embedding, module).num_embeddings), list(ids)


def _unembedding(model: Any, text: str, stack: str, final, logits_site, target: str | None) -> Tensor:
    """The final norm (its scale frozen at the text's last position) and the unembedding as a
    (d, V) matrix, each row centred over the vocabulary."""
    layers = max(s.layer for s in model.sites() if s.role == "resid_post" and s.name.startswith(stack + "."))
    last = f"{stack}.{layers}.resid_post"
    run = model.cache(text, sites=[last, *([final.name] if final is not None else [])], target=target)
    x = run[last][0, -1]
    reader = _reader(model, final, logits_site, run, x, len(run.tokens) - 1)
    u = reader.linear(torch.eye(x.shape[-1], dtype=x.dtype)).float()
    return u - u.mean(1, keepdim=True)

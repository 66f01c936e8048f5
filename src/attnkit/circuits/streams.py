"""The residual stream at one position as the sum of what wrote it, and the logits read from it
linearly.

A pre-norm stack's stream into its final norm is

    x = embeddings + sum over layers (sum over heads W_O,h z_h + b_O + MLP out)

and each term is found from the sites of one cached run: the embeddings are the first layer's
``resid_pre``, each head's write is its output projection applied to its ``.z`` alone, each MLP's
its ``mlp_out``. The output projection is found, not named: the linear module inside the
attention module whose input is the heads' outputs merged (checked on the run). Every identity
is checked on the run and a model where it fails (a norm after the attention or the MLP:
post-norm, sandwich norms; a gate between the heads and their projection) is refused in one
line, never attributed wrongly.

The final norm's scale is frozen at its value on the run (as the literature does): the norm then
is affine, y = D (x - centre) + shift, with D, the centring and the shift found by running the
norm module itself, so any LayerNorm or RMSNorm (Gemma's 1 + weight included) is read the same
way; the unembedding is read through its own module. The terms' logits then sum to the model's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..attention.sites import Site
from .reading import beside, check, close, freeze

TOLERANCE = 1e-4  # relative: an identity of the stream holds to this share of the stream's size


@dataclass
class Stream:
    """The stream into the final norm at one position, by its writers.

    names      "embed", "blocks.3.attn.h5", "blocks.3.attn.bias", "blocks.3.mlp", ... in order
    layers     each term's layer (-1: the embeddings)
    heads      each term's head (None: not a head)
    terms      (terms, d): each term's write at the position; they sum to ``x``
    x          (d,) the stream; ``y`` the final norm's output
    read       the frozen norm and the unembedding as one affine map: ``logits(v)`` of a term,
               ``constant`` the logits of no term (the norm's shift and the unembedding's bias)
    logits     (V,) the model's own logits at the position
    """

    names: list[str]
    layers: list[int]
    heads: list[int | None]
    terms: Tensor
    x: Tensor
    read: Reader
    logits: Tensor
    tokens: list[str]
    position: int


@dataclass
class Reader:
    """The final norm, its scale frozen at one position's value, then the unembedding: affine in
    the stream. ``linear(v)`` is the logits v contributes (v a term or a batch of them)."""

    unembed: nn.Module
    scale: Tensor  # (d,) D: the norm's weight over the frozen scale
    centres: bool  # the norm subtracts each vector's mean (LayerNorm) or not (RMSNorm)
    shift: Tensor  # (d,) the norm's bias
    bias: Tensor  # (V,) the unembedding's

    def normed(self, v: Tensor) -> Tensor:
        v = v - v.mean(-1, keepdim=True) if self.centres else v
        return v * self.scale

    def linear(self, v: Tensor) -> Tensor:
        return self.unembed(self.normed(v)) - self.bias

    @property
    def constant(self) -> Tensor:
        return self.unembed(self.shift)


def _refuse(model: Any, why: str) -> ValueError:
    return ValueError(f"{model.name}: {why}, so its stream is not a sum of its heads' and MLPs' writes")


def logit_stack(model: Any) -> tuple[str, Site | None, Site]:
    """The stack the logits read (its name), its final norm's site (None: no norm) and the logits'."""
    have: list[Site] = model.sites()
    logits = next((s for s in have if s.role == "logits"), None)
    if logits is None or logits.module is None:
        raise ValueError(f"{model.name} is {model.capabilities.a}: it has no output layer to read logits from")
    before = have[: have.index(logits)]
    last = next((s for s in reversed(before) if s.role == "resid_post"), None)
    if last is None:
        raise _refuse(model, "it names no residual stream (a recurrent decoder)")
    stack = last.name.split(".")[0]
    final = next((s for s in reversed(before) if s.role == "final"), None)
    return stack, final, logits


@dataclass
class Writers:
    """A stack's residual stream at some positions, by its writers: into layer ``layer``'s
    ``resid_pre`` (the writers of the layers before it) or, with ``layer`` None, out of the last
    layer (every writer). ``terms`` (terms, positions, d) sum to ``x`` (positions, d); ``run`` is
    the cached run they were read from."""

    names: list[str]
    layers: list[int]
    heads: list[int | None]
    terms: Tensor
    x: Tensor
    positions: list[int]
    stack: str
    run: Any


@torch.no_grad()
def writers(
    model: Any,
    text: str,
    stack: str,
    positions: list[int] | None = None,
    *,
    layer: int | None = None,
    target: str | None = None,
    keep: tuple[str, ...] = (),
) -> Writers:
    """``stack``'s stream at ``positions`` of ``text`` (default every one) decomposed into its
    writers (the sites in ``keep`` cached too); one line for a model where that sum fails."""
    have: list[Site] = model.sites()
    mine = [s for s in have if s.name.startswith(stack + ".")]
    layers = sorted({s.layer for s in mine if s.role == "resid_pre"})
    if layer is not None and layer not in layers:
        raise ValueError(f"{stack} has layers {layers[0]} to {layers[-1]}, not {layer}")
    upto = layers if layer is None else [x for x in layers if x < layer]
    attention = [s for s in mine if s.role == "attn" and s.layer in upto]
    names = [s.name for s in mine if s.role in ("resid_pre", "resid_post", "mlp_out", "z")]
    inputs: dict[Any, list[tuple[nn.Module, Tensor, Tensor]]] = {}
    handles = [
        m.register_forward_hook(_keep_io(inputs, id(site.module), m))
        for site in attention
        for m in site.module.modules()
        if _affine(m)
    ]
    handles += [  # the modules of each layer beside its attention: a norm after a block is among them
        m.register_forward_hook(_keep_io(inputs, ("after", site.layer), m))
        for site in attention
        for m in beside(model, site.module)
    ]
    try:
        run = model.cache(text, sites=names + [k for k in keep if k not in names], target=target)
    finally:
        for h in handles:
            h.remove()
    t = run[f"{stack}.0.resid_pre"].shape[-2]
    positions = list(range(t)) if positions is None else positions
    for p in positions:
        if not -t <= p < t:
            raise ValueError(f"position {p} is outside the {t} positions of the input")
    ps = [p % t for p in positions]
    terms: list[tuple[str, int, int | None, Tensor]] = [("embed", -1, None, run[f"{stack}.0.resid_pre"][0, ps])]
    for x in upto:
        terms += _layer_terms(model, run, stack, x, [s for s in attention if s.layer == x], inputs, ps)
    x = run[f"{stack}.{layers[-1]}.resid_post"][0, ps] if layer is None else run[f"{stack}.{layer}.resid_pre"][0, ps]
    if layer is not None and layer > 0:
        _check(
            model,
            x,
            run[f"{stack}.{layer - 1}.resid_post"][0, ps],
            f"layer {layer}'s input is not layer {layer - 1}'s output",
        )
    _check(
        model,
        torch.stack([v for *_, v in terms]).sum(0),
        x,
        "the stream is not the sum of its embeddings, heads and MLPs",
    )
    return Writers(
        [n for n, *_ in terms],
        [li for _, li, *_ in terms],
        [h for _, _, h, _ in terms],
        torch.stack([v for *_, v in terms]),
        x,
        ps,
        stack,
        run,
    )


@torch.no_grad()
def stream(model: Any, text: str, *, target: str | None = None, position: int = -1) -> Stream:
    """``text``'s stream into the final norm at ``position`` (default the last: where the next
    token is read), decomposed into its writers; one line for a model where that sum fails."""
    stack, final, logits_site = logit_stack(model)
    keep = tuple(s.name for s in (final, logits_site) if s is not None)
    w = writers(model, text, stack, [position], target=target, keep=keep)
    run, p = w.run, w.positions[0]
    x = w.x[0]
    read = _reader(model, final, logits_site, run, x, p)
    out = run.logits[0, p]
    _check(model, read.linear(x) + read.constant, out, "the logits are not a linear read of the final norm")
    return Stream(w.names, w.layers, w.heads, w.terms[:, 0], x, read, out, list(run.tokens), p)


def _affine(m: nn.Module) -> bool:
    """A module that is an affine map of its input's last dimension (nn.Linear, GPT-2's Conv1D)."""
    w = getattr(m, "weight", None)
    return isinstance(w, Tensor) and w.dim() == 2 and not list(m.children()) and not isinstance(m, nn.Embedding)


def _keep_io(store: dict, key: Any, module: nn.Module):
    def hook(m: nn.Module, args: tuple, output: Any) -> None:
        if args and isinstance(args[0], Tensor) and isinstance(output, Tensor):
            store.setdefault(key, []).append((module, args[0].detach(), output.detach()))

    return hook


def _projection(model: Any, site: Site, z: Tensor, seen: list[tuple[nn.Module, Tensor, Tensor]]):
    """The output projection of ``site``: the affine module whose input was the heads' outputs
    merged (z (1, h, t, d) -> (1, t, h d)); its output, the attention's output."""
    merged = z.transpose(1, 2).reshape(z.shape[0], z.shape[2], -1)
    for module, given, output in seen:
        if given.shape == merged.shape and torch.allclose(given, merged, rtol=1e-5, atol=1e-6):
            return module, output
    raise _refuse(
        model, f"no linear map of {site.name}'s merged head outputs was found (its heads are changed before W_O)"
    )


def _layer_terms(model: Any, run: Any, stack: str, layer: int, attention: list[Site], inputs: dict, p: list[int]):
    """One layer's writes at positions ``p`` (each (positions, d)): each head's, each attention's
    bias, the MLP's; the layer's identity resid_post = resid_pre + attention + MLP checked."""
    out: list[tuple[str, int, int | None, Tensor]] = []
    pre, post = run[f"{stack}.{layer}.resid_pre"][0, p], run[f"{stack}.{layer}.resid_post"][0, p]
    if layer > 0:
        _check(
            model,
            pre,
            run[f"{stack}.{layer - 1}.resid_post"][0, p],
            f"layer {layer}'s input is not layer {layer - 1}'s output",
        )
    mlp_name = f"{stack}.{layer}.mlp_out"
    if mlp_name not in run:  # without the MLP's own output the layer's sum cannot be checked
        raise _refuse(model, f"layer {layer}'s feed-forward block is not one module whose output attnkit reads")
    blocks: list[tuple[Tensor, list[tuple[str, int, int | None, Tensor]]]] = []  # (a block's output, its terms)
    for site in attention:
        z = run[site.z.name]
        module, output = _projection(model, site, z, inputs.get(id(site.module), []))
        h, d = z.shape[1], z.shape[3]
        alone = torch.zeros(h, len(p), h * d, dtype=z.dtype)
        for head in range(h):
            alone[head, :, head * d : (head + 1) * d] = z[0, head, p]
        with torch.no_grad():
            bias = module(torch.zeros(1, 1, h * d, dtype=z.dtype))[0, 0]
            writes = module(alone) - bias
        terms = [(f"{site.name}.h{head}", layer, head, writes[head]) for head in range(h)]
        blocks.append((output[0], [*terms, (f"{site.name}.bias", layer, None, bias.expand(len(p), -1))]))
    blocks.append((run[mlp_name][0], [(f"{stack}.{layer}.mlp", layer, None, run[mlp_name][0, p])]))
    if not close(pre + sum(b[p] for b, _ in blocks), post, TOLERANCE):  # a norm on each block's output (sandwich norms)
        blocks = [(b, _normed(model, b, terms, inputs.get(("after", layer), []), p)) for b, terms in blocks]
    out = [term for _, terms in blocks for term in terms]
    summed = pre + torch.stack([v for *_, v in out]).sum(0)
    _check(model, summed, post, f"layer {layer}'s output is not its input plus its attention and MLP")
    return out


def _normed(model: Any, block: Tensor, terms: list, seen: list[tuple[nn.Module, Tensor, Tensor]], p: list[int]):
    """A block's terms as its output norm writes them (its scale frozen at the block's output): the
    norm found as the layer's module whose input is the block's output (t, d); the terms unchanged
    where there is none."""
    for module, given, output in seen:
        if given.shape[-2:] == block.shape and torch.allclose(given[0], block, rtol=1e-5, atol=1e-6):
            try:
                frozen = freeze(model, module, block[p], output[0, p], "a norm after a block")
            except ValueError:  # not a norm (a dropout, a gate): the layer's sum says the rest
                continue
            written = [(n, layer, h, frozen.linear(v)) for n, layer, h, v in terms]
            last = written[-1]
            return [*written[:-1], (last[0], last[1], last[2], last[3] + frozen.shift)]  # the shift: the bias's
    return terms


def _check(model: Any, got: Tensor, want: Tensor, why: str) -> None:
    check(model, got, want, f"{why}, so its stream is not a sum of its heads' and MLPs' writes", TOLERANCE)


def _reader(model: Any, final: Site | None, logits: Site, run: Any, x: Tensor, p: int) -> Reader:
    """The final norm frozen at ``x`` and the unembedding, probed through their own modules."""
    unembed = logits.module
    with torch.no_grad():
        bias = unembed(torch.zeros(x.shape[-1], dtype=x.dtype))
    norm = None if final is None else final.module
    y = x if norm is None or final is None else run[final.name][0, p]
    frozen = freeze(model, norm, x[None], y[None], "its final norm")
    return Reader(unembed, frozen.scale[0], frozen.centres, frozen.shift, bias)

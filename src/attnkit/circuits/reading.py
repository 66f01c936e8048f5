"""How an attention layer reads the residual stream, found through the model's own modules.

A pre-norm layer reads its stream x through a norm, then projects it to queries, keys and values
(positions rotate q and k). With the norm's scale frozen at its value at each position (as the
literature freezes the final norm's), the whole read is affine in x:

    norm(x_i) ~ D_i c(x_i) + shift,   q_i = Q_i(norm(x_i)) = Q_i(D_i c(x_i)) - Q_i(0) + Q_i(shift)

where c centres a vector (LayerNorm) or leaves it (RMSNorm) and Q_i is the projection and the
rotation at position i. The norm is found, not named: the module whose input is the layer's
``resid_pre`` and whose output is the attention module's input, on the run. Its scale is read by
running it (so LayerNorm, RMSNorm and Gemma's 1 + weight read alike), and the attention module
itself is run on a batch of inputs of our choosing (one per writer of the stream, or the basis
vectors: the projections' weights), its q, k and v read from the call its site makes. Every
identity is checked on the run; a read that is not affine (a norm on the queries or keys, as
Qwen3's and OLMo 2's) is refused in one line, never decomposed wrongly.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ..attention.sites import Attended, Listener, Site, listening


class _Stop(Exception):
    """Raised by a probe's listener once its call is heard: the rest of the forward pass is not needed."""


@dataclass
class Frozen:
    """A norm with its scale frozen at some positions: ``linear(v)`` = c(v) * scale, (positions, d);
    the norm of x is linear(x) + shift there. No norm: scale 1, no centring, no shift."""

    scale: Tensor  # (positions, d): the norm's weight over each position's frozen sigma
    centres: bool
    shift: Tensor  # (d,)
    weight: Tensor  # (d,) the norm's own weight (its scale at sigma = 1)

    def linear(self, v: Tensor) -> Tensor:
        v = v - v.mean(-1, keepdim=True) if self.centres else v
        return v * self.scale


def close(got: Tensor, want: Tensor, tolerance: float = 1e-4) -> bool:
    """Whether ``got`` is ``want`` to ``tolerance`` of its size."""
    return float((got - want).abs().max()) <= tolerance * (float(want.abs().max()) + 1e-6) + 1e-6


def check(model: Any, got: Tensor, want: Tensor, why: str, tolerance: float = 1e-4) -> None:
    """One line when ``got`` is not ``want`` to ``tolerance`` of its size."""
    if not close(got, want, tolerance):
        err, size = float((got - want).abs().max()), float(want.abs().max()) + 1e-6
        raise ValueError(f"{model.name}: {why} (off by {err:.3g} of {size:.3g})")


def freeze(model: Any, norm: nn.Module | None, x: Tensor, y: Tensor, what: str) -> Frozen:
    """``norm`` (input x, output y: (positions, d)) with its scale frozen at each position, probed
    through the module itself; one line if it is not a LayerNorm or RMSNorm."""
    d = x.shape[-1]
    if norm is None:
        one = torch.ones(d, dtype=x.dtype)
        return Frozen(one.expand(x.shape[0], d), False, torch.zeros(d, dtype=x.dtype), one)
    if d % 2:
        raise ValueError(f"{model.name}: its width {d} is odd (a norm is probed with a zero-mean vector)")
    with torch.no_grad():
        shift = norm(torch.zeros(1, 1, d, dtype=x.dtype))[0, 0]
        centres = bool(torch.allclose(norm(torch.full((1, 1, d), 3.0, dtype=x.dtype))[0, 0], shift, atol=1e-5))
        signs = torch.ones(d, dtype=x.dtype)
        signs[1::2] = -1
        c = 100.0
        weight = (norm((c * signs)[None, None])[0, 0] - shift) * signs  # c / sqrt(c^2 + eps) ~ 1 times the weight
        centred = x - x.mean(-1, keepdim=True) if centres else x
        unit = torch.where(weight.abs() > 1e-12, (y - shift) / weight, torch.zeros_like(y))  # x / sigma
        along = (centred * unit).sum(-1, keepdim=True)
        # a zero row (a padding token's embedding, projected) is zero at any scale: sigma 1
        sigma = torch.where(along != 0, (centred * centred).sum(-1, keepdim=True) / along, torch.ones_like(along))
    frozen = Frozen(weight / sigma, centres, shift, weight)
    check(model, frozen.linear(x) + shift, y, f"{what} is not a LayerNorm or RMSNorm with a frozen scale")
    return frozen


# -- the attention module's input --------------------------------------------------------------


def _input_of(args: tuple, kwargs: dict) -> Tensor | None:
    if isinstance(kwargs.get("hidden_states"), Tensor):
        return kwargs["hidden_states"]
    return args[0] if args and isinstance(args[0], Tensor) else None


def _with_input(args: tuple, kwargs: dict, new: Tensor) -> tuple[tuple, dict]:
    """The call's arguments with its input replaced (every argument that is that very tensor: a
    self-attention given the same input as query, key and value)."""
    old = _input_of(args, kwargs)
    args = tuple(new if a is old else a for a in args)
    kwargs = {k: (new if v is old else v) for k, v in kwargs.items()}
    return args, kwargs


def beside(model: Any, module: nn.Module) -> list[nn.Module]:
    """The modules of ``module``'s parent (its layer) outside ``module``: the layer's norms, its MLP
    and their parts."""
    for parent in model.network().modules():
        if any(c is module for c in parent.children()):
            own = {id(m) for m in module.modules()}
            return [m for m in parent.modules() if m is not parent and id(m) not in own]
    return []


class _Catch(Listener):
    """Keeps the first call at one attention site (detached) and stops the pass there."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.call: Attended | None = None

    def wants(self, site: Site) -> bool:
        return site.name == self.site.name

    def attended(self, call: Attended) -> None:
        self.call = call
        raise _Stop


def _frozen_output(f: Frozen):
    """A forward hook: the norm's frozen affine map of its input (rows of any batch, as on the run)."""

    def hook(m: nn.Module, args: tuple, output: Any) -> Tensor:
        x = args[0]
        flat = x.reshape(x.shape[0], -1, x.shape[-1])  # (b, rows of one input, e)
        return (f.linear(flat) + f.shift).reshape(x.shape).to(x.dtype)

    return hook


def run_to(model: Any, site: Site, text: str, target: str | None, handles: list, hooks: dict | None = None) -> _Catch:
    """Run ``text`` as far as ``site``'s first call (the torch ``handles`` removed after)."""
    catch = _Catch(site)
    try:
        with listening(catch), contextlib.suppress(_Stop):
            model.run(text, target=target, hooks=hooks)
    finally:
        for h in handles:
            h.remove()
    return catch


@dataclass
class Read:
    """How one attention site read its stream on a run: x (t, d) its layer's ``resid_pre``, h (t, d)
    the attention module's input, the norm between them (None: it reads the stream as it is), and
    the norms inside the attention module (a query or key norm), each with its scale frozen at
    its value on the run (``inner``: module -> Frozen over its input's rows)."""

    site: Site
    x: Tensor
    h: Tensor
    norm: nn.Module | None
    inner: dict[nn.Module, Frozen] = field(default_factory=dict)


def attention_site(model: Any, name: str) -> Site:
    """The self-attention site ``name``; one line for anything else."""
    have = {s.name: s for s in model.sites()}
    site = have.get(name)
    if site is None or site.role != "attn":
        known = [s.name for s in have.values() if s.role == "attn"]
        raise ValueError(f"no attention site {name!r} ({model.name} has {', '.join(known[:4])}, ...)")
    if site.kind == "cross":
        raise ValueError(
            f"{name} is cross-attention: its keys are read from the encoder's output, not from its own stream "
            "(give a self-attention site)"
        )
    if site.module is None:
        raise ValueError(f"{name} has no module attnkit can run on inputs of its choosing")
    return site


def read(model: Any, site: Site, text: str, target: str | None = None) -> Read:
    """Run ``text`` to ``site``: its stream, the attention module's input, and the norm between."""
    stack = site.name.split(".")[0]
    seen: list[tuple[nn.Module, Tensor, Tensor]] = []
    given: list[Tensor] = []

    def keep(m: nn.Module, args: tuple, output: Any) -> None:
        if args and isinstance(args[0], Tensor) and isinstance(output, Tensor) and output.shape == args[0].shape:
            seen.append((m, args[0].detach(), output.detach()))

    def take(m: nn.Module, args: tuple, kwargs: dict) -> None:
        x = _input_of(args, kwargs)
        if x is not None:
            given.append(x.detach())

    near = [*beside(model, site.module), *site.module.modules()]  # where its norms can be
    handles = [m.register_forward_hook(keep) for m in near]
    handles.append(site.module.register_forward_pre_hook(take, with_kwargs=True))
    stream = f"{stack}.{site.layer}.resid_pre"
    kept: dict[str, Tensor] = {}

    def stream_in(x: Tensor, _site: Site) -> None:
        kept.setdefault("x", x.detach())

    run_to(model, site, text, target, handles, {stream: stream_in})
    if not given or "x" not in kept:
        raise ValueError(f"{model.name}: {site.name}'s module takes no input attnkit can find")
    x, h = kept["x"][0], given[0][0]
    inner = _inner_norms(model, site, seen)
    if x.shape == h.shape and torch.allclose(x, h, rtol=1e-6, atol=1e-7):
        return Read(site, x, h, None, inner)
    for module, i, o in seen:
        if i.shape[-2:] == x.shape and o.shape[-2:] == h.shape and torch.allclose(i[0], x) and torch.allclose(o[0], h):
            return Read(site, x, h, module, inner)
    raise ValueError(
        f"{model.name}: {site.name} does not read its layer's stream through one norm module (a post-norm "
        "or parallel layout attnkit cannot freeze)"
    )


def _inner_norms(model: Any, site: Site, seen: list[tuple[nn.Module, Tensor, Tensor]]) -> dict[nn.Module, Frozen]:
    """The norms inside ``site``'s module (a query or key norm: a module with a weight vector whose
    output does not change when its input is scaled up), each frozen at its run's input."""
    mine = {id(m) for m in site.module.modules() if m is not site.module}
    out: dict[nn.Module, Frozen] = {}
    for m, i, o in seen:
        w = getattr(m, "weight", None)
        if id(m) not in mine or not isinstance(w, Tensor) or w.dim() != 1 or w.shape[0] != i.shape[-1]:
            continue
        with torch.no_grad():  # scaled far past any eps, a norm's output stays; anything else grows
            if not torch.allclose(m(100 * i), m(1000 * i), rtol=1e-3, atol=1e-5 * float(o.abs().max())):
                continue
        if m in out:
            raise ValueError(f"{model.name}: a norm inside {site.name} is called twice: attnkit cannot freeze it")
        e = i.shape[-1]
        out[m] = freeze(model, m, i.reshape(-1, e), o.reshape(-1, e), f"a norm inside {site.name}")
    return out


def attend(
    model: Any,
    site: Site,
    text: str,
    rows: Tensor,
    target: str | None = None,
    frozen: dict[nn.Module, Frozen] | None = None,
) -> Attended:
    """The call ``site`` makes when its module's input is ``rows`` (b, t, d) instead of its own: q,
    k after positions and v, each with ``rows``' batch (the rest of the pass is not run); each
    norm in ``frozen`` computes its frozen affine map instead."""
    t = rows.shape[-2]

    def swap(m: nn.Module, args: tuple, kwargs: dict):
        x = _input_of(args, kwargs)
        if x is None or x.shape[-2] != t:
            raise ValueError(
                f"{model.name}: {site.name} is called with {0 if x is None else x.shape[-2]} positions, not {t}"
            )
        return _with_input(args, kwargs, rows.to(x.dtype))

    handles = [site.module.register_forward_pre_hook(swap, with_kwargs=True)]
    for m, f in (frozen or {}).items():
        handles.append(m.register_forward_hook(_frozen_output(f)))
    call = run_to(model, site, text, target, handles).call
    if call is None or call.q is None or call.k is None or call.q.shape[0] != rows.shape[0]:
        raise ValueError(f"{model.name}: {site.name} did not attend over the inputs given to its module")
    return call


# -- one head's output from q, k and v of one's choosing ----------------------------------------


def head_output(
    call: Attended, head: int, *, q: Tensor | None = None, k: Tensor | None = None, v: Tensor | None = None
) -> Tensor:
    """Head ``head``'s output (t, d_v) of the call (batch row 0) with its queries ``q`` (h, t, d),
    keys ``k`` or values ``v`` (h_kv, s, d) taken from another call of the same site: every rule of
    the call (its mask, bias, window, soft-cap and sink) as it was, the weights exact."""
    from ..attention.record.calls import lse_of
    from ..attention.record.recorder import Recorder

    rec = Recorder(values=True, rows=[0])
    rec.attended(call)
    kept = rec.calls[0]
    kv = kept.kv_head(head)
    if q is not None or k is not None:
        assert kept.q is not None and kept.k is not None  # a factored call
        if q is not None:
            kept.q = kept.q.clone()
            kept.q[head] = q[head].to(kept.q.dtype)
        if k is not None:
            kept.k = kept.k.clone()
            kept.k[kv] = k[kv].to(kept.k.dtype)
        kept.lse = lse_of(kept)
    given = kept.v if v is None else v
    assert given is not None  # kept with its values
    values = given[kv].float()
    _, t, s = kept.shape
    return kept.block(head, slice(0, t), slice(0, s)) @ values


def recomputing(z_site: str, head: int, given: dict[str, Tensor]) -> dict[str, Any]:
    """Hooks for ``LoadedModel.run`` that recompute head ``head`` at the head-output site
    ``z_site`` from its call, with ``given`` (q (h, t, d), k or v (h_kv, s, d)) in place of its
    own (``head_output``)."""
    current: list[Attended] = []

    def keep(call: Attended, site: Site) -> None:
        current.append(call)

    def swap(z: Tensor, site: Site) -> Tensor:
        z = z.clone()
        z[0, head] = head_output(current.pop(), head, **given).to(z.dtype)
        return z

    return {z_site.removesuffix(".z"): keep, z_site: swap}

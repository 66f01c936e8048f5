"""Sites: every place attention happens, and the activations around it, by a fixed name.

A model names its sites when it is built, the same way for attnkit's models and for
transformers' families:

    encoder.3.attn        an attention call (kind encoder, decoder or cross)
    decoder.1.cross       cross-attention of decoder layer 1 (an RNN's one attention: decoder.0.cross)
    blocks.7.attn         a decoder-only model's self-attention
    blocks.7.attn.z       each head's output before the heads merge, head first: (b, h, t, d)
                          (TransformerLens's hook_z is (b, t, h, d))
    blocks.7.resid_pre    the residual stream into a layer, (b, t, d_model)
    blocks.7.resid_post   ... and out of it
    blocks.7.mlp_out      the feed-forward block's output (b, t, d_model), where it is one module
    decoder.norm          a stack's final norm (a decoder-only model's: final_norm)
    logits                the output layer's (b, t, V)

An RNN's attention runs once per decoding step: with input feeding its head-output site is
called once per step (t = 1 each).

Each site makes one call to whatever listens: the recorder (``attention.record``), gating
and ablation (``attention.intervene``), the hooks of ``LoadedModel.run`` (read, scale or
replace any activation), and gradient methods (an attention site forms its weights, in the
autograd graph, when a listener asks for them). With nothing listening a site costs one
context-variable read.

``listening(...)`` opens listeners for the code within; listeners nest (an inner recording
and an outer one both receive every call).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

ATTENTION_KINDS = ("encoder", "decoder", "cross")
ROLES = ("attn", "z", "resid_pre", "resid_post", "mlp_out", "final", "logits")
SITE_ATTR = "attnkit_site"  # the attribute an attention module keeps its site in


@dataclass(frozen=True)
class Site:
    """One named place of a model. ``kind``: the attention kind of its layer (encoder, decoder or
    cross; ``output`` for the final norm and the logits); ``layer``: its layer (-1: the whole
    model's); ``role``: attn (an attention call), z (each head's output before the merge),
    resid_pre, resid_post, mlp_out, final or logits; ``heads``: query heads (attention and z).
    ``module``: the module that calls it (not compared)."""

    name: str
    kind: str
    layer: int
    role: str = "attn"
    heads: int = 0
    module: Any = field(default=None, compare=False, repr=False, hash=False)

    @property
    def z(self) -> Site:
        """An attention site's head outputs, before the heads merge."""
        return Site(f"{self.name}.z", self.kind, self.layer, "z", self.heads, self.module)


def attention_site(kind: str, layer: int, heads: int, module: Any = None, *, stack: str | None = None) -> Site:
    """The site of an attention module, named by its stack and kind (``decoder.1.cross``), and kept
    on the module (``site_of``)."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; choose from {', '.join(ATTENTION_KINDS)}")
    where = stack or ("decoder" if kind == "cross" else kind)
    site = Site(f"{where}.{layer}.{'cross' if kind == 'cross' else 'attn'}", kind, layer, "attn", heads, module)
    if module is not None:
        object.__setattr__(module, SITE_ATTR, site)  # a plain attribute, not a registered submodule
    return site


def layer_sites(stack: str, kind: str, layer: int, module: Any = None) -> dict[str, Site]:
    """A layer's residual-stream and MLP sites: {role: site}; ``module`` (the layer) on its
    ``resid_pre``, the stream it takes."""
    return {
        role: Site(f"{stack}.{layer}.{role}", kind, layer, role, module=module if role == "resid_pre" else None)
        for role in ("resid_pre", "resid_post", "mlp_out")
    }


def site_of(module: Any) -> Site | None:
    """The attention site a module was given (None: not an attention module attnkit named)."""
    return getattr(module, SITE_ATTR, None)


# -- one attention call -------------------------------------------------------------------------


@dataclass(eq=False)
class Tap:
    """Weights in the autograd graph, the very tensor an attend step mixed the values with, and,
    where they cover a window rather than every key (local attention), how a tensor of their
    shape spreads onto the full (..., t, s) map."""

    weights: Tensor
    dense: Callable[[Tensor], Tensor] | None = None

    def spread(self, x: Tensor) -> Tensor:
        """``x`` (the weights' shape) on the full map."""
        return x if self.dense is None else self.dense(x)


@dataclass(eq=False)
class Attended:
    """One attention call at a site, its whole batch, as every listener receives it.

    q (b, h, t, d), k (b_kv, h_kv, s, d), v (b_kv, h_kv, s, d_v): after positions (RoPE rotates
    q and k first); b = ``group`` x b_kv (a sentence's beam hypotheses share its keys: query
    row i reads key row i // group). The weights are softmax(scale q k^T + bias) under the
    rules: ``causal`` (key j visible to query i only if j <= i + s - t; with ``window``, only
    the ``window`` keys up to there: a sliding window kept as a rule, not a mask), ``mask`` (bool,
    True = may attend, broadcastable to (b_kv, h, t, s)) and ``bias`` (broadcastable to
    (b_kv, h, t, s)). ``factored`` false: the score does not factor through q . k (Luong's
    concat, a local window's Gaussian) and ``weights`` (b, h, t, s) are the call's own.
    ``weights``: formed where a listener asked (in the autograd graph where they carry
    gradients); ``lse`` (b, h, t): each query's log-sum-exp where the kernel gave it;
    ``cap``: a logit soft-cap (each scaled score s is cap * tanh(s / cap) before the bias);
    ``sink`` (broadcastable to (b, h, t)): a learned logit in each softmax's denominator, a
    key with no value (the weights then sum to less than 1; ``lse`` counts it);
    ``taps``: a step-by-step attention's weights in the graph, one per step; ``extra``:
    tensors with the query batch first (``x``: the layer input; ``p_t``: local attention's
    centres; an RNN's ``queries``, ``keys``, ``values``)."""

    site: Site
    q: Tensor | None = None
    k: Tensor | None = None
    v: Tensor | None = None
    scale: float = 1.0
    causal: bool = False
    mask: Tensor | None = None
    bias: Tensor | None = None
    group: int = 1
    window: int | None = None
    factored: bool = True
    weights: Tensor | None = None
    lse: Tensor | None = None
    cap: float | None = None
    sink: Tensor | None = None
    taps: list[Tap] | None = None
    extra: dict[str, Tensor] = field(default_factory=dict)

    @property
    def batch(self) -> int:
        x = self.q if self.q is not None else self.weights
        assert x is not None  # a factored call has q; another its weights
        return int(x.shape[0])


# -- listeners ----------------------------------------------------------------------------------


class Listener:
    """What a site calls. ``weights``: attention sites form their weights for it (the explicit
    path, in the autograd graph). Override ``wants`` to hear only some sites, ``attended`` for
    attention calls and ``activation`` for the rest (return a tensor to replace it)."""

    weights: bool = False

    def wants(self, site: Site) -> bool:
        return True

    def attended(self, call: Attended) -> None:
        return None

    def activation(self, site: Site, x: Tensor) -> Tensor | None:
        return None


_listeners: ContextVar[tuple[Listener, ...]] = ContextVar("attnkit_site_listeners", default=())


@contextmanager
def listening(*listeners: Listener) -> Iterator[None]:
    """Within: every site calls ``listeners`` too, after those already open (outer ones first)."""
    token = _listeners.set(_listeners.get() + listeners)
    try:
        yield
    finally:
        _listeners.reset(token)


def listeners(site: Site | None) -> tuple[Listener, ...]:
    """The open listeners that want ``site`` (none for a module without a site)."""
    open_ = _listeners.get()
    if not open_ or site is None:
        return ()
    return tuple(x for x in open_ if x.wants(site))


def listening_any() -> bool:
    """Whether any listener is open."""
    return bool(_listeners.get())


def needs_weights(heard: tuple[Listener, ...]) -> bool:
    return any(x.weights for x in heard)


def attended(heard: tuple[Listener, ...], call: Attended) -> None:
    """Hand one attention call to the listeners that want its site."""
    for x in heard:
        x.attended(call)


def activation(site: Site | None, x: Tensor) -> Tensor:
    """An activation at ``site`` as it goes on: each listener may read it or replace it, in order."""
    for listener in listeners(site):
        out = listener.activation(site, x)  # type: ignore[arg-type]  # listeners() is empty without a site
        if out is not None:
            x = out
    return x


def heads(site: Site | None, z: Tensor) -> Tensor:
    """An attention call's head outputs z (b, h, t, d) as they go on to be merged: read, gated or
    replaced at ``site``'s head-output site (``<site>.z``)."""
    if site is None or not _listeners.get():
        return z
    return activation(site.z, z)


# -- hooks: a function per site, as a notebook writes them ------------------------------------


Hook = Callable[..., Any]


class Hooks(Listener):
    """``{site name: fn}``: fn(x, site) at an activation site (its return value, if not None,
    replaces x); fn(call, site) at an attention site (``Attended``, its weights formed: read only;
    to change what a head writes, hook its ``.z`` site)."""

    weights = True  # only the hooked attention sites form their weights: hooks want the pattern

    def __init__(self, hooks: dict[str, Hook]) -> None:
        self.hooks = dict(hooks)

    def wants(self, site: Site) -> bool:
        return site.name in self.hooks

    def attended(self, call: Attended) -> None:
        if self.hooks[call.site.name](call, call.site) is not None:
            raise ValueError(
                f"a hook at the attention site {call.site.name} reads the call and returns None; to change "
                f"what its heads write, hook {call.site.name}.z"
            )

    def activation(self, site: Site, x: Tensor) -> Tensor | None:
        return self.hooks[site.name](x, site)


class Cache(Listener):
    """Every activation of the named sites (not attention calls: a ``Recorder`` keeps those), detached,
    as each call leaves it: {name: [tensor, ...]} (one per call: incremental decoding calls a site
    once per step, and so does an RNN's head-output site)."""

    def __init__(self, names: set[str] | None = None) -> None:
        self.names = names
        self.tensors: dict[str, list[Tensor]] = {}

    def wants(self, site: Site) -> bool:
        return site.role != "attn" and (self.names is None or site.name in self.names)

    def activation(self, site: Site, x: Tensor) -> Tensor | None:
        self.tensors.setdefault(site.name, []).append(x.detach())
        return None


class Weights(Listener):
    """Each call's weights, formed (the explicit path), at the named attention sites (None: every
    one), in the order the calls come: [(site, weights (b, h, t, s), p_t (b, t) or None)].
    ``take()`` hands them over and forgets them (search reads each step's alignments so)."""

    weights = True

    def __init__(self, names: set[str] | None = None) -> None:
        self.names = names
        self.calls: list[tuple[Site, Tensor, Tensor | None]] = []

    def wants(self, site: Site) -> bool:
        return site.role == "attn" and (self.names is None or site.name in self.names)

    def attended(self, call: Attended) -> None:
        assert call.weights is not None  # formed for this listener
        self.calls.append((call.site, call.weights, call.extra.get("p_t")))

    def take(self) -> list[tuple[Site, Tensor, Tensor | None]]:
        out, self.calls = self.calls, []
        return out


def check_names(names: list[str] | set[str], have: list[Site]) -> None:
    """One line for a site name the model does not have: the nearest it has."""
    import difflib

    known = [s.name for s in have]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"no site {name!r}: {hint}(the model has {len(known)}; sites() lists them)")

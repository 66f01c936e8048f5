"""``LoadedModel``: what every loaded model does, whatever runs it: text (or an image) into a
``Prepared`` input, an ``AttentionRecord`` and a walk-through; and a notebook's verbs over its
named sites (``sites``, ``run``, ``cache``, ``show``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from ..attention.record import Recorder
from ..attention.sites import Cache, Hook, Hooks, Site, check_names, listening
from ..inspection.capture import AttentionRecord, Prepared
from ..inspection.explain import Walkthrough
from ..inspection.multihead import LayerWalk
from ..memory import HEADROOM, available_bytes
from ..models.interface import EncoderModel, Seq2SeqModel
from ..search import SearchOptions

if TYPE_CHECKING:
    from ..attribution.gradients import Scorer
    from ..pretrained import PretrainedEncoder
    from ..pretrained.hf import HFModel
    from ..viewer.notebook import NotebookView

from .capabilities import Capabilities
from .runs import Run

VERBS = ("translate", "generate", "encode", "caption", "transcribe")  # each a method of the models that do it


class CannotError(AttributeError, ValueError):
    """A verb asked of a model that does not have it: an AttributeError (``hasattr`` is False)
    that reads as one line (a ValueError)."""


class LoadedModel(ABC):
    """A model ready to show its attention. Each subclass is one kind of model (an encoder, a
    decoder-only model, an encoder-decoder, an image encoder, a captioner) run by one engine
    (attnkit, or transformers), and says what it can do in ``capabilities``."""

    name: str
    info: dict

    @property
    @abstractmethod
    def capabilities(self) -> Capabilities: ...

    @property
    def kinds(self) -> list[str]:
        """The attention kinds the model has (encoder, decoder, cross)."""
        return list(self.capabilities.kinds)

    @property
    def max_tokens(self) -> int | None:
        """The longest input its positions cover (None: no fixed limit)."""
        return None

    @property
    def window(self) -> int | None:
        """Local attention's D, to draw p_t's window (an attnkit RNN only)."""
        return None

    def memory_bytes(self, tokens: int) -> int | None:
        """What a recorded forward over ``tokens`` needs, estimated (None: not estimated; a
        model whose positions stop short of any risk)."""
        return None

    def forward_positions(self, prepared: Prepared) -> int:
        """How many positions one forward over ``prepared`` runs, its encoder's and decoder's
        together: what an estimate of its memory counts."""
        return len(prepared.src_ids) + len(prepared.tgt_in_ids or [])

    def token_limit(self, cap: int) -> tuple[int, str]:
        """The longest input this model takes here, at most ``cap``, and what sets it: "its
        positions", "free memory" (the estimate of ``memory_bytes`` against what is free now) or
        "the limit"."""
        n, why = cap, "the limit"
        if self.max_tokens is not None and self.max_tokens < n:
            n, why = self.max_tokens, "its positions"
        free = HEADROOM * available_bytes()
        need = self.memory_bytes(n)
        if need is not None and need > free:
            lo, hi = 1, n  # the largest length whose estimate fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if (self.memory_bytes(mid) or 0) <= free else (lo, mid - 1)
            n, why = lo, "free memory"
        return n, why

    @property
    def module(self) -> Seq2SeqModel | EncoderModel | None:
        """The attnkit model behind it, for what reads its modules (positions, attribution); None
        for a model run by transformers."""
        return None

    def network(self) -> torch.nn.Module:
        """The torch module that runs, attnkit's or transformers': what memory estimates read."""
        assert self.module is not None, "a model run by transformers gives its own network"
        return cast(torch.nn.Module, self.module)

    @abstractmethod
    def parameters(self) -> int: ...

    def position_schemes(self) -> list[str]:
        return []

    @abstractmethod
    def token_count(self, text: str) -> int:
        """How many tokens ``text`` is to this model (to check a limit before running it); an
        image model's ``text`` names its image: its regions or patches."""

    def target_count(self, text: str) -> int:
        """How many tokens a forced output ``text`` is (a model with an output side)."""
        return self.token_count(text)

    def input_pieces(self) -> list[str]:
        """Every token of its input vocabulary as its tokenizer writes it (the head probes draw
        random words from it: ``attnkit.heads.probes``)."""
        raise ValueError(f"{self.name} reads {self.capabilities.reads}s: the head probes are text")

    @abstractmethod
    def prepare(
        self,
        sentences: list[str],
        *,
        targets: list[str] | None = None,
        options: SearchOptions | None = None,
        max_new_tokens: int | None = None,
    ) -> list[Prepared]:
        """Ids and tokens of each sentence (an image model: each image file), with the output
        side: a translation or caption (searched with ``options``, or forced by ``targets``), a
        generated continuation of ``max_new_tokens``."""

    def read_image(self, raw: bytes, name: str) -> np.ndarray:
        """An image file's bytes as the model reads it ((H, W, 3) in [0, 1]); one line if they
        are not an image of a size it takes."""
        raise ValueError(f"{self.name} reads text: leave 'image' out")

    def prepare_image(
        self,
        image: np.ndarray,
        name: str,
        *,
        target: str | None = None,
        options: SearchOptions | None = None,
        max_new_tokens: int | None = None,
    ) -> Prepared:
        """An image already as the model reads it (``read_image``), with its output side; ``name``
        names it (a vision-language model: the text about it, continued by ``max_new_tokens``)."""
        raise ValueError(f"{self.name} reads text: leave 'image' out")

    def read_audio(self, raw: bytes, name: str) -> np.ndarray:
        """A WAV file's bytes as the model hears them (samples at its rate, one channel); one line
        if they are not a WAV file."""
        raise ValueError(f"{self.name} reads {self.capabilities.reads}: leave 'audio' out")

    def prepare_audio(
        self, wave: np.ndarray, name: str, *, target: str | None = None, options: SearchOptions | None = None
    ) -> Prepared:
        """A sound already as the model hears it (``read_audio``) named ``name``, with its output
        side: its own (searched with ``options``) or ``target`` forced."""
        raise ValueError(f"{self.name} reads {self.capabilities.reads}: leave 'audio' out")

    @abstractmethod
    def capture(self, prepared: Prepared) -> AttentionRecord:
        """Every attention map of one forward pass over ``prepared``."""

    @abstractmethod
    def walkthrough(self, prepared: Prepared, *, kind: str, layer: int, head: int, query: int) -> Walkthrough:
        """The Q/K/V walk-through of ``head``'s attention for ``query``, checked against the model's weights."""

    def layer_walkthrough(self, prepared: Prepared, *, kind: str, layer: int) -> LayerWalk:
        """Every head of one multi-head layer on ``prepared``, concatenated and projected by W^O,
        checked against the layer's own output (``attnkit.inspection.multihead``)."""
        raise ValueError(
            f"{self.name}: the multi-head diagram draws attnkit's own Transformers, not {self.capabilities.a}"
        )

    def value_norms(self, prepared: Prepared, kind: str = "encoder") -> np.ndarray:
        """(layers, q, k): || sum_h a^h_ij f^h(x_j) || of every attention layer of ``kind``
        (value-norm, Kobayashi et al. 2020), from one forward pass over ``prepared``."""
        from ..attribution import value_norms_of

        if self.module is None or "value-norm" not in self.capabilities.attributions:
            raise ValueError(f"{self.name} has no value vectors attnkit can read")
        return value_norms_of(self.module, prepared, kind)

    def scorer(self, prepared: Prepared) -> Scorer:
        """The model ready for gradient attributions of ``prepared``'s output tokens (an encoder's:
        its sentence vector)."""
        raise ValueError(f"{self.name} ({self.capabilities.summary}) has no output that gradient methods explain")

    @property
    def contextual_encoder(self) -> PretrainedEncoder | HFModel:
        """The encoder whose tokens' vectors at every depth ``attnkit.inspection.contextual``
        reads (a model with the ``contextual`` capability)."""
        raise ValueError(f"{self.name} is {self.capabilities.a}: contextual vectors are shown for text encoders")

    # -- a notebook's verbs -----------------------------------------------------------------

    def attention(
        self,
        text: str | list[str],
        *,
        target: str | None = None,
        beam: int = 5,
        max_new_tokens: int | None = None,
    ) -> AttentionRecord | list[AttentionRecord]:
        """Every attention map of ``text`` (a list: one record each), with the model's own
        output (or the forced ``target``)."""
        texts = [text] if isinstance(text, str) else list(text)
        prepared = self.prepare(
            texts,
            targets=None if target is None else [target] * len(texts),
            options=SearchOptions(beam=beam),
            max_new_tokens=max_new_tokens,
        )
        records = [self.capture(p) for p in prepared]
        return records[0] if isinstance(text, str) else records

    def show(
        self, text: str | list[str] | AttentionRecord | list[AttentionRecord], *, height: int = 720, **kwargs: Any
    ) -> NotebookView:
        """The viewer (head, model, matrix and neuron-free views) inline in Jupyter, of ``text``
        (captured now, ``attention``'s keywords) or of records already made."""
        from ..viewer.notebook import show

        given = text if isinstance(text, list) else [text]
        if all(isinstance(x, AttentionRecord) for x in given):
            if kwargs:
                raise ValueError(f"{', '.join(kwargs)}: for text to capture, not for records already made")
            records = cast(list[AttentionRecord], given)
        elif all(isinstance(x, str) for x in given):
            found = self.attention(cast("str | list[str]", text), **kwargs)
            records = found if isinstance(found, list) else [found]
        else:
            raise ValueError("show takes text (a string or a list of them) or attention records, not a mix")
        return show(records, self.info, height=height, title=f"attnkit: {self.name}")

    # -- a notebook's hooks over the model's named sites -----------------------------------

    @abstractmethod
    def sites(self) -> list[Site]:
        """Every named site (``attnkit.attention.sites``: ``blocks.3.attn``, ``decoder.1.cross.z``,
        ``encoder.0.resid_post``, ``logits``), in the order a forward pass reaches them."""

    def run(
        self,
        text: str,
        *,
        hooks: dict[str, Hook] | None = None,
        target: str | None = None,
        grad: bool = False,
    ) -> Run:
        """One forward pass over ``text`` (with its output side: the model's own translation or
        caption, searched first with no hook, or the forced ``target``; a decoder-only model: the
        text itself), with ``hooks`` at their sites, as TransformerLens's ``run_with_hooks``:
        ``{name: fn}``, fn(x, site) at an activation site (x batch first; a tensor it returns
        replaces x: patch, scale or zero it), fn(call, site) at an attention site (read only:
        ``attention.sites.Attended``). ``grad``: keep the autograd graph."""
        prepared = self._run_input(_one_text(text), target)
        check_names(list(hooks or {}), self.sites())
        with torch.set_grad_enabled(grad), listening(Hooks(hooks or {})):
            logits, output = self._forward_pass(prepared)
        return Run(prepared, self._positions(prepared), logits, output)

    def cache(
        self,
        text: str,
        *,
        sites: list[str] | None = None,
        target: str | None = None,
        hooks: dict[str, Hook] | None = None,
    ) -> Run:
        """``run`` (with its ``hooks``) keeping the activations of ``sites`` (default: every site),
        as TransformerLens's ``run_with_cache``: ``Run.activations`` by name and, for an attention
        site, ``Run.calls``: its call, every weight exact without a map formed."""
        prepared = self._run_input(_one_text(text), target)
        have = self.sites()
        names = [s.name for s in have] if sites is None else list(sites)
        check_names([*names, *(hooks or {})], have)
        attention = {s.name for s in have if s.role == "attn"}
        kept = Cache({n for n in names if n not in attention})
        rec = Recorder(rows=[0], sites={n for n in names if n in attention})
        with torch.no_grad(), listening(Hooks(hooks or {}), kept, rec):
            logits, output = self._forward_pass(prepared)
        activations = {name: xs[0] if len(xs) == 1 else torch.cat(xs, -2) for name, xs in kept.tensors.items()}
        calls = {c.site.name: c for c in rec.calls if c.site is not None}
        return Run(prepared, self._positions(prepared), logits, output, activations, calls)

    def _run_input(self, text: str, target: str | None) -> Prepared:
        """``text`` ready for ``run``: prepared with its output side."""
        return self.prepare([text], targets=None if target is None else [target])[0]

    def _positions(self, prepared: Prepared) -> list[str]:
        return prepared.tgt_in_tokens if prepared.tgt_in_ids is not None else prepared.src_tokens

    @abstractmethod
    def _forward_pass(self, prepared: Prepared) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """One forward pass over ``prepared``, the open listeners hearing its sites: (logits (1, t, V)
        or None, an encoder's last layer (1, s, d) or None)."""

    def _reads_its_stream(self) -> bool:
        """Whether its sites name a residual stream and the logits read from it (``circuits``)."""
        roles = {s.role for s in self.sites()}
        return {"resid_post", "logits"} <= roles

    @property
    def verbs(self) -> tuple[str, ...]:
        """What the model does beyond attention() and show(): the verbs its class has."""
        return tuple(v for v in VERBS if callable(getattr(type(self), v, None)))

    def __getattr__(self, name: str) -> Any:
        if name in VERBS:  # a verb this model does not have: say what it is and what it can do
            can = ", ".join(self.verbs) or "nothing beyond attention() and show()"
            raise CannotError(f"{self.name} is {self.capabilities.a}: it does not {name} (it can: {can})")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def describe(self) -> dict:
        return {
            "name": self.name,
            "info": self.info,
            "parameters": self.parameters(),
            "capabilities": self.capabilities.as_json(),
            "positions": self.position_schemes(),
        }

    def __repr__(self) -> str:
        return f"<attnkit {self.capabilities.summary} {self.name}: {', '.join(self.kinds)} attention>"


def _one_text(text: Any) -> str:
    if not isinstance(text, str):
        raise ValueError(f"run and cache take one text, not {type(text).__name__}")
    return text


def _no_output_side(m: LoadedModel, targets, max_new_tokens) -> None:
    if targets is not None:
        raise ValueError("an encoder has no target side: leave `target` out")
    if max_new_tokens is not None:
        raise ValueError("`max_new_tokens` is for decoder-only models; an encoder generates nothing")


def one_token(m: LoadedModel, text: str, ids: list[int], pieces: list[str]) -> int:
    """The one token ``text`` is in ``m``'s output vocabulary; one line when it is more or none."""
    if len(ids) != 1:
        shown = " ".join(repr(p) for p in pieces) or "none"
        raise ValueError(f"{text!r} is {len(ids)} tokens for {m.name} ({shown}): an answer must be one token")
    return ids[0]


def _check_length(m: LoadedModel, n: int) -> None:
    limit = m.max_tokens
    if limit is not None and n > limit:
        raise ValueError(f"the text is {n} tokens; {m.name} takes at most {limit} (its positions end there)")

"""Any Hugging Face ``transformers`` model directory, run by ``transformers`` itself (the
optional extra ``attnkit[hf]``), with every attention call seen from inside.

attnkit registers an attention implementation of its own (``ATTN``) with transformers'
``AttentionInterface``. Each attention layer of every family calls it with the layer's
query, key and value *after* positions are applied (RoPE rotates q and k first) and its
mask; while a recorder is open (``attnkit.attention.record``) the fused kernel runs and the
call is recorded as q, k, the scale, the mask and each query's log-sum-exp, from which any
weight equals what ``output_attentions`` (eager) gives, and no map is formed until asked.

Every family whose attention goes through that interface is read, with no list to be on: a
model's layout (encoder, decoder-only, encoder-decoder, image encoder) comes from its
configuration and the class its weights were saved from, a layer's attention kind from the
module's place in the model: ``encoder`` (an encoder's, or a ViT's), ``decoder`` (a decoder's
causal self-attention, also a decoder-only model's) or ``cross``. The function computes what
the family's eager attention computes, soft-caps and learned sinks included; an argument it
does not model, and a family whose attention runs outside the interface, are refused in one
line.

Nothing is downloaded: only local directories are read (``local_files_only``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor, nn

from ..attention import kernels, record, sites
from ..data.tokenizer import SPACE

AttentionSite = sites.Site  # (the name ``sites`` is also an HFModel field)
ATTN = "attnkit"  # the attention implementation's name in transformers' registry

# a cross-attention module's name, by family: BART and Marian, T5, BERT-as-decoder
CROSS_NAMES = ("encoder_attn", "EncDecAttention", "crossattention", "cross_attn")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "source.spm",
    "tokenizer.model",
)
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


# -- the recording attention function ---------------------------------------------------------


# What a family's attention layer may pass the attention function, and what attnkit does with it.
# Read and computed as the family's own eager attention computes it:
HONOURED = ("scaling", "dropout", "is_causal", "position_bias", "softcap", "s_aux", "sinks")
# Read by no eager attention, so by none here either: the mask already holds what they say (a
# sliding window), or they steer other kernels (FlashAttention's packed sequences) or other code:
IGNORED = (
    "sliding_window",
    "cu_seq_lens_q",
    "cu_seq_lens_k",
    "max_length_q",
    "max_length_k",
    "position_ids",
    "seq_idx",
    "deterministic",
    "output_attentions",
    "output_hidden_states",
    "output_router_logits",
    "num_items_in_batch",
    "use_cache",
    "cache_position",
    "layer_idx",
)


def _terms(module: nn.Module, kwargs: dict) -> tuple[float | None, Tensor | None]:
    """The soft-cap and the sink logits (b|1, h, t|1) a layer passes, after refusing any argument
    attnkit does not model: computing without it would give the family's outputs and maps wrong."""
    for name, value in kwargs.items():
        if name not in HONOURED and name not in IGNORED and value is not None:
            raise ValueError(
                f"{type(module).__name__} passes `{name}` to its attention function, which attnkit does not "
                "model: it cannot compute this family's attention exactly"
            )
    cap = kwargs.get("softcap")
    sink = kwargs.get("s_aux")
    if sink is None:
        sink = kwargs.get("sinks")
    if sink is not None:  # a logit per head (h,), or per query (b, h, t, 1)
        sink = sink.reshape(1, -1, 1) if sink.dim() == 1 else sink.reshape(sink.shape[:3])
    return (None if cap is None or not cap else float(cap)), sink


def _attention(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask, **kwargs):
    """Every family's attention, at the module's site (``attnkit.attention.sites``), exactly as its
    eager attention computes it (soft-caps and learned sinks included; an argument attnkit does not
    model is refused).

    With nothing listening (generation, hidden states) PyTorch's fused kernel runs with the key
    and value heads repeated (transformers' grouped-query SDPA can fall to the math kernel on
    CUDA, which forms every map); while training, transformers' own SDPA function. While a
    listener hears the site the fused kernel runs and keeps each query's log-sum-exp: the
    listeners get q and k after positions, the scale, the mask as a rule (causal) or a boolean
    tensor and T5's position bias, so any weight is exact later; a listener that asks for the
    weights (a ``graph`` recording, for gradient methods) has them formed in the autograd graph.
    A soft-capped score takes the blockwise kernel, a sink rescales the kernel's output."""
    site = sites.site_of(module)
    heard = sites.listeners(site)
    if site is None and sites.listening_any():
        raise ValueError(f"attnkit did not name this {type(module).__name__} module: its attention cannot be seen")
    cap, sink = _terms(module, kwargs)
    if module.training:
        if heard:  # attnkit records a model in eval mode (no dropout)
            name = cast(sites.Site, site).name
            raise ValueError(f"{name} is heard in training mode: attnkit records a model in eval mode (model.eval())")
        out, weights = _training(module, query, key, value, attention_mask, cap, sink, kwargs)
        if sites.listening_any():  # the head outputs' site takes (b, h, t, d)
            out = sites.heads(site, out.transpose(1, 2)).transpose(1, 2).contiguous()
        return out, weights
    scale, causal, key, value, mask, bias = _rules(module, site, query, key, value, attention_mask, kwargs)
    additive = kernels.additive_term(mask, bias)
    heads = query.shape[1]
    k_all, v_all = kernels.groups(key, heads), kernels.groups(value, heads)
    rules: dict[str, Any] = {"scale": scale, "causal": causal, "additive": additive}
    weights = lse = None
    if heard and sites.needs_weights(heard):
        out, weights = kernels.explicit(query, k_all, v_all, cap=cap, sink=sink, **rules)
    elif cap is not None:
        out, lse = kernels.blockwise(query, k_all, v_all, cap=cap, **rules)
        out, lse = kernels.with_sink(out, lse, sink)
    elif heard or sink is not None:
        out, lse = kernels.fused_with_lse(query, k_all, v_all, **rules)
        out, lse = kernels.with_sink(out, lse, sink)
    else:  # nothing listens: the fused kernel alone
        out = kernels.fused(query, k_all, v_all, **rules)
    if heard:
        assert site is not None  # only a named module is heard
        parts = (query, key, value, scale, causal, mask, bias)
        _tell(heard, site, parts, weights, lse, cap, sink, kwargs.get("sliding_window"))
    return sites.heads(site, out).transpose(1, 2).contiguous(), None


def _tell(heard, site, parts, weights, lse, cap, sink, window) -> None:
    """Hand the listeners one call: its q, k, v, scale, causal rule, mask and bias (``parts``), the
    kernel's weights or log-sum-exp, the soft-cap and sink; a mask that is exactly a sliding window
    of ``window`` keys is handed as that rule."""
    query, key, value, scale, causal, mask, bias = parts
    kept_window = None
    if mask is not None and isinstance(window, int) and _is_window(mask, window):  # a rule, not t x s
        mask, causal, kept_window = None, True, window
    call = sites.Attended(
        site,
        query,
        key,
        value,
        scale,
        causal,
        mask,
        bias,
        weights=weights,
        lse=lse,
        cap=cap,
        sink=sink,
        window=kept_window,
    )
    sites.attended(heard, call)


_window_seen: list = [None, None, False]  # the last mask checked (a weak reference), its window, the answer


def _is_window(mask: Tensor, window: int) -> bool:
    """Whether a boolean mask (b|1, 1, t, s) is exactly a causal sliding window of ``window`` keys
    (key j visible to query i if 0 <= i + s - t - j < window) for every row: then it is kept as a
    rule and the record grows with T, not T^2. Checked once per mask tensor (every layer of a kind
    shares one)."""
    if mask.dim() != 4 or mask.shape[1] != 1:
        return False
    ref, seen, answer = _window_seen
    if ref is not None and ref() is mask and seen == window:
        return answer
    t, s = mask.shape[-2:]
    i = torch.arange(t, device=mask.device)[:, None] + (s - t)
    j = torch.arange(s, device=mask.device)[None, :]
    rule = (j <= i) & (j > i - window)
    answer = bool(torch.equal(mask, rule.expand(mask.shape)))
    _window_seen[:] = [weakref.ref(mask), window, answer]
    return answer


def _rules(module: nn.Module, site: sites.Site | None, query, key, value, attention_mask, kwargs):
    """(scale, causal, key, value, a boolean mask, a bias) of one call, as the family's eager
    attention applies them: an additive mask split into what it forbids and any finite rest."""
    scaling = kwargs.get("scaling")
    scale = float(query.shape[-1] ** -0.5 if scaling is None else scaling)
    is_causal = kwargs.get("is_causal")
    if is_causal is None:  # a decoder stack's self-attention is causal, whatever its module says (NLLB-MoE's)
        is_causal = bool(getattr(module, "is_causal", False)) or (site is not None and site.kind == "decoder")
    # no mask: the causal rule, which the mask function leaves as None (see ``_register``), where the
    # layer is causal; an attention given no mask at all (ViT's) sees every key
    causal = bool(query.shape[2] > 1 and attention_mask is None and is_causal)
    bias = kwargs.get("position_bias")
    if causal and key.shape[2] > query.shape[2]:  # no mask and more keys: the empty slots of a static cache
        key, value = key[:, :, : query.shape[2]], value[:, :, : query.shape[2]]  # (transformers' SDPA cuts them)
        bias = None if bias is None else bias[..., : query.shape[2]]
    mask = attention_mask
    if mask is not None and mask.dtype != torch.bool:  # an additive mask: what it forbids, and any finite rest
        allowed = mask > torch.finfo(mask.dtype).min / 2
        rest = torch.where(allowed, mask, 0.0)
        mask = allowed
        if bool(rest.any()):
            bias = rest if bias is None else bias + rest
    return scale, causal, key, value, mask, bias


def _training(module, query, key, value, attention_mask, cap, sink, kwargs):
    """A training step's attention: transformers' own SDPA (its dropout), or, for a soft-capped
    or sunk score that SDPA does not take, the explicit weights with the layer's dropout."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if cap is None and sink is None:
        plain = {k: v for k, v in kwargs.items() if k not in ("softcap", "s_aux", "sinks")}
        return sdpa_attention_forward(module, query, key, value, attention_mask, **plain)  # (b, t, h, d)
    heads = query.shape[1]
    scale, causal, key, value, mask, bias = _rules(
        module, sites.site_of(module), query, key, value, attention_mask, kwargs
    )
    additive = kernels.additive_term(mask, bias)
    v_all = kernels.groups(value, heads)
    _, weights = kernels.explicit(
        query, kernels.groups(key, heads), v_all, scale=scale, causal=causal, additive=additive, cap=cap, sink=sink
    )
    weights = nn.functional.dropout(weights, p=float(kwargs.get("dropout") or 0.0), training=True)
    return torch.matmul(weights, v_all).transpose(1, 2).contiguous(), weights


_registered = False


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    def mask(*args, **kwargs):
        """transformers' SDPA masks, a causal one left as a rule (None) and every other formed: a
        missing mask then always means causal, whatever a family's module says of itself."""
        return sdpa_mask(*args, **{**kwargs, "allow_is_bidirectional_skip": False})

    AttentionInterface.register(ATTN, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN, mask)
    _registered = True


# -- loading ----------------------------------------------------------------------------------


def _read_config(path: Path) -> dict:
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is not a model directory (no config.yaml or config.json)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path / 'config.json'} is not valid JSON ({err})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path / 'config.json'} is not a model configuration (not a JSON object)")
    return config


def _quiet_transformers() -> None:
    """transformers' own progress bars and advice are not for attnkit's users: errors are raised."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("transformers").setLevel(logging.ERROR)


@dataclass(frozen=True)
class Layout:
    """How a transformers model is laid out, and so how attnkit runs it: its name (encoder,
    decoder, seq2seq, vision), the attention kinds of its stacks, what it reads, and whether it
    continues its input (a decoder-only model: no cache, logits at the last position alone)."""

    name: str
    label: str  # as a person names it: "decoder-only", "encoder-decoder"
    kinds: tuple[str, ...]  # the kinds of its stacks' self- and cross-attention, in order
    reads_images: bool = False  # pixels through an image processor, not text through a tokenizer
    continues: bool = False  # a decoder-only language model, continuing its prompt
    with_images: bool = False  # a decoder whose text may hold an image's tokens: a processor reads both
    reads_audio: bool = False  # sound through a feature extractor (log-mel frames), text out through a tokenizer
    auto: str = "AutoModel"  # the transformers auto class that builds it

    @property
    def two_stacks(self) -> bool:
        """An encoder and a decoder, joined by cross-attention."""
        return "cross" in self.kinds and "encoder" in self.kinds

    @property
    def needs(self) -> str:
        if self.with_images or self.reads_audio:
            return "processor"
        return "image processor" if self.reads_images else "tokenizer"


LAYOUTS: dict[str, Layout] = {
    each.name: each
    for each in (
        Layout("encoder", "encoder", ("encoder",)),
        Layout("vision", "image encoder", ("encoder",), reads_images=True),
        Layout("decoder", "decoder-only", ("decoder",), continues=True, auto="AutoModelForCausalLM"),
        Layout("seq2seq", "encoder-decoder", ("encoder", "decoder", "cross"), auto="AutoModelForSeq2SeqLM"),
        Layout(  # its encoder reads the sound's feature frames, its decoder writes the text
            "speech",
            "speech encoder-decoder",
            ("encoder", "decoder", "cross"),
            reads_audio=True,
            auto="AutoModelForSpeechSeq2Seq",
        ),
        Layout(  # its vision tower's self-attention is the encoder's, its language model's the decoder's
            "vision-language",
            "vision-language decoder",
            ("encoder", "decoder"),
            continues=True,
            with_images=True,
            auto="AutoModelForImageTextToText",
        ),
    )
}


@dataclass
class HFModel:
    """A loaded transformers model with its tokenizer (or image processor)."""

    path: Path
    layout: Layout
    model_type: str
    model: Any  # a transformers PreTrainedModel
    tokenizer: Any = None
    processor: Any = None
    named: list[sites.Site] = field(default_factory=list)  # every attention module's site, in order
    sites: list[sites.Site] = field(default_factory=list)  # every site, in the order a forward pass reaches them
    _layers: dict[int, nn.Module] | None = field(default=None, repr=False)  # each module's layer, found once
    # a vision-language model's token types (Gemma 3's token_type_ids: 1 on the image's tokens,
    # which then see one another), as its processor gives them: rebuilt from the ids at each call
    image_types: tuple[str, ...] = ()

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def text_config(self) -> Any:
        """The configuration of its language model (a vision-language model's ``text_config``)."""
        return self.config.get_text_config() if self.layout.with_images else self.config

    @property
    def image_token(self) -> int | None:
        """The id that stands for one image feature in a vision-language model's text."""
        for name in ("image_token_id", "image_token_index"):
            value = getattr(self.config, name, None)
            if isinstance(value, int):
                return value
        return None

    @property
    def vision_config(self) -> Any:
        """The configuration of its image encoder (a vision-language model's ``vision_config``)."""
        return getattr(self.config, "vision_config", None) or self.config

    @property
    def device(self) -> torch.device:
        """Where its inputs go: a model placed by accelerate (``device_map``: across devices, or
        offloaded to the CPU or disk) takes them where its first module runs, its hooks moving
        each layer's inputs on; otherwise where its weights are."""
        placed = getattr(self.model, "hf_device_map", None)
        if placed:
            first = next(iter(placed.values()))
            return torch.device("cpu" if first in ("cpu", "disk") else first)
        return next(p.device for p in self.model.parameters() if p.device.type != "meta")

    def max_tokens(self) -> int | None:
        """The longest input the model's positions cover (None: no fixed limit, as T5's relative bias)."""
        c = self.text_config
        table = getattr(getattr(self.model.base_model, "embeddings", None), "position_embeddings", None)
        if isinstance(table, nn.Embedding) and table.padding_idx is not None:  # RoBERTa's: from padding_idx + 1
            return table.num_embeddings - table.padding_idx - 1
        for name in ("max_position_embeddings", "n_positions", "max_target_positions"):  # the last: a speech decoder's
            value = getattr(c, name, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def layers_and_heads(self) -> dict[str, tuple[int, int]]:
        """{kind: (layers, heads)} from the configuration."""
        c = self.text_config
        heads = _setting(c, "num_attention_heads", "num_heads", "n_head", "n_heads")
        if self.layout.two_stacks:
            enc = _setting(c, "encoder_layers", "num_layers")
            dec = _setting(c, "decoder_layers", "num_decoder_layers", "num_layers")
            enc_heads = _setting(c, "encoder_attention_heads") or heads
            dec_heads = _setting(c, "decoder_attention_heads") or heads
            return {"encoder": (enc, enc_heads), "decoder": (dec, dec_heads), "cross": (dec, dec_heads)}
        if self.layout.with_images:  # the vision tower, then the language model
            return {kind: _layers_and_heads(part) for kind, part in zip(self.layout.kinds, (self.vision_config, c))}
        return {self.layout.kinds[0]: _layers_and_heads(c)}

    def forward_bytes(self, tokens: int, *, values: bool = False, itemsize: int = 4) -> int:
        """A recorded forward pass's memory at ``tokens``, estimated: every kind's record (q, k,
        v where kept, each row's log-sum-exp) and a few of one layer's largest activations."""
        c = self.text_config
        hidden = _setting(c, "hidden_size", "d_model", "n_embd", "dim")
        ffn = _setting(c, "intermediate_size", "d_ff", "encoder_ffn_dim", "n_inner", "hidden_dim") or 4 * hidden
        total = 0
        for layers, heads in self.layers_and_heads().values():
            kv = getattr(c, "num_key_value_heads", None) or heads
            d = getattr(c, "head_dim", None) or hidden // max(heads, 1)
            total += layers * ((heads + kv * (2 if values else 1)) * tokens * d * itemsize + heads * tokens * 4)
        if getattr(c, "relative_attention_num_buckets", None):  # T5: a (heads, t, s) position bias per stack
            heads = max(h for _, h in self.layers_and_heads().values())
            total += 3 * heads * tokens * tokens * 4
        return total + 8 * tokens * max(ffn, hidden) * 4

    def info(self, name: str) -> dict:
        c = self.text_config
        hidden = _setting(c, "hidden_size", "d_model", "n_embd", "dim")
        shapes = self.layers_and_heads()
        first = next(iter(shapes.values()))
        kv = getattr(c, "num_key_value_heads", None)
        out = {
            "class": type(self.model).__name__,
            "arch": self.model_type,
            "family": self.layout.name,
            "name": name,
            "layers": first[0],
            "heads": first[1],
            "d_model": hidden,
        }
        if kv and kv != first[1]:
            out["kv_heads"] = kv
        return out

    # -- text ---------------------------------------------------------------------------------

    def tokens(self, ids: list[int]) -> list[str]:
        """Readable token strings: byte-level 'Ġ' and sentencepiece '▁' become a word start; an
        id past the tokenizer's vocabulary (an embedding table padded beyond it) is ``<id N>``."""
        raw = self.tokenizer.convert_ids_to_tokens(ids)
        return [f"<id {i}>" if t is None else _readable_token(t) for i, t in zip(ids, raw)]

    def encode_text(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    def encode_target(self, text: str) -> list[int]:
        return list(self.tokenizer(text_target=text, add_special_tokens=True)["input_ids"])

    def output_ids(self, text: str) -> list[int]:
        """``text`` as the model writes it, with no special token (a decoder-only model's text, an
        encoder-decoder's target side)."""
        if self.layout.two_stacks:
            return list(self.tokenizer(text_target=text, add_special_tokens=False)["input_ids"])
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True)).strip()

    @torch.no_grad()
    def generate(
        self,
        ids: list[int],
        *,
        max_new_tokens: int,
        beam: int = 1,
        pixels: Tensor | None = None,
        audio: Tensor | None = None,
    ) -> list[int]:
        """The model's own continuation (decoder-only: prompt + new tokens) or output (encoder-decoder:
        decoder start, tokens, end), greedy or with ``beam`` hypotheses; ``pixels``: the image a
        vision-language model's prompt holds; ``audio``: a speech model's feature frames (``ids``
        empty)."""
        if audio is not None:
            return self._transcribe(audio, max_new_tokens=max_new_tokens, beam=beam)
        src = torch.tensor([ids], device=self.device)
        kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": False, "num_beams": beam}
        if pixels is not None:
            kwargs["pixel_values"] = pixels.to(self.device, self.model.dtype)
            kwargs.update(self._typed(src))
        pad = self.tokenizer.pad_token_id if self.tokenizer is not None else None
        if pad is None:
            pad = self.config.eos_token_id if isinstance(self.config.eos_token_id, int) else 0
        out = self.model.generate(src, attention_mask=torch.ones_like(src), pad_token_id=pad, **kwargs)
        seq = out[0].tolist()
        return self._to_end(seq) if self.layout.two_stacks else seq

    def _to_end(self, seq: list[int]) -> list[int]:
        """An encoder-decoder's output cut after its end token (the padding of a batch dropped)."""
        eos = self.config.eos_token_id
        return seq[: seq.index(eos, 1) + 1] if isinstance(eos, int) and eos in seq[1:] else seq

    def _transcribe(self, audio: Tensor, *, max_new_tokens: int, beam: int) -> list[int]:
        """A speech model's own output of its feature frames: every token its decoder reads and
        writes (the start and the task tokens it is prompted with, the text, the end)."""
        out = self.model.generate(
            audio.to(self.device),
            max_new_tokens=max_new_tokens,
            num_beams=beam,
            do_sample=False,
            return_dict_in_generate=True,
        )
        return self._to_end(out.sequences[0].tolist())

    def decoder_start(self) -> int:
        start = self.config.decoder_start_token_id
        if start is None:
            start = getattr(self.model.generation_config, "decoder_start_token_id", None)
        if start is None:
            start = self.config.pad_token_id
        return int(start)

    @torch.no_grad()
    def token_states(self, text: str) -> tuple[list[str], list[bool], Tensor, Tensor]:
        """An encoder's vectors of ``text``: (readable tokens, which are special, the static embedding
        table's rows (s, d), every layer's output with the embeddings first (layers + 1, s, d))."""
        ids = self.encode_text(text)
        src = torch.tensor([ids], device=self.device)
        out = self.model(input_ids=src, attention_mask=torch.ones_like(src), output_hidden_states=True)
        states = torch.stack(out.hidden_states)[:, 0].float().cpu()
        static = self.model.get_input_embeddings()(src)[0].float().cpu()
        special = set(self.tokenizer.all_special_ids)
        return self.tokens(ids), [i in special for i in ids], static, states

    def output_projection(self, module: nn.Module) -> tuple[Tensor, Tensor | None]:
        """W_O (d_model, heads x head_dim) and its bias of an attention module: its own o_proj,
        out_proj, o, out_lin or (GPT-2's Conv1D, stored transposed) c_proj, or, for BERT-style
        layers, the dense layer of its sibling ``output``."""
        for name in ("o_proj", "out_proj", "o", "out_lin", "c_proj"):
            layer = getattr(module, name, None)
            if layer is not None and hasattr(layer, "weight"):
                weight = layer.weight.t() if type(layer).__name__ == "Conv1D" else layer.weight
                return weight.detach(), None if layer.bias is None else layer.bias.detach()
        names = {id(m): n for n, m in self.model.named_modules()}
        parent = self.model.get_submodule(names[id(module)].rsplit(".", 1)[0])
        dense = getattr(getattr(parent, "output", None), "dense", None)
        if dense is None:
            raise ValueError(f"no output projection found for {type(module).__name__}")
        return dense.weight.detach(), None if dense.bias is None else dense.bias.detach()

    # -- images -------------------------------------------------------------------------------

    @property
    def image_processor(self) -> Any:
        """What turns an image into pixel_values (a vision-language processor's image part)."""
        return getattr(self.processor, "image_processor", self.processor)

    def _crops(self) -> bool:
        """Whether the image processor resizes the shorter side and cuts the centre (CLIP's)."""
        crop = getattr(self.image_processor, "crop_size", None)
        return bool(getattr(self.image_processor, "do_center_crop", False)) and crop is not None

    def image_size(self) -> tuple[int, int]:
        """(height, width) the image processor gives the model."""
        if self._crops():
            crop = self.image_processor.crop_size
            return int(crop["height"]), int(crop["width"])
        size = getattr(self.image_processor, "size", None) or {}
        side = getattr(self.vision_config, "image_size", 224)
        return int(size.get("height") or side), int(size.get("width") or side)

    def patch_grid(self) -> tuple[int, int]:
        h, w = self.image_size()
        patch = int(self.vision_config.patch_size)
        return h // patch, w // patch

    def tower_has_class_token(self) -> bool:
        """Whether its image encoder puts a class token before the patches (CLIP's, ViT's)."""
        return any(
            name.endswith("class_embedding") or name.endswith("cls_token") for name, _ in self.model.named_parameters()
        )

    def read_image(self, path: str | Path) -> np.ndarray:
        """An image file, resized as the processor resizes: (H, W, 3) in [0, 1], what the model sees."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"image not found: {path}")
        return self.decode_image(path.read_bytes(), str(path))

    def decode_image(self, raw: bytes, name: str = "the image") -> np.ndarray:
        """An image file's bytes as the processor shapes them, (H, W, 3) in [0, 1]: resized to its
        size, or (a processor that crops) resized to cover it and its centre cut."""
        from PIL import Image

        from ..data.images import open_rgb

        rgb = open_rgb(raw, name=name)
        h, w = self.image_size()
        resample = getattr(self.image_processor, "resample", None)
        how = Image.Resampling(int(resample)) if resample is not None else Image.Resampling.BILINEAR
        if self._crops():
            scale = max(h / rgb.height, w / rgb.width)
            cover = (max(w, round(rgb.width * scale)), max(h, round(rgb.height * scale)))
            rgb = rgb.resize(cover, how)
            left, top = (cover[0] - w) // 2, (cover[1] - h) // 2
            rgb = rgb.crop((left, top, left + w, top + h))
        else:
            rgb = rgb.resize((w, h), how)
        return np.asarray(rgb, dtype=np.float32) / 255.0

    def pixels(self, image: np.ndarray) -> Tensor:
        """The processor's normalised pixel_values (1, 3, H, W) of an image already at its size."""
        array = np.round(image * 255).astype(np.uint8)
        return self.image_processor(images=array, return_tensors="pt")["pixel_values"]

    def image_prompt(self, text: str, image: np.ndarray) -> list[int]:
        """A vision-language model's ids of ``text`` about ``image`` (already at its size): the
        processor's, its image token expanded to one token per image feature (put first where the
        text does not place it)."""
        if self.processor is None:
            raise ValueError(
                f"{self.path} was given a tokenizer, not its processor: it reads its text alone "
                "(attnkit.load(model, processor) reads images too)"
            )
        token = getattr(self.processor, "image_token", None)
        if token is None:
            raise ValueError(f"{self.path}: its processor names no image token: attnkit cannot find the image's tokens")
        if text.count(token) > 1:
            raise ValueError(f"{text.count(token)} {token} tokens in the text: attnkit reads one image with its text")
        if token not in text:
            text = f"{token}\n{text}"
        array = np.round(image * 255).astype(np.uint8)
        found = self.processor(text=text, images=array, return_tensors="pt")
        extra = sorted(
            set(found) - {"input_ids", "attention_mask", "pixel_values", "token_type_ids", "mm_token_type_ids"}
        )
        if extra:
            raise ValueError(
                f"{type(self.processor).__name__} gives {', '.join(extra)} beside the pixels (an image cut into tiles "
                "or of its own size): attnkit reads images whose tokens lie on one grid of patches"
            )
        ids = found["input_ids"][0]
        self.image_types = self._token_types(found, ids)
        return [int(i) for i in ids]

    def _token_types(self, found: Any, ids: Tensor) -> tuple[str, ...]:
        """The processor's token types the model reads, each checked to mark exactly the image's
        tokens (so that any sequence's can be rebuilt from its ids); one line for others."""
        import inspect

        takes = inspect.signature(self.model.forward).parameters
        kept = []
        for key in ("token_type_ids", "mm_token_type_ids"):
            if key not in found or key not in takes:
                continue
            if not torch.equal(found[key][0].long(), self._image_marks(ids)):
                raise ValueError(
                    f"{type(self.processor).__name__}'s {key} mark more than the image's tokens (a prefix the model "
                    "reads both ways?): attnkit cannot rebuild them for the tokens it writes"
                )
            kept.append(key)
        return tuple(kept)

    def _typed(self, ids: Tensor) -> dict[str, Tensor]:
        """The token types of ``ids`` (rows of one sequence) the model reads: 1 on its image's tokens."""
        return {key: self._image_marks(ids) for key in self.image_types}

    def _image_marks(self, ids: Tensor) -> Tensor:
        """1 where ``ids`` hold the image token, 0 elsewhere."""
        token = self.image_token
        return torch.zeros_like(ids) if token is None else torch.eq(ids, int(token)).long()

    # -- sound --------------------------------------------------------------------------------

    @property
    def sampling_rate(self) -> int:
        """The rate (Hz) its feature extractor reads sound at."""
        return int(self.processor.feature_extractor.sampling_rate)

    def decode_audio(self, raw: bytes, name: str = "the audio") -> np.ndarray:
        """A WAV file's bytes as the model hears them: one channel at its sampling rate, and no
        longer than the feature extractor's window (Whisper's 30 seconds)."""
        from ..data.audio import decode_wav

        wave = decode_wav(raw, self.sampling_rate, name=name)
        longest = getattr(self.processor.feature_extractor, "n_samples", None)
        if longest and len(wave) > longest:
            raise ValueError(
                f"{name} is {len(wave) / self.sampling_rate:.1f} s long: {type(self.model).__name__} hears "
                f"{longest / self.sampling_rate:.0f} s at a time; cut it shorter"
            )
        return wave

    def audio_features(self, wave: np.ndarray) -> Tensor:
        """The feature extractor's ``input_features`` (1, bins, frames) of a wave at its rate."""
        found = self.processor.feature_extractor(wave, sampling_rate=self.sampling_rate, return_tensors="pt")
        return found["input_features"].to(self.model.dtype)

    def feature_seconds(self) -> float:
        """Seconds of sound per feature frame (the extractor's hop)."""
        hop = getattr(self.processor.feature_extractor, "hop_length", 160)
        return float(hop) / self.sampling_rate

    # -- forward passes -----------------------------------------------------------------------

    @torch.no_grad()
    def forward(
        self,
        ids: list[int] | None = None,
        decoder_ids: list[int] | None = None,
        *,
        pixels: Tensor | None = None,
        audio: Tensor | None = None,
        vectors: bool = False,
        dtype: torch.dtype = torch.float32,
    ) -> tuple[record.Recorder, Any]:
        """One forward pass, every attention call recorded: (recording, the model's output);
        ``audio``: a speech model's feature frames (``audio_features``), in place of ``ids``."""
        return self._run(ids, decoder_ids, pixels=pixels, audio=audio, vectors=vectors, dtype=dtype)

    def forward_graph(
        self,
        ids: list[int] | None,
        decoder_ids: list[int] | None = None,
        *,
        pixels: Tensor | None = None,
        audio: Tensor | None = None,
        copies: int = 1,
        maps: bool = True,
    ) -> tuple[record.Recorder, Any]:
        """A forward pass with gradients over ``copies`` rows of the same input (token ids, or an
        image's ``pixels``), the attention weights kept in the graph (``AttentionCall.graph``):
        what gradient attributions differentiate. ``maps`` false: no call recorded, no weight
        formed (the fused kernel alone: what ablation and head importance need)."""
        if pixels is not None:
            pixels = pixels.expand(copies, *pixels.shape[1:])
        return self._run(ids, decoder_ids, pixels=pixels, audio=audio, graph=True, copies=copies, calls=maps)

    def _run(
        self,
        ids: list[int] | None,
        decoder_ids: list[int] | None,
        *,
        pixels: Tensor | None = None,
        audio: Tensor | None = None,
        vectors: bool = False,
        graph: bool = False,
        dtype: torch.dtype = torch.float32,
        copies: int = 1,
        calls: bool = True,
    ) -> tuple[record.Recorder, Any]:
        self.model.eval()
        recording = record.recording(values=vectors, graph=graph, dtype=dtype, rows=[0] if copies > 1 else None)
        last_only = self.layout.continues and not graph  # a record needs no logits: the last position's
        ran: set[int] = set()
        watched = [m for s in self.named for m in (s.module, self._layer_of(s))] if calls else []
        hooks = [m.register_forward_pre_hook(lambda m, _: ran.add(id(m))) for m in dict.fromkeys(watched)]
        try:
            with recording if calls else contextlib.nullcontext(record.Recorder()) as rec:
                out = self._call(ids, decoder_ids, pixels=pixels, audio=audio, copies=copies, last_only=last_only)
        finally:
            for hook in hooks:
                hook.remove()
        if calls:
            self._all_heard(rec, ran)
        return rec, out

    def _layer_of(self, site: AttentionSite) -> nn.Module:
        """The layer an attention site's module sits in (its path up to the layer's number)."""
        if self._layers is None or id(site.module) not in self._layers:
            self._layers = {}
            for name, m in self.model.named_modules():
                path = name.split(".")
                cut = next((i for i, p in enumerate(path) if p.isdigit()), None)
                if cut is not None:
                    self._layers[id(m)] = self.model.get_submodule(".".join(path[: cut + 1]))
        return self._layers[id(site.module)]

    def _all_heard(self, rec: record.Recorder, ran: set[int]) -> None:
        """Refuse a record that misses an attention layer that ran: a layer whose family computes
        its attention outside transformers' interface (a linear-attention layer beside softmax
        ones, a block-sparse encoder computing in a module above the one that calls the interface)
        would leave its maps silently missing. A stack that did not run (a vision tower given no
        image) is not missed."""
        called = {id(c.site) for c in rec.calls if c.site is not None}
        for site in self.named:
            layer_ran = site.kind != "cross" and id(self._layer_of(site)) in ran  # a cross-attention given
            if (id(site.module) in ran or layer_ran) and id(site) not in called:  # no encoder is skipped
                raise ValueError(
                    f"{type(self.model).__name__}'s {type(site.module).__name__} ({site.name}) did not call "
                    "transformers' attention interface: its attention runs outside it, attnkit cannot record it"
                )

    def outputs(
        self,
        ids: list[int] | None,
        decoder_ids: list[int] | None = None,
        *,
        pixels: Tensor | None = None,
        audio: Tensor | None = None,
    ) -> Any:
        """The model's own output of one forward pass (every position's logits), nothing recorded:
        what a notebook's ``run`` hooks into."""
        self.model.eval()
        return self._call(ids, decoder_ids, pixels=pixels, audio=audio)

    def _call(
        self,
        ids: list[int] | None,
        decoder_ids: list[int] | None,
        *,
        pixels: Tensor | None = None,
        audio: Tensor | None = None,
        copies: int = 1,
        last_only: bool = False,
    ) -> Any:
        """One forward of the model over ``copies`` rows of the input (``last_only``: a decoder-only
        model's logits at the last position alone: t x vocabulary is large)."""
        if audio is not None:  # a speech model: its encoder hears the feature frames
            heard: dict[str, Any] = {self.model.main_input_name: audio.to(self.device).expand(copies, *audio.shape[1:])}
            if decoder_ids is not None:
                heard["decoder_input_ids"] = torch.tensor([decoder_ids], device=self.device).expand(copies, -1)
            return self.model(**heard)
        if pixels is not None and ids is None:
            return self.model(pixel_values=pixels.to(self.device))
        src = torch.tensor([ids], device=self.device).expand(copies, -1)
        kwargs: dict[str, Any] = {"attention_mask": torch.ones_like(src)}
        if pixels is not None:  # a vision-language model: the image its text's image tokens stand for
            kwargs["pixel_values"] = pixels.to(self.device, self.model.dtype).expand(copies, *pixels.shape[1:])
            kwargs.update(self._typed(src))
        if decoder_ids is not None:
            kwargs["decoder_input_ids"] = torch.tensor([decoder_ids], device=self.device).expand(copies, -1)
        if self.layout.continues:
            kwargs["use_cache"] = False
            if last_only:
                kwargs["logits_to_keep"] = 1
        return self.model(input_ids=src, **kwargs)

    def source_embedding(self) -> nn.Module:
        """The token table of the source side (the encoder's, for an encoder-decoder)."""
        model = self.model.get_encoder() if self.layout.two_stacks else self.model
        return model.get_input_embeddings()


def _layers_and_heads(config: Any) -> tuple[int, int]:
    """(layers, heads) of one stack's configuration."""
    heads = _setting(config, "num_attention_heads", "num_heads", "n_head", "n_heads")
    return _setting(config, "num_hidden_layers", "n_layer", "n_layers"), heads


def _setting(config: Any, *names: str) -> int:
    """The first of ``names`` the configuration sets (families name the same size differently); 0 if none."""
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return 0


WHITE = {"Ġ": SPACE, "▁": SPACE, "Ċ": "\u21b5", "ĉ": "\u21e5"}  # byte-level BPE's space, line break, tab


def _readable_token(t: str) -> str:
    if t in ("Ġ", "▁"):
        return SPACE
    if len(t) > 1 and all(c in WHITE for c in t):  # a run of white space (code's indentation): each mark
        return "".join(WHITE[c] for c in t)
    if t.startswith(("Ġ", "▁")):
        return t[1:]
    if t == "Ċ":  # a line break, as a mark that reads as one (a label "\\n" reads as two characters)
        return "\u21b5"
    return t


def _kind_of(parts: list[str], layout: Layout) -> str:
    """A module's attention kind, by its place in the model (a cross-attention by its name, also
    inside a decoder-only model: Mllama's text-to-image layers)."""
    if any(p in CROSS_NAMES or "cross" in p.lower() for p in parts):
        return "cross"
    if not layout.two_stacks:
        return layout.kinds[0]
    return "decoder" if any("decoder" in p for p in parts) else "encoder"  # text_decoder, decoder


def _attention_paths(model: nn.Module) -> list[str]:
    """The paths of a model's attention modules in its stacks of layers: each innermost module whose
    class is an attention (the one that calls the attention function), under a layer's number."""
    attention = [name for name, m in model.named_modules() if "Attention" in type(m).__name__]
    return [
        name
        for name in attention
        if not any(other.startswith(name + ".") for other in attention)  # not a wrapper (BERT's BertAttention)
        and any(p.isdigit() for p in name.split("."))  # in a stack of layers (not a pooler's, a head's)
    ]


def name_sites(model: nn.Module, layout: Layout, heads: dict[str, int]) -> list[sites.Site]:
    """Name every attention module of a transformers model (``blocks.3.attn``, ``encoder.2.attn``,
    ``decoder.1.cross``) and keep its site on it: each innermost module whose class is an
    attention (the one that calls the attention function), its layer the first number of its
    path (3 for the 4th layer's self-attention)."""
    modules = dict(model.named_modules())
    found = []
    for name in _attention_paths(model):
        parts = name.split(".")
        found.append((_kind_of(parts, layout), next(int(p) for p in parts if p.isdigit()), name))
    found = _stacks_apart(found, modules)
    order = sorted(found, key=lambda f: (sites.ATTENTION_KINDS.index(f[0]), f[1]))
    out = []
    for kind, layer, name in order:
        stack = "blocks" if layout.continues and kind == "decoder" else None
        out.append(sites.attention_site(kind, layer, heads.get(kind, 0), modules[name], stack=stack))
    seen: dict[str, str] = {}
    for site, (_, _, path) in zip(out, order):
        if site.name in seen:  # two stacks of one kind and one causality (a vision-text dual encoder)
            raise ValueError(
                f"{type(model).__name__}: {seen[site.name]} and {path} would both be {site.name}: attnkit names "
                "one stack of each kind"
            )
        seen[site.name] = path
    return out


def _stack(path: str) -> str:
    """A layer stack's path: the module path up to the layer's number."""
    parts = path.split(".")
    return ".".join(parts[: next(i for i, p in enumerate(parts) if p.isdigit())])


def _stacks_apart(found: list[tuple[str, int, str]], modules: dict[str, nn.Module]) -> list[tuple[str, int, str]]:
    """Two stacks of self-attention of one kind (a vision-language model's vision tower beside its
    language model) told apart by what their modules say of themselves: a causal stack is the
    ``decoder``, one that sees every position the ``encoder``."""
    stacks: dict[str, set[str]] = {}
    for kind, _, path in found:
        stacks.setdefault(kind, set()).add(_stack(path))
    out = []
    for kind, layer, path in found:
        if kind in ("encoder", "decoder") and len(stacks[kind]) > 1:
            causal = getattr(modules[path], "is_causal", None)
            kind = kind if causal is None else "decoder" if causal else "encoder"
        out.append((kind, layer, path))
    return out


def family_of(config: dict, path: Path) -> tuple[str, Layout]:
    """(model_type, layout) of a config.json: the layout (encoder, decoder, seq2seq, vision) from the
    configuration and the class its weights were saved from (``architectures``), never from a list
    of model types; a one-line error for a model attnkit cannot read."""
    from transformers.models.auto import modeling_auto

    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise ValueError(f"{path}: config.json names no model_type: not a transformers model configuration")
    names = config.get("architectures") or []
    found = [c for c in (_transformers_class(n) for n in names) if c is not None]
    if (found and _reads_speech(found[0])) or (
        not found and model_type in modeling_auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES
    ):
        layout = "speech"
    elif config.get("is_encoder_decoder"):
        layout = "seq2seq"
    elif found:
        layout = _layout_of_class(found[0])
    elif model_type in modeling_auto.MODEL_FOR_IMAGE_MAPPING_NAMES:
        layout = "vision"
    elif (
        model_type in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and model_type not in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    ):
        layout = "decoder"
    elif model_type in modeling_auto.MODEL_MAPPING_NAMES:
        layout = "encoder"
    else:
        arch = ", ".join(names) or "none given"
        raise ValueError(f"{path}: transformers has no model of type {model_type!r} (architectures: {arch})")
    return model_type, LAYOUTS[layout]


def _transformers_class(name: str) -> Any:
    import transformers

    try:
        return getattr(transformers, name)
    except (AttributeError, ImportError):
        return None


def _layout_of_class(cls: Any) -> str:
    """A model class's layout: what it reads (``main_input_name``), whether it generates."""
    main = getattr(cls, "main_input_name", "input_ids")
    if main == "pixel_values":
        return "vision"
    if _reads_speech(cls):
        return "speech"
    if main != "input_ids":
        raise ValueError(
            f"{cls.__name__} reads `{main}`: attnkit reads transformers models of text (input_ids), of images "
            "(pixel_values) and speech encoder-decoders of log-mel frames (input_features)"
        )
    if getattr(getattr(cls, "config_class", None), "is_encoder_decoder", False):
        return "seq2seq"
    can = getattr(cls, "can_generate", None)
    if not (callable(can) and can()):
        return "encoder"
    return "vision-language" if cls.__name__ in _image_text_classes() else "decoder"


def _image_text_classes() -> set[str]:
    """The classes transformers builds for image-and-text-to-text (its auto mapping's)."""
    return _classes_of("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES")


def _classes_of(mapping: str) -> set[str]:
    """The class names of one of transformers' auto mappings."""
    from transformers.models.auto import modeling_auto

    names: set[str] = set()
    for value in getattr(modeling_auto, mapping).values():
        names.update([value] if isinstance(value, str) else value)
    return names


def _reads_speech(cls: Any) -> bool:
    """Whether a class is a speech encoder-decoder of log-mel frames (Whisper, Speech2Text): the
    auto mapping's speech-to-text classes reading ``input_features``."""
    main = getattr(cls, "main_input_name", "input_ids")
    return main == "input_features" and cls.__name__ in _classes_of("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES")


def layout_of_model(model: Any) -> Layout:
    """A model in memory's layout, from its configuration and class."""
    if _reads_speech(type(model)):
        return LAYOUTS["speech"]
    if getattr(model.config, "is_encoder_decoder", False):
        return LAYOUTS["seq2seq"]
    return LAYOUTS[_layout_of_class(type(model))]


def _through_interface(model: Any, label: Any) -> None:
    """Refuse, in one line, a model (in memory, or its class with a configuration: built on the meta
    device, no weights) with no attention module, or whose family's attention does not go through
    transformers' attention interface: its maps would be missing, never recorded."""
    import sys

    cls = type(model)
    layers = [type(model.get_submodule(path)) for path in _attention_paths(model)]
    if not layers:
        raise ValueError(f"{label}: {cls.__name__} has no attention layer (a state-space or convolutional model?)")
    for layer in layers:  # the family that defines each attention layer dispatches to the interface
        if not hasattr(sys.modules.get(layer.__module__), "ALL_ATTENTION_FUNCTIONS"):
            raise ValueError(
                f"{label}: {cls.__name__}'s {layer.__name__} computes attention inside its own module, not "
                "through transformers' attention interface: attnkit cannot record it"
            )


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_hf(path: str | Path, *, device: str | torch.device = "cpu", dtype: str = "float32") -> HFModel:
    """Load a local Hugging Face model directory with transformers (``pip install 'attnkit[hf]'``),
    its weights in ``dtype`` (float32, bfloat16 or float16)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: choose from {', '.join(DTYPES)}")
    path = Path(path)
    config = _read_config(path)
    try:
        import transformers
    except ImportError:
        raise ValueError(
            f"{path} is a Hugging Face {config.get('model_type')} model: reading it needs transformers "
            "(pip install 'attnkit[hf]')"
        ) from None
    model_type, layout = family_of(config, path)
    _quiet_transformers()
    _register()
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise FileNotFoundError(f"{path}: no weights (model.safetensors or pytorch_model.bin)")
    tokenizer = processor = None
    if layout.with_images:
        if not any((path / f).is_file() for f in ("processor_config.json", "preprocessor_config.json")):
            raise FileNotFoundError(f"{path}: missing processor_config.json (the processor of its text and images)")
        processor = _load(
            lambda: transformers.AutoProcessor.from_pretrained(path, local_files_only=True), path, "processor"
        )
        tokenizer = _processor_parts(processor, path)
    elif layout.reads_audio:
        if not (path / "preprocessor_config.json").is_file() and not (path / "processor_config.json").is_file():
            raise FileNotFoundError(f"{path}: missing preprocessor_config.json (the feature extractor of its sound)")
        processor = _load(
            lambda: transformers.AutoProcessor.from_pretrained(path, local_files_only=True), path, "processor"
        )
        tokenizer = _speech_parts(processor, path)
    elif layout.reads_images:
        if not (path / "preprocessor_config.json").is_file():
            raise FileNotFoundError(f"{path}: missing preprocessor_config.json (the image processor's settings)")
        processor = _load(
            lambda: transformers.AutoImageProcessor.from_pretrained(path, local_files_only=True),
            path,
            "image processor",
        )
    else:
        if not any((path / f).is_file() for f in TOKENIZER_FILES):
            raise FileNotFoundError(f"{path}: missing tokenizer files (one of {', '.join(TOKENIZER_FILES[:5])}, ...)")
        tokenizer = _load(
            lambda: transformers.AutoTokenizer.from_pretrained(path, local_files_only=True), path, "tokenizer"
        )
    auto = getattr(transformers, layout.auto)
    settings = _load(lambda: transformers.AutoConfig.from_pretrained(path, local_files_only=True), path, "config")
    mapping = getattr(auto, "_model_mapping", {})
    if type(settings) in mapping:
        with torch.device("meta"):
            skeleton = _load(lambda: mapping[type(settings)]._from_config(settings), path, "config")
        _through_interface(skeleton, path)

    def build():
        return auto.from_pretrained(
            path, local_files_only=True, attn_implementation=ATTN, dtype=DTYPES[dtype], output_loading_info=True
        )

    model, loading = _load(build, path, "weights")
    missing = [k for k in loading.get("missing_keys", []) if "pooler" not in k]
    mismatched = loading.get("mismatched_keys", [])
    if missing or mismatched:
        what = missing or [m[0] if isinstance(m, tuple) else m for m in mismatched]
        raise ValueError(
            f"{path}: the weights do not fit config.json ({len(what)} parameter(s) missing or of another shape, "
            f"e.g. {what[0]})"
        )
    model = model.to(device).eval()
    return _named(HFModel(path, layout, model_type, model, tokenizer, processor))


def from_object(model: Any, tokenizer: Any = None) -> HFModel:
    """A transformers model already in memory (a notebook's) with its tokenizer (for an image
    encoder, its image processor; for a vision-language model, its processor). attnkit's attention implementation is set on it: with no
    recording open it runs PyTorch's fused kernel under the family's own rules (as transformers'
    SDPA does), so the model computes as its eager attention does."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict") or not isinstance(model, nn.Module):
        raise ValueError(f"attnkit.load takes a name, a directory or a transformers model, not {type(model).__name__}")
    name = Path(str(getattr(config, "_name_or_path", "") or type(model).__name__))
    model_type, layout = str(getattr(config, "model_type", "")), layout_of_model(model)
    _through_interface(model, name)
    if tokenizer is None:
        needed = layout.needs
        raise ValueError(
            f"a {type(model).__name__} object needs its {needed}: attnkit.load(model, {needed.split()[-1]})"
        )
    _quiet_transformers()
    _register()
    model.set_attn_implementation(ATTN)  # type: ignore[operator]  # a PreTrainedModel method
    model.eval()
    if layout.with_images:  # its processor (text and images), or a tokenizer alone (its text alone)
        processor, tokenizer = (tokenizer, tokenizer.tokenizer) if _is_processor(tokenizer) else (None, tokenizer)
    elif layout.reads_audio:
        processor, tokenizer = tokenizer, _speech_parts(tokenizer, name)
    else:
        processor, tokenizer = (tokenizer, None) if layout.reads_images else (None, tokenizer)
    return _named(HFModel(name, layout, model_type, model, tokenizer, processor))


def _is_processor(processor: Any) -> bool:
    """Whether ``processor`` reads text and images (a tokenizer and an image processor in one)."""
    return getattr(processor, "image_processor", None) is not None and getattr(processor, "tokenizer", None) is not None


def _processor_parts(processor: Any, label: Any) -> Any:
    """A vision-language processor's tokenizer, once it is seen to hold an image processor too."""
    if not _is_processor(processor):
        raise ValueError(
            f"{label}: a vision-language model reads its text and images through one processor (its tokenizer "
            f"and image processor), not a {type(processor).__name__}"
        )
    return processor.tokenizer


def _speech_parts(processor: Any, label: Any) -> Any:
    """A speech processor's tokenizer, once it is seen to hold a feature extractor too."""
    if getattr(processor, "feature_extractor", None) is None or getattr(processor, "tokenizer", None) is None:
        raise ValueError(
            f"{label}: a speech model reads its sound through a processor (its feature extractor and tokenizer), "
            f"not a {type(processor).__name__}"
        )
    return processor.tokenizer


def _named(hf: HFModel) -> HFModel:
    """``hf`` with every attention module named (``name_sites``) and the activations around them
    made sites (``activation_sites``)."""
    heads = {kind: h for kind, (_, h) in hf.layers_and_heads().items()}
    hf.named = name_sites(hf.model, hf.layout, heads)
    hf.sites = activation_sites(hf.model, hf.named)
    return hf


MLP_NAMES = ("mlp", "feed_forward", "ffn")  # a layer's feed-forward block, where it is one module
NORM_NAMES = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "norm_f", "layer_norm", "layernorm")
HOOKS = "_attnkit_hooks"  # where a model keeps the handles of the hooks attnkit registered on it


def activation_sites(model: nn.Module, named: list[sites.Site]) -> list[sites.Site]:
    """Every site of a transformers model, in the order a forward pass reaches them: each layer's
    residual stream in (``resid_pre``), its attention calls and head outputs, its feed-forward
    block's output (``mlp_out``, where that is one module), the stream out (``resid_post``); the
    final norm and the logits where the model has them. The activations are read by forward hooks
    registered here (once per model: loading it again replaces them), which do nothing while no
    listener is open."""
    for handle in getattr(model, HOOKS, []):
        handle.remove()
    handles: list[Any] = []
    out: list[sites.Site] = []
    paths = {id(m): name for name, m in model.named_modules()}
    layers: dict[str, list[sites.Site]] = {}
    for site in named:  # a layer is the module whose path ends at the attention path's layer number
        parts = paths[id(site.module)].split(".")
        cut = next(i for i, p in enumerate(parts) if p.isdigit())
        layers.setdefault(".".join(parts[: cut + 1]), []).append(site)
    for path, attention in layers.items():
        layer = model.get_submodule(path)
        first = attention[0]
        stack = first.name.split(".")[0]
        if stack == "decoder" and out and out[-1].name.startswith("encoder."):
            handles += _encoder_end(model, out)
        kind = "decoder" if stack == "decoder" else first.kind
        made = sites.layer_sites(stack, kind, first.layer, layer)
        handles.append(layer.register_forward_pre_hook(_stream_in(made["resid_pre"]), with_kwargs=True))
        out += [made["resid_pre"], *(x for site in attention for x in (site, site.z))]
        mlp = next((getattr(layer, n) for n in MLP_NAMES if isinstance(getattr(layer, n, None), nn.Module)), None)
        if mlp is not None:
            handles.append(mlp.register_forward_hook(_output(made["mlp_out"])))
            out.append(made["mlp_out"])
        handles.append(layer.register_forward_hook(_output(made["resid_post"])))
        out.append(made["resid_post"])
    handles += _model_end(model, out, "decoder" if "decoder" in (s.kind for s in named) else "encoder")
    object.__setattr__(model, HOOKS, handles)
    return out


def _final_norm(stack: nn.Module) -> nn.Module | None:
    """A stack's norm after its last layer, where it has one."""
    return next((getattr(stack, n) for n in NORM_NAMES if isinstance(getattr(stack, n, None), nn.Module)), None)


def _encoder_end(model: nn.Module, out: list[sites.Site]) -> list[Any]:
    """An encoder-decoder's encoder norm (T5's ``final_layer_norm``), where it has one, as the
    site ``encoder.norm`` appended to ``out``: its hook. What the cross-attention reads is its output."""
    encoder = getattr(model, "get_encoder", lambda: None)()
    norm = _final_norm(encoder) if isinstance(encoder, nn.Module) else None
    if norm is None:
        return []
    site = sites.Site("encoder.norm", "encoder", -1, "final", module=norm)
    out.append(site)
    return [norm.register_forward_hook(_output(site))]


def _model_end(model: nn.Module, out: list[sites.Site], side: str) -> list[Any]:
    """The final norm's and the logits' sites (where the model has them), appended to ``out``: their
    hooks. The norm is named by its stack (``decoder.norm``, ``encoder.norm``), a decoder-only
    model's ``final_norm``."""
    handles = []
    base = cast(nn.Module, getattr(model, "get_decoder", lambda: None)() or getattr(model, "base_model", model))
    norm = _final_norm(base)
    if norm is not None:
        stack = out[0].name.split(".")[0] if out else side
        site = sites.Site("final_norm" if stack == "blocks" else f"{side}.norm", "output", -1, "final", module=norm)
        handles.append(norm.register_forward_hook(_output(site)))
        out.append(site)
    output_embeddings = getattr(model, "get_output_embeddings", None)
    head = output_embeddings() if callable(output_embeddings) else None
    if isinstance(head, nn.Module):
        site = sites.Site("logits", "output", -1, "logits", module=head)
        handles.append(head.register_forward_hook(_output(site)))
        out.append(site)
    return handles


def _stream_in(site: sites.Site):
    """A forward pre-hook: the layer's input hidden states at ``site``."""

    def hook(module: nn.Module, args: tuple, kwargs: dict):
        if not sites.listeners(site):
            return None
        if args:
            return (sites.activation(site, args[0]), *args[1:]), kwargs
        if "hidden_states" in kwargs:
            return args, {**kwargs, "hidden_states": sites.activation(site, kwargs["hidden_states"])}
        raise ValueError(f"{type(module).__name__} takes no hidden states attnkit can find: {site.name} cannot be read")

    return hook


def _output(site: sites.Site):
    """A forward hook: the module's output (the first of a tuple) at ``site``."""

    def hook(module: nn.Module, args: tuple, output: Any):
        if not sites.listeners(site):
            return None
        if isinstance(output, Tensor):
            return sites.activation(site, output)
        if isinstance(output, tuple) and output and isinstance(output[0], Tensor):
            return (sites.activation(site, output[0]), *output[1:])
        raise ValueError(f"{type(module).__name__} returns {type(output).__name__}: {site.name} cannot be read")

    return hook


def _load(make, path: Path, what: str):
    """Call a transformers loader; its errors become one line."""
    try:
        with _no_network():
            return make()
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if what == "weights":
            raise ValueError(f"{path}: the weights are not readable (truncated or damaged?): {first[:200]}") from None
        raise ValueError(f"{path}: the {what} is not readable: {first[:200]}") from None


@contextlib.contextmanager
def _no_network() -> Iterator[None]:
    """transformers and huggingface_hub read only local files while attnkit loads a model."""
    import os

    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update({k: "1" for k in saved})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

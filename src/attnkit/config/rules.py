"""What a configuration's keys may hold: the choice or range of each key (``RULES``) and how
keys must fit together. Train, demo, resume and the model factory check a config the same way,
before any data is read or model built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..attention import ATTENTION_TYPES, SCORES
from ..errors import unknown_choice
from ..positions import POSITION_SCHEMES
from .schema import (
    ARCHS,
    BLEU_TOKENIZERS,
    DEVICES,
    EARLY_STOP_METRICS,
    IMAGE_ENCODERS,
    IMAGE_POSITIONS,
    INIT_HIDDEN,
    MULTI30K_VARIANTS,
    OPTIMIZERS,
    RNN_CELLS,
    SCHEDULES,
    TASKS,
    TOKENIZER_KINDS,
    Config,
    ModelConfig,
)


@dataclass(frozen=True)
class Choice:
    values: tuple[str, ...]

    def check(self, key: str, value: Any) -> None:
        if value not in self.values:
            raise unknown_choice(key, value, self.values)


@dataclass(frozen=True)
class Range:
    """low <= value <= high (either end open with ``low_open``/``high_open``; None: unbounded)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def check(self, key: str, value: Any) -> None:
        if value is None:
            return
        ok = self.low is None or (value > self.low if self.low_open else value >= self.low)
        ok = ok and (self.high is None or (value < self.high if self.high_open else value <= self.high))
        if not ok:
            raise ValueError(f"{key}={value} is out of range: it must be {self.describe()}")

    def describe(self) -> str:
        low = None if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        high = None if self.high is None else f"{'<' if self.high_open else '<='} {self.high:g}"
        return " and ".join(x for x in (low, high) if x)


POSITIVE = Range(1)
NON_NEGATIVE = Range(0)
PROBABILITY = Range(0, 1, high_open=True)  # dropout, label smoothing: 1 would drop everything

RULES: dict[str, Choice | Range] = {
    "data.task": Choice(TASKS),
    "data.scenes.image_size": POSITIVE,
    "data.scenes.train": POSITIVE,
    "data.scenes.dev": POSITIVE,
    "data.scenes.noise": NON_NEGATIVE,
    "data.multi30k_variant": Choice(MULTI30K_VARIANTS),
    "data.max_len": POSITIVE,
    "data.max_dev_sentences": NON_NEGATIVE,
    "tokenizer.kind": Choice(TOKENIZER_KINDS),
    "tokenizer.vocab_size": Range(8),
    "tokenizer.character_coverage": Range(0, 1, low_open=True),
    "tokenizer.sampling": PROBABILITY,
    "model.arch": Choice(ARCHS),
    "model.d_model": POSITIVE,
    "model.layers": POSITIVE,
    "model.encoder_layers": POSITIVE,
    "model.decoder_layers": POSITIVE,
    "model.transformer.heads": POSITIVE,
    "model.transformer.ffn": POSITIVE,
    "model.dropout": PROBABILITY,
    "model.transformer.attention_dropout": PROBABILITY,
    "model.transformer.activation_dropout": PROBABILITY,
    "model.positions": Choice(POSITION_SCHEMES),
    "model.max_positions": POSITIVE,
    "model.rnn.cell": Choice(RNN_CELLS),
    "model.rnn.hidden": Range(2),
    "model.rnn.attention": Choice(ATTENTION_TYPES),
    "model.rnn.score": Choice(tuple(SCORES)),
    "model.rnn.window": NON_NEGATIVE,
    "model.rnn.init_hidden": Choice(INIT_HIDDEN),
    "model.image.encoder": Choice(IMAGE_ENCODERS),
    "model.image.region": POSITIVE,
    "train.device": Choice(DEVICES),
    "train.batch_tokens": POSITIVE,
    "train.accumulate": POSITIVE,
    "train.max_steps": POSITIVE,
    "train.max_minutes": NON_NEGATIVE,
    "train.optimizer": Choice(OPTIMIZERS),
    "train.lr": Range(0, low_open=True),
    "train.weight_decay": NON_NEGATIVE,
    "train.schedule": Choice(SCHEDULES),
    "train.warmup": NON_NEGATIVE,
    "train.label_smoothing": PROBABILITY,
    "train.clip_norm": NON_NEGATIVE,
    "train.eval_every": POSITIVE,
    "train.bleu_every": NON_NEGATIVE,
    "train.bleu_tokenize": Choice(BLEU_TOKENIZERS),
    "train.early_stop_metric": Choice(EARLY_STOP_METRICS),
    "train.patience": NON_NEGATIVE,
    "train.keep_last": POSITIVE,
    "train.log_every": POSITIVE,
    "train.teacher_weight": Range(0, 1),
    "train.teacher_top": POSITIVE,
    "train.rdrop": NON_NEGATIVE,
    "train.attention_snapshots": NON_NEGATIVE,
}


def _value(root: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        root = getattr(root, name)
    return root


def check_model(m: ModelConfig) -> None:
    """Every model key's range and choice, and how the keys must fit together."""
    for key, rule in RULES.items():
        if key.startswith("model."):
            rule.check(key, _value(m, key.removeprefix("model.")))
    if m.arch in ("transformer", "encoder"):
        heads = m.transformer.heads
        if m.d_model % heads:
            raise ValueError(f"model.d_model={m.d_model} is not divisible by model.transformer.heads={heads}")
        if m.positions == "rope" and (m.d_model // heads) % 2:
            raise ValueError(
                f"model.positions=rope rotates pairs of dimensions: the head size "
                f"d_model / heads = {m.d_model // heads} must be even"
            )
    else:
        if m.rnn.hidden % 2:
            raise ValueError(
                f"model.rnn.hidden={m.rnn.hidden} must be even (the bidirectional encoder has hidden/2 per direction)"
            )
        if m.encoder_layers != m.decoder_layers:
            raise ValueError(
                f"the RNN decoder starts from the encoder's final states, so model.encoder_layers "
                f"({m.encoder_layers}) must equal model.decoder_layers ({m.decoder_layers})"
            )


def check_config(cfg: Config, *, training: bool = False) -> None:
    """Every key's range and choice (``RULES``) and how keys fit together. ``training``:
    also what `attnkit train` needs (a translation model: transformer or rnn)."""
    for key, rule in RULES.items():
        if not key.startswith("model."):
            rule.check(key, _value(cfg, key))
    a, b = cfg.train.betas
    if not (0 <= a < 1 and 0 <= b < 1):
        raise ValueError(f"train.betas={[a, b]} are out of range: each must be >= 0 and < 1")
    if cfg.train.time_schedule and cfg.train.max_minutes <= 0:
        raise ValueError("train.time_schedule needs train.max_minutes > 0 (the budget the schedule decays over)")
    check_model(cfg.model)
    if training and cfg.model.arch == "encoder":
        raise ValueError(
            "model.arch=encoder has no decoder: `attnkit train` trains translation models "
            "(model.arch transformer or rnn)"
        )
    if cfg.train.teacher and cfg.data.task != "translation":
        raise ValueError(f"train.teacher distils a translation model; data.task={cfg.data.task} has none")
    if cfg.train.teacher and cfg.train.rdrop > 0:
        raise ValueError(
            f"train.rdrop={cfg.train.rdrop} and train.teacher={cfg.train.teacher} are not combined: set one of them"
        )
    if cfg.train.teacher and cfg.tokenizer.sampling > 0:
        raise ValueError(
            f"train.teacher reads each pair once, before training: it needs a fixed segmentation "
            f"(tokenizer.sampling=0, not {cfg.tokenizer.sampling})"
        )
    if cfg.data.task == "caption":
        check_captioning(cfg)
    else:
        check_tied_embeddings(cfg.model, shared_vocab=cfg.tokenizer.joint)


def check_tied_embeddings(m: ModelConfig, *, shared_vocab: bool) -> None:
    """Tied source and target embeddings need one vocabulary for both sides."""
    if m.tie_embeddings and not shared_vocab and m.arch != "encoder":
        raise ValueError("model.tie_embeddings=true needs one vocabulary for both sides (tokenizer.joint=true)")


def check_captioner(m: ModelConfig) -> None:
    """A captioner needs a decoder, and a ViT image encoder a Transformer decoder."""
    if m.arch == "encoder":
        raise ValueError("data.task=caption needs a decoder: model.arch transformer or rnn")
    if m.arch == "rnn" and m.image.encoder == "vit":
        raise ValueError(
            "model.image.encoder=vit is a Transformer encoder: use it with model.arch=transformer "
            "(the RNN decoder takes model.image.encoder=cnn)"
        )


def check_captioning(cfg: Config) -> None:
    """How the keys of an image-captioning config must fit together."""
    d, m = cfg.data.scenes, cfg.model
    region = m.image.region
    check_captioner(m)
    if m.positions not in IMAGE_POSITIONS:
        raise ValueError(
            f"model.positions={m.positions} acts inside text self-attention; image regions take "
            f"{', '.join(IMAGE_POSITIONS)}"
        )
    if m.arch == "rnn" and m.rnn.attention != "global":
        raise ValueError(
            f"model.rnn.attention={m.rnn.attention} is a window over a 1-D sequence; attention over image regions is global"
        )
    if d.image_size % region:
        raise ValueError(
            f"data.scenes.image_size={d.image_size} does not tile into model.image.region={region} pixel regions"
        )
    if m.image.encoder == "cnn" and 2 ** int(region).bit_length() != 2 * region:
        raise ValueError(
            f"the CNN halves the resolution per stage: model.image.region must be a power of 2, got {region}"
        )
    width = m.rnn.hidden if m.arch == "rnn" else m.d_model
    if m.positions == "sinusoidal" and width % 4:
        raise ValueError(
            f"2-D sinusoids need a region width divisible by 4 (model.{'rnn.hidden' if m.arch == 'rnn' else 'd_model'}"
            f"={width})"
        )
    lo, hi = d.digits
    if not 1 <= lo <= hi:
        raise ValueError(
            f"data.scenes.digits={[lo, hi]} must be the fewest and most digits per scene, 1 <= fewest <= most"
        )
    slots = (d.image_size // 10) ** 2  # one 8-pixel digit per 10-pixel slot
    if hi > slots:
        raise ValueError(f"data.scenes.digits: {hi} digits do not fit a {d.image_size}-pixel canvas (at most {slots})")
    if cfg.train.attention_snapshots:
        raise ValueError("train.attention_snapshots takes dev sentences; a captioning run has none (set it to 0)")


# ------------------------------------------------------------ resuming a run

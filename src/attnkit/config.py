"""Typed configuration: dataclasses loaded from YAML, unknown keys rejected with
the nearest valid key suggested, dotted overrides from the command line
(``model.layers=2``). Every key is documented in ``configs/*.yaml``.

The choices and ranges of every key live here (``RULES``, ``check_config``), so
train, demo, resume and the model factory check a config the same way, before
any data is read or model built.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .attention import ATTENTION_TYPES, SCORES
from .errors import unknown_choice
from .positions import POSITION_SCHEMES

# Named choices of config keys (modules that act on them import them from here).
ARCHS = ("transformer", "rnn", "encoder")
RNN_CELLS = ("lstm", "gru")
INIT_HIDDEN = ("last", "zero")
TOKENIZER_KINDS = ("bpe", "unigram")
MULTI30K_VARIANTS = ("tok", "raw")
SCHEDULES = ("inverse_sqrt", "constant", "linear", "cosine")
OPTIMIZERS = ("adam", "adamw")
EARLY_STOP_METRICS = ("bleu", "loss")
DEVICES = ("auto", "cpu", "cuda")
TASKS = ("translation", "caption")
IMAGE_ENCODERS = ("cnn", "vit")
IMAGE_POSITIONS = ("sinusoidal", "learned", "fourier", "none")  # positions.grid.GRID_SCHEMES
# sacreBLEU's tokenizers (13a: its default, for detokenized text; none: text tokenized already)
BLEU_TOKENIZERS = ("13a", "none", "intl", "char", "zh", "ja-mecab", "ko-mecab", "spm", "flores101", "flores200")
# languages the Moses detokenizer knows (evaluating a model trained on tokenized text)
DETOKENIZE_LANGS = (
    "as",
    "bn",
    "ca",
    "cs",
    "de",
    "el",
    "en",
    "es",
    "et",
    "fi",
    "fr",
    "ga",
    "gu",
    "hi",
    "hu",
    "is",
    "it",
    "kn",
    "lt",
    "lv",
    "ml",
    "mr",
    "nl",
    "or",
    "pa",
    "pl",
    "pt",
    "ro",
    "ru",
    "sk",
    "sl",
    "sv",
    "ta",
    "te",
    "zh",
)


@dataclass
class DataConfig:
    """Where the parallel text is (explicit file paths, or ``multi30k``), or, for
    ``task: caption``, the built-in digit scenes (``data.scenes``)."""

    task: str = "translation"  # "translation" (text to text) or "caption" (image to text: digit scenes)
    train_src: str | None = None
    train_tgt: str | None = None
    dev_src: str | None = None
    dev_tgt: str | None = None
    multi30k: str | None = (
        None  # a directory in the Multi30k layout (raw/, tok/); else env ATTNKIT_MULTI30K, else download
    )
    multi30k_variant: str = "tok"  # "tok" (lowercased, tokenized; the published setup) or "raw"
    src_lang: str = "en"
    tgt_lang: str = "de"
    max_len: int = 100  # subword tokens per side; longer training pairs are dropped
    max_dev_sentences: int = 0  # 0 = the whole dev set
    # task: caption -- scenes of 3-5 real digit scans (scikit-learn's bundled UCI set); dev scenes use held-out scans
    image_size: int = 32  # canvas side, pixels
    train_scenes: int = 20000
    dev_scenes: int = 500
    digits: tuple[int, int] = (3, 5)  # fewest and most digits per scene
    noise: float = 0.05  # std of the Gaussian pixel noise


@dataclass
class TokenizerConfig:
    kind: str = "bpe"  # "bpe" or "unigram" (sentencepiece)
    vocab_size: int = 8000
    joint: bool = True  # one vocabulary for both sides (needed for tied source/target embeddings)
    character_coverage: float = 1.0
    split_digits: bool = False  # every digit its own piece (numbers, dates)
    # training pairs segmented afresh each epoch: for bpe the chance that each merge is skipped
    # (BPE-dropout, Provilkov et al. 2020; 0.1 is usual), for unigram the smoothing alpha of subword
    # regularization (Kudo 2018); 0 = one fixed segmentation. Dev, test and inference never sample.
    sampling: float = 0.0
    # the target side in reverse order (its subword pieces last to first): a right-to-left model,
    # which writes the output from its end; its outputs read left to right again when decoded
    right_to_left: bool = False


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
    positions: str = "sinusoidal"  # sinusoidal, learned, fourier, relative, t5, rope, alibi, none
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
    # image captioning (data.task: caption); model.positions then gives the regions' 2-D positions
    image_encoder: str = "cnn"  # "cnn" (small CNN) or "vit" (patches + model.encoder_layers Transformer layers)
    region: int = 4  # side of an image region in pixels: the ViT patch, the CNN's total downsampling

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
    # a trained model (directory or installed name) this run starts from: its vocabulary and weights;
    # the optimizer, schedule and step start afresh (fine-tuning, or a second stage on new data)
    init_from: str = ""
    # word-level knowledge distillation: trained models (directories or installed names, comma-separated:
    # decoded together) whose next-word distributions the run also learns, weighted teacher_weight
    # against the references; a run without init_from takes the teacher's vocabulary
    teacher: str = ""
    teacher_weight: float = 0.5
    teacher_top: int = 8  # the teacher's most likely words kept per position
    # R-Drop (Liang et al. 2021): every training batch runs twice (two dropout masks) and the two
    # next-word distributions are pulled together with this weight on their symmetric KL; 0 = off
    rdrop: float = 0.0
    attention_snapshots: int = 0  # first N dev sentences whose attention is saved at every validation and at steps 0, eval_every/8, /4, /2 (snapshots/)


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
            kwargs[key] = _build(typing.cast(type, tp), value, f"{full}.")  # a field's hint: a class
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
    """Build and check a config (``check_config``) from a mapping and dotted overrides."""
    if not isinstance(data, dict):
        raise ValueError(
            f"a config must be a mapping of sections (data, tokenizer, model, train), got a {type(data).__name__}"
        )
    cfg = _build(Config, _merge(data, parse_overrides(overrides or [])), "")
    check_config(cfg)
    return cfg


def load_config(path: str | Path, overrides: list[str] | None = None, *, warn: bool = False) -> Config:
    """Read a YAML config, apply dotted overrides, validate every key and type. ``warn``: say on
    stderr which keys the config sets that its architecture or task does not read."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ValueError(f"config file {path} is not valid YAML{where}") from None
    except UnicodeDecodeError:
        raise ValueError(f"config file {path} is not UTF-8 text") from None
    if data is not None and not isinstance(data, dict):
        raise ValueError(
            f"config file {path} must hold a mapping of sections (data, tokenizer, model, train) "
            f"at its top level, not a {type(data).__name__}"
        )
    cfg = config_from_dict(data or {}, overrides)
    if warn:
        given = _merge(data or {}, parse_overrides(overrides or []))
        ignored = given_but_ignored(given, cfg)
        if ignored:
            what = f"model.arch={cfg.model.arch}" + (", data.task=caption" if cfg.data.task == "caption" else "")
            print(f"warning: {path}: {', '.join(ignored)} do not apply to {what} and are ignored", file=sys.stderr)
    return cfg


# keys that only some architectures or tasks read (every other key applies to every config)
RNN_KEYS = ("cell", "hidden", "attention", "score", "window", "input_feeding", "init_hidden")
TRANSFORMER_KEYS = ("heads", "ffn", "attention_dropout", "activation_dropout", "norm_first")
CAPTION_MODEL_KEYS = ("image_encoder", "region")
CAPTION_DATA_KEYS = ("image_size", "train_scenes", "dev_scenes", "digits", "noise")
TRANSLATION_DATA_KEYS = (
    "train_src", "train_tgt", "dev_src", "dev_tgt", "multi30k", "multi30k_variant", "src_lang", "tgt_lang",
    "max_len", "max_dev_sentences",
)  # fmt: skip


TEACHER_KEYS = ("teacher", "teacher_weight", "teacher_top")  # word-level distillation: translation only


def ignored_keys(cfg: Config) -> list[str]:
    """The dotted keys ``cfg``'s architecture and task do not read: an RNN's keys in a Transformer,
    a Transformer's in an RNN, the image keys in a translation config, the text keys (the
    tokenizer, a teacher) in a captioning one, the positional scheme of an RNN translator."""
    m, caption = cfg.model, cfg.data.task == "caption"
    out = []
    if m.arch != "rnn":
        out += [f"model.{k}" for k in RNN_KEYS]
    if m.arch == "rnn":
        out += [f"model.{k}" for k in TRANSFORMER_KEYS]
        if not caption:  # the recurrence orders the words; a captioner's regions take model.positions
            out.append("model.positions")
    if not caption:
        out += [f"model.{k}" for k in CAPTION_MODEL_KEYS] + [f"data.{k}" for k in CAPTION_DATA_KEYS]
    else:
        out += [f"data.{k}" for k in TRANSLATION_DATA_KEYS] + [
            f"tokenizer.{k}" for k in TokenizerConfig.__dataclass_fields__
        ]
        out += [f"train.{k}" for k in TEACHER_KEYS]
    return out


def given_but_ignored(data: dict[str, Any], cfg: Config) -> list[str]:
    """The keys a config mapping sets that ``cfg`` ignores (``ignored_keys``), in the mapping's order."""
    ignored = set(ignored_keys(cfg))
    return [k for k in _flat(data) if k in ignored or any(k.startswith(f"{i}.") for i in ignored)]


def save_config(config: Config, path: str | Path) -> None:
    """Write ``config`` as YAML with only the keys its architecture and task read."""
    from .atomic import write_text

    tree = config.to_dict()
    for key in ignored_keys(config):
        section, name = key.split(".")
        tree[section].pop(name, None)
    tree = {k: v for k, v in tree.items() if v != {}}
    write_text(path, yaml.safe_dump(tree, sort_keys=False))


# ---------------------------------------------------------------- validation


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
    "data.image_size": POSITIVE,
    "data.train_scenes": POSITIVE,
    "data.dev_scenes": POSITIVE,
    "data.noise": NON_NEGATIVE,
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
    "model.heads": POSITIVE,
    "model.ffn": POSITIVE,
    "model.dropout": PROBABILITY,
    "model.attention_dropout": PROBABILITY,
    "model.activation_dropout": PROBABILITY,
    "model.positions": Choice(POSITION_SCHEMES),
    "model.max_positions": POSITIVE,
    "model.cell": Choice(RNN_CELLS),
    "model.hidden": Range(2),
    "model.attention": Choice(ATTENTION_TYPES),
    "model.score": Choice(tuple(SCORES)),
    "model.window": NON_NEGATIVE,
    "model.init_hidden": Choice(INIT_HIDDEN),
    "model.image_encoder": Choice(IMAGE_ENCODERS),
    "model.region": POSITIVE,
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


def check_model(m: ModelConfig) -> None:
    """Every model key's range and choice, and how the keys must fit together."""
    for key, rule in RULES.items():
        section, name = key.split(".")
        if section == "model":
            rule.check(key, getattr(m, name))
    if m.arch in ("transformer", "encoder"):
        if m.d_model % m.heads:
            raise ValueError(f"model.d_model={m.d_model} is not divisible by model.heads={m.heads}")
        if m.positions == "rope" and (m.d_model // m.heads) % 2:
            raise ValueError(
                f"model.positions=rope rotates pairs of dimensions: the head size "
                f"d_model / heads = {m.d_model // m.heads} must be even"
            )
    else:
        if m.hidden % 2:
            raise ValueError(
                f"model.hidden={m.hidden} must be even (the bidirectional encoder has hidden/2 per direction)"
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
        section, name = key.split(".")
        if section != "model":
            rule.check(key, getattr(getattr(cfg, section), name))
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
    if m.arch == "rnn" and m.image_encoder == "vit":
        raise ValueError(
            "model.image_encoder=vit is a Transformer encoder: use it with model.arch=transformer "
            "(the RNN decoder takes model.image_encoder=cnn)"
        )


def check_captioning(cfg: Config) -> None:
    """How the keys of an image-captioning config must fit together."""
    d, m = cfg.data, cfg.model
    check_captioner(m)
    if m.positions not in IMAGE_POSITIONS:
        raise ValueError(
            f"model.positions={m.positions} acts inside text self-attention; image regions take "
            f"{', '.join(IMAGE_POSITIONS)}"
        )
    if m.arch == "rnn" and m.attention != "global":
        raise ValueError(
            f"model.attention={m.attention} is a window over a 1-D sequence; attention over image regions is global"
        )
    if d.image_size % m.region:
        raise ValueError(f"data.image_size={d.image_size} does not tile into model.region={m.region} pixel regions")
    if m.image_encoder == "cnn" and 2 ** int(m.region).bit_length() != 2 * m.region:
        raise ValueError(f"the CNN halves the resolution per stage: model.region must be a power of 2, got {m.region}")
    width = m.hidden if m.arch == "rnn" else m.d_model
    if m.positions == "sinusoidal" and width % 4:
        raise ValueError(
            f"2-D sinusoids need a region width divisible by 4 (model.{'hidden' if m.arch == 'rnn' else 'd_model'}"
            f"={width})"
        )
    lo, hi = d.digits
    if not 1 <= lo <= hi:
        raise ValueError(f"data.digits={[lo, hi]} must be the fewest and most digits per scene, 1 <= fewest <= most")
    slots = (d.image_size // 10) ** 2  # data.scenes: one 8-pixel digit per 10-pixel slot
    if hi > slots:
        raise ValueError(f"data.digits: {hi} digits do not fit a {d.image_size}-pixel canvas (at most {slots})")
    if cfg.train.attention_snapshots:
        raise ValueError("train.attention_snapshots takes dev sentences; a captioning run has none (set it to 0)")


# ------------------------------------------------------------ resuming a run

# Keys a resumed run may change: how long and how it is watched, and the optimisation
# settings that do not touch the model, the data order or the saved optimizer's shape.
RESUMABLE = {
    "data.multi30k",
    "data.max_dev_sentences",
    "train.device",
    "train.max_steps",
    "train.max_minutes",
    "train.lr",
    "train.weight_decay",
    "train.schedule",
    "train.time_schedule",
    "train.warmup",
    "train.label_smoothing",
    "train.clip_norm",
    "train.bf16",
    "train.compile",
    "train.eval_every",
    "train.bleu_every",
    "train.bleu_tokenize",
    "train.patience",
    "train.keep_last",
    "train.log_every",
    "train.tensorboard",
    "train.attention_snapshots",
}


def _flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def resume_changes(saved: dict[str, Any], requested: Config) -> list[tuple[str, Any, Any]]:
    """(key, saved value, requested value) for each key a resumed run changes, checked: a key
    outside ``RESUMABLE`` (the model's shape, the tokenizer, the data, the seed, the batches)
    does not fit the checkpoint and is refused with its name."""
    before, after = _flat(config_from_dict(saved).to_dict()), _flat(requested.to_dict())
    changes = [(k, before[k], after[k]) for k in after if k != "out_dir" and before.get(k) != after[k]]
    refused = [c for c in changes if c[0] not in RESUMABLE]
    if refused:
        key, old, new = refused[0]
        more = f" (and {', '.join(c[0] for c in refused[1:])})" if len(refused) > 1 else ""
        raise ValueError(
            f"cannot change {key} when resuming ({old!r} in the checkpoint, {new!r} now){more}: "
            "it does not fit the saved run; train into a new out_dir instead"
        )
    return changes


@dataclass(frozen=True)
class StudioLimits:
    """What one request to the studio (`attnkit serve`) may ask for (each is also a `attnkit serve` option)."""

    max_chars: int = 200_000  # characters of the sentence (and of a forced target)
    # subword tokens of the sentence (and of a forced target); a model's positions, and the memory
    # its forward and record need (estimated before it runs), may allow fewer
    max_tokens: int = 32_768
    max_beam: int = 16
    max_nbest: int = 16  # and never more than the beam
    page_mb: int = 32  # above this, a record's maps stay on the server: the page asks for overviews and tiles
    records_mb: int = 4096  # records held for the views' requests; the oldest go first

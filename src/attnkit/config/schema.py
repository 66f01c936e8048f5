"""The configuration's schema: one typed dataclass per section, a default and a comment per key
(every key is also documented in ``configs/*.yaml``), and the named choices of its keys (modules
that act on a key import its choices from here)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

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
# languages the Moses detokenizer knows (sacremoses' nonbreaking-prefix lists): evaluating a model
# trained on tokenized text
DETOKENIZE_LANGS = (
    "as", "bn", "ca", "cs", "de", "el", "en", "es", "et", "fi", "fr", "ga", "gu", "hi", "hu", "is", "it", "kn",
    "lt", "lv", "ml", "mr", "nl", "or", "pa", "pl", "pt", "ro", "ru", "sk", "sl", "sv", "ta", "te", "zh",
)  # fmt: skip


@dataclass
class ScenesConfig:
    """``data.task: caption``: scenes of 3-5 real digit scans (scikit-learn's bundled UCI set), the
    dev scenes made from held-out scans."""

    image_size: int = 32  # canvas side, pixels
    train: int = 20000  # training scenes
    dev: int = 500  # dev scenes
    digits: tuple[int, int] = (3, 5)  # fewest and most digits per scene
    noise: float = 0.05  # std of the Gaussian pixel noise


@dataclass
class DataConfig:
    """Where the parallel text is (explicit file paths, or ``multi30k``), or, for
    ``task: caption``, the built-in digit scenes of real digit scans."""

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
    scenes: ScenesConfig = field(default_factory=ScenesConfig)  # task: caption

    @property
    def captions(self) -> bool:
        """Images in, text out (the digit scenes), rather than text to text."""
        return self.task == "caption"


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
class TransformerConfig:
    """The Transformer's layers: ``model.arch`` transformer or encoder, and the ViT image encoder."""

    heads: int = 4
    ffn: int = 256  # feed-forward width
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0  # inside the FFN, after the activation (none in the paper or fairseq)
    norm_first: bool = True  # pre-norm (True) or post-norm as in Vaswani et al. (False)


@dataclass
class RNNConfig:
    """The recurrent encoder-decoder of Luong et al. (2015): ``model.arch`` rnn."""

    cell: str = "lstm"  # "lstm" or "gru"
    hidden: int = 256  # decoder hidden size; the bidirectional encoder uses hidden/2 per direction
    attention: str = "global"  # "global", "local-m" or "local-p"
    score: str = "general"  # dot, scaled_dot, general, concat, additive
    window: int = 10  # local attention half-width D
    input_feeding: bool = True
    init_hidden: str = "last"  # decoder start state: "last" (encoder's final states) or "zero" (all from attention)


@dataclass
class ImageConfig:
    """The image encoder of a captioner (``data.task`` caption); ``model.positions`` then gives the
    regions' 2-D positions."""

    encoder: str = "cnn"  # "cnn" (small CNN) or "vit" (patches + model.encoder_layers Transformer layers)
    region: int = 4  # side of an image region in pixels: the ViT patch, the CNN's total downsampling


@dataclass
class ModelConfig:
    """What every architecture reads, and one section per component (read only by its architecture
    or task)."""

    arch: str = "transformer"  # "transformer", "rnn" or "encoder" (BERT-style, no decoder)
    d_model: int = 128  # embedding / model width
    layers: int | None = None  # shorthand: sets encoder_layers and decoder_layers together
    encoder_layers: int = 4
    decoder_layers: int = 4
    dropout: float = 0.3
    positions: str = "sinusoidal"  # sinusoidal, learned, fourier, relative, t5, rope, alibi, none
    max_positions: int = 1024  # table size for learned positions
    tie_embeddings: bool = True  # share source, target and output embeddings (needs a joint vocabulary)
    transformer: TransformerConfig = field(default_factory=TransformerConfig)
    rnn: RNNConfig = field(default_factory=RNNConfig)
    image: ImageConfig = field(default_factory=ImageConfig)

    def __post_init__(self) -> None:
        if self.layers is not None:
            self.encoder_layers = self.decoder_layers = self.layers

    @property
    def recurrent(self) -> bool:
        """An RNN encoder-decoder with Luong attention: one attention over the source, no heads."""
        return self.arch == "rnn"

    @property
    def multihead(self) -> bool:
        """A Transformer, encoder-decoder or encoder-only: heads, layers of self-attention."""
        return self.arch in ("transformer", "encoder")

    @property
    def local_window(self) -> int | None:
        """Local attention's half-width D (an RNN with local-m or local-p attention), else None."""
        return self.rnn.window if self.recurrent and self.rnn.attention.startswith("local") else None


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


# keys of the data and train sections that only a translator reads: the data section's text keys
# (a captioner's are data.scenes) and word-level distillation's teacher_* keys
TRANSLATION_DATA_KEYS = tuple(f.name for f in dataclasses.fields(DataConfig) if f.name not in ("task", "scenes"))
TEACHER_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name.startswith("teacher"))


def unread(cfg: Config) -> list[str]:
    """The dotted sections and keys ``cfg``'s architecture and task do not read: the component
    section of another architecture (the RNN's in a Transformer), the image encoder's and the
    scenes' keys in a translator, the text keys (the tokenizer, a teacher) in a captioner, the
    positional scheme of an RNN translator."""
    m, caption = cfg.model, cfg.data.task == "caption"
    out = ["model.transformer" if m.arch == "rnn" else "model.rnn"]
    if m.arch == "rnn" and not caption:  # the recurrence orders the words; a captioner's regions take positions
        out.append("model.positions")
    if caption:
        out += ["tokenizer", *(f"data.{k}" for k in TRANSLATION_DATA_KEYS), *(f"train.{k}" for k in TEACHER_KEYS)]
    else:
        out += ["model.image", "data.scenes"]
    return out


def is_unread(key: str, skipped: list[str]) -> bool:
    """Whether the dotted ``key`` is one of ``skipped`` (``unread``'s list) or lies in a section of it."""
    return any(key == s or key.startswith(f"{s}.") for s in skipped)

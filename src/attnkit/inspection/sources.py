"""Where attention to look at comes from: a model directory made by `attnkit train`, a
pretrained BERT-format encoder (a directory or an installed package), or a ``.npz``
file written by `attnkit capture`. The inspection commands accept any of them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Config
from ..data.tokenizer import Tokenizer
from ..loading.model_dir import load_model
from ..models.interface import EncoderModel, Seq2SeqModel
from ..search import SearchOptions
from .capture import (
    AttentionRecord,
    Prepared,
    capture,
    capture_pretrained,
    load_records,
    model_info,
    prepare,
    prepare_pretrained,
)

if TYPE_CHECKING:
    from ..pretrained import PretrainedEncoder


def is_pretrained(source: str | Path) -> bool:
    """A Hugging Face BERT-format checkpoint (directory or installed package), not an attnkit model
    directory or installed model."""
    from ..loading.packaged import resolve_model

    try:
        if (resolve_model(source) / "config.yaml").is_file():
            return False
    except FileNotFoundError:
        pass
    from ..pretrained import resolve

    try:
        resolve(source)
    except FileNotFoundError:
        return False
    return True


@dataclass
class Source:
    """A loaded model with what turns sentences into its ids: an attnkit model (``tok``,
    ``cfg``) or a pretrained encoder (``encoder``)."""

    model: Seq2SeqModel | EncoderModel
    info: dict
    tok: Tokenizer | None = None
    cfg: Config | None = None
    encoder: PretrainedEncoder | None = None

    @property
    def max_src_len(self) -> int | None:
        return None if self.cfg is None else self.cfg.model.max_positions - 1

    @property
    def window(self) -> int | None:
        """Local attention's D, to draw p_t's window."""
        m = None if self.cfg is None else self.cfg.model
        return m.window if m is not None and m.arch == "rnn" and m.attention.startswith("local") else None


def open_source(source: str | Path, weights: dict | None = None) -> Source:
    """Load an attnkit model directory or a pretrained encoder (not a .npz: see ``attention_records``).
    ``weights``: ``load_model``'s keyword arguments (checkpoint_name, average_last, device)."""
    weights = {"device": "auto", **(weights or {})}
    if is_pretrained(source):
        from ..loading.model_dir import resolve_device
        from ..pretrained import load_pretrained

        encoder = load_pretrained(source, device=resolve_device(weights["device"]))
        return Source(encoder.model, encoder.info, encoder=encoder)
    model, tok, cfg = load_model(source, **weights)
    info = model_info(model, cfg)
    if not Path(source).exists():  # an installed model, loaded by its name
        info["name"] = str(source)
    return Source(model, info, tok=tok, cfg=cfg)


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
) -> tuple[list[AttentionRecord], dict]:
    """Attention records and model info: read from a saved ``.npz``, or captured by running
    the model on ``sentences`` (with its own translation, searched with ``options``, or
    the forced ``targets``)."""
    if str(source).endswith(".npz"):
        if sentences or targets:
            raise ValueError("sentences are given with a model directory, not with a saved .npz")
        return load_records(source)
    src = open_source(source, weights)
    if src.encoder is not None:
        return capture_pretrained(src.encoder, _require_sentences(sentences)), src.info
    assert src.tok is not None  # an attnkit model comes with its tokenizer
    records = capture(
        src.model,
        src.tok,
        _require_sentences(sentences),
        targets=targets,
        options=options,
        max_src_len=src.max_src_len,
        window=src.window,
    )
    return records, src.info


def prepare_sentence(
    source: str | Path,
    sentence: str,
    *,
    target: str | None = None,
    options: SearchOptions | None = None,
    weights: dict | None = None,
) -> tuple[Seq2SeqModel | EncoderModel, Prepared]:
    """The model and one sentence ready for ``explain``: ids, tokens and the target side."""
    src = open_source(source, weights)
    if src.encoder is not None:
        return src.model, prepare_pretrained(src.encoder, [sentence])[0]
    assert src.tok is not None  # an attnkit model comes with its tokenizer
    prepared = prepare(
        src.model,
        src.tok,
        [sentence],
        targets=[target] if target else None,
        options=options,
        max_src_len=src.max_src_len,
    )
    return src.model, prepared[0]

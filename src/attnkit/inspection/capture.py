"""Every attention map of one forward pass, with its token strings, in one file.

``capture`` runs a model once per sentence under a recording (``attnkit.attention.record``;
nothing is recorded during training or plain decoding): a sequence-to-sequence model is fed
its own translation (or a given target) by teacher forcing, so one pass yields encoder
self-attention, decoder self-attention and cross-attention for every layer and head, plus
p_t for local attention. Multi-head attention is kept as q, k and each row's log-sum-exp,
its maps formed only where asked (``AttentionRecord.view``, ``Maps``).

Maps, per example (``layers, heads, queries, keys``):

    encoder  (L, h, s, s)  rows and columns: src_tokens
    decoder  (L, h, t, t)  rows and columns: tgt_in_tokens (<s> y1 .. y_t-1), causal; a
                           decoder-only model's prompt and generated tokens (src_tokens empty)
    cross    (L, h, t, s)  row j is the decoder state at tgt_in_tokens[j], which
                           predicts tgt_out_tokens[j]; columns: src_tokens
An RNN has one cross "layer" with one head and, for local attention, ``p_t`` (t,).

File format (``save_records`` / ``load_records``): a NumPy ``.npz`` archive,
readable with ``numpy.load`` alone:

    meta         0-d string array holding JSON: {"format": "attnkit-attention",
                 "version": 3, "model": {...}, "examples": [{"source", "output",
                 "src_tokens", "tgt_in_tokens", "tgt_out_tokens", "window", "kinds",
                 "calls", "prompt_length", "grid", "image_tokens"}, ...]}  (prompt_length: a
                 decoder-only model's prompt; grid: an image model's patch rows and columns;
                 image_tokens: [first, rows, columns] of the image's tokens in a vision-language
                 model's decoder sequence, row-major; frame_seconds: a speech model's seconds
                 of sound per encoder position; else null;
                 calls: {kind: [{"scale", "causal", "window", "cap"} per layer]} for each kind
                 kept as calls; window: a causal sliding window's keys, cap: a logit soft-cap)
    {i}/{kind}/{layer}/{part}
                 a recorded kind (in "calls"), each layer's q (h, t, d) and k (h_kv, s, d)
                 after positions (float16 for an input of more than 1,024 tokens), lse (h, t)
                 float32, and where present key_mask (s,), mask (1|h, t, s) bool, bias
                 (1|h, t, s), sink (h, 1|t): any weight is exp(s_ij + bias_ij - lse_i) with
                 s_ij = scale q_i . k_j (cap * tanh(s_ij / cap) where capped; lse counts the
                 sink), formed when read (``attnkit.attention.record``)
    {i}/{kind}   a formed kind: float32 (layers, heads, queries, keys) (float16 for a long input)
    {i}/p_t      local attention's predicted positions
    {i}/image    uint8 (H, W, 3): an image model's input, as the model saw it
    {i}/spectrogram  uint8 (bins, positions): a speech model's log-mel, one column per
                 encoder position holding sound
Version 1 files (formed maps only) still read.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from ..atomic import atomic_path
from ..attention import record
from ..attention.record import AttentionCall, MapView
from ..data.tokenizer import BOS, BOS_LABEL, EOS, EOS_LABEL, SPACE, WORD_START, Tokenizer, readable
from ..inference.translate import translate
from ..models.interface import ATTENTION_KINDS as KINDS
from ..models.interface import KIND_LABELS as LABELS  # noqa: F401 (the kinds' names, for the inspection modules)
from ..models.interface import EncoderModel, Seq2SeqModel
from ..search import SearchOptions
from .maps import Maps

FORMAT = "attnkit-attention"
VERSION = 3  # 3: a sliding window, a soft-cap and sinks among the rules; 2: recorded calls (q, k,
# log-sum-exp, mask rules); 1: formed maps only


class _TokenLabels:
    """Row and column labels of each attention kind, for anything holding the three token lists."""

    src_tokens: list[str]
    tgt_in_tokens: list[str]
    tgt_out_tokens: list[str]

    def queries(self, kind: str) -> list[str]:
        """Row labels of ``kind``: what each query position is (a cross-attention row: the token it predicts)."""
        return {"encoder": self.src_tokens, "decoder": self.tgt_in_tokens, "cross": self.tgt_out_tokens}[kind]

    def keys(self, kind: str) -> list[str]:
        """Column labels of ``kind``."""
        return {"encoder": self.src_tokens, "decoder": self.tgt_in_tokens, "cross": self.src_tokens}[kind]


@dataclass
class AttentionRecord(_TokenLabels):
    """The attention maps of one sentence (see the module docstring for shapes). ``maps``:
    formed arrays by kind, or ``Maps`` of recorded calls (formed only where asked)."""

    source: str
    src_tokens: list[str]
    maps: Maps
    output: str = ""
    tgt_in_tokens: list[str] = field(default_factory=list)
    tgt_out_tokens: list[str] = field(default_factory=list)
    p_t: np.ndarray | None = None
    window: int | None = None
    prompt_length: int | None = None  # a decoder-only model: the first tokens are its prompt, the rest generated
    image: np.ndarray | None = None  # an image model's input (H, W, 3) in [0, 1], as the model saw it
    grid: tuple[int, int] | None = None  # its patches (rows, columns): src_tokens[1:] row-major
    # a vision-language model: (first, rows, columns) of the image's tokens among the decoder's, row-major
    image_tokens: tuple[int, int, int] | None = None
    # a speech model: the sound as its encoder heard it, a log-mel spectrogram (bins, positions) in
    # [0, 1], one column per encoder position that holds sound (src_tokens' first; the rest pad it)
    spectrogram: np.ndarray | None = None
    frame_seconds: float | None = None  # seconds of sound per encoder position

    def __post_init__(self) -> None:
        self.maps = Maps.of(self.maps)

    @property
    def kinds(self) -> list[str]:
        return [k for k in KINDS if k in self.maps]

    def get(self, kind: str) -> np.ndarray:
        """Every layer's maps of ``kind``, formed: (layers, heads, queries, keys)."""
        self.maps.shape(kind)  # one line for a kind the model does not have
        return self.maps[kind]

    def view(self, kind: str, layer: int, head: int | str) -> MapView:
        """One (queries, keys) map as a view (exact blocks, overviews, top keys): ``head`` an
        index or "mean". Negative layers count from the top, as in Python."""
        return self.maps.view(kind, layer, head)

    def select(self, kind: str, layer: int, head: int | str) -> np.ndarray:
        """One (queries, keys) matrix, formed: ``head`` an index or "mean" (head average).
        Negative layers count from the top, as in Python."""
        view = self.view(kind, layer, head)
        return view.dense().astype(self.maps.dtype(kind)) if head != "mean" else view.dense()


def model_info(model: Seq2SeqModel | EncoderModel, cfg=None) -> dict:
    """What a viewer needs to label a model."""
    info = {"class": type(model).__name__}
    if cfg is None:
        return info
    m = cfg.model
    if m.recurrent:  # one attention over the source, positions from the recurrence: no heads, no scheme
        info.update(arch=m.arch, cell=m.rnn.cell, hidden=m.rnn.hidden, attention=m.rnn.attention, score=m.rnn.score)
        if m.local_window is not None:
            info.update(window=m.local_window)
    else:
        info.update(arch=m.arch, d_model=m.d_model, heads=m.transformer.heads, positions=m.positions)
    if cfg.data.captions:  # what reads the image, and the regions' 2-D positions (an RNN's too)
        info.update(image_encoder=m.image.encoder, positions=m.positions)
    else:  # the longest sequence per side it was trained on (longer pairs are dropped)
        info.update(max_len=cfg.data.max_len)
    return info


def model_label(info: dict) -> str:
    """A model as a figure's title names it, from ``model_info``: its name when it has one
    (an installed or pretrained model), else what it is: "Transformer (d_model 128, 4 heads,
    sinusoidal positions)", "LSTM 256 with Luong local-p attention (general score, D = 6)"; a
    captioner's image encoder first ("CNN + LSTM 128 ...")."""
    if info.get("name"):
        return str(info["name"])
    names = {"cnn": "CNN", "vit": "ViT"}  # the image encoder as papers write it
    encoder = f"{names.get(info['image_encoder'], info['image_encoder'])} + " if "image_encoder" in info else ""
    if info.get("arch") == "rnn":
        window = f", D = {info['window']}" if "window" in info else ""
        attention = f"Luong {info['attention']} attention ({info['score']} score{window})"
        return f"{encoder}{info['cell'].upper()} {info['hidden']} with {attention}"
    if info.get("arch") == "transformer":
        return f"{encoder}Transformer (d_model {info['d_model']}, {info['heads']} heads, {info['positions']} positions)"
    return str(info.get("name") or info.get("class") or "the model")


def model_title(info: dict) -> str:
    """A model's name and what it is, for a figure about the model as a whole: "multi30k-en-de-rnn,
    LSTM 256 with Luong global attention (general score)"; its name alone where that is all known."""
    what = model_label({k: v for k, v in info.items() if k != "name"})
    name = str(info.get("name") or "")
    return f"{name}, {what}" if name and what not in (name, info.get("class")) else (name or what)


def source_label(info: dict, source: str) -> str:
    """A model as a figure's title names it, given as ``source`` on the command line: ``model_label``,
    or for a run's directory (a model without a name of its own) the folder's name beside what it is:
    "demo_t5, Transformer (d_model 64, 4 heads, t5 positions)"."""
    run = Path(source)
    return model_title({**info, "name": run.name}) if not info.get("name") and run.is_dir() else model_label(info)


@torch.no_grad()
def capture_ids(
    model: Seq2SeqModel | EncoderModel,
    src_ids: list[int],
    tgt_in_ids: list[int] | None = None,
    *,
    values: bool = False,
    source: torch.Tensor | None = None,
) -> tuple[Maps, np.ndarray | None]:
    """Every attention call of one forward pass over ``src_ids`` (an image model: ``source``, its
    (1, H, W) pixels, instead) and ``tgt_in_ids`` for a seq2seq model, recorded (``values``: with
    each call's value vectors): (Maps, p_t or None). The model is put in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device) if source is None else source.to(device)
    mask = torch.ones_like(src, dtype=torch.bool)
    with record.recording(values=values) as rec:
        if tgt_in_ids is None:
            model.encode(src, mask)
        else:
            cast(Seq2SeqModel, model)(src, mask, torch.tensor([tgt_in_ids], device=device))
    calls = rec.by_kind()
    p_t = next((c.extra["p_t"] for c in calls.get("cross", []) if "p_t" in c.extra), None)
    return Maps(calls), None if p_t is None else p_t.float().cpu().numpy()


@dataclass
class Prepared(_TokenLabels):
    """One sentence ready for a forward pass: ids and their readable tokens."""

    source: str
    src_ids: list[int]  # ends in </s>
    src_tokens: list[str]
    tgt_in_ids: list[int] | None = None  # <s> y1 .. y_t-1, for a seq2seq model
    tgt_out_ids: list[int] | None = None  # y1 .. y_t (ends in </s>): what each target position predicts
    tgt_in_tokens: list[str] = field(default_factory=list)
    tgt_out_tokens: list[str] = field(default_factory=list)
    output: str = ""
    score: float | None = None  # the search's score of ``output`` (None for a forced target)
    nbest: list[tuple[str, float]] = field(default_factory=list)  # (text, score), best first, when asked for
    image: np.ndarray | None = None  # an image model's input as the model sees it: (H, W, 3) in [0, 1]
    grid: tuple[int, int] | None = None  # its patches: (rows, columns), row-major after the [CLS] token
    # a vision-language model: (first, rows, columns) of the image's tokens among the decoder's, row-major
    image_tokens: tuple[int, int, int] | None = None
    audio: np.ndarray | None = None  # a speech model's sound: samples at its rate, one channel
    spectrogram: np.ndarray | None = None  # as AttentionRecord's
    frame_seconds: float | None = None


def patch_labels(rows: int, columns: int, prefix: str = "") -> list[str]:
    """A grid's cells as tokens, row-major: "r,c" (``prefix``: "img r,c")."""
    return [f"{prefix}{r},{c}" for r in range(rows) for c in range(columns)]


def check_sentences(sentences: list[str]) -> None:
    """One line for no sentence or an empty one."""
    if not sentences or any(not s.strip() for s in sentences):
        raise ValueError("cannot show attention for an empty sentence")


def prepare(
    model: Seq2SeqModel | EncoderModel,
    tok: Tokenizer,
    sentences: list[str],
    *,
    targets: list[str] | None = None,
    options: SearchOptions | None = None,
    max_src_len: int | None = None,
) -> list[Prepared]:
    """Token ids for each sentence; a seq2seq model's target side is its own
    translation (searched with ``options``, default ``SearchOptions()``) unless ``targets``
    gives one (forced alignment)."""
    if targets is not None and len(targets) != len(sentences):
        raise ValueError(f"{len(sentences)} sentences but {len(targets)} targets")
    check_sentences(sentences)
    src_ids = [ids[:max_src_len] if max_src_len else ids for ids in tok.encode_src(sentences)]
    out = [
        Prepared(s, ids + [EOS], readable(tok.src.id_to_piece(ids)) + [EOS_LABEL]) for s, ids in zip(sentences, src_ids)
    ]
    if not isinstance(model, Seq2SeqModel):
        return out
    if targets is None:
        found = translate(model, tok, sentences, options, max_src_len=max_src_len)
        texts = [t.output for t in found]
        tgt_ids = [[tok.tgt.piece_to_id(p) for p in t.out_pieces if p != EOS_LABEL] for t in found]
        for p, t in zip(out, found):
            p.score, p.nbest = t.score, t.nbest
    else:
        texts, tgt_ids = list(targets), tok.encode_tgt(targets)
    for p, text, ids in zip(out, texts, tgt_ids):
        pieces = readable(tok.tgt_pieces(ids))
        p.tgt_in_ids = [BOS] + ids
        p.tgt_out_ids = ids + [EOS]
        p.tgt_in_tokens = [BOS_LABEL] + pieces
        p.tgt_out_tokens = pieces + [EOS_LABEL]
        p.output = text
    return out


def capture(
    model: Seq2SeqModel | EncoderModel,
    tok: Tokenizer,
    sentences: list[str],
    *,
    targets: list[str] | None = None,
    options: SearchOptions | None = None,
    max_src_len: int | None = None,
    window: int | None = None,
) -> list[AttentionRecord]:
    """Attention maps of ``model`` on each sentence (see ``prepare`` for the target side).
    ``window`` is local attention's D, kept to draw p_t's window."""
    prepared = prepare(model, tok, sentences, targets=targets, options=options, max_src_len=max_src_len)
    return [capture_prepared(model, p, window=window) for p in prepared]


def capture_prepared(model: Seq2SeqModel | EncoderModel, p: Prepared, *, window: int | None = None) -> AttentionRecord:
    """The record of one prepared sentence: every map of one forward pass over its ids."""
    maps, p_t = capture_ids(model, p.src_ids, p.tgt_in_ids)
    return AttentionRecord(
        source=p.source,
        src_tokens=p.src_tokens,
        maps=maps,
        output=p.output,
        tgt_in_tokens=p.tgt_in_tokens,
        tgt_out_tokens=p.tgt_out_tokens,
        p_t=p_t,
        window=window if p_t is not None else None,
    )


PARTS = ("q", "k", "lse", "key_mask", "mask", "bias", "sink")  # a recorded call's arrays in a file


def _save_calls(arrays: dict[str, Any], prefix: str, calls: list[AttentionCall]) -> list[dict]:
    """A factored kind's calls as arrays under ``prefix/layer/part``; their rules for the metadata."""
    rules = []
    for layer, call in enumerate(calls):  # read back by position
        for part in PARTS:
            x = getattr(call, part)
            if x is not None and not (part == "bias" and not bool(x.any())):  # T5's cross-attention: zeros
                arrays[f"{prefix}/{layer}/{part}"] = x.cpu().numpy()
        rules.append({"scale": call.scale, "causal": call.causal, "window": call.window, "cap": call.cap})
    return rules


def _load_calls(arrays: dict[str, np.ndarray], prefix: str, kind: str, rules: list[dict]) -> list[AttentionCall]:
    calls = []
    for layer, rule in enumerate(rules):
        parts: dict[str, Any] = {
            p: torch.from_numpy(arrays[f"{prefix}/{layer}/{p}"]) for p in PARTS if f"{prefix}/{layer}/{p}" in arrays
        }
        missing = [p for p in ("q", "k", "lse") if p not in parts]
        if missing:
            raise KeyError(f"{prefix}/{layer}/{missing[0]}")
        window, cap = rule.get("window"), rule.get("cap")  # absent in files written before them
        calls.append(
            AttentionCall(
                kind,
                layer,
                scale=float(rule["scale"]),
                causal=bool(rule["causal"]),
                window=None if window is None else int(window),
                cap=None if cap is None else float(cap),
                **parts,
            )
        )
    return calls


def save_records(path: str | Path, records: list[AttentionRecord], model: dict | None = None) -> Path:
    """Write records to ``path`` (.npz); see the module docstring for the layout."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"attention maps are saved as .npz, got {str(path)!r}")
    meta: dict[str, Any] = {"format": FORMAT, "version": VERSION, "model": model or {}, "examples": []}
    arrays: dict[str, Any] = {}  # arrays; Any: **arrays goes to savez, whose allow_pickle is a bool
    factored = False
    for i, r in enumerate(records):
        calls = {}
        for kind in r.kinds:
            if r.maps.factored(kind):  # q, k and the log-sum-exp: maps are formed when read
                calls[kind] = _save_calls(arrays, f"{i}/{kind}", r.maps.calls[kind])
                factored = True
            else:
                a = r.maps[kind]
                arrays[f"{i}/{kind}"] = a if a.dtype == np.float16 else a.astype(np.float32)
        meta["examples"].append(
            {
                "source": r.source,
                "output": r.output,
                "src_tokens": r.src_tokens,
                "tgt_in_tokens": r.tgt_in_tokens,
                "tgt_out_tokens": r.tgt_out_tokens,
                "window": r.window,
                "kinds": r.kinds,
                "calls": calls,
                "prompt_length": r.prompt_length,
                "grid": None if r.grid is None else list(r.grid),
                "image_tokens": None if r.image_tokens is None else list(r.image_tokens),
                "frame_seconds": r.frame_seconds,
            }
        )
        if r.spectrogram is not None:
            arrays[f"{i}/spectrogram"] = np.round(r.spectrogram * 255).astype(np.uint8)
        if r.p_t is not None:
            arrays[f"{i}/p_t"] = r.p_t.astype(np.float32)
        if r.image is not None:
            arrays[f"{i}/image"] = np.round(r.image * 255).astype(np.uint8)
    # formed maps compress well (zeros, repeats); q and k hardly at all, and a long record is large
    save = np.savez if factored else np.savez_compressed
    with atomic_path(path) as tmp:
        save(tmp, meta=np.array(json.dumps(meta, ensure_ascii=False)), **arrays)
    return path


def _shown(tokens: list[str]) -> list[str]:
    """Token labels as figures show them now: a file written when a bare word boundary was shown
    as sentencepiece's mark has it as the visible space."""
    return [SPACE if t == WORD_START else t for t in tokens]


def load_records(path: str | Path) -> tuple[list[AttentionRecord], dict]:
    """Read a file written by ``save_records`` (this version or an earlier one): (records, model info)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no attention file at {path}")
    if not zipfile.is_zipfile(path):  # an .npz is a zip archive; anything else is not one
        raise ValueError(f"{path} is not an .npz file (an attnkit attention file is one: attnkit capture writes it)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
        meta = json.loads(str(arrays.pop("meta")))
    except (zipfile.BadZipFile, KeyError, ValueError, EOFError, OSError) as err:
        reason = "no metadata" if isinstance(err, KeyError) else str(err).split(".")[0]
        raise ValueError(f"{path} is not a readable attnkit attention file ({reason})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(
            f"{path} is not an attnkit attention file (format {meta.get('format') if isinstance(meta, dict) else None!r})"
        )
    if not isinstance(meta.get("version", 0), int) or meta.get("version", 0) > VERSION:
        raise ValueError(
            f"{path} has format version {meta['version']}; this attnkit reads up to {VERSION} (a newer attnkit wrote it)"
        )
    records = []
    try:
        for i, ex in enumerate(meta["examples"]):
            rules = ex.get("calls") or {}
            calls = {k: _load_calls(arrays, f"{i}/{k}", k, rules[k]) for k in ex["kinds"] if k in rules}
            dense = {k: arrays[f"{i}/{k}"] for k in ex["kinds"] if k not in rules}
            records.append(
                AttentionRecord(
                    source=ex["source"],
                    src_tokens=_shown(ex["src_tokens"]),
                    maps=Maps(calls, dense),
                    output=ex["output"],
                    tgt_in_tokens=_shown(ex["tgt_in_tokens"]),
                    tgt_out_tokens=_shown(ex["tgt_out_tokens"]),
                    p_t=arrays.get(f"{i}/p_t"),
                    window=ex["window"],
                    prompt_length=ex.get("prompt_length"),
                    image=None if f"{i}/image" not in arrays else arrays[f"{i}/image"].astype(np.float32) / 255,
                    grid=None if ex.get("grid") is None else (int(ex["grid"][0]), int(ex["grid"][1])),
                    image_tokens=None if ex.get("image_tokens") is None else _three(ex["image_tokens"]),
                    spectrogram=None
                    if f"{i}/spectrogram" not in arrays
                    else arrays[f"{i}/spectrogram"].astype(np.float32) / 255,
                    frame_seconds=ex.get("frame_seconds"),
                )
            )
    except (KeyError, TypeError) as err:
        raise ValueError(f"{path} is an incomplete attnkit attention file (missing {err})") from None
    return records, meta.get("model", {})


def _three(values: list) -> tuple[int, int, int]:
    first, rows, columns = (int(v) for v in values)
    return first, rows, columns


def prepare_pretrained(encoder, sentences: list[str]) -> list[Prepared]:
    """Token ids of a pretrained encoder's own tokenizer ([CLS] ... [SEP]), one sentence each."""
    check_sentences(sentences)
    out = []
    for s in sentences:
        batch = encoder.encode([s], max_length=encoder.positions)  # attention is shown as far as the positions go
        out.append(Prepared(s, batch.ids[0].tolist(), batch.tokens[0]))
    return out

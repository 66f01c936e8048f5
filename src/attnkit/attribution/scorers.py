"""Scorers: a model made ready for gradient attributions on one prepared sentence (``Scorer``).

Every model runs under a ``graph`` recording (``attnkit.attention.record``): each attention
call hands over the weights it mixed the values with, in the autograd graph (an RNN decoder
each step's); models run by transformers through attnkit's attention implementation
(``HFModel.forward_graph``). The scores are the log-probabilities of the output
tokens the prepared sentence holds: its translation (or forced target), or, for a decoder-only
model, each next token; an encoder's one score is its sentence vector's length along itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import Tensor

from ..attention import record
from ..inspection.capture import Prepared, patch_labels
from ..models.interface import EncoderModel, Seq2SeqModel
from .gradients import Calls, Scorer

Out = TypeVar("Out")


def _log_probs(logits: Tensor, targets: list[int]) -> Tensor:
    """(copies, t) log-probabilities of ``targets`` under (copies, t, V) logits."""
    index = torch.tensor(targets, device=logits.device)[None, :, None].expand(logits.shape[0], -1, 1)
    return logits.float().log_softmax(-1).gather(-1, index)[..., 0]


def _traced(run: Callable[[], Out], maps: bool = True) -> tuple[Out, Calls]:
    """``run()`` (a forward pass) recorded with every attention call's weights kept in the graph:
    (its result, the calls in the order they ran, an RNN's steps under its one call); ``maps``
    false: run alone, nothing recorded (no call's weights formed), no calls."""
    if not maps:
        return run(), []
    with record.recording(graph=True, rows=[0]) as rec:  # the weights in the graph cover every copy
        out = run()
    return out, [(c.kind, c.graph or []) for c in rec.calls]


def seq2seq_scorer(model: Seq2SeqModel, prepared: Prepared, *, source: Tensor | None = None) -> Scorer:
    """attnkit's encoder-decoder on ``prepared`` (its target side: a translation or a caption);
    ``source``: an image captioner's image batch (1, H, W) instead of the source ids."""
    if prepared.tgt_in_ids is None or prepared.tgt_out_ids is None:
        raise ValueError("gradient methods explain output tokens: this sentence has no target side")
    device = next(model.parameters()).device
    src = torch.tensor([prepared.src_ids], device=device) if source is None else source.to(device)
    mask = torch.ones(src.shape, dtype=torch.bool, device=device)
    tgt = torch.tensor([prepared.tgt_in_ids], device=device)
    sites = model.attention_sites()

    def forward(copies: int, maps: bool = True) -> tuple[Tensor, Calls]:
        expand = (copies,) + (-1,) * (src.dim() - 1)
        model.eval()
        out, calls = _traced(lambda: model(src.expand(*expand), mask.expand(*expand), tgt.expand(copies, -1)), maps)
        assert out.logits is not None  # projected
        return _log_probs(out.logits, prepared.tgt_out_ids or []), calls

    return Scorer(
        rows=prepared.tgt_out_tokens,
        cols=prepared.src_tokens,
        structure="recurrent" if all(site.kind == "cross" for site in sites) else "seq2seq",
        embedding=model.input_embedding(),
        forward=forward,
    )


SENTENCE_ROW = "sentence vector"  # an encoder's one output: the mean of its top layer


def _sentence_score(top: Tensor, direction: Tensor | None) -> Tensor:
    """(copies, 1): the mean of the top layer (copies, s, d) along ``direction`` (the input's own
    mean vector, made unit length): the length of the sentence vector, with a gradient that does
    not vanish under a final LayerNorm (whose outputs' lengths are nearly fixed)."""
    pooled = top.float().mean(1)
    if direction is None:
        direction = pooled[0].detach()
    return (pooled @ (direction / direction.norm().clamp_min(1e-12)))[:, None]


def encoder_scorer(model: EncoderModel, prepared: Prepared) -> Scorer:
    """attnkit's encoder (a BERT encoder included) on ``prepared``: its sentence vector (the mean
    of the top layer, as sentence-transformers pools it) over the input tokens."""
    device = next(model.parameters()).device
    src = torch.tensor([prepared.src_ids], device=device)
    mask = torch.ones_like(src, dtype=torch.bool)
    with torch.no_grad():
        direction = model.encode(src, mask).memory.float().mean(1)[0]

    def forward(copies: int, maps: bool = True) -> tuple[Tensor, Calls]:
        model.eval()
        out, calls = _traced(lambda: model.encode(src.expand(copies, -1), mask.expand(copies, -1)), maps)
        return _sentence_score(out.memory, direction), calls

    return Scorer([SENTENCE_ROW], prepared.src_tokens, "self", model.input_embedding(), forward, pooled=True)


def transformers_encoder_scorer(hf: Any, prepared: Prepared) -> Scorer:
    """A text encoder run by transformers (``HFModel``): its sentence vector (the mean of its
    top layer) over its tokens."""
    with torch.no_grad():
        _, clean = hf.forward(prepared.src_ids)
    direction = clean.last_hidden_state.float().mean(1)[0]

    def forward(copies: int, maps: bool = True) -> tuple[Tensor, Calls]:
        rec, out = hf.forward_graph(prepared.src_ids, copies=copies, maps=maps)
        return _sentence_score(out.last_hidden_state, direction), [(c.kind, c.graph or []) for c in rec.calls]

    return Scorer([SENTENCE_ROW], prepared.src_tokens, "self", hf.source_embedding(), forward, pooled=True)


def transformers_image_scorer(hf: Any, prepared: Prepared) -> Scorer:
    """An image encoder run by transformers (ViT): its image vector (the mean of its top layer)
    over [CLS] and the patches: what ablation measures on it (``heads.ablation``)."""
    if prepared.image is None:
        raise ValueError("an image encoder's input is an image: prepare it with prepare_image")
    pixels = hf.pixels(prepared.image)
    with torch.no_grad():
        _, clean = hf.forward(pixels=pixels)
    direction = clean.last_hidden_state.float().mean(1)[0]

    def forward(copies: int, maps: bool = True) -> tuple[Tensor, Calls]:
        rec, out = hf.forward_graph(None, pixels=pixels, copies=copies, maps=maps)
        return _sentence_score(out.last_hidden_state, direction), [(c.kind, c.graph or []) for c in rec.calls]

    return Scorer([SENTENCE_ROW], prepared.src_tokens, "self", hf.source_embedding(), forward, pooled=True)


def transformers_decoder_scorer(hf: Any, prepared: Prepared) -> Scorer:
    """A decoder-only model run by transformers: each next token over the tokens before it."""
    seq = _output_side(prepared)[0]
    if len(seq) < 2:
        raise ValueError("a decoder-only model's attribution explains each next token: give at least two tokens")

    def forward(copies: int, maps: bool = True) -> tuple[Tensor, Calls]:
        rec, out = hf.forward_graph(seq, copies=copies, maps=maps)
        return _log_probs(out.logits[:, :-1], seq[1:]), [(c.kind, c.graph or []) for c in rec.calls]

    return Scorer(prepared.tgt_in_tokens[1:], prepared.tgt_in_tokens, "self", hf.source_embedding(), forward)


def transformers_seq2seq_scorer(hf: Any, prepared: Prepared) -> Scorer:
    """An encoder-decoder run by transformers: its target tokens over its source."""
    seq, out_ids = _output_side(prepared)

    def forward(copies: int, maps: bool = True) -> tuple[Tensor, Calls]:
        rec, out = hf.forward_graph(prepared.src_ids, seq, copies=copies, maps=maps)
        return _log_probs(out.logits, out_ids), [(c.kind, c.graph or []) for c in rec.calls]

    return Scorer(prepared.tgt_out_tokens, prepared.src_tokens, "seq2seq", hf.source_embedding(), forward)


def _output_side(prepared: Prepared) -> tuple[list[int], list[int]]:
    if prepared.tgt_in_ids is None or prepared.tgt_out_ids is None:
        raise ValueError("gradient methods explain output tokens: this input has no output side")
    return prepared.tgt_in_ids, prepared.tgt_out_ids


def caption_scorer(model: Seq2SeqModel, image: Tensor, words: list[str], word_ids: list[int]) -> Scorer:
    """An image captioner on ``image`` (H, W) greyscale in [0, 1] and its caption: each word (and
    the end of the caption) over the image's regions, row-major ("row,column")."""
    from ..data.tokenizer import BOS, EOS

    rows, columns = model.region_grid(*image.shape)  # type: ignore[attr-defined]
    prepared = Prepared(
        "image",
        [],
        patch_labels(rows, columns),
        tgt_in_ids=[BOS] + word_ids,
        tgt_out_ids=word_ids + [EOS],
        tgt_out_tokens=words + ["</s>"],
    )
    return seq2seq_scorer(model, prepared, source=image[None].float())

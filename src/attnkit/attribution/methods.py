"""The methods by name, over a captured record (and, for value-norm and the gradient methods, the
model that made it): what `attnkit attribute` and the studio run.

Three sides can be explained:

    output    a translator's (or captioner's) output tokens over the source tokens; a decoder-only
              model's next tokens over the tokens before them
    encoder   each top-layer position of an encoder over the input tokens (encoder self-attention)
    sentence  an encoder model's sentence vector (the mean of its top layer) over the input tokens:
              the encoder side's rows averaged, or its gradients (``scorers.encoder_scorer``)

    method                 output side                                   encoder side
    attention              last layer's cross-attention (self-attention  last layer, mean of heads
                           for a decoder-only model), mean of heads
    rollout                Chefer et al.'s rules without gradients       Abnar & Zuidema's rollout
                           (a decoder-only model: Abnar & Zuidema's)
    flow                   a decoder-only model only                     Abnar & Zuidema's flow
    value-norm             last cross-attention layer (decoder-only:     last layer
                           its last self-attention layer)
    grad-attention, integrated-gradients, input-x-gradient               (explain an output: none)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from ..inspection.capture import AttentionRecord, Prepared, capture_ids
from ..models.interface import EncoderModel, Seq2SeqModel
from .flow import attention_flow
from .gradients import GRADIENT_METHODS, Scorer, attention_relevance, normalise_rows
from .names import ALL_METHODS, CAPTION_METHODS, LABELS, MAP_METHODS
from .rollout import raw_attention, rollout
from .scorers import SENTENCE_ROW
from .value_norm import call_value_norms, value_norm_scores


class Attributable(Protocol):
    """What attribution takes of a loaded model (``attnkit.loaded.LoadedModel`` is one)."""

    @property
    def capabilities(self) -> Any: ...  # ``attnkit.loaded.Capabilities``: .by_side, .summary

    def capture(self, prepared: Prepared) -> AttentionRecord: ...

    def value_norms(self, prepared: Prepared, kind: str = "encoder") -> np.ndarray: ...

    def scorer(self, prepared: Prepared) -> Scorer: ...


# name -> (self-attention maps (layers, heads, s, s) -> (s, s) scores), what it is
METHODS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    name: (fn, MAP_METHODS[name])
    for name, fn in (("attention", raw_attention), ("rollout", rollout), ("flow", attention_flow))
}
SIDES = ("output", "encoder", "sentence")


@dataclass
class Attribution:
    """Scores of one sentence: {method: (rows, cols)} with each row summing to 1 (or all zero)."""

    side: str
    rows: list[str]  # the output tokens, or the encoder's top-layer positions
    cols: list[str]  # the input tokens (or image regions)
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    heads: int = 0  # heads of the attention that raw attention reads (0: not said)
    layers: int = 0  # and its layers
    cross: bool = False  # an encoder-decoder's output side: rollout follows Chefer et al.'s rules across the two

    def label(self, method: str) -> str:
        """What a figure calls ``method``'s scores: one head's attention is no mean of heads, and
        one attention layer no last layer."""
        if method == "attention" and self.heads == 1:
            return (
                "raw attention (the single attention)" if self.layers == 1 else "raw attention, last layer (one head)"
            )
        if method == "rollout" and self.cross:  # through the encoder and the decoder: Chefer et al.'s rules
            return "attention rollout (Abnar & Zuidema 2020; encoder-decoder rules of Chefer et al. 2021)"
        return LABELS[method]

    @property
    def row_label(self) -> str:
        return {"output": "output token", "encoder": "top-layer position", "sentence": ""}[self.side]


def decoder_only(record: AttentionRecord) -> bool:
    return record.prompt_length is not None


def sides(record: AttentionRecord) -> list[str]:
    """The sides ``record``'s model can explain, the default first."""
    return sides_of(record.kinds, decoder_only=decoder_only(record))


def sides_of(kinds: Sequence[str], *, decoder_only: bool = False) -> list[str]:
    """The sides a model whose attention ``kinds`` are these can explain, the default first
    (``decoder_only``: a language model, whose decoder self-attention is over its own output)."""
    if "cross" in kinds or decoder_only:
        return ["output"] + (["encoder"] if "encoder" in kinds else [])
    return ["encoder", "sentence"] if "encoder" in kinds else []


def applicable(record: AttentionRecord, side: str, *, with_model: bool) -> list[str]:
    """Every method that explains ``side`` of ``record``'s model (``with_model``: the model is at
    hand, not only its saved maps): what ``all`` runs."""
    return applicable_to(record.kinds, side, with_model=with_model, decoder_only=decoder_only(record))


def applicable_to(kinds: Sequence[str], side: str, *, with_model: bool, decoder_only: bool = False) -> list[str]:
    """``applicable`` for a model whose attention ``kinds`` are these."""
    if side == "encoder":
        return [*METHODS, "value-norm"] if with_model else list(METHODS)
    if side == "sentence":
        return [*METHODS, "value-norm", *GRADIENT_METHODS] if with_model else list(METHODS)
    stacked = decoder_only or "encoder" in kinds  # layers of multi-head attention
    out = ["attention"] + (["rollout"] if stacked else []) + (["flow"] if decoder_only else [])
    if with_model:
        out += (["value-norm"] if stacked else []) + list(GRADIENT_METHODS)
    return out


def value_norm_kind(record: AttentionRecord, side: str) -> str:
    """The attention kind whose value vectors value-norm weighs on ``side``."""
    if side in ("encoder", "sentence"):
        return "encoder"
    return "decoder" if decoder_only(record) else "cross"


def value_norms_of(model: Seq2SeqModel | EncoderModel, prepared: Prepared, kind: str = "encoder") -> np.ndarray:
    """(layers, q, k): || sum_h a^h_ij f^h(x_j) || of every attention layer of ``kind``
    (``value_norm``), from one forward pass over ``prepared`` recorded with its values. Each
    layer's attention says its output projection W_O (``output_projection()``)."""
    maps, _ = capture_ids(model, prepared.src_ids, prepared.tgt_in_ids, values=True)
    calls = maps.calls.get(kind, [])
    if not calls or not all(c.v is not None and hasattr(c.module, "output_projection") for c in calls):
        what = "missing" if not calls else f"{type(calls[0].module).__name__}, which has no value vectors"
        raise ValueError(
            f"value-norm weighs the value vectors of multi-head attention; this model's {kind} attention is "
            f"{what} (use attention or a gradient method)"
        )
    return np.stack([call_value_norms(c, c.module.output_projection()[0]).numpy() for c in calls])


def encoder_value_norms(model: Seq2SeqModel | EncoderModel, prepared: Prepared) -> np.ndarray:
    """(layers, s, s) value-norms of every encoder self-attention layer."""
    return value_norms_of(model, prepared, "encoder")


def _run_order(record: AttentionRecord) -> list[tuple[str, np.ndarray]]:
    """An encoder-decoder's (kind, (heads, q, k)) maps in the order its layers run."""
    out = [("encoder", m) for m in record.maps.get("encoder", [])]
    for dec, cross in zip(record.maps.get("decoder", []), record.maps["cross"]):
        out += [("decoder", dec), ("cross", cross)]
    return out


def _output_side(record: AttentionRecord, method: str, value_norms: np.ndarray | None) -> np.ndarray:
    """(output tokens, input tokens) of an attention-based method."""
    if decoder_only(record):
        maps = record.maps["decoder"].astype(np.float32)
        full = value_norm_scores(cast(np.ndarray, value_norms)) if method == "value-norm" else METHODS[method][0](maps)
        return full[:-1]  # the last position predicts a token the record does not have
    cross = record.maps["cross"].astype(np.float64)
    if method == "attention":
        return normalise_rows(cross[-1].mean(0))
    if method == "value-norm":
        return value_norm_scores(cast(np.ndarray, value_norms))
    if method == "flow":
        raise ValueError(
            "flow follows a stack of self-attention layers: an encoder-decoder's output side has attention, "
            "rollout, value-norm and the gradient methods"
            + ("; flow is shown on its encoder side (--rows encoder)" if "encoder" in record.maps else "")
        )
    if "encoder" not in record.maps:
        raise ValueError(
            "rollout follows layers of attention; this model has one attention over its source "
            "(use attention or a gradient method)"
        )
    return attention_relevance(_run_order(record), "seq2seq")


def axes(record: AttentionRecord, side: str) -> tuple[list[str], list[str]]:
    """(row labels, column labels) of ``side``."""
    if side == "encoder":
        return record.src_tokens, record.src_tokens
    if side == "sentence":
        return [SENTENCE_ROW], record.src_tokens
    if decoder_only(record):
        return record.tgt_in_tokens[1:], record.tgt_in_tokens
    return record.tgt_out_tokens, record.src_tokens


def check(record: AttentionRecord, methods: list[str], side: str | None) -> str:
    """The side to explain (``side``, or the default), after one-line checks of the methods."""
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r} (valid: {', '.join(ALL_METHODS)})")
    have = sides(record)
    if not have:
        raise ValueError(
            "this model has neither an output over its input nor encoder self-attention to attribute "
            f"(it has: {', '.join(record.kinds)})"
        )
    side = side or have[0]
    if side not in SIDES:
        raise ValueError(f"unknown side {side!r} (valid: {', '.join(SIDES)})")
    if side not in have:
        if side == "sentence":
            raise ValueError("the sentence side is an encoder model's (its sentence vector); this model has an output")
        if side == "encoder":
            raise ValueError(
                "this model has no encoder self-attention (an RNN's encoder is recurrent): rollout and flow "
                "follow a stack of self-attention layers"
            )
        raise ValueError(
            "this model is an encoder: it has no output tokens to explain (use --rows encoder or sentence)"
        )
    gradient = [m for m in methods if m in GRADIENT_METHODS]
    if gradient and side == "encoder":
        raise ValueError(
            f"{gradient[0]} explains an output (a token, an encoder's sentence vector): it has no scores per "
            f"encoder position (use --rows {have[0] if have[0] != 'encoder' else 'sentence'})"
        )
    return side


def attribute(
    record: AttentionRecord,
    methods: list[str],
    *,
    side: str | None = None,
    value_norms: np.ndarray | None = None,
    scorer: Scorer | None = None,
    done: Callable[[str], None] | None = None,
) -> Attribution:
    """Every method's scores on ``side`` (default: the output side where the model has one).
    value-norm takes the model's (layers, q, k) ``value_norms`` (``LoadedModel.value_norms``), the
    gradient methods its ``Scorer`` (``LoadedModel.scorer``); ``done(method)`` is called as each
    method's scores are ready (a progress bar)."""
    side = check(record, methods, side)
    rows, cols = axes(record, side)
    read = "encoder" if side != "output" else "decoder" if decoder_only(record) else "cross"
    shape = record.maps.shape(read) if read in record.maps else (0, 0)
    out = Attribution(side, rows, cols, heads=shape[1], layers=shape[0], cross=read == "cross")
    for m in methods:
        if m == "value-norm" and value_norms is None:
            raise ValueError("value-norm needs the model's value vectors: give a model, not a saved .npz")
        if m in GRADIENT_METHODS:
            if scorer is None:
                raise ValueError(f"{m} needs the model's gradients: give a model, not a saved .npz")
            out.scores[m] = GRADIENT_METHODS[m][0](scorer)
        elif side == "output":
            out.scores[m] = _output_side(record, m, value_norms)
        else:
            if m == "value-norm":
                positions = value_norm_scores(cast(np.ndarray, value_norms))
            else:
                positions = METHODS[m][0](record.maps["encoder"].astype(np.float32))
            # the sentence vector is the positions' mean: so is what it draws from
            out.scores[m] = positions.mean(0, keepdims=True) if side == "sentence" else positions
        if done is not None:
            done(m)
    for m, scores in out.scores.items():
        if scores.shape != (len(rows), len(cols)):
            raise ValueError(f"{m}: {scores.shape} scores for {len(rows)} x {len(cols)} tokens")
    return out


def attribute_caption(
    model: Seq2SeqModel, image: np.ndarray, words: list[str], word_ids: list[int], methods: list[str]
) -> Attribution:
    """Where each word of an image captioner's caption of ``image`` ((H, W) greyscale in [0, 1])
    draws from: rows the words and the end of the caption, columns the regions row-major. Raw
    attention is the last layer's cross-attention, mean of heads."""
    import torch

    from .scorers import caption_scorer

    bad = [m for m in methods if m not in CAPTION_METHODS]
    if bad:
        raise ValueError(
            f"{bad[0]} is not shown for a captioner: its image encoder has no stack of self-attention over "
            f"the words (valid: {', '.join(CAPTION_METHODS)})"
        )
    scorer = caption_scorer(model, torch.as_tensor(image), words, word_ids)
    out = Attribution("output", scorer.rows, scorer.cols)
    for m in methods:
        if m == "attention":
            with torch.no_grad():
                _, calls = scorer.forward(1)
            layers = [taps for kind, taps in calls if kind == "cross"]
            cross = layers[-1]
            out.layers = len(layers)
            full = torch.cat([t.spread(t.weights) for t in cross], dim=-2)
            weights = full[0] if full.dim() == 3 else full[0].mean(0)  # (t, s): one head, or the heads' mean
            out.heads = 1 if full.dim() == 3 else int(full.shape[1])
            out.scores[m] = normalise_rows(weights.double().numpy())
        else:
            out.scores[m] = GRADIENT_METHODS[m][0](scorer)
    return out


def attribute_model(
    model: Attributable,
    prepared: Prepared,
    methods: list[str],
    *,
    side: str | None = None,
    done: Callable[[str], None] | None = None,
) -> Attribution:
    """``attribute`` on one prepared sentence of a loaded model: its maps, value vectors and
    gradients (``done``: as ``attribute``'s)."""
    can = model.capabilities
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r} (valid: {', '.join(ALL_METHODS)})")
    record = model.capture(prepared)
    side = check(record, methods, side)
    here = can.by_side.get(side, ())
    refused = [m for m in methods if m not in here]
    if refused:
        if refused[0] in METHODS:
            attribute(record, refused[:1], side=side)  # the maps' own reason, where they give one
        elsewhere = [s for s, runs in can.by_side.items() if refused[0] in runs]
        where = f"; it explains the {elsewhere[0]} side (side={elsewhere[0]!r})" if elsewhere else ""
        on = can.a if len(can.by_side) == 1 else f"{can.a}'s {side} side"
        raise ValueError(f"{refused[0]} is not run on {on} (it takes: {', '.join(here)}){where}")
    norms = model.value_norms(prepared, value_norm_kind(record, side)) if "value-norm" in methods else None
    scorer = model.scorer(prepared) if any(m in GRADIENT_METHODS for m in methods) else None
    return attribute(record, methods, side=side, value_norms=norms, scorer=scorer, done=done)

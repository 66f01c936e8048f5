"""Figures of captured attention: one map of a record, or every layer and head of it."""

from __future__ import annotations

from pathlib import Path

from .capture import LABELS, AttentionRecord


def record_figure(
    record: AttentionRecord, *, kind: str | None = None, layer: int = -1, head: int | str = "mean", model: str = ""
):
    """A matplotlib Figure of ``record``'s ``kind`` attention (default: cross-attention when the
    model has it): one (layer, head) map, the head average (``head="mean"``) with local
    attention's p_t and window, or the grid of every layer and head (``head="all"``). ``model``:
    the model's name for the title (``capture.model_label``)."""
    from ..plots import plot_alignment, plot_attention_grid

    within = record.image_tokens is not None  # a vision-language model: the image among its decoder's tokens
    kind = kind or ("decoder" if within else "cross" if "cross" in record.maps else record.kinds[0])
    if within and kind == "decoder" and head != "all":
        return image_token_figure(record, layer=layer, head=head, model=model)
    if record.spectrogram is not None and kind == "cross" and head != "all":
        return audio_figure(record, layer=layer, head=head, model=model)
    if record.image is not None and record.grid is not None and head != "all" and not within:
        if kind == "cross":  # a captioner: each word over the image's regions
            return region_figure(record, layer=layer, head=head, model=model)
        return patch_figure(record, head=head, model=model)
    q, k = record.queries(kind), record.keys(kind)
    source = record.source if len(record.source) <= 150 else record.source[:149] + "…"  # wrapped to the figure
    name = f"{model}\n{LABELS[kind]}: {source}" if model else f"{LABELS[kind]}: {source}"
    if head == "all":
        return plot_attention_grid(record.get(kind), q, k, title=name)
    w = record.select(kind, layer, head)
    layers, heads = record.get(kind).shape[:2]
    which = f"head {head}" if head != "mean" else "mean of its heads" if heads > 1 else "one attention (no heads)"
    cross = kind == "cross"
    show_pt = cross and record.p_t is not None
    return plot_alignment(
        w,
        k,
        q,
        title=f"{name}\n{layer_name(layer, layers)}, {which}",
        p_t=record.p_t if show_pt else None,
        window=record.window if show_pt else None,
        xlabel="source" if cross else "key",
        ylabel="output" if cross else "query",
    )


def layer_name(layer: int, layers: int) -> str:
    """``layer`` (negative: from the end) of ``layers`` as a title names it: "layer 3 (the last)"."""
    index = layer % layers
    return f"layer {index}" + (" (the last)" if layers > 1 and index == layers - 1 else "")


def patch_figure(record: AttentionRecord, *, head: int | str = "mean", model: str = ""):
    """An image model's [CLS] token's attention over the patches at every layer, laid over
    the grid of the image (``head``: one head, or "mean" of the heads)."""
    from ..plots.images import plot_patch_attention

    assert record.image is not None and record.grid is not None  # an image record
    maps = record.get("encoder")
    rows, columns = record.grid
    which = f"head {head}" if head != "mean" else "mean of heads" if maps.shape[1] > 1 else "one attention (no heads)"
    panels = [
        (f"layer {layer}", record.select("encoder", layer, head)[0, 1:].reshape(rows, columns))
        for layer in range(maps.shape[0])
    ]
    name = Path(record.source).name
    h, w = record.image.shape[:2]
    title = (
        f"{model + ': ' if model else ''}[CLS]'s attention over the {rows} x {columns} patches of {name} "
        f"(as the model saw it, {w} x {h} px), {which}; its weight on itself is not shown"
    )
    return plot_patch_attention(record.image, panels, title=title, uniform=1 / (rows * columns + 1))


def region_figure(record: AttentionRecord, *, layer: int = -1, head: int | str = "mean", model: str = ""):
    """A captioner's words, each with its cross-attention over the image's regions (``layer``,
    ``head``: one head, or "mean" of the heads), the end of the caption left out."""
    from ..plots.images import plot_caption

    assert record.image is not None and record.grid is not None  # an image record
    words = record.tgt_out_tokens[:-1]
    weights = record.select("cross", layer, head)[: len(words)].reshape(len(words), *record.grid)
    layers, heads = record.maps.shape("cross")[:2]
    which = f"head {head}" if head != "mean" else "mean of heads" if heads > 1 else "one attention (no heads)"
    title = f"{model + ': ' if model else ''}“{record.output}” ({layer_name(layer, layers)}, {which})"
    return plot_caption(record.image, words, weights, title=title)


def image_token_figure(record: AttentionRecord, *, layer: int = -1, head: int | str = "mean", model: str = ""):
    """A vision-language model's words after its image, each with its decoder self-attention over
    the image's tokens laid on the image (``layer``, ``head``: one head, or "mean" of the heads), on
    one scale from 0 to the largest of those weights (the rest of each row is on the text)."""
    from ..plots.images import plot_caption

    assert record.image is not None and record.image_tokens is not None  # a vision-language record
    first, rows, columns = record.image_tokens
    after = first + rows * columns
    words = record.tgt_in_tokens[after:]
    if not words:
        raise ValueError("no word follows the image: give text after it, or let the model write (max_new_tokens)")
    weights = record.select("decoder", layer, head)[after:, first:after].reshape(len(words), rows, columns)
    layers, heads = record.maps.shape("decoder")[:2]
    which = f"head {head}" if head != "mean" else "mean of heads" if heads > 1 else "one attention (no heads)"
    top = float(weights.max()) or 1.0
    title = (
        f"{model + ': ' if model else ''}each word's attention over the image's {rows} x {columns} tokens "
        f"({layer_name(layer, layers)}, {which}; scale 0 to {top:.3g}, the largest)"
    )
    return plot_caption(record.image, words, weights, title=title, vmax=top, ink=False)


def audio_figure(record: AttentionRecord, *, layer: int = -1, head: int | str = "mean", model: str = ""):
    """A speech model's output tokens, each with its cross-attention over the encoder's positions
    that hold sound, under the spectrogram the encoder heard (``layer``, ``head``: one head, or
    "mean" of the heads), on one scale from 0 to the largest weight drawn; each row's weight on
    the padding after the sound is written beside it."""
    from ..plots.audio import plot_audio_alignment

    assert record.spectrogram is not None and record.frame_seconds is not None  # a speech record
    heard = record.spectrogram.shape[1]
    weights = record.select("cross", layer, head)
    layers, heads = record.maps.shape("cross")[:2]
    which = f"head {head}" if head != "mean" else "mean of heads" if heads > 1 else "one attention (no heads)"
    total = weights.shape[1] * record.frame_seconds
    title = (
        f"{model + ': ' if model else ''}each output token's cross-attention over {Path(record.source).name}\n"
        f"{heard * record.frame_seconds:.2f} s of sound, padded to {total:g} s; {layer_name(layer, layers)}, {which}\n"
        f"“{record.output}”"
    )
    return plot_audio_alignment(
        record.spectrogram,
        record.tgt_out_tokens,
        weights[:, :heard],
        seconds=record.frame_seconds,
        padding=weights[:, heard:].sum(axis=1).tolist(),
        title=title,
    )

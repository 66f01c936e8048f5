"""The size figures are drawn for (a docs column), and token labels that read right on both axes."""

from __future__ import annotations

from matplotlib.transforms import blended_transform_factory, offset_copy

from ..data.tokenizer import SPACE

WIDTH = 8.5  # inches: 1,105 pixels at the 130 dpi figures are saved at


def upright_spaces(ax) -> None:
    """Draw a bare word boundary (▁) upright among turned key labels: turned, it reads as a bar.
    Its tick keeps no text (a tick label's rotation is the axis's); the mark is written under it."""
    labels = ax.get_xticklabels()
    texts = [label.get_text() for label in labels]
    if SPACE not in texts:
        return
    first = labels[0]
    size = first.get_fontsize()
    ticks = ax.get_xticks()
    ax.set_xticks(
        ticks,
        ["" if t == SPACE else t for t in texts],
        rotation=first.get_rotation(),
        ha=first.get_ha(),
        rotation_mode=first.get_rotation_mode(),
        fontsize=size,
    )
    under = offset_copy(blended_transform_factory(ax.transData, ax.transAxes), fig=ax.figure, y=-6, units="points")
    for x, t in zip(ticks, texts):
        if t == SPACE:
            ax.text(x, 0, SPACE, transform=under, ha="center", va="top", fontsize=size)

"""The size figures are drawn for (a docs column), and token labels that read right on both axes."""

from __future__ import annotations

import re

from matplotlib.textpath import TextPath
from matplotlib.transforms import blended_transform_factory, offset_copy

from ..data.tokenizer import SPACE

WIDTH = 8.5  # inches: 1,105 pixels at the 130 dpi figures are saved at


# every cosine map on the cosine's own range, -1 to 1, diverging at 0: figures compare
COSINE = {"cmap": "RdBu_r", "vmin": -1.0, "vmax": 1.0}

SPACE_COLOUR = "#6b7280"  # a bare word boundary in grey, set apart from the tokens' text


def upright_spaces(ax, *, top: bool = False) -> None:
    """Draw a bare word boundary (␣) upright among turned key labels, and in grey on both axes:
    turned, the open box reads as a bracket; and a lone mark that turned reads as another (a comma
    as a backtick, an apostrophe as a hyphen) or is hardly seen (a full stop) upright in a small box,
    in its label's colour. Its x
    tick keeps no text (a tick label's rotation is the axis's) but keeps its tick mark; the glyph is
    written under the mark (``top``: over it, the key labels being above the axes)."""
    _upright_y(ax)
    labels = ax.get_xticklabels()
    texts = [label.get_text() for label in labels]
    if not any(map(_upright, texts)):
        return
    first = labels[0]
    size = first.get_fontsize()
    colours = [label.get_color() for label in labels]
    ticks = ax.get_xticks()
    ax.set_xticks(
        ticks,
        ["" if _upright(t) else t for t in texts],
        rotation=first.get_rotation(),
        ha=first.get_ha(),
        rotation_mode=first.get_rotation_mode(),
        fontsize=size,
    )
    at = offset_copy(
        blended_transform_factory(ax.transData, ax.transAxes), fig=ax.figure, y=6 if top else -6, units="points"
    )
    for x, t, colour in zip(ticks, texts, colours):
        if t == SPACE:
            ax.text(x, 1 if top else 0, SPACE, transform=at, ha="center", va="bottom" if top else "top",
                    fontsize=size * 1.5, color=SPACE_COLOUR)  # fmt: skip
        elif _upright(t):  # boxed: bare, a comma or apostrophe under a tick could pass for a mark of the axis
            ax.text(x, 1 if top else 0, t, transform=at, ha="center", va="bottom" if top else "top",
                    fontsize=size * 1.2, color=colour, fontweight="bold",
                    bbox={"boxstyle": "round,pad=0.2", "fc": "none", "ec": SPACE_COLOUR, "lw": 0.6})  # fmt: skip


# marks that, turned, read as another (a comma as a backtick) or hardly read at all (a full stop, a dot
# beside its tick)
TURNED_AMISS = set(",.;:'`\"‘’‚“”„-‐–—|")


def _upright(label: str) -> bool:
    """A key label drawn upright among turned ones: the word boundary, or a lone mark that turned
    would read as another or hardly be seen."""
    return label == SPACE or label in TURNED_AMISS


def _upright_y(ax) -> None:
    """A bare word boundary among the y labels: half as large again (the glyph is small in its font),
    grey, and centred on its tick by its ink (a tick label centres its line, so the glyph, which
    sits on the baseline, would read low); a lone mark boxed, as on the x axis."""
    labels = ax.get_yticklabels()
    texts = [label.get_text() for label in labels]
    if not any(map(_upright, texts)):
        return
    size = labels[0].get_fontsize()
    colours = [label.get_color() for label in labels]
    ticks = ax.get_yticks()
    ax.set_yticks(ticks, ["" if _upright(t) else t for t in texts], fontsize=size)
    tick = ax.yaxis.get_major_ticks()[0]
    left = -(tick.get_tick_padding() + tick.get_pad())  # where the labels end, in points from the axes
    ink = TextPath((0, 0), SPACE, size=size * 1.5).get_extents()  # about the baseline, in points
    at = offset_copy(
        blended_transform_factory(ax.transAxes, ax.transData),
        fig=ax.figure,
        x=left,
        y=-(ink.y0 + ink.y1) / 2,  # the ink's middle on the tick
        units="points",
    )
    boxed = offset_copy(blended_transform_factory(ax.transAxes, ax.transData), fig=ax.figure, x=left, units="points")
    for y, t, colour in zip(ticks, texts, colours):
        if t == SPACE:
            ax.text(0, y, SPACE, transform=at, ha="right", va="baseline", fontsize=size * 1.5, color=SPACE_COLOUR)
        elif _upright(t):  # a lone mark, boxed as on the x axis: a bare "." or "," is hardly seen
            ax.text(0, y, t, transform=boxed, ha="right", va="center", fontsize=size * 1.1, color=colour,
                    fontweight="bold", bbox={"boxstyle": "round,pad=0.1", "fc": "none", "ec": SPACE_COLOUR, "lw": 0.6})  # fmt: skip


def end_ticks(bar, top: float) -> None:
    """A colour bar from 0 to ``top`` with ``top`` itself among its ticks, so that its end is read off."""
    from matplotlib.ticker import MaxNLocator

    inner = [t for t in MaxNLocator(4).tick_values(0, top) if 0 <= t < 0.85 * top]
    bar.set_ticks([*inner, top], labels=[f"{t:g}" for t in inner] + [f"{top:.2f}"])


def fit_height(fig, margin: float = 0.1) -> None:
    """Take out the blank bands above and below a figure's content (its width stays a docs
    column): panels that keep their aspect (square heatmap cells) are as wide as the column lets
    them be, and no estimate of their height is exact. Laid out and measured twice, as the
    layout moves a little with the height."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # a Figure outside pyplot has no canvas to lay it out: this one
    for _ in range(2):
        canvas.draw()  # the layout, done
        drawn = fig.get_tightbbox(canvas.get_renderer()).height  # inches
        if fig.get_figheight() - drawn < 2 * margin:
            return
        fig.set_figheight(drawn + margin)


_SYMBOLS = {  # plain-text maths, as attnkit's formulas write it, in matplotlib's mathtext
    "h̄": r"\bar{\mathbf{h}}", "ᵀ": r"^{\top}", "⊙": r"\odot", "·": r"\cdot", "±": r"\pm", "Σ": r"\sum",
    "tanh": r"\tanh", "√": r"\sqrt", ";": r";\,",
}  # fmt: skip
_MATH = re.compile(r"h̄|ᵀ|⊙|·|±|Σ|tanh|√|;|(?<![A-Za-z])[a-zA-Z](?![A-Za-z])|\d+|[A-Za-z]+|.", re.S)
VECTORS = set("qkvzhc")  # the letters that name vectors (bold), as the articles set them


def math(formula: str) -> str:
    """A formula written in plain text ("q ⊙ k_j / √32", "c_t = Σ_s a_s h̄_s", "(W_aᵀ q) ⊙ k") set
    as maths: vectors bold, indices as subscripts, operators as symbols."""
    out: list[str] = []
    for token in _MATH.findall(formula):
        if out and out[-1] == r"\sqrt":  # √32, √d: the root over what follows
            out.append(f"{{{token}}}")
        elif token in _SYMBOLS:
            out.append(_SYMBOLS[token])
        elif len(token) == 1 and token in VECTORS and not (out and out[-1] == "_"):  # d_k: k an index
            out.append(rf"\mathbf{{{token}}}")
        elif token == " ":
            out.append(" ")
        elif token in "$\\{}#%&~^":
            out.append("\\" + token)
        else:
            out.append(token)
    return "$" + "".join(out) + "$"


def plain(text: str) -> str:
    """Text shown beside mathtext in one label, with its dollar signs kept literal."""
    return text.replace("$", r"\$")


def wrap_math(text: str, width: int) -> str:
    """``textwrap.fill`` for text with mathtext in it: each $...$ is one word as wide as what it
    shows, never broken across lines."""
    import textwrap

    chunks = re.findall(r"\$[^$]*\$", text)
    for i, chunk in enumerate(chunks):  # a run of one private-use character, as long as the chunk shows
        shown = re.sub(r"\\[a-zA-Z]+", "x", chunk)
        text = text.replace(chunk, chr(0xE000 + i) * max(1, len(re.sub(r"[{}_^$ ]", "", shown))), 1)
    text = textwrap.fill(text, width)
    for i, chunk in enumerate(chunks):
        start = text.index(chr(0xE000 + i))
        end = len(text) - len(text[start:].lstrip(chr(0xE000 + i)))
        text = text[:start] + chunk + text[end:]
    return text

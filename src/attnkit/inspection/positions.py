"""The positional-encoding figures and the text printed beside them (absolute and
relative schemes), computed from attnkit's own position modules, untrained or
taken from a trained model."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import torch
from torch import nn

from ..models.interface import EncoderModel, Seq2SeqModel
from ..plots.layout import WIDTH
from ..positions import (
    POSITION_ENCODINGS,
    ALiBi,
    FourierPositions,
    LearnedPositionalEmbedding,
    RelativePositions,
    RotaryPositions,
    T5RelativeBias,
    alibi_slopes,
    sinusoid_table,
    t5_bucket,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SCHEMES = POSITION_ENCODINGS  # the schemes that have a figure
MAX_CELLS = 4_000_000  # length x d_model of a drawn table: beyond it the figure is unreadable and memory runs out
SchemeT = TypeVar("SchemeT", bound=nn.Module)


def check_sizes(length: int, d_model: int, heads: int) -> None:
    """The sizes of `attnkit positions`, checked before anything is computed."""
    if length < 2:
        raise ValueError(f"`length` must be at least 2, got {length}")
    if d_model < 2 or heads < 1 or d_model % heads or (d_model // heads) % 2:
        raise ValueError(f"`heads` {heads} must divide `d_model` {d_model} into an even head size")
    if length * d_model > MAX_CELLS:
        raise ValueError(
            f"`length` {length} x `d_model` {d_model} = {length * d_model:,} values is beyond the "
            f"{MAX_CELLS:,} a figure can show; choose fewer positions or a narrower model"
        )


def find_scheme(model: Seq2SeqModel | EncoderModel, cls: type[SchemeT]) -> SchemeT | None:
    """The model's first position module of type ``cls`` (the encoder's, as built first)."""
    return next((m for m in model.position_schemes() if isinstance(m, cls)), None)


def sinusoidal_matrix(length: int, d_model: int) -> np.ndarray:
    return sinusoid_table(torch.arange(length), d_model).numpy()


def alibi_bias(heads: int, length: int) -> np.ndarray:
    pos = torch.arange(length)
    return ALiBi(heads).score_bias(torch.zeros(1, heads, length, 1), pos, pos)[0].numpy()


def t5_buckets(
    length: int, *, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True
) -> np.ndarray:
    pos = torch.arange(length)
    rel = pos[None, :] - pos[:, None]
    return t5_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance).numpy()


def unreached_buckets(reach: int, *, num_buckets: int, max_distance: int, bidirectional: bool) -> list[int]:
    """The T5 buckets that no offset j − i with |j − i| <= ``reach`` falls in: a model whose
    sequences were never longer than reach + 1 tokens never trained their scalars."""
    offsets = torch.arange(-reach, reach + 1)
    seen = t5_bucket(offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    return sorted(set(range(num_buckets)) - set(seen.tolist()))


def shaw_index(length: int, max_distance: int = 16) -> np.ndarray:
    pos = torch.arange(length)
    return RelativePositions(1, max_distance).relative_index(pos, pos).numpy()


def rotary_views(
    head_dim: int, length: int, *, starts: tuple[int, ...] = (0, 17, 34), seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(angles (length, head_dim/2), scores (len(starts), length - max(starts))): the
    score between one query vector at position m and one key vector at m + n."""
    rope = RotaryPositions(head_dim)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, 1, head_dim, generator=g)
    k = torch.randn(1, 1, 1, head_dim, generator=g)
    span = length - max(starts)
    rows = []
    for m in starts:
        rq = rope.rotate(q, torch.tensor([m]))
        rk = rope.rotate(k.expand(1, 1, span, head_dim), torch.arange(m, m + span))
        rows.append((rq @ rk.transpose(-1, -2))[0, 0, 0].numpy())
    return rope.angles(torch.arange(length)).numpy(), np.stack(rows)


@dataclass(frozen=True)
class Ask:
    """What a positions figure is asked for: the sizes, and a trained model whose own table or
    bias is drawn (``learned``, ``fourier``, ``t5``) instead of an untrained one."""

    length: int
    d_model: int
    heads: int
    model: Seq2SeqModel | EncoderModel | None = None
    model_name: str = ""
    columns: int = 2  # a four-panel figure in two rows (a docs column); 4: in one row
    trained_len: int | None = None  # the model's longest training sequence per side (longer pairs dropped)
    width: float | None = None  # the figure's width in inches: a docs column's, or less for a pane


Drawn = tuple[str, "Figure"]  # the text printed beside it, the figure
FIGURES: dict[str, Callable[[Ask], Drawn]] = {}  # scheme -> what draws it


def _draws(scheme: str) -> Callable[[Callable[[Ask], Drawn]], Callable[[Ask], Drawn]]:
    def register(fn: Callable[[Ask], Drawn]) -> Callable[[Ask], Drawn]:
        FIGURES[scheme] = fn
        return fn

    return register


def position_figure(
    scheme: str,
    *,
    length: int,
    d_model: int,
    heads: int,
    model: Seq2SeqModel | EncoderModel | None = None,
    model_name: str = "",
    columns: int = 2,
    trained_len: int | None = None,
    width: float | None = None,
) -> Drawn:
    """(text to print, matplotlib Figure) for ``scheme``: the untrained scheme, or the table or
    bias a trained ``model`` learned (learned, fourier and t5). ``columns``: 2 lays a four-panel
    figure out in two rows (a docs column), 4 in one row. ``trained_len``: the model's longest
    training sequence per side, beyond which no offset was seen (marks T5's unreached buckets).
    ``width``: the figure drawn this many inches wide (a pane narrower than a docs column: the same
    type is larger beside the panels)."""
    if scheme not in FIGURES:
        raise ValueError(f"unknown scheme {scheme!r} (valid: {', '.join(SCHEMES)})")
    np.set_printoptions(precision=3, suppress=True, linewidth=120)
    return FIGURES[scheme](Ask(length, d_model, heads, model, model_name, columns, trained_len, width))


@_draws("sinusoidal")
def _sinusoidal(a: Ask) -> Drawn:
    from .. import plots

    n, d = a.length, a.d_model
    pe = sinusoidal_matrix(n, d)
    lines = [
        f"sinusoidal positional encoding, d_model={d}, positions 0..{n - 1}",
        "PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d))",
        "",
    ]
    lines += [f"PE({pos:>3})[:8] = {pe[pos, :8]}" for pos in (0, 1, 2, n - 1)]
    sim = pe @ pe.T
    lines += [
        "",
        "similarity PE(i) . PE(i + k) depends on the offset k, not on i:",
        "   k   " + "  ".join(f"i={i:<6}" for i in (0, 10, 40)),
    ]
    lines += [
        f"  {k:>3}  " + "  ".join(f"{sim[i, i + k]:8.3f}" for i in (0, 10, 40))
        for k in (0, 1, 2, 5, 10, 20)
        if k + 40 < n
    ]
    return "\n".join(lines), plots.plot_positional_encoding(
        pe, title=f"sinusoidal PE, d_model={d}, positions 0–{n - 1}", columns=a.columns, width=a.width, sin_cos=True
    )


@_draws("learned")
def _learned(a: Ask) -> Drawn:
    from .. import plots

    module = find_scheme(a.model, LearnedPositionalEmbedding) if a.model is not None else None
    if module is None:
        table = LearnedPositionalEmbedding(a.d_model, a.length)(a.length).detach().numpy()
        return (
            "learned positions: a trained table (give --model with model.positions=learned); "
            "showing the untrained table: random noise, no structure"
        ), plots.plot_positional_encoding(
            table,
            title="learned positions, untrained: random initial values",
            learned=True,
            columns=a.columns,
            width=a.width,
        )
    table = module(min(a.length, module.max_len)).detach().float().cpu().numpy()
    shown = f"positions 0–{len(table) - 1} of its {module.max_len}"
    return (
        f"learned positions of {a.model_name}: {shown}, d_model {table.shape[1]}",
        plots.plot_positional_encoding(
            table,
            title=f"learned positions of {a.model_name} ({shown}), as trained",
            learned=True,
            columns=a.columns,
            width=a.width,
        ),
    )


@_draws("fourier")
def _fourier(a: Ask) -> Drawn:
    from .. import plots

    fourier = find_scheme(a.model, FourierPositions) if a.model is not None else None
    trained = fourier is not None
    if fourier is None:
        with torch.random.fork_rng():  # a fixed draw, without touching the caller's generator
            torch.manual_seed(0)
            fourier = FourierPositions(a.d_model)
    with torch.no_grad():
        table = fourier(a.length).float().cpu().numpy()
        wavelengths = (2 * math.pi / fourier.frequencies.abs().clamp_min(1e-9)).flatten().sort().values.numpy()
    whose = f"of {a.model_name}" if trained else "untrained (W_r ~ N(0, 1/gamma^2))"
    text = (
        f"learnable Fourier features {whose}: {fourier.features} features, gamma = {fourier.gamma}\n"
        "r_x = [cos(x W_r^T), sin(x W_r^T)] / sqrt(F);  PE_x = GELU(r_x W_1 + b_1) W_2 + b_2\n"
        f"wavelengths 2 pi / |w| in positions: shortest {wavelengths[0]:.1f}, median "
        f"{float(np.median(wavelengths)):.1f}, longest {wavelengths[-1]:.3g}"
    )
    title = (
        f"learnable Fourier features of {a.model_name}"
        if trained
        else f"learnable Fourier features (d_model={a.d_model}), untrained: random frequencies "
        f"(γ = {fourier.gamma:g}) and an MLP"
    )
    return text, plots.plot_positional_encoding(
        table, title=title, learned=True, centre=True, columns=a.columns, width=a.width
    )


@_draws("alibi")
def _alibi(a: Ask) -> Drawn:
    from .. import plots

    text = f"ALiBi, {a.heads} heads: score_ij -= m_h |i - j|, slopes m_h = {alibi_slopes(a.heads).numpy()}"
    return text, plots.plot_score_bias(
        alibi_bias(a.heads, min(a.length, 64)), title="ALiBi: a fixed linear distance penalty per head", width=a.width
    )


@_draws("t5")
def _t5(a: Ask) -> Drawn:
    from .. import plots

    n = a.length
    t5 = find_scheme(a.model, T5RelativeBias) if a.model is not None else None
    if t5 is not None:
        scalars = t5.bias.weight.detach().float().cpu().numpy().T  # (heads, buckets)
        sizes = {"num_buckets": t5.num_buckets, "max_distance": t5.max_distance}
        reach = a.trained_len + 1 if a.trained_len else 0  # the longest offset a training pair held
        unreached = unreached_buckets(reach, **sizes, bidirectional=t5.bidirectional) if reach else []
        note = (
            f"hatched: {len(unreached)} buckets that no training offset reached (all within ±{reach}), still random"
            if unreached
            else "a bucket of offsets that training never reached keeps its random initial scalar"
        )
        return (
            f"T5 relative bias of {a.model_name}: {t5.num_buckets} buckets, max distance {t5.max_distance}; "
            f"learned scalars from {scalars.min():.3f} to {scalars.max():.3f}"
            + (f"; never trained (no offset within ±{reach}): buckets {unreached}" if unreached else ""),
            plots.plot_relative_index(
                t5_buckets(n, **sizes, bidirectional=t5.bidirectional),
                t5.max_distance,
                buckets=True,
                scalars=scalars,
                unreached=unreached,
                title=f"T5 bias of {a.model_name}\nbias(i, j) = b[head, bucket(j − i)]\n{note}",
                width=a.width,
            ),
        )
    buckets = t5_buckets(n)
    offsets = [o for o in (-40, -20, -8, -4, -1, 0, 1, 4, 8, 20, 40) if 0 <= n // 2 + o < n]
    text = "T5 buckets (32, max distance 128, bidirectional): offset -> bucket\n  " + "  ".join(
        f"{o:+d}:{buckets[n // 2, n // 2 + o]}" for o in offsets
    )
    return text, plots.plot_relative_index(
        buckets,
        128,
        buckets=True,
        title="T5 relative-position buckets; each head learns one scalar per bucket (--model shows a trained model's)",
        width=a.width,
    )


@_draws("relative")
def _relative(a: Ask) -> Drawn:
    from .. import plots

    return (
        "Shaw et al. relative positions: a_ij = w[clip(j - i, -16, 16)] added to keys (and values)",
        plots.plot_relative_index(
            shaw_index(min(a.length, 48), 16),
            16,
            title="Shaw relative positions, k = 16: which learned vector each pair uses",
            width=a.width,
        ),
    )


@_draws("rope")
def _rope(a: Ask) -> Drawn:
    from .. import plots

    head_dim = a.d_model // a.heads
    angles, scores = rotary_views(head_dim, a.length)
    spread = float(np.abs(scores - scores[0]).max())
    text = (
        f"RoPE, head_dim={head_dim}: pair i rotates by m * theta_i, theta_i = 10000^(-2i/d)\n"
        f"q.k for the same vectors at (m, m + n), m = 0, 17, 34: largest difference across m = {spread:.2e}"
    )
    wide = (a.width or WIDTH) >= WIDTH  # a narrower figure: the formula on a line of its own
    title = f"rotary position embedding (RoPE): head dimension {head_dim}" + (", " if wide else "\n")
    title += f"$\\theta_i = 10000^{{-2i/{head_dim}}}$"
    return text, plots.plot_rotary(angles, scores, title=title, width=a.width)


def draw_positions(
    scheme: str,
    output: str | Path,
    *,
    length: int,
    d_model: int,
    heads: int,
    model: Seq2SeqModel | EncoderModel | None = None,
    model_name: str = "",
    trained_len: int | None = None,
) -> list[tuple[str, Path]]:
    """`attnkit positions`: each figure of ``scheme`` (or of every scheme, ``"all"``: written as
    OUTPUT_<scheme>) saved atomically; returns (text, path) per figure."""
    from ..atomic import save_figure

    output = Path(output)
    schemes = SCHEMES if scheme == "all" else (scheme,)
    done = []
    for name in schemes:
        text, fig = position_figure(
            name,
            length=length,
            d_model=d_model,
            heads=heads,
            model=model,
            model_name=model_name,
            trained_len=trained_len,
        )
        path = output if len(schemes) == 1 else output.with_name(f"{output.stem}_{name}{output.suffix}")
        done.append((text, save_figure(fig, path, dpi=110)))
    return done

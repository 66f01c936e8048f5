"""Render attention records into one HTML file: the data goes in as JSON, the
drawing code (template.html, plain JavaScript and SVG) is inlined; nothing is
fetched, so the file opens offline and can be mailed or committed.

In the page the maps are packed: each layer's (heads, queries, keys) weights as 16-bit
fixed point (weight x 65535, within 7.7e-6 of the weight), base64-encoded, and unpacked by
the page only when that layer is first shown. A page may hold only some layers (``layers``).
Past its budget a page is long (``long_example``): every head as an overview, every head's
summaries, and some layers' q, k and log-sum-exp, from which the page (long.js) computes
exact cells."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path

import numpy as np

from .. import __version__
from ..atomic import write_text
from ..attention.record import HEAD_STATS
from ..data.tokenizer import SPECIAL_LABELS
from ..inspection.capture import AttentionRecord
from ..inspection.maps import Maps

DIGITS = 4  # weights are rounded to this many decimals in the studio's JSON answers
PAGE_BUDGET = 100 * 2**20  # bytes of maps a page holds unless told otherwise (``viewer_data``)


def pack_layers(maps: np.ndarray | Maps, layers: list[int] | None = None, kind: str | None = None) -> dict:
    """(L, h, q, k) weights (an array, or a record's ``Maps`` and the ``kind``: only the held
    layers are formed) -> {"shape", "layers": the layer indices held, "data": one base64 string
    of uint16 per held layer (row-major heads, queries, keys)}."""
    import base64

    if isinstance(maps, Maps):
        assert kind is not None  # a record's maps are packed kind by kind
        shape: tuple[int, ...] = maps.shape(kind)
        layer_of = lambda i: maps.layer(kind, i)  # one layer formed at a time
    else:
        shape, layer_of = maps.shape, maps.__getitem__
    held = list(range(shape[0])) if layers is None else layers
    data = []
    for layer in held:
        weights = layer_of(layer)
        fixed = np.round(np.clip(np.asarray(weights, dtype=np.float32), 0.0, 1.0) * 65535).astype("<u2")
        data.append(base64.b64encode(fixed.tobytes()).decode("ascii"))
    return {"shape": list(shape), "layers": held, "data": data}


def _shapes(r: AttentionRecord) -> dict[str, tuple[int, int, int, int]]:
    """{kind: (layers, heads, queries, keys)}, nothing formed."""
    return {kind: r.maps.shape(kind) for kind in r.maps}


def packed_size(records: list[AttentionRecord], layers: list[int] | None = None) -> int:
    """Bytes the packed maps of ``records`` take in a page (all layers, or ``layers`` of each kind)."""
    total = 0
    for r in records:
        for shape in _shapes(r).values():
            per_layer = int(np.prod(shape[1:])) * 2 * 4 // 3
            total += per_layer * (shape[0] if layers is None else len(layers))
    return total


def depth_of(records: list[AttentionRecord]) -> int:
    """The fewest layers any kind of any record has."""
    return min(shape[0] for r in records for shape in _shapes(r).values())


def image_url(image: np.ndarray) -> str:
    """(H, W, 3) in [0, 1] as a PNG data URL, the pixels as the model saw them."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.round(np.clip(image, 0, 1) * 255).astype(np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def spectrogram_url(spectrogram: np.ndarray) -> str:
    """(bins, positions) in [0, 1], low frequencies first, as a PNG data URL: one pixel column per
    encoder position, low frequencies at the bottom, in the figures' sound colours."""
    from matplotlib import colormaps

    from ..plots.audio import SOUND_CMAP

    return image_url(colormaps[SOUND_CMAP](spectrogram[::-1])[..., :3])


def page_example(r: AttentionRecord, layers: list[int] | None = None) -> dict:
    """One sentence as the static page holds it: ``example_json`` with the maps packed."""
    out = example_json(r, maps=False)
    depth = {kind: shape[0] for kind, shape in _shapes(r).items()}
    out["packed"] = {
        kind: pack_layers(r.maps, None if layers is None else [x % depth[kind] for x in layers], kind)
        for kind in r.maps
    }
    return out


# one script per view, each registering itself for page.js to make (bertviz keeps one per view too)
VIEW_SCRIPTS = (
    "head.js matrix.js model.js neuron.js attribution.js image.js audio.js positions.js atlas.js circuits.js long.js"
)
OVERVIEW_MAX = 512  # the largest side of a long page's overviews


def _b64(a: np.ndarray) -> str:
    import base64

    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def long_bytes(r: AttentionRecord, size: int, layers: list[int]) -> int:
    """Bytes a long page takes for ``r``: every head's overview (and each layer's mean) at most
    ``size`` pixels a side, one byte each, and q, k and the log-sum-exp of ``layers`` (float32),
    all as base64."""
    total = sum(len(t) + 4 for t in (*r.src_tokens, *r.tgt_in_tokens, *r.tgt_out_tokens)) * 3 // 4  # the tokens, JSON
    for kind in r.maps:
        n_layers, heads, t, s = r.maps.shape(kind)
        total += n_layers * (heads + 1) * min(size, t) * min(size, s)
        total += n_layers * heads * (len(HEAD_STATS) + 1) * 16 * 3 // 4  # the summaries (and outside), as JSON numbers
        for layer in layers:
            call = r.maps.call(kind, layer)
            total += 4 * sum(x.numel() for x in (call.q, call.k, call.lse) if x is not None)
    return total * 4 // 3


def exact_in_page(r: AttentionRecord, kind: str, layer: int) -> str | None:
    """Why ``layer`` of ``kind`` cannot be computed exactly in the page from q, k and the
    log-sum-exp (a bias, a mask that is not a rule, formed weights), or None if it can."""
    call = r.maps.call(kind, layer)
    if call.weights is not None:
        return "its weights are formed (one attention of an RNN)"
    if call.bias is not None or call.mask is not None:
        return "its scores carry a bias or a mask the page does not compute"
    if call.key_mask is not None and not bool(call.key_mask.all()):
        return "its keys are padded"
    return None


def long_example(r: AttentionRecord, *, size: int, layers: list[int]) -> dict:
    """A long record as a static page holds it: every head's map (and each layer's mean of heads)
    pooled to at most ``size`` pixels a side by the max of the cells a pixel covers (one byte each,
    of the map's own largest pixel), every head's summaries, and for ``layers`` the record itself
    (q, k and each row's log-sum-exp, float32), from which the page computes exact cells."""
    from ..attention.record import overviews_and_stats

    out = example_json(r, maps=False) | {"packed": None, "remote": {k: list(r.maps.shape(k)) for k in r.maps}}
    offline: dict[str, dict] = {}
    for kind in r.maps:
        n_layers, heads, t, s = r.maps.shape(kind)
        data, tops, stats = [], [], []
        for layer in range(n_layers):
            call = r.maps.call(kind, layer)
            pooled, summaries = overviews_and_stats(call, size)  # (heads + 1, rows, cols), the mean last
            top = pooled.reshape(heads + 1, -1).max(1)
            data.append(_b64(np.round(pooled / np.maximum(top, 1e-30)[:, None, None] * 255).astype(np.uint8)))
            tops.append([float(x) for x in top])
            stats.append({name: [float(f"{x:.6g}") for x in v] for name, v in summaries.items()})
        exact = {}
        for layer in layers:
            call = r.maps.call(kind, layer)
            exact[str(layer)] = {
                "q": _b64(call.q.float().cpu().numpy().astype("<f4")),  # type: ignore[union-attr]
                "k": _b64(call.k.float().cpu().numpy().astype("<f4")),  # type: ignore[union-attr]
                "lse": _b64(call.lse.float().cpu().numpy().astype("<f4")),  # type: ignore[union-attr]
                "kv_heads": int(call.k.shape[0]),  # type: ignore[union-attr]
                "dim": int(call.q.shape[-1]),  # type: ignore[union-attr]
                "scale": call.scale,
                "causal": call.causal,
                "window": call.window,
                "cap": call.cap,
            }
        offline[kind] = {
            "causal": bool(r.maps.call(kind, 0).causal),
            "size": [min(size, t), min(size, s)],
            "data": data,
            "top": tops,
            "heads": stats,
            "exact": exact,
        }
    out["offline"] = offline
    return out


def plan_long_page(records: list[AttentionRecord], budget: int, layers: list[int] | None) -> tuple[int, list[int]]:
    """(overview side, layers held exactly) of a long page within ``budget`` bytes: ``layers``
    exactly (each must fit, and be computable in the page), then the largest overviews that fit,
    at most 512 pixels a side; one line where the budget holds too little."""
    depth = depth_of(records)
    held = sorted({x % depth for x in layers}) if layers else []
    for r in records:
        for kind in r.maps:
            for layer in held:
                why = exact_in_page(r, kind, layer)
                if why is not None:
                    raise ValueError(f"`layers` {layer}: the page cannot compute layer {layer} exactly: {why}")
    need = sum(long_bytes(r, 1, held) for r in records)
    if held and need > budget:
        raise ValueError(
            f"the layer(s) asked take {need / 2**20:,.0f} MB (q, k and log-sum-exp): over the page's "
            f"{budget / 2**20:,.0f} MB (--page-mb); ask fewer --layers or a larger --page-mb"
        )
    size = OVERVIEW_MAX
    while size > 16 and sum(long_bytes(r, size, held) for r in records) > budget:
        size = int(size * 0.9)
    if sum(long_bytes(r, size, held) for r in records) > budget:
        raise ValueError(
            f"a page of {budget / 2**20:,.0f} MB (--page-mb) cannot hold even 16 x 16 overviews of every "
            "layer and head: give a larger --page-mb"
        )
    return size, held


def _rounded(a: np.ndarray) -> list:
    return np.round(a.astype(np.float64), DIGITS).tolist()


def example_json(r: AttentionRecord, *, maps: bool = True) -> dict:
    """One sentence as the page draws it: tokens, maps {kind: [layer][head][query][key]}, p_t
    (``maps=False``: the maps left empty, for ``page_example`` to pack)."""
    return {
        "source": r.source,
        "output": r.output,
        "src_tokens": r.src_tokens,
        "tgt_in_tokens": r.tgt_in_tokens,
        "tgt_out_tokens": r.tgt_out_tokens,
        "window": r.window,
        "p_t": None if r.p_t is None else _rounded(r.p_t),
        "prompt_length": r.prompt_length,
        "image": None if r.image is None else image_url(r.image),
        "grid": None if r.grid is None else list(r.grid),
        "image_tokens": None if r.image_tokens is None else list(r.image_tokens),
        "spectrogram": None if r.spectrogram is None else spectrogram_url(r.spectrogram),
        "frame_seconds": r.frame_seconds,
        "maps": {kind: _rounded(a) for kind, a in r.maps.items()} if maps else {},
    }


def viewer_data(
    records: list[AttentionRecord],
    model: dict | None = None,
    layers: list[int] | None = None,
    budget: int = PAGE_BUDGET,
) -> dict:
    """The JSON document the static viewer draws. Every map (or only ``layers``) where they fit
    ``budget`` bytes; past it, a long page (``long_example``): every layer and head as overviews,
    and ``layers`` (default: the last, where it fits) computed exactly in the page from q, k and
    the log-sum-exp. ``holds`` says which."""
    if not records:
        raise ValueError("nothing to view: no sentences")
    if packed_size(records, layers) <= budget:
        depth = depth_of(records)
        held = "every layer" if layers is None else f"layer(s) {', '.join(str(x % depth) for x in layers)}"
        return {
            "model": model or {},
            "examples": [page_example(r, layers) for r in records],
            "live": None,
            "holds": f"{held}, every map in full",
        }
    if layers is None:  # the last layer exactly, where the page can compute it and it leaves room
        depth = depth_of(records)
        last = [depth - 1]
        fits = all(exact_in_page(r, k, depth - 1) is None for r in records for k in r.maps)
        layers = last if fits and sum(long_bytes(r, 256, last) for r in records) <= budget else []
    size, held_layers = plan_long_page(records, budget, layers)
    exact = f"; layer(s) {', '.join(map(str, held_layers))} exact at every cell" if held_layers else ""
    return {
        "model": model or {},
        "examples": [long_example(r, size=size, layers=held_layers) for r in records],
        "live": None,
        "holds": f"every layer and head as overviews of at most {size} x {size} pixels (the max of the cells "
        f"each covers){exact}",
    }


def _script_safe(text: str) -> str:
    """JSON inside <script>: no '<', '>' or '&' can end the element or open a comment."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def fill_template(name: str, data: dict, *, title: str, **files: str) -> str:
    """Template ``name`` of this package with the data (as JSON, safe inside <script>), the
    title, the version and the named package files (``STYLE="page.css"``; several, by spaces, one
    after the other) put in."""
    here = resources.files("attnkit.viewer")
    template = here.joinpath(name).read_text(encoding="utf-8")
    parts = {
        f"__{key}__": "\n".join(here.joinpath(f).read_text(encoding="utf-8") for f in file.split())
        for key, file in files.items()
    }
    parts.update(
        {
            "__DATA__": _script_safe(json.dumps(data, ensure_ascii=False, separators=(",", ":"))),
            "__TITLE__": html.escape(title),
            # in the page's heading a hyphenated name ("multi30k-en-de") is never broken at its hyphens
            "__HEADING__": re.sub(
                r"\S*-\S*", lambda m: f'<span class="nowrap">{m.group(0)}</span>', html.escape(title)
            ),
            "__VERSION__": __version__,
        }
    )
    # one pass: nothing inside a substituted part (a title, a token) is ever substituted again
    return re.sub("|".join(map(re.escape, parts)), lambda m: parts[m.group(0)], template)


def page_html(data: dict, *, title: str) -> str:
    """The one page: the static viewer (``data`` holds the examples) and the live studio
    (``data["live"]`` holds the served models) are the same HTML, CSS and JavaScript."""
    data = {**data, "special": list(SPECIAL_LABELS)}
    return fill_template(
        "page.html", data, title=title, STYLE="page.css", SCRIPT="page.js", COLOURS="colours.js", VIEWS=VIEW_SCRIPTS
    )


def render_html(
    records: list[AttentionRecord],
    model: dict | None = None,
    *,
    title: str = "attnkit attention",
    layers: list[int] | None = None,
    budget: int = PAGE_BUDGET,
) -> str:
    return page_html(viewer_data(records, model, layers, budget), title=title)


SNAPSHOT_KEYS = ("step", "dev_loss", "dev_bleu")  # per-step values in a snapshot's model info


def snapshot_data(snapshots: list[tuple[int, list[AttentionRecord], dict]], max_steps: int = 24) -> dict:
    """The viewer's document for training snapshots: the page gets a step slider over at most
    ``max_steps`` of them (evenly spread, the first and the last included)."""
    from ..inspection.snapshots import pick

    chosen = pick(snapshots, max_steps)
    info = {k: v for k, v in chosen[-1][2].items() if k not in SNAPSHOT_KEYS}
    steps = [
        {**{k: i[k] for k in SNAPSHOT_KEYS if k in i}, "step": step, "examples": [page_example(r) for r in records]}
        for step, records, i in chosen
    ]
    return {"model": info, "examples": steps[-1]["examples"], "live": None, "steps": steps}


def write_snapshot_html(
    path: str | Path, snapshots: list[tuple[int, list[AttentionRecord], dict]], *, title: str, max_steps: int = 24
) -> Path:
    """The viewer of a run's attention snapshots, with a step slider."""
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"the viewer is written as .html, got {str(path)!r}")
    return write_text(path, page_html(snapshot_data(snapshots, max_steps), title=title))


def write_html(
    path: str | Path,
    records: list[AttentionRecord],
    model: dict | None = None,
    *,
    title: str = "attnkit attention",
    layers: list[int] | None = None,
    budget: int = PAGE_BUDGET,
) -> Path:
    """The static viewer of ``records`` within ``budget`` bytes (``viewer_data`` says what it
    holds; ``layers``: these layers, negative from the top)."""
    return write_page(path, viewer_data(records, model, checked_layers(records, layers), budget), title=title)


def checked_layers(records: list[AttentionRecord], layers: list[int] | None) -> list[int] | None:
    """``layers`` as indices from 0, sorted, or one line for one the model does not have."""
    if layers is None:
        return None
    depth = depth_of(records)
    bad = [x for x in layers if not -depth <= x < depth]
    if bad:
        raise ValueError(f"`layers` {bad[0]} out of range: the model has {depth} layer(s) (0..{depth - 1})")
    return sorted({x % depth for x in layers})


def write_page(path: str | Path, data: dict, *, title: str) -> Path:
    """The page of ``data`` (``viewer_data``) written to ``path`` (.html)."""
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"the viewer is written as .html, got {str(path)!r}")
    return write_text(path, page_html(data, title=title))

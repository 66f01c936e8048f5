"""Render attention records into one HTML file: the data goes in as JSON, the
drawing code (template.html, plain JavaScript and SVG) is inlined; nothing is
fetched, so the file opens offline and can be mailed or committed.

In the page the maps are packed: each layer's (heads, queries, keys) weights as 16-bit
fixed point (weight x 65535, within 7.7e-6 of the weight), base64-encoded, and unpacked by
the page only when that layer is first shown. A long input's page may hold only some
layers (``layers``; ``choose_layers`` picks the last ones that fit a size budget)."""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path

import numpy as np

from .. import __version__
from ..atomic import write_text
from ..data.tokenizer import SPECIAL_LABELS
from ..inspection.capture import AttentionRecord
from ..inspection.maps import Maps

DIGITS = 4  # weights are rounded to this many decimals in the studio's JSON answers
PAGE_BUDGET = 96 * 2**20  # bytes of packed maps a page holds unless told otherwise (``choose_layers``)


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


def choose_layers(records: list[AttentionRecord], budget: int = PAGE_BUDGET) -> list[int] | None:
    """None (every layer) if the page fits ``budget``, else the last layers that do (at least one)."""
    if packed_size(records) <= budget:
        return None
    depth = depth_of(records)
    keep = 1
    while keep < depth and packed_size(records, list(range(depth - keep - 1, depth))) <= budget:
        keep += 1
    return list(range(depth - keep, depth))


def image_url(image: np.ndarray) -> str:
    """(H, W, 3) in [0, 1] as a PNG data URL, the pixels as the model saw them."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.round(np.clip(image, 0, 1) * 255).astype(np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def page_example(r: AttentionRecord, layers: list[int] | None = None) -> dict:
    """One sentence as the static page holds it: ``example_json`` with the maps packed."""
    out = example_json(r, maps=False)
    depth = {kind: shape[0] for kind, shape in _shapes(r).items()}
    out["packed"] = {
        kind: pack_layers(r.maps, None if layers is None else [x % depth[kind] for x in layers], kind)
        for kind in r.maps
    }
    return out


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
        "maps": {kind: _rounded(a) for kind, a in r.maps.items()} if maps else {},
    }


def viewer_data(records: list[AttentionRecord], model: dict | None = None, layers: list[int] | None = None) -> dict:
    """The JSON document the static viewer draws (``layers``: only these layers' maps)."""
    if not records:
        raise ValueError("nothing to view: no sentences")
    return {"model": model or {}, "examples": [page_example(r, layers) for r in records], "live": None}


def _script_safe(text: str) -> str:
    """JSON inside <script>: no '<', '>' or '&' can end the element or open a comment."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def fill_template(name: str, data: dict, *, title: str, **files: str) -> str:
    """Template ``name`` of this package with the data (as JSON, safe inside <script>), the
    title, the version and the named package files (``STYLE="page.css"``) put in."""
    here = resources.files("attnkit.viewer")
    template = here.joinpath(name).read_text(encoding="utf-8")
    parts = {f"__{key}__": here.joinpath(file).read_text(encoding="utf-8") for key, file in files.items()}
    parts.update(
        {
            "__DATA__": _script_safe(json.dumps(data, ensure_ascii=False, separators=(",", ":"))),
            "__TITLE__": html.escape(title),
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
        "page.html", data, title=title, STYLE="page.css", SCRIPT="page.js", COLOURS="colours.js", LONG="long.js"
    )


def render_html(
    records: list[AttentionRecord],
    model: dict | None = None,
    *,
    title: str = "attnkit attention",
    layers: list[int] | None = None,
) -> str:
    return page_html(viewer_data(records, model, layers), title=title)


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
) -> Path:
    """The static viewer of ``records`` (``layers``: only these layers, negative from the top)."""
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"the viewer is written as .html, got {str(path)!r}")
    if layers is not None:
        depth = depth_of(records)
        bad = [x for x in layers if not -depth <= x < depth]
        if bad:
            raise ValueError(f"--layers {bad[0]} out of range: the model has {depth} layer(s) (0..{depth - 1})")
        layers = sorted({x % depth for x in layers})
    return write_text(path, render_html(records, model, title=title, layers=layers))

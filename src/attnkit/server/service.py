"""What the studio server computes, without the web: models loaded once, and one
function per API call taking and returning plain JSON-ready dicts.

Every request is checked against ``StudioLimits`` before any model runs; a request
over a limit raises ``LimitError`` naming it, a malformed one ``RequestError``.
No request can name a file or load a model: models are chosen by the names
loaded at start.
"""

from __future__ import annotations

import base64
import io
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal, cast, overload

import numpy as np

from ..attention.record import MapView
from ..data.scenes import max_caption_words
from ..inspection.capture import AttentionRecord, Prepared
from ..inspection.explain import Walkthrough
from ..loaded import Captioner, LoadedModel, load
from ..search import SearchOptions
from ..viewer.html import DIGITS, example_json, page_example
from .limits import StudioLimits
from .schema import attribution_methods, attribution_sides, parse_request

VIEWS = ("overview", "tile", "top", "heads")  # calls on a held record
ANSWERS_KEPT = 4096  # overviews and layers' head summaries kept for a repeated request
ABLATE_TOKENS = 200_000  # heads x tokens the studio ablates one head at a time (a forward pass each)
# the positions tab's figure, drawn narrower than a docs column (8.5 in): in a pane of about 770 px,
# its type is then as large as the page's own
PANE_INCHES = 6.6


class RequestError(ValueError):
    """A request the server cannot answer as asked (HTTP 400/404/422)."""

    status = 422


class UnknownModel(RequestError):
    status = 404


class LimitError(RequestError):
    """A request over one of the server's limits (HTTP 413); the message names the limit."""

    status = 413


@dataclass
class StudioModel:
    """One model the server answers for."""

    name: str
    model: LoadedModel
    origin: str  # what it was loaded from (shown, never taken from a request)
    # one request at a time per model: a recording holds the model's attention, so nothing else may run it meanwhile
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def describe(self, limit: int) -> dict:
        tokens, by = self.model.token_limit(limit)
        return {
            **self.model.describe(),
            "name": self.name,
            "origin": self.origin,
            "max_tokens": tokens,
            "max_tokens_by": by,
        }


def default_models() -> list[str]:
    """With no MODEL named: every installed model (a Hugging Face one where transformers is
    installed), the pretrained MiniLM encoder if its package is installed, and the demo models if
    `attnkit demo` has made them here."""
    import importlib.util

    from ..loaded import is_pretrained
    from ..loading.packaged import installed_models, installed_packages

    runs = importlib.util.find_spec("transformers") is not None  # a Hugging Face model needs transformers
    names = [m.name for m in installed_models() if runs or not (m.path / "config.json").is_file()]
    names += [name for name, _, _ in installed_packages() if is_pretrained(name)]
    for demo in (Path("runs/demo"), Path("runs/demo_caption")):
        if (demo / "config.yaml").is_file() and (demo / "demo.json").is_file():
            names.append(str(demo))
    return names


class Studio:
    """The loaded models and the API's computations."""

    def __init__(self, sources: list[str], *, limits: StudioLimits | None = None, device: str = "auto") -> None:
        if not sources:
            raise ValueError(
                "no model to serve: name one (a model directory, an installed model or a "
                "pretrained encoder), or install one (`attnkit models` lists them)"
            )
        self.limits = limits or StudioLimits()
        self.models: dict[str, StudioModel] = {}
        for source in sources:
            name = Path(str(source)).name if Path(str(source)).exists() else str(source)
            if name in self.models:
                raise ValueError(f"two models would be served as {name!r}")
            self.models[name] = StudioModel(name, load(source, device=device), str(source))
        self._positions: dict[str, bytes] = {}
        self._held: OrderedDict[str, AttentionRecord] = OrderedDict()  # the latest records, for the views
        self._inputs: dict[str, tuple[str, Prepared]] = {}  # a held record's model and input: to ablate its heads
        self._answers: OrderedDict[tuple, dict] = OrderedDict()  # overviews and head summaries already computed
        self._held_lock = threading.Lock()

    # -- requests ---------------------------------------------------------------------------

    def describe(self) -> dict:
        limit = self.limits.max_tokens
        return {"models": [m.describe(limit) for m in self.models.values()], "limits": asdict(self.limits)}

    def captioners(self) -> list[str]:
        return [name for name, m in self.models.items() if "caption" in m.model.capabilities.verbs]

    def model(self, request: dict, verb: str | None = None) -> StudioModel:
        """The served model ``request["model"]`` names (of those that can ``verb``, if given)."""
        models = {n: m for n, m in self.models.items() if verb is None or verb in m.model.capabilities.verbs}
        name = request.get("model")
        if name is None and len(models) == 1:
            return next(iter(models.values()))
        if not isinstance(name, str) or name not in models:
            what = "captioning model" if verb == "caption" else "model"
            have = ", ".join(models) or "none"
            raise UnknownModel(f"unknown {what} {name!r}; this server has: {have}")
        return models[name]

    def _caption(self, request: dict, m: StudioModel) -> dict:
        """Caption an uploaded image (``image``: a PNG or JPEG as a data URL or base64) or a new
        held-out digit scene (``scene``: its seed), with each word's attention over the regions."""
        from ..inference.caption import caption_images
        from ..viewer.captions import caption_json

        start = time.perf_counter()
        captioner = cast(Captioner, m.model)  # the only models that caption
        scene = None
        if request.get("image") is not None:
            image = self._image(request["image"], lambda raw: captioner.read_image(raw, "the image"))
            name = "your image"
        else:
            from ..data.scenes import make_scenes

            seed = self._int(request, "scene", 0, 0, 2**31 - 1)
            d = captioner.cfg.data.scenes
            scene = make_scenes(1, held_out=True, seed=seed + 7919, size=d.image_size, count=d.digits, noise=d.noise)[0]
            image, name = scene.image, f"held-out scene {seed}"
        found = caption_images(
            captioner.model, captioner.vocab, image[None], max_words=max_caption_words(captioner.cfg.data.scenes.digits)
        )[0]
        return {
            "model": m.name,
            "example": caption_json(found, name, scene),
            "server_ms": round(1000 * (time.perf_counter() - start), 1),
        }

    @staticmethod
    def _image(value: str, decode: Callable[[bytes], np.ndarray]) -> np.ndarray:
        """A base64 image (optionally a data URL) read by ``decode`` (the file's bytes -> (H, W, 3)
        RGB in [0, 1]); what is not base64 or not an image is a RequestError."""
        return Studio._decoded(value, "image", decode)

    @staticmethod
    def _decoded(value: str, field: str, decode: Callable[[bytes], np.ndarray]) -> np.ndarray:
        """A base64 file (optionally a data URL) read by ``decode``; what is not base64, or not
        what ``decode`` reads, is a RequestError naming ``field``."""
        import base64
        import binascii

        try:
            raw = base64.b64decode(value.split(",", 1)[1] if value.startswith("data:") else value, validate=True)
        except (binascii.Error, ValueError, IndexError):
            raise RequestError(f"'{field}' is not valid base64") from None
        try:
            return decode(raw)
        except ValueError as err:
            raise RequestError(str(err)) from None

    def _translate(self, request: dict, m: StudioModel) -> dict:
        """Translate (or, with ``target``, force a translation of) ``text`` and return every attention
        map; an encoder returns its self-attention. Fields: model, text, beam, nbest, target."""
        start = time.perf_counter()
        text = self._text(request, "text", required=True)
        target = self._text(request, "target")
        beam = self._int(request, "beam", 5, 1, self.limits.max_beam)
        nbest = min(beam, self._int(request, "nbest", 1, 1, self.limits.max_nbest))  # a beam holds at most beam outputs
        can = m.model.capabilities
        if target and not can.forced:
            raise RequestError(f"{can.a.capitalize()} has no target side: leave 'target' out")
        prepared = self._prepare(
            m,
            text,
            target,
            SearchOptions(beam=beam, n_best=nbest),
            request.get("max_new_tokens"),
            request.get("image"),
            request.get("audio"),
        )
        record = m.model.capture(prepared)
        remote = record.maps.dense_bytes(2) > self.limits.page_mb * 2**20  # uint16 per weight, as packed
        if remote:
            shapes = {k: list(record.maps.shape(k)) for k in record.maps}
            example = example_json(record, maps=False) | {"packed": None, "remote": shapes}
        else:
            example = page_example(record) if request.get("packed") else example_json(record)
        return {
            "model": m.name,
            "translation": prepared.output,  # the searched (or forced) output; None for an encoder
            "forced": bool(target),
            "score": None if prepared.score is None else round(prepared.score, DIGITS),
            "nbest": [{"text": t, "score": round(s, DIGITS)} for t, s in prepared.nbest]
            or (
                [{"text": prepared.output, "score": round(prepared.score, DIGITS)}]
                if prepared.score is not None
                else []
            ),
            "example": example,
            "record": self._hold(record, (m.name, prepared)),
            "server_ms": round(1000 * (time.perf_counter() - start), 1),
        }

    def _explain(self, request: dict, m: StudioModel) -> dict:
        """The Q/K/V (or Luong) walk-through of one query: fields model, text, target, kind, layer, head, query."""
        start = time.perf_counter()
        text = self._text(request, "text", required=True)
        target = self._text(request, "target")
        kinds = m.model.kinds
        kind = request["kind"] or ("cross" if "cross" in kinds else kinds[0])
        layer = self._int(request, "layer", -1, -64, 63)
        head = self._int(request, "head", 0, 0, 255)
        query = self._int(request, "query", 0, -1024, 1023)
        prepared = self._prepare(
            m, text, target, SearchOptions(), request.get("max_new_tokens"), request.get("image"), request.get("audio")
        )
        walk = m.model.walkthrough(prepared, kind=kind, layer=layer, head=head, query=query)
        return {"model": m.name, **walkthrough_json(walk), "server_ms": round(1000 * (time.perf_counter() - start), 1)}

    def _prepare(
        self,
        m: StudioModel,
        text: str,
        target: str | None,
        options: SearchOptions,
        new_tokens: int | None = None,
        image: str | None = None,
        audio: str | None = None,
    ) -> Prepared:
        """``text`` (and ``target``) as the model's ids, within the token limit; the output side is the
        model's own (a translation searched with ``options``, a continuation of ``new_tokens``) unless
        ``target`` forces one. An image model takes ``image`` (base64), a speech model ``audio``
        (base64 WAV), ``text`` naming it."""
        model = m.model
        if model.capabilities.reads == "audio" or audio is not None:
            return self._prepare_audio(m, text, audio, target, options)
        if model.capabilities.reads == "image" or image is not None:
            return self._prepare_image(m, text, image, target, options, new_tokens)
        self._check_tokens(model.token_count(text), "text")
        if target:
            self._check_tokens(model.target_count(target), "target")
        if new_tokens is not None:
            self._check_tokens(model.token_count(text) + new_tokens, "text and max_new_tokens")
        try:
            return model.prepare(
                [text], targets=[target] if target else None, options=options, max_new_tokens=new_tokens
            )[0]
        except ValueError as err:
            raise RequestError(str(err)) from None

    def _prepare_image(
        self,
        m: StudioModel,
        name: str,
        image: str | None,
        target: str | None,
        options: SearchOptions,
        new_tokens: int | None = None,
    ) -> Prepared:
        """An image model's ``image``, named by ``name``; a vision-language model's, with the text
        ``name`` about it continued by ``new_tokens``."""
        model = m.model
        if model.capabilities.reads != "image" and not model.capabilities.images:
            raise RequestError(f"{m.name} reads text: leave 'image' out")
        if image is None:
            raise RequestError(f"{m.name} is an image model: send the image as 'image' (base64 PNG or JPEG)")
        self._check_tokens(model.token_count(name), "image (its regions)")
        if target:
            self._check_tokens(model.target_count(target), "target")
        pixels = self._image(image, lambda raw: model.read_image(raw, "the image"))
        try:
            return model.prepare_image(pixels, name, target=target, options=options, max_new_tokens=new_tokens)
        except ValueError as err:
            raise RequestError(str(err)) from None

    def _prepare_audio(
        self, m: StudioModel, name: str, audio: str | None, target: str | None, options: SearchOptions
    ) -> Prepared:
        """A speech model's ``audio`` (a base64 WAV file) named ``name``, its transcript its own or
        ``target`` forced."""
        model = m.model
        if model.capabilities.reads != "audio":
            raise RequestError(f"{m.name} reads {model.capabilities.reads}: leave 'audio' out")
        if audio is None:
            raise RequestError(f"{m.name} is a speech model: send the sound as 'audio' (a base64 WAV file)")
        if target:
            self._check_tokens(model.target_count(target), "target")
        self._check_tokens(model.token_count(name), "sound (its encoder's positions)")
        wave = self._decoded(audio, "audio", lambda raw: model.read_audio(raw, "the sound"))
        try:
            return model.prepare_audio(wave, name, target=target, options=options)
        except ValueError as err:
            raise RequestError(str(err)) from None

    def _attribute(self, request: dict, m: StudioModel) -> dict:
        """Where each output token (or encoder position) draws from (``attnkit attribute``'s methods):
        fields model, text (or image), method, side, max_new_tokens."""
        from ..attribution import attribute_model

        start = time.perf_counter()
        text = self._text(request, "text", required=True)
        sides = attribution_sides(m.model.capabilities)
        methods = attribution_methods(m.model.capabilities, request.get("side") or (sides[0] if sides else "output"))
        method = request["method"] or (methods[0] if methods else "attention")  # a bad side is said below
        prepared = self._prepare(
            m, text, None, SearchOptions(), request.get("max_new_tokens"), request.get("image"), request.get("audio")
        )
        try:
            found = attribute_model(m.model, prepared, [method], side=request.get("side"))
        except ValueError as err:
            raise RequestError(str(err)) from None
        return {
            "model": m.name,
            "method": method,
            "label": found.label(method),
            "side": found.side,
            "rows": found.rows,
            "tokens": found.cols,
            "output": prepared.output if found.side == "output" else "",
            "scores": np.round(np.asarray(found.scores[method], dtype=np.float64), DIGITS).tolist(),
            "server_ms": round(1000 * (time.perf_counter() - start), 1),
        }

    def _embed(self, request: dict, m: StudioModel) -> dict:
        """Contextual vectors of a pretrained encoder: the cosine similarity of every pair of tokens
        at each depth (static table, embeddings, each layer), and the repeated words."""
        from ..inspection.contextual import cosine_matrix, depth_names, token_vectors

        if not m.model.capabilities.contextual:
            raise RequestError(f"{m.name} is {m.model.capabilities.a}: contextual vectors are shown for text encoders")
        text = self._text(request, "text", required=True)
        self._prepare(m, text, None, SearchOptions())  # the token limit
        try:
            v = token_vectors(m.model.contextual_encoder, [text])
        except ValueError as err:
            raise RequestError(str(err)) from None
        depths = [("static", v.static)] + list(zip(depth_names(v.layers.shape[0]), v.layers))
        return {
            "model": m.name,
            "tokens": [t for _, _, t in v.labels],
            "depths": [name for name, _ in depths],
            "similarity": [np.round(cosine_matrix(x), DIGITS).tolist() for _, x in depths],
            "repeated": [list(p) for p in v.repeated()],
        }

    def _positions_png(self, request: dict, m: StudioModel) -> bytes:
        """The figure of the model's positional scheme (as `attnkit positions` draws it)."""
        from ..inspection.positions import SCHEMES, position_figure

        if m.name in self._positions:
            return self._positions[m.name]
        info = m.model.info
        scheme = info.get("positions")
        if scheme not in SCHEMES:
            raise RequestError(
                f"{m.name} has no positional scheme to draw"
                + (" (an RNN orders tokens by its recurrence)" if info.get("arch") == "rnn" else "")
            )
        d_model, heads = info.get("d_model", 128), info.get("heads", 4)
        _, fig = position_figure(
            scheme,
            length=48,
            d_model=d_model,
            heads=heads,
            model=m.model.module,
            model_name=m.name,
            columns=2,
            trained_len=info.get("max_len"),
            width=PANE_INCHES,
        )
        buf = io.BytesIO()
        # about 1,050 px: the page fits it to the pane; a label past the canvas is kept, not cut
        fig.savefig(buf, format="png", dpi=160, bbox_inches="tight", pad_inches=0.05)
        self._positions[m.name] = buf.getvalue()
        return self._positions[m.name]

    # -- the views of a held record: any length, nothing formed in full ----------------------

    def _hold(self, record: AttentionRecord, source: tuple[str, Prepared] | None = None) -> str:
        """Keep ``record`` (and the model and input it came from) for the views' requests, within
        ``records_mb`` (the oldest dropped): its id."""
        key = uuid.uuid4().hex[:16]
        with self._held_lock:
            self._held[key] = record
            if source is not None:
                self._inputs[key] = source
            budget = self.limits.records_mb * 2**20
            while len(self._held) > 1 and sum(r.maps.nbytes() for r in self._held.values()) > budget:
                gone, _ = self._held.popitem(last=False)
                self._inputs.pop(gone, None)
                for k in [k for k in self._answers if k[0] == gone]:
                    del self._answers[k]
        return key

    def _record(self, request: dict) -> AttentionRecord:
        with self._held_lock:
            record = self._held.get(request["record"])
        if record is None:
            raise UnknownModel(
                f"unknown record {request['record']!r}: the server keeps the latest ({self.limits.records_mb:,} MB "
                "of records, records_mb); send the text again"
            )
        return record

    def _view(self, request: dict) -> MapView:
        record = self._record(request)
        try:
            return record.view(request["kind"], request["layer"], request["head"])
        except ValueError as err:
            raise RequestError(str(err)) from None

    def _cached(self, key: tuple, compute: Callable[[], dict]) -> dict:
        with self._held_lock:
            found = self._answers.get(key)
            if found is not None:
                self._answers.move_to_end(key)
                return found
        found = compute()
        with self._held_lock:
            self._answers[key] = found
            while len(self._answers) > ANSWERS_KEPT:
                self._answers.popitem(last=False)
        return found

    def _overview(self, request: dict, m: StudioModel | None = None) -> dict:
        """One map pooled to at most rows x cols pixels (max or mean of the cells each covers)."""
        start = time.perf_counter()
        view = self._view(request)
        t, s = view.shape
        r0, r1, c0, c1 = request["region"] or (0, t, 0, s)
        if not (r0 < r1 <= t and c0 < c1 <= s):
            raise RequestError(f"region {r0}..{r1} x {c0}..{c1} out of range: the map is {t} x {s} (queries x keys)")
        key = (*(request[k] for k in ("record", "kind", "layer", "head", "rows", "cols", "reduce")), r0, r1, c0, c1)

        def compute() -> dict:
            pixels = view.overview((request["rows"], request["cols"]), request["reduce"], rows=(r0, r1), cols=(c0, c1))
            top = float(pixels.max()) if pixels.size else 0.0
            fixed = pixels.astype("<f4")  # exact: a pixel is one cell's weight, or the mean of a few
            return {
                "shape": [t, s],
                "causal": bool(view.call.causal),
                "region": [r0, r1, c0, c1],
                "rows": int(pixels.shape[0]),
                "cols": int(pixels.shape[1]),
                "reduce": request["reduce"],
                "top": top,
                "data": base64.b64encode(fixed.tobytes()).decode("ascii"),
            }

        return {**self._cached(key, compute), "server_ms": round(1000 * (time.perf_counter() - start), 1)}

    def _tile(self, request: dict, m: StudioModel | None = None) -> dict:
        """Exact weights of rows x cols cells from (row, col), cut to the map's edge."""
        start = time.perf_counter()
        view = self._view(request)
        t, s = view.shape
        row, col = request["row"], request["col"]
        if row >= t or col >= s:
            raise RequestError(f"tile at ({row}, {col}) out of range: the map is {t} x {s} (queries x keys)")
        rows, cols = min(request["rows"], t - row), min(request["cols"], s - col)
        block = view.block((row, row + rows), (col, col + cols)).astype("<f4")
        return {
            "row": row,
            "col": col,
            "rows": rows,
            "cols": cols,
            "data": base64.b64encode(block.tobytes()).decode("ascii"),
            "server_ms": round(1000 * (time.perf_counter() - start), 1),
        }

    def _top(self, request: dict, m: StudioModel | None = None) -> dict:
        """The strongest keys of queries first .. first + count - 1, strongest first."""
        start = time.perf_counter()
        view = self._view(request)
        t, _ = view.shape
        first = request["first"]
        if first >= t:
            raise RequestError(f"query {first} out of range: the map has {t} queries (0..{t - 1})")
        rows = slice(first, min(t, first + request["count"]))
        idx, val = view.top_keys(request["k"], rows=rows)
        return {
            "first": first,
            "keys": idx.tolist(),
            "weights": val.astype(np.float64).tolist(),  # exact: float32's digits
            "server_ms": round(1000 * (time.perf_counter() - start), 1),
        }

    def _heads(self, request: dict, m: StudioModel | None = None) -> dict:
        """Every head's summaries, layer by layer (one layer if asked): streamed, then kept."""
        from ..attention.record import head_stats

        start = time.perf_counter()
        record = self._record(request)
        kind = request["kind"]
        try:
            depth = record.maps.shape(kind)[0]
            layers = range(depth) if request["layer"] is None else [record.maps.call(kind, request["layer"]).layer]
            layers = [layer % depth for layer in layers]
        except ValueError as err:
            raise RequestError(str(err)) from None

        def summaries(layer: int) -> dict:
            stats = head_stats(record.maps.call(kind, layer), sink=request["sink"], band=request["band"])
            return {name: v.astype(np.float64).tolist() for name, v in stats.items()}

        out = []
        for layer in layers:
            key = (request["record"], kind, layer, "heads", request["sink"], request["band"])
            out.append({"layer": layer, "stats": self._cached(key, partial(summaries, layer))})
        return {"kind": kind, "layers": out, "server_ms": round(1000 * (time.perf_counter() - start), 1)}

    def _atlas(self, request: dict, m: StudioModel) -> dict:
        """The head atlas of one kind of a held record: every detector that applies, and with
        ``ablate`` each head's ablation effect and importance (the model runs once per head)."""
        from ..heads.ablation import ablation_effects, head_importance
        from ..heads.atlas import UNITS, head_atlas
        from ..heads.detectors import DETECTORS

        start = time.perf_counter()
        record, kind, ablate = self._record(request), request["kind"], request["ablate"]
        if kind not in record.kinds:
            raise RequestError(f"this record has no {kind} attention; it has {', '.join(record.kinds)}")
        with self._held_lock:
            source = self._inputs.get(request["record"])
        runs = ablate or request.get("streaming") is not None  # the model runs once per head
        if runs and (source is None or source[0] != m.name):
            raise RequestError(f"record {request['record']!r} was not made by {m.name}: send the text to it again")
        layers, heads = record.maps.shape(kind)[:2]
        tokens = len(record.queries(kind))
        if runs and layers * heads * tokens > ABLATE_TOKENS:
            flag = "--ablate" if ablate else "--streaming"
            raise LimitError(
                f"running {layers * heads} heads one at a time over {tokens:,} tokens is over the studio's "
                f"{ABLATE_TOKENS:,} (heads x tokens): use `attnkit heads {flag}` for it"
            )

        def compute() -> dict:
            atlas = head_atlas([record], kind)
            out: dict = {"kind": kind, "layers": layers, "heads": heads, "unscored": atlas.unscored}
            out["detectors"] = [
                {"name": n, "paper": DETECTORS[n].paper, "threshold": DETECTORS[n].threshold, "means": DETECTORS[n].means,
                 "unit": UNITS.get(n, "weight"), "values": _grid(v)}
                for n, v in atlas.scores.items()
            ]  # fmt: skip
            out["offsets"] = None if atlas.offsets is None else atlas.offsets.astype(int).tolist()
            if ablate:
                assert source is not None
                got = ablation_effects(m.model, [source[1]], ablate)
                assert got is not None  # one process: every result here
                measured, base, effects = got
                importance = head_importance(m.model, [source[1]], measured=measured)
                assert importance is not None
                out["ablation"] = {"mode": ablate, "measure": measured.name, "base": round(base, DIGITS),
                                   "effect": _grid(effects[kind]), "importance": _grid(importance[kind])}  # fmt: skip
            return out

        cache = request.get("streaming")
        found = self._cached((request["record"], kind, "atlas", ablate), compute)
        if cache is not None:
            cache = (cache["sinks"], cache["window"])
            found = {**found, "streaming": self._cached(
                (request["record"], kind, "atlas-streaming", cache), partial(self._streaming, m, source, kind, cache)
            )}  # fmt: skip
        return {**found, "server_ms": round(1000 * (time.perf_counter() - start), 1)}

    def _streaming(self, m: StudioModel, source: tuple | None, kind: str, cache: tuple[int, int]) -> dict:
        """Each decoder head alone over a StreamingLLM cache (``heads.context``) of the held input."""
        from ..heads.context import KIND, NEEDLE_DROP, context_needs

        if kind != KIND:
            raise RequestError(f"a key-value cache serves a decoder's self-attention, not {kind} attention")
        if source is None or source[0] != m.name:
            raise RequestError(f"this record was not made by {m.name}: send the text to it again")
        try:
            needs = context_needs(m.model, [source[1]], sinks=cache[0], window=cache[1])
        except ValueError as err:
            raise RequestError(str(err)) from None
        assert needs is not None  # one process: every result here
        grid = {name: _grid(getattr(needs, name)) for name in ("cost", "estimate", "outside", "change")}
        needle = {} if needs.needle is None or needs.needle_base is None else {
            "needle": _grid(needs.needle), "needle_base": round(needs.needle_base, DIGITS), "needle_drop": NEEDLE_DROP
        }  # fmt: skip
        return {"sinks": needs.sinks, "window": needs.window, "measure": needs.measure, "base": round(needs.base, DIGITS),
                "threshold": needs.threshold, "classes": needs.classes().tolist(), **grid, **needle}  # fmt: skip

    def _circuits(self, request: dict, m: StudioModel) -> dict:
        """Which heads carry one behaviour: activation and attribution patching of every head, path
        patching among the strongest, each head's direct logit attribution and OV copying score."""
        from .. import circuits

        start = time.perf_counter()
        model = self._analysable(m)
        for key in ("clean", "corrupt"):
            self._text(request, key, required=True)
        self._check_tokens(model.token_count(request["clean"]), "clean")
        pair = circuits.Pair(
            request["clean"], request["corrupt"], request["answer"], request["foil"], request["target"]
        )
        units = sum(s.heads for s in model.sites() if s.role == "z")
        tokens = model.token_count(request["clean"]) + (model.target_count(pair.target) if pair.target else 0)
        if units * tokens > ABLATE_TOKENS:
            raise LimitError(
                f"patching {units} heads one at a time over {tokens:,} tokens is over the studio's "
                f"{ABLATE_TOKENS:,} (heads x tokens): use `attnkit patch` for it"
            )
        metric = request["metric"]
        exact = circuits.activation_patching(model, [pair], metric=metric)
        approx = circuits.attribution_patching(model, [pair], metric=metric)
        effect = exact.effect
        groups = list(dict.fromkeys(_group(u.site) for u in exact.units))
        per = max(int(cast(int, u.head)) for u in exact.units) + 1
        heads: list[dict] = [
            {"name": f"{u.site[: -len('.z')]}.h{u.head}", "layer": u.layer, "head": int(cast(int, u.head)),
             "column": groups.index(_group(u.site)) * per + int(cast(int, u.head))}
            for u in exact.units
        ]  # fmt: skip
        out: dict = {
            "metric": metric,
            "clean": float(exact.clean.mean()),
            "corrupt": float(exact.corrupt.mean()),
            "layers": 1 + max(u.layer for u in exact.units),
            "columns": groups,
            "heads": heads,
            "activation": _floats(effect),
            "attribution": _floats(approx.effect),
            "agreement": _finite(circuits.agreement(approx, exact)),
        }

        def per_head(names: list[str], values: np.ndarray) -> list[float | None]:
            by = dict(zip(names, values.tolist()))
            return [_finite(by.get(str(h["name"]), math.nan)) for h in heads]

        def logit() -> list[float | None]:
            found = circuits.direct_logit_attribution(model, pair.clean, pair.answer, pair.foil, target=pair.target)
            return per_head(found.names, found.values)

        def copying() -> list[float | None]:
            found = circuits.ov_circuits(model, pair.clean, target=pair.target)
            return per_head(found.names, found.copying)

        for key, part in (("logit", logit), ("copying", copying)):
            out[key], out[f"{key}_refused"] = _or_why(part)
        found_paths, out["paths_refused"] = _or_why(lambda: self._paths(model, pair, exact, request["paths"], metric))
        out["paths"], out["paths_unweighted"] = found_paths or ([], None)
        return {**out, "server_ms": round(1000 * (time.perf_counter() - start), 1)}

    @staticmethod
    def _paths(model: LoadedModel, pair, exact, among: int, metric: str) -> tuple[list[dict], str | None]:
        """Path patching among the ``among`` self-attention heads of the stack the logits read of
        largest |effect| (each later one a receiver)."""
        from .. import circuits
        from ..circuits.streams import logit_stack

        stack = logit_stack(model)[0]
        own = {s.name for s in model.sites() if s.role == "z" and s.kind != "cross" and s.name.startswith(stack + ".")}
        mine = [i for i, u in enumerate(exact.units) if u.site in own]
        order = sorted(mine, key=lambda i: -abs(float(np.nan_to_num(exact.effect[i]))))[:among]
        chosen = sorted((exact.units[i] for i in order), key=lambda u: exact.units.index(u))
        senders = [u for u in chosen if any(b.layer > u.layer for b in chosen)]
        receivers = [u for u in chosen if any(a.layer < u.layer for a in chosen)]
        if not senders:
            return [], None
        found = circuits.path_patching(model, [pair], senders=senders, receivers=receivers, metric=metric)
        index = {id(u): exact.units.index(u) for u in chosen}
        effect, paths = found.effect, []
        for i, a in enumerate(found.senders):
            for j, b in enumerate(found.receivers):
                for k, via in enumerate(found.via):
                    if not math.isnan(effect[i, j, k]):
                        paths.append({"sender": index[id(a)], "receiver": index[id(b)], "via": via,
                                      "effect": round(float(effect[i, j, k]), DIGITS),
                                      "composition": _finite(found.composition[i, j, k])})  # fmt: skip
        return sorted(paths, key=lambda p: -abs(p["effect"])), found.unweighted

    def _qk(self, request: dict, m: StudioModel) -> dict:
        """Why a head of a held record attends where it does: the QK attribution of one cell."""
        from .. import circuits

        start = time.perf_counter()
        model = self._analysable(m)
        record = self._record(request)
        with self._held_lock:
            source = self._inputs.get(request["record"])
        if source is None or source[0] != m.name:
            raise RequestError(f"record {request['record']!r} was not made by {m.name}: send the text to it again")
        kind = request["kind"]
        if kind not in record.kinds:
            raise RequestError(f"this record has no {kind} attention; it has {', '.join(record.kinds)}")
        text, target = _rerun_input(model, source[1], request["query"])
        call = record.maps.call(kind, request["layer"])
        site = next((s for s in model.sites() if s.role == "attn" and s.kind == kind and s.layer == call.layer), None)
        if site is None:
            raise RequestError(f"{m.name} names no {kind} attention site at layer {call.layer}")
        found = circuits.qk_attribution(model, text, site.name, request["head"], request["query"], request["key"],
                                        target=target)  # fmt: skip

        def shares(values: np.ndarray) -> list[dict]:
            best = sorted(zip(values.tolist(), found.names), key=lambda x: -abs(x[0]))[:6]
            return [{"writer": n, "score": round(v, DIGITS)} for v, n in best]

        return {
            "site": found.site, "head": found.head, "query": found.query, "key": found.key,
            "query_token": found.tokens[found.query], "key_token": found.tokens[found.key],
            "score": round(found.score, DIGITS), "bias": round(found.bias, DIGITS), "weight": round(found.weight, DIGITS),
            "by_query": shares(found.by_query), "by_key": shares(found.by_key),
            "terms": [{**t, "score": round(t["score"], DIGITS), "share": _finite(t["share"])} for t in found.table(8)],
            "server_ms": round(1000 * (time.perf_counter() - start), 1),
        }  # fmt: skip

    @staticmethod
    def _analysable(m: StudioModel) -> LoadedModel:
        if not m.model.capabilities.circuits:
            raise RequestError(
                f"{m.name} is {m.model.capabilities.a}: it names no residual stream read into logits, "
                "so its heads' causal analyses do not apply"
            )
        return m.model

    def run(self, call: str, request: object):
        """Answer API ``call`` (translate, explain, embed, attribute, positions_png, caption) for ``request``, holding
        the model's lock."""
        try:
            fields = parse_request(call, request)  # types and fixed bounds: schema.py
        except ValueError as err:
            raise RequestError(str(err)) from None
        if call in VIEWS:  # a held record's views: no model runs
            return getattr(self, f"_{call}")(fields)
        m = self.model(fields, "caption" if call == "caption" else None)
        with m.lock:
            return getattr(self, f"_{call}")(fields, m)

    # -- checks -----------------------------------------------------------------------------

    @overload
    def _text(self, request: dict, key: str, *, required: Literal[True]) -> str: ...
    @overload
    def _text(self, request: dict, key: str, *, required: bool = False) -> str | None: ...
    def _text(self, request: dict, key: str, *, required: bool = False) -> str | None:
        value = request.get(key)
        if value is None or (value == "" and not required):
            if required:
                raise RequestError(f"'{key}' is required")
            return None
        if not isinstance(value, str):
            raise RequestError(f"'{key}' must be a string")
        if not value.strip():
            raise RequestError(f"'{key}' is empty")
        if len(value) > self.limits.max_chars:  # the document declares it (maxLength): a bad request, 422
            raise RequestError(f"'{key}' has {len(value)} characters; the limit is {self.limits.max_chars} (max_chars)")
        return value.strip()

    def _int(self, request: dict, key: str, default: int, low: int, high: int, *, limit_name: str | None = None) -> int:
        value = request.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise RequestError(f"'{key}' must be an integer")
        if value < low:
            raise RequestError(f"'{key}' must be >= {low}, got {value}")
        if value > high:  # the document declares it (maximum): a bad request, 422
            raise RequestError(f"'{key}' is {value}; the limit is {high} ({limit_name or 'max_' + key})")
        return value

    def _check_tokens(self, n: int, key: str) -> None:
        if n > self.limits.max_tokens:
            raise LimitError(f"'{key}' is {n} tokens; the limit is {self.limits.max_tokens} (max_tokens)")


def _group(site: str) -> str:
    """A head's column group: its site's name without the layer (blocks.attn, decoder.cross)."""
    stack, _layer, *rest = site.split(".")
    return ".".join([stack, *rest[:-1]])


def _or_why(part: Callable):
    """``part()``, or None and the one line saying why it does not apply to this model."""
    try:
        return part(), None
    except ValueError as err:
        return None, str(err)


def _finite(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v), DIGITS)


def _floats(a: np.ndarray) -> list[float]:
    return [round(float(v), DIGITS) for v in a]


def _rerun_input(model: LoadedModel, p: Prepared, query: int) -> tuple[str, str | None]:
    """The text (and a translator's target) that runs to the held input's very tokens, up to
    ``query`` at least (a decoder-only model's prompt alone, where its continuation reads back as
    other tokens: a causal model's attention within the prompt is the same); one line otherwise."""

    def ids(text: str, target: str | None) -> list[int]:
        again = model.cache(text, sites=[], target=target).prepared
        return list(again.tgt_in_ids if again.tgt_in_ids is not None else again.src_ids)

    held = list(p.tgt_in_ids if p.tgt_in_ids is not None else p.src_ids)
    if model.capabilities.continues:
        if p.output and ids(p.source + p.output, None) == held:
            return p.source + p.output, None
        if query < len(p.src_ids) and ids(p.source, None) == held[: len(p.src_ids)]:
            return p.source, None
    elif ids(p.source, p.output or None) == held:
        return p.source, p.output or None
    raise RequestError(
        "the output, read again, is other tokens than the ones shown: ask about a query of the input, "
        "or send the whole text with no new tokens (a translator's: as the target)"
    )


def _grid(a: np.ndarray) -> list[list[float | None]]:
    """A (layers, heads) array as lists to 6 decimals (as ``write_atlas``), NaN (not measured) as None."""
    return [[None if not np.isfinite(v) else round(float(v), 6) for v in row] for row in a]


WALK_DIGITS = 6  # a walk-through's values: the page shows 3 decimals, rounded once from these


def _list(a: np.ndarray | None, digits: int = DIGITS) -> list | None:
    """Rounded floats for JSON; -inf (a masked score) becomes null."""
    if a is None:
        return None
    a = np.asarray(a, dtype=np.float64)
    out = np.round(a, digits).astype(object)
    out[~np.isfinite(a)] = None
    return out.tolist()


def walkthrough_json(w: Walkthrough) -> dict:
    """Every value of a walk-through, JSON-ready (to WALK_DIGITS decimals)."""
    assert w.allowed is not None  # set by Walkthrough.__post_init__
    return {
        "kind": w.kind,
        "layer": w.layer,
        "head": w.head,
        "query": w.query,
        "query_token": w.query_token,
        "query_label": w.query_label,
        "key_tokens": w.key_tokens,
        "recurrent": w.recurrent,
        "score": w.score,
        "terms_formula": w.terms_formula,
        # what an RNN's score multiplies each key by, where it is not h_t itself (general: W_aᵀ h_t)
        "factor": _list(w.factor, WALK_DIGITS) if w.factor_transforms else None,
        "factor_formula": w.factor_formula if w.factor_transforms else "",
        "d_k": int(w.q.shape[0]),
        "scale": w.scale,
        "q": _list(w.q, WALK_DIGITS),
        "k": _list(w.k, WALK_DIGITS),
        "v": _list(w.v, WALK_DIGITS),
        "terms": _list(w.terms, WALK_DIGITS),
        "raw": _list(w.raw, WALK_DIGITS),
        "bias": _list(w.bias, WALK_DIGITS),
        "allowed": [bool(x) for x in w.allowed],
        "scaled": _list(w.scaled, WALK_DIGITS),
        "weights": _list(w.weights, WALK_DIGITS),
        "unscaled_weights": _list(w.unscaled_weights, WALK_DIGITS),
        "context": _list(w.context, WALK_DIGITS),
        "p_t": None if w.p_t is None else round(w.p_t, DIGITS),
        "window": w.window,
        "gauss": _list(w.gauss, WALK_DIGITS),
        "in_window": None if w.gauss is None else _list(w.in_window, WALK_DIGITS),
        "max_error": float(f"{w.max_error:.2e}") if math.isfinite(w.max_error) else None,
    }

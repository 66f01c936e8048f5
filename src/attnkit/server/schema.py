"""The studio's API, declared once: pydantic models of every request and answer, the requests
checked against them (one line naming the first problem), and the OpenAPI document built
from them (served at ``/api/openapi.json``).

The request models check types and fixed bounds; the server's own limits (``StudioLimits``:
characters, tokens, beam, n-best), which an operator sets at start, are checked after them by
the service, with the limit named.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, model_validator

from .. import __version__

Kind = Literal["encoder", "decoder", "cross"]


# what the server strips as space (Python's str.isspace), spelled out: JSON Schema's \s is ECMA's, which
# differs (it leaves out \x1c-\x1f and \x85, and takes in \ufeff), so a pattern of \S would let through
# a text the server finds empty
SPACE = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
Text = Annotated[StrictStr, Field(min_length=1, pattern=f"[^{SPACE}]")]  # something besides spaces
Target = Annotated[StrictStr, Field(pattern=f"^$|[^{SPACE}]")]  # empty (none given) or something besides spaces


def _integral(value: Any) -> Any:
    """JSON Schema's integers as Python's: a number with no fractional part (1.0) is an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


class Body(BaseModel):
    """A request body: keys it does not use are ignored; every key it uses has one type, an
    integer as JSON Schema has it (1.0 is one)."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _integers(cls, data: Any) -> Any:
        return {k: _integral(v) for k, v in data.items()} if isinstance(data, dict) else data


class Request(Body):
    model: StrictStr | None = Field(None, description="a served model's name; optional when one model is served")


class TextRequest(Request):
    text: Text = Field(description="the sentence (at most StudioLimits.max_chars characters)")


class TranslateRequest(TextRequest):
    beam: Annotated[StrictInt, Field(ge=1, description="beam size (at most StudioLimits.max_beam)")] = 5
    nbest: Annotated[
        StrictInt,
        Field(ge=1, description="translations to return (at most StudioLimits.max_nbest); a beam holds at most beam"),
    ] = 1
    target: Target | None = Field(None, description="score and show this translation instead of searching")
    max_new_tokens: (
        Annotated[
            StrictInt, Field(ge=0, description="a decoder-only model: tokens to generate after the prompt (default 20)")
        ]
        | None
    ) = None
    packed: StrictBool = Field(
        False, description="the maps packed per layer (base64 of uint16 weight x 65535) instead of nested lists"
    )
    image: StrictStr | None = Field(
        None, description="an image model: the image (PNG or JPEG as base64 or a data URL); text names it"
    )
    audio: StrictStr | None = Field(
        None, description="a speech model: the sound (a WAV file as base64 or a data URL); text names it"
    )


class ExplainRequest(TextRequest):
    target: Target | None = Field(None, description="the output side to force (default: the model's own)")
    kind: Kind | None = Field(None, description="default: cross for a translator, encoder for an encoder")
    layer: Annotated[StrictInt, Field(ge=-64, le=63, description="from 0; negative counts from the last")] = -1
    head: Annotated[StrictInt, Field(ge=0, le=255)] = 0
    query: Annotated[StrictInt, Field(ge=-4096, le=4095, description="query position; negative from the end")] = 0
    max_new_tokens: Annotated[StrictInt, Field(ge=0, description="a decoder-only model: as in translate")] | None = None
    image: StrictStr | None = Field(None, description="an image model: as in translate")
    audio: StrictStr | None = Field(None, description="a speech model: as in translate")


class EmbedRequest(TextRequest):
    pass


Method = Literal[
    "attention", "rollout", "flow", "value-norm", "grad-attention", "integrated-gradients", "input-x-gradient"
]
Side = Literal["output", "encoder", "sentence"]


class AttributeRequest(TextRequest):
    method: Method | None = Field(
        None, description="one of attnkit attribute's methods; default grad-attention where the model takes it"
    )
    side: Side | None = Field(
        None,
        description="rows: the output tokens (the default where the model has an output), the encoder's "
        "top-layer positions, or an encoder model's sentence vector",
    )
    max_new_tokens: Annotated[StrictInt, Field(ge=0, description="a decoder-only model: as in translate")] | None = None
    image: StrictStr | None = Field(None, description="an image model: as in translate")
    audio: StrictStr | None = Field(None, description="a speech model: as in translate")


class CaptionRequest(Request):
    image: StrictStr | None = Field(None, description="a PNG or JPEG as base64 or a data URL")
    scene: Annotated[StrictInt, Field(ge=0, le=2**31 - 1, description="seed of a new held-out digit scene")] = 0


class MapRequest(Body):
    """One map of a record the server holds (``record`` from /api/translate)."""

    record: StrictStr = Field(description="the record's id, as /api/translate answered it")
    kind: Kind
    layer: Annotated[StrictInt, Field(ge=-4096, le=4095, description="from 0; negative counts from the last")] = -1
    head: Annotated[StrictInt, Field(ge=0, le=4095)] | Literal["mean"] = Field(
        "mean", description="or the mean of the heads"
    )


class OverviewRequest(MapRequest):
    rows: Annotated[StrictInt, Field(ge=1, le=2048, description="pixels down (at most the queries)")] = 512
    cols: Annotated[StrictInt, Field(ge=1, le=2048, description="pixels across (at most the keys)")] = 512
    reduce: Literal["max", "mean"] = Field("max", description="each pixel: the max or the mean of the cells it covers")
    region: list[Annotated[StrictInt, Field(ge=0)]] | None = Field(
        None, min_length=4, max_length=4, description="first query, end query, first key, end key (default: all)"
    )


class TileRequest(MapRequest):
    row: Annotated[StrictInt, Field(ge=0, description="first query")] = 0
    col: Annotated[StrictInt, Field(ge=0, description="first key")] = 0
    rows: Annotated[StrictInt, Field(ge=1, le=512)] = 64
    cols: Annotated[StrictInt, Field(ge=1, le=512)] = 64


class TopRequest(MapRequest):
    first: Annotated[StrictInt, Field(ge=0, description="first query")] = 0
    count: Annotated[StrictInt, Field(ge=1, le=2048, description="queries from the first")] = 1
    k: Annotated[StrictInt, Field(ge=1, le=64, description="strongest keys per query")] = 8


class HeadsRequest(Body):
    record: StrictStr = Field(description="the record's id, as /api/translate answered it")
    kind: Kind
    layer: Annotated[StrictInt, Field(ge=-4096, le=4095)] | None = Field(
        None, description="one layer; default every one"
    )
    sink: Annotated[StrictInt, Field(ge=1, le=64, description="the first keys counted as the sink")] = 1
    band: Annotated[StrictInt, Field(ge=0, le=4096, description="the local band, in positions")] = 8


class StreamingCache(Body):
    sinks: Annotated[StrictInt, Field(ge=0, le=64, description="the cache's first keys")] = 4
    window: Annotated[StrictInt, Field(ge=1, le=1 << 20, description="the cache's most recent keys")] = 1020


class AtlasRequest(Request):
    record: StrictStr = Field(description="the record's id, as /api/translate answered it")
    kind: Kind
    ablate: Literal["zero", "mean"] | None = Field(
        None, description="also remove each head alone (the model runs once per head): by 0, or by its mean"
    )
    streaming: StreamingCache | None = Field(
        None, description="also run each decoder head alone over a StreamingLLM cache (the model runs once per head)"
    )


class CircuitsRequest(Request):
    clean: Text = Field(description="the input whose behaviour is asked about")
    corrupt: Text = Field(description="the same input corrupted (as many tokens): what the patches start from")
    answer: Text = Field(description="the next token the clean input should give (one token)")
    foil: Text = Field(description="the next token the corrupted input favours (one token)")
    target: Target | None = Field(None, description="a translator: its output before the answer")
    metric: Literal["logit_diff", "prob", "loss"] = Field("logit_diff", description="read at the last position")
    paths: Annotated[StrictInt, Field(ge=0, le=12, description="path patching among this many strongest heads")] = 6


class QKRequest(Request):
    record: StrictStr = Field(description="the record's id, as /api/translate answered it")
    kind: Kind
    layer: Annotated[StrictInt, Field(ge=-4096, le=4095, description="from 0; negative counts from the last")] = -1
    head: Annotated[StrictInt, Field(ge=0, le=4095)] = 0
    query: Annotated[StrictInt, Field(ge=0, description="the query's position")] = 0
    key: Annotated[StrictInt, Field(ge=0)] | None = Field(None, description="the key's (default the brightest)")


REQUESTS: dict[str, type[BaseModel]] = {
    "translate": TranslateRequest,
    "explain": ExplainRequest,
    "embed": EmbedRequest,
    "attribute": AttributeRequest,
    "caption": CaptionRequest,
    "positions_png": Request,
    "overview": OverviewRequest,
    "tile": TileRequest,
    "top": TopRequest,
    "heads": HeadsRequest,
    "atlas": AtlasRequest,
    "circuits": CircuitsRequest,
    "qk": QKRequest,
}


# -- answers ------------------------------------------------------------------------------


class Error(BaseModel):
    error: str


class Limits(BaseModel):
    max_chars: int
    max_tokens: int
    max_beam: int
    max_nbest: int
    page_mb: int
    records_mb: int


class ServedCapabilities(BaseModel):
    """What a model can do (``attnkit.loaded.Capabilities``): the page asks these, never its class."""

    reads: Literal["text", "image", "audio"]
    writes: Literal["translation", "continuation", "caption"] | None
    kinds: list[Kind]
    verbs: list[Literal["translate", "generate", "encode", "caption", "transcribe"]]
    attributions: list[str] = Field(description="the methods /api/attribute runs on it")
    walkthrough: bool
    contextual: bool = Field(description="whether /api/embed answers for it (a text encoder)")
    positions: bool = Field(description="whether /api/positions draws its position tables")
    forced: bool = Field(description="whether a 'target' can be scored instead of its own output")
    summary: str = Field(description="what it is in a few words: encoder-decoder, decoder-only, ...")
    circuits: bool = Field(description="whether /api/circuits and /api/qk answer for it (a stream read into logits)")
    images: bool = Field(False, description="whether an 'image' goes beside its 'text' (a vision-language model)")


class ServedModel(BaseModel):
    name: str
    info: dict[str, Any] = Field(description="what the model is: arch, sizes, positional scheme")
    parameters: int
    capabilities: ServedCapabilities
    positions: list[str]
    origin: str
    max_tokens: int = Field(description="the longest input it takes here (tokens), as its limit says")
    max_tokens_by: Literal["its positions", "free memory", "the limit"] = Field(
        description="what sets max_tokens: the model's positions, the memory free at start, or max_tokens"
    )


class Models(BaseModel):
    models: list[ServedModel]
    limits: Limits


class Packed(BaseModel):
    """One kind's maps, a layer at a time: base64 of little-endian uint16 weight x 65535, (heads, queries, keys)."""

    shape: list[int] = Field(description="layers, heads, queries, keys of the whole map")
    layers: list[int] = Field(description="the layers held, one data string each")
    data: list[str]


class Example(BaseModel):
    """One sentence as the page draws it; ``maps[kind][layer][head][query][key]``."""

    source: str
    output: str | None
    src_tokens: list[str]
    tgt_in_tokens: list[str]
    tgt_out_tokens: list[str]
    window: int | None
    p_t: list[float] | None
    prompt_length: int | None = Field(description="a decoder-only model: how many tokens are the prompt's")
    image: str | None = Field(None, description="an image model: its input as it saw it, a PNG data URL")
    grid: list[int] | None = Field(
        None, description="an image model: rows and columns of its patches, the last of src_tokens, row-major"
    )
    image_tokens: list[int] | None = Field(
        None,
        description="a vision-language model: [first, rows, columns] of the image's tokens among tgt_in_tokens, "
        "row-major",
    )
    spectrogram: str | None = Field(
        None,
        description="a speech model: the log-mel its encoder heard as a PNG data URL, one pixel column per "
        "encoder position that holds sound (src_tokens' first), low frequencies at the bottom",
    )
    frame_seconds: float | None = Field(None, description="a speech model: seconds of sound per encoder position")
    maps: dict[Kind, list[list[list[list[float]]]]] = Field(description="empty when packed")
    packed: dict[Kind, Packed] | None = None
    remote: dict[Kind, list[int]] | None = Field(
        None, description="maps too large to send: {kind: [layers, heads, queries, keys]}, asked of the server"
    )


class Hypothesis(BaseModel):
    text: str
    score: float


class Translation(BaseModel):
    model: str
    translation: str | None = Field(description="the searched (or forced) output; null for an encoder")
    forced: bool
    score: float | None
    nbest: list[Hypothesis]
    example: Example
    record: str = Field(description="the id the views' requests (/api/overview, tile, top, heads) name it by")
    server_ms: float


Vector = list[float | None]  # null: a masked (-inf) score


class Walkthrough(BaseModel):
    model: str
    kind: Kind
    layer: int
    head: int
    query: int
    query_token: str
    query_label: str
    key_tokens: list[str]
    recurrent: bool
    score: str
    terms_formula: str
    factor: Vector | None
    factor_formula: str
    d_k: int
    scale: float
    q: Vector
    k: list[Vector]
    v: list[Vector]
    terms: list[Vector]
    raw: Vector
    bias: Vector | None
    allowed: list[bool]
    scaled: Vector
    weights: Vector
    unscaled_weights: Vector
    context: Vector
    p_t: float | None
    window: int | None
    gauss: Vector | None
    in_window: Vector | None = Field(description="local-p: the softmax inside the window, before the Gaussian")
    max_error: float | None
    server_ms: float


class Embedding(BaseModel):
    model: str
    tokens: list[str]
    depths: list[str]
    similarity: list[list[list[float]]]
    repeated: list[list[int]]


class CaptionExample(BaseModel):
    name: str
    words: list[str]
    image: list[list[int]] | list[list[list[int]]] = Field(description="pixels 0-255, grey or RGB")
    attention: list[list[list[float]]] = Field(description="(words, grid rows, grid columns)")
    reference: str | None
    boxes: list[dict[str, int] | None] | None
    inside: list[float | None] | None


class Caption(BaseModel):
    model: str
    example: CaptionExample
    server_ms: float


class Attribution(BaseModel):
    """Where each output token (or top-layer position of the encoder) draws from, by one method;
    rows sum to 1."""

    model: str
    method: Method
    label: str
    side: Side
    rows: list[str] = Field(description="the output tokens, or the encoder's top-layer positions")
    tokens: list[str] = Field(description="the input tokens (the columns)")
    output: str = Field(description="the output the rows explain (empty on the encoder side)")
    scores: list[list[float]] = Field(description="(rows, input tokens)")
    server_ms: float


class Overview(BaseModel):
    """A map pooled to rows x cols pixels; pixel (i, j) covers queries floor(i T / rows) ..
    floor((i + 1) T / rows) - 1 and keys likewise."""

    shape: list[int] = Field(description="queries, keys of the whole map")
    region: list[int] = Field(description="first query, end query, first key, end key pooled")
    causal: bool = Field(description="key j is hidden from query i past i + keys - queries: those cells are masked")
    rows: int
    cols: int
    reduce: Literal["max", "mean"]
    top: float = Field(description="the largest pixel")
    data: str = Field(description="base64 of little-endian float32, row-major")
    server_ms: float


class Tile(BaseModel):
    """Exact weights of rows x cols cells from (row, col)."""

    row: int
    col: int
    rows: int
    cols: int
    data: str = Field(description="base64 of little-endian float32, row-major")
    server_ms: float


class Top(BaseModel):
    first: int
    keys: list[list[int]] = Field(description="per query from the first: its strongest keys, strongest first")
    weights: list[list[float]]
    server_ms: float


class HeadLayer(BaseModel):
    layer: int
    stats: dict[str, list[float]] = Field(
        description="entropy, normalised, max_weight, sink, local, distance: per head"
    )


class Heads(BaseModel):
    """Every head's summaries, each the mean over its queries (``attnkit.attention.record.head_stats``)."""

    kind: Kind
    layers: list[HeadLayer]
    server_ms: float


Grid = list[list[float | None]]  # (layers, heads); None: not measured


class AtlasDetector(BaseModel):
    name: str
    paper: str
    threshold: float | None = Field(description="a head at or past it is flagged; None: the detector ranks heads")
    means: str
    unit: str
    values: Grid


class AtlasAblation(BaseModel):
    mode: Literal["zero", "mean"]
    measure: str = Field(description="what is measured: the output tokens' loss, or an encoder's sentence vector lost")
    base: float = Field(description="the measure with every head")
    effect: Grid = Field(description="the measure with the head ablated alone, less the base")
    importance: Grid = Field(description="Michel et al. 2019: |d measure / d gate| on the head")


class AtlasStreaming(BaseModel):
    sinks: int
    window: int
    measure: str = Field(description="what is measured: the output tokens' loss")
    base: float = Field(description="the measure with every head exact")
    threshold: float = Field(description="a head costing more is a retrieval head (or losing more of a needle)")
    cost: Grid = Field(description="the measure with the head alone over the cache, less the base")
    estimate: Grid = Field(description="the first-order cost, <dL/dz, z' - z>")
    outside: Grid = Field(description="each query's weight on the keys the cache drops, the mean past it")
    change: Grid = Field(description="|z' - z| / |z|, the head's output change over the cache")
    classes: list[list[str]] = Field(description="each head's class: streaming, retrieval, or empty (not measured)")
    needle: Grid | None = Field(
        None, description="where the input ends with a copy of an earlier span: the share of it predicted, the head "
        "alone over the cache",
    )  # fmt: skip
    needle_base: float | None = Field(None, description="the share of the copy predicted with every head exact")
    needle_drop: float | None = Field(None, description="a head losing more of the copy is a retrieval head")


class Atlas(BaseModel):
    """What each head of one kind does (``attnkit.heads``): every detector that applies, scored on
    the held record, and with ``ablate`` whether the model needs each head."""

    kind: Kind
    layers: int
    heads: int
    unscored: list[str] = Field(description="detectors that apply but that no query of this input takes")
    detectors: list[AtlasDetector]
    offsets: list[list[int]] | None = Field(description="the positional detector's offset per head")
    ablation: AtlasAblation | None = None
    streaming: AtlasStreaming | None = None
    server_ms: float


class CircuitHead(BaseModel):
    name: str = Field(description="blocks.1.attn.h2")
    layer: int
    head: int
    column: int = Field(description="the head's column in the grid: a layer's sites side by side")


class CircuitPath(BaseModel):
    sender: int = Field(description="index into heads")
    receiver: int
    via: Literal["q", "k", "v"]
    effect: float = Field(description="0: the corrupted run, 1: the clean one")
    composition: float | None = Field(description="the weights' composition score (None: not made by the weights)")


class Circuits(BaseModel):
    """Which heads carry one behaviour (``attnkit.circuits``), each measure one value per head."""

    metric: str
    clean: float = Field(description="the metric on the clean input")
    corrupt: float
    layers: int
    columns: list[str] = Field(description="the grid's column groups: each site of a layer, its heads side by side")
    heads: list[CircuitHead]
    activation: list[float] = Field(description="activation patching: each head's effect (1 restores the clean run)")
    attribution: list[float] = Field(description="attribution patching: the same to first order")
    agreement: float | None = Field(description="Pearson's r of the two")
    logit: list[float | None] | None = Field(description="direct logit attribution to the answer (less the foil)")
    logit_refused: str | None = Field(description="why there is none (a stream that is not a sum of writes)")
    copying: list[float | None] | None = Field(description="each head's OV copying score")
    copying_refused: str | None = Field(description="why there is none (no token basis)")
    paths: list[CircuitPath] = Field(description="path patching among the strongest heads, largest effect first")
    paths_refused: str | None
    paths_unweighted: str | None = Field(description="why the paths have no composition scores")
    server_ms: float


class QKTerm(BaseModel):
    query_writer: str
    key_writer: str
    score: float
    share: float | None


class QKShare(BaseModel):
    writer: str
    score: float


class QK(BaseModel):
    """Why one head attends where it does: its score at one cell by the writers of the two streams."""

    site: str
    head: int
    query: int
    key: int
    query_token: str
    key_token: str
    score: float
    bias: float
    weight: float
    by_query: list[QKShare]
    by_key: list[QKShare]
    terms: list[QKTerm] = Field(description="the largest terms, largest first")
    server_ms: float


ANSWERS: dict[str, type[BaseModel]] = {
    "translate": Translation,
    "explain": Walkthrough,
    "embed": Embedding,
    "attribute": Attribution,
    "caption": Caption,
    "overview": Overview,
    "tile": Tile,
    "top": Top,
    "heads": Heads,
    "atlas": Atlas,
    "circuits": Circuits,
    "qk": QK,
}


def parse_request(call: str, body: object) -> dict[str, Any]:
    """``body`` checked against ``call``'s request model: its fields with defaults filled in, or
    ValueError with one line naming the first problem (in the words the API's errors use)."""
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object")
    try:
        return REQUESTS[call].model_validate(body).model_dump()
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        raise ValueError(_message(first)) from None


def _message(e: Any) -> str:
    key = ".".join(str(p) for p in e["loc"] if not isinstance(p, int)) or "body"
    kind, ctx = e["type"], e.get("ctx", {})
    if kind == "missing":
        return f"'{key}' is required"
    if kind == "string_type":
        return (
            f"'{key}' must be a base64 string (a data URL of a PNG or JPEG)"
            if key == "image"
            else f"'{key}' must be a base64 string (a data URL of a WAV file)"
            if key == "audio"
            else f"'{key}' must be a string"
        )
    if kind in ("string_too_short", "string_pattern_mismatch"):
        return f"'{key}' is empty"
    if kind in ("int_type", "int_from_float", "int_parsing"):
        return f"'{key}' must be an integer"
    if kind == "greater_than_equal":
        return f"'{key}' must be >= {ctx['ge']}, got {e['input']}"
    if kind == "less_than_equal":
        return f"'{key}' must be <= {ctx['le']}, got {e['input']}"
    if kind == "literal_error":
        return f"'{key}' must be {ctx['expected']}, got {e['input']!r}"
    return f"'{key}': {e['msg']}"


def openapi(served: dict[str, Any] | None = None, limits: Any = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the studio's routes, from the models above; with ``served``
    (name -> ``Capabilities``) and ``limits`` (``StudioLimits``), this server's own contract:
    each route's ``model`` one of the served models that can take it (a route none can take is
    left out), and the limits an operator set as the fields' bounds (``served_document``)."""
    from pydantic.json_schema import models_json_schema

    models: list[type[BaseModel]] = [*REQUESTS.values(), *ANSWERS.values(), Models, Error]
    _, defs = models_json_schema([(m, "validation") for m in models], ref_template="#/components/schemas/{model}")

    def ref(model: type[BaseModel]) -> dict[str, str]:
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    errors = {
        str(code): {"description": text, "content": {"application/json": {"schema": ref(Error)}}}
        for code, text in (
            (400, "the body is not JSON"),
            (404, "no such model"),
            (413, "over a limit this document cannot declare: tokens, memory (the limit is named)"),
            (422, "a value the request, this server's limits or the model cannot take"),
        )
    }

    def post(call: str, summary: str) -> dict[str, Any]:
        return {
            "post": {
                "summary": summary,
                "requestBody": {"required": True, "content": {"application/json": {"schema": ref(REQUESTS[call])}}},
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref(ANSWERS[call])}}}, **errors},
            }
        }  # fmt: skip

    document = {
        "openapi": "3.1.0",
        "info": {"title": "attnkit studio", "version": __version__},
        "paths": {
            "/api/models": {
                "get": {
                    "summary": "the served models and the request limits",
                    "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref(Models)}}}},
                }
            },
            "/api/translate": post("translate", "translate (or force a translation) and return every attention map"),
            "/api/explain": post("explain", "the Q/K/V (or Luong) walk-through of one query"),
            "/api/embed": post("embed", "contextual-vector similarities of a pretrained encoder"),
            "/api/attribute": post("attribute", "where each output token or encoder position draws from, by one method"),
            "/api/caption": post("caption", "caption an image or a new held-out digit scene, with each word's attention"),
            "/api/overview": post("overview", "one map of a held record pooled to the pixels asked (max or mean)"),
            "/api/tile": post("tile", "exact weights of a block of one map of a held record"),
            "/api/top": post("top", "each query's strongest keys in one map of a held record"),
            "/api/heads": post("heads", "every head's summaries (entropy, sink, local, distance) of a held record"),
            "/api/atlas": post("atlas", "what each head of a held record does, and with ablate whether the model needs it"),
            "/api/circuits": post("circuits", "which heads carry a behaviour: patching, paths, logit attribution, OV"),
            "/api/qk": post("qk", "why a head of a held record attends where it does at one cell"),
            "/api/positions": {
                "get": {
                    "summary": "a PNG of the model's positional scheme",
                    "parameters": [{"name": "model", "in": "query", "required": False, "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "PNG", "content": {"image/png": {}}}, **errors},
                }
            },
        },
        "components": {"schemas": defs["$defs"]},
    }  # fmt: skip
    return document if served is None else served_document(document, served, limits)


# what a served model must be able to do for each request that names one (Capabilities -> bool)
TAKES: dict[str, Any] = {
    "TranslateRequest": lambda c: True,
    "ExplainRequest": lambda c: c.walkthrough,
    "EmbedRequest": lambda c: c.contextual,
    "AttributeRequest": lambda c: bool(c.attributions),
    "CaptionRequest": lambda c: "caption" in c.verbs,
    "CircuitsRequest": lambda c: c.circuits,
    "QKRequest": lambda c: c.circuits,
}


def served_document(document: dict[str, Any], served: dict[str, Any], limits: Any) -> dict[str, Any]:
    """``document`` narrowed to one server (see ``openapi``): each request that names a model is one
    of a variant per served model that can take it, holding only the fields that model takes."""
    schemas = document["components"]["schemas"]
    for name, takes in TAKES.items():
        can = {n: c for n, c in served.items() if takes(c)}
        if not can:
            document["paths"] = {k: v for k, v in document["paths"].items() if _request_of(v) != name}
            continue
        base = schemas[name]
        for key in ("text", "target"):
            if key in base["properties"]:
                _bound(base["properties"][key], "maxLength", limits.max_chars)
        if name == "TranslateRequest":
            _bound(base["properties"]["beam"], "maximum", limits.max_beam)
            _bound(base["properties"]["nbest"], "maximum", limits.max_nbest)
        unnamed = len(served) == 1  # the one model may go unnamed
        variants = [_variant(base, model, c, unnamed) for model, c in sorted(can.items())]
        schemas[name] = {"title": base.get("title", name), "oneOf": variants}
    return document


def _variant(base: dict[str, Any], model: str, c: Any, unnamed: bool) -> dict[str, Any]:
    """``base`` for one served model: its name, and only the values it takes."""
    props = {k: dict(v) for k, v in base["properties"].items()}
    none = {"type": "null"}
    props["model"] = {"anyOf": [{"const": model}, none]} if unnamed else {"const": model}
    if "target" in props and not c.forced:
        props["target"] = none  # it has no output side to force
    if "max_new_tokens" in props and c.writes != "continuation":
        props["max_new_tokens"] = none
    if "image" in props and c.reads != "image" and not c.images:
        props["image"] = none
    if "audio" in props and c.reads != "audio":
        props["audio"] = none
    if "kind" in props and "query" in props:  # explain: one of its kinds
        props["kind"] = {"anyOf": [{"enum": list(c.kinds)}, none]}
    required = list(base.get("required", [])) + ([] if unnamed else ["model"])
    if "method" in props:  # attribute: one variant per side it has, with the methods that side takes
        return {"oneOf": [_side(props, required, c, side, first) for first, side in _first(attribution_sides(c))]}
    return {"type": "object", "properties": props, "required": required}


def _first(items: list[str]) -> list[tuple[bool, str]]:
    return [(i == 0, x) for i, x in enumerate(items)]


def _side(props: dict[str, Any], required: list[str], c: Any, side: str, default: bool) -> dict[str, Any]:
    """attribute's request for one side of a model: the side (left out: the model's first side) and
    the methods that explain it."""
    methods = attribution_methods(c, side)
    one = {"const": side}
    return {
        "type": "object",
        "properties": {**props, "side": {"anyOf": [one, {"type": "null"}]} if default else one,
                       "method": {"anyOf": [{"enum": methods}, {"type": "null"}]}},
        "required": required if default else [*required, "side"],
    }  # fmt: skip


def attribution_sides(c: Any) -> list[str]:
    """The sides ``attribute`` explains on a model of capabilities ``c``, its default first."""
    from ..attribution.methods import sides_of

    return sides_of(c.kinds, decoder_only=c.continues)


def attribution_methods(c: Any, side: str) -> list[str]:
    """The methods of a model of capabilities ``c`` that explain ``side``; the default (gradient-
    weighted attention where it applies) first."""
    from ..attribution.methods import applicable_to

    found = [m for m in applicable_to(c.kinds, side, with_model=True, decoder_only=c.continues)
             if m in c.attributions]  # fmt: skip
    return sorted(found, key=lambda m: m != "grad-attention")


def _request_of(path: dict[str, Any]) -> str | None:
    body = path.get("post", {}).get("requestBody", {}).get("content", {}).get("application/json", {})
    return body.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1] or None


def _bound(prop: dict[str, Any], key: str, value: int) -> None:
    target = next((a for a in prop.get("anyOf", []) if a.get("type") in ("string", "integer")), prop)
    target[key] = value

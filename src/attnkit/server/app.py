"""`attnkit serve`: the attention studio as a local web application (Starlette on uvicorn).

Routes (all answers JSON unless said otherwise; errors are ``{"error": "..."}`` with a 4xx):

    GET  /                    the page (the same page `attnkit view` writes, in live mode)
    GET  /api/models          the served models and the request limits
    GET  /api/openapi.json    the OpenAPI document of these routes (server/schema.py declares them)
    POST /api/translate       {model, text, beam?, nbest?, target?} -> translation, n-best, every attention map
    POST /api/explain         {model, text, target?, kind?, layer?, head?, query?} -> the Q/K/V walk-through
    POST /api/embed           {model, text} -> contextual-vector similarities (pretrained encoders)
    GET  /api/positions?model=NAME   PNG of the model's positional scheme
    GET  /captions            the captioning page (the page `attnkit demo --task caption` writes, live)
    POST /api/caption         {model, image | scene} -> caption of an uploaded image (base64 PNG/JPEG)
                              or of a new held-out digit scene, with each word's attention over the image
    POST /api/overview        {record, kind, layer, head, rows, cols, reduce} -> one map pooled to pixels
    POST /api/tile            {record, kind, layer, head, row, col, rows, cols} -> exact weights of a block
    POST /api/top             {record, kind, layer, head, first, count, k} -> each query's strongest keys
    POST /api/heads           {record, kind, layer?, sink?, band?} -> every head's summaries
    POST /api/atlas           {model, record, kind, ablate?} -> every detector's score of every head,
                              and with ablate each head's ablation effect and importance
    POST /api/circuits        {model, clean, corrupt, answer, foil, target?, metric?, paths?} -> every
                              head's patching effects, logit attribution and OV copying; the strongest paths
    POST /api/qk              {model, record, kind, layer, head, query, key?} -> one cell's score by the
                              writers of the query's and the key's streams

Every request passes ``guard``'s rules first (this machine's Host, the page's own Origin, JSON
bodies, a token beyond loopback). Models load once at start; each request runs in a worker thread (at most ``workers`` at
once, one at a time per model), never on the event loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
from ipaddress import ip_address

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..errors import as_fields
from ..viewer.captions import caption_page
from ..viewer.html import page_html
from .guard import Guard, Guarded
from .limits import StudioLimits
from .schema import openapi
from .service import VIEWS, RequestError, Studio, default_models

MAX_BODY = 2 * 1024 * 1024  # bytes of one request body: 30 s of 16 kHz sound as base64 WAV fits
LOG = logging.getLogger("attnkit.server")
HEADERS = {  # the page is self-contained: it may talk only to this server (data: URLs: its own maps, decoded)
    "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self' data:; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": as_fields(message)}, status_code=status, headers=HEADERS)


def create_app(
    studio: Studio, *, workers: int = 2, title: str = "attnkit studio", guard: Guard | None = None
) -> Guarded:
    """The ASGI application answering for ``studio``'s models, only the requests ``guard`` lets in
    (default: from this machine's loopback names, the page's own origin, JSON bodies)."""
    limiter = anyio.CapacityLimiter(workers)
    page = page_html({"model": {}, "examples": [], "live": studio.describe()}, title=title)
    captions_page = caption_page([], [], title=f"{title}: attention over an image", live=studio.describe())

    async def run(call: str, payload: object) -> object:
        try:
            return await anyio.to_thread.run_sync(studio.run, call, payload, limiter=limiter)
        except RequestError as err:
            return _error(err.status, str(err))
        except ValueError as err:  # a value the model cannot take (a query out of range, a token limit)
            return _error(422, str(err))
        except Exception:  # a bug must not take the server down: log it, answer 500
            LOG.exception("request %s failed", call)
            return _error(500, f"internal error while answering {call}; see the server's log")

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers=HEADERS)

    async def captions(request: Request) -> Response:
        return HTMLResponse(captions_page, headers=HEADERS)

    async def models(request: Request) -> Response:
        return JSONResponse(studio.describe(), headers=HEADERS)

    def post(call: str):
        async def endpoint(request: Request) -> Response:
            body = await request.body()
            if len(body) > MAX_BODY:
                return _error(413, f"the request body is {len(body)} bytes; the limit is {MAX_BODY}")
            try:
                payload = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                return _error(400, "the request body is not valid JSON")
            result = await run(call, payload)
            return result if isinstance(result, Response) else JSONResponse(result, headers=HEADERS)

        return endpoint

    async def positions(request: Request) -> Response:
        result = await run("positions_png", {"model": request.query_params.get("model")})
        if isinstance(result, Response):
            return result
        return Response(result, media_type="image/png", headers={**HEADERS, "Cache-Control": "max-age=3600"})

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)

    document = openapi({n: m.model.capabilities for n, m in studio.models.items()}, studio.limits)

    async def api_document(request: Request) -> Response:
        return JSONResponse(document, headers=HEADERS)

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/favicon.ico", no_icon, methods=["GET"]),
        Route("/api/models", models, methods=["GET"]),
        Route("/api/openapi.json", api_document, methods=["GET"]),
        Route("/api/translate", post("translate"), methods=["POST"]),
        Route("/api/explain", post("explain"), methods=["POST"]),
        Route("/api/embed", post("embed"), methods=["POST"]),
        Route("/api/attribute", post("attribute"), methods=["POST"]),
        Route("/api/positions", positions, methods=["GET"]),
        Route("/captions", captions, methods=["GET"]),
        Route("/api/caption", post("caption"), methods=["POST"]),
        Route("/api/atlas", post("atlas"), methods=["POST"]),
        Route("/api/circuits", post("circuits"), methods=["POST"]),
        Route("/api/qk", post("qk"), methods=["POST"]),
        *(Route(f"/api/{call}", post(call), methods=["POST"]) for call in VIEWS),
    ]
    return Guarded(Starlette(routes=routes), guard or Guard())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def check_port(host: str, port: int) -> None:
    """A clear error now, instead of uvicorn's log line, when the address is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as err:
            raise ValueError(f"cannot listen on {host}:{port}: {err.strerror} (choose another --port)") from None


def serve(
    sources: list[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: StudioLimits | None = None,
    device: str = "auto",
    workers: int = 2,
    allow_hosts: list[str] | None = None,
    token: str | None = None,
) -> None:
    """Load ``sources`` (default: ``default_models()``) and serve them until Ctrl-C: to requests
    whose Host is a loopback name or one of ``allow_hosts``; beyond loopback, to those that carry
    the token (``token``, or a new random one printed in the URL)."""
    import uvicorn

    check_port(host, port)
    studio = Studio(sources or default_models(), limits=limits, device=device)
    guard = Guard.listening(host, allow_hosts, token)
    if guard.token is not None:
        print(
            f"note: listening on {host}, beyond loopback: every request must carry the token in the URL below",
            file=sys.stderr,
        )
    config = uvicorn.Config(
        create_app(studio, workers=workers, guard=guard), host=host, port=port, log_level="warning", access_log=False
    )
    names = ", ".join(studio.models)
    shown = f"[{host}]" if ":" in host else host
    ask = f"?token={guard.token}" if guard.token else ""
    pages = f"http://{shown}:{port}/{ask}" + (
        f" (held-out scenes to caption: http://{shown}:{port}/captions{ask})" if studio.captioners() else ""
    )

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started:  # listening now: the address printed works
                print(f"attnkit studio: {pages}  ({names}); Ctrl-C stops it", flush=True)

    # uvicorn shuts down gracefully and passes Ctrl-C on: stopping is the normal end
    with contextlib.suppress(KeyboardInterrupt):
        Server(config).run()
    print("attnkit studio: stopped", flush=True)

"""Who may use the studio: its user, never a web page the user happens to visit.

The studio is a web server on the user's machine, and every request may come from a hostile
page, as Jupyter's server assumes. The rules, checked on every request before it is answered:

- ``Host`` must name this machine as its user reaches it: a loopback name or address
  (``localhost``, ``127.0.0.1``, ``[::1]``), a name given with ``--allow-host``, or (listening
  beyond loopback) an IP address. A page on a domain that re-binds its name to 127.0.0.1 (DNS
  rebinding) sends its own name and is refused (403).
- A request that changes or computes something (every POST) must carry its JSON as
  ``Content-Type: application/json`` (else 415: a browser sends ``text/plain`` across sites
  without asking first), and an ``Origin``, where it has one, of this studio itself (else 403).
- Listening beyond loopback, every request must carry the server's token (else 401): the URL
  printed at start holds it (``?token=``), the page then keeps it in a cookie that no other
  site's request carries (``SameSite=Strict``); a script sends ``Authorization: token T``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from ipaddress import ip_address
from urllib.parse import parse_qs, urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import as_fields

COOKIE = "attnkit_token"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def host_name(host: str) -> str:
    """A ``Host`` header's name, lowercased, without its port (an IPv6 address without brackets)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_ip(name: str) -> bool:
    try:
        ip_address(name)
    except ValueError:
        return False
    return True


def _loopback(name: str) -> bool:
    return name in LOOPBACK_NAMES or (_is_ip(name) and ip_address(name).is_loopback)


@dataclass(frozen=True)
class Guard:
    """The studio's rules: the host names let in beside loopback, and the token (``None``:
    loopback only, no token asked)."""

    allowed: frozenset[str] = frozenset()
    token: str | None = None
    any_address: bool = False  # listening beyond loopback: an IP address in Host is this machine's

    @classmethod
    def listening(cls, host: str, allowed: list[str] | None = None, token: str | None = None) -> Guard:
        """The guard of a studio listening on ``host``: beyond loopback, a token (``token``, or a
        new random one) is asked of every request."""
        from .app import is_loopback

        names = frozenset(host_name(a) for a in allowed or [])
        if is_loopback(host):
            return cls(names, token)
        return cls(names | ({host_name(host)} if not _is_ip(host) else set()), token or secrets.token_urlsafe(24), True)

    def host_refused(self, host: str) -> str | None:
        name = host_name(host)
        if _loopback(name) or name in self.allowed or (self.any_address and _is_ip(name)):
            return None
        return (
            f"Host {host!r} is not this studio's: a page may re-bind its name to this machine "
            f"(attnkit serve --allow-host {name} lets it in)"
        )


@dataclass
class _Request:
    method: str
    headers: dict[str, str]
    query: dict[str, list[str]] = field(default_factory=dict)


class Guarded:
    """An ASGI application answering only the requests its guard lets in; the others get one
    JSON line. Everything else (its routes) is the application's."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app, self.guard = app, guard

    def __getattr__(self, name: str):
        return getattr(self.app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        guard = self.guard
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        request = _Request(scope["method"], headers, parse_qs(scope.get("query_string", b"").decode("latin-1")))
        refused = _refused(request, guard)
        if refused is not None:
            await _answer(send, *refused)
            return
        given = request.query.get("token", [None])[0]
        if guard.token is None or given is None or not secrets.compare_digest(given, guard.token):
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message):  # the page keeps the token: its own requests carry it
            if message["type"] == "http.response.start":
                cookie = f"{COOKIE}={guard.token}; Path=/; HttpOnly; SameSite=Strict"
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())]}
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _refused(request: _Request, guard: Guard) -> tuple[int, str] | None:
    """(status, why) for a request the studio refuses, or None."""
    host = request.headers.get("host", "")
    why = guard.host_refused(host)
    if why is not None:
        return 403, why
    if guard.token is not None and not _has_token(request, guard.token):
        return 401, (
            "this studio listens beyond loopback and asks for its token: open the URL it printed (with ?token=), "
            "or send Authorization: token T"
        )
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return None
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return 415, f"the request body must be JSON sent as Content-Type: application/json, not {kind or 'none'!r}"
    origin = request.headers.get("origin")
    if origin is not None and not _same_origin(origin, host):
        return 403, f"a request from {origin!r} is not this studio's own page: refused"
    return None


def _same_origin(origin: str, host: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.strip().lower()


def _has_token(request: _Request, token: str) -> bool:
    given = [request.query.get("token", [""])[0]]
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("token "):
        given.append(auth[6:].strip())
    cookie = SimpleCookie()
    try:
        cookie.load(request.headers.get("cookie", ""))
    except CookieError:  # a malformed cookie header is no token
        cookie = SimpleCookie()
    if COOKIE in cookie:
        given.append(cookie[COOKIE].value)
    return any(g and secrets.compare_digest(g, token) for g in given)


async def _answer(send: Send, status: int, message: str) -> None:
    import json

    from .app import HEADERS

    body = json.dumps({"error": as_fields(message)}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

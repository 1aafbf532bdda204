"""The ASGI application: :func:`create_app` (FastAPI on Starlette; run by uvicorn).

Cross-cutting rules live here: the body-size limit (413 before anything is parsed; the curator
page's login page for a ``/curator`` form), one-line JSON errors for every failure (no
tracebacks, no echo of the input), security headers (with ``Strict-Transport-Security`` on
HTTPS or behind a declared TLS proxy), the per-analyst cap on requests in flight (429), the
library's warnings routed to the curator's log, and the mapping of
:class:`~privirt.serve.service.RequestFailed` and authentication errors.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .auth import AuthError
from .page import KEY_TOO_LONG, login_page
from .routers import analyst, curator
from .service import NOT_FOUND, RequestFailed, load_datasets, state_unavailable
from ._backends import StateUnavailable
from ._deadline import check_state_deadline
from .store import Store, open_store
from ._limits import MAX_BODY

__all__ = ["create_app", "app_from_env", "MAX_BODY", "MAX_IN_FLIGHT", "InFlight", "route_warnings"]

#: Default number of requests (spending ones and data set listings) one analyst may have running at
#: once (per process).
MAX_IN_FLIGHT = 2
#: ``Strict-Transport-Security`` sent on HTTPS responses (one year; no preload).
HSTS = (b"strict-transport-security", b"max-age=31536000")
_log = logging.getLogger("privirt.serve")

_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy",
     b"default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'"),
    (b"cache-control", b"no-store"),
]

#: the curator's login page answering a form over the body limit (413)
_TOO_LONG_PAGE = login_page(KEY_TOO_LONG)


async def _send_now(send, status: int, body: dict, headers=_SECURITY_HEADERS, *,
                    html: str | None = None) -> None:
    """Answer ``body`` as JSON, or the page ``html`` when given, and close the connection."""
    data = json.dumps(body).encode() if html is None else html.encode()
    kind = b"application/json" if html is None else b"text/html; charset=utf-8"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind), (b"content-length", str(len(data)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": data})


class _Limits:
    """ASGI middleware: the body limit (413) and the security headers on every response
    (``Strict-Transport-Security`` too when the connection is HTTPS or ``tls_proxy`` declares
    that every request reaches the service through a TLS-terminating proxy)."""

    def __init__(self, app, max_body: int, tls_proxy: bool = False) -> None:
        self.app = app
        self.max_body = max_body
        self.tls_proxy = tls_proxy

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _SECURITY_HEADERS + ([HSTS] if self.tls_proxy or scope.get("scheme") == "https" else [])
        too_big = {"detail": f"request body larger than {self.max_body} bytes; nothing was spent"}
        # the curator page's form (a key pasted with more than the key) gets the page, not JSON
        path = scope.get("path", "")
        page = _TOO_LONG_PAGE if path == "/curator" or path.startswith("/curator/") else None
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _send_now(send, 413, too_big, headers, html=page)
            return
        body, more = b"", True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
            if len(body) > self.max_body:
                await _send_now(send, 413, too_big, headers, html=page)
                return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in headers if k not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, replay, send_with_headers)


class InFlight:
    """How many requests (spending ones and ``GET /v1/datasets``) each analyst has running in this
    process, capped at ``limit``.

    :meth:`acquire` is called by the request's handler before any work (a refusal is a 429:
    nothing is read, nothing spent); the slot is given back by the worker thread when the work
    is really done (:meth:`release`), so an analyst who drops connections cannot pile up work
    in the server's thread pool.  Thread-safe.
    """

    def __init__(self, limit: int = MAX_IN_FLIGHT) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"the in-flight limit must be a positive integer, got {limit!r}")
        self.limit = limit
        self._lock = threading.Lock()
        self._n: dict[int, int] = {}

    def acquire(self, analyst_id: int) -> bool:
        with self._lock:
            k = self._n.get(analyst_id, 0)
            if k >= self.limit:
                return False
            self._n[analyst_id] = k + 1
            return True

    def release(self, analyst_id: int) -> None:
        with self._lock:
            k = self._n.get(analyst_id, 0) - 1
            if k > 0:
                self._n[analyst_id] = k
            else:
                self._n.pop(analyst_id, None)

    def running(self, analyst_id: int) -> int:
        with self._lock:
            return self._n.get(analyst_id, 0)


class _WarningLine(logging.Formatter):
    """One line per warning, as uvicorn writes its own: ``WARNING:  Category: message``.

    :func:`warnings.formatwarning` gives ``file:line: Category: message`` and the source line;
    the server's file paths and the source line are left out, and a message's own line breaks
    become spaces.
    """

    _HEAD = re.compile(r"(?s).*?:\d+: ([A-Za-z_]\w*: .*)")

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        head = self._HEAD.match(text)
        if head is not None:
            text = head.group(1).rstrip("\n")
            first, sep, last = text.rpartition("\n")
            if sep and last.startswith("  "):  # the source line formatwarning appends
                text = first
        return f"{record.levelname}:  " + " ".join(text.split("\n"))


class _CuratorLog(logging.StreamHandler):
    """The handler :func:`route_warnings` gives ``py.warnings`` (stderr, one line a warning)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(_WarningLine())


def _handled(logger: logging.Logger) -> bool:
    """Whether ``logger`` or an ancestor it propagates to has a handler that writes somewhere."""
    node: logging.Logger | None = logger
    while node is not None:
        if any(not isinstance(h, logging.NullHandler) for h in node.handlers):
            return True
        node = node.parent if node.propagate else None
    return False


def route_warnings() -> None:
    """Send the library's warnings (convergence notes and the like) to the curator's log.

    Called once when the app is built, never per request: ``warnings.catch_warnings`` swaps
    process-wide state and is not safe under concurrent requests.  :func:`logging.captureWarnings`
    routes every warning to the ``py.warnings`` logger; when neither it nor the root logger has a
    handler (uvicorn configures only its own loggers), it gets one writing each warning as one
    line to stderr, next to uvicorn's log (once: a second call adds nothing, and a root handler
    an embedding application configures later does not print them again).  An analyst never
    sees them (responses carry only the result and its statement).
    """
    logging.captureWarnings(True)
    log = logging.getLogger("py.warnings")
    if not _handled(log):
        log.addHandler(_CuratorLog())
        log.propagate = False  # (a root handler configured later would print each warning again)


def create_app(state: Store | str, *, max_body: int = MAX_BODY, max_in_flight: int = MAX_IN_FLIGHT,
               tls_proxy: bool = False, state_deadline: float | None = None) -> Any:
    """The service for a state (an open :class:`Store`, a path or a ``postgresql://`` URL).

    ``max_in_flight``: requests (spending ones and data set listings) one analyst may have running
    at once in this process (more get 429 with ``Retry-After``, nothing spent).  ``tls_proxy``: every request arrives
    through a TLS-terminating reverse proxy — send ``Strict-Transport-Security`` and mark the
    curator page's session cookie ``Secure`` (both are automatic when uvicorn serves HTTPS
    itself).  ``state_deadline``: seconds each transaction on a PostgreSQL state may take
    (default ``_deadline.STATE_DEADLINE``, 30 s; a ValueError for a SQLite state).
    """
    store = state if isinstance(state, Store) else open_store(state)
    if state_deadline is not None:
        store.set_deadline(check_state_deadline(state_deadline, "state_deadline"), "state_deadline")
    load_datasets(store)  # an older state's compressed blobs decode now, not within a request's time
    route_warnings()
    app = FastAPI(
        title="privirt serve",
        summary="Private item-response estimates within allowances the analysts cannot bypass.",
        version=_version(),
        docs_url=None, redoc_url=None,  # the API is described at /openapi.json (no CDN scripts)
    )
    app.state.store = store
    app.state.in_flight = InFlight(max_in_flight)
    app.state.tls_proxy = bool(tls_proxy)
    app.include_router(analyst.router)
    app.include_router(curator.router)

    @app.exception_handler(RequestFailed)
    async def _failed(request: Request, exc: RequestFailed):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(AuthError)
    async def _auth(request: Request, exc: AuthError):
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
        return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        err = (exc.errors() or [{}])[0]
        loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body", "header", "path", "query"))
        return JSONResponse({"detail": f"{loc or 'request'}: {err.get('msg', 'invalid')}"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 404:  # every 404 reads the same (unknown route, data set or request)
            return JSONResponse({"detail": NOT_FOUND}, status_code=404)
        detail = exc.detail if isinstance(exc.detail, str) else "error"
        return JSONResponse({"detail": detail}, status_code=exc.status_code)

    async def _unavailable(request: Request, exc: Exception):
        # the state cannot be reached (PostgreSQL down, a connection lost twice, a SQLite file
        # locked): raised before any debit (after it, run_request answers itself), so nothing was
        # spent; one constant line, the cause for the curator's log only
        _log.error("the state is unavailable: %s: %s", type(exc).__name__, " ".join(str(exc).split())[:300])
        failed = state_unavailable()
        return JSONResponse(failed.body(), status_code=failed.status, headers=failed.headers)

    app.add_exception_handler(StateUnavailable, _unavailable)
    if store.kind == "postgresql":
        import psycopg

        app.add_exception_handler(psycopg.OperationalError, _unavailable)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):  # pragma: no cover - defensive
        _log.exception("internal error")
        return JSONResponse({"detail": "internal error; nothing was spent unless a request id is given"},
                            status_code=500)

    plain_openapi = app.openapi

    def openapi() -> dict:
        # the bodies read by hand are described by their models' schemas, in the components
        if app.openapi_schema is None:
            plain_openapi().setdefault("components", {}).setdefault("schemas", {}).update(
                analyst.request_schemas())
        return app.openapi_schema

    app.openapi = openapi

    @app.get("/v1/health", include_in_schema=False)
    def health():
        return {"status": "ok"}

    app.add_middleware(_Limits, max_body=max_body, tls_proxy=bool(tls_proxy))
    return app


def _version() -> str:
    from .. import __version__

    return __version__


def app_from_env() -> Any:
    """The app for ``uvicorn --factory privirt.serve.app:app_from_env``: the state in
    ``PRIVIRT_SERVE_STATE``, ``PRIVIRT_SERVE_MAX_IN_FLIGHT`` (default 2),
    ``PRIVIRT_SERVE_TLS_PROXY=1`` and ``PRIVIRT_SERVE_STATE_DEADLINE`` (seconds; unset: 30) (set
    by ``privirt serve run``, for each of its worker processes)."""
    state = os.environ.get("PRIVIRT_SERVE_STATE")
    if not state:
        raise RuntimeError("set PRIVIRT_SERVE_STATE to the state path or postgresql:// URL")
    return create_app(state, max_in_flight=int(os.environ.get("PRIVIRT_SERVE_MAX_IN_FLIGHT", MAX_IN_FLIGHT)),
                      tls_proxy=os.environ.get("PRIVIRT_SERVE_TLS_PROXY") == "1",
                      state_deadline=os.environ.get("PRIVIRT_SERVE_STATE_DEADLINE") or None)

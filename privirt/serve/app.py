"""The ASGI application: :func:`create_app` (FastAPI on Starlette; run by uvicorn).

Cross-cutting rules live here: the body-size limit (413 before anything is parsed), one-line
JSON errors for every failure (no tracebacks, no echo of the input), security headers, and
the mapping of :class:`~privirt.serve.service.RequestFailed` and authentication errors.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .auth import AuthError
from .routers import analyst, curator
from .service import NOT_FOUND, RequestFailed
from .store import Store, open_store

__all__ = ["create_app", "app_from_env", "MAX_BODY"]

#: Largest request body accepted (bytes); larger ones get 413 before they are parsed.
MAX_BODY = 16 * 1024
_log = logging.getLogger("privirt.serve")

_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy",
     b"default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'"),
    (b"cache-control", b"no-store"),
]


async def _send_json(send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            (b"connection", b"close"), *_SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": data})


class _Limits:
    """ASGI middleware: the body limit (413) and the security headers on every response."""

    def __init__(self, app, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = {"detail": f"request body larger than {self.max_body} bytes; nothing was spent"}
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _send_json(send, 413, too_big)
            return
        body, more = b"", True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
            if len(body) > self.max_body:
                await _send_json(send, 413, too_big)
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
                extra = [(k, v) for k, v in _SECURITY_HEADERS if k not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, replay, send_with_headers)


def create_app(state: Store | str, *, max_body: int = MAX_BODY) -> Any:
    """The service for a state (an open :class:`Store`, a path or a ``postgresql://`` URL)."""
    store = state if isinstance(state, Store) else open_store(state)
    app = FastAPI(
        title="privirt serve",
        summary="Private item-response estimates within allowances the analysts cannot bypass.",
        version=_version(),
        docs_url=None, redoc_url=None,  # the API is described at /openapi.json (no CDN scripts)
    )
    app.state.store = store
    app.include_router(analyst.router)
    app.include_router(curator.router)

    @app.exception_handler(RequestFailed)
    async def _failed(request: Request, exc: RequestFailed):
        return JSONResponse(exc.body(), status_code=exc.status)

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

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):  # pragma: no cover - defensive
        _log.exception("internal error")
        return JSONResponse({"detail": "internal error; nothing was spent unless a request id is given"},
                            status_code=500)

    @app.get("/v1/health", include_in_schema=False)
    def health():
        return {"status": "ok"}

    app.add_middleware(_Limits, max_body=max_body)
    return app


def _version() -> str:
    from .. import __version__

    return __version__


def app_from_env() -> Any:
    """The app for ``uvicorn --factory privirt.serve.app:app_from_env`` (state in ``PRIVIRT_SERVE_STATE``)."""
    state = os.environ.get("PRIVIRT_SERVE_STATE")
    if not state:
        raise RuntimeError("set PRIVIRT_SERVE_STATE to the state path or postgresql:// URL")
    return create_app(state)

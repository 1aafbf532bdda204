"""Bearer-key authentication for the two roles (keys: :mod:`privirt.serve.keys`).

Analysts and the curator send ``Authorization: Bearer <key>``; the curator page may instead
carry the curator key in an ``HttpOnly``, ``SameSite=Strict`` cookie set by its login form.
A missing, malformed, wrong or revoked key gets the same 401 answer.
"""

from __future__ import annotations

from fastapi import Request

from .store import Principal, Store

__all__ = ["bearer", "analyst", "curator", "AuthError", "COOKIE"]

COOKIE = "privirt_curator"
UNAUTHORIZED = "missing, invalid or revoked API key (send Authorization: Bearer <key>)"


class AuthError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


def _store(request: Request) -> Store:
    return request.app.state.store


def analyst(request: Request) -> Principal:
    """The analyst of a request, or :class:`AuthError` 401 (403 for the curator's key)."""
    key = bearer(request)
    p = _store(request).authenticate(key, "analyst")
    if p is None:
        if key and _store(request).authenticate(key, "curator") is not None:
            raise AuthError(403, "this is the curator's key; analyst endpoints need an analyst key")
        raise AuthError(401, UNAUTHORIZED)
    return p


def curator(request: Request, *, cookie: bool = False) -> Principal:
    """The curator (key in the header, or with ``cookie`` also the page's cookie); 401/403."""
    key = bearer(request)
    if key is None and cookie:
        key = request.cookies.get(COOKIE)
    p = _store(request).authenticate(key, "curator")
    if p is None:
        if key and _store(request).authenticate(key, "analyst") is not None:
            raise AuthError(403, "analyst keys cannot use the curator's endpoints")
        raise AuthError(401, UNAUTHORIZED)
    return p

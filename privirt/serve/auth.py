"""Bearer-key authentication for the two roles (keys: :mod:`privirt.serve.keys`).

Analysts and the curator send ``Authorization: Bearer <key>``.  The curator page's login form
takes the curator key once and opens a server-side session instead: the cookie holds a random
256-bit token (``HttpOnly``, ``SameSite=Strict``, ``Secure`` over TLS, 8 hours), the state only
its SHA-256 and expiry; logging out or rotating the curator key ends it.  The key itself is
never put in a cookie.  A missing, malformed, wrong or revoked key gets the same 401 answer.
"""

from __future__ import annotations

from fastapi import Request

from .store import Principal, Store

__all__ = ["bearer", "analyst", "curator", "AuthError", "COOKIE", "SESSION_TTL"]

COOKIE = "privirt_session"
#: Lifetime of a curator page session (seconds).
SESSION_TTL = 8 * 3600
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
    """The curator (key in the header, or with ``cookie`` also the page's session); 401/403."""
    key = bearer(request)
    if key is None and cookie:
        p = _store(request).session(request.cookies.get(COOKIE))
        if p is None:
            raise AuthError(401, UNAUTHORIZED)
        return p
    p = _store(request).authenticate(key, "curator")
    if p is None:
        if key and _store(request).authenticate(key, "analyst") is not None:
            raise AuthError(403, "analyst keys cannot use the curator's endpoints")
        raise AuthError(401, UNAUTHORIZED)
    return p

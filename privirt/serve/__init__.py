"""``privirt serve``: a curator service where analysts spend privacy allowances they cannot bypass.

The curator registers data sets (validated once, copied into the state) and analysts with
allowances; analysts call the HTTP API (or :class:`privirt.client.Client`) for private
estimates and releases; every request is checked against the analyst's allowance **and** the
data set's total budget and debited in one transaction before any noise is drawn.

Modules: :mod:`.store` (state: SQLite or PostgreSQL), :mod:`.keys` and :mod:`.auth` (API
keys), :mod:`.service` (registration and the request path, framework-free), :mod:`.models`
(request/response bodies), :mod:`.app` (:func:`create_app`), :mod:`.routers`, :mod:`.page`
(the curator page), :mod:`.cli` (``privirt serve ...``).  Needs the ``serve`` extra
(FastAPI, uvicorn, psycopg).  See ``docs/serve.md``.
"""

from __future__ import annotations

__all__ = ["create_app"]


def create_app(state, **kwargs):
    """The ASGI app for a state (see :func:`privirt.serve.app.create_app`)."""
    try:  # a missing extra is named (not "No module named 'fastapi'"), as by `privirt serve run`
        import fastapi  # noqa: F401
    except ImportError:
        raise ImportError('privirt.serve.create_app needs the serve extra: python -m pip install '
                          '"privirt[serve]"') from None
    from .app import create_app as _create

    return _create(state, **kwargs)

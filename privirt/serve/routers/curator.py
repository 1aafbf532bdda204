"""Curator endpoints (the curator key): every spend, allowances, data sets, revocation, and the
read-only curator page (``/curator``; its login form opens a server-side session whose random
token is kept in an ``HttpOnly``, ``SameSite=Strict`` cookie — never the key itself)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from .. import auth
from .._admin import curator_who
from ..models import Event, Spend
from ..page import AUDIT_ROWS, login_page, render_page
from ..service import RequestFailed
from ..store import Principal
from .analyst import error_responses

router = APIRouter(tags=["curator"], responses=error_responses(401, 403, 413, 500, 503))


def _curator(request: Request) -> Principal:
    return auth.curator(request)


@router.get("/v1/curator/spends", response_model=list[Spend])
def all_spends(request: Request, who: Principal = Depends(_curator)):
    """Every spend of every analyst: who, when, what, cost."""
    return request.app.state.store.spends()


@router.get("/v1/curator/allowances")
def allowances(request: Request, who: Principal = Depends(_curator)):
    """Every allowance with what was spent and what remains."""
    return request.app.state.store.allowances()


@router.get("/v1/curator/datasets")
def datasets(request: Request, who: Principal = Depends(_curator)):
    """Every data set's budget, spent and remaining (no data)."""
    return request.app.state.store.datasets()


@router.get("/v1/curator/events", response_model=list[Event])
def events(request: Request, who: Principal = Depends(_curator)):
    """Every curator action, oldest first: time, action, name, public parameters, who."""
    return request.app.state.store.events()


@router.post("/v1/curator/analysts/{name}/revoke", responses=error_responses(404, 422))
def revoke(name: str, request: Request, who: Principal = Depends(_curator)):
    """Revoke an analyst's key at once (their record stays; the event names the curator key)."""
    if not request.app.state.store.revoke_analyst(name, who=curator_who(who.id, "API")):
        raise RequestFailed(404, f"no active analyst named {name!r}")
    return {"revoked": name}


def _secure(request: Request) -> bool:
    """Whether the page is reached over TLS (directly, through a declared ``--tls-proxy``, or a
    proxy that says so): then the session cookie is ``Secure``."""
    return (request.url.scheme == "https" or getattr(request.app.state, "tls_proxy", False)
            or request.headers.get("x-forwarded-proto") == "https")


#: ``Sec-Fetch-Site`` values of a request the curator page itself (or the curator, typing) sent.
_OWN_SITES = ("same-origin", "none")
CROSS_ORIGIN = ("cross-origin request refused: log in and out from the curator page itself "
                "(nothing was changed)")


def _origin(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an origin such as ``https://example.org``, default port
    filled in; None if it is not an http(s) origin."""
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError:
        return None
    if u.scheme not in ("http", "https") or not u.hostname:
        return None
    return u.scheme, u.hostname, port or (443 if u.scheme == "https" else 80)


def same_origin(request: Request) -> None:
    """Refuse (403, nothing changed) a state-changing POST of the curator page sent by another
    origin: one whose ``Sec-Fetch-Site`` is present and not ``same-origin``/``none``, or whose
    ``Origin`` is present and not the request's own (scheme — https when :func:`_secure` —
    with the ``Host`` header).  ``Origin: null`` passes only when ``Sec-Fetch-Site`` vouches for
    the request: the page's ``Referrer-Policy: no-referrer`` makes browsers send ``null`` for its
    own forms.  A request with neither header (curl, old browsers) passes.

    Raises
    ------
    AuthError
        403 for a cross-origin request.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None and site.lower() not in _OWN_SITES:
        raise auth.AuthError(403, CROSS_ORIGIN)
    origin = request.headers.get("origin")
    if origin is None or (origin == "null" and site is not None):
        return
    own = _origin(f"{'https' if _secure(request) else 'http'}://{request.headers.get('host', '')}")
    if own is None or _origin(origin) != own:
        raise auth.AuthError(403, CROSS_ORIGIN)


@router.get("/curator", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request):
    try:
        auth.curator(request, cookie=True)
    except auth.AuthError:
        return HTMLResponse(login_page(), status_code=401)
    store = request.app.state.store
    # the plots compose every spend's cost; the audit log shows only the newest AUDIT_ROWS in full
    html = render_page(store.datasets(), store.allowances(), store.spend_costs(), store.analysts(),
                       store.events(), audit=store.newest_spends(AUDIT_ROWS))
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


@router.get("/curator/login", include_in_schema=False)
@router.get("/curator/logout", include_in_schema=False)
def back_to_page():
    """The form's address reloaded (the address bar shows it after a failed login): the page.
    A GET changes nothing (logging out takes the page's POST)."""
    return RedirectResponse("/curator", status_code=303)


@router.post("/curator/login", include_in_schema=False, dependencies=[Depends(same_origin)])
async def login(request: Request):
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    key = (form.get("key") or [""])[0].strip()
    # the state's reads and writes wait (a SQLite write lock for up to its busy timeout, a
    # database's round trips): in the thread pool, as every plain route's are — on the event loop
    # they held every request of this worker, even a wrong key's
    token = await run_in_threadpool(_open_session, request.app.state.store, key, request.cookies.get(auth.COOKIE))
    if token is None:
        return HTMLResponse(login_page(error=True), status_code=401)
    resp = RedirectResponse("/curator", status_code=303)
    resp.set_cookie(auth.COOKIE, token, httponly=True, samesite="strict", secure=_secure(request),
                    path="/curator", max_age=auth.SESSION_TTL)
    return resp


def _open_session(store, key: str, earlier: str | None) -> str | None:
    """A new session's token for the curator ``key`` (ending the browser's ``earlier`` session,
    if any), or None for a key that is not the curator's."""
    who = store.authenticate(key, "curator")
    if who is None:
        return None
    store.end_session(earlier)
    return store.new_session(who.id, auth.SESSION_TTL)


@router.post("/curator/logout", include_in_schema=False, dependencies=[Depends(same_origin)])
def logout(request: Request):
    request.app.state.store.end_session(request.cookies.get(auth.COOKIE))  # ends it server-side
    resp = RedirectResponse("/curator", status_code=303)
    resp.delete_cookie(auth.COOKIE, path="/curator", httponly=True, samesite="strict", secure=_secure(request))
    return resp

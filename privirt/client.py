"""A Python client for ``privirt serve``: :class:`Client`.

The methods return the library's own result objects (:class:`~privirt.TotalsEstimate`,
:class:`~privirt.private.PrivateSpectralResult`, :class:`~privirt.TotalsRelease`,
:class:`~privirt.private.NoisyCounts`) rebuilt from the service's JSON, each with its
``.privacy`` statement, so an analyst's notebook reads like local code::

    from privirt.client import Client
    svc = Client("https://curator.example.org", key)
    fit = svc.estimate("lsat6", method="totals", epsilon=0.5)
    fit.beta, fit.ci, print(fit.privacy)

Built on the standard library (:mod:`urllib.request`), so an analyst needs only ``privirt``
itself, not the service's extra.  Every request that spends carries a fresh
``Idempotency-Key``; when the connection fails before an answer arrives, when the service says
you have too many requests running (429), that it could not confirm a debit (503) or that its
state is unavailable for now (503, nothing spent), the client retries with the same key (after the service's ``Retry-After``), so a lost response is fetched
from the service's store and never paid twice.  Once an attempt went unanswered, a last 429,
503 without a request id or refusal (402, 403, 422) no longer says "nothing was spent": it says that the budget may have
been spent and names the key to retry with; so do a ``KeyboardInterrupt`` (Ctrl-C) during a
spending call, kept a ``KeyboardInterrupt``, and a proxy's error page (a 502 or 504) to a
spending request, or a 5xx that neither gives a request id nor says that nothing was spent.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import socket
import ssl
import sys
import time
import uuid
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException, InvalidURL, RemoteDisconnected
from typing import Any

import numpy as np
import pandas as pd

from .exceptions import BudgetExceeded as _LibraryBudgetExceeded
from ._client_results import _f, _statement, result_from_json  # noqa: F401 (re-exported)
from ._client_transport import OPENER as _OPENER, HandshakeFailed, opener_trusting as _opener_trusting, read_answer, shown
from .serve._limits import IDEMPOTENCY_KEY, MAX_BODY

__all__ = ["Client", "ServiceError", "Unauthorized", "Forbidden", "NotFound", "BudgetExceeded",
           "InvalidRequest", "Conflict", "TooManyRequests", "ServerError", "result_from_json"]


class ServiceError(Exception):
    """An error answer of the service; ``status`` is the HTTP status, ``detail`` its one line."""

    status: int = 0

    def __init__(self, status: int, detail: str, body: dict | None = None):
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.body = body or {}


class Unauthorized(ServiceError):
    """401: no key, a wrong key or a revoked key."""


class Forbidden(ServiceError):
    """403: a valid key of the wrong role, or the state's limit of releases per analyst and data
    set reached (nothing spent)."""


class NotFound(ServiceError):
    """404: no such data set (or request) for this key — the same whether it exists or not."""


class BudgetExceeded(ServiceError, _LibraryBudgetExceeded):
    """402: the request does not fit your allowance or the data set's budget; nothing was spent.

    ``remaining`` holds ``allowance_epsilon`` and ``dataset_epsilon``; ``cost`` the request's cost.
    """

    @property
    def remaining(self) -> dict:
        return self.body.get("remaining", {})

    @property
    def cost(self) -> dict:
        return self.body.get("cost", {})


class InvalidRequest(ServiceError):
    """422 (invalid parameters) or 413 (body too large); nothing was spent."""


class Conflict(ServiceError):
    """409: the same Idempotency-Key is still running (or was interrupted after its debit)."""


class TooManyRequests(ServiceError):
    """429: you already have as many requests running as the service allows one analyst;
    nothing was spent.  ``retry_after``: seconds to wait (the service's ``Retry-After``)."""

    retry_after: float = 1.0


class ServerError(ServiceError):
    """5xx.  ``request_id`` is set when the budget was, or may have been, spent (fetch it later
    with :meth:`Client.result`; a 503 with it says the service could not confirm the debit, one
    without it that the service's state was unavailable and nothing was spent).  A proxy's page
    (502, 504) or a 5xx without either, to a spending request, says the budget may have been
    spent and names the Idempotency-Key to retry with (also ``body["idempotency_key"]``)."""

    @property
    def request_id(self) -> str | None:
        return self.body.get("request_id")


_BY_STATUS = {401: Unauthorized, 403: Forbidden, 404: NotFound, 402: BudgetExceeded, 422: InvalidRequest,
              413: InvalidRequest, 409: Conflict, 429: TooManyRequests}
#: statuses retried with the same Idempotency-Key (nothing spent, or the debit unconfirmed: the
#: key makes a debited one a replay, never a second spend)
_RETRIED = (429, 503)
#: longest wait between two tries (seconds), whatever Retry-After says
_MAX_WAIT = 30.0


def _error(status: int, body: dict, retry_after: str | None = None) -> ServiceError:
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ServiceError)
    err = cls(status, str(body.get("detail", "error")), body)
    try:
        err.retry_after = min(_MAX_WAIT, max(0.0, float(retry_after))) if retry_after else 1.0
    except ValueError:
        err.retry_after = 1.0
    return err


#: the start of an API key (``pva.`` analyst, ``pvc.`` curator; :mod:`privirt.serve.keys`)
_KEY_PREFIXES = ("pva.", "pvc.")


#: quotes a key pasted from an email or a JSON file may carry (never part of a key)
_QUOTES = frozenset("\"'`\u2018\u2019\u201a\u201c\u201d\u201e\u00ab\u00bb")


def _check_key(key: str) -> str:
    """``key`` without surrounding whitespace (a key file's trailing newline); a key with quotes
    or any other character than printable ASCII is refused in one line that does not quote it
    (the HTTP library's own error would print the whole header, secret included; a quoted key
    was sent and answered a bare 401)."""
    if not isinstance(key, str):
        raise ValueError(f"key must be a str (your API key, pva....), got {type(key).__name__}")
    key = key.strip()
    found = [what for what, bad in (
        ("quotes", any(ch in _QUOTES for ch in key)),
        ("whitespace, control or non-ASCII characters inside it",
         any(not "!" <= ch <= "~" and ch not in _QUOTES for ch in key))) if bad]
    if found:
        raise ValueError(f"key contains {' and '.join(found)}: paste the API key as one line, without quotes, "
                         "exactly as `privirt serve analyst add` printed it; nothing was sent")
    return key


class _Hidden:
    """The API key, whose ``repr`` (a traceback's locals, a debugger's view) does not show it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<hidden>"


#: the longest ``timeout`` accepted (about 11.6 days; the socket layer overflows past ~9e9 s)
MAX_TIMEOUT = 1e6


def _check_timeout(timeout: float) -> float:
    """``timeout`` as a float; a one-line ValueError unless it is a number in (0, 1e6]."""
    try:
        value = float(timeout)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(timeout, bool) or not (0 < value <= MAX_TIMEOUT):
        raise ValueError(f"timeout must be a number of seconds > 0 and at most {MAX_TIMEOUT:g}, got {timeout!r}")
    return value


class Client:
    """A connection to a ``privirt serve`` service with an analyst's key.

    Parameters
    ----------
    url : str
        Base URL of the service, e.g. ``"https://curator.example.org"``.
    key : str
        Your API key (``pva....``).
    timeout : float, default 300
        Seconds one attempt may take, from connecting to the answer's last byte (finite, > 0); an
        answer not read whole by then, or longer than 1 GiB
        (:data:`~privirt._client_transport.MAX_ANSWER`), is a lost one (retried, see ``retries``).
    retries : int, default 2
        Retries (same Idempotency-Key) after a connection failure, a 429 (too many of your
        requests running) or a 503 (a debit the service could not confirm, or its state
        unavailable for now); an integer >= 0.
    cafile : str or path, optional
        A PEM file of the certificates to trust for ``https://`` instead of the system's (the
        certificate of a service run with ``--ssl-certfile`` and a self-signed certificate, or
        a private CA's); host names are still checked.

    Raises
    ------
    ValueError
        In one line naming the argument, for a ``url`` that is not http(s) (a key passed as
        ``url`` is not quoted) or has whitespace or control characters inside or a bad port
        (whitespace around it is stripped), a ``key`` with quotes or with whitespace or control
        characters inside, or a
        ``timeout``/``retries`` out of range, or a ``cafile`` that cannot be read as PEM
        certificates.
    """

    def __init__(self, url: str, key: str, *, timeout: float = 300.0, retries: int = 2,
                 cafile: str | os.PathLike | None = None) -> None:
        # the key goes into a _Hidden and out of this frame's locals first: a refused argument's
        # traceback holds this frame, which a traceback shown with its locals would print
        try:
            hidden = _Hidden(_check_key(key))
        except ValueError as exc:  # re-raised below, outside _check_key's frame (which holds the key)
            refused = str(exc)
        else:
            refused = None
        finally:
            del key
        if refused is not None:
            raise ValueError(refused) from None
        url = url.strip() if isinstance(url, str) else url  # (a url read from a file, with its newline)
        refused = _url_refusal(url)
        if refused is not None:
            url = None  # never kept in the traceback's locals (it may hold a key)
            raise ValueError(refused)
        self.url = url.rstrip("/")
        self._key = hidden
        self.timeout = _check_timeout(timeout)
        if isinstance(retries, bool) or not isinstance(retries, numbers.Integral) or retries < 0:
            raise ValueError(f"retries must be an integer >= 0, got {retries!r}")
        self.retries = int(retries)
        self._opener = _OPENER if cafile is None else _opener_trusting(cafile)
        self._cafile = cafile

    def _tls_hint(self, reason: ssl.SSLCertVerificationError) -> str:
        """What to do about a certificate that did not verify, from its OpenSSL code and cafile."""
        if reason.verify_code in (62, 64):  # X509_V_ERR_HOSTNAME_MISMATCH, _IP_ADDRESS_MISMATCH
            return "put in url the host name or address the service's certificate was issued for"
        if reason.verify_code in (9, 10):  # not yet valid, expired
            return "the service's certificate is not valid now: its curator must renew it"
        if self._cafile is not None:
            return (f"cafile {os.fspath(self._cafile)!r} does not trust this certificate: give the service's "
                    "self-signed certificate or its CA's")
        return "use cafile= to trust the service's self-signed certificate or private CA"

    def __repr__(self) -> str:
        return f"Client({shown(repr(getattr(self, 'url', None)))}, key=<hidden>)"  # (unset while __init__ refuses)

    # -- transport ----------------------------------------------------------------------------
    def _request(self, method: str, path: str, body: dict | None = None, *, idempotency_key: str | None = None):
        outer = sys.exc_info()[1]  # the caller's own exception, if called while handling one
        try:
            return self._send(method, path, body, idempotency_key=idempotency_key)
        except BaseException as exc:  # (a KeyboardInterrupt too: it stays one)
            _without_foreign_frames(exc, outer)  # urllib's frames hold the key's header in their locals
            raise

    def _send(self, method: str, path: str, body: dict | None, *, idempotency_key: str | None):
        data = None if body is None else json.dumps(body, default=_plain).encode()
        headers = {"Accept": "application/json"}  # the key's header is made in the call, never a local
        if data is not None:
            headers["Content-Type"] = "application/json"
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        attempts = 1 + (self.retries if (method == "GET" or idempotency_key is not None) else 0)
        lost = False  # an earlier attempt went unanswered or unconfirmed: it may have been debited
        lost_id = None  # the request id of an earlier unconfirmed debit (503 with request_id)
        for attempt in range(attempts):
            req = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={**headers, "Authorization": f"Bearer {self._key.value}"})
            try:
                with self._opener.open(req, timeout=self.timeout) as resp:
                    status, raw = resp.status, read_answer(resp)
                return _decode(status, raw, idempotency_key)
            except urllib.error.HTTPError as exc:
                if 300 <= exc.code < 400:  # refused by _NoRedirect: say where it pointed
                    raise _redirect_error(exc.code, exc.headers.get("Location") if exc.headers else None,
                                          self.url, path) from None
                payload, own = _error_body(exc)
                err = _error(exc.code, payload, exc.headers.get("Retry-After") if exc.headers else None)
                if exc.code in _RETRIED and attempt + 1 < attempts:
                    if err.body.get("request_id"):  # a debit the state did not confirm
                        lost, lost_id = True, err.body["request_id"]
                    time.sleep(err.retry_after)
                    continue
                if (lost and idempotency_key is not None and not err.body.get("request_id")
                        and (exc.code in _RETRIED or 400 <= exc.code < 500 or "nothing was spent" in err.detail)):
                    # this try's "nothing was spent" (a 429 or 503, or a refusal: 402 over budget
                    # when the earlier try's debit took what was left) says nothing of the earlier
                    # unanswered or unconfirmed one
                    raise _error(exc.code, {**err.body, "detail": _after_lost(err.detail, idempotency_key, lost_id)},
                                 exc.headers.get("Retry-After") if exc.headers else None) from None
                if idempotency_key is not None and _debit_unknown(exc.code, err.body, own):
                    raise _error(exc.code, {**err.body, "idempotency_key": idempotency_key, "detail": err.detail + (
                        "" if own else " (not the service's answer: a proxy's?)") + _spent_hint(idempotency_key)},
                                 exc.headers.get("Retry-After") if exc.headers else None) from None
                raise err from None
            except (urllib.error.URLError, HTTPException, ConnectionError, socket.timeout, TimeoutError) as exc:
                reason = getattr(exc, "reason", exc)
                if (data is not None and len(data) > MAX_BODY
                        and isinstance(reason, (BrokenPipeError, ConnectionResetError,
                                                ConnectionAbortedError, ssl.SSLEOFError))
                        and not isinstance(reason, RemoteDisconnected)):  # (that one: after a full send)
                    # the service answers 413 and closes before reading a body this large; the
                    # send fails before its answer can be read, and a retry would fail the same way
                    raise InvalidRequest(413, f"request body of {len(data)} bytes is over the service's "
                                         f"limit ({MAX_BODY} bytes by default): it closed the "
                                         "connection while the body was sent; nothing was spent", {}) from None
                if isinstance(reason, ssl.SSLCertVerificationError):  # nothing was sent: no retry
                    raise ConnectionError(shown(f"certificate verification failed for {self.url}: "
                                          f"{reason.verify_message or reason} ({self._tls_hint(reason)})")) from None
                if isinstance(reason, HandshakeFailed):  # before the request: nothing was sent, no retry
                    raise ConnectionError(shown(f"no TLS answer from {self.url}: {reason}") + (_spent_hint(
                        idempotency_key) if lost else f"; nothing was sent ({_no_tls_hint(reason)})")) from None
                if isinstance(reason, InvalidURL):  # refused by http.client before anything was sent
                    raise ValueError(shown(f"url {self.url!r} does not make a valid request address: "
                                           f"{reason}")) from None
                # refused or a host name not found: nothing was sent (an earlier try may have been)
                sent = not isinstance(reason, (ConnectionRefusedError, socket.gaierror))
                if attempt + 1 >= attempts:
                    # a spending request may have been debited before its answer was lost
                    raise ConnectionError(shown(f"no answer from {self.url}: {reason}") + (
                        _spent_hint(idempotency_key) if sent or lost else "; nothing was sent")) from None
                lost = lost or sent
                time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the API ----------------------------------------------------------------------------------
    def datasets(self) -> list[dict]:
        """The data sets you may use: ``name``, ``n_persons``, ``items``, ``domain``, ``remaining``
        (the ε you can still spend there), ``allowance`` and ``budget``."""
        return _rows(self._request("GET", "/v1/datasets"))

    def estimate(self, dataset: str, *, method: str = "totals", epsilon: float, delta: float | None = None,
                 idempotency_key: str | None = None, **options: Any):
        """A private estimate of the item difficulties with intervals.

        ``method`` is ``"totals"`` (:class:`~privirt.TotalsEstimate`) or ``"spectral"``
        (:class:`~privirt.private.PrivateSpectralResult`, Algorithm 2); ``delta`` defaults to
        your allowance's δ.  ``options``: ``confidence``, ``n_boot``, and for spectral
        ``mechanism`` (``"gaussian"``/``"laplace"``) and ``estimator``.
        """
        body = {"method": method, "epsilon": epsilon, "delta": delta, **options}
        return self._spend(f"/v1/datasets/{_quote(dataset, 'dataset')}/estimate", body, idempotency_key)

    def release(self, dataset: str, *, kind: str = "totals", epsilon: float, delta: float | None = None,
                idempotency_key: str | None = None, **options: Any):
        """A publishable release: ``kind="totals"`` (:class:`~privirt.TotalsRelease`) or
        ``"counts"`` (:class:`~privirt.private.NoisyCounts`; option ``mechanism``)."""
        body = {"kind": kind, "epsilon": epsilon, "delta": delta, **options}
        return self._spend(f"/v1/datasets/{_quote(dataset, 'dataset')}/release", body, idempotency_key)

    def _spend(self, path: str, body: dict, idempotency_key: str | None):
        body = {k: _plain_field(k, v) for k, v in body.items() if v is not None}
        if idempotency_key is not None and not (isinstance(idempotency_key, str)
                                                and IDEMPOTENCY_KEY.fullmatch(idempotency_key)):
            raise ValueError("idempotency_key must be 1-128 characters from A-Z a-z 0-9 . _ : - (or leave it out)")
        key = idempotency_key or uuid.uuid4().hex
        try:
            answer = self._request("POST", path, body, idempotency_key=key)
        except KeyboardInterrupt:  # (Ctrl-C) after the request may have been sent and debited
            raise KeyboardInterrupt(f"interrupted{_spent_hint(key)}") from None
        return _result(answer, key)

    def spends(self) -> pd.DataFrame:
        """Your spends, oldest first (indexed by spend id)."""
        rows = _rows(self._request("GET", "/v1/spends"))
        cols = ["id", "time", "dataset", "endpoint", "mechanism", "rho", "epsilon", "delta", "status",
                "request_id", "params"]
        return pd.DataFrame(rows, columns=cols).set_index("id")

    def result(self, request_id: str):
        """A stored result by its request id (e.g. after a lost response)."""
        return _result(self._request("GET", f"/v1/requests/{_quote(request_id, 'request_id')}"), None)


def _without_foreign_frames(exc: BaseException, outer: BaseException | None = None) -> None:
    """Cut ``exc``'s traceback, and those of the exceptions chained to it, at the first frame
    outside this module, and drop a suppressed (``from None``) context: urllib's ``do_open``
    holds the request's headers, ``Authorization: Bearer <key>`` among them, in its locals,
    which a traceback shown with its locals (``pytest --showlocals``, error trackers) or a
    post-mortem debugger would show.

    Parameters
    ----------
    exc : BaseException
        The exception leaving :meth:`Client._request`; changed in place.
    outer : BaseException, optional
        The exception being handled when the request began (the caller's own): the walk stops
        there, so the caller's exception and its chain keep their tracebacks.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or e is outer or id(e) in seen:
            continue
        seen.add(id(e))
        if e.__suppress_context__:
            e.__context__ = None
        tb = e.__traceback__
        if tb is None or tb.tb_frame.f_globals.get("__name__") != __name__:
            e.__traceback__ = None
        else:
            while tb.tb_next is not None and tb.tb_next.tb_frame.f_globals.get("__name__") == __name__:
                tb = tb.tb_next
            tb.tb_next = None
        todo += [e.__cause__, e.__context__]


def _url_refusal(url: Any) -> str | None:
    """Why ``url`` (stripped) is not one http(s) address, in one line showing no API key; None
    if it is one."""
    try:
        parts = urllib.parse.urlsplit(url)
    except (TypeError, ValueError, AttributeError):
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        if str(url).strip().startswith(_KEY_PREFIXES):  # never echo what may be a secret
            return "url must be an http:// or https:// address (it looks like an API key: Client(url, key))"
        return f"url must be an http:// or https:// address, got {shown(repr(url))}"
    if any(ch.isspace() or not ch.isprintable() for ch in url) or not _port_ok(parts):
        return (f"url must be one http(s) address without whitespace or control characters inside and with a "
                f"port in 1-65535, got {shown(repr(url))}")
    return None


def _port_ok(parts: urllib.parse.SplitResult) -> bool:
    try:
        return parts.port != 0
    except ValueError:  # not a number, or out of 0-65535
        return False


def _plain(obj: Any) -> Any:
    """``json.dumps`` default: a numpy scalar (``np.int64(20)``, ``np.float32(0.9)``, which the
    library accepts) as the Python number it holds, another real number (``Fraction(1, 20)``)
    as its int or float."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, numbers.Real):
        return int(obj) if isinstance(obj, numbers.Integral) else float(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _plain_field(name: str, value: Any) -> Any:
    """``value`` as JSON can send it (:func:`_plain`); a one-line ValueError naming ``name``
    for one that is not a number or a string (a ``Decimal``, an array)."""
    try:
        json.dumps(value, default=_plain)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or a string, got {type(value).__name__}") from None
    return value


def _quote(text: str, name: str) -> str:
    """``text`` quoted as one path segment; a one-line ValueError naming the argument ``name``
    unless it is a non-empty str (``str(None)`` would spend on a data set named "None")."""
    if not isinstance(text, str) or not text:
        got = "an empty str" if isinstance(text, str) else type(text).__name__
        what = "a data set's name, as datasets() lists it" if name == "dataset" else "the id the service gave"
        raise ValueError(f"{name} must be a non-empty str ({what}), got {got}")
    return urllib.parse.quote(text, safe="")


def _no_tls_hint(reason: HandshakeFailed) -> str:
    """What to do about a TLS handshake that failed for ``reason`` (not the certificate)."""
    if getattr(reason.reason, "reason", None) in ("WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG",
                                                  "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"):
        return "the service did not answer TLS: is its address http://?"
    return "the service's TLS did not agree with the client's: check the url and the service's TLS settings"


def _rows(body: Any) -> list[dict]:
    """A listing's rows; a :class:`ServiceError` if the answer is not a list of objects."""
    if not isinstance(body, list) or not all(isinstance(r, dict) for r in body):
        raise ServiceError(200, f"the service's answer is not a list of rows (got {type(body).__name__})")
    return body


def _redirect_error(status: int, location: str | None, url: str, path: str) -> ServiceError:
    """A one-line :class:`ServiceError` for a redirect the client refused: where it pointed
    (``location``, made absolute against the request's address) and the ``url`` to pass if that
    is the service (the address without ``path``, when it ends with it)."""
    if not location or not location.strip():
        return ServiceError(status, f"the service answered with a redirect ({status}) without a Location; the "
                                    "client does not follow redirects (it would send your key elsewhere)")
    target = shown(" ".join(urllib.parse.urljoin(url + path, location.strip()).split())[:300])
    base = target[: -len(path)] if target.endswith(path) and len(target) > len(path) else target
    return ServiceError(status, f"the service answered with a redirect ({status}) to {target}; the client does "
                                "not follow redirects (it would send your key there): if that is the service, "
                                f"pass {base} as url", {"location": target})


def _spent_hint(idempotency_key: str | None, request_id: Any = None) -> str:
    """What to do after a lost or unreadable answer of a spending request (empty otherwise)."""
    if idempotency_key is None:
        return ""
    rid = f" or fetch Client.result({request_id!r})" if isinstance(request_id, str) else ""
    return (f"; the budget may have been spent: retry with Idempotency-Key {idempotency_key} (it never "
            f"spends twice){rid}")


def _after_lost(detail: str, idempotency_key: str, request_id: Any = None) -> str:
    """``detail`` of a "nothing was spent" answer (429, 503 without a request id, a 4xx refusal) to a retry
    whose earlier attempt went unanswered or whose debit the state did not confirm (a 503 with
    ``request_id``): this try spent nothing, the earlier one may have.

    Parameters
    ----------
    detail : str
        The service's one line.
    idempotency_key : str
        The key of the spending request, to retry with.
    request_id : str, optional
        The earlier try's request id, where the service gave one (to fetch its result).

    Returns
    -------
    str
        One line that no longer says "nothing was spent" and ends with :func:`_spent_hint`.
    """
    earlier = "went unanswered" if request_id is None else "was not confirmed"
    this_try = f"this try spent nothing, but an earlier try of this request {earlier}"
    text = detail.replace("nothing was spent", this_try) if "nothing was spent" in detail else f"{detail}; {this_try}"
    return text + _spent_hint(idempotency_key, request_id)


def _error_body(exc: urllib.error.HTTPError) -> tuple[dict, bool]:
    """The body of an error answer as a dict, and whether it is the service's own (a JSON object
    with a ``detail`` line); a proxy's page, a body that is not JSON or one cut off (the read's
    ``IncompleteRead``, a reset or a timeout), too long or nested too deep to parse gives its
    reason line."""
    try:
        payload = json.loads(read_answer(exc.fp).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError, HTTPException, OSError, AttributeError):
        return {"detail": exc.reason or "error"}, False
    if not isinstance(payload, dict):
        return {"detail": str(payload)}, False
    return payload, isinstance(payload.get("detail"), str)


def _debit_unknown(status: int, body: dict, own: bool) -> bool:
    """Whether an error answer to a spending request leaves its debit unknown: an answer that is
    not the service's own (a proxy's page), a 502 or 504 (a proxy's: the service may have debited
    before it was cut off), or a 5xx without a request id that does not say nothing was spent."""
    if not own or status in (502, 504):
        return True
    return status >= 500 and not body.get("request_id") and "nothing was spent" not in body["detail"]


def _decode(status: int, raw: bytes, idempotency_key: str | None) -> Any:
    """The JSON of a success answer; a :class:`ServiceError` in one line if it is not JSON (a
    proxy's HTML page, a body cut off, bytes that are not UTF-8, arrays nested too deep to parse)."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        reason = " ".join(str(exc).split())[:120]
        raise ServiceError(status, f"the service's answer was not valid JSON ({reason})"
                           + _spent_hint(idempotency_key), {"idempotency_key": idempotency_key}) from None


def _result(body: Any, idempotency_key: str | None):
    """:func:`result_from_json` of an answer; a :class:`ServiceError` in one line if the answer
    is JSON but not a result the client can read."""
    rid = body.get("request_id") if isinstance(body, dict) else None
    try:
        return result_from_json(body)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
        what = f"{type(exc).__name__} {' '.join(str(exc).split())[:120]}"
        raise ServiceError(200, f"the service's answer is not a result this client can read ({what})"
                           + _spent_hint(idempotency_key, rid),
                           {"idempotency_key": idempotency_key, "request_id": rid}) from None

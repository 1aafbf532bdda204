"""How :class:`privirt.client.Client` connects: openers that refuse redirects (trusting a
``cafile`` for TLS) and end each attempt at an overall deadline, a TLS handshake failure told
apart from a lost answer, an answer's body read up to a size cap, and the url as a message may
show it (an API key inside it hidden)."""

from __future__ import annotations

import http.client
import io
import os
import re
import socket
import ssl
import time
import urllib.request
from typing import Any

__all__ = ["MAX_ANSWER", "OPENER", "AnswerTooLarge", "HandshakeFailed", "opener_trusting", "read_answer", "shown"]

#: Longest answer body the client reads (bytes).  The service's answers are far shorter: a
#: result is a few KB, the spends listing about 0.5 KB a spend (plus its request's parameters);
#: a longer body is not the service's and is treated as a lost answer.
MAX_ANSWER = 1 << 30
_CHUNK = 1 << 16

#: an API key (:mod:`privirt.serve.keys`: ``pva.``/``pvc.``, a 16-hex-digit id, a URL-safe secret)
_KEY_IN_TEXT = re.compile(r"pv[ac]\.[0-9a-f]{16}\.[A-Za-z0-9_-]+", re.IGNORECASE)


def shown(text: str) -> str:
    """``text`` (a url, or a message showing one) with every API key in it replaced by
    ``<API key>``: a connection file read whole, or a key pasted into the address."""
    return _KEY_IN_TEXT.sub("<API key>", text)


class HandshakeFailed(OSError):
    """The TLS handshake failed (other than the certificate's verification): no byte of the
    request was sent.  ``reason`` is the :class:`ssl.SSLError`."""

    def __init__(self, reason: ssl.SSLError) -> None:
        super().__init__(str(reason))
        self.reason = reason


class AnswerTooLarge(http.client.HTTPException):
    """An answer's body longer than :data:`MAX_ANSWER`: not the service's (a lost answer)."""


class _DeadlineIO(io.RawIOBase):
    """A socket's raw reader that gives each read only the time left until ``deadline``
    (:func:`time.monotonic`), so an answer dribbled byte by byte ends at the deadline instead
    of waiting ``timeout`` for each byte."""

    def __init__(self, sock: socket.socket, raw: io.RawIOBase, deadline: float) -> None:
        super().__init__()
        self._sock, self._raw, self._deadline = sock, raw, deadline

    def readable(self) -> bool:  # noqa: D102
        return True

    def readinto(self, b: Any) -> int | None:  # noqa: D102
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no whole answer within the client's timeout")
        self._sock.settimeout(left)
        return self._raw.readinto(b)

    def close(self) -> None:  # noqa: D102
        self._raw.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """A response whose status line, headers and body are read by a :class:`_DeadlineIO`."""

    def __init__(self, sock: socket.socket, debuglevel: int = 0, method: str | None = None,
                 url: str | None = None, *, deadline: float) -> None:
        super().__init__(sock, debuglevel, method, url)
        self.fp = io.BufferedReader(_DeadlineIO(sock, self.fp.detach(), deadline))


def _with_deadline(conn: http.client.HTTPConnection) -> None:
    """End ``conn``'s attempt ``conn.timeout`` seconds from now: the connect waits at most that
    (the socket's timeout), the answer's reads what is left of it."""
    if not isinstance(conn.timeout, (int, float)):  # (socket's default: no timeout, no deadline)
        return
    deadline = time.monotonic() + conn.timeout
    conn.response_class = lambda sock, *a, **kw: _DeadlineResponse(sock, *a, deadline=deadline, **kw)


class _HTTPConnection(http.client.HTTPConnection):
    """An HTTP connection whose attempt ends at an overall deadline (:func:`_with_deadline`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _with_deadline(self)


class _HTTPHandler(urllib.request.HTTPHandler):
    """urllib's HTTP handler with :class:`_HTTPConnection`."""

    def http_open(self, req):  # noqa: D102
        return self.do_open(_HTTPConnection, req)


class _HTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection whose handshake failure is a :class:`HandshakeFailed` and whose
    attempt ends at an overall deadline (:func:`_with_deadline`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _with_deadline(self)

    def connect(self) -> None:  # noqa: D102
        try:
            super().connect()
        except ssl.SSLCertVerificationError:
            raise
        except ssl.SSLError as exc:
            raise HandshakeFailed(exc) from None


class _HTTPSHandler(urllib.request.HTTPSHandler):
    """urllib's HTTPS handler with :class:`_HTTPSConnection`."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        super().__init__(context=context)
        self._tls_context = context

    def https_open(self, req):  # noqa: D102
        return self.do_open(_HTTPSConnection, req, context=self._tls_context)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: urllib would forward the Authorization header (the API key) to
    wherever a redirect points, another host or plain HTTP included."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None


OPENER = urllib.request.build_opener(_NoRedirect, _HTTPHandler, _HTTPSHandler())


def opener_trusting(cafile: str | os.PathLike) -> urllib.request.OpenerDirector:
    """An opener like ``OPENER`` whose TLS trusts the certificates of ``cafile`` (PEM)."""
    if isinstance(cafile, (str, os.PathLike)) and not os.fspath(cafile).strip():
        # ssl takes "" for "no file" and would trust the system's certificates instead
        raise ValueError("cafile is empty: give the path of the PEM file of your CA (or leave cafile out)")
    try:
        context = ssl.create_default_context(cafile=os.fspath(cafile))
    except (OSError, TypeError, ValueError) as exc:  # ssl.SSLError is an OSError
        reason = getattr(exc, "strerror", None) or " ".join(str(exc).split())[:160]
        raise ValueError(f"cafile: cannot read PEM certificates from {os.fspath(cafile)!r} ({reason})"
                         if isinstance(cafile, (str, os.PathLike)) else
                         f"cafile must be the path of a PEM file, got {type(cafile).__name__}") from None
    return urllib.request.build_opener(_NoRedirect, _HTTPHandler, _HTTPSHandler(context))


def read_answer(resp: Any) -> bytes:
    """The body of the answer ``resp`` (an :class:`http.client.HTTPResponse`), read in chunks.

    Raises
    ------
    AnswerTooLarge
        For a body longer than :data:`MAX_ANSWER`.
    http.client.IncompleteRead
        For a body shorter than its Content-Length.
    TimeoutError
        At the attempt's deadline.
    """
    body = bytearray()
    while chunk := resp.read(_CHUNK):
        body += chunk
        if len(body) > MAX_ANSWER:
            raise AnswerTooLarge(f"an answer longer than {MAX_ANSWER} bytes (the client's limit)")
    if getattr(resp, "length", None):  # the connection ended before the Content-Length's bytes
        raise http.client.IncompleteRead(bytes(body), resp.length)
    return bytes(body)

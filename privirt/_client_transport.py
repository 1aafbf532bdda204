"""How :class:`privirt.client.Client` connects: openers that refuse redirects (trusting a
``cafile`` for TLS), a TLS handshake failure told apart from a lost answer, and the url as a
message may show it (an API key inside it hidden)."""

from __future__ import annotations

import http.client
import os
import re
import ssl
import urllib.request

__all__ = ["OPENER", "HandshakeFailed", "opener_trusting", "shown"]

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


class _HTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection whose handshake failure is a :class:`HandshakeFailed`."""

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


OPENER = urllib.request.build_opener(_NoRedirect, _HTTPSHandler())


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
    return urllib.request.build_opener(_NoRedirect, _HTTPSHandler(context))

"""Time limits of a PostgreSQL state (:class:`privirt.serve._backends._Postgres`): libpq's
connection timeouts, and a deadline on each transaction that breaks its connection locally."""

from __future__ import annotations

import os
import socket
import threading
from contextlib import suppress

__all__ = ["STATE_DEADLINE", "MAX_STATE_DEADLINE", "check_state_deadline", "_connect_options", "_Deadline"]

#: seconds a PostgreSQL state transaction may take, from its ``BEGIN`` to its ``COMMIT``'s answer,
#: before its connection is broken (docs/serve.md): a server stopped (``SIGSTOP``) or cut off by
#: the network answers nothing, not even a cancel request.  Far above any real transaction: a
#: debit holds its rows for milliseconds, so waiting for their locks behind a burst of other
#: debits takes well under a second; ``None`` or 0: no deadline
STATE_DEADLINE: float | None = 30.0

#: the longest deadline ``privirt serve run --state-deadline`` takes (10 minutes)
MAX_STATE_DEADLINE = 600.0

#: libpq connection parameters set unless the URL (or ``PGCONNECT_TIMEOUT``) sets them: connect
#: within 5 s, and notice a dead peer of an idle (keepalives: 5 + 3 × 2 s) or a sending
#: (``tcp_user_timeout``, in ms) TCP connection
_CONNECT_DEFAULTS = {"connect_timeout": "5", "keepalives": "1", "keepalives_idle": "5",
                     "keepalives_interval": "2", "keepalives_count": "3", "tcp_user_timeout": "15000"}


def check_state_deadline(value: object, name: str = "--state-deadline") -> float:
    """``value`` as seconds for :attr:`_Postgres.deadline <privirt.serve._backends._Postgres>`;
    a one-line ValueError naming ``name`` unless it is a finite number > 0 and at most
    :data:`MAX_STATE_DEADLINE`.

    Parameters
    ----------
    value : object
        The deadline given (a number, or its text on the command line).
    name : str
        How the message names it.

    Returns
    -------
    float
        The deadline in seconds.
    """
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(value, bool) or not 0 < seconds <= MAX_STATE_DEADLINE:  # (False for NaN)
        raise ValueError(f"{name} must be seconds, a number > 0 and at most {MAX_STATE_DEADLINE:g}, got {value!r}; "
                         f"leave it out for the default, {STATE_DEADLINE:g} s")
    return seconds


def _connect_options(url: str) -> dict[str, str]:
    """The :data:`_CONNECT_DEFAULTS` that ``url`` leaves unset (psycopg's keyword arguments
    override the URL's own parameters, which must win, and a service file's, read here for a
    service named by ``?service=`` or ``PGSERVICE``).  Raises ``psycopg.ProgrammingError`` for
    a URL libpq cannot parse."""
    from psycopg.conninfo import conninfo_to_dict

    fields = conninfo_to_dict(url)
    given = set(fields) | _service_keys(fields.get("service") or os.environ.get("PGSERVICE"))
    if os.environ.get("PGCONNECT_TIMEOUT"):
        given.add("connect_timeout")
    return {key: value for key, value in _CONNECT_DEFAULTS.items() if key not in given}


def _service_keys(name: str | None) -> set[str]:
    """The parameters a connection service file sets for service ``name`` (libpq's files:
    ``PGSERVICEFILE`` or ``~/.pg_service.conf``, and ``PGSYSCONFDIR/pg_service.conf``); empty
    without a name or a readable section."""
    if not name:
        return set()
    import configparser

    files = [os.environ.get("PGSERVICEFILE") or os.path.expanduser("~/.pg_service.conf")]
    if os.environ.get("PGSYSCONFDIR"):
        files.append(os.path.join(os.environ["PGSYSCONFDIR"], "pg_service.conf"))
    keys: set[str] = set()
    for path in files:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
        if parser.has_section(name):
            keys |= set(parser[name])
    return keys


class _Deadline:
    """A transaction's time limit: unless :meth:`cancel` comes first, after ``seconds`` the socket
    of the connection it watches is shut down here, so that a call blocked on a server that
    answers nothing raises ``psycopg.OperationalError`` at once (``cancel()`` of psycopg needs
    the server to answer).  It holds a duplicate of the socket: never another socket that reuses
    the number of one psycopg closed meanwhile."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.passed = False
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, con) -> None:
        """Watch ``con`` (instead of the connection watched so far); broken now if the time passed."""
        try:
            sock = socket.socket(fileno=os.dup(con.fileno()))
        except Exception:  # a connection already lost: its next statement raises anyway
            return
        with self._lock:
            old, self._sock = self._sock, sock
            if self.passed:
                _shut(sock)
        if old is not None:
            old.close()

    def _expire(self) -> None:
        with self._lock:
            self.passed = True
            if self._sock is not None:
                _shut(self._sock)

    def cancel(self) -> None:
        """End the watch (the transaction is over)."""
        self._timer.cancel()
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


def _shut(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)

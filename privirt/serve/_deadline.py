"""Time limits of a PostgreSQL state (:class:`privirt.serve._backends._Postgres`): libpq's
connection timeouts."""

from __future__ import annotations

import os

__all__ = ["_connect_options"]

#: libpq connection parameters set unless the URL (or ``PGCONNECT_TIMEOUT``) sets them: connect
#: within 5 s, and notice a dead peer of an idle (keepalives: 5 + 3 × 2 s) or a sending
#: (``tcp_user_timeout``, in ms) TCP connection
_CONNECT_DEFAULTS = {"connect_timeout": "5", "keepalives": "1", "keepalives_idle": "5",
                     "keepalives_interval": "2", "keepalives_count": "3", "tcp_user_timeout": "15000"}


def _connect_options(url: str) -> dict[str, str]:
    """The :data:`_CONNECT_DEFAULTS` that ``url`` leaves unset (psycopg's keyword arguments
    override the URL's own parameters, which must win).  Raises ``psycopg.ProgrammingError`` for
    a URL libpq cannot parse."""
    from psycopg.conninfo import conninfo_to_dict

    given = set(conninfo_to_dict(url))
    if os.environ.get("PGCONNECT_TIMEOUT"):
        given.add("connect_timeout")
    return {key: value for key, value in _CONNECT_DEFAULTS.items() if key not in given}

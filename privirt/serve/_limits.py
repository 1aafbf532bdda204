"""The service's public limits: the largest request body, the form of an Idempotency-Key, and
a state's limit on the number of releases of one allowance (one analyst on one data set).

:data:`MAX_BODY` and :data:`IDEMPOTENCY_KEY` live here (not in :mod:`.app`, :mod:`.service`)
so that :mod:`privirt.client` can use the service's own without FastAPI installed.

Each release stores its request and its result (a few KB): without a limit an analyst could
fill the state's storage with releases at the smallest ε (10⁹ requests at ε = 1e-6 compose to
about ε = 1 under zCDP).  The limit is public, the same for every allowance of the state, kept
in its ``meta`` table (``max_releases``; :data:`DEFAULT_MAX_RELEASES` where a state has none)
and checked inside the debit's transaction, with the budget.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_BODY", "IDEMPOTENCY_KEY", "DEFAULT_MAX_RELEASES", "OverQuota", "check_release_limit", "max_releases", "set_max_releases",
           "write_max_releases"]

#: Largest request body accepted (bytes); larger ones get 413 before they are parsed.
MAX_BODY = 16 * 1024
#: An Idempotency-Key: 1-128 characters from ``A-Z a-z 0-9 . _ : -``.
IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
#: Releases one analyst may make on one data set, where the state sets no other limit
#: (about 45 MB of stored results at the service's ~4.5 KB a release).
DEFAULT_MAX_RELEASES = 10_000
_KEY = "max_releases"


class OverQuota(Exception):
    """The allowance has made the state's largest number of releases; nothing was spent."""

    def __init__(self, limit: int):
        super().__init__(f"limit {limit}")
        self.limit = limit


def check_count(value: Any, name: str = "--max-releases") -> int:
    """A limit: an integer >= 1 (one line otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    return value


def max_releases(con: Any, backend: Any) -> int:
    """The state's limit (:data:`DEFAULT_MAX_RELEASES` where it has none)."""
    row = con.execute(backend.q("SELECT value FROM meta WHERE key = ?"), (_KEY,)).fetchone()
    return DEFAULT_MAX_RELEASES if row is None else int(row[0])


def check_release_limit(con: Any, backend: Any, count: int) -> None:
    """Raise :class:`OverQuota` where an allowance that has made ``count`` releases (its spends,
    counted by the debit's own query) has reached the state's limit."""
    limit = max_releases(con, backend)
    if count >= limit:
        raise OverQuota(limit)


def set_max_releases(backend: Any, limit: int) -> None:
    """Set the state's limit (under its write lock; releases already made stay)."""
    with backend.write() as con:
        write_max_releases(con, backend, limit)


def write_max_releases(con: Any, backend: Any, limit: int) -> int:
    """Set the state's limit inside the transaction of ``con``; returns it (checked)."""
    limit = check_count(limit)
    if con.execute(backend.q("SELECT value FROM meta WHERE key = ?"), (_KEY,)).fetchone() is None:
        con.execute(backend.q("INSERT INTO meta (key, value) VALUES (?, ?)"), (_KEY, str(limit)))
    else:
        con.execute(backend.q("UPDATE meta SET value = ? WHERE key = ?"), (str(limit), _KEY))
    return limit

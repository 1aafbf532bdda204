"""SQLite file helpers of the ledger (and the curator service's state): the write transaction,
the file's URI (opened without creating it), a folder's fsync, and the "damaged ledger" error."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..exceptions import LedgerError

__all__ = ["immediate_transaction"]


class _NotWhole(Exception):
    """Raised inside a write transaction to roll it back (a file that is not a whole ledger)."""


def _sqlite_uri(path: Path, mode: str) -> str:
    """An SQLite URI of ``path`` with ``mode`` (``rw``: never create the file).  A UNC path
    (``\\\\server\\share\\...``) takes an empty authority and the path's two slashes, which
    SQLite reads; ``Path.as_uri`` would put the server in the authority, which it refuses."""
    from urllib.parse import quote

    resolved = path.resolve()
    posix = resolved.as_posix()
    uri = "file://" + quote(posix, safe="/") if posix.startswith("//") else resolved.as_uri()
    return f"{uri}?mode={mode}"


def _sync_folder(folder: Path) -> None:
    """fsync a folder (a new name in it survives a crash); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _damaged(path: Path, exc: BaseException) -> LedgerError:
    return LedgerError(
        f"the ledger {path} is damaged or is not a privirt ledger ({exc}); nothing was spent — "
        "restore it from a backup copy (keep the damaged file: its spends still count against "
        "this data set's budget), or check the ledger path"
    )


@contextmanager
def immediate_transaction(con: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` on ``con`` (SQLite's write lock from the first read), ``COMMIT`` when
    the block ends, ``ROLLBACK`` when it raises (Ctrl-C too).  The ledger and the curator
    service's SQLite state share it."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    else:
        con.execute("COMMIT")

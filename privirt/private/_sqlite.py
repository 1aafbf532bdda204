"""SQLite file helpers of the ledger (and the curator service's state): the write transaction,
the file's URI (opened without creating it), a folder's fsync, the "damaged ledger" error, and
the locked private file a new ledger is built in (stale ones, left by killed processes, removed)."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..exceptions import LedgerError

__all__ = ["immediate_transaction", "make_durable", "undecoded"]


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


def make_durable(con: sqlite3.Connection) -> None:
    """Make every commit on ``con`` durable on return: ``PRAGMA synchronous=EXTRA``.

    ``FULL`` is not enough in SQLite's default journal mode (DELETE), where deleting the
    rollback journal *is* the commit: ``FULL`` never fsyncs the folder after that deletion, so
    a power cut soon after can bring the journal back, and the next open rolls the committed
    transaction back.  ``EXTRA`` also fsyncs the folder.  The ledger and the curator service's
    SQLite state both use it for their debits.

    Parameters
    ----------
    con : sqlite3.Connection
        An open connection (outside a transaction).
    """
    con.execute("PRAGMA synchronous=EXTRA")


def undecoded(exc: UnicodeDecodeError) -> str:
    """SQLite's error message that Python's ``sqlite3`` could not decode, made readable: in a damaged
    file whose stored schema text is not UTF-8, SQLite's "malformed database schema" quotes that text."""
    raw = exc.object
    return bytes(raw).decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else str(exc)


def _damaged(path: Path, exc: BaseException | str) -> LedgerError:
    return LedgerError(
        f"the ledger {path} is damaged or is not a privirt ledger ({exc}); nothing was spent — "
        "restore it from a backup copy (keep the damaged file: its spends still count against "
        "this data set's budget), or check the ledger path"
    )


@contextmanager
def immediate_transaction(con: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` on ``con`` (SQLite's write lock from the first read), ``COMMIT`` when
    the block ends, ``ROLLBACK`` when it raises (Ctrl-C too).  The ledger and the curator
    service's SQLite state share it.

    SQLite may already have rolled the transaction back itself (``database or disk is full``,
    an I/O error): then nothing is rolled back here, and a failing ``ROLLBACK`` never replaces
    the exception that ended the block (which names the real cause)."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if con.in_transaction:
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the original exception below says what went wrong
        raise
    else:
        con.execute("COMMIT")


#: the private files a new ledger is written in before it is linked at its path
_CREATING_PREFIX, _CREATING_SUFFIX = ".privirt-ledger-", ".creating"


@contextmanager
def creating_file(path: Path) -> Iterator[Path]:
    """A new, empty private file beside ``path`` (``.privirt-ledger-<random>.creating``, mode
    0600 whatever the umask, as the ledger linked from it and its SQLite journal) to build a
    ledger in, removed (with its SQLite journal) when the block ends.

    The file is created and ``flock``-ed by this process for the whole block, so that a file of
    this kind whose lock nobody holds was left by a process that died (``SIGKILL``, a power
    cut): such stale files in the folder are removed first.  One a live process holds is
    never touched.  Where ``fcntl`` is missing nothing is locked and nothing stale is removed.
    """
    folder = path.parent
    remove_stale_creating(folder)
    for _ in range(100):
        tmp = folder / f"{_CREATING_PREFIX}{os.urandom(6).hex()}{_CREATING_SUFFIX}"
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)  # private: the spend history
        except FileExistsError:
            continue
        _flock(fd, wait=True)
        if _names(fd, tmp):
            break
        os.close(fd)  # removed as stale between its creation and the lock: take another name
    else:  # pragma: no cover - only if every new file is removed at once
        raise OSError(f"could not create a private file in {folder}")
    try:
        yield tmp
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            try:
                leftover.unlink()
            except OSError:
                pass
        os.close(fd)  # (last: closing a file's descriptor drops this process's SQLite locks on it)


def remove_stale_creating(folder: Path) -> None:
    """Remove the ``.privirt-ledger-*.creating`` files in ``folder`` (and their journals) that
    no live process holds locked (see :func:`creating_file`); errors are ignored."""
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(_CREATING_PREFIX)]
    except OSError:
        return
    for name in names:
        if not name.endswith(_CREATING_SUFFIX):
            continue
        stale = folder / name
        try:
            fd = os.open(stale, os.O_RDONLY)
        except OSError:
            continue
        try:
            if _flock(fd, wait=False) and _names(fd, stale):
                for leftover in (stale, stale.with_name(name + "-journal")):
                    leftover.unlink(missing_ok=True)
        except OSError:
            pass
        finally:
            os.close(fd)
    for name in names:  # a journal whose file is gone (its creator died while removing both)
        if name.endswith(_CREATING_SUFFIX + "-journal") and not (folder / name[:-8]).exists():
            try:
                (folder / name).unlink()
            except OSError:
                pass


def _flock(fd: int, *, wait: bool) -> bool | None:
    """An exclusive ``flock`` on ``fd``: True when taken, False when another process holds it
    (``wait=False``), None where ``fcntl`` is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _names(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the open file ``fd`` (not removed or replaced)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False

"""The permissions of the files the service creates.

A SQLite state holds the validated responses of every data set (``datasets.data``) and the
hashes of the API keys; a backup holds the same.  Both are created with mode ``0600`` (owner
read and write only, whatever the umask), and SQLite gives its side files (``-journal``,
``-wal``, ``-shm``) the main file's mode.  An existing state's mode is never changed: one that
others can read is named in a warning (:func:`readable_by_others`).
"""

from __future__ import annotations

import os
import shlex
import stat
from contextlib import suppress
from pathlib import Path

__all__ = ["PRIVATE_MODE", "SIDE_SUFFIXES", "readable_by_others", "remove_with_side_files"]

#: the mode of a new state, backup or ledger (and so of their SQLite side files)
PRIVATE_MODE = 0o600

#: SQLite's side files of a database ``NAME``: ``NAME-journal``, ``NAME-wal``, ``NAME-shm``
SIDE_SUFFIXES = ("-journal", "-wal", "-shm")


def remove_with_side_files(path: Path) -> None:
    """Remove ``path`` and its SQLite side files, ignoring what is missing or cannot be removed."""
    for name in (path, *(path.with_name(path.name + s) for s in SIDE_SUFFIXES)):
        with suppress(OSError):
            name.unlink(missing_ok=True)


def readable_by_others(path: Path, shown: str) -> str | None:
    """A one-line warning when the file ``path`` (named ``shown``) is readable by its group or by
    others, saying what to run; None when it is private, missing, or the system has no POSIX modes.

    Parameters
    ----------
    path : Path
        The state file.
    shown : str
        Its name as the user gave it (for the message).

    Returns
    -------
    str or None
        The warning, without the ``privirt: warning:`` prefix.
    """
    if os.name != "posix":  # pragma: no cover - Windows has no group/other read bits to check
        return None
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None
    if not mode & 0o044:
        return None
    return (f"the state {shown} is readable by other users (mode {mode:04o}; it holds the raw responses and "
            f"the API keys' hashes) — run: chmod 600 {shlex.quote(shown)}")

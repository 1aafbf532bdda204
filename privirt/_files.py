"""Output files written whole or not at all.

:func:`atomic_write` writes to a temporary file in the destination's folder, flushes and
fsyncs it, and renames it onto the final name (:func:`os.replace`, atomic on POSIX and
Windows); on any failure or interruption the temporary file is removed and an existing file
under the final name is left as it was.  Used for every ``--out`` file of the command line and
for a sweep's manifest and report.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import IO, Iterator

__all__ = ["atomic_write"]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], *, encoding: str = "utf-8",
                 newline: str | None = None) -> Iterator[IO[str]]:
    """A text file handle whose content replaces ``path`` only when the block ends normally.

    Parameters
    ----------
    path : str or path-like
        The final file name.
    encoding, newline : str
        As for :func:`open`.

    Yields
    ------
    file object
        Open for writing on a temporary file ``.NAME.XXXXXXXX.tmp`` next to ``path`` (created
        with the permissions a new file gets, subject to the umask).

    Notes
    -----
    A process killed outright (SIGKILL, power loss) may leave the temporary file behind, never
    a truncated file under the final name.
    """
    final = Path(path)
    tmp = final.with_name(f".{final.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "w", encoding=encoding, newline=newline) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

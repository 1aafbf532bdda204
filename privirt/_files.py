"""Output files written whole or not at all.

:func:`atomic_write` writes to a temporary file in the destination's folder, flushes and
fsyncs it, and renames it onto the final name (:func:`os.replace`, atomic on POSIX and
Windows); on any failure or interruption the temporary file is removed and an existing file
under the final name is left as it was.  Used for every ``--out`` file of the command line and
for a sweep's manifest and report.  :func:`figure_path` checks a plot's file name before
anything is drawn or created.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import IO, Iterator

__all__ = ["atomic_write", "check_creatable", "figure_path", "writing"]

#: bytes :func:`temporary_path` adds to a file name (``.`` + ``.XXXXXXXX.tmp``)
TEMPORARY_EXTRA_BYTES = 14


def temporary_path(final: Path) -> Path:
    """The temporary file ``.NAME.XXXXXXXX.tmp`` next to ``final`` that :func:`atomic_write`
    writes and renames onto ``final`` (:data:`TEMPORARY_EXTRA_BYTES` longer than its name)."""
    return final.with_name(f".{final.name}.{secrets.token_hex(4)}.tmp")


def check_creatable(path: str | os.PathLike[str]) -> None:
    """Create and remove a temporary file as :func:`atomic_write` would for ``path``, so that a
    name too long for the file system, or a folder that refuses new files although
    :func:`os.access` calls it writable (``/proc``, ``/sys``), fails before any work.

    Raises
    ------
    OSError
        As :func:`os.open` raises it for the temporary file.
    """
    tmp = temporary_path(Path(os.path.realpath(path)))
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    os.unlink(tmp)


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
        Open for writing on a temporary file ``.NAME.XXXXXXXX.tmp`` next to ``path`` (next to
        its target when ``path`` is a symbolic link, which stays a link), with the permissions
        of the file it replaces, else those a new file gets (subject to the umask).

    Notes
    -----
    A process killed outright (SIGKILL, power loss) may leave the temporary file behind, never
    a truncated file under the final name.
    """
    final = Path(os.path.realpath(path))  # through a symlink: its target is replaced, the link kept
    tmp = temporary_path(final)
    try:
        mode = os.stat(final).st_mode & 0o7777  # an existing file keeps its permissions
    except OSError:
        mode = None
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600)
    try:
        with open(fd, "w", encoding=encoding, newline=newline) as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def figure_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`~pathlib.Path` whose suffix names a format matplotlib writes
    (``.png``, ``.pdf``, ``.svg``, ...): the format comes from the suffix, so a path without one
    or with another is refused (a ValueError) before anything is drawn or created."""
    from matplotlib.backend_bases import FigureCanvasBase

    path = Path(path)
    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in formats:
        got = f"suffix {path.suffix!r}" if path.suffix else "no suffix"
        raise ValueError(f"path {str(path)!r} has {got}: end it in .png, .pdf or .svg (or another "
                         f"format matplotlib writes: {', '.join(sorted(formats))})")
    return path


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], advice: str) -> Iterator[None]:
    """Turn an OSError in the block (writing ``path``: a full disk, a folder made read-only
    meanwhile) into one line naming the file: ``could not write PATH (reason); advice``.

    Raises
    ------
    ValueError
        In place of the OSError.
    """
    try:
        yield
    except OSError as exc:
        raise ValueError(f"could not write {path} ({exc.strerror or exc}); {advice}") from None

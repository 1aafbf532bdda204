"""Standard output that may fail (a full disk, a closed pipe): a secret shown once, a result or a
committed change whose report cannot be printed, and quieting stdout after a failure so that the
interpreter's final flush does not fail again."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator, Sequence

__all__ = ["show_once", "silence_stdout", "print_done", "not_printed", "flush_stdout", "flush_or_fail",
           "write_or_fail", "stdout_closed", "StdoutFailed", "guarded_stdout"]


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again (and what
    is still buffered, a key say, goes nowhere)."""
    if sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
        pass


def show_once(lines: Sequence[str], lost: str) -> None:
    """Print ``lines`` (the last a key shown only this once) on stdout, flushed, after the change
    that made the key was committed.

    Parameters
    ----------
    lines : sequence of str
        What to print.
    lost : str
        The error's text when stdout fails: what was done, that the key was not shown and what
        to do; `` (REASON)`` is put after its first clause.

    Raises
    ------
    ValueError
        When stdout cannot be written (the key is never put on stderr).
    """
    try:
        for line in lines:
            print(line)
        flush_or_fail()
    except OSError as exc:
        silence_stdout()
        done, _, rest = lost.partition(";")
        raise ValueError(f"{done} ({exc.strerror or type(exc).__name__});{rest}") from None


def _closed() -> OSError:
    """The failure of a closed stdout (``sys.stdout`` is None: the process began with its stdout
    closed, ``>&-``, and every print was dropped): :class:`StdoutFailed` (EBADF)."""
    import errno

    return StdoutFailed(errno.EBADF, "stdout is closed")


def flush_or_fail() -> None:
    """Flush stdout; a closed one is an OSError (:func:`_closed`)."""
    if sys.stdout is None:
        raise _closed()
    sys.stdout.flush()


def write_or_fail(text: str) -> None:
    """Write ``text`` on stdout; a closed one is an OSError (:func:`_closed`)."""
    if sys.stdout is None:
        raise _closed()
    sys.stdout.write(text)


def stdout_closed() -> bool:
    """Whether the process has no stdout at all (``>&-``: ``sys.stdout`` is None)."""
    return sys.stdout is None


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def not_printed(exc: OSError, out: object = None, out_failed: OSError | None = None) -> ValueError:
    """The one line for a result that could not be printed on stdout: where it is (``--out out``),
    or that it is lost, also when ``--out`` failed too (``out_failed``); a debit is added to it by
    :func:`privirt.cli.main`."""
    text = f"could not print the result on stdout ({_reason(exc)})"
    if out is None:
        text += "; the result is lost: give a stdout that can be written (or --out FILE) before the next run"
    elif out_failed is None:
        text += f"; it was written to --out {out}"
    else:
        text += (f", nor write --out {out} ({_reason(out_failed)}); the result is lost: free some space "
                 "before the next run")
    return ValueError(text)


def flush_stdout() -> None:
    """Flush stdout after a command (a block-buffered stdout fails only now); a failure other
    than a closed pipe is one line.

    Raises
    ------
    ValueError
        From :func:`not_printed`, with stdout then pointed at /dev/null.
    """
    if sys.stdout is None:  # (>&-: nothing was printed, nothing to flush; as before)
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        silence_stdout()
        raise not_printed(exc) from None


def print_done(lines: Sequence[str], done: str) -> None:
    """Print ``lines``, flushed, reporting a change already committed (``done``: what was
    changed, and how to see it).

    Raises
    ------
    ValueError
        ``could not print the result on stdout (REASON); DONE`` when stdout fails (a closed pipe
        stays a BrokenPipeError, ended quietly by :func:`privirt.cli.main`).
    """
    if sys.stdout is None:  # (>&-: the report was not asked for; the change stands)
        return
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        silence_stdout()
        raise ValueError(f"could not print the result on stdout ({_reason(exc)}); {done}") from None


class StdoutFailed(OSError):
    """Writing stdout failed (a full disk, an I/O error; a closed pipe stays a BrokenPipeError)."""


class _Guarded:
    """stdout whose write and flush failures are :class:`StdoutFailed`: told from the failure of a
    file the command writes, which names the file."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutFailed(*exc.args) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutFailed(*exc.args) from None


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """While a command runs, stdout's failures are :class:`StdoutFailed` (see :func:`not_printed`)."""
    stream = sys.stdout
    if stream is None:
        yield
        return
    guarded = sys.stdout = _Guarded(stream)
    try:
        yield
    finally:
        if sys.stdout is guarded:
            sys.stdout = stream

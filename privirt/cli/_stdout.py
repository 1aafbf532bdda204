"""Standard output that may fail (a full disk, a closed pipe): a secret shown once, and quieting
stdout after a failure so that the interpreter's final flush does not fail again."""

from __future__ import annotations

import os
import sys
from typing import Sequence

__all__ = ["show_once", "silence_stdout"]


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again (and what
    is still buffered, a key say, goes nowhere)."""
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
        sys.stdout.flush()
    except OSError as exc:
        silence_stdout()
        done, _, rest = lost.partition(";")
        raise ValueError(f"{done} ({exc.strerror or type(exc).__name__});{rest}") from None

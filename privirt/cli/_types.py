"""Argument types shared by the commands (argparse turns their errors into usage messages).

Range checks beyond "is a number" stay with the library functions, whose ``ValueError``
messages the command line prints as one line.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path


def number(text: str) -> float:
    """A float; NaN, infinities and ranges are left to the library to judge."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def nonempty_path(text: str) -> Path:
    """A path; the empty string (which ``Path`` turns into the current folder) is refused."""
    if not text:
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return Path(text)


def nonempty_file(text: str) -> str:
    """A data file's name, kept as text (``-`` is standard input); the empty string is refused."""
    if not text:
        raise argparse.ArgumentTypeError("expected a file name, got an empty string")
    return text


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


#: ``--regularization``'s help (``privirt estimate`` and ``privirt fit``)
REGULARIZATION_HELP = ("spectral: pseudo-count λ ≥ 0 added to compared pairs, or auto (the default: λ = 1); "
                       "0 refuses data whose comparison graph is disconnected")


def regularization(text: str) -> float | str:
    """``--regularization``: the spectral estimator's pseudo-count λ, a finite number ≥ 0, or
    ``auto`` (the stated default, λ = 1; it was refused as "expected a number")."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:  # (both forms named: 'auto' is the stated default)
        raise argparse.ArgumentTypeError(f"must be auto or a finite number >= 0, got {text!r}")
    return value


class Once(argparse.Action):
    """Store an option's value, refusing a second occurrence (``--eps 0.2 --epsilon 0.9``
    silently spent 0.9, ``--ledger A --ledger B`` debited B): one usage line, before anything is
    read or spent.  For options whose default is ``None``."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{max(self.option_strings, key=len)} given twice; give it once")
        setattr(namespace, self.dest, values)

"""Exceptions raised by privirt (input errors are plain :class:`ValueError`)."""

from __future__ import annotations

import os
import sys
from types import FrameType

#: the folder of the privirt package: a frame whose file lies in it is privirt's own
_OWN = os.path.dirname(__file__) + os.sep


class PrivirtError(Exception):
    """Base class for privirt's own errors."""


class BudgetExceeded(PrivirtError):
    """A private computation would spend more privacy budget than the ledger holds.

    Nothing noisy has been computed or returned when this is raised, and the ledger is
    unchanged.
    """


class LedgerError(PrivirtError, ValueError):
    """A ledger file cannot be used: damaged (a malformed page, a dropped table), not a privirt
    ledger, or not openable.  The message names the file and what to do; nothing was spent."""


class DisconnectedComparisonGraph(PrivirtError, ValueError):
    """The item comparison graph is not connected, so item difficulties are not identified."""


def _is_internal(frame: FrameType) -> bool:
    """A frame :func:`warnings.warn` does not count in ``stacklevel`` (the import machinery's)."""
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name


def user_stacklevel() -> int:
    """The ``stacklevel`` for :func:`warnings.warn`, called where it is called, that makes the
    warning name the first frame outside privirt (and the ``mechanisms`` package it ships): the
    user's line that called privirt, however deep inside privirt the warning is issued.

    Returns
    -------
    int
        1 for the caller's own frame, plus one for each privirt frame above it; the outermost
        frame's level when every frame is privirt's (``python -m privirt``).
    """
    own = [_OWN]
    mechanisms = sys.modules.get("mechanisms")  # (not loaded: none of its frames can be running)
    if mechanisms is not None and getattr(mechanisms, "__file__", None):
        own.append(os.path.dirname(mechanisms.__file__) + os.sep)
    prefixes = tuple(own)
    frame, level = sys._getframe(1), 1
    while frame.f_code.co_filename.startswith(prefixes):
        outer = frame.f_back
        while outer is not None and _is_internal(outer):  # skipped by warnings.warn too
            outer = outer.f_back
        if outer is None:
            break
        frame, level = outer, level + 1
    return level


class PrivirtRuntimeWarning(RuntimeWarning):
    """privirt's own run-time warnings (a computation that did not converge, a fallback taken,
    an environment setting ignored): a :class:`RuntimeWarning`, told apart from numpy's."""


class EmptyResponsesWarning(UserWarning):
    """Persons or items without a single observed response were dropped."""


class IdentifiabilityWarning(UserWarning):
    """Some estimates are set by a regularization or prior rather than by the data (for
    example items never compared, in both directions, with the others)."""


class NoiseDominatesWarning(UserWarning):
    """A private release whose noise is at least as large as any count it protects (judged from
    the public number of persons and the calibrated noise only), so the estimates say little
    about the data; also an estimate whose intervals are unbounded because its release cannot
    tell the difficulties apart (all noise, or one person)."""


def warn_if_noise_dominates(noise_sd: float, n_persons: int, what: str) -> None:
    """Warn when the noise standard deviation reaches the public number of persons (the largest
    value any released count can take).  Uses public quantities only, so the warning itself
    reveals nothing about the data."""
    import warnings

    if noise_sd >= n_persons:
        warnings.warn(
            f"the noise on the {what} (sd {noise_sd:.3g}) is at least the number of persons "
            f"({n_persons}), the largest value a count can take: the estimates carry little "
            "information about the data; use more persons or a larger epsilon",
            NoiseDominatesWarning,
            stacklevel=user_stacklevel(),
        )


#: ``info["note"]`` of a private estimate from one person (:func:`warn_one_person`).
ONE_PERSON_NOTE = "one person: the difficulties are not identified; the intervals are unbounded"


def warn_one_person(what: str) -> str:
    """Warn that ``what`` (an estimate from a release of one person, the public ``n``) has
    unbounded intervals: one person's responses identify no difference between the items.

    Depends on the public number of persons only, so the warning reveals nothing about the data.

    Parameters
    ----------
    what : str
        The estimate, as the message names it (for example ``"the spectral estimate"``).

    Returns
    -------
    str
        :data:`ONE_PERSON_NOTE`, for the estimate's ``info["note"]``.
    """
    import warnings

    warnings.warn(
        f"{what} is from one person (n = 1), whose responses identify no difference between the "
        "items: its intervals are unbounded (se = inf); use more persons",
        NoiseDominatesWarning,
        stacklevel=user_stacklevel(),
    )
    return ONE_PERSON_NOTE

"""Exceptions raised by privirt (input errors are plain :class:`ValueError`)."""

from __future__ import annotations


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
            stacklevel=3,
        )


#: ``info["note"]`` of a private estimate from one person (:func:`warn_one_person`).
ONE_PERSON_NOTE = "one person: the difficulties are not identified; the intervals are unbounded"


def warn_one_person(what: str, stacklevel: int = 3) -> str:
    """Warn that ``what`` (an estimate from a release of one person, the public ``n``) has
    unbounded intervals: one person's responses identify no difference between the items.

    Depends on the public number of persons only, so the warning reveals nothing about the data.

    Parameters
    ----------
    what : str
        The estimate, as the message names it (for example ``"the spectral estimate"``).
    stacklevel : int
        As in :func:`warnings.warn`, counted from the caller of this function.

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
        stacklevel=stacklevel + 1,
    )
    return ONE_PERSON_NOTE

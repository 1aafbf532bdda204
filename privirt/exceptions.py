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
    about the data."""


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

"""Exceptions raised by privirt (input errors are plain :class:`ValueError`)."""

from __future__ import annotations


class PrivirtError(Exception):
    """Base class for privirt's own errors."""


class BudgetExceeded(PrivirtError):
    """A private computation would spend more privacy budget than the ledger holds.

    Nothing noisy has been computed or returned when this is raised, and the ledger is
    unchanged.
    """


class DisconnectedComparisonGraph(PrivirtError, ValueError):
    """The item comparison graph is not connected, so item difficulties are not identified."""


class EmptyResponsesWarning(UserWarning):
    """Persons or items without a single observed response were dropped."""


class IdentifiabilityWarning(UserWarning):
    """Some estimates are set by a regularization or prior rather than by the data (for
    example items never compared, in both directions, with the others)."""

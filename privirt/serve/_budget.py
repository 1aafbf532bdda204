"""The budget arithmetic of :mod:`privirt.serve.store`: the sums of a set of spends
(:class:`Spent`, read with one SQL aggregate) and the composition rule applied to them."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Spent", "spent_epsilon", "remaining_epsilon", "LEDGER_TOLERANCE", "MIN_DELTA", "MAX_DELTA",
           "check_delta_limit"]

LEDGER_TOLERANCE = 1e-12
#: δ of a request must lie in [MIN_DELTA, MAX_DELTA]; so must a data set's and an allowance's δ
#: (an allowance's δ is a request's default δ).
MIN_DELTA = 1e-15
MAX_DELTA = 0.1


def check_delta_limit(delta: float, name: str = "delta") -> float:
    """``delta`` if it lies in the service's limit [MIN_DELTA, MAX_DELTA], else a ValueError
    naming ``name``."""
    if not MIN_DELTA <= float(delta) <= MAX_DELTA:
        raise ValueError(f"{name} must lie in [{MIN_DELTA:g}, {MAX_DELTA:g}] (the limit of a request's δ), "
                         f"got {delta!r}")
    return float(delta)


@dataclass(frozen=True)
class Spent:
    """The sums of a set of spends that the composition rule reads (one SQL aggregate).

    :func:`privirt.private.accounting.total_epsilon` composes spends through ``Σρᵢ``, ``Σεᵢ``,
    ``Σδᵢ`` and, over the pure spends (``δᵢ = 0 < εᵢ``), ``Σεᵢ`` and ``Σεᵢ²/2``; so the debit
    reads these five sums (and the count) with one ``SELECT SUM(...)`` inside its transaction
    instead of loading every spend, and :meth:`total` hands them to
    :func:`~privirt.private.accounting.total_epsilon_of_sums` (the one composition rule).
    """

    n: int = 0
    rho: float = 0.0
    epsilon: float = 0.0
    delta: float = 0.0
    pure_epsilon: float = 0.0
    pure_rho: float = 0.0

    @classmethod
    def of(cls, costs) -> "Spent":
        """The sums of a list of costs (``PrivacyCost`` or ``(rho, epsilon, delta)``)."""
        from ..private.accounting import PrivacyCost

        items = [c if isinstance(c, PrivacyCost) else PrivacyCost(*map(float, c)) for c in costs]
        pure = [c.epsilon for c in items if c.delta == 0.0 and c.epsilon > 0]
        return cls(len(items), math.fsum(c.rho for c in items), math.fsum(c.epsilon for c in items),
                   math.fsum(c.delta for c in items), math.fsum(pure), math.fsum(0.5 * e * e for e in pure))

    @classmethod
    def from_row(cls, row) -> "Spent":
        return cls(int(row[0]), *(float(v or 0.0) for v in row[1:6]))

    def plus(self, cost) -> "Spent":
        """These spends and one more."""
        return self._add(Spent.of([cost]))

    def _add(self, other: "Spent") -> "Spent":
        return Spent(self.n + other.n, self.rho + other.rho, self.epsilon + other.epsilon,
                     self.delta + other.delta, self.pure_epsilon + other.pure_epsilon,
                     self.pure_rho + other.pure_rho)

    def total(self, delta: float) -> float:
        """ε of the composition at ``delta`` (:func:`total_epsilon`'s rule; 0 without spends)."""
        from ..private.accounting import total_epsilon_of_sums

        if self.n == 0:
            return 0.0
        return total_epsilon_of_sums(rho=self.rho, epsilon=self.epsilon, delta_spent=self.delta,
                                     pure_epsilon=self.pure_epsilon, pure_rho=self.pure_rho, delta=delta)


#: the sums :class:`Spent` holds, over a data set's spends (``?``: its id) or one analyst's
_SUMS = ("SELECT COUNT(*), COALESCE(SUM(rho), 0), COALESCE(SUM(epsilon), 0), COALESCE(SUM(delta), 0),"
         " COALESCE(SUM(CASE WHEN delta = 0 AND epsilon > 0 THEN epsilon ELSE 0 END), 0),"
         " COALESCE(SUM(CASE WHEN delta = 0 AND epsilon > 0 THEN 0.5 * epsilon * epsilon ELSE 0 END), 0)"
         " FROM spends WHERE dataset_id = ?")


def spent_epsilon(spent: Spent, delta: float) -> float:
    """ε of the composed spends at the budget's δ (0 without spends)."""
    return float(spent.total(delta))


def remaining_epsilon(spent: Spent, epsilon: float, delta: float) -> float:
    """``ε_budget − ε_spent`` (≥ 0): a pure-ε spend this large always fits.

    Adding a pure ε spend x raises the composed total by at most x
    (:func:`privirt.accounting.total_epsilon` adds it to the ε part), so this is a safe lower
    bound of what still fits; zCDP (Gaussian) spends compose more tightly than this suggests.
    """
    used = spent_epsilon(spent, delta)
    if not math.isfinite(used):
        return 0.0
    return max(0.0, float(epsilon) - used)


def _fits(spent: Spent, cost, epsilon: float, delta: float) -> bool:
    """Whether the spends plus ``cost`` fit (ε, δ), composed as :func:`total_epsilon` composes.

    Fast path: ``Σεᵢ + ε_classic(Σρᵢ, δ − Σδᵢ)`` (Bun & Steinke's closed form) is an upper bound of
    the composed total (the tight conversion is never above it), so when it fits the total fits;
    otherwise the exact total decides.  The answer is the exact rule's either way.
    """
    from mechanisms.measures import zcdp_to_approx_dp

    new = spent.plus(cost)
    limit = epsilon * (1.0 + LEDGER_TOLERANCE)
    if new.delta < delta:
        bound = new.epsilon + (zcdp_to_approx_dp(new.rho, delta - new.delta, tight=False) if new.rho > 0 else 0.0)
        if bound <= limit:
            return True
    return new.total(delta) <= limit

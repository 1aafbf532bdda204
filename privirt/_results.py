"""The result contract shared by every item estimator.

:class:`ItemEstimate` is the base of the spectral, CML, private and Bayesian item results: a
``beta`` Series indexed by item label, ``items``, ``top_k``, ``to_frame`` and an ``info``
dictionary; private results add ``privacy``.  Subclasses add their own columns to
``to_frame`` by overriding :meth:`ItemEstimate._frame_columns`.

Result objects (these, the releases, :class:`~privirt.AndersenResult`,
:class:`~privirt.SufficientStatistics` and :class:`~privirt.Posterior`) compare by identity,
like :class:`~privirt.Responses`: their dataclasses are declared ``eq=False``, so ``r == other``
is True only for the same object and never compares pandas fields (which raised); compare
values field by field, e.g. ``r.beta.equals(other.beta)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ._checks import brief

__all__ = ["NONFINITE", "ItemEstimate", "json_floats", "top_k_labels"]

#: how :func:`json_floats` writes the non-finite values JSON has no number for (an uninformative
#: estimate's ``se = inf`` and ``ci = (-inf, inf)``; NaN where ``n_boot=0``), in the service's
#: results and the CLI's ``--out`` JSON alike; the client maps them back
NONFINITE = {math.inf: "inf", -math.inf: "-inf"}


def json_floats(values) -> list:
    """A float vector as JSON: finite values as numbers, ``inf``/``-inf``/``nan`` as those
    strings (so that an unbounded interval and a missing one stay apart).

    Parameters
    ----------
    values : array_like of float
        The vector (a Series, an array, a list).

    Returns
    -------
    list
        One float or string per value.
    """
    return [v if math.isfinite(v) else NONFINITE.get(v, "nan")
            for v in np.asarray(values, dtype=float).tolist()]


def top_k_labels(beta: pd.Series, k: int, largest: bool = True) -> pd.Index:
    """Labels of the ``k`` largest (or smallest) values of ``beta``, most extreme first; ties
    keep item order."""
    m = len(beta)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= m:
        raise ValueError(f"k must be an integer between 1 and the number of items ({m}), got {brief(k)}")
    values = beta.to_numpy(dtype=float)
    order = np.argsort(-values if largest else values, kind="stable")
    return beta.index[order[: int(k)]]


class ItemEstimate:
    """Mixin for results holding item difficulties ``beta`` (a Series indexed by item)."""

    beta: pd.Series
    info: dict

    @property
    def items(self) -> pd.Index:
        """Item labels, in the order of ``beta``."""
        return self.beta.index

    def top_k(self, k: int, *, largest: bool = True) -> pd.Index:
        """Labels of the ``k`` hardest items (largest β), or the ``k`` easiest with
        ``largest=False``, ordered from the most extreme.  Ties keep item order."""
        return top_k_labels(self.beta, k, largest)

    def _frame_columns(self) -> dict[str, Any]:
        return {"beta": self.beta}

    def to_frame(self) -> pd.DataFrame:
        """DataFrame indexed by item, one column per per-item quantity (``beta`` first)."""
        frame = pd.DataFrame(self._frame_columns())
        frame.index.name = self.beta.index.name
        return frame

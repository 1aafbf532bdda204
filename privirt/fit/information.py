"""Rasch item and test information functions.

Item ``i`` carries Fisher information ``I_i(θ) = P_i(θ)(1 − P_i(θ))`` about θ, with
``P_i(θ) = logistic(θ − β_i)``; the test information is their sum and the standard error of
measurement at θ is ``1 / √I(θ)``.  See ``docs/fit.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from .._checks import holds_bools
from ._inputs import as_beta

__all__ = ["item_information", "test_information", "theta_grid"]


def theta_grid(beta: pd.Series, n_points: int = 161, margin: float = 3.0) -> np.ndarray:
    """An evenly spaced θ grid covering the difficulties with ``margin`` logits either side
    (at least −4 to 4)."""
    lo = min(-4.0, float(beta.min()) - margin)
    hi = max(4.0, float(beta.max()) + margin)
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(hi - lo)):
        raise ValueError(f"the difficulties span [{float(beta.min()):g}, {float(beta.max()):g}], too "
                         "wide for a θ grid; pass theta= (the abilities to evaluate at)")
    return np.linspace(lo, hi, int(n_points))


def _grid(theta: Any, b: pd.Series) -> np.ndarray:
    if theta is None:
        return theta_grid(b)
    if holds_bools(theta):  # True/False are no abilities (bools are refused as numbers)
        raise ValueError("theta must hold numbers, not True/False")
    try:
        grid = np.atleast_1d(np.asarray(theta, dtype=np.float64))
    except (TypeError, ValueError):
        raise ValueError(f"theta must be numeric, got {type(theta).__name__}") from None
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)):
        raise ValueError("theta must be a non-empty one-dimensional array of finite values")
    return grid


def item_information(beta: Any, theta: Any = None) -> pd.DataFrame:
    """Information ``P(1 − P)`` of each Rasch item at each ability.

    Parameters
    ----------
    beta : item estimate, pandas.Series or array-like
        Item difficulties (a result with a ``beta`` attribute, a Series or an array).
    theta : array-like, optional
        Abilities to evaluate at (default: :func:`theta_grid`, 161 points covering the
        difficulties with 3 logits either side).

    Returns
    -------
    pandas.DataFrame
        Index ``theta``, one column per item (labels carried through).

    Examples
    --------
    >>> import privirt
    >>> info = privirt.item_information([-1.0, 0.0, 1.0], theta=[0.0])
    >>> round(float(info.iloc[0, 1]), 3)
    0.25
    """
    b = as_beta(beta)
    grid = _grid(theta, b)
    z = grid[:, None] - b.to_numpy()[None, :]
    # P·Q with Q = expit(−z), not 1 − P: P rounds to 1 beyond 37 logits above an item, and the
    # information was 0 there (se inf) where it is e^(−z), symmetric with the lower tail
    frame = pd.DataFrame(special.expit(z) * special.expit(-z), index=pd.Index(grid, name="theta"),
                         columns=b.index.copy())
    return frame


def test_information(beta: Any, theta: Any = None) -> pd.DataFrame:
    """Test information ``I(θ) = Σ_i P_i(1 − P_i)`` and the standard error ``1/√I(θ)``.

    Parameters are those of :func:`item_information`.

    Returns
    -------
    pandas.DataFrame
        Index ``theta``, columns ``information`` and ``se``.
    """
    info = item_information(beta, theta).sum(axis=1).to_numpy()
    index = pd.Index(_grid(theta, as_beta(beta)), name="theta")
    with np.errstate(divide="ignore"):  # I = 0 (far from every item, underflowed): se = inf
        se = 1.0 / np.sqrt(info)
    return pd.DataFrame({"information": info, "se": se}, index=index)


test_information.__test__ = False  # not a pytest test, despite the name

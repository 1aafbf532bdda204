"""Rasch infit and outfit mean squares per item and per person (Wright & Masters 1982).

With ``P = logistic(θ_l − β_i)``, ``W = P(1 − P)`` and residual ``x − P``, the outfit is the
mean of the squared standardized residuals ``(x − P)² / W`` and the infit their
information-weighted mean ``Σ (x − P)² / Σ W``; both are standardized to ``z`` by the
Wilson–Hilferty cube-root transform with the model variances of the mean squares.  Missing
cells drop out of every sum.  Formulas and conventions: ``docs/fit.md``.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import special

from ..data.responses import ResponsesLike
from ._inputs import prepare

__all__ = ["item_fit", "person_fit"]

#: cells per block of rows (float64 temporaries of this size, 8 bytes each: 16 MiB)
_BLOCK_CELLS = 2**21
_COLUMNS = ["infit", "outfit", "infit_z", "outfit_z", "n"]


def item_fit(
    X: ResponsesLike,
    beta: Any,
    theta: Any = None,
    *,
    extreme: Literal["drop", "keep"] = "drop",
) -> pd.DataFrame:
    """Infit and outfit mean squares of each item, with their standardized values.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, NaN/None for missing (missing cells drop out).
    beta : item estimate, pandas.Series or array-like
        Rasch item difficulties: a result with a ``beta`` attribute (e.g.
        :func:`privirt.cmle_estimate`), a Series indexed by the same items in the same
        order, or an array in column order.
    theta : pandas.Series, DataFrame or array-like, optional
        Person abilities (a Series indexed by the same persons in the same order, the
        DataFrame of :func:`privirt.estimate_abilities`, or an array in row order).
        Default: Warm's weighted likelihood estimates given ``beta``.
    extreme : {"drop", "keep"}
        ``"drop"`` (default, as eRm and Winsteps do) leaves out persons whose score is
        extreme (all answered items right, or all wrong): their residuals all share one sign
        and their ability is an extrapolation.  ``"keep"`` uses them at the given or WLE θ.

    Returns
    -------
    pandas.DataFrame
        Indexed by item: ``infit``, ``outfit`` (mean squares, expected 1), ``infit_z``,
        ``outfit_z`` (standardized, approximately N(0, 1) under the model) and ``n`` (the
        number of responses used).  Values > 1 signal noise (underfit), < 1 redundancy
        (overfit); an item with no response used gets NaN.

    Examples
    --------
    >>> import privirt
    >>> X = privirt.load_dataset("lsat7")
    >>> fit = privirt.item_fit(X, privirt.cmle_estimate(X))
    >>> fit.columns.tolist()
    ['infit', 'outfit', 'infit_z', 'outfit_z', 'n']
    """
    sums = _sums(X, beta, theta, extreme)
    table = _table(*sums["item"])
    table.index = sums["items"]
    return table


def person_fit(
    X: ResponsesLike,
    beta: Any,
    theta: Any = None,
    *,
    extreme: Literal["drop", "keep"] = "drop",
) -> pd.DataFrame:
    """Infit and outfit mean squares of each person, with their standardized values.

    Parameters are those of :func:`item_fit`.

    Returns
    -------
    pandas.DataFrame
        Indexed by person: ``theta`` (the ability used), ``infit``, ``outfit``,
        ``infit_z``, ``outfit_z`` and ``n`` (the number of items the person answered).  Persons
        with an extreme score (when ``extreme="drop"``) or without responses get NaN fit
        values.
    """
    sums = _sums(X, beta, theta, extreme)
    table = _table(*sums["person"])
    table.index = sums["persons"]
    table.insert(0, "theta", sums["theta"])
    table["n"] = sums["answered"]
    return table


def _sums(X: Any, beta: Any, theta: Any, extreme: str) -> dict:
    """Per-item and per-person sums over the observed cells of the persons used."""
    resp, b, th, included = prepare(X, beta, theta, extreme=extreme)
    codes = resp.codes
    n, m = codes.shape
    bv = b.to_numpy()
    item = np.zeros((5, m))  # n, Σ r²/W, Σ r², Σ W, Σ (1/W − 3) ; Σ W(1 − 4W) separately
    item_c = np.zeros(m)
    person = np.zeros((5, n))
    person_c = np.zeros(n)
    rows = max(1, _BLOCK_CELLS // max(m, 1))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        c = codes[start:stop]
        use = (c >= 0) & included[start:stop, None]
        t = np.where(included[start:stop], th[start:stop], 0.0)
        z = t[:, None] - bv[None, :]
        # Q = expit(−z), not 1 − P: P rounds to 1 beyond 37 logits, and (x − P)²/W was then 0/0
        P, Q = special.expit(z), special.expit(-z)
        W = P * Q
        right = c == 1
        r2 = np.where(use, np.where(right, Q * Q, P * P), 0.0)
        Wu = np.where(use, W, 0.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            z2 = np.where(use, np.where(right, Q / P, P / Q), 0.0)  # (x − P)² / W
            kurt = np.where(use, 1.0 / W - 3.0, 0.0)  # E[(x−P)⁴] / W²
        cvar = np.where(use, W * (1.0 - 4.0 * W), 0.0)  # E[(x−P)⁴] − W²
        # (sums of terms near e^700 overflow to inf: Σ 1/W is summed again in logs below, and
        # an infinite outfit is the value of unexpected answers hundreds of logits away)
        with np.errstate(over="ignore", invalid="ignore"):
            for acc, acc_c, axis, sl in ((item, item_c, 0, slice(None)),
                                         (person, person_c, 1, slice(start, stop))):
                acc[0, sl] += use.sum(axis=axis)
                acc[1, sl] += z2.sum(axis=axis)
                acc[2, sl] += r2.sum(axis=axis)
                acc[3, sl] += Wu.sum(axis=axis)
                acc[4, sl] += kurt.sum(axis=axis)
                acc_c[sl] += cvar.sum(axis=axis)
    # far from every unit's cells the plain sums reach the ends of the doubles: 1/W overflows
    # beyond ~709 logits (outfit's q ≈ √Σ(1/W) / n is still finite), (Σ W)² underflows from ~354
    # and W itself from ~745 (infit and its q are finite). There (only) the sums are taken again,
    # as logarithms
    item_l, person_l = np.full((4, m), -np.inf), np.full((4, n), -np.inf)
    if not (np.isfinite(item[4]).all() and np.isfinite(person[4]).all()
            and not _far(item[0], item[3]).any() and not _far(person[0], person[3]).any()):
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            c = codes[start:stop]
            use = (c >= 0) & included[start:stop, None]
            t = np.where(included[start:stop], th[start:stop], 0.0)
            logs = _log_terms(t[:, None] - bv[None, :], c == 1, use)
            item_l = np.logaddexp(item_l, special.logsumexp(logs, axis=1))
            person_l[:, start:stop] = special.logsumexp(logs, axis=2)
    return {
        "item": (*item, item_c, item_l),
        "person": (*person, person_c, person_l),
        "items": resp.items.copy(),
        "persons": resp.persons.copy(),
        "answered": (codes >= 0).sum(axis=1).astype(np.int64),
        "theta": np.where(resp.codes.max(axis=1) >= 0, th, np.nan) if n else th,
    }


#: a Σ W below this is taken from its logarithm: (Σ W)² would lose digits as a subnormal
_FAR_SUM_W = 1e-140


def _far(count: np.ndarray, sum_w: np.ndarray) -> np.ndarray:
    """Units whose infit is taken from log sums (every cell hundreds of logits away)."""
    return (count > 0) & (sum_w < _FAR_SUM_W)


def _log_terms(z: np.ndarray, right: np.ndarray, use: np.ndarray) -> np.ndarray:
    """Logarithms of each cell's ``1/W``, ``(x − P)²``, ``W`` and ``W(1 − 4W)``, stacked
    (shape ``(4, *z.shape)``; −inf for unused cells), exact where the terms under- or overflow."""
    log_p, log_q = special.log_expit(z), special.log_expit(-z)
    log_w = log_p + log_q
    with np.errstate(divide="ignore"):  # 1 − 4W = (P − Q)² = tanh²(z/2), 0 at z = 0
        log_cw = log_w + 2.0 * np.log(np.abs(np.tanh(0.5 * z)))
    logs = np.stack([-log_w, 2.0 * np.where(right, log_q, log_p), log_w, log_cw])
    return np.where(use, logs, -np.inf)


def _table(count, sum_z2, sum_r2, sum_w, sum_kurt, sum_cvar, logs) -> pd.DataFrame:
    log_inv_w, log_r2, log_w, log_cw = logs
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        has = count > 0
        outfit = np.where(has, sum_z2 / count, np.nan)
        infit = np.where(has, sum_r2 / sum_w, np.nan)
        q_out = np.sqrt(np.clip(np.where(has, sum_kurt / count**2 - 1.0 / count, np.nan), 0, None))
        # where Σ 1/W overflowed (inf − inf gave NaN, or inf): q ≈ √(Σ 1/W)/n from its logarithm
        huge = has & ~np.isfinite(sum_kurt)
        q_out = np.where(huge, np.exp(0.5 * log_inv_w - np.log(np.where(has, count, 1.0))), q_out)
        q_in = np.sqrt(np.clip(np.where(has, sum_cvar / sum_w**2, np.nan), 0, None))
        # where Σ W is tiny: infit = Σ r² / Σ W and q_in = √Σ W(1 − 4W) / Σ W from logarithms
        far = _far(count, sum_w)
        infit = np.where(far, np.exp(log_r2 - log_w), infit)
        q_in = np.where(far, np.exp(0.5 * log_cw - log_w), q_in)
        table = pd.DataFrame({
            "infit": infit,
            "outfit": outfit,
            "infit_z": wilson_hilferty(infit, q_in),
            "outfit_z": wilson_hilferty(outfit, q_out),
            "n": count.astype(np.int64),
        })
    return table[_COLUMNS]


def wilson_hilferty(ms: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``z = (ms^(1/3) − 1)(3/q) + q/3`` (NaN where ``q`` is 0 or undefined)."""
    ms = np.asarray(ms, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (np.cbrt(ms) - 1.0) * (3.0 / q) + q / 3.0
    return np.where(q > 0, z, np.nan)

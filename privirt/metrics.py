"""Accuracy metrics for estimated item parameters against a reference (truth or another
estimator).

Rasch difficulties are identified only up to a common shift, so :func:`l2_error` and
:func:`linf_error` compare the *centred* vectors (each minus its own mean).  Ranking metrics
(:func:`top_k_accuracy`, :func:`kendall_tau`) are shift-invariant anyway.  A constant
estimate ranks nothing: its Kendall τ is 0 (τ-b itself is undefined there).

Every function accepts arrays or pandas Series.  Two Series are aligned by label (an error
names labels present in only one, or labels that occur twice); otherwise the lengths must
match.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ._checks import brief

__all__ = ["l2_error", "linf_error", "top_k_accuracy", "kendall_tau", "top_k_set"]


def _pair(est: Any, truth: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(est, pd.Series) and isinstance(truth, pd.Series):
        for name, series in (("est", est), ("truth", truth)):
            if series.index.has_duplicates:
                dup = list(dict.fromkeys(series.index[series.index.duplicated()]))
                raise ValueError(f"{name} has duplicate item labels {dup[:5]}; give each item "
                                 "one value (Series are matched by label)")
        if not est.index.equals(truth.index):
            only_e = est.index.difference(truth.index)
            only_t = truth.index.difference(est.index)
            if len(only_e) or len(only_t):
                raise ValueError(
                    f"est and truth have different labels (only in est: {list(only_e[:5])}, "
                    f"only in truth: {list(only_t[:5])})"
                )
            truth = truth.reindex(est.index)
    e = np.asarray(est, dtype=np.float64).ravel()
    t = np.asarray(truth, dtype=np.float64).ravel()
    if e.shape != t.shape:
        raise ValueError(f"est and truth must have the same length, got {e.size} and {t.size}")
    if e.size == 0:
        raise ValueError("est and truth are empty")
    if not (np.all(np.isfinite(e)) and np.all(np.isfinite(t))):
        raise ValueError("est and truth must be finite")
    return e, t


def l2_error(est: Any, truth: Any, *, relative: bool = False) -> float:
    """Euclidean distance ``‖(est − mean) − (truth − mean)‖₂`` of the centred vectors.

    ``relative=True`` divides by ``‖truth − mean‖₂`` (the relative ℓ2 error of the paper).
    """
    e, t = _pair(est, truth)
    diff = (e - e.mean()) - (t - t.mean())
    err = float(np.linalg.norm(diff))
    if relative:
        denom = float(np.linalg.norm(t - t.mean()))
        if denom == 0:
            raise ValueError("relative error undefined: truth is constant")
        err /= denom
    return err


def linf_error(est: Any, truth: Any) -> float:
    """Largest absolute entrywise difference of the centred vectors."""
    e, t = _pair(est, truth)
    return float(np.max(np.abs((e - e.mean()) - (t - t.mean()))))


def top_k_set(values: Any, k: int, *, largest: bool = True) -> np.ndarray:
    """Positions of the ``k`` largest (or smallest) entries; ties broken by position."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= v.size:
        raise ValueError(f"k must be an integer between 1 and {v.size}, got {brief(k)}")
    order = np.argsort(-v if largest else v, kind="stable")
    return order[: int(k)]


def top_k_accuracy(est: Any, truth: Any, k: int, *, largest: bool = True) -> float:
    """``|top-k(est) ∩ top-k(truth)| / k``: the share of the true ``k`` hardest items
    (``largest=False``: easiest) that the estimate also puts in its top ``k``.

    Items tied with the estimate's ``k``-th value get fractional credit, the expected overlap
    when the ties are broken at random: a constant estimate (a mechanism whose noise swamps the
    data) scores what chance gives, ``k/m``, where breaking its ties by position scored 1 or 0
    by column order.  A constant ``truth`` has no top ``k`` to recover: NaN.  The truth's own
    ties are broken by position (:func:`top_k_set`).
    """
    e, t = _pair(est, truth)
    top_k_set(e, k)  # (checks k)
    if np.all(t == t[0]):
        return math.nan
    b = top_k_set(t, k, largest=largest)
    v = e if largest else -e
    kth = np.sort(v)[::-1][int(k) - 1]
    above, tied = v > kth, v == kth
    hits = np.count_nonzero(above[b]) + (int(k) - np.count_nonzero(above)) * np.count_nonzero(tied[b]) / np.count_nonzero(tied)
    return float(hits) / int(k)


def kendall_tau(est: Any, truth: Any) -> float:
    """Kendall's τ-b rank correlation (:func:`scipy.stats.kendalltau`).

    τ-b is undefined (0/0) when a vector is constant.  A constant *estimate* (such as the
    all-zero estimate of a mechanism whose noise swamps the data) ranks nothing, so it scores
    0, no association, rather than NaN; a constant ``truth`` has no ranking to recover and
    still gives NaN.
    """
    e, t = _pair(est, truth)
    if e.size < 2:
        raise ValueError("Kendall's tau needs at least 2 items")
    if np.all(t == t[0]):
        return math.nan
    if np.all(e == e[0]):
        return 0.0
    return float(stats.kendalltau(e, t).statistic)

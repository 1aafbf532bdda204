"""Shared input handling of the fit statistics: responses, item difficulties and abilities.

``beta`` may be any item estimate (an object with a ``beta`` Series, e.g. the result of
:func:`privirt.cmle_estimate` or :func:`privirt.spectral_estimate`), a Series indexed by item,
or an array in column order.  Labels must match the responses' items exactly and in the same
order: a reordered or different item set is refused rather than silently realigned.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._checks import check_choice, holds_bools, label_type_mismatch, refuse_duplicate_items
from ..data.responses import Responses, ResponsesLike, as_responses

__all__ = ["ability_values", "as_beta", "as_theta", "prepare"]


#: the largest |β| the fit statistics take: e^700 is near float64's largest power of e (709.8),
#: and the log-domain terms of far cells (docs/fit.md) stay finite up to it
MAX_ABS_BETA = 700.0


def _labels(index: pd.Index, k: int = 3) -> str:
    head = [str(x) for x in index[:k]]
    return "[" + ", ".join(head) + (", ..." if len(index) > k else "") + "]"


def as_beta(beta: Any, items: pd.Index | None = None) -> pd.Series:
    """Item difficulties as a float Series (labels checked against ``items`` when given)."""
    if hasattr(beta, "beta") and not isinstance(beta, (pd.Series, pd.DataFrame, np.ndarray)):
        beta = beta.beta
    if isinstance(beta, pd.DataFrame):
        if "beta" not in beta.columns:
            raise ValueError("beta is a DataFrame without a 'beta' column; pass a Series, an "
                             "array or an item estimate")
        beta = beta["beta"]
    if holds_bools(beta):  # True/False are no difficulties (bools are refused as numbers)
        raise ValueError("beta must hold numbers, not True/False")
    if isinstance(beta, pd.Series):
        try:
            values = beta.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("beta must hold numbers") from None
        index = beta.index
        refuse_duplicate_items(index)
        if items is not None and not index.equals(items):
            if len(index) == len(items) and set(index) == set(items):
                raise ValueError(
                    f"beta's items are in a different order ({_labels(index)}) than the "
                    f"responses' ({_labels(items)}); pass beta.reindex(<responses' items>)"
                )
            as_text = label_type_mismatch(index, items, "beta", "the responses")
            if as_text is not None:
                raise ValueError(as_text)
            extra, missing = index.difference(items), items.difference(index)
            raise ValueError(
                f"beta's items do not match the responses' items (missing from beta: "
                f"{_labels(missing)}, not in the responses: {_labels(extra)})"
            )
    else:
        try:
            values = np.asarray(beta, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                "beta must be an item estimate, a pandas Series indexed by item or a numeric "
                f"array, got {type(beta).__name__}"
            ) from None
        if values.ndim != 1:
            raise ValueError(f"beta must be one-dimensional, got shape {values.shape}")
        if items is not None and values.size != len(items):
            raise ValueError(
                f"beta has {values.size} values but the responses have {len(items)} items"
            )
        index = items if items is not None else pd.RangeIndex(values.size)
    if values.size == 0:
        raise ValueError("beta is empty: give one difficulty per item")
    if not np.all(np.isfinite(values)):
        raise ValueError("beta must be finite (an item with an infinite difficulty has no fit)")
    return pd.Series(values, index=index.copy(), name="beta")


def check_fit_range(beta: pd.Series) -> None:
    """Refuse a difficulty beyond :data:`MAX_ABS_BETA` for the fit statistics (the information
    functions take any finite β: their far tails are exact)."""
    far = np.flatnonzero(np.abs(beta.to_numpy()) > MAX_ABS_BETA)
    if far.size:
        raise ValueError(
            f"beta must lie within ±{MAX_ABS_BETA:g} logits (beyond, e^(θ − β) overflows and the fit "
            f"statistics are infinite or undefined); item {beta.index[far[0]]!r} has "
            f"{beta.iloc[far[0]]:g}: pass estimated difficulties")


def _labelled_beta(beta: Any) -> pd.Series | None:
    if hasattr(beta, "beta") and not isinstance(beta, (pd.Series, pd.DataFrame, np.ndarray)):
        beta = beta.beta
    if isinstance(beta, pd.DataFrame) and "beta" in beta.columns:
        beta = beta["beta"]
    return beta if isinstance(beta, pd.Series) else None


def _theta_column(theta: Any) -> Any:
    """``theta``, or the ``'theta'`` column of a DataFrame; True/False refused."""
    if isinstance(theta, pd.DataFrame):
        if "theta" not in theta.columns:
            raise ValueError("theta is a DataFrame without a 'theta' column (as returned by "
                             "privirt.estimate_abilities); pass a Series or an array")
        theta = theta["theta"]
    if holds_bools(theta):  # True/False are no abilities (bools are refused as numbers)
        raise ValueError("theta must hold numbers, not True/False")
    return theta


def _floats(theta: Any) -> np.ndarray:
    try:
        return np.asarray(theta, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"theta must be numeric, got {type(theta).__name__}") from None


def ability_values(theta: Any) -> np.ndarray:
    """Person abilities (an array, a Series or the DataFrame of ``estimate_abilities``) as a
    float array, not matched to any persons (for the plots); refused as by :func:`as_theta`."""
    values = _floats(_theta_column(theta))
    if values.ndim > 1:  # (a 2-D array was flattened: persons × something read as persons)
        raise ValueError(f"theta must be one value per person (1-D), got shape {values.shape}")
    return np.atleast_1d(values)


def as_theta(theta: Any, persons: pd.Index) -> np.ndarray:
    """Person abilities as a float array in row order (Series checked against ``persons``)."""
    theta = _theta_column(theta)
    if isinstance(theta, pd.Series):
        if not theta.index.equals(persons):
            raise ValueError(
                f"theta's persons ({_labels(theta.index)}) do not match the responses' persons "
                f"({_labels(persons)}) in labels and order; pass theta.reindex(<persons>)"
            )
        theta = theta.to_numpy()
    values = _floats(theta)
    if values.ndim != 1 or values.size != len(persons):
        raise ValueError(
            f"theta must have one value per person ({len(persons)}), got shape {values.shape}"
        )
    return values


def prepare(
    X: ResponsesLike, beta: Any, theta: Any, *, extreme: str
) -> tuple[Responses, pd.Series, np.ndarray, np.ndarray]:
    """Validated ``(responses, beta, theta, included)``.

    ``included`` marks the persons whose responses enter the statistics: everyone with at
    least one response, less those with an extreme score (all answered items right or all
    wrong) when ``extreme="drop"``.  ``theta`` defaults to Warm's WLE given ``beta``.
    """
    check_choice("extreme", extreme, ("drop", "keep"))
    resp = X if isinstance(X, Responses) else as_responses(X, empty="keep")
    labelled = _labelled_beta(beta)
    if labelled is not None and not labelled.index.equals(resp.items):
        # the estimators drop items without any response; follow them when beta is
        # exactly the responses' items less those
        answered = (resp.codes >= 0).any(axis=0)
        if not answered.all() and labelled.index.equals(resp.items[answered]):
            resp = resp.subset(items=np.flatnonzero(answered))
    b = as_beta(beta, resp.items)
    check_fit_range(b)
    if theta is None:
        from ..rasch.abilities import estimate_abilities

        th = estimate_abilities(resp, b, method="wle")["theta"].to_numpy(dtype=np.float64)
    else:
        th = as_theta(theta, resp.persons)
    obs = resp.codes >= 0
    n_ans = obs.sum(axis=1)
    score = (resp.codes == 1).sum(axis=1)
    included = n_ans > 0
    inner = (score > 0) & (score < n_ans)
    if extreme == "drop":
        included &= inner
    bad = included & ~np.isfinite(th)
    if bad.any():
        who = _labels(resp.persons[np.flatnonzero(bad)])
        if not inner[bad].any():  # (extreme="keep": dropping them cures it)
            raise ValueError(
                f"theta is not finite for {int(bad.sum())} person(s) with an extreme score (all "
                f"right or all wrong; e.g. {who}); pass extreme='drop' to leave them out, or give "
                "them a finite theta (e.g. WLE)"
            )
        raise ValueError(
            f"theta is not finite for {int(bad.sum())} person(s) whose responses are used "
            f"(e.g. {who}); give those persons a finite theta (e.g. WLE, the default when theta "
            "is not given)"
        )
    return resp, b, th, included

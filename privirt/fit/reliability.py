"""Separation reliabilities of persons and items (Wright & Masters 1982) and KR-20.

The Rasch separation reliability of a set of measures is the share of their observed variance
that is not measurement error, ``(SD² − MSE) / SD²`` with ``MSE`` the mean squared standard
error; it is the measure-based counterpart of KR-20, reported beside the classical KR-20 of
the raw scores.  Formulas and conventions: ``docs/fit.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import special

from ..data.responses import ResponsesLike
from ._inputs import prepare
from .meansquares import _far, _log_terms

__all__ = ["Reliability", "reliability", "separation"]


def separation(measures: np.ndarray, se: np.ndarray) -> dict[str, float]:
    """Separation statistics of ``measures`` with standard errors ``se``.

    Returns a dict with ``n``, ``observed_sd`` (divisor n), ``rmse`` (root mean squared
    error), ``true_sd`` (``√max(SD² − MSE, 0)``), ``reliability`` (``true_sd² / SD²``),
    ``separation`` (``true_sd / rmse``) and ``strata`` (``(4 · separation + 1) / 3``).
    Values that need two measures or a positive variance are NaN otherwise.
    """
    measures = np.asarray(measures, dtype=np.float64)
    se = np.asarray(se, dtype=np.float64)
    n = measures.size
    if n < 2:
        nan = float("nan")
        return {"n": n, "observed_sd": nan, "rmse": nan, "true_sd": nan,
                "reliability": nan, "separation": nan, "strata": nan}
    var_obs = float(np.var(measures))
    top = float(np.max(se))
    if 1e150 < top < np.inf:  # se² would overflow (a person hundreds of logits from the items)
        rmse = top * float(np.sqrt(np.mean((se / top) ** 2)))
        with np.errstate(over="ignore"):
            mse = rmse * rmse
    else:
        mse = float(np.mean(se**2))
    var_true = max(var_obs - mse, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = var_true / var_obs if var_obs > 0 else float("nan")
        sep = float(np.sqrt(var_true) / np.sqrt(mse)) if mse > 0 else float("nan")
    return {"n": n, "observed_sd": float(np.sqrt(var_obs)),
            "rmse": rmse if 1e150 < top < np.inf else float(np.sqrt(mse)),
            "true_sd": float(np.sqrt(var_true)), "reliability": float(rel),
            "separation": sep, "strata": (4.0 * sep + 1.0) / 3.0}


@dataclass(frozen=True)
class Reliability:
    """Result of :func:`reliability`.

    Attributes
    ----------
    person, item : dict
        :func:`separation` statistics of the person abilities and of the item
        difficulties (``reliability``, ``separation``, ``strata``, ``observed_sd``,
        ``rmse``, ``true_sd``, ``n``).
    kr20 : float
        KR-20 (Cronbach's α for 0/1 items) of the raw scores of the persons who answered
        every item (NaN with fewer than two such persons or items).
    kr20_n : int
        Persons entering KR-20.
    item_se_source : str
        ``"estimate"`` when the item standard errors came with ``beta`` (e.g. CML), else
        ``"information"`` (``1/√Σ_l P(1 − P)`` over the persons used).
    """

    person: dict
    item: dict
    kr20: float
    kr20_n: int
    item_se_source: str

    @property
    def person_reliability(self) -> float:
        """Person separation reliability (the Rasch counterpart of KR-20)."""
        return self.person["reliability"]

    @property
    def item_reliability(self) -> float:
        """Item separation reliability."""
        return self.item["reliability"]

    def to_frame(self) -> pd.DataFrame:
        """One row each for persons and items: the :func:`separation` statistics."""
        cols = ["reliability", "separation", "strata", "observed_sd", "rmse", "true_sd", "n"]
        return pd.DataFrame([self.person, self.item], index=["person", "item"])[cols]

    def __str__(self) -> str:
        p, i = self.person, self.item
        return (
            f"person separation reliability {p['reliability']:.3f} (separation "
            f"{p['separation']:.2f}, strata {p['strata']:.2f}, {p['n']} persons); "
            f"item separation reliability {i['reliability']:.3f} (separation "
            f"{i['separation']:.2f}, {i['n']} items); KR-20 {self.kr20:.3f} "
            f"({self.kr20_n} complete persons)"
        )


def reliability(
    X: ResponsesLike,
    beta: Any,
    theta: Any = None,
    *,
    extreme: Literal["drop", "keep"] = "drop",
) -> Reliability:
    """Person and item separation reliability and KR-20.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, NaN/None for missing.
    beta : item estimate, pandas.Series or array-like
        Item difficulties; when it is a result with an ``se`` Series (e.g. CML), those
        standard errors enter the item reliability.
    theta : optional
        Person abilities (default: Warm's WLE given ``beta``).
    extreme : {"drop", "keep"}
        Whether persons with an extreme score enter the person and item statistics (default
        ``"drop"``, as Winsteps' "non-extreme" rows).  KR-20 always uses every complete
        person.

    Returns
    -------
    Reliability

    Examples
    --------
    >>> import privirt
    >>> X = privirt.load_dataset("lsat7")
    >>> rel = privirt.reliability(X, privirt.cmle_estimate(X))
    >>> round(rel.kr20, 2)
    0.45
    """
    resp, b, th, used = prepare(X, beta, theta, extreme=extreme)
    codes = resp.codes
    obs = codes >= 0
    bv = b.to_numpy()
    # person SE from the information of the items each person answered
    z = np.where(used, th, 0.0)[:, None] - bv[None, :]
    W = np.where(obs & used[:, None], special.expit(z) * special.expit(-z), 0.0)  # (no 1 − P: 0 from 37 logits)
    person = separation(th[used], _inverse_root(W[used], z[used], obs[used], axis=1))
    se = _item_se(beta)
    if isinstance(se, pd.Series) and se.index.equals(b.index) and np.all(np.isfinite(se)):
        item_se, source = se.to_numpy(dtype=np.float64), "estimate"
    else:
        with np.errstate(divide="ignore"):
            item_se, source = _inverse_root(W, z, obs & used[:, None], axis=0), "information"
    ok = np.isfinite(item_se)
    item = separation(bv[ok], item_se[ok])
    complete = obs.all(axis=1)
    kr20 = _kr20((codes[complete] == 1).astype(np.float64))
    return Reliability(person=person, item=item, kr20=kr20, kr20_n=int(complete.sum()),
                       item_se_source=source)


def _inverse_root(W: np.ndarray, z: np.ndarray, use: np.ndarray, axis: int) -> np.ndarray:
    """``1/√Σ W`` along ``axis``; where ``Σ W`` is tiny (every cell hundreds of logits away,
    ``W`` subnormal or 0) from ``log Σ W``, summed as in the mean squares."""
    sum_w = W.sum(axis=axis)
    far = _far(use.sum(axis=axis), sum_w)
    with np.errstate(divide="ignore"):
        out = 1.0 / np.sqrt(sum_w)
    if far.any():
        log_w = special.logsumexp(_log_terms(z, np.zeros(z.shape, bool), use)[2], axis=axis)
        out = np.where(far, np.exp(-0.5 * log_w), out)
    return out


def _item_se(beta: Any) -> Any:
    if isinstance(beta, pd.DataFrame):
        return beta["se"] if "se" in beta.columns else None
    if isinstance(beta, (pd.Series, np.ndarray, list, tuple)):
        return None
    return getattr(beta, "se", None)


def _kr20(x: np.ndarray) -> float:
    """KR-20 = k/(k−1) · (1 − Σ p_i(1 − p_i) / Var(raw score)), variances with divisor n."""
    n, k = x.shape
    if n < 2 or k < 2:
        return float("nan")
    p = x.mean(axis=0)
    var = float(np.var(x.sum(axis=1)))
    if var == 0:
        return float("nan")
    return float(k / (k - 1) * (1.0 - np.sum(p * (1 - p)) / var))

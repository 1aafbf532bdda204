"""Person abilities θ given Rasch item difficulties β.

Under ``P(X_li = 1) = logistic(θ_l − β_i)`` a person's likelihood depends on the data only
through the set of items answered and the raw score ``r``, so θ is solved once per distinct
(observed-item set, score) pair and broadcast to the persons sharing it.

Estimators
----------
``"wle"`` (default)
    Warm's (1989) weighted likelihood estimate: the root of
    ``r − Σ P_i(θ) + I'(θ) / (2 I(θ)) = 0`` with ``I = Σ P_i Q_i`` and
    ``I' = Σ P_i Q_i (1 − 2 P_i)``.  Finite for all-correct and all-wrong rows, and
    first-order unbiased.  ``se = 1 / √I(θ)``.
``"mle"``
    The maximum likelihood root of ``r = Σ P_i(θ)``; ``±inf`` (with ``se = inf``) for
    all-wrong / all-correct rows, where no finite maximiser exists.
``"eap"``
    Posterior mean under a standard normal prior; ``se`` is the posterior standard
    deviation.  Adaptive Gauss–Hermite quadrature (Liu & Pierce 1994): 31 nodes centred on
    each group's posterior mode and scaled by the curvature there, so that the rule stays
    accurate however narrow the posterior gets on long tests (within ~1e-9 of a dense grid;
    ~1e-12 except for skewed posteriors, every answered item far from θ).

``"wle"`` on short tests with widely spread items: the weighted likelihood can have several
stationary points (two items at β = ±2.5, one right: roots at −1.21, 0 and +1.21, of which 0
is a minimum); the solver returns the root its bracket converges to, not necessarily the
largest maximum.

Missing responses drop out of every sum.  The root finder is a safeguarded Newton method
(bisection whenever a Newton step leaves the bracket), vectorised over the groups; a group is
frozen once it has converged, so its θ is the same in any batch as alone.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
import pandas as pd

from .._backend import get_xp, to_numpy
from .._checks import check_positive_int, check_positive_number
from ..data.responses import ResponsesLike, as_responses

__all__ = ["estimate_abilities"]

_BRACKET = 40.0
#: Nodes of the adaptive Gauss–Hermite rule for EAP (error < 1e-9 against a dense grid, from
#: one item to thousands; ~1e-12 unless the posterior is skewed: every answered item far away).
_EAP_POINTS = 31
#: Groups per EAP chunk: the (groups × nodes × items) array holds at most this many cells.
_EAP_CELLS = 2**22
#: EAP's posterior modes (the centres of its nodes) are found at least this finely, in at most
#: this many steps, whatever ``tol``/``max_iter`` are: the estimate is a posterior mean, which
#: must not depend on a root finder's settings (bisection alone needs ~50 steps over [r − k, r]).
_EAP_TOL, _EAP_STEPS = 1e-10, 200


def estimate_abilities(
    X: ResponsesLike,
    beta: Any,
    *,
    method: Literal["wle", "mle", "eap"] = "wle",
    device: str = "auto",
    tol: float = 1e-10,
    max_iter: int = 200,
) -> pd.DataFrame:
    """Estimate each person's ability from their responses and known item difficulties.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, NaN/None for missing.
    beta : pandas.Series or array-like
        Item difficulties (Rasch, higher = harder).  A Series is aligned to the items of
        ``X`` by label; an array must have one entry per item, in column order.
    method : {"wle", "mle", "eap"}
        See the module documentation.
    device : {"auto", "cpu", "gpu"}
        Where the per-group computations run.
    tol, max_iter
        Root-finding tolerance on θ and iteration cap.  For ``"eap"`` they may only tighten
        the search for the posterior modes on which the quadrature nodes are centred (it runs
        to 1e-10, within 200 steps, whatever they are).

    Returns
    -------
    pandas.DataFrame
        Indexed by person label, columns ``theta``, ``se``, ``score`` (raw score) and
        ``n_answered``.  Persons who answered nothing get NaN.

    Warns
    -----
    RuntimeWarning
        Naming how many persons' root (for ``"eap"``: posterior mode) did not converge within
        ``max_iter`` steps; their θ is the last iterate.

    Examples
    --------
    >>> import privirt
    >>> X = privirt.load_dataset("lsat6")
    >>> beta = privirt.cmle_estimate(X).beta
    >>> ab = privirt.estimate_abilities(X, beta)
    >>> ab.columns.tolist()
    ['theta', 'se', 'score', 'n_answered']
    """
    if method not in ("wle", "mle", "eap"):
        raise ValueError(f"method must be 'wle', 'mle' or 'eap', got {method!r}")
    tol = check_positive_number("tol", tol)
    max_iter = check_positive_int("max_iter", max_iter)
    # items without responses are kept (their β is simply unused); persons without any
    # response get NaN
    resp = as_responses(X, empty="keep")
    b = _align_beta(beta, resp.items, answered=(resp.codes >= 0).any(axis=0))
    xp = get_xp(device)

    obs = resp.codes >= 0
    score = (resp.codes == 1).sum(axis=1)
    n_ans = obs.sum(axis=1)
    key = np.concatenate([np.packbits(obs, axis=1), score[:, None].astype(np.uint32).view(np.uint8)], axis=1)
    uniq, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    mask = obs[first].astype(np.float64)  # G × m
    r = score[first].astype(np.float64)
    k = n_ans[first].astype(np.float64)

    M = xp.asarray(mask)
    B = xp.asarray(b)[None, :]
    R = xp.asarray(r)
    K = xp.asarray(k)
    if method == "eap":
        tol, max_iter = min(tol, _EAP_TOL), max(max_iter, _EAP_STEPS)  # (as the warning says)
        theta, se, converged = _eap(xp, M, B, R, K, tol=tol, max_iter=max_iter)
    else:
        theta, se, converged = _solve(xp, M, B, R, K, weighted=(method == "wle"), tol=tol,
                                      max_iter=max_iter)
    stuck = int((~to_numpy(converged)[inverse]).sum())
    if stuck:
        what = "posterior modes (the centres of the quadrature)" if method == "eap" else "abilities"
        warnings.warn(
            f"{stuck} of {len(inverse)} persons' {what} did not converge within max_iter={max_iter} "
            f"steps (tol={tol:g}); their theta may be far off: raise max_iter",
            RuntimeWarning, stacklevel=2,
        )
    theta = to_numpy(theta)[inverse]
    se = to_numpy(se)[inverse]
    none = n_ans == 0
    theta[none] = np.nan
    se[none] = np.nan
    return pd.DataFrame(
        {"theta": theta, "se": se, "score": score, "n_answered": n_ans},
        index=resp.persons.copy(),
    )


def _align_beta(beta: Any, items: pd.Index, answered: np.ndarray) -> np.ndarray:
    """β in the order of ``items``; an item nobody ``answered`` needs none (the estimators drop
    such items, and its β would be unused: 0 is put there)."""
    if isinstance(beta, pd.Series):
        missing = items[answered].difference(beta.index)
        if len(missing):
            raise ValueError(
                f"beta has no value for item(s) {list(missing[:5])}; pass one difficulty per item"
            )
        b = beta.reindex(items).to_numpy(dtype=np.float64)
    else:
        try:
            b = np.asarray(to_numpy(beta), dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                "beta must be a pandas Series indexed by item or a numeric array with one "
                f"value per item, got {type(beta).__name__}"
            ) from None
        if b.ndim != 1 or b.size != len(items):
            raise ValueError(
                f"beta must have one value per item ({len(items)}), got shape {b.shape}"
            )
    if not np.all(np.isfinite(b[answered])):
        raise ValueError("beta must be finite")
    b = b.copy()
    b[~answered] = 0.0
    return b


def _moments(xp, theta, M, B):
    P = 1.0 / (1.0 + xp.exp(-(theta[:, None] - B)))
    PQ = P * (1.0 - P) * M
    sumP = (P * M).sum(axis=1)
    info = PQ.sum(axis=1)
    d_info = (PQ * (1.0 - 2.0 * P)).sum(axis=1)
    dd_info = (PQ * (1.0 - 6.0 * P * (1.0 - P))).sum(axis=1)
    return sumP, info, d_info, dd_info


def _solve(xp, M, B, R, K, *, weighted: bool, tol: float, max_iter: int):
    # every root lies within _BRACKET of the difficulties the group answered (an extreme
    # score's WLE sits about log(2k) beyond the last of them), wherever those are; the bracket
    # is the group's own, so that its θ does not depend on the other groups of the batch
    answered = M > 0
    lo = xp.where(answered, B, xp.inf).min(axis=1) - _BRACKET
    hi = xp.where(answered, B, -xp.inf).max(axis=1) + _BRACKET
    # start from the log-odds of the score against the mean difficulty answered
    mean_b = (M * B).sum(axis=1) / xp.maximum(K, 1)
    p = xp.clip((R + 0.5) / (K + 1.0), 1e-6, 1 - 1e-6)
    theta = mean_b + xp.log(p / (1 - p))
    extreme = (R == 0) | (R == K)
    # nothing to solve for a group that answered nothing, nor for an extreme score's MLE (±inf)
    active = (K > 0) if weighted else (K > 0) & ~extreme

    def fdf(t, Ma, Ra):
        sumP, info, d_info, dd_info = _moments(xp, t, Ma, B)
        f = Ra - sumP
        df = -info
        if weighted:
            info_safe = xp.maximum(info, 1e-300)
            f = f + d_info / (2.0 * info_safe)
            df = df + (dd_info * info - d_info**2) / (2.0 * info_safe**2)
        return f, df

    theta, converged = _bracketed_newton(xp, fdf, theta, lo, hi, (M, R), active,
                                         tol=tol, max_iter=max_iter)
    sumP, info, _, _ = _moments(xp, theta, M, B)
    se = 1.0 / xp.sqrt(xp.maximum(info, 1e-300))
    if not weighted:  # no finite MLE for extreme scores
        theta = xp.where(R == 0, -xp.inf, xp.where(R == K, xp.inf, theta))
        se = xp.where(extreme, xp.inf, se)
    return theta, se, converged


def _bracketed_newton(xp, fdf, theta, lo, hi, data, active, *, tol: float, max_iter: int):
    """Safeguarded Newton on a decreasing ``f`` per group: the root stays in ``[lo, hi]``, and
    a step that leaves that closed bracket (or is not finite) is replaced by bisection.

    ``fdf(t, *rows)`` returns ``f`` and ``f'`` at ``t`` for the groups whose rows of ``data``
    it is given.  Only the ``active`` groups are solved, and each is frozen, and dropped from
    the passes, once its step or its bracket is below ``tol``: its θ is then exactly what it
    would be if it were solved alone.  Returns θ and which groups converged (inactive ones
    count as converged); a group not converged after ``max_iter`` steps keeps its last iterate.
    """
    theta = xp.array(theta, dtype=np.float64, copy=True)
    converged = ~active
    idx = xp.nonzero(active)[0]
    t, lo, hi = theta[idx], lo[idx], hi[idx]
    rows = tuple(a[idx] for a in data)
    for _ in range(max_iter):
        if idx.size == 0:
            break
        f, df = fdf(t, *rows)
        # f is decreasing in θ: keep the bracket [lo, hi] around the root
        lo = xp.where(f > 0, t, lo)
        hi = xp.where(f < 0, t, hi)
        new = t - f / xp.where(df < 0, df, -1.0)
        # closed bracket: the root may sit on an end (a step below one ulp lands there)
        bad = ~((new >= lo) & (new <= hi)) | ~xp.isfinite(new)
        new = xp.where(bad, 0.5 * (lo + hi), new)
        # a step or bracket below tol, or below what f's rounding lets Newton resolve near θ
        # (~m·eps in f over ~m/4·... in f': a few tens of eps; a tol below it cannot be met, the
        # iterate would wander among neighbouring doubles)
        res = xp.maximum(tol, 64 * np.finfo(np.float64).eps * xp.maximum(1.0, xp.abs(t)))
        done = (xp.abs(new - t) < res) | ((hi - lo) < res)
        t = new
        if bool(done.any()):
            theta[idx[done]] = t[done]
            converged[idx[done]] = True
            keep = ~done
            idx, t, lo, hi = idx[keep], t[keep], lo[keep], hi[keep]
            rows = tuple(a[keep] for a in rows)
    theta[idx] = t  # not converged within max_iter: the last iterate
    return theta, converged


def _eap(xp, M, B, R, K, *, tol: float, max_iter: int, n_points: int = _EAP_POINTS):
    """Posterior mean and SD of θ under a N(0, 1) prior, per group, by adaptive Gauss–Hermite
    quadrature (Liu & Pierce 1994; lme4's ``nAGQ``).

    The nodes of each group are centred on its posterior mode ``θ̂`` and scaled by
    ``σ̂ = (1 + Σ P_i Q_i)^(−1/2)``, the curvature there, so they follow the posterior however
    narrow it is (a fixed rule on the prior misses a posterior of SD ~2/√m on long tests).
    """
    G, m = M.shape
    # the log-posterior r θ − Σ log(1 + e^(θ − β_i)) − θ²/2 is strictly concave; its mode is the
    # root of r − Σ P_i(θ) − θ, which lies in [r − k, r]
    lo, hi = R - K, R + 0.0
    mean_b = (M * B).sum(axis=1) / xp.maximum(K, 1)
    p = xp.clip((R + 0.5) / (K + 1.0), 1e-6, 1 - 1e-6)
    mode = xp.clip(mean_b + xp.log(p / (1 - p)), lo, hi)

    def fdf(t, Ma, Ra):
        P = xp.exp(-xp.logaddexp(0.0, B - t[:, None]))  # logistic, without overflow
        return Ra - (P * Ma).sum(axis=1) - t, -(P * (1.0 - P) * Ma).sum(axis=1) - 1.0

    mode, converged = _bracketed_newton(xp, fdf, mode, lo, hi, (M, R), K > 0,
                                        tol=tol, max_iter=max_iter)
    P = xp.exp(-xp.logaddexp(0.0, B - mode[:, None])) * M  # 0 where unanswered
    scale = 1.0 / xp.sqrt((P * (1.0 - P)).sum(axis=1) + 1.0)
    z, w = np.polynomial.hermite_e.hermegauss(n_points)  # weight exp(−z²/2)
    zq = xp.asarray(z)
    logw = xp.asarray(np.log(w) + z**2 / 2)  # the rule integrates f(z) e^(−z²/2) · e^(z²/2)
    mean = xp.empty(G)
    sd = xp.empty(G)
    step = max(1, _EAP_CELLS // max(1, m * n_points))
    for a in range(0, G, step):
        sl = slice(a, a + step)
        h = scale[sl, None] * zq[None, :]  # g × Q offsets from the mode
        # log(1 + e^(θ̂ + h − β)) = log(1 + e^(θ̂ − β)) + log1p(P(θ̂ − β) (e^h − 1)): no overflow
        A = P[sl, None, :] * xp.expm1(h)[:, :, None]  # g × Q × m
        xp.log1p(A, out=A)
        # log-posterior at θ̂ + h less its value at θ̂ (a constant per group)
        ll = R[sl, None] * h - A.sum(axis=2) - (mode[sl, None] * h + h**2 / 2) + logw[None, :]
        W = xp.exp(ll - ll.max(axis=1, keepdims=True))
        W = W / W.sum(axis=1, keepdims=True)
        zbar = (W * zq[None, :]).sum(axis=1)
        mean[sl] = mode[sl] + scale[sl] * zbar
        sd[sl] = scale[sl] * xp.sqrt((W * (zq[None, :] - zbar[:, None]) ** 2).sum(axis=1))
    return mean, sd, converged

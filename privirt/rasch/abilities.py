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

``"wle"`` is the largest maximum of the weighted log-likelihood
``ℓ_w(θ) = r θ − Σ log(1 + e^(θ − β_i)) + ½ log I(θ)``.  On short tests with widely spread
items the WLE equation can have several roots (two items at β = ±2.5, one right:
−1.21, 0 and +1.21, of which 0 is a minimum).  Every root has ``|Σ P_i − r| < ½``, and ``ℓ_w``
is concave wherever ``I ≥ ½`` and beyond the outermost difficulties answered, so a group whose
root has ``I ≥ ½`` over the whole interval where ``Σ P_i`` is within ``½`` of ``r`` (checked at
its two ends: each ``P_i Q_i`` is unimodal) has no other; extreme scores never do.  Every other
group is scanned on a grid (``_SCAN_STEP`` apart between its outermost difficulties), each
maximum found is refined, and the one with the largest ``ℓ_w`` is kept.  Ties (equal within
rounding: with two items and one right the two maxima always tie, by symmetry) go to the lower
θ, so that the choice is deterministic.  (TAM's ``tam.wle`` runs Newton–Raphson from one start
and keeps whichever root it reaches.)  A maximum narrower than the grid step can be missed.

Missing responses drop out of every sum.  The root finder is a safeguarded Newton method
(bisection whenever a Newton step leaves the bracket), vectorised over the groups; a group is
frozen once it has converged, so its θ is the same in any batch as alone.  The groups are
solved in blocks of at most ``_BLOCK_CELLS`` (group × item) cells, so that the solver's float64
temporaries stay bounded however many groups there are (with missing cells almost every person
is a group of their own); the groups' answered sets are kept as a boolean mask.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
import pandas as pd

from .._backend import get_xp, to_numpy
from .._checks import (
    check_choice, check_positive_int, check_positive_number, holds_bools, label_type_mismatch,
    refuse_duplicate_items,
)
from ..data.responses import ResponsesLike, as_responses
from ..exceptions import PrivirtRuntimeWarning, user_stacklevel

__all__ = ["estimate_abilities"]

_BRACKET = 40.0
#: Distance (logits) from every item answered beyond which the MLE is solved in log space:
#: each term of ``r − Σ P_i`` is ``e^(−|θ − β_i|)`` to rounding there (``e^(−40) < eps/2``)
_FAR = 40.0
#: Grid step (in θ) of the scan for the WLE's other maxima, between a group's outermost
#: difficulties answered (beyond them ``ℓ_w`` is concave: one root at most on either side).
_SCAN_STEP = 0.02
#: Grid points per chunk of that scan: the (groups × points × items) array holds at most this.
_SCAN_CELLS = 2**22
#: Nodes of the adaptive Gauss–Hermite rule for EAP (error < 1e-9 against a dense grid, from
#: one item to thousands; ~1e-12 unless the posterior is skewed: every answered item far away).
_EAP_POINTS = 31
#: Groups per EAP chunk: the (groups × nodes × items) array holds at most this many cells.
_EAP_CELLS = 2**22
#: EAP's posterior modes (the centres of its nodes) are found at least this finely, in at most
#: this many steps, whatever ``tol``/``max_iter`` are: the estimate is a posterior mean, which
#: must not depend on a root finder's settings (bisection alone needs ~50 steps over [r − k, r]).
_EAP_TOL, _EAP_STEPS = 1e-10, 200
#: Groups per block of the solver: a block's float64 (groups × items) temporaries (about six
#: live at once) hold at most this many cells each (8 MiB).
_BLOCK_CELLS = 2**20


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
    check_choice("method", method, ("wle", "mle", "eap"))
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
    mask = obs[first]  # G × m, bool (made float64 a block at a time)
    r = score[first].astype(np.float64)
    k = n_ans[first].astype(np.float64)

    M = xp.asarray(mask)
    B = xp.asarray(b)[None, :]
    R = xp.asarray(r)
    K = xp.asarray(k)
    if method == "eap":
        tol, max_iter = min(tol, _EAP_TOL), max(max_iter, _EAP_STEPS)  # (as the warning says)
        # each group's posterior is its own: block by block is group by group
        theta, se, converged = xp.empty(len(r)), xp.empty(len(r)), xp.empty(len(r), dtype=bool)
        for sl in _blocks(len(r), len(b)):
            theta[sl], se[sl], converged[sl] = _eap(xp, _rows(M, sl), B, R[sl], K[sl], tol=tol,
                                                    max_iter=max_iter)
    else:
        theta, se, converged = _solve(xp, M, B, R, K, weighted=(method == "wle"), tol=tol,
                                      max_iter=max_iter)
    stuck = int((~to_numpy(converged)[inverse]).sum())
    if stuck:
        what = "posterior modes (the centres of the quadrature)" if method == "eap" else "abilities"
        warnings.warn(
            f"{stuck} of {len(inverse)} persons' {what} did not converge within max_iter={max_iter} "
            f"steps (tol={tol:g}); their theta may be far off: raise max_iter",
            PrivirtRuntimeWarning, stacklevel=user_stacklevel(),
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
    if holds_bools(beta):  # True/False are no difficulties (bools are refused as numbers)
        raise ValueError("beta must hold numbers, not True/False")
    if isinstance(beta, pd.Series):
        refuse_duplicate_items(beta.index)
        missing = items[answered].difference(beta.index)
        if len(missing):
            as_text = label_type_mismatch(beta.index, items, "beta", "the responses")
            if as_text is not None:
                raise ValueError(as_text)
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


def _blocks(G: int, m: int) -> list[slice]:
    """Slices of ``G`` groups, each of at most ``_BLOCK_CELLS`` cells over ``m`` items."""
    step = max(1, _BLOCK_CELLS // max(1, m))
    return [slice(a, a + step) for a in range(0, G, step)]


def _rows(M, idx):
    """The float64 mask of the groups ``idx`` (a slice or an index array) of the bool ``M``."""
    return M[idx].astype(np.float64)


def _logistic(xp, z):
    """``1 / (1 + e^(−z))``, silently 0 where ``e^(−z)`` overflows (numpy warned there, for
    θ − β < −709; that 0 is the correctly rounded value)."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + xp.exp(-z))


def _moments(xp, theta, M, B, R=None):
    """``Σ P_i``, ``I``, ``I'`` and ``I''`` at ``theta`` and, given the scores ``R``,
    ``r − Σ P_i`` without cancellation.

    ``Q_i = 1 − P_i`` is computed as ``e^(−z) P_i`` where ``P_i > ½`` (``1 − P_i`` rounds to 0
    once ``θ − β_i > 37``, which made ``I`` and ``r − Σ P_i`` vanish there), and
    ``r − Σ P_i = (r − #{β_i < θ}) + Σ_{β_i < θ} Q_i − Σ_{β_i ≥ θ} P_i``.
    """
    z = theta[:, None] - B
    with np.errstate(over="ignore"):  # e^(−z) = inf where z < −709: P = 0, Q = 1 (exactly)
        ez = xp.exp(-z)
    P = 1.0 / (1.0 + ez)
    above = z > 0
    Q = xp.where(above, xp.minimum(ez, 1.0) * P, 1.0 - P)
    PQ = P * Q * M
    sumP = (P * M).sum(axis=1)
    info = PQ.sum(axis=1)
    d_info = (PQ * (1.0 - 2.0 * P)).sum(axis=1)
    dd_info = (PQ * (1.0 - 6.0 * P * Q)).sum(axis=1)
    if R is None:
        return sumP, info, d_info, dd_info
    resid = (R - (above * M).sum(axis=1)) + (xp.where(above, Q, -P) * M).sum(axis=1)
    return sumP, info, d_info, dd_info, resid


def _solve(xp, M, B, R, K, *, weighted: bool, tol: float, max_iter: int):
    """θ, se and convergence of each group; ``M`` is the groups' bool mask of answered items.

    The roots are found a block of groups at a time (each group's root is its own); the WLE's
    scan for other maxima then runs once over the groups it flags.
    """
    G = R.shape[0]
    theta, sumP, info = xp.empty(G), xp.empty(G), xp.empty(G)
    converged, active = xp.empty(G, dtype=bool), xp.empty(G, dtype=bool)
    for sl in _blocks(G, B.shape[1]):
        theta[sl], converged[sl], sumP[sl], info[sl], active[sl] = _roots(
            xp, _rows(M, sl), B, R[sl], K[sl], weighted=weighted, tol=tol, max_iter=max_iter)
    extreme = (R == 0) | (R == K)
    if weighted:
        theta, converged, moved = _largest_maximum(xp, _fdf(xp, B, weighted), theta, converged,
                                                   sumP, info, M, B, R, K, active, tol=tol,
                                                   max_iter=max_iter)
        for sl in _blocks(int(moved.size), B.shape[1]):
            g = moved[sl]
            info[g] = _moments(xp, theta[g], _rows(M, g), B)[1]
    se = _se(xp, theta, info, M, B)
    if not weighted:  # no finite MLE for extreme scores
        theta = xp.where(R == 0, -xp.inf, xp.where(R == K, xp.inf, theta))
        se = xp.where(extreme, xp.inf, se)
    return theta, se, converged


def _se(xp, theta, info, M, B):
    """``1/√I``, from ``log I`` where ``I`` underflows (θ hundreds of logits from every item).

    ``I`` was floored at 1e-300 there, so the se stopped at 1e150 where ``e^(|θ − β|/2)`` is
    larger (5e173 at 800 logits); ``log(P_i Q_i) = −|z_i| − 2 log(1 + e^(−|z_i|))`` is summed
    with a log-sum-exp, and the se is inf only where it overflows a double.
    """
    se = 1.0 / xp.sqrt(xp.maximum(info, 1e-300))
    tiny = xp.nonzero(info < 1e-280)[0]
    if int(tiny.size) == 0:
        return se
    az = xp.abs(theta[tiny][:, None] - B)
    lpq = xp.where(_rows(M, tiny) > 0, -az - 2.0 * xp.log1p(xp.exp(-az)), -xp.inf)
    top = lpq.max(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        log_info = top + xp.log(xp.exp(lpq - top[:, None]).sum(axis=1))
        se[tiny] = xp.where(xp.isfinite(log_info), xp.exp(-0.5 * log_info), se[tiny])
    return se


def _fdf(xp, B, weighted: bool):
    """``fdf(t, Ma, Ra, Ba=B)``: ``f`` and ``f'`` of the (weighted) likelihood equation."""

    def fdf(t, Ma, Ra, Ba=B):
        _, info, d_info, dd_info, f = _moments(xp, t, Ma, Ba, Ra)  # f = r − Σ P_i
        df = -info
        if weighted:
            info_safe = xp.maximum(info, 1e-300)
            f = f + d_info / (2.0 * info_safe)
            df = df + (dd_info * info - d_info**2) / (2.0 * info_safe) / info_safe  # info² underflows
        else:
            f, df = _far_mle(xp, t, Ma, Ba, Ra, f, df)
        return f, df

    return fdf


def _far_mle(xp, t, M, B, R, f, df):
    """The MLE's ``f`` and ``f'`` where θ is more than ``_FAR`` logits from every item answered.

    There ``r − Σ P_i`` and ``I`` shrink like ``e^(−|z|)``: Newton moved one logit a step, and
    beyond ~745 logits every term underflowed to 0, so it stopped wherever it was (β = [0, 1,
    5000], x = [1, 0, 1]: θ 1667.5, not 2500.66).  Where ``r`` is the number of items below θ,
    ``f`` becomes ``log Σ_{β_i<θ} Q_i − log Σ_{β_i>θ} P_i`` (the same sign and root; each term
    is ``e^(−|z_i|)`` there, so ``f' = −2``); elsewhere ``f`` is a nonzero integer and a tiny
    ``f'`` sends the step out of the bracket, to bisection.
    """
    z = t[:, None] - B
    d = xp.where(M > 0, xp.abs(z), xp.inf).min(axis=1)  # to the nearest item answered
    far = d > _FAR
    if not bool(far.any()):
        return f, df
    w = xp.exp(xp.minimum(d[:, None] - xp.abs(z), 0.0)) * M  # each term over the largest
    above = z > 0
    balanced = far & (R == (above * M).sum(axis=1))
    with np.errstate(divide="ignore"):  # (log 0 in groups that are not balanced)
        g = xp.log((w * above).sum(axis=1)) - xp.log((w * ~above).sum(axis=1))
    f = xp.where(balanced, g, f)
    df = xp.where(balanced, -2.0, xp.where(far, -1e-300, df))
    return f, df


def _roots(xp, M, B, R, K, *, weighted: bool, tol: float, max_iter: int):
    """The root of each group of one block (``M`` its float64 mask); returns θ, which groups
    converged, ``Σ P_i`` and ``I`` at θ, and which groups were solved."""
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
    theta, converged = _bracketed_newton(xp, _fdf(xp, B, weighted), theta, lo, hi, (M, R),
                                         active, tol=tol, max_iter=max_iter)
    sumP, info, _, _ = _moments(xp, theta, M, B)
    return theta, converged, sumP, info, active


def _wll(xp, theta, M, B, R):
    """Warm's weighted log-likelihood ``r θ − Σ log(1 + e^(θ − β_i)) + ½ log I(θ)``."""
    z = theta[:, None] - B
    P = _logistic(xp, z)
    info = xp.maximum((P * (1.0 - P) * M).sum(axis=1), 1e-300)
    return R * theta - (xp.logaddexp(0.0, z) * M).sum(axis=1) + 0.5 * xp.log(info)


def _maybe_several_roots(xp, theta, sumP, info, M, B, R, K, active):
    """Groups whose WLE root ``theta`` may not be the only one (``True`` = scan them), given
    ``Σ P_i`` and ``I`` there.

    Any root has ``|Σ P_i − r| < ½`` (``|I'/(2I)| < ½``), and
    ``ℓ_w'' = −I + ½ Var_w(1 − 2P) − Σ (P_i Q_i)² / I < ½ − I`` (weights ``P_i Q_i``), so a root
    is the only one if ``I ≥ ½`` on an interval ``[a, b]`` around it with
    ``Σ P_i(a) ≤ r − ½ ≤ r + ½ ≤ Σ P_i(b)``.  First from ``θ``'s values alone:
    ``|d log(P_i Q_i)/dθ| < 1``, so ``I(θ + h) ≥ I(θ) e^(−|h|)`` and ``Σ P_i`` moves by at least
    ``I(θ)(1 − e^(−|h|))``; the groups this does not settle are checked at two ends ``a``, ``b``
    (each ``P_i Q_i`` is unimodal: ``I ≥ Σ_i min(P_i Q_i(a), P_i Q_i(b))`` between them).
    Extreme scores have one root: it lies beyond every difficulty answered, where ``ℓ_w`` is
    concave.
    """
    margin = 1e-9 * (1.0 + K)  # rounding of Σ P_i
    info = xp.maximum(info, 1e-300)
    need_dn = sumP - (R - 0.5) + margin
    need_up = (R + 0.5) - sumP + margin
    # the widest |h| that moves Σ P_i by the need at the slowest rate I(θ) e^(−|h|) allows
    reach = xp.maximum(need_dn, need_up) / info
    cheap = (reach < 1.0) & (info * (1.0 - reach) >= 0.5 + margin)  # e^(−h) = 1 − reach
    flag = active & (R > 0) & (R < K) & ~cheap
    gi = xp.nonzero(flag)[0]
    for sl in _blocks(int(gi.size), B.shape[1]):
        g = gi[sl]
        flag[g[_sure_unique(xp, theta[g], info[g], need_dn[g], need_up[g], _rows(M, g), B, R[g],
                            margin[g])]] = False
    return flag


def _sure_unique(xp, t, info, need_dn, need_up, Mg, B, Rg, mg):
    """Which of the groups (θ ``t``, float64 mask ``Mg``) :func:`_maybe_several_roots` checks at
    two ends have ``I ≥ ½`` between them, and so one root."""
    P = _logistic(xp, t[:, None] - B)
    # Σ P_i grows at rate I: twice the distance to r ± ½ at the rate seen at the root
    a = t - 2.0 * need_dn / info
    b = t + 2.0 * need_up / info
    # logistic(θ + h − β) = P e^h / (1 + P (e^h − 1)): one exp per group, not per cell
    ea = xp.exp(xp.clip(a - t, -700.0, 0.0))[:, None]
    eb = xp.exp(xp.clip(b - t, 0.0, 700.0))[:, None]
    # where P rounded to 1 (θ − β > 37) and e^h underflows, 1 + P (e^h − 1) is 0: Pa is inf
    # (or, times a 0 of the mask, nan), which fails the checks, so the group is scanned (safe)
    with np.errstate(divide="ignore", invalid="ignore"):
        Pa = P * ea / (1.0 + P * (ea - 1.0))
        Pb = P * eb / (1.0 + P * (eb - 1.0))
        floor = (xp.minimum(Pa * (1.0 - Pa), Pb * (1.0 - Pb)) * Mg).sum(axis=1)
        return (((Pa * Mg).sum(axis=1) <= Rg - 0.5 - mg)
                & ((Pb * Mg).sum(axis=1) >= Rg + 0.5 + mg) & (floor >= 0.5))


def _largest_maximum(xp, fdf, theta, converged, sumP, info, M, B, R, K, active, *, tol: float,
                     max_iter: int):
    """Replace each WLE root that may not be the largest maximum of ``ℓ_w`` by that maximum.

    The groups :func:`_maybe_several_roots` flags are scanned: ``f`` on ``lo``, a grid from
    their lowest to their highest difficulty answered (``_SCAN_STEP`` apart) and ``hi``; each
    cell where ``f`` goes from positive to non-positive holds a maximum, refined by bracketed
    Newton; the one with the largest ``ℓ_w`` is kept, the lower θ on a tie (within rounding).
    ``sumP`` and ``info`` are ``Σ P_i`` and ``I`` at ``theta``.  Returns θ, which groups
    converged, and the indices of the groups scanned (their ``I`` is stale).
    """
    flag = _maybe_several_roots(xp, theta, sumP, info, M, B, R, K, active)
    gi = xp.nonzero(flag)[0]
    if gi.size == 0:
        return theta, converged, gi
    # each group's answered items first, the others dropped as far as the longest allows
    answered = M[gi] > 0
    kmax = int(answered.sum(axis=1).max())
    order = xp.argsort(~answered, axis=1)[:, :kmax]
    Mc = xp.take_along_axis(M[gi], order, axis=1).astype(np.float64)
    Bc = xp.take_along_axis(xp.broadcast_to(B, answered.shape), order, axis=1)
    Rc = R[gi]
    bmin = xp.where(Mc > 0, Bc, xp.inf).min(axis=1)
    bmax = xp.where(Mc > 0, Bc, -xp.inf).max(axis=1)
    n_in = int(min(max(float((bmax - bmin).max()) / _SCAN_STEP, 1.0), 1e5)) + 1
    frac = xp.linspace(0.0, 1.0, n_in)
    inner = bmin[:, None] + (bmax - bmin)[:, None] * frac
    grid = xp.concatenate([(bmin - _BRACKET)[:, None], inner, (bmax + _BRACKET)[:, None]],
                          axis=1)  # F × (n_in + 2)
    F, n_pts = grid.shape
    # f > 0 at lo and < 0 at hi (the bracket's premise): only the inner nodes are evaluated
    fv = xp.ones((F, n_pts))
    fv[:, -1] = -1.0
    step = max(1, _SCAN_CELLS // max(1, kmax * n_in))
    for s in range(0, F, step):
        g = grid[s:s + step, 1:-1]
        rows = xp.repeat(xp.arange(s, s + g.shape[0]), n_in)
        fv[s:s + step, 1:-1] = fdf(g.ravel(), Mc[rows], Rc[rows], Bc[rows])[0].reshape(g.shape)
    cg, cj = xp.nonzero((fv[:, :-1] > 0) & (fv[:, 1:] <= 0))  # cells holding a maximum
    c_lo, c_hi = grid[cg, cj], grid[cg, cj + 1]
    c_theta, c_conv = _bracketed_newton(xp, fdf, 0.5 * (c_lo + c_hi), c_lo, c_hi,
                                        (Mc[cg], Rc[cg], Bc[cg]), xp.ones(cg.shape, dtype=bool),
                                        tol=tol, max_iter=max_iter)
    ell = to_numpy(_wll(xp, c_theta, Mc[cg], Bc[cg], Rc[cg]))
    c_theta_h, cg_h, c_conv_h = to_numpy(c_theta), to_numpy(cg), to_numpy(c_conv)
    best = np.full(F, -np.inf)
    np.maximum.at(best, cg_h, ell)
    # ties within rounding (a symmetric pair) go to the lower θ
    near = ell >= best[cg_h] - 1e-10 * (1.0 + np.abs(best[cg_h]))
    pick_theta = np.full(F, np.inf)
    np.minimum.at(pick_theta, cg_h[near], c_theta_h[near])
    chosen = near & (c_theta_h == pick_theta[cg_h])
    pick_conv = np.zeros(F, dtype=bool)
    pick_conv[cg_h[chosen]] = c_conv_h[chosen]
    found = np.isfinite(pick_theta)  # always (f > 0 at lo, < 0 at hi); else keep the root
    keep = gi[xp.asarray(np.nonzero(found)[0])]
    theta = xp.array(theta, copy=True)
    converged = xp.array(converged, copy=True)
    theta[keep] = xp.asarray(pick_theta[found])
    converged[keep] = xp.asarray(pick_conv[found])
    return theta, converged, keep


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
        P = _logistic(xp, t[:, None] - B)
        return Ra - (P * Ma).sum(axis=1) - t, -(P * (1.0 - P) * Ma).sum(axis=1) - 1.0

    mode, converged = _bracketed_newton(xp, fdf, mode, lo, hi, (M, R), K > 0,
                                        tol=tol, max_iter=max_iter)
    P = _logistic(xp, mode[:, None] - B) * M  # 0 where unanswered
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

"""Conditional maximum likelihood (CML) estimation of Rasch item difficulties.

Persons are grouped by (set of answered items, raw score): with complete data the item
totals and the score counts are all the estimate needs, gathered in one pass over the data.
The conditional log-likelihood is maximised by Newton's method with the analytic gradient
and Hessian of the elementary symmetric functions (:mod:`privirt.rasch._esf`); standard errors
come from the observed information on the sum-zero subspace.  The maths, the numerical
safeguards and the existence condition are in ``docs/cmle.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._checks import check_positive_int, check_positive_number
from .._progress import resolve_progress, ticker
from ._esf import batch_probabilities, near_pair_terms
from .._results import ItemEstimate
from .._threads import one_blas_thread
from ..exceptions import DisconnectedComparisonGraph
from ..data.responses import ResponsesLike, as_responses

__all__ = ["CMLEResult", "cmle_estimate"]

#: Groups per batch are chosen so that a batch's (G, K + 1, K) probability array holds at
#: most this many cells (8 bytes each: 64 MiB).
_BATCH_CELLS = 8 * 2**20
#: Item pairs closer than this in difficulty get their pair term from the exact recursion
#: instead of the divided difference (whose rounding error grows like 1/|β_i − β_j|).
_NEAR = 1e-3
#: Inside the Newton iterations only pairs closer than this get the exact term: the step
#: needs the Hessian to a few digits only, and the divided difference's rounding error
#: (measured: about 2e-13 / |β_i − β_j| relative, 1000 × 600 with 20 % missing) is below
#: 1e-5 there; exact ties (0 / 0) stay exact.  The Hessian of the covariance is evaluated
#: once more with ``_NEAR``.
_NEAR_ITER = 1e-7
#: Most cells of ESFs (``lg`` and ``bt``) an evaluation keeps for the covariance's exact
#: terms (64 MiB); the batches beyond are evaluated again there, so memory does not grow
#: with the persons.
_KEEP_CELLS = 8 * 2**20
#: Newton step cap (max-norm) while far from the optimum.
_MAX_STEP = 4.0


@dataclass(frozen=True, eq=False)
class CMLEResult(ItemEstimate):
    """Result of :func:`cmle_estimate`.

    Attributes
    ----------
    beta : pandas.Series
        Item difficulties (centred, higher = harder), indexed by item label.
    se : pandas.Series
        Standard errors of the centred difficulties.
    loglik : float
        Conditional log-likelihood at ``beta``.
    n_iter : int
        Newton iterations.
    converged : bool
        Whether ``max_i |∂ℓ/∂β_i| ≤ tol · max(1, n_used)`` holds at ``beta``.
    n_persons_used : int
        Persons with a non-extreme score (the others carry no conditional information).
    info : dict
        ``cov`` (covariance of the centred difficulties), ``optimizer`` (how the iteration
        ended), ``n_groups`` (distinct sets of answered items among the persons used).
    """

    beta: pd.Series
    se: pd.Series
    loglik: float
    n_iter: int
    converged: bool
    n_persons_used: int = 0
    info: dict = field(default_factory=dict, repr=False)

    def _frame_columns(self):
        return {"beta": self.beta, "se": self.se}


@dataclass
class _Batch:
    """Groups of persons with the same answered-item set, padded to ``K`` slots.

    ``items[g]`` holds the item positions of group ``g`` (``m`` in empty slots),
    ``counts[g, r]`` the number of its persons with score ``r`` (extremes zeroed).
    """

    items: np.ndarray  # (G, K) int
    real: np.ndarray  # (G, K) bool
    sizes: np.ndarray  # (G,) int
    counts: np.ndarray  # (G, K + 1) float

    def __post_init__(self):
        # lowest and highest score present per group; groups are kept sorted by the highest
        has = self.counts > 0
        self.lo = np.argmax(has, axis=1)
        self.hi = has.shape[1] - 1 - np.argmax(has[:, ::-1], axis=1)


@dataclass
class _Stats:
    batches: list
    totals: np.ndarray  # item totals of the persons used
    n_answered: np.ndarray  # persons used who answered each item
    n_used: int
    n_groups: int
    masks: np.ndarray | None  # (U, m) answered-item sets (None: complete data)
    score_counts: np.ndarray | None  # complete data: persons per score


def cmle_estimate(X: ResponsesLike, *, tol: float = 1e-10, max_iter: int = 100,
                  progress: bool | None = None) -> CMLEResult:
    """Conditional maximum likelihood estimate of Rasch item difficulties.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, NaN/None for missing.
    tol : float
        Convergence tolerance on the gradient, relative to the number of persons used:
        converged when ``max_i |∂ℓ/∂β_i| ≤ tol · max(1, n_used)``.
    max_iter : int
        Most Newton iterations.
    progress : bool or None
        A progress bar on stderr counting ``max_iter + 2`` steps: the preparation (sufficient
        statistics, existence checks, the first evaluation), one per Newton iteration (the
        phase shows the largest gradient component), and the covariance; a fit that converges
        early jumps to the covariance step, so the bar always ends complete.  ``None``
        (default): only when stderr is a terminal.  The estimate does not depend on it.

    Returns
    -------
    CMLEResult

    Raises
    ------
    ValueError
        An item answered correctly (or incorrectly) by every person who answered it with a
        non-extreme score, or a set of items that no such person got right while getting
        another item wrong (Fischer's condition): their CML estimates are infinite.
    DisconnectedComparisonGraph
        The items split into groups never answered by a common person.

    Examples
    --------
    >>> import privirt
    >>> res = privirt.cmle_estimate(privirt.load_dataset("lsat6"))
    >>> res.top_k(1).tolist()
    ['item3']
    """
    tol = check_positive_number("tol", tol)
    max_iter = check_positive_int("max_iter", max_iter)
    progress = resolve_progress(progress)
    resp = as_responses(X)
    m = resp.n_items
    if m < 2:
        raise ValueError(f"CML estimation needs at least 2 items, got {m}")
    phase = ["statistics"]
    tick = ticker(max_iter + 2, "CML estimate", unit="steps", enabled=progress,
                  phase=lambda done: phase[0])
    tick(at=0)
    stats = _statistics(resp.codes)
    _check_estimable(resp, stats)

    # start: centred log-odds of the item p-values among the persons used
    p = np.clip(stats.totals / np.maximum(stats.n_answered, 1), 1e-3, 1 - 1e-3)
    beta = -np.log(p / (1 - p))
    beta -= beta.mean()
    scale = max(1.0, float(stats.n_used))
    gtol = tol * scale
    kept: dict = {}  # the accepted evaluation's ESFs, for the covariance's exact terms
    ll, grad, H = _evaluate(beta, stats, m, _NEAR_ITER, kept)
    n_iter = 0
    message = "iteration limit reached"
    while True:
        phase[0] = f"Newton, max |gradient| {np.max(np.abs(grad)):.1e}"
        tick(at=1 + n_iter)
        if np.max(np.abs(grad)) <= gtol:
            message = "gradient tolerance reached"
            break
        if n_iter >= max_iter:
            break
        step = _newton_step(H, grad, m)
        gain = float(grad @ step)
        t, accepted = 1.0, False
        for _ in range(40):
            cand = beta + t * step
            cand -= cand.mean()
            kept_c: dict = {}
            ll_c, grad_c, H_c = _evaluate(cand, stats, m, _NEAR_ITER, kept_c)
            # Armijo; once the predicted gain is below rounding, take the Newton step
            if ll_c >= ll + 1e-4 * t * gain or gain <= 1e-12 * (1.0 + abs(ll)):
                accepted = True
                break
            t *= 0.5
        if not accepted:
            message = "no further increase at machine precision"
            break
        beta, ll, grad, H, kept = cand, ll_c, grad_c, H_c, kept_c
        n_iter += 1
    gmax = float(np.max(np.abs(grad)))
    converged = bool(gmax <= gtol)  # the documented test (rounding leaves ~1e-14·n_used)
    phase[0] = "covariance"
    tick(at=max_iter + 1)  # past the iterations an early convergence left out
    if kept["h2"][0].size > _near_pairs(beta, _NEAR_ITER)[0].size:  # (kept: the pairs < _NEAR at beta)
        H = _exact_near_hessian(beta, stats, m, H, kept)  # exact terms for the covariance
    cov = _covariance(H, m)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    ended = "converged" if converged else "stopped"
    phase[0] = f"{ended} after {n_iter} iteration{'' if n_iter == 1 else 's'}"
    tick(at=max_iter + 2)
    items = resp.items
    return CMLEResult(
        beta=pd.Series(beta, index=items.copy(), name="beta"),
        se=pd.Series(se, index=items.copy(), name="se"),
        loglik=float(ll),
        n_iter=n_iter,
        converged=converged,
        n_persons_used=int(stats.n_used),
        info={"cov": cov, "optimizer": f"Newton: {message}", "n_groups": stats.n_groups},
    )


# ---------------------------------------------------------------------------------------
# sufficient statistics
# ---------------------------------------------------------------------------------------
def _statistics(codes: np.ndarray) -> _Stats:
    """Item totals and score counts per answered-item set, of the persons with a
    non-extreme score."""
    n, m = codes.shape
    if not np.any(codes < 0):
        # complete data: totals and score counts are sufficient; one reduction each
        score = codes.sum(axis=1, dtype=np.int32)
        per_score = np.bincount(score, minlength=m + 1).astype(np.float64)
        totals = codes.sum(axis=0, dtype=np.int64).astype(np.float64) - per_score[m]
        counts = per_score.copy()
        counts[0] = counts[m] = 0.0
        n_used = int(counts.sum())
        batch = _Batch(
            items=np.arange(m)[None, :],
            real=np.ones((1, m), dtype=bool),
            sizes=np.array([m]),
            counts=counts[None, :],
        )
        return _Stats([batch] if n_used else [], totals, np.full(m, float(n_used)), n_used,
                      1 if n_used else 0, None, counts)
    obs = codes >= 0
    score = np.count_nonzero(codes == 1, axis=1)
    k = np.count_nonzero(obs, axis=1)
    keep = (score > 0) & (score < k)
    n_used = int(keep.sum())
    totals = np.count_nonzero(codes[keep] == 1, axis=0).astype(np.float64)
    if not n_used:
        return _Stats([], totals, np.zeros(m), 0, 0, np.zeros((0, m), dtype=bool), None)
    packed = np.packbits(obs[keep], axis=1)
    uniq, inverse = np.unique(packed, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    masks = np.unpackbits(uniq, axis=1)[:, :m].astype(bool)  # (U, m)
    U = masks.shape[0]
    sizes = masks.sum(axis=1)
    cnt = np.bincount(inverse * (m + 1) + score[keep], minlength=U * (m + 1))
    cnt = cnt.reshape(U, m + 1).astype(np.float64)
    n_answered = masks.T.astype(np.float64) @ cnt.sum(axis=1)
    order = np.argsort(sizes, kind="stable")
    batches = []
    i = 0
    while i < U:
        def cap(K):
            return max(1, _BATCH_CELLS // (K * (K + 1)))

        K = int(sizes[order[min(U, i + cap(int(sizes[order[i]]))) - 1]])
        sel = order[i : i + cap(K)]
        has = cnt[sel] > 0
        highest = m - np.argmax(has[:, ::-1], axis=1)
        sel = sel[np.argsort(highest, kind="stable")]
        G = sel.size
        rows, cols = np.nonzero(masks[sel])
        sz = sizes[sel]
        slot = np.arange(rows.size) - np.repeat(np.cumsum(sz) - sz, sz)
        items = np.full((G, K), m)
        items[rows, slot] = cols
        batches.append(_Batch(items, items < m, sz, cnt[sel, : K + 1]))
        i += G
    return _Stats(batches, totals, n_answered, n_used, U, masks, None)


# ---------------------------------------------------------------------------------------
# existence of the estimate
# ---------------------------------------------------------------------------------------
def _check_estimable(resp, stats: _Stats) -> None:
    m = resp.n_items
    bad = (stats.totals <= 0) | (stats.totals >= stats.n_answered)
    if bad.any():
        names = list(resp.items[bad][:5])
        raise ValueError(
            f"item(s) {names} were answered correctly by none or by all of the persons with a "
            "non-extreme score, so their CML difficulty is infinite; remove them or use "
            "spectral_estimate (regularised)"
        )
    if stats.masks is None:
        # complete data: the totals must lie inside the polytope of achievable expected
        # totals, Σ of the t largest totals < Σ_r n_r min(r, t) for t = 1..m−1
        top = np.cumsum(np.sort(stats.totals)[::-1])[:-1]
        r = np.arange(m + 1)
        bound = np.minimum(r[None, :], np.arange(1, m)[:, None]) @ stats.score_counts
        if np.all(top < bound - 0.5):
            return
        _check_fischer(resp)  # names the items
        raise ValueError(  # pragma: no cover - the graph check agrees with the bound
            "the item totals lie on the boundary of the achievable totals, so some CML "
            "difficulties are infinite; use spectral_estimate (regularised)"
        )
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    M = stats.masks.astype(np.float64)
    n_comp, lab = connected_components(csr_matrix((M.T @ M) > 0), directed=False)
    if n_comp > 1:
        sizes = np.bincount(lab)
        outside = resp.items[lab != int(np.argmax(sizes))]
        raise DisconnectedComparisonGraph(
            f"items {list(outside[:5])} share no person (with a non-extreme score) with the "
            f"other items ({n_comp} separate parts): difficulties are not identified; "
            # (not the spectral estimate: with no person linking them it cannot either)
            "estimate the parts separately, or collect responses that link them"
        )
    _check_fischer(resp)


def _check_fischer(resp) -> None:
    """Fischer's (1981) condition for a finite CML estimate.

    Let ``i → j`` when some person with a non-extreme score got ``i`` right and ``j``
    wrong.  If this directed graph is not strongly connected, some set ``T`` of items has
    no edge to the other items: nobody got an item of ``T`` right and another item wrong,
    every person's observed pattern then has the most correct answers outside ``T`` that
    its score allows, and the conditional likelihood does not decrease as the difficulties
    of ``T`` grow without bound — there is no finite maximiser.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    from ..stats.counts import differential_counts

    codes = resp.codes
    score = (codes == 1).sum(axis=1)
    k = (codes >= 0).sum(axis=1)
    keep = np.flatnonzero((score > 0) & (score < k))
    Y = differential_counts(resp.subset(keep), device="cpu")
    n_comp, lab = connected_components(csr_matrix(Y > 0), directed=True, connection="strong")
    if n_comp == 1:
        return
    rows, cols = np.nonzero(Y > 0)
    has_out = np.zeros(n_comp, dtype=bool)
    has_out[lab[rows[lab[rows] != lab[cols]]]] = True
    sinks = np.flatnonzero(~has_out)
    sizes = np.bincount(lab, minlength=n_comp)
    sink = sinks[np.argmin(sizes[sinks])]
    names = list(resp.items[lab == sink])
    raise ValueError(
        f"no person with a non-extreme score got one of the items {names[:5]}"
        f"{' …' if len(names) > 5 else ''} right and one of the other items wrong, so the CML "
        f"difficulties of {names[:5]}{' …' if len(names) > 5 else ''} are infinite relative to "
        "the others; collect responses that link them or use spectral_estimate (regularised)"
    )


# ---------------------------------------------------------------------------------------
# log-likelihood, gradient and Hessian
# ---------------------------------------------------------------------------------------
def _evaluate(beta: np.ndarray, stats: _Stats, m: int, near_tol: float = _NEAR, keep=None):
    """``ℓ(β)``, its gradient and its Hessian (all analytic); item pairs closer than
    ``near_tol`` get their Hessian term from the exact recursion (``ℓ`` and the gradient do
    not depend on it).  ``keep`` (a dict): receives each batch's ``(lg, bt)`` under
    ``"esf"`` (``None`` past ``_KEEP_CELLS`` cells) and the pair sums ``Σ n π_i π_j`` of
    the pairs closer than ``_NEAR`` under ``"h2"``, for :func:`_exact_near_hessian`."""
    ll = -float(stats.totals @ beta)
    expected = np.zeros(m + 1)  # Σ_g Σ_r n_{g,r} π_{i|r}, last slot for padding
    A = np.zeros((m, m))  # A[i, j] = Σ over groups holding i and j of e_{g,i}
    H2 = np.zeros((m, m))  # Σ_g Σ_r n_{g,r} π_{i|r} π_{j|r}
    pa, pb = _near_pairs(beta, near_tol)
    near = np.zeros(pa.size)
    esf = keep.setdefault("esf", []) if keep is not None else None
    kept = 0
    beta_ext = np.append(beta, 0.0)
    e_rows, m_rows, q_rows = [], [], []  # embedded rows of E, the masks and √n π
    for b in stats.batches:
        G, K = b.items.shape
        lg, shift, P, bt = batch_probabilities(beta_ext[b.items], b.real, b.sizes, b.lo, b.hi)
        near += _near_terms(pa, pb, m, [b], [(lg, bt)])
        if esf is not None:
            kept += lg.size + bt.size
            esf.append((lg, bt) if kept <= _KEEP_CELLS else None)
        with np.errstate(invalid="ignore"):
            log_gamma = lg - np.outer(shift, np.arange(K + 1))  # log γ_r of the uncentred β
            ll -= float(np.sum(np.where(b.counts > 0, b.counts * log_gamma, 0.0)))
        gsel, rsel = np.nonzero(b.counts > 0)  # every group has a count
        Pn = P[rsel, gsel, :]
        w = b.counts[gsel, rsel][:, None]
        E = np.add.reduceat(Pn * w, np.flatnonzero(np.diff(gsel, prepend=-1)))
        expected += np.bincount(b.items.ravel(), weights=E.ravel(), minlength=m + 1)
        rows = np.arange(G)[:, None]
        Ef = np.zeros((G, m + 1))
        Ef[rows, b.items] = E
        Mf = np.zeros((G, m + 1))
        Mf[rows, b.items] = 1.0
        Qf = np.zeros((gsel.size, m + 1))
        Qf[np.arange(gsel.size)[:, None], b.items[gsel]] = Pn * np.sqrt(w)
        e_rows.append(Ef[:, :m])
        m_rows.append(Mf[:, :m])
        q_rows.append(Qf[:, :m])
        if sum(len(q) for q in q_rows) * m > _BATCH_CELLS:  # one GEMM per flush
            A += np.concatenate(e_rows).T @ np.concatenate(m_rows)
            H2 += _gram(np.concatenate(q_rows))
            e_rows, m_rows, q_rows = [], [], []
    if q_rows:
        A += np.concatenate(e_rows).T @ np.concatenate(m_rows)
        H2 += _gram(np.concatenate(q_rows))
    grad = -stats.totals + expected[:m]
    if keep is not None:
        fa, fb = _near_pairs(beta, _NEAR)
        keep["h2"] = (fa, fb, H2[fa, fb])
    # Σ_r n_r π_{ij|r} by the divided difference (e_hard − q e_easy) / (1 − q),
    # q = exp(−|β_i − β_j|) ≤ 1; in place, so that five m × m arrays are the most held
    # at once (m = 5000: 1 GB)
    D = np.subtract.outer(beta, beta)
    harder = D > 0
    np.abs(D, out=D)  # |D|
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = np.exp(np.negative(D))
        T = np.multiply(q, A.T)
        np.subtract(A, T, out=T)  # A − q Aᵀ (where the row item is harder)
        np.multiply(q, A, out=q)
        np.subtract(A.T, q, out=q)  # Aᵀ − q A (where it is easier)
        np.copyto(T, q, where=~harder)
        del q, harder, A
        np.negative(D, out=D)
        np.expm1(D, out=D)
        np.negative(D, out=D)  # 1 − exp(−|D|)
        np.divide(T, D, out=T)
    del D
    T[pa, pb] = near
    T[pb, pa] = near
    np.fill_diagonal(T, expected[:m])
    np.subtract(H2, T, out=H2)  # H
    np.add(H2, H2.T, out=T)
    T *= 0.5
    return ll, grad, T


def _near_terms(pa, pb, m: int, batches, esf) -> np.ndarray:
    """``Σ_g Σ_r n_{g,r} π_{ab|r}`` of the pairs ``(pa, pb)`` over ``batches`` by the exact
    recursion, from each batch's ``(lg, bt)`` in ``esf``."""
    near = np.zeros(pa.size)
    if not pa.size:
        return near
    for b, (lg, bt) in zip(batches, esf):
        G, K = b.items.shape
        loc = np.full((G, m + 1), -1)
        loc[np.arange(G)[:, None], b.items] = np.arange(K)[None, :]
        la, lb = loc[:, pa], loc[:, pb]
        gi, pi = np.nonzero((la >= 0) & (lb >= 0))
        t = near_pair_terms(lg, bt, b.sizes, b.counts, gi, la[gi, pi], lb[gi, pi])
        near += np.bincount(pi, weights=t, minlength=pa.size)
    return near


def _exact_near_hessian(beta: np.ndarray, stats: _Stats, m: int, H: np.ndarray,
                        keep: dict) -> np.ndarray:
    """``H`` (the Hessian ``_evaluate(beta, stats, m, tol, keep)`` returned, any ``tol``) with
    the exact terms of every pair closer than ``_NEAR``: the same as
    ``_evaluate(beta, stats, m, _NEAR)[2]`` without evaluating the ESFs and sums again."""
    pa, pb, h2 = keep["h2"]
    beta_ext = np.append(beta, 0.0)
    near = np.zeros(pa.size)
    for b, e in zip(stats.batches, keep["esf"]):
        if e is None:  # past _KEEP_CELLS: evaluated again (the same values)
            lg, _, _, bt = batch_probabilities(beta_ext[b.items], b.real, b.sizes, b.lo, b.hi)
            e = (lg, bt)
        near += _near_terms(pa, pb, m, [b], [e])
    H = H.copy()
    H[pa, pb] = H[pb, pa] = h2 - near
    return H


def _near_pairs(beta: np.ndarray, near_tol: float = _NEAR) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs ``i < j`` with ``|β_i − β_j| < near_tol`` (in row-major order), found on
    the sorted values without an m × m array."""
    m = beta.size
    order = np.argsort(beta, kind="stable")
    sb = beta[order]
    ends = np.searchsorted(sb, sb + 2 * near_tol, side="left")  # candidates k < ends[p] of p
    # |β_i − β_j| < _NEAR  ⟺  sorted positions p < k with sb[k] − sb[p] < _NEAR
    counts = ends - np.arange(m) - 1
    counts = np.maximum(counts, 0)
    if not counts.any():
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    p = np.repeat(np.arange(m), counts)
    k = p + 1 + (np.arange(p.size) - np.repeat(np.cumsum(counts) - counts, counts))
    keep = np.abs(sb[k] - sb[p]) < near_tol  # the strict inequality, as before
    i, j = order[p[keep]], order[k[keep]]
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    idx = np.lexsort((hi, lo))
    return lo[idx], hi[idx]


def _gram(Q: np.ndarray) -> np.ndarray:
    """``QᵀQ`` by SYRK (half the flops of a GEMM)."""
    from scipy.linalg.blas import dsyrk

    if not Q.shape[0]:
        return np.zeros((Q.shape[1],) * 2)
    U = np.triu(dsyrk(1.0, Q.T, trans=0, lower=0))
    U += np.triu(U, 1).T
    return U


#: The m × m factorisations below run on one BLAS thread from 64 up to this many items: BLAS's
#: threads gain nothing there and spin where the cores are shared (2.7-10x at m = 150-200 with
#: the other core busy, BENCHMARKS.md); ``_gram``, the n × m product, keeps them.  Below 64 the
#: factorisation took as long on 2 threads as on 1, and the limit's ~50 µs a step would cost
#: ~10% of a fit at m = 20.
_ONE_THREAD_ITEMS: int = 256


def _small(H: np.ndarray, *args: object) -> bool:
    """Whether the m × m matrix ``H`` is in the range where one BLAS thread pays."""
    return 64 <= H.shape[0] <= _ONE_THREAD_ITEMS


@one_blas_thread(when=_small)
def _newton_step(H: np.ndarray, grad: np.ndarray, m: int) -> np.ndarray:
    """Solve ``(−H + 11ᵀ/m) d = ∇ℓ``: the Newton step on the sum-zero subspace."""
    from scipy.linalg import cho_factor, cho_solve

    A = np.negative(H)
    A += 1.0 / m
    try:
        # Cholesky (the information is positive definite on the sum-zero subspace)
        d = cho_solve(cho_factor(A), grad)
    except np.linalg.LinAlgError:  # pragma: no cover - connected data give a regular A
        d = np.linalg.lstsq(A, grad, rcond=None)[0]
    d -= d.mean()
    big = np.max(np.abs(d))
    return d * (_MAX_STEP / big) if big > _MAX_STEP else d


@one_blas_thread(when=_small)
def _covariance(H: np.ndarray, m: int) -> np.ndarray:
    """Moore–Penrose inverse of the information ``−H`` (null space: the constant vector)."""
    from scipy.linalg import cho_factor, cho_solve

    A = np.negative(H)
    A += 1.0 / m
    try:
        cov = cho_solve(cho_factor(A, overwrite_a=True), np.eye(m), overwrite_b=True)
        cov -= 1.0 / m
    except np.linalg.LinAlgError:  # pragma: no cover
        P = np.eye(m) - 1.0 / m
        cov = np.linalg.pinv(P @ -H @ P, hermitian=True)
    out = np.add(cov, cov.T)
    out *= 0.5
    return out

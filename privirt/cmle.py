"""Conditional maximum likelihood (CML) estimation of Rasch item difficulties.

Given a person's raw score ``r`` on the set ``S`` of items they answered, the Rasch model
``P(X_i = 1) = logistic(θ − β_i)`` makes the response pattern independent of ``θ``::

    P(x | r, S) = exp(−Σ_{i∈S} x_i β_i) / γ_r(ε_S),      ε_i = exp(−β_i),

with ``γ_r`` the elementary symmetric function (ESF) of order ``r`` of the ``ε_i, i ∈ S``.
Persons are grouped by their set of observed items (missing at random is handled exactly
this way), and the conditional log-likelihood is

    ℓ(β) = −Σ_i s_i β_i − Σ_groups Σ_r n_{g,r} log γ_r(ε_{S_g}),

``s_i`` the item totals and ``n_{g,r}`` the number of persons of group ``g`` with score
``r``.  Persons with a score of 0 or ``|S|`` contribute nothing (their term is 0) and are
left out.

Numerics: ESFs by the summation algorithm in log space (``logaddexp``), so no overflow for
any spread of β or number of items; the leave-one-out ESFs ``γ^{(i)}`` needed by the
gradient come from prefix and suffix ESFs (no subtraction, hence no cancellation).
The gradient is analytic::

    ∂ℓ/∂β_i = −s_i + Σ_g Σ_r n_{g,r} ε_i γ^{(i)}_{r−1} / γ_r .

``ℓ`` is maximised by BFGS (scipy) on the analytic gradient; β is identified by centring.
Standard errors come from the observed information, the Hessian obtained by central
differences of the analytic gradient at the optimum, inverted on the sum-zero subspace
(Moore–Penrose inverse of the projected information).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import optimize

from ._checks import check_positive_int, check_positive_number
from .exceptions import DisconnectedComparisonGraph
from .responses import ResponsesLike, as_responses

__all__ = ["CMLEResult", "cmle_estimate"]

#: Patterns per batch are chosen so that a batch's (G, k, k) log-ESF buffers hold at most
#: this many cells (8 bytes each: 32 MiB).
_BATCH_CELLS = 4 * 2**20


@dataclass(frozen=True)
class CMLEResult:
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
        Optimiser iterations.
    converged : bool
        Whether the gradient norm fell below the tolerance.
    n_persons_used : int
        Persons with a non-extreme score (the others carry no conditional information).
    """

    beta: pd.Series
    se: pd.Series
    loglik: float
    n_iter: int
    converged: bool
    n_persons_used: int = 0
    info: dict = field(default_factory=dict, repr=False)

    def top_k(self, k: int, *, largest: bool = True) -> pd.Index:
        """Labels of the ``k`` hardest items (``largest=False``: the ``k`` easiest)."""
        from .spectral import _top_k

        return _top_k(self.beta, k, largest)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"beta": self.beta, "se": self.se})


@dataclass
class _Group:
    """All persons whose observed-item sets have the same size ``k``, batched.

    ``items[g]`` are the ``k`` observed item positions of pattern ``g``, ``counts[g, r]``
    the number of persons of pattern ``g`` with score ``r`` (extremes zeroed).
    """

    items: np.ndarray  # (G, k) int
    counts: np.ndarray  # (G, k + 1) float


def cmle_estimate(X: ResponsesLike, *, tol: float = 1e-10, max_iter: int = 100) -> CMLEResult:
    """Conditional maximum likelihood estimate of Rasch item difficulties.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, NaN/None for missing.
    tol : float
        Convergence tolerance on the gradient, relative to the number of persons used:
        converged when ``max_i |∂ℓ/∂β_i| ≤ tol · max(1, n_used)`` (or the optimiser's
        relative-change criterion at machine precision).
    max_iter : int
        Multiplied by 10 as the BFGS iteration cap (BFGS needs more, cheaper, iterations than
        Newton).

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
    resp = as_responses(X)
    m = resp.n_items
    if m < 2:
        raise ValueError(f"CML estimation needs at least 2 items, got {m}")
    groups, totals, n_used = _groups(resp.codes)
    _check_estimable(resp, groups, totals)

    def fun(b):
        ll, g = _loglik_grad(b, groups, totals, m)
        return -ll, -g

    # start: centred log-odds of the item p-values among the persons used
    n_ans = _n_answered(groups, m)
    p = np.clip(totals / np.maximum(n_ans, 1), 1e-3, 1 - 1e-3)
    b0 = -np.log(p / (1 - p))
    b0 -= b0.mean()
    scale = max(1.0, float(n_used))
    opt = optimize.minimize(
        fun, b0, jac=True, method="BFGS",
        options={"gtol": tol * scale, "maxiter": 10 * int(max_iter)},
    )
    beta = opt.x - opt.x.mean()
    ll, grad = _loglik_grad(beta, groups, totals, m)
    # polish with Newton steps on the numerical Hessian of the analytic gradient
    H = _hessian(beta, groups, totals, m)
    n_iter = int(opt.nit)
    cov = np.linalg.pinv(-_project(H, m), hermitian=True)
    for _ in range(5):
        if np.max(np.abs(grad)) <= tol * scale:
            break
        step = cov @ grad
        beta = beta + step - step.mean()
        ll, grad = _loglik_grad(beta, groups, totals, m)
        n_iter += 1
    converged = bool(np.max(np.abs(grad)) <= max(tol * scale, 1e-7 * scale))
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    items = resp.items
    return CMLEResult(
        beta=pd.Series(beta, index=items.copy(), name="beta"),
        se=pd.Series(se, index=items.copy(), name="se"),
        loglik=float(ll),
        n_iter=n_iter,
        converged=converged,
        n_persons_used=int(n_used),
        info={"cov": cov, "optimizer": opt.message, "n_groups": len(groups)},
    )


# ---------------------------------------------------------------------------------------
# building blocks
# ---------------------------------------------------------------------------------------
def _groups(codes: np.ndarray) -> tuple[list[_Group], np.ndarray, int]:
    """Group persons by observed-item pattern; score counts and item totals (non-extreme)."""
    n, m = codes.shape
    obs = codes >= 0
    score = (codes == 1).sum(axis=1)
    k = obs.sum(axis=1)
    keep = (score > 0) & (score < k)
    totals = (codes[keep] == 1).sum(axis=0).astype(np.float64)
    if not keep.any():
        return [], totals, 0
    packed = np.packbits(obs[keep], axis=1)
    uniq, inverse = np.unique(packed, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    masks = np.unpackbits(uniq, axis=1)[:, :m].astype(bool)  # (U, m)
    sizes = masks.sum(axis=1)
    scores_kept = score[keep]
    groups = []
    for size in np.unique(sizes):
        sel = np.flatnonzero(sizes == size)
        items = np.nonzero(masks[sel])[1].reshape(sel.size, size)
        # counts[g, r]: persons of pattern sel[g] with score r
        local = np.full(uniq.shape[0], -1)
        local[sel] = np.arange(sel.size)
        who = local[inverse]
        ok = who >= 0
        counts = np.zeros((sel.size, size + 1))
        np.add.at(counts, (who[ok], scores_kept[ok]), 1.0)
        groups.append(_Group(items, counts))
    return groups, totals, int(keep.sum())


def _n_answered(groups: list[_Group], m: int) -> np.ndarray:
    n_ans = np.zeros(m)
    for g in groups:
        np.add.at(n_ans, g.items, g.counts.sum(axis=1)[:, None])
    return n_ans


def _check_estimable(resp, groups, totals) -> None:
    m = resp.n_items
    n_ans = _n_answered(groups, m)
    bad = (totals <= 0) | (totals >= n_ans)
    if bad.any():
        names = list(resp.items[bad][:5])
        raise ValueError(
            f"item(s) {names} were answered correctly by none or by all of the persons with a "
            "non-extreme score, so their CML difficulty is infinite; remove them or use "
            "spectral_estimate (regularised)"
        )
    # connectivity of items through persons
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    adj = np.zeros((m, m), dtype=bool)
    for g in groups:
        for row in g.items:
            adj[np.ix_(row, row)] = True
    n_comp, lab = connected_components(csr_matrix(adj), directed=False)
    if n_comp > 1:
        sizes = np.bincount(lab)
        outside = resp.items[lab != int(np.argmax(sizes))]
        raise DisconnectedComparisonGraph(
            f"items {list(outside[:5])} share no person (with a non-extreme score) with the "
            f"other items ({n_comp} separate parts): difficulties are not identified"
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

    from .counts import differential_counts

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


def _log_esf_table(le: np.ndarray) -> np.ndarray:
    """Prefix log-ESFs, batched: ``out[:, j]`` holds log γ_0..γ_k of the first ``j`` items.

    ``le`` is (G, k) of log ε; the result is (G, k + 1, k + 1).  Summation algorithm:
    adding item ``j`` maps γ_r ↦ γ_r + ε_j γ_{r−1}, done with ``logaddexp``.
    """
    G, k = le.shape
    out = np.full((G, k + 1, k + 1), -np.inf)
    out[:, 0, 0] = 0.0
    for j in range(k):
        prev = out[:, j]
        out[:, j + 1, 0] = 0.0
        out[:, j + 1, 1:] = np.logaddexp(prev[:, 1:], le[:, j : j + 1] + prev[:, :-1])
    return out


def _group_terms(beta_g: np.ndarray, counts: np.ndarray) -> tuple[float, np.ndarray]:
    """For a batch of patterns of size k: Σ n_r log γ_r and expected item totals.

    ``beta_g`` (G, k), ``counts`` (G, k + 1).  Returns the scalar Σ_g Σ_r n_{g,r} log γ_r and
    the (G, k) array Σ_r n_{g,r} π_{i|r} with π_{i|r} = ε_i γ^{(i)}_{r−1} / γ_r.
    """
    G, k = beta_g.shape
    le = -beta_g
    pre = _log_esf_table(le)  # pre[:, i] = items < i
    suf = _log_esf_table(le[:, ::-1])[:, ::-1]  # suf[:, i] = items ≥ i
    log_gamma = pre[:, k]  # (G, k + 1)
    with np.errstate(invalid="ignore"):
        ll = float(np.sum(np.where(counts > 0, counts * log_gamma, 0.0)))
    # leave-one-out: L[:, i, t] = log Σ_a pre[:, i, a] + suf[:, i+1, t−a],  t = 0..k−1
    L = np.full((G, k, k), -np.inf)
    P = pre[:, :k, :k]
    S = suf[:, 1 : k + 1, :k]
    for a in range(k):
        L[:, :, a:] = np.logaddexp(L[:, :, a:], P[:, :, a : a + 1] + S[:, :, : k - a])
    # r = 1..k−1 (extremes have zero counts)
    logp = le[:, :, None] + L[:, :, : k - 1] - log_gamma[:, None, 1:k]
    expected = np.einsum("gir,gr->gi", np.exp(logp), counts[:, 1:k])
    return ll, expected


def _loglik_grad(beta, groups, totals, m):
    ll = -float(np.dot(totals, beta))
    grad = -totals.copy()
    for g in groups:
        G, k = g.items.shape
        step = max(1, _BATCH_CELLS // max(1, (k + 1) ** 2))  # bound the (G, k, k) buffers
        for s in range(0, G, step):
            items = g.items[s : s + step]
            lg, e = _group_terms(beta[items], g.counts[s : s + step])
            ll -= lg
            np.add.at(grad, items, e)
    return ll, grad


def _hessian(beta, groups, totals, m, h: float = 1e-5) -> np.ndarray:
    H = np.empty((m, m))
    for j in range(m):
        e = np.zeros(m)
        e[j] = h
        gp = _loglik_grad(beta + e, groups, totals, m)[1]
        gm = _loglik_grad(beta - e, groups, totals, m)[1]
        H[:, j] = (gp - gm) / (2 * h)
    return 0.5 * (H + H.T)


def _project(H: np.ndarray, m: int) -> np.ndarray:
    Pm = np.eye(m) - np.full((m, m), 1.0 / m)
    return Pm @ H @ Pm

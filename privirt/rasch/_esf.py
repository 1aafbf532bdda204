"""Elementary symmetric functions (ESFs) of Rasch item parameters and their derivatives.

Batched over groups of persons that answered the same item set (padded with empty slots):
``log γ_r`` by the summation algorithm (scaled linear arithmetic, or log space when the
scale bound could be exceeded), the conditional success probabilities
``π_{i|r} = ε_i γ^{(i)}_{r−1} / γ_r`` for every item and score by a two-sided stable
recursion in O(k²) per group, and the pair probabilities ``π_{ij|r}`` from the divided
difference ``(ε_i π_{j|r} − ε_j π_{i|r}) / (ε_i − ε_j)``, with an exact O(k) recursion for
near-equal pairs.  The derivations and error bounds are in ``docs/cmle.md``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["batch_probabilities", "near_pair_terms"]

#: Largest log-magnitude the scaled linear summation may reach either way (its entries stay
#: within ``exp(±_LINEAR_LOG_RANGE)``, far from over- and underflow at ``exp(±708)``).
_LINEAR_LOG_RANGE = 600.0
#: Upper clip for the recursion multipliers (keeps discarded branches finite).
_C_MAX = 1e300


def _log_esf(le: np.ndarray) -> np.ndarray:
    """log γ_0..γ_K of each row of ``le`` = log ε (−inf for empty slots), log space."""
    G, K = le.shape
    out = np.full((G, K + 1), -np.inf)
    if _numba_for(G * K * K) and G:  # where the batch's chain runs in numba (same values)
        from . import _esf_numba

        _esf_numba.log_esf(np.ascontiguousarray(le, dtype=np.float64), out)
        return out
    out[:, 0] = 0.0
    for j in range(K):
        out[:, 1 : j + 2] = np.logaddexp(out[:, 1 : j + 2], le[:, j : j + 1] + out[:, : j + 1])
    return out


def _lin_esf(et: np.ndarray, start=1.0) -> np.ndarray:
    """γ_0..γ_K of each row of ``et`` = ε (0 for empty slots), plain arithmetic, times
    ``start`` (per row; the summation is linear in its initial ``γ_0``)."""
    G, K = et.shape
    out = np.zeros((G, K + 1))
    if _numba_for(G * K * K) and G:  # where the batch's chain runs in numba (same values)
        from . import _esf_numba

        _esf_numba.lin_esf(np.ascontiguousarray(et, dtype=np.float64),
                           np.broadcast_to(np.asarray(start, dtype=np.float64), (G,)).copy(),
                           out)
        return out
    out[:, 0] = start
    for j in range(K):
        out[:, 1 : j + 2] += et[:, j : j + 1] * out[:, : j + 1]
    return out


def _chain(mult, G: int, W: int, K: int, sizes: np.ndarray, lo=None, hi=None) -> np.ndarray:
    """Conditional success probabilities from the recursion multipliers.

    ``mult(r, a, b, out)`` writes ``c_r = ε_i γ_r / γ_{r+1}`` (positive and finite) for the
    groups ``a:b`` into ``out`` (shape ``(b − a, W)``), r = 0..K−1, for groups of
    ``sizes[g]`` items; the multipliers are made one step at a time, so no (K, G, W) array
    of them is held.  Returns ``P[r, g, i] = π_{i|r}``, r = 0..K.  Upward
    ``π_{r+1} = c_r (1 − π_r)`` (errors damped while ``c_r ≤ 1``), downward from ``π_k = 1``:
    ``π_r = 1 − π_{r+1} / c_r`` (damped while ``c_r > 1``); ``π_r`` is taken from the upward
    pass where ``c_{r−1} ≤ 1`` (``c_r`` increases with ``r``).  Entries past a group's size
    are unspecified (possibly infinite).  With ``lo``/``hi`` (groups sorted by ``hi``), only
    the scores ``lo[g] ≤ r ≤ hi[g]`` are guaranteed; the other entries are unspecified.
    """
    P = np.empty((K + 1, G, W))
    P[0] = 0.0
    up_from, dn_to = _score_ranges(K, G, lo, hi)
    tmp = np.empty((G, W))
    c = np.empty((G, W))
    # the discarded branch of each recursion may grow without bound (to ±inf, never NaN:
    # c > 0 and finite); only entries from the damped branch are kept
    with np.errstate(over="ignore", invalid="ignore"):
        for r in range(K):
            a = up_from[r + 1]
            mult(r, a, G, c[a:])
            np.subtract(1.0, P[r, a:], out=tmp[a:])
            np.multiply(c[a:], tmp[a:], out=P[r + 1, a:])
        dn = np.ones((G, W))
        sel = np.empty((G, W), dtype=bool)
        smallest = int(sizes.min()) if G else 0
        for r in range(K - 1, 0, -1):
            b = dn_to[r]
            if b == 0:
                continue
            d = dn[:b]
            mult(r, 0, b, c[:b])
            np.divide(d, c[:b], out=d)
            np.subtract(1.0, d, out=d)
            if r >= smallest:  # π_{k_g} = 1 starts each group's recursion
                d[sizes[:b] <= r] = 1.0
            mult(r - 1, 0, b, c[:b])
            np.greater(c[:b], 1.0, out=sel[:b])
            np.copyto(P[r, :b], d, where=sel[:b])
    P[K, sizes == K] = 1.0  # π_k = 1 (smaller groups got theirs in the downward pass)
    return P


#: ``"auto"``: the recursion of :func:`_chain` runs in the numba kernel of :mod:`._esf_numba`
#: (the ``fast`` extra) where numba is installed and a batch has at least
#: ``NUMBA_FROM_CELLS`` (group, item, score) cells, else in numpy; ``"numpy"``: always numpy.
#: The two agree to round-off (BENCHMARKS.md, "Session 20").
CHAIN_ENGINE: str = "auto"
NUMBA_FROM_CELLS = 100_000


def _numba_for(cells: int) -> bool:
    """Whether work of ``cells`` (group, item, score) cells runs in :mod:`._esf_numba`."""
    from .._backend import numba_available

    if CHAIN_ENGINE not in ("auto", "numpy"):
        raise ValueError(f'CHAIN_ENGINE must be "auto" or "numpy", got {CHAIN_ENGINE!r}')
    return CHAIN_ENGINE == "auto" and cells >= NUMBA_FROM_CELLS and numba_available()


def _chain_rows(R: np.ndarray, E: np.ndarray, log_mode: bool, K: int, sizes: np.ndarray,
                lo=None, hi=None) -> np.ndarray:
    """:func:`_chain` with the multipliers ``c_r = R[g, r] E[g, i]`` (``log_mode``:
    ``clip(exp(R[g, r] + E[g, i]), 1e-300, _C_MAX)``), ``R`` (G, K) and ``E`` (G, W)."""
    G, W = E.shape
    if _numba_for(G * W * K) and G:
        from . import _esf_numba

        up_from, dn_to = _score_ranges(K, G, lo, hi)
        groups = np.arange(G)
        up_last = np.searchsorted(up_from[1:], groups, side="right").astype(np.int64)
        dn_first = np.searchsorted(dn_to, groups, side="right").astype(np.int64)
        P = np.empty((K + 1, G, W))
        _esf_numba.chain(np.ascontiguousarray(R, dtype=np.float64),
                         np.ascontiguousarray(E, dtype=np.float64), bool(log_mode), _C_MAX,
                         np.asarray(sizes, dtype=np.int64), up_last, dn_first, P)
        return P
    RT = R.T[:, :, None]
    if log_mode:
        def mult(r, a, b, out):
            np.add(RT[r, a:b], E[a:b], out=out)
            with np.errstate(over="ignore"):
                np.exp(out, out=out)
            np.clip(out, 1e-300, _C_MAX, out=out)
    else:
        def mult(r, a, b, out):
            np.multiply(RT[r, a:b], E[a:b], out=out)
    return _chain(mult, G, W, K, sizes, lo, hi)


def _score_ranges(K: int, G: int, lo, hi):
    """``up_from[r]``: first group whose upward pass reaches score ``r``; ``dn_to[r]``: groups
    ``< dn_to[r]`` run the downward pass at ``r`` (groups sorted by ``hi``)."""
    if lo is None:
        return np.zeros(K + 1, dtype=np.intp), np.full(K + 1, G, dtype=np.intp)
    up_from = np.searchsorted(hi, np.arange(K + 1), side="left")
    lo_suffix_min = np.minimum.accumulate(lo[::-1])[::-1]
    return up_from, np.searchsorted(lo_suffix_min, np.arange(K + 1), side="right")


def _log_ratios(lg: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``log(γ_r / γ_{r+1})``, r = 0..K−1 (0 past each group's size: never used)."""
    with np.errstate(invalid="ignore"):
        lr = lg[:, :-1] - lg[:, 1:]
    lr[np.arange(lr.shape[1])[None, :] >= sizes[:, None]] = 0.0
    return lr


def batch_probabilities(beta_g: np.ndarray, real: np.ndarray, sizes: np.ndarray, lo=None, hi=None):
    """Log-ESFs and conditional success probabilities of a padded batch of item sets.

    Parameters
    ----------
    beta_g : ndarray (G, K)
        Difficulties of each group's items (any value in empty slots).
    real : ndarray of bool (G, K)
        Which slots hold an item.
    sizes : ndarray of int (G,)
        Items per group (``real.sum(axis=1)``).
    lo, hi : ndarray of int (G,), optional
        Lowest and highest score needed per group, groups sorted by ``hi``.

    Returns
    -------
    lg : ndarray (G, K + 1)
        ``log γ_r`` of the *centred* parameters ``β − c_g`` (−inf for ``r > k_g``).
    shift : ndarray (G,)
        ``c_g``; ``log γ_r(β) = lg[:, r] − r c_g``.
    P : ndarray (K + 1, G, K)
        ``P[r, g, i] = π_{i|r}`` for ``lo[g] ≤ r ≤ hi[g]`` (0 in empty slots).
    bt : ndarray (G, K)
        Centred difficulties (``+inf`` in empty slots).
    """
    G, K = beta_g.shape
    shift = np.where(real, beta_g, 0.0).sum(axis=1) / sizes
    bt = np.where(real, beta_g - shift[:, None], np.inf)
    with np.errstate(over="ignore"):
        et = np.exp(-bt)  # 0 in empty slots
    upper = np.log1p(et).sum(axis=1)  # log Π(1 + ε) bounds every partial ESF from above
    lower = np.where(real, np.maximum(bt, 0.0), 0.0).sum(axis=1)  # and −log of a lower bound
    # starting the summation at γ_0 = exp(−a) scales every entry by exp(−a): with
    # a = (upper − lower) / 2 they lie within exp(±(upper + lower) / 2), so groups of ~800
    # spread items stay linear (a = 0 where both bounds are in range: unscaled, as before)
    linear = (upper + lower).max(initial=0.0) < 2 * _LINEAR_LOG_RANGE
    with np.errstate(divide="ignore"):
        if linear:
            fits = np.maximum(upper, lower) < _LINEAR_LOG_RANGE
            a = np.where(fits, 0.0, 0.5 * (upper - lower))
            lg = np.log(_lin_esf(et, np.exp(-a))) + a[:, None]
        else:
            lg = _log_esf(-bt)
    lr = _log_ratios(lg, sizes)
    if linear:
        P = _chain_rows(np.exp(lr), np.where(real, et, 1e-300), False, K, sizes, lo, hi)
    else:  # empty slots: a positive multiplier
        P = _chain_rows(lr, np.where(real, -bt, -690.0), True, K, sizes, lo, hi)
    return lg, shift, P, bt


#: Most (triple, score) cells :func:`near_pair_terms` holds per array at once (32 MiB of
#: float64; about ten such arrays are live), so its memory does not grow with the triples.
NEAR_CHUNK_CELLS = 2**22


def near_pair_terms(lg, bt, sizes, counts, gi, ia, ib) -> np.ndarray:
    """``Σ_r n_r π_{ab|r}`` for listed (group, item a, item b) triples, exactly.

    ``π_{ab|r} = π_{a|r} π'_{b|r−1}`` with ``π'`` the success probability of ``b`` on the
    item set without ``a``, whose ESF ratios follow from ``π_{a|·}``: ``γ^{(a)}_s =
    γ_s (1 − π_{a|s}) = γ_{s+1} π_{a|s+1} / ε_a`` (the form whose factor is ≥ 1/2 is used).
    Wherever the batch's own chain runs in numba (:func:`_numba_for`), the two chains and the
    sum run in the one-pass kernels ``_esf_numba.near_pairs_a`` / ``near_pairs_b`` (the same
    arithmetic).  The triples are taken in chunks of at most ``NEAR_CHUNK_CELLS / (K + 1)``,
    so memory is bounded whatever their number.
    """
    t = gi.size
    if t == 0:
        return np.zeros(0)
    # a triple's value depends on its group and the two items' (centred) difficulties only:
    # tied items (equal totals with complete data tie exactly at every iterate) repeat it
    key = np.empty((t, 3), dtype=np.int64)
    key[:, 0] = gi
    key[:, 1] = bt[gi, ia].view(np.int64)
    key[:, 2] = bt[gi, ib].view(np.int64)
    _, first, back = np.unique(key, axis=0, return_index=True, return_inverse=True)
    del key
    if first.size < t:
        return near_pair_terms(lg, bt, sizes, counts, gi[first], ia[first], ib[first])[back.ravel()]
    K = lg.shape[1] - 1
    step = max(1, NEAR_CHUNK_CELLS // (K + 1))
    if t > step:
        return np.concatenate([
            _near_pair_chunk(lg, bt, sizes, counts, gi[s : s + step], ia[s : s + step],
                             ib[s : s + step])
            for s in range(0, t, step)
        ])
    return _near_pair_chunk(lg, bt, sizes, counts, gi, ia, ib)


def _near_pair_chunk(lg, bt, sizes, counts, gi, ia, ib) -> np.ndarray:
    """:func:`near_pair_terms` for one chunk of triples."""
    K = lg.shape[1] - 1
    # the chains in numba wherever the batch's own chain runs there (its load is paid
    # already; numpy's loop costs ~6 K whole-array passes however few the triples); the
    # logarithms stay numpy's (one per cell), so the values are the same
    if _numba_for(max(lg.shape[0] * K * K, gi.size * (K + 1))):
        from . import _esf_numba

        sizes = np.asarray(sizes, dtype=np.int64)
        gi, ia, ib = (np.asarray(v, dtype=np.int64) for v in (gi, ia, ib))
        lg = np.ascontiguousarray(lg, dtype=np.float64)
        bt = np.ascontiguousarray(bt, dtype=np.float64)
        pa = np.empty((gi.size, K + 1))
        x1, x2 = np.empty(gi.size * K), np.empty(gi.size * K)
        n1, n2 = _esf_numba.near_pairs_a(lg, bt, sizes, gi, ia, _C_MAX, pa, x1, x2)
        with np.errstate(divide="ignore", invalid="ignore"):
            l1, l2 = np.log1p(x1[:n1]), np.log(x2[:n2])
        del x1, x2
        out = np.empty(gi.size)
        _esf_numba.near_pairs_b(lg, bt, sizes, np.ascontiguousarray(counts, dtype=np.float64),
                                gi, ia, ib, pa, l1, l2, _C_MAX, out)
        return out
    k = sizes[gi]
    lgt = lg[gi]
    lr = _log_ratios(lgt, k)
    pa = _chain_rows(lr, -bt[gi, ia][:, None], True, K, k)[:, :, 0].T  # (t, K + 1): π_{a|r}
    pa[np.arange(K + 1)[None, :] > k[:, None]] = 0.0  # past the group's size: unspecified
    with np.errstate(divide="ignore", invalid="ignore"):
        # log γ^{(a)}_s, s = 0..K−1
        one = lgt[:, :K] + np.log1p(-np.minimum(pa[:, :K], 1.0))
        two = lgt[:, 1:] + np.log(pa[:, 1:]) + bt[gi, ia][:, None]
        lga = np.where(pa[:, :K] <= 0.5, one, two)
    lrb = _log_ratios(lga, k - 1)  # (t, K − 1)
    pb = _chain_rows(lrb, -bt[gi, ib][:, None], True, K - 1, k - 1)[:, :, 0].T  # π'_{b|s}
    pb[np.arange(K)[None, :] > (k - 1)[:, None]] = 0.0
    # Σ_{r=1..K} n_r π_{a|r} π'_{b|r−1}
    return np.einsum("tr,tr,tr->t", counts[gi][:, 1:], pa[:, 1:], pb)

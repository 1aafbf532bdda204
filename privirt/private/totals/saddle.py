"""The fit's score distributions at many items: a saddlepoint approximation on compressed items.

The marginal fit (:func:`~privirt.private.totals.marginal.fit_spread` and the bootstrap's
:func:`~privirt.private.totals.marginal.fit_support_batch`) needs, for every candidate ability
model and every replicate, the probability of each released score bin given each ability node:
P(S ∈ [a, b) | θ_k), S a sum of independent Bernoulli(logistic(θ_k − β_i)) (Poisson-binomial).
Exactly this costs O(m²) per model (the elementary symmetric functions): minutes at m = 1000.
Beyond :data:`EXACT_FIT_ITEMS` items the fit uses instead (``docs/totals.md`` §5.6):

1. **Pseudo-items.** Every sum over items Σ_i f(θ − β_i) (the log-partition Λ(θ) and its
   derivatives) is replaced by Σ_j W_j f(θ − b_j) on a uniform grid b_j of spacing h ≤
   :data:`GRID_STEP`: each β_i is spread over the six grid points around it by the weights of
   Lagrange interpolation of degree 5 (exact for polynomials of degree ≤ 5).  Error per item
   ≤ max|f⁽⁶⁾|·3.52·h⁶/720; for Λ (f = log(1 + eˣ), |f⁽⁶⁾| ≤ ¼) that is 1.22·10⁻³·h⁶, i.e.
   ≤ 1.4·10⁻⁸·m at h = 0.15.
2. **Saddlepoint tails.** In the Rasch model the exponential tilt of S given θ is S given θ + s,
   so the saddlepoint of the cut c (x = c − ½) is the ability θ*_c with E[S | θ*_c] = x, the same
   for every node.  With D = Λ(θ_k) − Λ(θ*_c) − (θ_k − θ*_c)·x ≥ 0, w = sign(θ*_c − θ_k)·√(2D),
   u = 2 sinh((θ*_c − θ_k)/2)·σ(θ*_c):

       P(S ≥ c | θ_k) ≈ 1 − Φ(w) − φ(w)·(1/w − 1/u)

   (Lugannani–Rice with Daniels' second continuity correction for a lattice).  Its error is
   O(σ*⁻³) in the centre and a relative O(σ*⁻²) in the tails, σ*² = Var(S | θ*_c); it is worst
   for cuts next to 0 or m (σ* small), which is why those fall back to the exact distribution
   (:data:`EDGE_SCORES`).  ``tests/test_totals_saddle.py`` brute-forces the distance to the
   exact bin probabilities and to the exact fit.

Everything here is post-processing of the release (no privacy consequence).
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["EXACT_FIT_ITEMS", "EDGE_SCORES", "GRID_STEP", "use_saddlepoint", "pseudo_items",
           "node_bin_probabilities"]

#: Up to this many items the fit's score distributions are exact (elementary symmetric functions).
EXACT_FIT_ITEMS: int = 400
#: Beyond this many items the bootstrap simulates its responses from float32 uniforms (⅔ the time).
SINGLE_SIMULATION_ITEMS: int = 400
#: The saddlepoint is used only when every interior cut c of the bins has min(c, m + 1 − c) ≥ this.
EDGE_SCORES: int = 40
#: Largest spacing (logits) of the pseudo-item grid.
GRID_STEP: float = 0.15

#: rows per block (cache-sized temporaries)
_BLOCK = 32

_OFFSETS = np.arange(-2, 4)  # the six grid points around a cell [b_j, b_j+1): j−2 … j+3
_DENOM = np.array([np.prod([o - p for p in _OFFSETS if p != o]) for o in _OFFSETS], dtype=float)


def use_saddlepoint(m: int, edges: np.ndarray) -> bool:
    """Whether the fit's bin probabilities for ``m`` items and these bins use the saddlepoint."""
    if m <= EXACT_FIT_ITEMS:
        return False
    cuts = np.asarray(edges)[1:-1]
    return bool(cuts.size == 0 or np.min(np.minimum(cuts, m + 1 - cuts)) >= EDGE_SCORES)


def pseudo_items(beta: np.ndarray, step: float = GRID_STEP) -> tuple[np.ndarray, np.ndarray]:
    """Grid points b (T, G) and weights W (T, G) with Σ_j W_j f(b_j) ≈ Σ_i f(β_i) per row.

    Lagrange interpolation of degree 5 on a uniform grid (spacing ≤ ``step``) spread over each
    row's range; the weights sum to m and reproduce the first five moments of the β_i exactly.
    When the grid would have as many points as there are items, the items themselves (W = 1).
    """
    beta = np.atleast_2d(np.asarray(beta, dtype=float))
    T, m = beta.shape
    lo = beta.min(axis=1)
    span = beta.max(axis=1) - lo
    cells = max(1, int(np.ceil(span.max() / step)))
    G = cells + 5
    if G >= m:
        return beta.copy(), np.ones_like(beta)
    h = np.maximum(span / cells, 1e-6)
    pos = (beta - lo[:, None]) / h[:, None]
    j = np.clip(np.floor(pos), 0, cells - 1)
    u = pos - j  # in [0, 1]
    # ℓ_k(u) = Π_{l≠k}(u − o_l)/Π_{l≠k}(o_k − o_l), by prefix and suffix products
    d = [u - o for o in _OFFSETS]
    pre = [np.ones_like(u)]
    for k in range(5):
        pre.append(pre[-1] * d[k])
    suf = np.ones_like(u)
    base = j.astype(np.int64) + G * np.arange(T)[:, None]
    W = np.zeros(T * G)
    for k in range(5, -1, -1):
        W += np.bincount((base + k).ravel(), weights=(pre[k] * suf / _DENOM[k]).ravel(), minlength=T * G)
        suf = suf * d[k]
    W = W.reshape(T, G)
    b = lo[:, None] + (np.arange(G)[None, :] - 2.0) * h[:, None]
    return b, W


def _logistic_terms(theta: np.ndarray, b: np.ndarray):
    """p, q of logistic(θ_n − b_j): shapes (T, N, G); θ (T, N), b (T, G)."""
    x = np.exp(np.clip(theta, -300, 300))[:, :, None] * np.exp(-b)[:, None, :]
    q = 1.0 / (1.0 + x)
    return x, x * q, q


def _wsum(a: np.ndarray, W: np.ndarray) -> np.ndarray:
    return np.matmul(a, W[:, :, None])[..., 0]


def _saddlepoints(b, W, x, guess, iters: int = 60, tol: float = 1e-8):
    """The saddlepoints θ* (T, C) with Σ_j W_j logistic(θ* − b_j) = x (T, C) (safeguarded Newton
    on the logit scale) and Λ, κ₂ … κ₅ there: a tuple of six (T, C) arrays.

    Once the steps are below 10⁻⁴ every iteration also sums Λ and κ₃ … κ₅; the last one's are
    carried to the final iterate by Taylor (its step is below ``tol``, the error O(step²)).
    """
    mtot = W.sum(axis=1, keepdims=True)
    target = special.logit(x / mtot)
    lo = np.broadcast_to(b.min(axis=1, keepdims=True) - 40.0, x.shape).copy()
    hi = np.broadcast_to(b.max(axis=1, keepdims=True) + 40.0, x.shape).copy()
    t = np.clip(guess, lo, hi)
    last = np.inf
    for _ in range(iters):
        e, p, q = _logistic_terms(t, b)
        M = np.clip(_wsum(p, W), 1e-300, None)
        pq = p * q
        v = _wsum(pq, W)
        frac = np.clip(M / mtot, 1e-300, 1 - 1e-16)
        f = special.logit(frac) - target
        lo = np.where(f < 0, t, lo)
        hi = np.where(f < 0, hi, t)
        nt = t - f / np.maximum(v / (M * (1.0 - frac)), 1e-300)
        bad = (nt < lo) | (nt > hi)
        nt = np.where(bad, 0.5 * (lo + hi), nt)
        step = np.max(np.abs(nt - t))
        if last < 1e-4 or step < tol:
            lam = _wsum(np.log1p(e), W)
            k3 = _wsum(pq * (q - p), W)
            k4 = _wsum(pq * (1.0 - 6.0 * pq), W)
            k5 = _wsum(pq * (q - p) * (1.0 - 12.0 * pq), W)
            if step < tol:
                d = nt - t
                return (nt, lam + M * d + 0.5 * v * d * d, v + k3 * d + 0.5 * k4 * d * d,
                        k3 + k4 * d, k4 + k5 * d, k5)
        last = step
        t = nt
    raise FloatingPointError("the saddlepoints did not converge")  # pragma: no cover


def _upper_tails(b, W, theta, cuts):
    """P(S ≥ c | θ_n) for the interior cuts c (C,): shape (T, N, C), by the saddlepoint."""
    T, N = theta.shape
    x = np.broadcast_to(np.asarray(cuts, dtype=float) - 0.5, (T, len(cuts)))
    xn = np.exp(np.clip(theta, -300, 300))[:, :, None] * np.exp(-b)[:, None, :]
    lam_n = _wsum(np.log1p(xn), W)  # Λ(θ_n) (T, N)
    # start each saddlepoint at the vertex of the parabola through xθ − Λ(θ) at the three nodes
    # around its largest value (θ* maximises xθ − Λ(θ))
    order = np.argsort(theta, axis=1)
    ts = np.take_along_axis(theta, order, axis=1)
    g = x[:, None, :] * ts[:, :, None] - np.take_along_axis(lam_n, order, axis=1)[:, :, None]  # (T, N, C)
    k = np.clip(np.argmax(g, axis=1), 1, N - 2)[:, None, :]  # (T, 1, C)
    tt = ts[:, :, None].repeat(x.shape[1], axis=2)
    t0, t1, t2 = (np.take_along_axis(tt, k + o, axis=1)[:, 0] for o in (-1, 0, 1))
    g0, g1, g2 = (np.take_along_axis(g, k + o, axis=1)[:, 0] for o in (-1, 0, 1))
    den = (t1 - t0) * (g1 - g2) - (t1 - t2) * (g1 - g0)
    with np.errstate(divide="ignore", invalid="ignore"):
        vert = t1 - 0.5 * ((t1 - t0) ** 2 * (g1 - g2) - (t1 - t2) ** 2 * (g1 - g0)) / den
    guess = np.where(np.isfinite(vert) & (den != 0), vert, t1)
    ts_, lam_s, k2, k3, k4, k5 = _saddlepoints(b, W, x, guess)
    s = ts_[:, None, :] - theta[:, :, None]  # θ* − θ_k, (T, N, C)
    sd = np.sqrt(np.maximum(k2, 1e-300))[:, None, :]
    # D = Λ(θ_k) − Λ(θ*) − (θ_k − θ*)x, by the difference, or its series near the saddlepoint
    D = lam_n[:, :, None] - lam_s[:, None, :] + s * x[:, None, :]
    near = np.abs(s) * sd < 0.1
    if near.any():
        a = -s[near]  # θ_k − θ*
        t, _, c = np.nonzero(near)
        D[near] = k2[t, c] * a**2 / 2 + k3[t, c] * a**3 / 6 + k4[t, c] * a**4 / 24 + k5[t, c] * a**5 / 120
    w = np.sign(s) * np.sqrt(np.maximum(2.0 * D, 0.0))
    u = 2.0 * np.sinh(s / 2.0) * sd
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        corr = 1.0 / w - 1.0 / u
    tiny = np.abs(s) * sd < 1e-5
    if tiny.any():  # the limit at the saddlepoint itself
        corr[tiny] = np.broadcast_to(k3[:, None, :] / (6.0 * sd**3), s.shape)[tiny]
    P = special.ndtr(-w) - np.exp(-0.5 * w * w) / np.sqrt(2.0 * np.pi) * corr
    return np.clip(P, 0.0, 1.0)


def node_bin_probabilities(beta: np.ndarray, theta: np.ndarray, edges: np.ndarray,
                           step: float = GRID_STEP) -> np.ndarray:
    """P(score in bin b | θ_k) for the bins ``[edges[b], edges[b+1])``: shape (T, Q, B).

    ``beta`` (T, m), ``theta`` (T, Q).  Pseudo-items then saddlepoint tails at the interior cuts
    (module docstring); the bins' probabilities are differences of the tails (clipped at 0 and
    renormalised over the bins).
    """
    beta = np.atleast_2d(np.asarray(beta, dtype=float))
    theta = np.atleast_2d(np.asarray(theta, dtype=float))
    edges = np.asarray(edges)
    T, Q = theta.shape
    cuts = edges[1:-1]
    if cuts.size == 0:
        return np.ones((T, Q, 1))
    up = np.empty((T, Q, cuts.size))
    for a in range(0, T, _BLOCK):  # blocks of rows: the temporaries stay in the cache
        b, W = pseudo_items(beta[a:a + _BLOCK], step)
        up[a:a + _BLOCK] = _upper_tails(b, W, theta[a:a + _BLOCK], cuts)
    F = np.concatenate([np.ones((T, Q, 1)), up, np.zeros((T, Q, 1))], axis=2)
    P = np.clip(-np.diff(F, axis=2), 0.0, None)
    return P / np.maximum(P.sum(axis=2, keepdims=True), 1e-300)

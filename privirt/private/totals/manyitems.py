"""The bootstrap's refits at many items: shared inversion tables and saddlepoint bins.

:func:`fit_support_batch` is :func:`privirt.private.totals.marginal.fit_support_batch` (the
parametric bootstrap's refit of R replicates on the T support points of the fitted ability
model) with two shortcuts beyond :data:`~privirt.private.totals.saddle.EXACT_FIT_ITEMS` items
(``docs/totals.md`` §5.6); below, or when the bins reach the extreme scores, it *is* that function.

* **One inversion table per support point.** β solving the item marginals is a decreasing
  function of the target's logit y, the same for every item and every replicate: it is solved
  exactly (Newton, :func:`~privirt.private.totals.marginal.invert_marginals`) at
  :data:`KNOTS` equally spaced y covering all replicates, with its derivative
  dβ/dy = −1/h'(β), and each item's β is the cubic Hermite interpolant (O(1) per item instead
  of a Newton iteration over the Q ability nodes per item).
* **Saddlepoint bins** (:mod:`~privirt.private.totals.saddle`) for the posterior over the
  support; the difficulties returned, at the support point chosen per replicate, are then
  re-solved exactly from the interpolant (one Newton step, tolerance 10⁻⁶ as before).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from . import marginal, saddle

__all__ = ["KNOTS", "InverseTable", "fit_support_batch"]

#: Knots of the inversion tables (equally spaced in the logit of the target).
KNOTS: int = 1025
#: at most this many (replicate × support point × item) values per chunk
_CHUNK_CELLS = 1_000_000


class InverseTable:
    """β(y) for T ability models (``theta``, ``w`` (T, Q)) on y ∈ [``y_lo``, ``y_hi``]:
    exact at :data:`KNOTS` knots, cubic Hermite between them."""

    def __init__(self, theta: np.ndarray, w: np.ndarray, y_lo: float, y_hi: float, knots: int = KNOTS):
        y_hi = max(y_hi, y_lo + 1e-6)
        self.y0, self.dy = float(y_lo), (float(y_hi) - float(y_lo)) / (knots - 1)
        yk = y_lo + self.dy * np.arange(knots)
        self.beta = marginal.invert_marginals(special.expit(yk), theta, w, tol=1e-12)  # (T, K)
        e = special.expit(theta[:, None, :] - self.beta[:, :, None])  # (T, K, Q)
        pi = np.einsum("tkq,tq->tk", e, w)
        dh = np.einsum("tkq,tq->tk", e * (1.0 - e), w) / (pi * (1.0 - pi))  # −dy/dβ
        self.slope = -self.dy / np.maximum(dh, 1e-300)  # Δy·dβ/dy
        self.knots = knots

    def __call__(self, y: np.ndarray) -> np.ndarray:
        """β for targets ``y`` (r, m): shape (r, T, m)."""
        pos = np.clip((np.asarray(y, dtype=float) - self.y0) / self.dy, 0.0, self.knots - 1.0)
        k = np.minimum(np.floor(pos).astype(np.intp), self.knots - 2)
        v = pos - k
        v2, omv = v * v, 1.0 - v
        h00, h10 = (1.0 + 2.0 * v) * omv * omv, v * omv * omv
        h01, h11 = v2 * (3.0 - 2.0 * v), v2 * (v - 1.0)
        b0, b1 = self.beta[:, k], self.beta[:, k + 1]  # (T, r, m)
        s0, s1 = self.slope[:, k], self.slope[:, k + 1]
        out = h00 * b0 + h10 * s0 + h01 * b1 + h11 * s1
        return np.moveaxis(out, 0, 1)


def fit_support_batch(
    p: np.ndarray, hist: np.ndarray, n: int, var_hist: float, edges: np.ndarray,
    support: tuple[np.ndarray, np.ndarray, np.ndarray], initial: np.ndarray | None = None,
    on_batch=None,
) -> np.ndarray:
    """:func:`privirt.private.totals.marginal.fit_support_batch`, fast at many items (module doc).

    Same arguments and result: β (R, m) centred, one row per replicate.
    """
    p = np.atleast_2d(np.asarray(p, dtype=float))
    hist = np.atleast_2d(np.asarray(hist, dtype=float))
    R, m = p.shape
    if not saddle.use_saddlepoint(m, edges):
        return marginal.fit_support_batch(p, hist, n, var_hist, edges, support, initial=initial,
                                          on_batch=on_batch)
    lt, kap, lam = support
    theta, w = marginal.ability_grid(lt, kappa=kap, lam=lam)
    T, Q = theta.shape
    y = special.logit(p)
    table = InverseTable(theta, w, float(y.min()), float(y.max()))
    prior = 0.5 * (lt / marginal.PRIOR_LOG_TAU_SD) ** 2
    out = np.empty((R, m))
    step = max(1, _CHUNK_CELLS // (T * m))
    for a in range(0, R, step):
        r = min(R, a + step) - a
        beta = table(y[a:a + r])  # (r, T, m)
        Pk = saddle.node_bin_probabilities(beta.reshape(r * T, m), np.tile(theta, (r, 1)), edges)
        P = np.einsum("tqb,tq->tb", Pk, np.tile(w, (r, 1))).reshape(r, T, -1)
        V = n * P * (1.0 - P) + var_hist + 1e-9
        res = hist[a:a + r, None, :] - n * P
        nll = 0.5 * np.sum(res * res / V + np.log(V), axis=2) + prior[None, :]
        post = np.exp(-(nll - nll.min(axis=1, keepdims=True)))
        post /= post.sum(axis=1, keepdims=True)
        j = marginal._nearest_to_mean(post, lt, kap, lam)
        bsel = marginal.invert_marginals(p[a:a + r], theta[j], w[j], initial=beta[np.arange(r), j], tol=1e-6)
        out[a:a + r] = bsel - bsel.mean(axis=1, keepdims=True)
        if on_batch is not None:
            on_batch(r)
    return out

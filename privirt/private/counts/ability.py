"""The ability model of Algorithm 2's bootstrap: normal abilities fitted to released counts.

Given item difficulties β, the mean μ and spread τ of normal abilities are fitted by least
squares of the released counts Y_ij / n against E[p_i(1 − p_j)] (Gauss–Hermite quadrature);
the bootstrap (:mod:`privirt.private.counts.intervals`) simulates persons from them.  Maths in
``docs/intervals.md`` §2.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["fit_ability_normal"]

#: Cells (rows × items) of the ability fit's m × m matrices held at once.
_ABILITY_FIT_CELLS: int = 1 << 20
#: Gauss–Hermite nodes and weights of θ ~ N(0, 1).
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(41)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()
# the 10 outermost nodes weigh < 1e-16 together: dropped (an m × m × K product a node)
_GH_NODES, _GH_WEIGHTS = _GH_NODES[_GH_WEIGHTS > 1e-16], _GH_WEIGHTS[_GH_WEIGHTS > 1e-16]


def _pair_means(beta: np.ndarray, mu: float, tau: float) -> np.ndarray:
    """E[p_i (1 − p_j)] for one person with θ ~ N(μ, τ²) (m × m, zero diagonal)."""
    theta = mu + tau * _GH_NODES
    p = special.expit(theta[:, None] - beta[None, :])  # nodes × m
    E = (p * _GH_WEIGHTS[:, None]).T @ (1.0 - p)
    np.fill_diagonal(E, 0.0)
    return E


def fit_ability_normal(Y: np.ndarray, graph: np.ndarray, beta: np.ndarray, n: int,
                       x0: tuple[float, float] | None = None) -> tuple[float, float]:
    """(μ̂, τ̂) of normal abilities fitted to counts ``Y`` on the directed pairs of ``graph``.

    Least squares of ``Y_ij`` against ``n·E[p_i(1 − p_j)]`` given ``beta``; ``Y`` may be noisy
    and negative (it is used unclipped: the noise has mean zero).  τ̂ is kept in [0.01, 10].
    Solved by Levenberg–Marquardt on (μ, log τ) with the analytic Jacobian, the m × m
    matrices taken a block of rows at a time (memory O(m) rows, not O(m²) pairs × 2; a
    5000-item release fits in a few hundred MB); ``x0`` = (μ, τ) starts it (e.g. the fit at
    a nearby ``beta``).
    """
    G = np.asarray(graph, dtype=bool)
    Yn = np.asarray(Y, dtype=float)
    beta = np.asarray(beta, dtype=float)
    m = beta.size
    lo, hi = np.array([-10.0, np.log(0.01)]), np.array([10.0, np.log(10.0)])
    x = np.zeros(2) if x0 is None else np.clip([x0[0], np.log(x0[1])], lo, hi)
    rows = max(1, _ABILITY_FIT_CELLS // max(1, m))

    def parts(x: np.ndarray, jac: bool):
        tau = np.exp(x[1])
        P = special.expit(x[0] + tau * _GH_NODES[:, None] - beta[None, :])  # nodes × m
        Pw, Q = P * _GH_WEIGHTS[:, None], 1.0 - P
        if jac:
            Pd = P * Q
            Pdz = Pd * (tau * _GH_NODES)[:, None]
        cost, JJ, Jr = 0.0, np.zeros((2, 2)), np.zeros(2)
        for a in range(0, m, rows):
            b = min(m, a + rows)
            g = G[a:b]
            R = np.where(g, Pw[:, a:b].T @ Q - Yn[a:b] / n, 0.0)
            cost += float(np.einsum("ij,ij->", R, R))
            if jac:
                Em = np.where(g, (Pd[:, a:b] * _GH_WEIGHTS[:, None]).T @ Q - Pw[:, a:b].T @ Pd, 0.0)
                Es = np.where(g, (Pdz[:, a:b] * _GH_WEIGHTS[:, None]).T @ Q - Pw[:, a:b].T @ Pdz, 0.0)
                JJ += [[np.einsum("ij,ij->", Em, Em), np.einsum("ij,ij->", Em, Es)],
                       [0.0, np.einsum("ij,ij->", Es, Es)]]
                Jr += [np.einsum("ij,ij->", Em, R), np.einsum("ij,ij->", Es, R)]
        JJ[1, 0] = JJ[0, 1]
        return cost, JJ, Jr

    if G.shape == (m, m) and int(G.sum()) == m * (m - 1) and not G.diagonal().any():
        # the complete graph: O(m·K²) per call besides one or two m × m × K products
        Yd = np.diagonal(Yn).copy()
        Y2 = float(np.einsum("ij,ij->", Yn, Yn) - Yd @ Yd) / n**2

        last: dict = {}  # Y Qᵀ at the last point: an accepted step's Jacobian call reuses it

        def parts(x: np.ndarray, jac: bool):  # noqa: F811 - the same sums in closed form
            return _complete_parts(x, Yn, Yd, Y2, beta, n, jac, cache=last)

    cost, JJ, Jr = parts(x, True)
    lam = 1e-3
    for _ in range(100):
        step = -np.linalg.solve(JJ + lam * np.diag(np.diag(JJ) + 1e-300), Jr)
        new = np.clip(x + step, lo, hi)
        new_cost = parts(new, False)[0]
        if new_cost <= cost:
            done = np.max(np.abs(new - x)) < 1e-8 or cost - new_cost <= 1e-10 * cost
            x, cost = new, new_cost
            if done:
                break
            JJ, Jr = parts(x, True)[1:]
            lam = max(lam / 10.0, 1e-12)
        else:
            lam *= 10.0
            if lam > 1e12:
                break
    return float(x[0]), float(np.exp(x[1]))


def _complete_parts(x: np.ndarray, Y: np.ndarray, Yd: np.ndarray, Y2: float, beta: np.ndarray, n: int,
                    jac: bool, cache: dict | None = None) -> tuple[float, np.ndarray, np.ndarray]:
    """:func:`fit_ability_normal`'s cost, JᵀJ and Jᵀr on the complete graph without m × m passes.

    Every matrix of the fit is a sum over the K quadrature nodes of rank-one terms,
    E_ij = Σ_a w_a P_ai Q_aj and its derivatives (``docs/intervals.md``), so a sum over the
    pairs i ≠ j of a product of two of them is Σ_ab c_a d_b [(U_a·X_b)(V_a·Y_b) − Σ_i U_ai V_ai
    X_bi Y_bi] (K × K Gram matrices), and its product with the counts needs only
    ``Y @ Qᵀ`` and ``Y @ (PQ)ᵀ`` (one m × m × K product each).  ``cache`` (a dict) keeps ``Y @ Qᵀ`` of the
    last point, which the Jacobian call after an accepted step reuses.  ``Yd`` is the counts' diagonal
    (left out), ``Y2`` = Σ_{i≠j} Y_ij² / n².
    """
    tau = float(np.exp(x[1]))
    P = special.expit(x[0] + tau * _GH_NODES[:, None] - beta[None, :])  # K × m
    arr = {"P": P, "Q": 1.0 - P}
    arr["D"] = P * arr["Q"]
    w, wz = _GH_WEIGHTS, _GH_WEIGHTS * tau * _GH_NODES
    forms = {"E": [(w, "P", "Q")], "m": [(w, "D", "Q"), (-w, "P", "D")], "s": [(wz, "D", "Q"), (-wz, "P", "D")]}
    grams: dict = {}

    def gram(a: str, b: str) -> np.ndarray:
        if (a, b) not in grams:
            grams[(a, b)] = arr[a] @ arr[b].T
            grams[(b, a)] = grams[(a, b)].T
        return grams[(a, b)]

    def inner(A: str, B: str) -> float:
        tot = 0.0
        for c, u, v in forms[A]:
            for d, x_, y_ in forms[B]:
                S = gram(u, x_) * gram(v, y_) - (arr[u] * arr[v]) @ (arr[x_] * arr[y_]).T
                tot += float(c @ S @ d)
        return tot

    key = np.asarray(x, dtype=float).tobytes()
    if cache is not None and cache.get("x") == key:
        YV = {"Q": cache["Q"]}
    else:
        YV = {"Q": Y @ arr["Q"].T}  # m × K
        if cache is not None:
            cache.update(x=key, Q=YV["Q"])
    if jac:
        YV["D"] = Y @ arr["D"].T

    def inner_y(A: str) -> float:
        return sum(float(c @ (np.einsum("ki,ik->k", arr[u], YV[v]) - (arr[u] * arr[v]) @ Yd))
                   for c, u, v in forms[A]) / n

    cost = inner("E", "E") - 2.0 * inner_y("E") + Y2
    if not jac:
        return cost, np.zeros((2, 2)), np.zeros(2)
    JJ = np.array([[inner("m", "m"), inner("m", "s")], [0.0, inner("s", "s")]])
    JJ[1, 0] = JJ[0, 1]
    Jr = np.array([inner("m", "E") - inner_y("m"), inner("s", "E") - inner_y("s")])
    return cost, JJ, Jr



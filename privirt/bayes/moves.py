"""Orbit moves of the 2PNO Gibbs sampler, drawn each iteration between the θ and the (a, b)
steps: a scale move (θ, a) -> (cθ, a/c), a shift move (θ, b) -> (θ + d, b + a d), and per item
a latent scale (Z_·j, a_j, b_j) -> g_j (Z_·j, a_j, b_j).

The first two leave every a_j θ_i − b_j, hence the likelihood and the latent Z, unchanged;
only the priors hold the posterior along these two directions, which the single-site
conditionals cross in small steps when items far outnumber persons (roll calls).  The third
is the parameter-expanded data augmentation of probit regression (Liu & Wu 1999), item by
item.  Each is a generalised Gibbs step (Liu & Wu 1999; Liu & Sabatti 2000): the group
element is drawn from π(g · x) |J_g(x)| H(dg), H the Haar measure (dc/c for a scale), here
by one independence Metropolis–Hastings step on its logarithm with a Laplace proposal
(:func:`log_scale_mh`), the shift exactly (:func:`shift_draw`).  ``docs/gibbs.md`` derives
the densities.

The scalar functions here are plain Python that numba compiles as they are
(:mod:`privirt.bayes.moves_numba`, :mod:`privirt.bayes.twopno_numba`); the CUDA kernels
(``gibbs_2pno.cu``) carry the same functions, line for line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MoveSpec", "move_spec", "log_scale_mh", "shift_draw", "latent_scale", "person_sums",
           "item_sums", "shift_sums", "MOVE_STREAMS"]

#: Philox stream words of the moves' uniforms: counter (iteration, 4, 0, 0) gives the scale
#: step's normal and acceptance uniform, (iteration, 5, 0, 0) the shift step's normal,
#: (iteration, 6, item, 0) the item's latent scale's normal and acceptance uniform.
MOVE_STREAMS = (4, 5, 6)
_NEWTON_STEPS = 60


@dataclass(frozen=True)
class MoveSpec:
    """Which moves run and their constants (fixed during a run).

    ``scale`` / ``shift`` / ``latent``: whether each move runs; ``n_free``: the persons not
    fixed by an anchor (the θ that move); ``power``: n' − k, the power of c in the scale
    move's density with respect to dc/c (the Jacobian of θ -> cθ on n' persons and a -> a/c on
    k items).
    """

    scale: bool
    shift: bool
    latent: bool
    n_free: float
    power: float

    def args(self) -> tuple[bool, bool, float, float]:
        """``(scale, shift, n_free, power)``, as the kernels take them."""
        return self.scale, self.shift, self.n_free, self.power


def move_spec(n: int, k: int, anchors: Any = None, enabled: bool = True,
              flat_a: bool = False) -> MoveSpec:
    """The moves that are valid for n persons, k items and ``anchors``.

    A person fixed at a value v ≠ 0 is moved by neither (cv ≠ v, v + d ≠ v); fixed at 0 it
    stays 0 under the scale move but not under the shift.  Sign anchors (θ_i > 0 / θ_i < 0)
    are kept by every c > 0; the shift keeps them by rejecting a d that breaks one.  Under
    the flat prior on a (``flat_a``) with n' ≤ k free persons the scale move's density is
    not integrable (β = 0, p ≤ 0: :func:`log_scale_mh` returns t = 0 every time), so the
    move is off.
    """
    if anchors is None:
        fixed = np.zeros(0)
    else:
        fixed = np.asarray(anchors.fix)[np.asarray(anchors.con) == 2]
    n_free = n - fixed.size
    proper = not (flat_a and n_free <= k)
    return MoveSpec(scale=bool(enabled) and not np.any(fixed != 0) and n_free > 0 and proper,
                    shift=bool(enabled) and fixed.size == 0 and n_free > 0,
                    latent=bool(enabled), n_free=float(n_free), power=float(n_free - k))


def log_scale_mh(p: float, al: float, be: float, ga: float, de: float, z: float,
                 u: float) -> float:
    """One independence Metropolis–Hastings step from t = 0 for the density ∝ exp(h(t)),
    h(t) = p t − α e^{2t} − β e^{−2t} + γ e^{−t} + δ e^{t} (the log of a scale factor whose
    current value is 1); returns the new t (0 when rejected or when h is not integrable).

    The proposal is N(m, −1/h''(m)) at the mode m, found by Newton's method from a start that
    moves with the orbit (¼ log(β/α), or ½ log(p/(2α)) when β = 0), so that it depends on the
    orbit only; ``z`` is its standard normal and ``u`` the acceptance uniform in (0, 1).
    """
    if not (al > 0.0 and (be > 0.0 or p > 0.0)):
        return 0.0
    t = 0.25 * math.log(be / al) if be > 0.0 else 0.5 * math.log(p / (2.0 * al))
    ok = False
    for _ in range(_NEWTON_STEPS):
        e1 = math.exp(t)
        em1 = 1.0 / e1
        h1 = p - 2.0 * al * e1 * e1 + 2.0 * be * em1 * em1 - ga * em1 + de * e1
        h2 = -4.0 * al * e1 * e1 - 4.0 * be * em1 * em1 + ga * em1 + de * e1
        if not h2 < 0.0:
            return 0.0
        step = min(max(-h1 / h2, -1.0), 1.0)
        t += step
        if abs(step) <= 1e-12 * (1.0 + abs(t)):
            ok = True
            break
    e1 = math.exp(t)
    em1 = 1.0 / e1
    h2 = -4.0 * al * e1 * e1 - 4.0 * be * em1 * em1 + ga * em1 + de * e1
    if not (ok and h2 < 0.0):
        return 0.0
    sd = 1.0 / math.sqrt(-h2)
    t_new = t + sd * z
    e1 = math.exp(t_new)
    em1 = 1.0 / e1
    h_new = p * t_new - al * e1 * e1 - be * em1 * em1 + ga * em1 + de * e1
    # log π(t') − log π(0) + log q(0) − log q(t')
    log_r = h_new - (-al - be + ga + de) + 0.5 * z * z - 0.5 * (t / sd) * (t / sd)
    return t_new if math.log(u) < log_r else 0.0


def shift_draw(c: float, s_t: float, s_aa: float, s_ab: float, s_a: float, plus_min: float,
               minus_max: float, n_free: float, pb_prec: float, pb_lin: float,
               z: float) -> float:
    """The shift d after the scale c: d ~ N(μ, 1/τ) from the N(0, 1) prior on cθ + d and the
    prior on b + (a/c) d, sums as in :func:`privirt.bayes.moves` (Σθ, Σa², Σab, Σa; the
    smallest θ anchored > 0, +inf if none; the largest anchored < 0, −inf if none); ``z`` a
    standard normal.  0 when d would break a sign anchor (the MH step with the unconstrained
    normal as proposal rejects it)."""
    tau = n_free + pb_prec * s_aa / (c * c)
    mu = (-c * s_t - (pb_prec * s_ab - pb_lin * s_a) / c) / tau
    d = mu + z / math.sqrt(tau)
    if not (c * plus_min + d > 0.0 and c * minus_max + d < 0.0):
        return 0.0
    return d


def latent_scale(rss: float, a: float, b: float, n_obs: float, pa_prec: float, pa_lin: float,
                 pb_prec: float, pb_lin: float, z: float, u: float) -> float:
    """The latent scale g_j of one item: (Z_·j, a_j, b_j) -> g (Z_·j, a_j, b_j), density
    ∝ g^{n_j + 2 − 1} exp(−½ g² R_j) π_a(g a_j) π_b(g b_j) with R_j = Σ_i (Z_ij − a_j θ_i +
    b_j)² over the n_j observed cells: :func:`log_scale_mh` with p = n_j + 2,
    α = ½ (R_j + λ_a a_j² + λ_b b_j²), δ = λ_a m_a a_j + λ_b m_b b_j."""
    al = 0.5 * (rss + pa_prec * a * a + pb_prec * b * b)
    return math.exp(log_scale_mh(n_obs + 2.0, al, 0.0, 0.0, pa_lin * a + pb_lin * b, z, u))


def person_sums(theta: np.ndarray, con: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per chain (rows of ``theta``): Σθ and Σθ² over the persons not fixed, the smallest θ
    anchored positive (+inf if none), the largest anchored negative (−inf if none)."""
    free = con != 2
    th = theta[:, free]
    plus, minus = theta[:, con == 1], theta[:, con == -1]
    inf = np.full(theta.shape[0], np.inf)
    return (th.sum(axis=1), (th * th).sum(axis=1),
            plus.min(axis=1) if plus.shape[1] else inf,
            minus.max(axis=1) if minus.shape[1] else -inf)


def item_sums(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per chain: Σa, Σa², Σab."""
    return a.sum(axis=1), (a * a).sum(axis=1), (a * b).sum(axis=1)


def shift_sums(c: Any, d: Any, g: Any, s_tz: Any, s_z: Any, s_tt: Any, s_t: Any,
               s_1: Any) -> tuple:
    """The (a, b) step's sums after θ -> cθ + d and Z_·j -> g_j Z_·j: Σθ'z' = g(cΣθz + dΣz),
    Σz' = gΣz, Σ'θ'² = c²Σ'θ² + 2cdΣ'θ + d²Σ'1, Σ'θ' = cΣ'θ + dΣ'1 (the same expressions in
    every engine)."""
    return (g * (c * s_tz + d * s_z), g * s_z, c * c * s_tt + 2.0 * c * d * s_t + d * d * s_1,
            c * s_t + d * s_1)

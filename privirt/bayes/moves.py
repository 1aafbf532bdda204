"""Orbit moves of the 2PNO Gibbs sampler: a scale move (θ, a) -> (cθ, a/c) and a shift move
(θ, b) -> (θ + d, b + a d), drawn each iteration between the θ and the (a, b) steps.

Both leave every a_j θ_i − b_j, hence the likelihood and the latent Z, unchanged; only the
priors hold the posterior along these two directions, which the single-site conditionals
cross in small steps when items far outnumber persons (roll calls).  The generalised Gibbs
step of Liu & Wu (1999) / Liu & Sabatti (2000) draws the group element from
π(g · x) |J_g| H(dg) — here c from c^{n'−k−1} π(cθ) π(a/c) (Haar measure dc/c, Jacobian
c^{n'} c^{−k}) by one independence Metropolis–Hastings step on log c with a Laplace proposal,
and d from π(θ + d) π(b + a d), a normal, exactly (a sign anchor turns it into a
Metropolis–Hastings step that rejects a d which breaks it).  ``docs/gibbs.md`` derives both.

:func:`orbit_draw` is scalar code that numba compiles as it is (``twopno_numba``); the CUDA
kernels (``gibbs_2pno.cu``) carry the same function, line for line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MoveSpec", "move_spec", "orbit_draw", "person_sums", "item_sums", "shift_sums",
           "MOVE_STREAMS"]

#: Philox stream words of the moves' uniforms: counter (iteration, 4, 0, 0) gives the scale
#: step's normal and acceptance uniform, (iteration, 5, 0, 0) the shift step's normal.
MOVE_STREAMS = (4, 5)
_NEWTON_STEPS = 60


@dataclass(frozen=True)
class MoveSpec:
    """Which moves run and their constants (fixed during a run).

    ``scale`` / ``shift``: whether each move runs; ``n_free``: the persons not fixed by an
    anchor (the θ that move); ``power``: n' − k, the power of c in the scale move's density
    with respect to dc/c (the Jacobian of θ -> cθ on n' persons and a -> a/c on k items).
    """

    scale: bool
    shift: bool
    n_free: float
    power: float

    def args(self) -> tuple[bool, bool, float, float]:
        return self.scale, self.shift, self.n_free, self.power


def move_spec(n: int, k: int, anchors: Any = None, enabled: bool = True) -> MoveSpec:
    """The moves that are valid for n persons, k items and ``anchors``.

    A person fixed at a value v ≠ 0 is moved by neither (cv ≠ v, v + d ≠ v); fixed at 0 it
    stays 0 under the scale move but not under the shift.  Sign anchors (θ_i > 0 / θ_i < 0)
    are kept by every c > 0; the shift keeps them by rejecting a d that breaks one.  Whether
    the scale move's density is proper (flat prior on a with n' ≤ k is not) is decided per
    iteration by :func:`orbit_draw`.
    """
    if anchors is None:
        fixed = np.zeros(0)
    else:
        fixed = np.asarray(anchors.fix)[np.asarray(anchors.con) == 2]
    n_free = n - fixed.size
    return MoveSpec(scale=bool(enabled) and not np.any(fixed != 0) and n_free > 0,
                    shift=bool(enabled) and fixed.size == 0 and n_free > 0,
                    n_free=float(n_free), power=float(n_free - k))


def orbit_draw(s_t: float, s_tt: float, plus_min: float, minus_max: float, s_a: float,
               s_aa: float, s_ab: float, scale: bool, shift: bool, n_free: float,
               power: float, pa_prec: float, pa_lin: float, pb_prec: float, pb_lin: float,
               z_scale: float, u_accept: float, z_shift: float) -> tuple[float, float]:
    """The move (c, d) of one chain: θ -> cθ + d, a -> a/c, b -> b + (a/c) d.

    Sums over the persons that are not fixed: ``s_t`` = Σθ, ``s_tt`` = Σθ²; ``plus_min`` the
    smallest θ anchored to θ > 0 (+inf if none), ``minus_max`` the largest anchored to θ < 0
    (−inf if none); over the items: ``s_a`` = Σa, ``s_aa`` = Σa², ``s_ab`` = Σab.  Priors as
    precision and precision × mean (0 for a flat prior).  Random inputs: two standard normals
    and a uniform in (0, 1).  (1, 0) when a move does not run or is rejected.
    """
    c = 1.0
    al = 0.5 * s_tt
    be = 0.5 * pa_prec * s_aa
    ga = pa_lin * s_a
    if scale and al > 0.0 and (be > 0.0 or power > 0.0):
        # the mode of g(t) = power·t − α e^{2t} − β e^{−2t} + γ e^{−t} by Newton's method from
        # a start that moves with the orbit (so the proposal depends on the orbit only)
        t = 0.25 * math.log(be / al) if be > 0.0 else 0.5 * math.log(power / (2.0 * al))
        ok = False
        g2 = -1.0
        for _ in range(_NEWTON_STEPS):
            e2 = math.exp(2.0 * t)
            em2 = math.exp(-2.0 * t)
            em1 = math.exp(-t)
            g1 = power - 2.0 * al * e2 + 2.0 * be * em2 - ga * em1
            g2 = -4.0 * al * e2 - 4.0 * be * em2 + ga * em1
            if not g2 < 0.0:
                break
            step = min(max(-g1 / g2, -1.0), 1.0)
            t += step
            if abs(step) <= 1e-12 * (1.0 + abs(t)):
                ok = True
                break
        if ok:
            g2 = -4.0 * al * math.exp(2.0 * t) - 4.0 * be * math.exp(-2.0 * t) + ga * math.exp(-t)
        if ok and g2 < 0.0:
            sd = 1.0 / math.sqrt(-g2)
            t_new = t + sd * z_scale
            # independence MH: log π(t') − log π(0) + log q(0) − log q(t')
            log_new = (power * t_new - al * math.exp(2.0 * t_new) - be * math.exp(-2.0 * t_new)
                       + ga * math.exp(-t_new))
            log_r = (log_new - (-al - be + ga) + 0.5 * z_scale * z_scale
                     - 0.5 * (t / sd) * (t / sd))
            if math.log(u_accept) < log_r:
                c = math.exp(t_new)
    d = 0.0
    if shift:
        # θ' = cθ, a' = a / c: d ~ N(μ, 1/τ) from the N(0, 1) prior on θ' + d and the prior
        # on b + a' d
        tau = n_free + pb_prec * s_aa / (c * c)
        mu = (-c * s_t - (pb_prec * s_ab - pb_lin * s_a) / c) / tau
        d = mu + z_shift / math.sqrt(tau)
        if not (c * plus_min + d > 0.0 and c * minus_max + d < 0.0):
            d = 0.0  # it would break a sign anchor: rejected
    return c, d


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


def item_sums(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per chain: Σa, Σa², Σab."""
    return a.sum(axis=1), (a * a).sum(axis=1), (a * b).sum(axis=1)


def shift_sums(c: Any, d: Any, s_tz: Any, s_z: Any, s_tt: Any, s_t: Any, s_1: Any) -> tuple:
    """The (a, b) step's sums after θ -> cθ + d: Σθ'z = cΣθz + dΣz, Σ'θ'² = c²Σ'θ² +
    2cdΣ'θ + d²Σ'1, Σ'θ' = cΣ'θ + dΣ'1 (the same expressions in every engine)."""
    return c * s_tz + d * s_z, c * c * s_tt + 2.0 * c * d * s_t + d * d * s_1, c * s_t + d * s_1

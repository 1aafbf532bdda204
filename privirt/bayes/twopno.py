"""2PNO model maths for the Gibbs sampler: argument checks, starting values, the exact
(a, b) draw and one CPU iteration (state in, state out).

``P(y_ij = 1) = Φ(a_j θ_i − b_j)``, θ_i ~ N(0, 1), a_j > 0 (``slopes="positive"``) or a_j
of either sign (``slopes="free"``, identified by anchors on persons or a reflection of whole
chains), with Albert's (1992) latent Z_ij; the conditionals are derived in ``docs/gibbs.md``.  :func:`cpu_iteration` is the one
place a faster CPU kernel is swapped in.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
from scipy import special

from .truncnorm import std_truncnorm_lower, std_truncnorm_upper
from .._checks import as_number, check_location, check_locations, check_variance
from ..data.responses import Responses
from ..exceptions import user_stacklevel
from . import moves as _moves
from ..data._labels import name_items
from .slopes import FIXED, Anchors

__all__ = ["GibbsState", "CpuData", "GeneratorDraws", "cpu_iteration", "draw_items", "check_priors",
           "check_init", "default_init", "warn_improper"]



# ---------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------
def check_priors(priors: Mapping[str, Any] | None) -> dict[str, tuple[float, float] | None]:
    """``{"a": (mean, var) | None, "b": (mean, var) | None}``; None is the flat prior."""
    out: dict[str, tuple[float, float] | None] = {"a": None, "b": None}
    if priors is None:
        return out
    if not isinstance(priors, Mapping):
        raise ValueError('priors must be a dict such as {"b": (0.0, 4.0)} or None')
    unknown = set(priors) - {"a", "b"}
    if unknown:
        raise ValueError(f"unknown prior key(s) {sorted(unknown)}; use 'a' and/or 'b'")
    for key, spec in priors.items():
        if spec is None:
            continue
        try:
            mean, var = (as_number(v) for v in spec)
        except (TypeError, ValueError):
            raise ValueError(
                f"priors[{key!r}] must be a (mean, variance) pair of numbers, got {spec!r}"
            ) from None
        if not (math.isfinite(mean) and math.isfinite(var) and var > 0):
            raise ValueError(
                f"priors[{key!r}] needs a finite mean and a finite positive variance, got {spec!r}"
            )
        check_location(f"the mean of priors[{key!r}]", mean)
        check_variance(f"the variance of priors[{key!r}]", var)
        out[key] = (mean, var)
    return out


def check_item_precision(resp: Responses, priors: dict, where: str = "",
                         anchors: Anchors | None = None) -> None:
    """Refuse items whose (a, b) conditional has a singular precision under flat priors.

    With x_i = (θ_i, −1) over the n_j persons who answered item j, det P = n_j Σ'θ_i² −
    (Σ'θ_i)² = n_j Σ'(θ_i − θ̄)², zero when every such θ_i is the same in every draw: n_j = 1,
    or every person who answered it is fixed (``anchors``) at one value.  A proper prior on a
    or on b makes P positive definite, so only the flat-flat case is refused.
    """
    if priors["a"] is not None or priors["b"] is not None:
        return
    obs = resp.codes >= 0
    n_obs = obs.sum(axis=0)
    few = n_obs == 1
    if few.any():
        raise ValueError(
            f"{where}item(s) {name_items(resp.items, few)} were answered by a single person: "
            "under the flat priors on a and b their conditional has a singular precision "
            "matrix and no posterior draw exists; drop them or pass a proper prior, e.g. "
            'priors={"b": (0.0, 4.0)}'
        )
    if anchors is None or not np.any(anchors.con == FIXED):
        return
    fixed = anchors.con == FIXED
    # an item answered only by persons fixed at one value: every draw has the same θ's there
    free_answers = (obs & ~fixed[:, None]).sum(axis=0)
    vals = np.where(obs & fixed[:, None], anchors.fix[:, None], np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (all-NaN columns: items nobody fixed answered)
        one_value = np.nanmax(vals, axis=0) == np.nanmin(vals, axis=0)
    same = (free_answers == 0) & (n_obs > 0) & one_value
    if same.any():
        raise ValueError(
            f"{where}item(s) {name_items(resp.items, same)} were answered only by persons fixed at one "
            "value by anchors= (CLI: --anchor): under the flat priors on a and b their conditional has a "
            "singular precision matrix and no posterior draw exists; fix those persons at different "
            'values, drop the items, or pass a proper prior, e.g. priors={"b": (0.0, 4.0)}'
        )


def warn_improper(resp: Responses, priors: dict, where: str = "", anchors: Anchors | None = None) -> None:
    """Refuse singular items; warn about items with an improper posterior (flat prior on b)."""
    check_item_precision(resp, priors, where, anchors)
    if priors["b"] is not None:
        return
    obs = resp.codes >= 0
    correct = (resp.codes == 1).sum(axis=0)
    n_obs = obs.sum(axis=0)
    extreme = (correct == 0) | (correct == n_obs)
    if extreme.any():
        warnings.warn(
            f"{where}item(s) {name_items(resp.items, extreme)} were answered all correct or all "
            "incorrect: under the flat prior on b their posterior is improper and b drifts without bound; drop "
            'them or pass priors={"b": (0.0, 4.0)}',
            UserWarning,
            stacklevel=user_stacklevel(),
        )


def default_init(codes: np.ndarray, rng: np.random.Generator, jitter: bool) -> dict[str, np.ndarray]:
    """Data-based starting values: a = 1, b = −√2 Φ⁻¹(p̂_j) from the item p-values, θ the
    standardised Φ⁻¹ of each person's proportion correct (among the items answered)."""
    obs = codes >= 0
    n_obs_item = np.maximum(obs.sum(axis=0), 1)
    p_item = np.clip((codes == 1).sum(axis=0) / n_obs_item, 0.02, 0.98)
    # with a = 1 and θ ~ N(0, 1): P(y = 1) = Φ(−b / √2)
    b = -np.sqrt(2.0) * special.ndtri(p_item)
    n_obs_person = np.maximum(obs.sum(axis=1), 1)
    p_person = np.clip((codes == 1).sum(axis=1) / n_obs_person, 0.02, 0.98)
    theta = special.ndtri(p_person)
    theta = (theta - theta.mean()) / (theta.std() if theta.std() > 0 else 1.0)
    a = np.ones(codes.shape[1])
    if jitter:  # over-dispersed starts so that R-hat can see non-convergence
        a = a * np.exp(rng.normal(0.0, 0.3, a.shape))
        b = b + rng.normal(0.0, 0.5, b.shape)
        theta = theta + rng.normal(0.0, 0.5, theta.shape)
    return {"theta": theta, "a": a, "b": b}


def check_init(init: Mapping[str, Any] | None, n: int, k: int,
               free: bool = False) -> dict[str, np.ndarray]:
    """User starting values ``{"theta": (n,), "a": (k,), "b": (k,)}`` (any subset), each finite
    with |value| <= 1e6 (as prior means and anchors); a must be positive unless ``free``
    (``slopes="free"``)."""
    if init is None:
        return {}
    if not isinstance(init, Mapping):
        raise ValueError('init must be a dict with keys among "theta", "a", "b" or None')
    unknown = set(init) - {"theta", "a", "b"}
    if unknown:
        raise ValueError(f"unknown init key(s) {sorted(unknown)}; use 'theta', 'a', 'b'")
    out = {}
    for key, size in (("theta", n), ("a", k), ("b", k)):
        if key not in init or init[key] is None:
            continue
        try:
            v = np.asarray(init[key], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"init[{key!r}] must be a number or an array of numbers, got {init[key]!r}"
            ) from None
        raw = v
        if v.ndim == 0:
            v = np.full(size, float(v))
        if v.shape != (size,):
            raise ValueError(f"init[{key!r}] must have length {size}, got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"init[{key!r}] must be finite")
        check_locations(f"init[{key!r}]", raw)  # |value| <= 1e6, as for prior means and anchors
        if key == "a" and not free and np.any(v <= 0):
            raise ValueError(
                "init['a'] must be positive (slopes=\"positive\" restricts a > 0; "
                'pass slopes="free" for slopes of either sign)'
            )
        out[key] = v
    return out


# ---------------------------------------------------------------------------------------
# the (a, b) step: exact draw from a bivariate normal restricted to a > 0
# ---------------------------------------------------------------------------------------
def draw_items(
    p_aa: np.ndarray, p_ab: np.ndarray, p_bb: np.ndarray, r_a: np.ndarray, r_b: np.ndarray,
    v: np.ndarray, e: np.ndarray, free: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw (a, b) ~ N(P⁻¹ r, P⁻¹) restricted to a > 0 (unrestricted when ``free``), given
    uniforms v ∈ (0, 1], normals e.

    The restricted density factorises as p(a) p(b | a) with p(a) the N(m_a, (P⁻¹)_aa)
    marginal truncated to a > 0 and b | a ~ N(m_b − (P_ab / P_bb)(a − m_a), 1 / P_bb):
    an exact joint draw, no rejection.  With ``free`` the marginal of a is not truncated
    (a = m_a − sd_a Φ⁻¹(v), the same inverse-CDF formula with the bound at −∞).
    """
    return items_from_draws(p_aa, p_ab, p_bb, r_a, r_b,
                            lambda lower: std_truncnorm_lower(lower, v), lambda: e, free=free,
                            a_free=lambda: std_truncnorm_lower(np.full(np.shape(v), -np.inf), v))


def items_from_draws(
    p_aa: np.ndarray, p_ab: np.ndarray, p_bb: np.ndarray, r_a: np.ndarray, r_b: np.ndarray,
    tn_lower: Callable[[np.ndarray], np.ndarray], normals: Callable[[], np.ndarray],
    free: bool = False, a_free: Callable[[], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`draw_items` with its random inputs drawn by ``tn_lower(lower)`` (X ~ N(0, 1) |
    X > lower, elementwise) and then ``normals()`` (standard normals), in that order; with
    ``free`` the slopes' normals come from ``a_free()`` instead of ``tn_lower``."""
    det = p_aa * p_bb - p_ab * p_ab
    m_a = (p_bb * r_a - p_ab * r_b) / det
    m_b = (p_aa * r_b - p_ab * r_a) / det
    sd_a = np.sqrt(p_bb / det)  # (P⁻¹)_aa = P_bb / det
    if free:  # untruncated: the same inverse-CDF draw with the bound at −∞
        a = m_a + sd_a * a_free()
    else:
        a = m_a + sd_a * tn_lower(-m_a / sd_a)
        a = np.maximum(a, np.finfo(float).tiny)  # a = 0 exactly has probability ≤ 2⁻⁵³
    b = m_b - (p_ab / p_bb) * (a - m_a) + normals() / np.sqrt(p_bb)
    return a, b


# ---------------------------------------------------------------------------------------
# one CPU iteration
# ---------------------------------------------------------------------------------------
@dataclass
class GibbsState:
    """The sampled parameters of B batch elements: θ (B, n), a (B, k), b (B, k)."""

    theta: np.ndarray
    a: np.ndarray
    b: np.ndarray


#: cells per block of :func:`cpu_iteration`: the working set stays in the CPU cache
CHUNK_CELLS = 1 << 15


@dataclass
class CpuData:
    """What a CPU iteration reads besides the state (fixed during a run).

    ``S`` is +1 / −1 / 0 for correct / incorrect / missing, (D or B, n, k); ``M`` the
    0/1 observed mask of the same shape or None when nothing is missing; ``n_obs_item``
    (B, k) the number of responses per item; the prior constants are precision and
    precision × mean (0 for a flat prior); ``chunks`` the blocks (b0, b1, r0, r1) of
    batch elements × person rows; ``Z`` optionally receives the latent draws (tests);
    ``free`` leaves a unrestricted; ``anchors`` constrains or fixes some θ_i; ``moves`` says
    which orbit moves (:mod:`privirt.bayes.moves`) run between the θ and the (a, b) steps.
    """

    S: np.ndarray
    M: np.ndarray | None
    n_obs_item: np.ndarray
    pa_prec: float
    pa_lin: float
    pb_prec: float
    pb_lin: float
    chunks: list[tuple[int, int, int, int]]
    buf: np.ndarray
    Z: np.ndarray | None = None
    free: bool = False
    anchors: Anchors | None = None
    moves: _moves.MoveSpec | None = None

    @classmethod
    def build(cls, codes: np.ndarray, n_chains: int, priors: Mapping[str, Any],
              keep_z: bool = False, chunk_cells: int | None = None, *, free: bool = False,
              anchors: Anchors | None = None, moves: bool = True) -> CpuData:
        """The data of B = D · ``n_chains`` chains on ``codes`` (D, n, k) (chain bb reads data
        set bb // n_chains), with the prior constants of ``priors`` (as :func:`check_priors`);
        ``moves=False`` turns the orbit moves off."""
        D, n, k = codes.shape
        C, B = int(n_chains), D * int(n_chains)

        def per_batch(arr: np.ndarray) -> np.ndarray:  # (D, ...) -> (B, ...)
            return arr if C == 1 else np.repeat(arr, C, axis=0)

        pa, pb = priors.get("a"), priors.get("b")
        pa_prec, pa_lin = (1.0 / pa[1], pa[0] / pa[1]) if pa else (0.0, 0.0)
        pb_prec, pb_lin = (1.0 / pb[1], pb[0] / pb[1]) if pb else (0.0, 0.0)
        # (D, n, k) broadcasts against (B, n, k) when D = 1 (chains share one data set) or
        # C = 1 (B = D); only D > 1 with C > 1 needs the data repeated per chain.
        sign = np.where(codes == 1, 1.0, np.where(codes == 0, -1.0, 0.0))  # (D, n, k)
        S = per_batch(sign) if (D > 1 and C > 1) else sign
        if (codes < 0).any():
            mask = (codes >= 0).astype(np.float64)
            M = per_batch(mask) if (D > 1 and C > 1) else mask
            n_obs_item = per_batch(mask.sum(axis=1))  # (B, k)
        else:
            M = None
            n_obs_item = np.full((B, k), float(n))
        chunks, buf = plan_chunks(B, n, k, chunk_cells or CHUNK_CELLS)
        return cls(S=S, M=M, n_obs_item=n_obs_item, pa_prec=pa_prec, pa_lin=pa_lin,
                   pb_prec=pb_prec, pb_lin=pb_lin, chunks=chunks, buf=buf,
                   Z=np.zeros((B, n, k)) if keep_z else None, free=bool(free), anchors=anchors,
                   moves=_moves.move_spec(n, k, anchors, moves, flat_a=not pa))


class GeneratorDraws:
    """The random inputs of :func:`cpu_iteration` from numpy generators: per chain, ``rng_z``
    for the uniforms of the Z step and ``rng_e`` for everything else (the ``"numpy"`` engine
    of :func:`privirt.gibbs_2pno`).  The fused engine's counter-based twin is
    :class:`privirt.bayes.twopno_fused.PhiloxDraws`."""

    def __init__(self, rng_z: list[np.random.Generator], rng_e: list[np.random.Generator]):
        self.rng_z, self.rng_e = rng_z, rng_e

    def z_upper(self, b0: int, b1: int, r0: int, r1: int, t: np.ndarray,
                out: np.ndarray) -> np.ndarray:
        """Y ~ N(0, 1) | Y < t for chains b0:b1, persons r0:r1 (into ``out``, shaped as t)."""
        for c in range(b1 - b0):
            self.rng_z[b0 + c].random(out=out[c])
        np.subtract(1.0, out, out=out)  # in (0, 1]
        return std_truncnorm_upper(t, out, out=out)

    def theta_normals(self, b0: int, b1: int, r0: int, r1: int) -> np.ndarray:
        """Standard normals (b1 − b0, r1 − r0) of the θ step."""
        return np.stack([self.rng_e[b0 + c].standard_normal(r1 - r0) for c in range(b1 - b0)])

    def a_lower(self, lower: np.ndarray) -> np.ndarray:
        """X ~ N(0, 1) | X > lower, (B, k): the a step."""
        k = lower.shape[1]
        return std_truncnorm_lower(lower, np.stack([1.0 - g.random(k) for g in self.rng_e]))

    def b_normals(self, k: int) -> np.ndarray:
        """Standard normals (B, k) of the b step."""
        return np.stack([g.standard_normal(k) for g in self.rng_e])

    def a_free(self, k: int) -> np.ndarray:
        """Standard normals (B, k) of the untruncated a step (slopes="free"): the a step's
        uniforms through the same inverse CDF with the bound at −∞."""
        return std_truncnorm_lower(np.full((len(self.rng_e), k), -np.inf),
                                   np.stack([1.0 - g.random(k) for g in self.rng_e]))

    def move_normals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per chain: the scale move's normal and acceptance uniform (in (0, 1]), the shift's
        normal."""
        z = np.stack([g.standard_normal(2) for g in self.rng_e])
        u = np.array([1.0 - g.random() for g in self.rng_e])
        return z[:, 0], u, z[:, 1]

    def latent_normals(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(B, k): the items' latent scales' normals and acceptance uniforms."""
        z = np.stack([g.standard_normal(k) for g in self.rng_e])
        return z, np.stack([1.0 - g.random(k) for g in self.rng_e])

    @staticmethod
    def theta_lower(b0: int, b1: int, r0: int, r1: int, side: np.ndarray, lower: np.ndarray,
                    e: np.ndarray) -> np.ndarray:
        """X ~ N(0, 1) | X > lower for the anchored persons ``side`` (columns of this block)
        from the θ step's own normals ``e``: the uniform Φ(−e), transformed."""
        v = np.maximum(special.ndtr(-e[:, side]), np.finfo(float).tiny)
        return std_truncnorm_lower(lower, v)


def plan_chunks(B: int, n: int, k: int, cap: int = CHUNK_CELLS) -> tuple[list, np.ndarray]:
    """Blocks (b0, b1, r0, r1) of batch elements × person rows, each ≤ ``cap`` cells, and a
    scratch buffer for them.

    Each chain's rows are visited in order with boundaries that depend only on (n, k), so
    its random streams do not depend on the batch it runs in.
    """
    if n * k >= cap:
        rows = max(1, cap // k)
        chunks = [(b, b + 1, r, min(r + rows, n)) for b in range(B) for r in range(0, n, rows)]
    else:
        g = max(1, cap // (n * k))
        chunks = [(b, min(b + g, B), 0, n) for b in range(0, B, g)]
    size = max((b1 - b0) * (r1 - r0) * k for b0, b1, r0, r1 in chunks)
    return chunks, np.empty((3, size))


def cpu_iteration(state: GibbsState, data: CpuData, draws: Any) -> GibbsState:
    """One Gibbs iteration of every batch element, streamed over cache-sized blocks: the one
    numpy iteration of the 2PNO sampler (the numba and CUDA kernels compute the same steps).

    Per block: Z (truncated normals, ``draws.z_upper``), then θ for those persons (their
    conditional uses only their own row of Z; normals ``draws.theta_normals``), then the
    block's share of the item sums Σθ_i Z_ij and Σ Z_ij.  The (a, b) step follows once all
    blocks are done (``draws.a_lower``, then ``draws.b_normals``).  ``draws`` is a
    :class:`GeneratorDraws` (numpy generators) or the fused engine's counter-based
    :class:`~privirt.bayes.twopno_fused.PhiloxDraws`.
    """
    theta, a, b, S, M = state.theta, state.a, state.b, data.S, data.M
    B, n = theta.shape
    k = a.shape[1]
    theta_new = np.empty((B, n))
    s_tz = np.zeros((B, k))
    s_z = np.zeros((B, k))
    rss = np.zeros((B, k))
    if M is None:
        prec_full = 1.0 + (a * a).sum(axis=1)  # (B,)
        ab_full = (a * b).sum(axis=1)
    else:
        a2, ab = (a * a)[:, :, None], (a * b)[:, :, None]
        s_tt = np.zeros((B, k))
        s_t = np.zeros((B, k))
    for b0, b1, r0, r1 in data.chunks:
        g, rows = b1 - b0, r1 - r0
        cells = g * rows * k
        mu = data.buf[0, :cells].reshape(g, rows, k)
        V = data.buf[1, :cells].reshape(g, rows, k)
        t = data.buf[2, :cells].reshape(g, rows, k)
        np.multiply(theta[b0:b1, r0:r1, None], a[b0:b1, None, :], out=mu)
        mu -= b[b0:b1, None, :]
        Sc = S[:, r0:r1] if S.shape[0] == 1 else S[b0:b1, r0:r1]
        # With s = ±1 (correct / incorrect): Z = μ − s·Y, Y ~ N(0,1) | Y < s·μ, so that
        # Z > 0 when s = 1 and Z < 0 when s = −1.  Missing cells: s = 0, masked below.
        np.multiply(Sc, mu, out=t)
        Y = draws.z_upper(b0, b1, r0, r1, t, V)
        Y *= Sc
        Z = np.subtract(mu, Y, out=mu)
        if M is not None:
            Mc = M[:, r0:r1] if M.shape[0] == 1 else M[b0:b1, r0:r1]
            Z *= Mc
        if data.Z is not None:
            data.Z[b0:b1, r0:r1] = Z
        # θ_i | Z, a, b  (sums over the items person i answered)
        za = np.matmul(Z, a[b0:b1, :, None])[:, :, 0]
        if M is None:
            prec = prec_full[b0:b1, None]
            lin = za + ab_full[b0:b1, None]
        else:
            prec = 1.0 + np.matmul(Mc, a2[b0:b1])[:, :, 0]
            lin = za + np.matmul(Mc, ab[b0:b1])[:, :, 0]
        e = draws.theta_normals(b0, b1, r0, r1)
        th = lin / prec + e / np.sqrt(prec)
        if data.anchors is not None:
            data.anchors.constrain(
                th, lin / prec, np.broadcast_to(prec, th.shape), r0, r1,
                lambda side, lower: draws.theta_lower(b0, b1, r0, r1, side, lower, e))
        theta_new[b0:b1, r0:r1] = th
        # this block's share of the item sums and of Σ (Z − aθ + b)² (the latent move's)
        R = data.buf[1, :cells].reshape(g, rows, k)
        np.multiply(th[:, :, None], a[b0:b1, None, :], out=R)
        R -= b[b0:b1, None, :]
        np.subtract(Z, R, out=R)
        if M is not None:
            R *= Mc
        rss[b0:b1] += np.einsum("gik,gik->gk", R, R)
        s_tz[b0:b1] += np.matmul(th[:, None, :], Z)[:, 0, :]
        s_z[b0:b1] += Z.sum(axis=1)
        if M is not None:
            s_tt[b0:b1] += np.matmul((th * th)[:, None, :], Mc)[:, 0, :]
            s_t[b0:b1] += np.matmul(th[:, None, :], Mc)[:, 0, :]
    if M is None:
        s_tt = (theta_new * theta_new).sum(axis=1)[:, None]
        s_t = theta_new.sum(axis=1)[:, None]
    s_1 = data.n_obs_item
    mv = data.moves
    if mv is not None and (mv.scale or mv.shift or mv.latent):
        c, d, g = orbit_moves(theta_new, a, b, data, draws, rss)
        theta_new = c[:, None] * theta_new + d[:, None]
        s_tz, s_z, s_tt, s_t = _moves.shift_sums(c[:, None], d[:, None], g, s_tz, s_z, s_tt,
                                                 s_t, s_1)
    # (a_j, b_j) | Z, θ:  x_i = (θ_i, −1),  P = [[Σθ², −Σθ], [−Σθ, Σ1]] + prior,
    # r = [Σθ Z, −Σ Z] + prior precision × prior mean
    p_aa = s_tt + data.pa_prec
    p_ab = -s_t
    p_bb = s_1 + data.pb_prec
    r_a = s_tz + data.pa_lin
    r_b = -s_z + data.pb_lin
    a_new, b_new = items_from_draws(p_aa, p_ab, p_bb, r_a, r_b, draws.a_lower,
                                    lambda: draws.b_normals(k), free=data.free,
                                    a_free=lambda: draws.a_free(k))
    return GibbsState(theta_new, a_new, b_new)


def orbit_moves(theta: np.ndarray, a: np.ndarray, b: np.ndarray, data: CpuData, draws: Any,
                rss: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The orbit moves per chain, (c, d) (B,) and the items' latent scales g (B, k)
    (:mod:`privirt.bayes.moves`), from the new θ, the previous (a, b) and R_j = Σ_i (Z_ij −
    a_j θ_i + b_j)² ``rss`` (B, k), with ``draws.move_normals()`` and
    ``draws.latent_normals(k)``."""
    mv = data.moves
    B, k = a.shape
    c, d, g = np.ones(B), np.zeros(B), np.ones((B, k))
    con = data.anchors.con if data.anchors is not None else np.zeros(theta.shape[1], np.int8)
    s_t, s_tt, plus_min, minus_max = _moves.person_sums(theta, con)
    s_a, s_aa, s_ab = _moves.item_sums(a, b)
    z1, u1, z2 = draws.move_normals()
    for bb in range(B):
        if mv.scale:
            c[bb] = math.exp(_moves.log_scale_mh(mv.power, 0.5 * s_tt[bb],
                                                 0.5 * data.pa_prec * s_aa[bb],
                                                 data.pa_lin * s_a[bb], 0.0, z1[bb], u1[bb]))
        if mv.shift:
            d[bb] = _moves.shift_draw(c[bb], s_t[bb], s_aa[bb], s_ab[bb], s_a[bb],
                                      plus_min[bb], minus_max[bb], mv.n_free, data.pb_prec,
                                      data.pb_lin, z2[bb])
    if mv.latent:
        zl, ul = draws.latent_normals(k)
        a1 = a / c[:, None]
        b1 = b + a1 * d[:, None]
        for bb in range(B):
            for j in range(k):
                g[bb, j] = _moves.latent_scale(
                    float(rss[bb, j]), float(a1[bb, j]), float(b1[bb, j]),
                    float(data.n_obs_item[bb, j]), data.pa_prec, data.pa_lin, data.pb_prec,
                    data.pb_lin, float(zl[bb, j]), float(ul[bb, j]))
    return c, d, g

"""The private 2PNO release and its post-processing for data declared missing completely at
random (``missing="mcar"``, ``docs/private_2pl.md`` §6).

A row is x ∈ {0, 1, ∗}^m (∗ missing).  Released, each with its own discrete Gaussian noise:

* s_i = #{l : x_li = 1} (item totals) and a_i = #{l : x_li ≠ ∗} (answered counts);
* D_ij = #{l : x_li, x_lj ≠ ∗, x_li ≠ x_lj} (disagreements among those who answered both) and
  C_ij = #{l : x_li, x_lj ≠ ∗} (co-answered counts), i < j.

Sensitivities under replacing one person's row (§6, brute-forced in the tests): m, m,
⌊m²/3⌋ and m(m − 1)/2.  The fit uses the proportions s_i/a_i and D_ij/C_ij with per-coordinate
n (the noisy denominators shrunk against their noise, then clipped) and each ratio's noise
variance by the delta method; the bootstrap simulates the missingness (item i answered
independently with the rate of the shrunk answered counts).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from ..._threads import one_blas_thread
from ...data.responses import Responses
from ...stats.counts import local_pairwise_counts
from ..accounting import NEIGHBOURING_RELATION
from ..sensitivity import Sensitivity, _sqrt_up, bound_text
from ..statement import DOMAIN_ANY
from .fit import SIM_PERSONS
from .measurement import TOTALS_SHARE, PairsGaussian
from .orthant import upper_orthant
from .statistics import pair_index

__all__ = ["mcar_statistics", "mcar_sensitivity", "mcar_shares", "mcar_design", "McarPairsGaussian",
           "ratio_inputs", "shrink_denominators", "shrink_answered", "shrink_co_answered", "co_answered_parts",
           "shrunk_ratio_inputs",
           "simulate_mcar_statistics",
           "MIN_DENOMINATOR", "SHRINK_DENOMINATORS"]

#: Denominators (answered and co-answered counts) are clipped into [MIN_DENOMINATOR, n]
#: before the proportions are formed: noise can make a small count zero or negative.
MIN_DENOMINATOR: float = 2.0
#: Whether the noisy denominators are shrunk against their noise before the ratios are formed
#: (:func:`shrink_denominators`; ``docs/private_2pl.md`` §6.3 step 1).
SHRINK_DENOMINATORS: bool = True


def mcar_statistics(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(s (m,), a (m,), D (P,), C (P,)), int64, of a persons × items matrix with codes 1
    (correct), 0 (wrong) and −1 (missing).  Exact, from the package's pairwise counts
    (:func:`privirt.stats.counts.local_pairwise_counts`): with Y_ij the persons with i right
    and j wrong and B the co-response counts, D_ij = Y_ij + Y_ji and C_ij = B_ij."""
    X = np.asarray(codes, dtype=np.int8)
    n, m = X.shape
    Y, B = local_pairwise_counts(Responses(X, pd.RangeIndex(n), pd.RangeIndex(m)), device="cpu", private=True)
    i, j = pair_index(m)
    s = np.count_nonzero(X == 1, axis=0).astype(np.int64)
    a = np.count_nonzero(X >= 0, axis=0).astype(np.int64)
    return (s, a, (Y[i, j] + Y[j, i]).astype(np.int64),
            B[i, j].astype(np.int64))


def mcar_sensitivity(n_items: int, part: str) -> Sensitivity:
    """Replace-one-person sensitivity of a part of the MCAR release (``docs/private_2pl.md`` §6):
    ``"totals"`` and ``"answered"`` L2² = m; ``"pairs"`` (disagreements among the co-answered)
    ⌊m²/3⌋; ``"co_answered"`` m(m − 1)/2; all tight; ``"joint"``: the sum of the four (an
    upper bound: the accounting composes the parts).  L1 = L2² (coordinates move by ±1)."""
    m = int(n_items)
    P = m * (m - 1) // 2
    sizes = {"totals": (m, m), "answered": (m, m), "pairs": (m * m // 3, P), "co_answered": (P, P)}
    if part == "joint":
        s = sum(v[0] for v in sizes.values())
        return Sensitivity(float(s), _sqrt_up(s), "sum of the parts", NEIGHBOURING_RELATION, 2 * m + 2 * P)
    if part not in sizes:
        raise ValueError(f"part must be one of {sorted(sizes) + ['joint']}, got {part!r}")
    s, k = sizes[part]
    return Sensitivity(float(s), _sqrt_up(s), "tight", NEIGHBOURING_RELATION, k)


def _reference(m: int) -> tuple[np.ndarray, np.ndarray]:
    """The public reference model of the split: a = 1, b at normal quantiles (2PNO); its
    P(correct) per item and P(X_i ≠ X_j) per pair (depends on m only)."""
    b = special.ndtri((np.arange(m) + 0.5) / m)
    tau, lam = b / math.sqrt(2.0), np.full(m, math.sqrt(0.5))
    p = special.ndtr(-tau)
    i, j = pair_index(m)
    d = p[i] + p[j] - 2.0 * upper_orthant(tau[i], tau[j], lam[i] * lam[j])
    return p, d


def mcar_shares(n_items: int) -> tuple[float, float]:
    """(g, h): the share of the items' budget on the answered counts and of the pairs' budget on
    the co-answered counts (§6.2): g = √P₁/(1 + √P₁), P₁ the mean p_i² at the reference model;
    h = √(d̄²·L_C)/(√L_D + √(d̄²·L_C)), d̄² the mean δ_ij² there, L_D = ⌊m²/3⌋,
    L_C = m(m − 1)/2.  Each minimises the summed delta-method noise variance of its ratios."""
    m = int(n_items)
    p, d = _reference(m)
    rp = math.sqrt(float(np.mean(p * p)))
    g = rp / (1.0 + rp)
    if m < 2:
        return g, 0.5
    LD, LC = m * m // 3, m * (m - 1) // 2
    rd = math.sqrt(float(np.mean(d * d)) * LC)
    return g, rd / (math.sqrt(LD) + rd)


def mcar_design(n_items: int, rho: float, totals_share: float = TOTALS_SHARE) -> tuple[float, float, float, float]:
    """(σ_s, σ_a, σ_D, σ_C) spending ``rho``: ``totals_share`` of it on (s, a), split by g; the
    rest on (D, C), split by h (:func:`mcar_shares`).  Public m and ρ only."""
    m = int(n_items)
    f = float(totals_share)
    g, h = mcar_shares(m)
    L = [m, m, m * m // 3, m * (m - 1) // 2]
    shares = [f * (1 - g), f * g, (1 - f) * (1 - h), (1 - f) * h]
    return tuple(math.sqrt(max(l, 1) / (2.0 * s * rho)) for l, s in zip(L, shares))  # type: ignore[return-value]


class McarPairsGaussian(PairsGaussian):
    """Discrete Gaussian noise on (s, a, D, C) of the MCAR release; the ρ of the four parts add
    up (zCDP composition, each part with its own proven sensitivity); ``sigmas`` holds the four
    scales."""

    name = "discrete Gaussian (item totals, answered counts, disagreements and co-answered counts; MCAR)"
    ledger_label = name
    parts = ("totals", "answered", "pairs", "co_answered")  # type: ignore[assignment]
    #: the statement's names of the four parts, in the order of ``parts`` and ``sigmas``
    part_names = ("item totals", "answered counts", "disagreements among the co-answered D_ij",  # type: ignore[assignment]
                  "co-answered counts C_ij")
    domain = DOMAIN_ANY

    noise_part = 2

    @classmethod
    def _scales(cls, m: int, rho: float, totals_share: float) -> tuple[float, ...]:
        return mcar_design(m, rho, totals_share)

    @classmethod
    def _sensitivities(cls, m: int) -> list:
        return [mcar_sensitivity(m, p) for p in cls.parts]

    @classmethod
    def _joint_sensitivity(cls, m: int):
        return mcar_sensitivity(m, "joint")

    def _describe(self, m: int, sens: list) -> tuple[str, ...]:
        g, h = mcar_shares(m)
        parts = "; ".join(f"{lab} (L2² ≤ {bound_text(s.l1)}, σ = {sg:.6g})"
                          for lab, s, sg in zip(self.part_names, sens, self.sigmas))
        return (
            f"{parts}; ρ of the four parts added; {self.totals_share:.0%} of ρ on the items' part "
            f"({g:.0%} of it on the answered counts), the rest on the pairs ({h:.0%} of it on the "
            "co-answered counts) (docs/private_2pl.md §6)",
            "ρ-zCDP of the parts composed and converted to (ε, δ) by Canonne, Kamath & Steinke (2020)",
            "declared missing completely at random (MCAR): the guarantee holds for any rows in "
            "{0, 1, missing}^m; the estimates assume that whether a cell is missing is independent "
            "of the person's ability and answers",
        )


def shrink_denominators(a, C, n: int, sigma_a: float, sigma_c: float) -> tuple[np.ndarray, np.ndarray,
                                                                                  np.ndarray, np.ndarray]:
    """The noisy answered and co-answered counts shrunk against their privacy noise
    (``docs/private_2pl.md`` §6.3 step 1), arrays of any leading shape (m and P last).

    Answered counts: toward their mean by the positive-part James–Stein factor
    c = max(0, 1 − (m − 3)σ_a²/Σ(ã_i − ā)²) (no shrinkage for m < 4); noise variance left
    σ_a²(c + (1 − c)/m).  Co-answered counts: toward T_ij = a′_i a′_j/n, the count that
    independent missingness gives from the shrunk answered counts a′, by
    c_C = max(0, 1 − (P − 2)σ_C²/Σ(C̃_ij − T_ij)²); noise variance left
    c_C σ_C² + (1 − c_C) Var T_ij (Var T_ij by the delta method from a′'s).  Where the counts
    differ for real (rates that differ between items, a design with pairs never co-answered)
    the residual sum is large and c → 1: nothing moves.  Not clipped before the shrinkage (a
    clip would bias the mean); :func:`ratio_inputs` clips afterwards.  Returns
    (a′, C′, var a′, var C′), the variances broadcast to the counts' shapes."""
    a, va = shrink_answered(a, sigma_a)
    C, vc = shrink_co_answered(C, a, va, n, sigma_c)
    return a, C, va, vc


def shrink_answered(a, sigma_a: float) -> tuple[np.ndarray, np.ndarray]:
    """(a′, var a′): step 1 of :func:`shrink_denominators` for the answered counts (any leading
    shape, m last): toward their mean by the positive-part James–Stein factor
    c = max(0, 1 − (m − 3)σ_a²/Σ(ã_i − ā)²) (none for m < 4); the noise variance left
    σ_a²(c + (1 − c)/m), broadcast to a's shape."""
    a = np.asarray(a, float)
    m = a.shape[-1]
    va0 = float(sigma_a) ** 2
    if m >= 4 and va0 > 0:
        dev = a - a.mean(axis=-1, keepdims=True)
        ss = np.sum(dev * dev, axis=-1, keepdims=True)
        c = np.clip(1.0 - (m - 3) * va0 / np.maximum(ss, 1e-300), 0.0, 1.0)
        return a.mean(axis=-1, keepdims=True) + c * dev, va0 * (c + (1.0 - c) / m) * np.ones_like(a)
    return a, np.full_like(a, va0)


def shrink_co_answered(C, a, var_a, n: int, sigma_c: float) -> tuple[np.ndarray, np.ndarray]:
    """(C′, var C′): step 1 of :func:`shrink_denominators` for the co-answered counts: toward
    T_ij = a′_i a′_j/n (``a``, ``var_a``: the shrunk answered counts and their noise variance) by
    c_C = max(0, 1 − (P − 2)σ_C²/Σ(C̃ − T)²); the noise variance left c_C σ_C² + (1 − c_C) Var T_ij
    (Var T_ij by the delta method from a′'s)."""
    parts = co_answered_parts(C, a, var_a, n, sigma_c)
    if parts is None:
        return np.asarray(C, float), np.full_like(np.asarray(C, float), float(sigma_c) ** 2)
    T, r, c, vt = parts
    return T + c * r, c * float(sigma_c) ** 2 + (1.0 - c) * vt


def co_answered_parts(C, a, var_a, n: int, sigma_c: float):
    """(T, C̃ − T, c_C, Var T) of :func:`shrink_co_answered`, or ``None`` where nothing is
    shrunk (fewer than 3 pairs, or no noise)."""
    C = np.asarray(C, float)
    a = np.asarray(a, float)
    vc0 = float(sigma_c) ** 2
    P = C.shape[-1]
    if P < 3 or not vc0 > 0:
        return None
    i, j = pair_index(a.shape[-1])
    T = a[..., i] * a[..., j] / float(n)
    r = C - T
    ss = np.sum(r * r, axis=-1, keepdims=True)
    c = np.clip(1.0 - (P - 2) * vc0 / np.maximum(ss, 1e-300), 0.0, 1.0)
    ai, aj = np.maximum(np.abs(a[..., i]), 1.0), np.maximum(np.abs(a[..., j]), 1.0)
    vt = (T / ai) ** 2 * var_a[..., i] + (T / aj) ** 2 * var_a[..., j]
    return T, r, c, vt


def ratio_inputs(s, a, D, C, n: int, sigmas, den_var=None) -> tuple[np.ndarray, np.ndarray, tuple, np.ndarray,
                                                                     np.ndarray]:
    """Inputs of :func:`~privirt.private.twopl.fit.fit_factor` from noisy MCAR counts (arrays of
    any leading shape): the numerators s and D on the scale of their denominators, the
    denominators a and C clipped into [:data:`MIN_DENOMINATOR`, n] (per-coordinate n), and each
    ratio's noise SD on that scale by the delta method, √(σ_num² + p²σ_den²) with p the ratio
    clipped into [0, 1] (``docs/private_2pl.md`` §6.3).  ``den_var``: the denominators' noise
    variances (after :func:`shrink_denominators`) in place of σ_a², σ_C²."""
    ss, sa, sd, sc = (float(x) for x in sigmas)
    va, vc = (sa * sa, sc * sc) if den_var is None else den_var
    hi = max(float(n), MIN_DENOMINATOR)
    na = np.clip(np.asarray(a, float), MIN_DENOMINATOR, hi)
    nc = np.clip(np.asarray(C, float), MIN_DENOMINATOR, hi)
    s = np.asarray(s, float)
    D = np.asarray(D, float)
    p = np.clip(s / na, 0.0, 1.0)
    d = np.clip(D / nc, 0.0, 1.0)
    return s, D, (na, nc), np.sqrt(ss * ss + p * p * va), np.sqrt(sd * sd + d * d * vc)


def shrunk_ratio_inputs(s, a, D, C, n: int, sigmas) -> tuple:
    """:func:`ratio_inputs` on the denominators shrunk by :func:`shrink_denominators` (with
    :data:`SHRINK_DENOMINATORS`; else as released)."""
    if not SHRINK_DENOMINATORS:
        return ratio_inputs(s, a, D, C, n, sigmas)
    a2, C2, va, vc = shrink_denominators(a, C, n, sigmas[1], sigmas[3])
    return ratio_inputs(s, a2, D, C2, n, sigmas, den_var=(va, vc))


def _persons(rng: np.random.Generator, a32, b32, q32, N: int):
    th = rng.standard_normal(N, dtype=np.float32)
    X = (th[:, None] * a32 - b32 > rng.standard_normal((N, a32.size), dtype=np.float32)).astype(np.float32)
    R = (rng.random((N, a32.size), dtype=np.float32) < q32).astype(np.float32)
    return X * R, R


@one_blas_thread
def simulate_mcar_statistics(rng: np.random.Generator, a: np.ndarray, b: np.ndarray, q: np.ndarray, n: int,
                             reps: int, *, exact: bool | None = None):
    """``reps`` MCAR data sets of ``n`` persons from the 2PNO (θ ~ N(0, 1)), item i answered
    independently with probability q_i: (s, a, D, C) with shapes (reps, m), (reps, m),
    (reps, P), (reps, P).  Up to :data:`SIM_PERSONS` persons (or ``exact=True``) exact counts;
    above, the exact expectations plus the central-limit Gaussian with the covariance of
    :data:`SIM_PERSONS` simulated persons (a multiplier draw, as the complete-data bootstrap)."""
    m = a.size
    i, j = pair_index(m)
    a32, b32, q32 = a.astype(np.float32), b.astype(np.float32), np.asarray(q, np.float32)
    if exact or (exact is None and n <= SIM_PERSONS):
        out = [np.empty((reps, m)), np.empty((reps, m)), np.empty((reps, i.size)), np.empty((reps, i.size))]
        for r in range(reps):
            Y, R = _persons(rng, a32, b32, q32, n)
            YY, YR, RR = Y.T @ Y, Y.T @ R, R.T @ R
            out[0][r], out[1][r] = np.diag(YY), np.diag(RR)
            out[2][r] = YR[i, j] + YR[j, i] - 2.0 * YY[i, j]
            out[3][r] = RR[i, j]
        return tuple(out)
    N = SIM_PERSONS
    Y, R = _persons(rng, a32, b32, q32, N)
    W = rng.standard_normal((reps, N), dtype=np.float32)
    scale = np.sqrt(n / (N - 1.0))
    qq = np.asarray(q, float)
    t = np.sqrt(1.0 + a * a)
    tau, lam = b / t, a / t
    pt = special.ndtr(-tau)
    s = n * qq * pt + scale * (W @ (Y - Y.mean(axis=0)))
    an = n * qq + scale * (W @ (R - R.mean(axis=0)))
    D = np.empty((reps, i.size))
    C = np.empty((reps, i.size))
    step = max(1, (1 << 22) // N)
    for c in range(0, i.size, step):
        ic, jc = i[c:c + step], j[c:c + step]
        RC = R[:, ic] * R[:, jc]
        VD = RC * (Y[:, ic] + Y[:, jc]) - 2.0 * Y[:, ic] * Y[:, jc]  # answered both, different
        qc = qq[ic] * qq[jc]
        dlt = pt[ic] + pt[jc] - 2.0 * upper_orthant(tau[ic], tau[jc], lam[ic] * lam[jc])
        D[:, c:c + step] = n * qc * dlt + scale * (W @ (VD - VD.mean(axis=0)))
        C[:, c:c + step] = n * qc + scale * (W @ (RC - RC.mean(axis=0)))
    return s, an, D, C


def fit_inputs(release) -> tuple:
    """(totals, pairs, n, σ_totals, σ_pairs) for :func:`~privirt.private.twopl.fit.fit_factor`
    from a release: its counts, public n and scales for complete data; :func:`ratio_inputs`
    (per-coordinate n and delta-method scales) for a declared-MCAR release."""
    if getattr(release, "missing", "none") != "mcar":
        return (release.totals.to_numpy(float), release.pairs.to_numpy(float), release.n_persons,
                release.sigma_totals, release.sigma_pairs)
    return shrunk_ratio_inputs(release.totals.to_numpy(float), release.answered.to_numpy(float),
                        release.pairs.to_numpy(float), release.co_answered.to_numpy(float), release.n_persons,
                        (release.sigma_totals, release.sigma_answered, release.sigma_pairs,
                         release.sigma_co_answered))


def bootstrap_inputs(rng: np.random.Generator, release, a: np.ndarray, b: np.ndarray, reps: int) -> tuple:
    """Fit inputs of ``reps`` simulated MCAR releases from (a, b): item i answered independently
    with the rate a′_i/n of the shrunk answered counts (clipped into [1/n, 1]), the four parts'
    noise at the released scales, then :func:`shrunk_ratio_inputs` as for the release itself
    (§6.3)."""
    n = release.n_persons
    answered = fit_inputs(release)[2][0] if SHRINK_DENOMINATORS else release.answered.to_numpy(float)
    q = np.clip(answered / n, 1.0 / n, 1.0)
    s, an, D, C = simulate_mcar_statistics(rng, a, b, q, n, int(reps))
    sig = (release.sigma_totals, release.sigma_answered, release.sigma_pairs, release.sigma_co_answered)
    s, an, D, C = (x + rng.normal(0.0, sg, x.shape) for x, sg in zip((s, an, D, C), sig))
    return shrunk_ratio_inputs(s, an, D, C, n, sig)

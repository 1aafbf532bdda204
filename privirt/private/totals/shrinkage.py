"""Post-processing of the noisy item totals: into the range, the mean shrunk toward 1/2, and
empirical-Bayes shrinkage of the spread against the privacy noise (``docs/totals.md`` §5)."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["CONSERVATIVE", "MARGIN_SNR", "MEAN_PRIOR_SD", "SPREAD_PRIOR_SD", "centre_totals", "conservative_margin",
           "population_draws", "shrink_totals", "spread_posterior", "within_range"]

#: the shrinkage factor is its posterior mean minus this many posterior SDs (floored at 0) ...
CONSERVATIVE = 0.75
#: ... where the prior's scale of a centred total at p̄ = ½ (0.2·n·SPREAD_PRIOR_SD) is at most
#: MARGIN_SNR[0] noise SDs; none from MARGIN_SNR[1] on, linearly between (:func:`conservative_margin`)
MARGIN_SNR = (0.3, 0.5)
#: scale of the half-normal prior on the SD of the difficulties (logits), for the shrinkage
SPREAD_PRIOR_SD = 1.0
#: a centred total's spread per logit of that SD, over n·p̄(1 − p̄) (the prior's scale is
#: n·p̄(1 − p̄)·SPREAD_PER_LOGIT·prior_sd)
SPREAD_PER_LOGIT = 0.8
#: prior SD of the mean proportion correct around 1/2 (used to shrink the noisy mean total)
MEAN_PRIOR_SD = 0.2


def within_range(p: np.ndarray, sd: float, n: int) -> np.ndarray:
    """Noisy proportions (noise SD ``sd``, public) as the mean of N(p, sd²) restricted to [0, 1]
    (flat prior; clipping alone made a total beyond n a difficulty of −logit(1/(2n)), issue 26),
    unchanged more than 6 SD inside; then clipped to [1/(2n), 1 − 1/(2n)] (``docs/totals.md`` §5)."""
    p = np.array(p, dtype=float)
    if np.ndim(sd):  # one noise SD per item (MCAR ratios, :func:`shrink_totals`)
        sd = np.broadcast_to(np.asarray(sd, dtype=float), p.shape)
        near = ((p < 6.0 * sd) | (p > 1.0 - 6.0 * sd)) & (sd > 0)
        if near.any():
            p[near] += sd[near] * truncated_normal_shift(-p[near] / sd[near], (1.0 - p[near]) / sd[near])
        return np.clip(p, 0.5 / n, 1 - 0.5 / n)
    near = (p < 6.0 * sd) | (p > 1.0 - 6.0 * sd) if sd > 0 else np.zeros(p.shape, bool)
    if near.any():
        p[near] += sd * truncated_normal_shift(-p[near] / sd, (1.0 - p[near]) / sd)
    return np.clip(p, 0.5 / n, 1 - 0.5 / n)


def truncated_normal_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """E[Z | a < Z < b] for Z ~ N(0, 1), vectorised and stable in either tail.

    ``scipy.stats.truncnorm.mean`` gives the same values but loops over scalars in Python
    (0.4 ms an item: 86 s for the bootstrap of a 1000-item test); here (φ(a) − φ(b)) /
    (Φ(b) − Φ(a)) is evaluated directly where the interval straddles 0 and, in a tail, as
    (1 − e) / (M(a) − e·M(b)) with M(x) = Φ̄(x)/φ(x) = √(π/2)·erfcx(x/√2) and
    e = exp((a² − b²)/2) (a ≥ 0; the lower tail by symmetry).
    """
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    out = np.empty(a.shape)
    upper, lower = a >= 0, b <= 0
    mid = ~(upper | lower)
    out[mid] = ((np.exp(-0.5 * a[mid] ** 2) - np.exp(-0.5 * b[mid] ** 2))
                / math.sqrt(2 * math.pi) / (special.ndtr(b[mid]) - special.ndtr(a[mid])))
    for sel, lo, hi, sign in ((upper, a, b, 1.0), (lower, -b, -a, -1.0)):
        lo_, hi_ = lo[sel], hi[sel]
        e = np.exp(0.5 * (lo_ - hi_) * (lo_ + hi_))
        M = math.sqrt(math.pi / 2)
        out[sel] = sign * (1.0 - e) / (M * special.erfcx(lo_ / math.sqrt(2)) - e * M * special.erfcx(hi_ / math.sqrt(2)))
    return out


def conservative_margin(n: int, var_noise: float, prior_sd: float | None = None) -> float:
    """How many posterior SDs the shrinkage factor gives up: :data:`CONSERVATIVE` where the
    spread the prior expects is small against the noise, 0 where it is not (public n and σ_s).

    r = 0.2·n·prior_sd / σ_s is the prior scale of a centred total (n·p̄(1 − p̄)·0.8·prior_sd at
    p̄ = ½) over the noise SD.  Below r = ``MARGIN_SNR[0]`` nothing is detectable and a
    noise draw that looks like signal would make the estimate worse than all difficulties equal;
    the margin keeps that from happening.  From ``MARGIN_SNR[1]`` on the posterior mean
    (the Bayes estimate of the factor) is used: the margin there only shrank a real but faint
    spread too far (issue 26, ``docs/totals.md`` §5 step 1).
    """
    prior_sd = SPREAD_PRIOR_SD if prior_sd is None else prior_sd
    if not var_noise > 0:
        return 0.0
    r = 0.2 * n * prior_sd / math.sqrt(var_noise)
    lo, hi = MARGIN_SNR
    return CONSERVATIVE * min(1.0, max(0.0, (hi - r) / (hi - lo)))


def item_noise(var_noise: float | np.ndarray) -> float | np.ndarray:
    """The noise variance as a float where every item has the same (the model of
    :func:`shrink_totals` as it always was), else one per item (an array, floored at 0)."""
    v = np.maximum(np.asarray(var_noise, dtype=float), 0.0) if np.ndim(var_noise) else var_noise
    if np.ndim(v) and np.all(v == v.flat[0]):
        return float(v.flat[0])
    return v


def centre_totals(totals: np.ndarray, n: int, var_noise: float | np.ndarray) -> np.ndarray:
    """Proportions correct with their noisy mean shrunk toward 1/2.

    The mean of the m noisy totals has noise variance v/m; with a N(1/2, MEAN_PRIOR_SD²)
    prior on the mean proportion its posterior mean replaces it (the deviations are kept).
    Brought into the range by :func:`within_range`.  Where ``var_noise`` gives one variance
    v_i per item (the MCAR ratios) the mean is the precision-weighted one (weights
    1/(v_i + n·mean(p(1 − p))), its variance 1/Σ weights; equal v_i are one v, :func:`item_noise`)
    and each item is brought into the range with its own SD: the mean of the v_i, used for both
    until session 28, let one item answered by a handful of persons (ratio noise ≈ 10⁶) move
    every item's level and pull every proportion toward 1/2 (intervals centred on a compressed
    fit, not containing the point estimate; ``docs/totals.md`` §7.3 step 1).
    """
    s = np.asarray(totals, dtype=float)
    m = s.size
    p = np.clip(s / n, 0.5 / n, 1 - 0.5 / n)
    var_sampling = n * float(np.mean(p * (1 - p)))
    var_noise = item_noise(var_noise)
    if np.ndim(var_noise):
        w = 1.0 / (var_noise + var_sampling)
        level, var_level = float(w @ s) / float(w.sum()), 1.0 / float(w.sum())
        sd: float | np.ndarray = np.sqrt(var_noise) / n
    else:
        level, var_level = float(s.mean()), (var_noise + var_sampling) / m
        sd = math.sqrt(max(var_noise, 0.0)) / n
    k_mean = (n * MEAN_PRIOR_SD) ** 2 / ((n * MEAN_PRIOR_SD) ** 2 + var_level)
    pbar = 0.5 + k_mean * (level / n - 0.5)
    return within_range(pbar + (s - level) / n, sd, n)


def shrink_totals(
    totals: np.ndarray, n: int, var_noise: float | np.ndarray, *, prior_sd: float | None = None
) -> tuple[np.ndarray, float, dict]:
    """Empirical-Bayes shrinkage of the noisy totals against the privacy noise only.

    Model: the centred noisy totals s_c = t_c + e, e ~ N(0, σ_s² I) the privacy noise
    (``var_noise``, known exactly), t_c the centred noise-free totals with spread
    A = A_pop + n·mean(p(1 − p)): the population spread A_pop plus the sampling spread every
    data set has even when all difficulties are equal.  A half-normal prior on √A_pop of scale
    n·p̄(1 − p̄)·0.8·``prior_sd`` (≈ the totals' spread for a difficulty SD of ``prior_sd``
    logits; default :data:`SPREAD_PRIOR_SD`) and s_c ~ N(0, (A + σ_s²) I) in m − 1 dimensions
    give a posterior for c = A/(A + σ_s²), the factor that shrinks the noisy totals toward
    the noise-free ones of the same data (not toward the population: sampling error is left
    in, so with ``var_noise`` = 0 nothing is shrunk).  s_c is multiplied by
    E[c] − k·SD[c] (floored at 0), k = :func:`conservative_margin` (¾ where the prior's spread
    is small against the noise, else 0): equal difficulties when the spread is not detectably
    above the noise.  The mean comes from :func:`centre_totals`.  Returns the
    proportions (brought into the range by :func:`within_range`), the factor and diagnostics (``chi2``:
    Σ s_c² over the variance of a centred total when all difficulties are equal,
    ``var_totals`` that variance, ``spread_totals`` the posterior mean of √A_pop).
    ``var_noise`` may give one variance per item (the MCAR ratios, whose noise differs by the
    items' answered counts): then each item has its own factor (:func:`_shrink_per_item`; the
    returned factor is their mean).  Equal variances are taken as one (:func:`item_noise`: the
    model above); the per-item model's factors reduce to it then, but not its level (the mean of
    the shrunk totals, without the truncation shift of :func:`centre_totals`), so nearly equal
    variances can give a level up to about 0.02 logits away (n = 800).
    """
    s = np.asarray(totals, dtype=float)
    var_noise = item_noise(var_noise)
    if np.ndim(var_noise):
        return _shrink_per_item(s, n, var_noise, prior_sd)
    pb, var_sampling, sc, sd, post = spread_posterior(s, n, var_noise, prior_sd=prior_sd)
    A = sd * sd + var_sampling
    ratio = A / (A + var_noise)
    c = float(post @ ratio)
    c_sd = math.sqrt(max(0.0, float(post @ ratio**2) - c * c))
    c = min(1.0, max(0.0, c - conservative_margin(n, var_noise, prior_sd) * c_sd))  # 0: nothing detectable
    v = var_noise + var_sampling
    T = float(sc @ sc)
    return (within_range(pb + c * sc / n, c * math.sqrt(max(var_noise, 0.0)) / n, n), c,
            {"chi2": T / v, "var_totals": v, "spread_totals": float(post @ sd)})


def _shrink_per_item(s: np.ndarray, n: int, var_noise: np.ndarray, prior_sd: float | None
                     ) -> tuple[np.ndarray, float, dict]:
    """:func:`shrink_totals` where each item has its own noise variance v_i (an array).

    The same model with e_i ~ N(0, v_i): the spread's likelihood is the restricted (REML)
    one of s ~ N(μ1, diag(A + v_i)) with μ integrated out, and each item is shrunk by its own
    factor c_i = A/(A + v_i) toward the precision-weighted centre μ̂(A) (posterior means over
    √A_pop, then the conservative margin of each item's own v_i).  With equal v_i its factors
    are the scalar model's, its level is not (see :func:`shrink_totals`).  Returns the proportions, the items' mean factor and the diagnostics
    (``shrinkage_items``: the factors).
    """
    c, d, level, (_, var_sampling, sd, post, _) = _per_item(s, n, var_noise, prior_sd)
    w = 1.0 / (var_noise + var_sampling)
    chi2 = float(w @ (s - (w @ s) / w.sum()) ** 2)
    return (within_range(level + (d - d.mean()) / n, c * np.sqrt(var_noise) / n, n), float(np.mean(c)),
            {"chi2": chi2, "var_totals": float(np.mean(var_noise)) + var_sampling,
             "spread_totals": float(post @ sd), "shrinkage_items": c.tolist()})


def _per_item(s: np.ndarray, n: int, var_noise: np.ndarray, prior_sd: float | None):
    """(c_i, d_i, p̄, posterior) of :func:`_shrink_per_item`: the factors; the shrunk totals
    d_i = μ̂ + c_i(s_i − μ̂), their mean L; the level p̄ = 1/2 + k(L/n − 1/2), L shrunk toward
    n/2 as in :func:`centre_totals` with its own noise variance Σ ω_i²(v_i + n·mean(p(1 − p))),
    L = Σ ω_i s_i (with equal v_i: s̄, v/m and that function's level); and (p̄ of
    :func:`centre_totals`, the sampling variance, the grid of √A_pop, its weights, μ̂(A)).
    The level is not s̄: one item's noise of 10⁷ (answered by 4 persons) moved s̄ by 10³."""
    pb, var_sampling, _, sd, post, mu, wn = _spread_posterior(s, n, var_noise, prior_sd)
    A = (sd * sd + var_sampling)[:, None]
    ratio = A / (A + var_noise[None, :])
    c = post @ ratio
    c_sd = np.sqrt(np.maximum(0.0, post @ ratio**2 - c * c))
    k = np.array([conservative_margin(n, float(v), prior_sd) for v in var_noise])
    c = np.clip(c - k * c_sd, 0.0, 1.0)
    centre = float(post @ mu)
    d = centre + c * (s - centre)
    omega = (1.0 - c.mean()) * (post @ wn) + c / s.size  # L = mean(d) = Σ ω_i s_i
    p = np.clip(s / n, 0.5 / n, 1 - 0.5 / n)
    var_level = float(omega**2 @ (var_noise + n * float(np.mean(p * (1 - p)))))
    k_mean = (n * MEAN_PRIOR_SD) ** 2 / ((n * MEAN_PRIOR_SD) ** 2 + var_level)
    level = 0.5 + k_mean * (d.mean() / n - 0.5)
    return c, d, level, (pb, var_sampling, sd, post, mu)


def _spread_posterior(s: np.ndarray, n: int, var_noise: float | np.ndarray, prior_sd: float | None):
    """:func:`spread_posterior` and, per grid point, the centre μ̂(A) the items are shrunk toward
    (s̄ with one noise variance; with one per item the precision-weighted mean, and the
    restricted likelihood of s ~ N(μ1, diag(A + v_i)), which is the scalar one when they are equal)."""
    prior_sd = SPREAD_PRIOR_SD if prior_sd is None else prior_sd
    m = s.size
    p = centre_totals(s, n, var_noise)
    pb = float(np.mean(p))
    var_sampling = n * float(np.mean(p * (1 - p)))
    sc = s - s.mean()
    scale = n * pb * (1 - pb) * SPREAD_PER_LOGIT * prior_sd
    sd = np.linspace(0.0, 4.0 * scale, 2001)[1:]  # grid of √A_pop
    A = sd * sd + var_sampling
    wn = None
    if np.ndim(var_noise):
        V = A[:, None] + var_noise[None, :]
        W = 1.0 / V
        wn = W / W.sum(axis=1, keepdims=True)  # each grid point's weights of μ̂(A)
        mu = wn @ s
        loglik = (-0.5 * np.log(V).sum(axis=1) - 0.5 * np.log(W.sum(axis=1))
                  - 0.5 * np.sum(W * (s[None, :] - mu[:, None]) ** 2, axis=1) - 0.5 * (sd / scale) ** 2)
    else:
        T = float(sc @ sc)
        loglik = -0.5 * (m - 1) * np.log(A + var_noise) - 0.5 * T / (A + var_noise) - 0.5 * (sd / scale) ** 2
        mu = np.full(sd.size, s.mean())
    post = np.exp(loglik - loglik.max())
    post /= post.sum()
    return pb, var_sampling, sc, sd, post, mu, wn


def spread_posterior(
    totals: np.ndarray, n: int, var_noise: float | np.ndarray, *, prior_sd: float | None = None
) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
    """The posterior of the population spread √A_pop of the centred totals (:func:`shrink_totals`;
    ``var_noise`` one noise variance, or one per item).

    Returns (p̄ the centred mean proportion, the sampling variance n·mean(p(1 − p)) of a
    total, the centred noisy totals s_c, the grid of √A_pop, its posterior weights).
    """
    return _spread_posterior(np.asarray(totals, dtype=float), n, item_noise(var_noise), prior_sd)[:5]


def population_draws(
    rng: np.random.Generator, totals: np.ndarray, n: int, var_noise: float | np.ndarray, reps: int
) -> np.ndarray:
    """``reps`` draws (reps, m) of the items' population proportions correct given the noisy
    totals, under the shrinkage's model (``docs/totals.md`` §5.2).

    √A_pop is drawn from :func:`spread_posterior`; given it, the centred population totals
    n·(π_i − p̄) ~ N(0, A_pop) and the centred noisy totals s_c = that + sampling + noise, so
    each is N(k·s_c, k·(V_s + σ_s²)) with k = A_pop / (A_pop + V_s + σ_s²), V_s the sampling
    variance (with one noise variance per item, each its own k_i and the deviations from the
    precision-weighted centre μ̂ of :func:`_shrink_per_item`).  The proportions p̄ + draw/n
    are drawn truncated to [1/(2n), 1 − 1/(2n)] (the estimator's range): where the noise
    dominates (k ≈ 0) they are draws from the prior spread, the difficulties the data cannot
    tell apart.
    """
    var_noise = item_noise(var_noise)
    s = np.asarray(totals, dtype=float)
    if np.ndim(var_noise):  # each item its own noise variance, shrunk toward μ̂(A) (:func:`_shrink_per_item`)
        _, d, level, (_, var_sampling, sd, post, mu) = _per_item(s, n, var_noise, None)
        j = rng.choice(sd.size, size=(reps, 1), p=post)
        a, centre = sd[j] ** 2, mu[j]
        k = a / (a + var_sampling + var_noise[None, :])
        mean = level + (centre + k * (s[None, :] - centre) - d.mean()) / n  # around the point's level
    else:
        pb, var_sampling, sc, sd, post, _, _ = _spread_posterior(s, n, var_noise, None)
        a = rng.choice(sd, size=(reps, 1), p=post) ** 2
        k = a / (a + var_sampling + var_noise)
        mean = pb + k * sc[None, :] / n
    sdev = np.sqrt(k * (var_sampling + var_noise)) / n
    lo, hi = 0.5 / n, 1.0 - 0.5 / n
    # inverse-CDF draw of N(mean, sdev²) truncated to [lo, hi] (upper tail by symmetry)
    flip = mean > 0.5
    mu = np.where(flip, 1.0 - mean, mean)
    fa, fb = special.ndtr((lo - mu) / sdev), special.ndtr((hi - mu) / sdev)
    u = fa + rng.random(mu.shape) * (fb - fa)
    x = mu + sdev * special.ndtri(np.clip(u, 1e-300, 1.0 - 1e-16))
    x = np.clip(x, lo, hi)
    return np.where(flip, 1.0 - x, x)

"""Private 2PNO discriminations and difficulties with intervals, from a :class:`TwoPLRelease`
(pure post-processing) or from data (:func:`private_2pl_estimate` = release, then estimate)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import special, stats

from ..._checks import brief, check_confidence, check_n_boot
from ..._progress import resolve_progress, ticker
from ..._seeds import describe_seed, estimate_stream, numpy_rng, seed_sequence
from ..._threads import one_blas_thread
from ...data._labels import name_items
from ...data.responses import ResponsesLike
from ...exceptions import IdentifiabilityWarning, PrivirtRuntimeWarning, user_stacklevel
from ..spends import reports_spends
from ..statement import PrivacyStatement
from ._intervals import bootstrap_intervals, laplace_intervals
from .mcar import bootstrap_inputs, fit_inputs
from .fit import fit_factor, shrink_log_a, simulate_statistics, to_2pno
from .keying import negatively_keyed
from .level import LEVEL_CONFLICT_SDS, level_curvature_variance, level_noise_share, level_posterior_mean, level_scale2
from .linboot import linear_refits
from .orthant import upper_orthant
from .release import TwoPLRelease, _release_2pl, check_local_engine, check_release
from .statistics import pair_index

#: Noise draws for the noise variance of log a under the all-a-equal fit (shrinkage), and
#: their fixed seed (the draws are part of a deterministic post-processing, not privacy noise).
NULL_REPLICATES = 32
NULL_SEED = 20_251_126
#: From this many items (releases without missingness) the noise-variance refits are
#: :data:`NULL_REPLICATES_MANY` and each item's variances are pooled over the items nearest to it in
#: τ: under the all-a-equal null the items differ only in τ (the noise is i.i.d. and every loading
#: is the same), so an item's noise variance is a function of its τ; a local-linear smooth of their
#: logs over :data:`NULL_POOL_DRAWS` draws replaces the mean of its own 32 (``docs/private_2pl.md`` §3,
#: "Many items").  The refits are 2 × 8 rather than 2 × 32.
NULL_POOL_FROM = 100
NULL_REPLICATES_MANY = 8
NULL_POOL_DRAWS = 128
#: Where, for the median item, the release holds less than this share of the precision of log a_i
#: at the fit (the rest is the fit's priors'), the noise swamps the pairs and the intervals are
#: the fit's Laplace posterior instead of the bootstrap (``docs/private_2pl.md`` §3, "Intervals
#: where the noise swamps the pairs").
PRIOR_HELD_SHARE = 0.5
#: Whether the bootstrap interval of log a is centred at the unshrunk estimate minus the
#: replicates' mean error (the bias at the simulation point), as those of b and τ are.  False:
#: at the unshrunk estimate (``docs/private_2pl.md`` §3, "Intervals"; the bias correction added
#: its own noise to the centre).
BIAS_CORRECT_LOG_A = False
#: Items whose fitted correlation λ_iλ_j with another item is at least this (both a ≳ 7: at the
#: bound 1, e.g. duplicated items) are flagged as not identified (``docs/private_2pl.md`` §3).
CORRELATION_AT_BOUND = 0.99
#: How the bootstrap's replicates are refitted (releases without missingness; MCAR releases
#: always refit in full): ``"full"`` by :func:`fit.fit_factor` from the simulation point;
#: ``"one_step"``: one Gauss–Newton step from it with the Jacobian, weights and Cholesky factor of
#: the simulation point shared by every replicate (no orthant evaluations); ``"chord2"``: that and
#: one more chord step (:mod:`.linboot`); ``"auto"`` (default): ``"one_step"`` from
#: :data:`LINEAR_REFITS_MIN_PERSONS` persons, or from :data:`LINEAR_REFITS_MIN_ITEMS` items where
#: the release holds the discriminations, ``"full"`` otherwise.  Measured in BENCHMARKS.md, "Issue
#: 25, ninth round: the bootstrap's refits linearised" and "eleventh round".
BOOTSTRAP_REFITS = "auto"
#: From this many persons ``"auto"`` takes the one-step refits: at n = 10 000 their se's were
#: within 2.3 % of the full refits' in median at every (m, ε) measured (m = 20–300, ε = 0.1–3;
#: 5–95 % of items ≥ 0.87) with equal coverage.
LINEAR_REFITS_MIN_PERSONS = 10_000
#: ... and from this many items at any n where the release holds the discriminations (the median
#: item's data share of the precision of log a at least :data:`PRIOR_HELD_SHARE`): there 200 full
#: refits cost minutes (24 CPU min at (1000, 1000)), while the one-step refits' coverage matched
#: the full refits' (a and b within ±0.008) at n = 500–5000, m = 200–500, though item by item
#: their se's scatter about the full refits' (5–95 % of items 0.84–1.3 for se(b)).
LINEAR_REFITS_MIN_ITEMS = 200
_LINEAR_STEPS = {"one_step": 1, "chord2": 2}

__all__ = ["TwoPLEstimate", "estimate_2pl_from_release", "private_2pl_estimate"]


@dataclass(frozen=True, eq=False)
class TwoPLEstimate:
    """Result of :func:`private_2pl_estimate` / :func:`estimate_2pl_from_release`.

    The 2PNO parameterisation of :func:`privirt.gibbs_2pno`: P(X_li = 1) = Φ(a_i θ_l − b_i),
    θ ~ N(0, 1).

    Attributes
    ----------
    a, b : pandas.Series
        Private discriminations (after shrinkage) and difficulties, indexed by item.
    ci : dict of str to pandas.DataFrame
        ``ci["a"]``, ``ci["b"]``, ``ci["tau"]``: columns ``lo``, ``hi`` by item (intervals at
        ``confidence``; NaN with ``n_boot=0``).
    se : dict of str to pandas.Series
        Standard errors of log a (``se["log_a"]``), of b (``se["b"]``) and of τ (``se["tau"]``):
        the bootstrap's, or the fit's Laplace posterior SDs where the noise swamps the pairs
        (``info["intervals"]``).
    a_unshrunk, b_unshrunk : pandas.Series
        The fit before shrinkage (what the bootstrap intervals are centred on, each then widened
        where needed to hold a, b and τ; the Laplace intervals are built around a and b).
    privacy : PrivacyStatement
    release : TwoPLRelease
    info : dict
        Shrinkage (spread ``s`` and mean ``mu`` of log a, per-item factors), bootstrap size,
        confidence, seed, fit iterations, the interval route (``"intervals"``: bootstrap,
        laplace or none), how the bootstrap refitted (``"bootstrap_refits"``: full or
        one_step, :data:`BOOTSTRAP_REFITS`), the release's share of the precision of log a
        (``"data_share_log_a"``, median item) and the matrix it comes from
        (``"laplace_curvature"``: newton, or gauss_newton where the Newton matrix is
        indefinite; the Laplace intervals always come from the Gauss–Newton matrix), and the
        common level's noise: the refits' SD and bias
        (``"noise_sd_mean_log_a"``, ``"noise_bias_mean_log_a"``) and the release's own
        curvature SD (``"curvature_sd_mean_log_a"``).
    """

    a: pd.Series
    b: pd.Series
    ci: dict
    se: dict
    a_unshrunk: pd.Series
    b_unshrunk: pd.Series
    privacy: PrivacyStatement
    release: TwoPLRelease
    info: dict = field(default_factory=dict, repr=False)

    @property
    def items(self) -> pd.Index:
        """Item labels, in the order of ``a``."""
        return self.a.index

    @property
    def tau(self) -> pd.Series:
        """Marginal difficulties (thresholds) τ = b/√(1 + a²): P(X_i = 1) = Φ(−τ_i) over θ ~ N(0, 1).

        The difficulty that the item totals determine, free of the discriminations' error; the
        one to compare with the Rasch totals estimator's β (``docs/private_2pl.md``, "Difficulties": b carries
        the error of a, τ does not).  Intervals in ``ci["tau"]``.
        """
        a, b = self.a.to_numpy(float), self.b.to_numpy(float)
        return pd.Series(b / np.sqrt(1.0 + a * a), index=self.b.index.copy(), name="tau")

    @property
    def beta(self) -> pd.Series:
        """Difficulties on the Rasch (logit) scale, centred: 1.702·(b − mean b).

        Under logistic(θ − β) ≈ Φ((θ − β)/1.702) with θ = τ z, z ~ N(0, 1), the 2PNO has
        a = τ/1.702 and b = β/1.702 whatever τ; for comparison with the Rasch estimators
        (sweeps, ``top_k``).
        """
        b = self.b.to_numpy(float)
        return pd.Series(1.702 * (b - b.mean()), index=self.b.index.copy(), name="beta")

    def top_k(self, k: int, *, largest: bool = True) -> pd.Index:
        """Labels of the ``k`` most discriminating items (largest a), or the least with
        ``largest=False``."""
        from ..._results import top_k_labels

        return top_k_labels(self.a, k, largest)

    def to_frame(self) -> pd.DataFrame:
        """DataFrame indexed by item: a, its interval, b, its interval."""
        frame = pd.DataFrame({"a": self.a, "a_lo": self.ci["a"]["lo"], "a_hi": self.ci["a"]["hi"],
                              "b": self.b, "b_lo": self.ci["b"]["lo"], "b_hi": self.ci["b"]["hi"]})
        frame.index.name = self.a.index.name
        return frame


def null_replicates(m: int, missing: str) -> int:
    """How many noise draws the noise-variance refits take (each refitted twice: per item and
    all a equal): :data:`NULL_REPLICATES`, or :data:`NULL_REPLICATES_MANY` from
    :data:`NULL_POOL_FROM` items without missingness (their variances then pooled over τ)."""
    return NULL_REPLICATES_MANY if _pooled(m, missing) else NULL_REPLICATES


def _pooled(m: int, missing: str) -> bool:
    return m >= NULL_POOL_FROM and missing == "none"


def _pool_by_tau(tau: np.ndarray, y: np.ndarray, width: int) -> np.ndarray:
    """Local-linear smooth of per-item values ``y`` against ``tau``: for each item the least-squares
    line through the ``width`` items nearest to it in τ order (a window of fixed size, shifted
    inward at the ends), evaluated at its τ and kept within the window's range of ``y`` (a line
    extrapolated at the ends must not leave it)."""
    m = tau.size
    w = min(int(width), m)
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(tau))):
        return y  # (a refit is never non-finite; a running sum would carry one across every window)
    order = np.argsort(tau, kind="stable")
    ts, ys = tau[order], y[order]
    lo = np.clip(np.arange(m) - w // 2, 0, m - w)  # each sorted item's window [lo, lo + w)

    def window_sum(v):
        c = np.concatenate([[0.0], np.cumsum(v)])
        return c[lo + w] - c[lo]

    ref = ts[lo + w // 2]  # the line's sums about a point of each window (τ is O(1): the running sums are exact enough)
    x = ts - ref
    # the windows' sums of (τ − ref), (τ − ref)², y, (τ − ref) y, each with its own ref: sums of
    # powers of τ expanded about ref
    s1, s2 = window_sum(ts), window_sum(ts * ts)
    sy, sty = window_sum(ys), window_sum(ts * ys)
    c1 = s1 - w * ref
    c2 = s2 - 2.0 * ref * s1 + w * ref * ref
    cy = sty - ref * sy
    den = w * c2 - c1 * c1
    slope = np.where(den > 1e-12 * np.maximum(w * c2, 1e-300), (w * cy - c1 * sy) / np.where(den > 0, den, 1.0), 0.0)
    pred = sy / w + slope * (x - c1 / w)
    view = np.lib.stride_tricks.sliding_window_view(ys, w)
    out = np.empty(m)
    out[order] = np.clip(pred, view.min(axis=1)[lo], view.max(axis=1)[lo])
    return out


def _null_noise_variance(release: TwoPLRelease, tau0: np.ndarray, lam0: np.ndarray, tick=None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Variances of the unshrunk τ_i and log a_i due to the privacy noise alone, by simulation under
    the all-a-equal fit: its expected statistics plus :func:`null_replicates` draws of
    Gaussian noise of the released scales (fixed draws: deterministic post-processing), refit;
    mean squared deviations from the fit's τ and common log a, and of the log a_i about their
    replicate's mean (the part that looks like spread), and the variance and mean deviation (bias)
    of the refitted all-equal log a (the level).  Captures what a linearisation misses where
    the noise is large (loadings pushed to the boundary, the prior's pull).  From
    :data:`NULL_POOL_FROM` items without missingness the per-item variances are pooled over the
    items nearest in τ (:data:`NULL_REPLICATES_MANY` draws each; :func:`_pool_by_tau` of their
    logs)."""
    _, _, n, sig_t, sig_p = fit_inputs(release)  # per-coordinate n and scales under MCAR
    n_t, n_p = n if isinstance(n, tuple) else (n, n)
    m = tau0.size
    reps = null_replicates(m, release.missing)
    i, j = pair_index(m)
    pt = special.ndtr(-tau0)
    t_exp = n_t * pt
    d_exp = n_p * (pt[i] + pt[j] - 2.0 * upper_orthant(tau0[i], tau0[j], lam0[i] * lam0[j]))
    z = np.random.default_rng(NULL_SEED).standard_normal((reps, m + i.size))
    tn = t_exp[None, :] + sig_t * z[:, :m]
    dn = d_exp[None, :] + sig_p * z[:, m:]
    # refits start where the releases were simulated from (τ₀, log a₀, μ = mean log a₀)
    la0 = np.log(to_2pno(tau0, lam0)[0])
    x0 = np.concatenate([tau0, la0, [la0.mean()]])
    # the refits stop by the point fit's own rule (fit_factor's max_iter and tol): the level's
    # bias is their mean deviation, subtracted from the point fit's, so both must be one
    # estimator; where the noise swamps the pairs the fits crawl toward λ → 1 for 50–100
    # iterations, and refits cut at 40 had measured a smaller bias (§3, the level)
    fb = fit_factor(tn, dn, n, sig_t, sig_p, start=x0, tick=tick)
    fc = fit_factor(tn, dn, n, sig_t, sig_p, common=True, start=x0, tick=tick)
    la = np.log(to_2pno(fb.tau, fb.lam)[0])
    within = la - la.mean(axis=1, keepdims=True)
    level = np.log(to_2pno(fc.tau, fc.lam)[0][:, 0]) - la0[0]
    v_tau = np.mean((fb.tau - tau0[None, :]) ** 2, axis=0)
    v = np.mean((la - la0[None, :]) ** 2, axis=0)
    v_within = np.mean(within**2, axis=0)
    if _pooled(m, release.missing):
        # on the log scale: the variances grow steeply toward the tails (that of τ about as
        # 1/φ(τ)²), where a line through the raw values of 16 sparse items overshoots; the log of
        # a mean of `reps` squared normals falls short of the log of its mean by ψ(reps/2) − log(reps/2)
        width = max(1, NULL_POOL_DRAWS // reps)
        shift = float(special.digamma(reps / 2.0) - np.log(reps / 2.0))
        v_tau, v, v_within = (np.exp(_pool_by_tau(tau0, np.log(np.maximum(y, 1e-300)), width) - shift)
                              for y in (v_tau, v, v_within))
    return v_tau, v, v_within, float(np.var(level)), float(np.mean(level))


def _point(release: TwoPLRelease, tick=None):
    """Unshrunk and shrunk (a, b) and the diagnostics; ``tick(k)`` as the two fits to the release
    and the noise-variance refits finish."""
    t, d, n, sig_t, sig_p = fit_inputs(release)  # per-coordinate n and scales under MCAR
    fit = fit_factor(t, d, n, sig_t, sig_p, hessian=True, tick=tick)
    tau, lam = fit.tau[0], fit.lam[0]
    a_u, b_u = to_2pno(tau, lam)
    m = tau.size
    # the common value: the fit with all a equal (every pair informs it), not an average of
    # the noisy per-item values (a = λ/√(1 − λ²) is convex: noise pushes that average up)
    same = fit_factor(t, d, n, sig_t, sig_p, common=True, hessian=True, tick=tick)
    centre = float(np.log(to_2pno(same.tau[0], same.lam[0])[0]).mean())
    # the curvature variance includes sampling: the level is shrunk against the noise only, so by
    # the noise's share of it (§3; the whole had pulled a ≈ 0.04 to 0.25 at m = 2, ε = 10⁴), except
    # at a fit pinned at the bound, whose flat curvature keeps the prior in play (two identical items)
    v_curv = level_curvature_variance(same)
    noise_share = level_noise_share(t, d, n, sig_t, sig_p) if same.lam[0, 0] ** 2 < CORRELATION_AT_BOUND else 1.0
    v_fit = v_curv * noise_share
    # noise variances simulated at the prior's common a = e⁰ = 1 (where the noise swamps the
    # pairs the all-equal fit itself sits near λ → 1, where refits scatter little)
    v_tau, v, v_within, v_level, bias_level = _null_noise_variance(release, same.tau[0], np.full(m, np.sqrt(0.5)),
                                                                   tick)
    # the level: where the noise hides even the common value, pure noise pushes the all-equal
    # fit up, toward λ → 1; that bias (the refits' mean deviation at the prior's a = 1) is
    # subtracted, and the prior log a ~ N(0, LEVEL_PRIOR_SD²) takes over against the level's
    # likelihood (posterior mean): Student's t with the refits' degrees of freedom (their
    # variance is estimated from a few draws) and their variance, or the release's own curvature
    # variance at the fit where that is wider (a fit pinned toward λ → 1 that the refits from
    # the prior's a = 1 did not reproduce: the release's curvature there is nearly flat)
    reps = null_replicates(m, release.missing)
    x = centre - bias_level
    centre = level_posterior_mean(x, v_level, v_fit, reps)
    # a prior–data conflict: the release holds the level (its scale w) far from where the prior
    # put it (items that agree almost perfectly pin the fit at λ → 1 on a release the noise cannot
    # pin): the level is the prior's, not the release's
    w = float(np.sqrt(level_scale2(v_level, v_fit, reps)))
    conflict = bool(np.isfinite(w) and abs(x - centre) > LEVEL_CONFLICT_SDS * w)
    # the spread s of the discriminations from the per-item fit's deviations about its own
    # mean (noise moves that mean too: it is no evidence of spread), then each log a_i shrunk
    # toward the all-equal value against its full noise variance
    la_u = np.log(a_u)
    _, s, _ = shrink_log_a(la_u - la_u.mean(), v_within, centre=0.0)
    mu = centre
    log_a = centre + (s * s / (s * s + v) if s > 0 else 0.0) * (la_u - centre)
    # the thresholds likewise toward their mean (nothing moves unless the noise hides their spread)
    tau_s, s_tau, _ = shrink_log_a(tau, v_tau, max_spread=5.0)
    a = np.exp(log_a)
    b = tau_s * np.sqrt(1.0 + a * a)
    factors = s * s / (s * s + v) if s > 0 else np.zeros(m)
    f_tau = s_tau * s_tau / (s_tau * s_tau + v_tau) if s_tau > 0 else np.zeros(m)
    return a_u, b_u, a, b, {"spread_log_a": s, "mean_log_a": mu, "noise_sd_mean_log_a": float(np.sqrt(v_level)),
                            "curvature_sd_mean_log_a": float(np.sqrt(v_curv)), "noise_share_mean_log_a": noise_share,
                            "noise_bias_mean_log_a": bias_level,
                            "level_prior_conflict": conflict, "release_mean_log_a": x, "release_sd_mean_log_a": w,
                            "shrinkage": factors.tolist(),
                            "noise_sd_log_a": np.sqrt(v).tolist(), "spread_tau": s_tau,
                            "shrinkage_tau": f_tau.tolist(), "noise_sd_tau": np.sqrt(v_tau).tolist(),
                            "iterations": fit.iterations}, _laplace(fit)


def _inverse(H: np.ndarray) -> np.ndarray | None:
    """H⁻¹ where H is positive definite (with finite, positive variances), else None."""
    try:
        C = np.linalg.inv(H)
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(C)) or np.any(np.diag(C) <= 0) or np.any(np.linalg.eigvalsh(H) <= 0):
        return None
    return C


@one_blas_thread  # (2m + 1)² inverses and eigenvalues: OpenBLAS's threads spin on shared cores (4–7× the CPU)
def _laplace(fit) -> tuple[np.ndarray, np.ndarray | None, str]:
    """Each item's share that the release holds of the precision of log a_i at the fit (the
    objective's Newton matrix: data part over the whole, priors included; where that matrix is
    not positive definite, a fit that stopped short of a minimum in the valley toward λ → 1, the
    Gauss–Newton matrix's), which matrix gave it, and the Laplace posterior covariance of the fit's
    own model over (τ, log a, μ): the inverse of the Gauss–Newton matrix JᵀWJ plus the priors', its
    expected information.  The Newton matrix's residual curvature is the noise's where the noise
    swamps the pairs: its intervals of τ and b covered 0.86–0.90 at m = 200–300, and whether it
    was positive definite could turn on round-off (``docs/private_2pl.md`` §3, "The Laplace
    intervals' matrix").  (NaNs, None, "none") if neither matrix is positive definite; (shares, None,
    "newton") if only the Newton matrix is (the Gauss–Newton matrix is JᵀWJ plus the priors'
    positive definite Hessian, so only round-off could do that): then no Laplace intervals."""
    _, Hp = fit.hessian
    m = fit.tau.shape[1]
    k = np.arange(m, 2 * m)
    C = _inverse(fit.gauss_newton[0])
    for name, H in (("newton", fit.hessian[0][0]), ("gauss_newton", fit.gauss_newton[0])):
        if (C if name == "gauss_newton" else _inverse(H)) is None:  # (the Gauss–Newton inverse once)
            continue
        share = (np.diag(H)[k] - np.diag(Hp)[k]) / np.diag(H)[k]
        return share, C, name
    return np.full(m, np.nan), None, "none"


def _check_intervals(intervals: Any) -> None:
    if not isinstance(intervals, str) or intervals not in ("auto", "bootstrap", "laplace"):
        raise ValueError(f"intervals must be 'auto', 'bootstrap' or 'laplace', got {brief(intervals)}")


def estimate_2pl_from_release(
    release: TwoPLRelease,
    *,
    confidence: float = 0.95,
    n_boot: int = 200,
    seed: Any = None,
    intervals: str = "auto",
    progress: bool | None = None,
) -> TwoPLEstimate:
    """Discriminations and difficulties with intervals from a :class:`TwoPLRelease`.

    Pure post-processing (no privacy cost): a least-squares fit of the one-factor normal-ogive
    model to the noisy proportions and pair proportions, weighted by their sampling plus the
    known noise variance; empirical-Bayes shrinkage of log a toward a common value against the
    privacy noise (all a equal when their spread is not detectable); intervals by parametric
    bootstrap (data sets simulated from the fit, fresh noise of the released kind, refit; from
    :data:`LINEAR_REFITS_MIN_PERSONS` persons or :data:`LINEAR_REFITS_MIN_ITEMS` items each refit
    is one Gauss–Newton step whose Jacobian and factorisation all replicates share,
    :data:`BOOTSTRAP_REFITS`), normal quantiles on log a (centred at the unshrunk estimate, not
    bias-corrected: :data:`BIAS_CORRECT_LOG_A`) and on b and τ (bias-corrected), each interval
    widened where needed to hold the published (shrunk) estimate (``docs/private_2pl.md`` §3).
    A declared-MCAR release is fitted on the ratios s/a and D/C with per-coordinate n, and its
    bootstrap simulates the missingness too (§6).

    Parameters
    ----------
    release : TwoPLRelease
    confidence : float in (0, 1)
    n_boot : int
        Bootstrap replicates (≥ 20), or 0 to skip the intervals of either route (``ci`` and
        ``se`` are NaN).
    seed : int or SeedSequence, optional
        Seed of the bootstrap (ordinary randomness; it does not affect privacy), drawn from
        its child stream ``"estimate"`` as in :func:`private_2pl_estimate`: the seed of the release
        here reproduces ``private_2pl_estimate(X, seed=seed)`` exactly.
    intervals : {"auto", "bootstrap", "laplace"}
        How the intervals are formed: ``"bootstrap"`` (above); ``"laplace"``: the estimate ±
        z × the posterior SD of the fit's own model (its Gaussian likelihood of the noisy moments
        and its priors; the inverse of its Gauss–Newton matrix at the fit, delta method for b), no
        refits; ``"auto"`` (default): the Laplace intervals where the noise swamps the pairs (for
        the median item the release holds less than :data:`PRIOR_HELD_SHARE` of the precision of
        log a_i, the fit's priors the rest: there the bootstrap's refits are pinned by the priors
        and its intervals of a too narrow), the bootstrap elsewhere, except for each item whose
        own share is below it: the Laplace intervals (``docs/private_2pl.md`` §3, "Per item").
        ``info["intervals"]`` says which was used, ``info["laplace_items"]`` the items with the
        Laplace intervals, ``info["data_shares_log_a"]`` each item's share.
    progress : bool or None
        A progress bar on stderr counting the fits: the two to the release (per item and all a
        equal), the noise-variance refits, then the bootstrap's; ``None`` (default): only when
        stderr is a terminal.
    """
    check_release(release)  # one line for a malformed or mismatched release
    check_confidence(confidence)
    check_n_boot(n_boot)
    _check_intervals(intervals)
    ss = estimate_stream(seed)
    n = release.n_persons
    null = 2 * null_replicates(len(release.items), release.missing)
    total = 2 + null + int(n_boot)  # (the two point fits count: at m = 1000 they take ~20 s)
    tick = ticker(total, "2PL fit and intervals", unit="fits", enabled=resolve_progress(progress),
                  phase=lambda d: "point fit" if d < 2 else "noise variance" if d < 2 + null else "bootstrap")
    a_u, b_u, a, b, info, (shares, cov, curvature) = _point(release, tick)
    share = float(np.median(shares))  # the median item's
    m = a.size
    negative = negatively_keyed(*fit_inputs(release))  # from the release alone (post-processing)
    if negative.any():
        warnings.warn(f"item(s) {name_items(release.items, negative)} correlate negatively with the rest of the items "
                      "in the release: the model assumes positively keyed items (a > 0) and fits their a at about 0 "
                      "with a meaningless interval; reverse-score such an item (X[:, j] = 1 − X[:, j]) before the "
                      "release (docs/private_2pl.md §5)", UserWarning, stacklevel=user_stacklevel())
    if info["level_prior_conflict"]:
        warnings.warn(
            f"the release puts the items' common discrimination far from the level prior's "
            f"(log a = {info['release_mean_log_a']:.2f} ± {info['release_sd_mean_log_a']:.2f}, 2PNO scale; e.g. items "
            f"that agree almost perfectly): the prior sets the level (a shrunk to about "
            f"{np.exp(info['mean_log_a']):.3g}), so a and b are not identified by this release and their "
            "intervals span the unshrunk fit's and the estimate (docs/private_2pl.md §3, the level)",
            IdentifiabilityWarning, stacklevel=user_stacklevel())
    lam = a / np.sqrt(1.0 + a * a)  # the fit's loadings: λ_iλ_j its correlation of items i, j
    pi, pj = pair_index(m)
    hit = lam[pi] * lam[pj] >= CORRELATION_AT_BOUND
    at_bound = np.isin(np.arange(m), np.concatenate([pi[hit], pj[hit]]))
    if at_bound.any():
        warnings.warn(
            f"item(s) {name_items(release.items, at_bound)} correlate almost perfectly with another item in the fit "
            f"(λ_iλ_j ≥ {CORRELATION_AT_BOUND:g}, e.g. duplicated items): the release does not bound their a from "
            "above, so their a and b are not identified by this release and their intervals do not bound "
            "them; use their τ (fit.tau) as the difficulty (docs/private_2pl.md §3, the level)",
            IdentifiabilityWarning, stacklevel=user_stacklevel())
    z = float(stats.norm.isf((1.0 - confidence) / 2.0))  # (isf: finite for confidence within 1e-16 of 1)
    route = "none" if not n_boot else intervals
    if route == "auto":
        route = "laplace" if cov is not None and share < PRIOR_HELD_SHARE else "bootstrap"
    if route == "laplace" and cov is None:
        warnings.warn("intervals='laplace': the fit's curvature is not positive definite; the intervals "
                      "are the bootstrap's", PrivirtRuntimeWarning, stacklevel=user_stacklevel())
        route = "bootstrap"
    on_laplace = np.full(m, route == "laplace")
    if route == "bootstrap" and intervals == "auto" and cov is not None:
        # an item the release says (almost) nothing about gets the Laplace intervals, as every item
        # does where the median item is like it: its refits are pinned by the priors (§3)
        on_laplace = shares < PRIOR_HELD_SHARE
    refits = "full" if release.missing == "mcar" else BOOTSTRAP_REFITS
    if refits == "auto":
        # by m only where the release holds the discriminations (a share ≥ ½ from the Newton
        # matrix): where that matrix is indefinite the fit stopped in the valley toward λ → 1, and
        # one linearised step from the simulation point misses the refits' pull there (coverage
        # of a 0.00 and of b 0.11–0.14 at (500, 200, 0.3))
        held = bool(curvature == "newton" and np.isfinite(share) and share >= PRIOR_HELD_SHARE)
        # (2 items: full, the fit's residual given the totals, fit_factor's, is not linearised)
        refits = "one_step" if m > 2 and (n >= LINEAR_REFITS_MIN_PERSONS or (m >= LINEAR_REFITS_MIN_ITEMS and held)) \
            else "full"
    if route == "laplace":
        se_la, se_b, se_t, a_lo, a_hi, b_lo, b_hi, t_lo, t_hi = laplace_intervals(cov, a, b, z)
    elif route == "bootstrap":
        rng = numpy_rng(ss, "bootstrap")
        if release.missing == "mcar":  # the missingness simulated too (§6.3)
            tb, pb, nb, sig_tb, sig_pb = bootstrap_inputs(rng, release, a, b, int(n_boot))
        else:
            tb, pb = simulate_statistics(rng, a, b, n, int(n_boot))
            tb += rng.normal(0.0, release.sigma_totals, tb.shape)
            step = max(1, (1 << 23) // pb.shape[1])  # rows at a time: the same draws as one (reps, P) call,
            for r in range(0, pb.shape[0], step):    # without a second (reps, P) array in memory
                pb[r:r + step] += rng.normal(0.0, release.sigma_pairs, pb[r:r + step].shape)
            nb, sig_tb, sig_pb = n, release.sigma_totals, release.sigma_pairs
        # refits start at the values the replicates were simulated from
        x0 = np.concatenate([b / np.sqrt(1.0 + a * a), np.log(a), [np.log(a).mean()]])
        if refits != "full":
            fb = linear_refits(tb, pb, nb, sig_tb, sig_pb, x0, steps=_LINEAR_STEPS[refits], tick=tick)
        else:
            fb = fit_factor(tb, pb, nb, sig_tb, sig_pb, start=x0, tick=tick)
        ab, bb = to_2pno(fb.tau, fb.lam)
        err_la = np.log(ab) - np.log(a)[None, :]
        err_b = bb - b[None, :]
        err_t = fb.tau - (b / np.sqrt(1.0 + a * a))[None, :]
        se_la, se_b, se_t = err_la.std(axis=0, ddof=1), err_b.std(axis=0, ddof=1), err_t.std(axis=0, ddof=1)
        # log a: about the unshrunk estimate itself.  The replicates' mean error is the bias at
        # the simulation point, which moves with the estimate: subtracting it stretched the
        # estimate's deviations from the common value and added their noise (coverage 0.92 at
        # 50 % missing, ε = 0.3: §6.3); b and τ keep the bias correction
        c_la = np.log(a_u) - (err_la.mean(axis=0) if BIAS_CORRECT_LOG_A else 0.0)
        c_b = b_u - err_b.mean(axis=0)
        c_t = b_u / np.sqrt(1.0 + a_u * a_u) - err_t.mean(axis=0)
        # each widened to hold the published (shrunk) estimate (§3, "Intervals")
        a_lo, a_hi, b_lo, b_hi, t_lo, t_hi = bootstrap_intervals((c_la, c_b, c_t), (se_la, se_b, se_t), a, b, z)
        if on_laplace.any():
            out = zip((se_la, se_b, se_t, a_lo, a_hi, b_lo, b_hi, t_lo, t_hi), laplace_intervals(cov, a, b, z))
            se_la, se_b, se_t, a_lo, a_hi, b_lo, b_hi, t_lo, t_hi = (np.where(on_laplace, v, u) for u, v in out)
    else:
        se_la = se_b = se_t = a_lo = a_hi = b_lo = b_hi = t_lo = t_hi = np.full(m, np.nan)
    tick(at=total)  # the Laplace route and n_boot = 0 refit nothing after the noise variance
    items = release.items
    info.update({"n_boot": int(n_boot) if route == "bootstrap" else 0, "confidence": float(confidence),
                 "totals_share": release.totals_share, "bootstrap_seed": describe_seed(ss), "intervals": route,
                 "data_share_log_a": share, "laplace_curvature": curvature,
                 "data_shares_log_a": shares.tolist(), "laplace_items": items[on_laplace].tolist(),
                 "negative_items": items[negative].tolist(), "correlation_at_bound_items": items[at_bound].tolist(),
                 "bootstrap_refits": refits if route == "bootstrap" else "full"})

    def ser(v, name):
        return pd.Series(np.asarray(v, float), index=items.copy(), name=name)

    return TwoPLEstimate(
        a=ser(a, "a"), b=ser(b, "b"),
        ci={"a": pd.DataFrame({"lo": a_lo, "hi": a_hi}, index=items.copy()),
            "b": pd.DataFrame({"lo": b_lo, "hi": b_hi}, index=items.copy()),
            "tau": pd.DataFrame({"lo": t_lo, "hi": t_hi}, index=items.copy())},
        se={"log_a": ser(se_la, "se_log_a"), "b": ser(se_b, "se_b"), "tau": ser(se_t, "se_tau")},
        a_unshrunk=ser(a_u, "a_unshrunk"), b_unshrunk=ser(b_u, "b_unshrunk"),
        privacy=release.privacy, release=release, info=info,
    )


@reports_spends
def private_2pl_estimate(
    X: ResponsesLike,
    *,
    epsilon: float,
    delta: float | None = None,
    ledger: Any = None,
    seed: Any = None,
    items: Sequence[Any] | None = None,
    confidence: float = 0.95,
    n_boot: int = 200,
    note: str = "",
    n_persons: int | None = None,
    missing: str = "none",
    intervals: str = "auto",
    progress: bool | None = None,
    engine: str = "local",
    client: Any = None,
) -> TwoPLEstimate:
    """Private 2PNO discriminations and difficulties with intervals: :func:`release_2pl` then
    :func:`estimate_2pl_from_release`.

    Parameters are those of the two functions; ``seed`` seeds both the noise (then the result
    is NOT private) and the bootstrap.  For the 2PL (logistic) scale multiply a and b by 1.702.

    Examples
    --------
    >>> import privirt
    >>> X, theta, a, b = privirt.simulate_2pno(5000, 10, seed=1)
    >>> fit = privirt.private_2pl_estimate(X, epsilon=1.0)   # doctest: +SKIP
    >>> fit.to_frame().columns.tolist()                       # doctest: +SKIP
    ['a', 'a_lo', 'a_hi', 'b', 'b_lo', 'b_hi']
    """
    check_local_engine(X, engine, client)
    check_confidence(confidence)
    check_n_boot(n_boot)
    _check_intervals(intervals)
    progress = resolve_progress(progress)  # checked before anything is spent
    ss = seed_sequence(seed)
    release = _release_2pl(X, epsilon=epsilon, delta=delta, ledger=ledger, seed=ss, items=items, note=note,
                           n_persons=n_persons, missing=missing, engine=engine, client=client, fit_follows=True)
    return estimate_2pl_from_release(release, confidence=confidence, n_boot=n_boot, intervals=intervals,
                                     seed=ss, progress=progress)

"""Bootstrap intervals for Algorithm 2: post-processing of the released noisy counts.

A parametric bootstrap that uses only what was released (the noisy counts), the public n,
the comparison graph and the known noise law:

1. fit the mean μ and spread τ of normal abilities to the released counts given a β
   (least squares of Y_ij against n·E[p_i(1 − p_j)], Gauss–Hermite quadrature);
2. simulate persons from (β, μ, τ), compute their exact counts (persons, not independent
   pairs, so the dependence between pairs of one person is kept), add fresh noise of the
   released kind and scale;
3. re-run the same estimator (clipping, graph, λ) on every replicate (batched);
4. calibrate the bootstrap's truth β₀ so that the replicates average β̂ (clipping attenuates
   the estimate), then invert the linearised bias: centre = β₀ + (β̂ − mean β*)/a,
   se = sd(β*)/a, ci = centre ± z·se, with a the attenuation slope.

The maths and its limits are in ``docs/intervals.md``.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from ..._progress import ticker
from ..._seeds import describe_seed, numpy_rng
from ..._threads import one_blas_thread
from ...exceptions import NoiseDominatesWarning, user_stacklevel, warn_one_person
from .ability import _pair_means, fit_ability_normal
from ._design import GraphDesign, graph_design
from ._linboot import linear_point, one_step_batch
from .noisy_likelihood import noise_aware_batch, noise_aware_se0

__all__ = [
    "DEFAULT_N_BOOT",
    "default_n_boot",
    "MAX_SIMULATED_PERSONS",
    "BootstrapIntervals",
    "counts_intervals",
    "spectral_batch",
]

#: Default number of bootstrap replicates (the totals estimator's default too).  Randomized
#: response gets no intervals (``docs/intervals.md``: a bootstrap of the debiased estimate
#: under-covers at the usual ε).
DEFAULT_N_BOOT: int = 200
#: Beyond this many items the default falls as DEFAULT_N_BOOT·(FULL_BOOT_ITEMS/m)² (a replicate
#: costs m²), to no fewer than MIN_DEFAULT_N_BOOT: :func:`default_n_boot`.
FULL_BOOT_ITEMS: int = 1000
MIN_DEFAULT_N_BOOT: int = 50
#: A replicate simulates k = min(n, MAX_SIMULATED_PERSONS, max(MIN_SIMULATED_PERSONS,
#: SIMULATION_WORK / m²)) persons; when k < n it rescales their fluctuation around the model
#: mean by √(n / k) (central limit theorem; docs/intervals.md).  Their counts cost k·m² each.
MAX_SIMULATED_PERSONS: int = 20_000
MIN_SIMULATED_PERSONS: int = 1_000
#: Beyond 100 items the floor falls as 1000·100/m (a replicate's counts cost k·m², its noise
#: and chain m² each), to no fewer than this many persons.
FEWEST_SIMULATED_PERSONS: int = 100
SIMULATION_WORK: int = 8_000_000
#: Secant steps (at most) that find the bootstrap's truth, the replicates of each evaluation,
#: and the step (in logits) below which they stop.
CALIBRATION_STEPS: int = 4
CALIBRATION_REPLICATES: int = 50
CALIBRATION_TOL: float = 0.02
#: Beyond 100 items an evaluation takes CALIBRATION_REPLICATES·100/m replicates, no fewer than
#: this: the attenuation slope pools the m items (its Monte-Carlo error falls as 1/√(R·m)),
#: and an item's own error in the calibrated truth cancels to first order in the interval's
#: centre, which the bootstrap's fresh replicates correct (``docs/intervals.md``).
CALIBRATION_MIN_REPLICATES: int = 10
#: Smallest attenuation slope used (the intervals widen by 1/slope), and the largest |β| the
#: calibrated truth may take (logits).
MIN_SLOPE: float = 0.05
MAX_LOGIT: float = 20.0
#: The ratio slope's Monte-Carlo standard error above which it is re-measured by a probe, and
#: the probe's spread (SD, logits): where the truth's items are nearly alike the ratio
#: (mean·β₀)/(β₀·β₀) divides Monte-Carlo noise by a small number, so the slope is measured
#: instead as the common-random-numbers difference F(β₀ + u) − F(β₀) along a direction u of
#: this spread (docs/intervals.md §3b).
SLOPE_SE_MAX: float = 0.025
PROBE_SPREAD: float = 1.0
#: Convergence tolerance of the noise-aware fit inside the bootstrap (largest step, logits; the
#: single fit uses 1e-8): ``min(BOOT_TOL, BOOT_TOL_SE · noise_aware_se0(n, m, ν))``
#: (:func:`boot_tol`, public).  Fisher scoring converges linearly (a step's size falls by
#: ρ ≈ 0.32–0.43 a step at n ≥ 2000, m = 20–2000; up to ρ ≈ 0.68 at 1000 × 50, ε = 0.3), so a
#: replicate stopped there is within about ρ/(1 − ρ) ≤ 2.1 tolerances of its fixed point
#: (measured: at most 0.63 of one): about 2 % of the predicted se, against an endpoint's
#: Monte-Carlo error of 12–24 % of the se (:func:`default_n_boot`).  At m = 2000 a
#: replicate takes 14 Fisher steps to 1e-4 against 19 to 1e-6 (each an m × m Cholesky factor
#: and its inverse).
BOOT_TOL: float = 1e-4
BOOT_TOL_SE: float = 0.01
#: The noise-aware bootstrap's refits: ``"full"`` Fisher scoring to :func:`boot_tol`; ``"one_step"``
#: one step from the simulation law's fit, its Jacobian factorised once for all replicates
#: (:mod:`._linboot`); ``"auto"``: ``"one_step"`` from :data:`LINEAR_REFITS_MIN_ITEMS` items (public
#: m): same coverage (±0.008) at m = 100–1000, 158 -> 45 CPU s at 10⁴ × 1000 (docs/intervals.md §4c).
BOOTSTRAP_REFITS: str = "auto"
LINEAR_REFITS_MIN_ITEMS: int | None = 1000
#: From this many items the bootstrap's spectral chains are solved by power iteration (m² a
#: step) rather than a dense solve (⅔ m³), to this largest change of log x between steps, for
#: at most this many steps (then densely).
POWER_FROM_ITEMS: int = 64
POWER_TOL: float = 1e-10
POWER_MAX_ITER: int = 500
#: From this many items the spectral bootstrap's replicates (counts, noise, chain and power
#: iteration) are built in single precision (half the memory traffic of every m² pass;
#: counts are exact integers in float32 up to 2²⁴), the Gaussian noise drawn from a table of
#: :data:`NOISE_TABLE_BITS`-bit normal quantiles, and the power iteration stopped at
#: :data:`POWER_TOL32` (the replicates move by ~1e-5 logits, far below their spread).
SINGLE_FROM_ITEMS: int = 64
POWER_TOL32: float = 1e-5
NOISE_TABLE_BITS: int = 16
#: Count matrices (replicates × m²) held at once: one 5000-item replicate at a time.
_COUNT_CELLS: int = 1 << 22
#: Cells of bootstrap noise drawn at once (table look-up, :func:`_table_noise`).
_NOISE_CHUNK: int = 1 << 18
#: Cells (persons × items × replicates) simulated at once.
_CHUNK_CELLS: int = 2_000_000


@dataclass(frozen=True)
class BootstrapIntervals:
    """Standard errors and interval bounds (arrays in item order) and the run's facts."""

    se: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    info: dict


# ---------------------------------------------------------------------------------------
# 2. simulation
def default_n_boot(m: int) -> int:
    """The default number of bootstrap replicates at ``m`` items (public): 200 up to 1000 items,
    then 200·(1000/m)², no fewer than 50 (2·10⁸ replicate cells, m² each).

    An endpoint's Monte-Carlo error is about se·√((1 + z²/2)/R) (the centre's se/√R and the
    se's own 1/√(2R)): 0.12·se at R = 200, 0.24·se at R = 50, which costs a nominal 95 %
    interval about 0.25 and 0.8 points of coverage (simulated, ``docs/intervals.md`` §3); it
    does not depend on n or ε.
    """
    if m <= FULL_BOOT_ITEMS:
        return DEFAULT_N_BOOT
    return max(MIN_DEFAULT_N_BOOT, int(DEFAULT_N_BOOT * (FULL_BOOT_ITEMS / m) ** 2))


def boot_tol(n: int, m: int, noise_var: float) -> float:
    """The noise-aware bootstrap's convergence tolerance at ``n`` persons, ``m`` items and
    noise variance ``noise_var`` (public): :data:`BOOT_TOL`, or :data:`BOOT_TOL_SE` times the
    predicted standard error :func:`~privirt.private.counts.noisy_likelihood.noise_aware_se0`
    where that is smaller."""
    return float(min(BOOT_TOL, BOOT_TOL_SE * noise_aware_se0(int(n), int(m), float(noise_var))))


def calibration_replicates(m: int) -> int:
    """Replicates per evaluation of the calibration at ``m`` items (public)."""
    if m <= 100:
        return CALIBRATION_REPLICATES
    return max(CALIBRATION_MIN_REPLICATES, CALIBRATION_REPLICATES * 100 // m)


def bootstrap_refits(m: int) -> str:
    """The noise-aware bootstrap's refits at ``m`` items (public): :data:`BOOTSTRAP_REFITS`."""
    if BOOTSTRAP_REFITS not in ("auto", "full", "one_step"):
        raise ValueError(f"BOOTSTRAP_REFITS must be 'auto', 'full' or 'one_step', got {BOOTSTRAP_REFITS!r}")
    if BOOTSTRAP_REFITS != "auto":
        return BOOTSTRAP_REFITS
    return "one_step" if LINEAR_REFITS_MIN_ITEMS is not None and m >= LINEAR_REFITS_MIN_ITEMS else "full"


def _simulated_persons(n: int, m: int) -> int:
    floor = MIN_SIMULATED_PERSONS if m <= 100 else max(FEWEST_SIMULATED_PERSONS, MIN_SIMULATED_PERSONS * 100 // m)
    work = max(floor, SIMULATION_WORK // max(1, m * m))
    return int(min(n, MAX_SIMULATED_PERSONS, work))


def _responses(rng: np.random.Generator, beta: np.ndarray, mu: float, tau: float, r: int, k: int) -> np.ndarray:
    """r × k × m float32 0/1 responses of simulated persons."""
    theta = rng.normal(mu, tau, size=(r, k, 1)).astype(np.float32)
    p = special.expit(theta - beta.astype(np.float32)[None, None, :])
    return (rng.random(p.shape, dtype=np.float32) < p).astype(np.float32)


def _exact_counts(X: np.ndarray, dtype: type = np.float64, scale: float = 1.0,
                  out: np.ndarray | None = None) -> np.ndarray:
    """Y_ij = Σ_l X_li (1 − X_lj) = s_i − (XᵀX)_ij per replicate: (r, k, m) -> (r, m, m) float64
    (or ``dtype``: float32 holds them exactly up to 2²⁴ persons; times ``scale`` and into
    ``out``, float32 only: a reused buffer spares the page faults of a fresh m² array)."""
    if dtype == np.float32:  # one product Xᵀ(1 − X): its diagonal is 0 for 0/1 responses
        Xt = X.transpose(0, 2, 1)
        return np.matmul(Xt if scale == 1.0 else Xt * np.float32(scale), 1.0 - X, out=out)
    s = X.sum(axis=1, dtype=dtype)
    Y = np.subtract(s[:, :, None], np.matmul(X.transpose(0, 2, 1), X), dtype=np.float64)
    idx = np.arange(X.shape[2])
    Y[:, idx, idx] = 0.0
    return Y


def _rescale(Y: np.ndarray, n: int, k: int, mean_per_person: np.ndarray) -> np.ndarray:
    """Counts of k simulated persons -> counts of n persons (identity when k = n)."""
    if k == n:
        return Y
    c = np.sqrt(n / k)
    Y *= Y.dtype.type(c)  # in place: n·f + c·(Y − k·f) = c·Y + (n − c·k)·f
    Y += ((n - c * k) * mean_per_person).astype(Y.dtype, copy=False)
    return Y


def _replicate_batches(rng: np.random.Generator, beta: np.ndarray, mu: float, tau: float, n: int,
                       reps: int):
    """Yield (start, X) batches of simulated responses (k persons each) and k."""
    m = beta.size
    k = _simulated_persons(n, m)
    step = max(1, min(_CHUNK_CELLS // (k * m), _COUNT_CELLS // (m * m)))
    for a in range(0, reps, step):
        r = min(reps, a + step) - a
        yield a, _responses(rng, beta, mu, tau, r, k), k


def _noise(rng: np.random.Generator, kind: str, scale: float, shape: tuple[int, ...]) -> np.ndarray:
    """Fresh noise of the released kind: discrete Gaussian (σ; drawn as a rounded normal) or
    discrete Laplace (scale b; exactly, as a difference of two geometric variables)."""
    if kind == "sigma":
        if scale < 2.0**20:  # single precision: exact integers far beyond 6σ, half the cost
            z = rng.standard_normal(shape, dtype=np.float32)
            z *= np.float32(scale)
            return np.rint(z, out=z)
        return np.rint(rng.normal(0.0, scale, shape))
    if kind == "scale":
        p = -np.expm1(-1.0 / scale)
        return (rng.geometric(p, shape) - rng.geometric(p, shape)).astype(np.float64)
    raise ValueError(f"no bootstrap for noise parameter {kind!r}")


@functools.lru_cache(maxsize=1)
def _normal_table() -> np.ndarray:
    """The 2^b mid-quantiles Φ⁻¹((i + ½)/2^b) of the standard normal, rescaled to variance 1."""
    q = special.ndtri((np.arange(2**NOISE_TABLE_BITS) + 0.5) / 2**NOISE_TABLE_BITS)
    return q / np.sqrt(np.mean(q * q))


def _table_noise(rng: np.random.Generator, sigma: float, out: np.ndarray, *,
                 rates: float | None = None) -> np.ndarray:
    """Add rounded N(0, σ²) noise to the float32 array ``out`` (in place) by table look-up;
    with ``rates`` = λ, then clip at zero and add λ in the same pass (a chunk at a time, while it
    is in cache): the spectral chain's rates on a complete graph, its diagonal left to clear.

    One 16-bit index per cell (four from each 64-bit output of the generator) into the
    equiprobable table of :func:`_normal_table` scaled by σ and rounded: before rounding its
    distribution function is within 1.01·10⁻⁵ of the normal's (the table stops at ±4.32σ, a
    mass of 1.5·10⁻⁵ left out), its variance exactly σ², at about a third of the cost of
    normal deviates (the bootstrap's
    noise is post-processing: it needs the released law, not privacy-grade sampling;
    ``docs/intervals.md``)."""
    table = np.rint(np.float32(sigma) * _normal_table().astype(np.float32))
    flat = out.reshape(-1)  # a view (``out`` is contiguous)
    buf = np.empty(min(flat.size, _NOISE_CHUNK), dtype=np.float32)
    for a in range(0, flat.size, _NOISE_CHUNK):  # in chunks that stay in cache
        b = min(flat.size, a + _NOISE_CHUNK)
        idx = rng.bit_generator.random_raw((b - a + 3) // 4).view(np.uint16)[:b - a]
        np.take(table, idx, out=buf[:b - a])
        chunk = flat[a:b]
        chunk += buf[:b - a]
        if rates is not None:
            np.maximum(chunk, 0.0, out=chunk)
            chunk += np.float32(rates)
    return out


# ---------------------------------------------------------------------------------------
# 3. the estimator, batched
def spectral_batch(Y: np.ndarray, graph: np.ndarray, regularization: float = 1.0, *,
                   method: str = "auto", start: np.ndarray | None = None, rates: bool = False) -> np.ndarray:
    """Spectral estimates of a stack of counts (R, m, m) on ``graph``: (R, m), centred.

    The same chain as :func:`privirt.rasch.spectral.spectral_from_counts` with a ``graph``, λ on
    every edge and ``normalizer="max"``: the common normaliser d scales the generator but not
    its stationary distribution, so π solves π(D − M) = 0, Σπ = 1 (D = diag of row sums), and
    β = log π − mean(log π).  ``Y`` must be non-negative (clipped).

    ``method="solve"``: one stacked dense solve (⅔ m³ per replicate).  ``method="power"``:
    power iteration on the jump chain P = D⁻¹M, whose stationary x satisfies π ∝ x / d,
    started at ``start`` (β of a nearby chain, e.g. the bootstrap's truth) or uniform: m² per
    step, and the dense chains of a release mix in a few steps (replicates that have not
    converged after :data:`POWER_MAX_ITER` steps, e.g. a periodic chain on a bipartite graph,
    are solved densely).  ``"auto"``: power iteration from :data:`POWER_FROM_ITEMS` items.
    A float32 ``Y`` is overwritten by the chain's rates and iterated in single precision to
    :data:`POWER_TOL32` (the bootstrap's large-m path); float64 ``Y`` is left alone.
    ``rates=True``: a float32 ``Y`` on the complete graph already holds max(Y, 0) + λ (its
    diagonal is cleared here).
    """
    G = np.asarray(graph, dtype=bool)
    m = G.shape[0]
    single = Y.dtype == np.float32
    if method == "auto":
        method = "power" if m >= POWER_FROM_ITEMS else "solve"
    if single:  # in place: Y becomes the chain's rates
        M = Y
        if rates:
            M[:, np.arange(m), np.arange(m)] = 0.0
        elif _complete(G):  # only the diagonal is off the graph
            M += np.float32(regularization)
            M[:, np.arange(m), np.arange(m)] = 0.0
        else:
            M *= G[None]
            M += np.where(G, np.float32(regularization), np.float32(0.0))[None]
    else:
        M = np.where(G[None], Y, 0.0)
        M += np.where(G, regularization, 0.0)[None]
    if method == "solve":
        return _solve_chain(M.astype(np.float64, copy=False))
    tol = POWER_TOL32 if single else POWER_TOL
    d = M.sum(axis=2)  # (R, m)
    R = M.shape[0]
    if start is None:
        pi = np.full((R, m), 1.0 / m)
    else:
        e = np.exp(np.asarray(start, dtype=float) - np.max(start))
        pi = np.broadcast_to(e / e.sum(), (R, m)).copy()
    x = (pi * d).astype(M.dtype)
    x /= x.sum(axis=1, keepdims=True)
    logx = np.log(np.clip(x, 1e-300 if not single else 1e-38, None))
    todo = np.arange(R)
    for _ in range(POWER_MAX_ITER):
        # every replicate steps until all have converged (a converged chain only moves by
        # less than tol): M[todo] would copy the stack each step
        xn = np.einsum("ri,rij->rj", x / d, M)  # (einsum: 4× a stacked matmul's speed here)
        xn /= xn.sum(axis=1, keepdims=True)
        ln = np.log(np.clip(xn, 1e-300 if not single else 1e-38, None))
        change = np.max(np.abs(ln - logx), axis=1)
        x, logx = xn, ln
        todo = np.nonzero(change >= tol)[0]
        if todo.size == 0:
            break
    beta = logx.astype(np.float64) - np.log(d.astype(np.float64))
    if todo.size:
        beta[todo] = _solve_chain(M[todo].astype(np.float64))
    return beta - beta.mean(axis=1, keepdims=True)


def _complete(G: np.ndarray) -> bool:
    """Whether the boolean adjacency ``G`` is the complete graph (no self-loops)."""
    m = G.shape[0]
    return int(G.sum()) == m * (m - 1) and not G.diagonal().any()


def _solve_chain(M: np.ndarray) -> np.ndarray:
    """Centred log stationary distributions of the chains with rates ``M`` (R, m, m), densely."""
    m = M.shape[1]
    L = -M
    idx = np.arange(m)
    L[:, idx, idx] = M.sum(axis=2)
    A = L.transpose(0, 2, 1).copy()
    A[:, -1, :] = 1.0
    b = np.zeros((A.shape[0], m, 1))
    b[:, -1, 0] = 1.0
    pi = np.linalg.solve(A, b)[..., 0]
    pi = np.clip(pi, 1e-300, None)
    beta = np.log(pi)
    return beta - beta.mean(axis=1, keepdims=True)


# ---------------------------------------------------------------------------------------
# 4. the intervals
def _replicates(rng: np.random.Generator, truth: np.ndarray, Y_noisy: np.ndarray, G: np.ndarray, n: int,
                reps: int, noise_parameter: str, noise_value: float,
                regularization: float, estimator: str = "spectral",
                noise_var: float | None = None, on_batch=None,
                ability: tuple[float, float] | None = None,
                design: GraphDesign | None = None, refits: str = "full") -> tuple[np.ndarray, float, float]:
    """``reps`` estimates from data simulated at ``truth`` (abilities fitted to the release):
    the spectral estimate on the clipped counts, or the noise-aware estimate on the
    unclipped ones (``estimator="noise_aware"``, noise variance ``noise_var``).  ``on_batch(r)``,
    if given, is called after each batch of ``r`` replicates (progress); ``ability`` = (μ, τ)
    fitted at a nearby truth starts the ability fit; ``design`` = ``graph_design(G)`` (built
    here when not given) serves all the noise-aware fits, refitted as ``refits`` says
    (:data:`BOOTSTRAP_REFITS`)."""
    mu, tau = fit_ability_normal(Y_noisy, G, truth, n, x0=ability)
    if estimator == "noise_aware" and design is None:
        design = graph_design(G)
    tol = boot_tol(n, truth.size, noise_var) if estimator == "noise_aware" else None  # public: once
    mean_pp = _pair_means(truth, mu, tau)
    point = linear_point(n * mean_pp, design, float(noise_var), tol=tol) \
        if estimator == "noise_aware" and refits == "one_step" else None
    out = np.empty((reps, truth.size))
    single = estimator == "spectral" and truth.size >= SINGLE_FROM_ITEMS
    table = single and noise_parameter == "sigma" and noise_value < 2.0**20
    fused = table and _complete(G)  # noise, clipping and λ in one pass
    if single:  # the rescaling folded into the counts' product: c·Xᵀ(1 − X) + (n − c·k)·f
        k = _simulated_persons(n, truth.size)
        c = np.float32(np.sqrt(n / k))
        offset = None if k == n else ((n - float(c) * k) * mean_pp).astype(np.float32)
        buf: np.ndarray | None = None
    for a, X, k in _replicate_batches(rng, truth, mu, tau, n, reps):
        if single:
            if buf is None or buf.shape[0] < X.shape[0]:
                buf = np.empty((X.shape[0], truth.size, truth.size), dtype=np.float32)
            Y = _exact_counts(X, np.float32, scale=float(c), out=buf[:X.shape[0]])
            if offset is not None:
                Y += offset
        else:
            Y = _rescale(_exact_counts(X), n, k, mean_pp)
        if table:
            _table_noise(rng, noise_value, Y, rates=regularization if fused else None)
        else:
            Y += _noise(rng, noise_parameter, noise_value, Y.shape)
        if point is not None:
            out[a:a + X.shape[0]] = one_step_batch(np.where(G[None], Y, 0.0), point, design,
                                                   float(noise_var), tol=tol)
        elif estimator == "noise_aware":
            out[a:a + X.shape[0]] = noise_aware_batch(np.where(G[None], Y, 0.0), G, float(noise_var),
                                                      tol=tol, design=design)
        else:
            if not fused:
                np.maximum(Y, 0.0, out=Y)
            out[a:a + X.shape[0]] = spectral_batch(Y, G, regularization, start=truth, rates=fused)
        if on_batch is not None:
            on_batch(X.shape[0])
    return out, mu, tau


def _raw_slope(mean: np.ndarray, truth: np.ndarray) -> float:
    """Attenuation: least-squares slope of the replicates' mean on the (centred) truth."""
    ss = float(truth @ truth)
    if ss < 1e-12:
        return 1.0
    return float((mean @ truth) / ss)


def _ratio_slope_se(var: np.ndarray, truth: np.ndarray, reps: int) -> float:
    """Monte-Carlo standard error of :func:`_raw_slope` from ``reps`` replicates whose
    per-item variances are ``var`` (independent items, to first order)."""
    ss = float(truth @ truth)
    if ss < 1e-12:
        return float("inf")
    return float(np.sqrt((truth**2 @ var) / reps) / ss)


def _probe_direction(truth: np.ndarray) -> np.ndarray:
    """The probe's direction: the truth's own profile where it has spread, else a public
    ramp; centred and scaled to :data:`PROBE_SPREAD`."""
    u = truth - truth.mean()
    if u.std() < 0.1 * PROBE_SPREAD:
        u = np.linspace(-1.0, 1.0, truth.size)
    sd = u.std()
    return u * (PROBE_SPREAD / sd) if sd > 0 else u


def _slope_of(raw: float) -> float:
    """A slope from :func:`_raw_slope` kept in [:data:`MIN_SLOPE`, 2]."""
    return float(np.clip(raw, MIN_SLOPE, 2.0))


def _unbounded(m: int, slope: float) -> np.ndarray:
    """The intervals when the estimate does not respond to the difficulties (attenuation below
    :data:`MIN_SLOPE`): unbounded, with a :class:`~privirt.exceptions.NoiseDominatesWarning`."""
    warnings.warn(
        f"the spectral estimate does not respond to the difficulties at this noise (attenuation "
        f"{slope:.3f} < {MIN_SLOPE}: the estimate is noise): its intervals are unbounded (se = inf); "
        "use more persons, a larger epsilon or private_totals_estimate",
        NoiseDominatesWarning, stacklevel=user_stacklevel())
    return np.full(m, np.inf)


@one_blas_thread  # batched small solves: BLAS's threads only cost on shared cores (privirt._threads)
def counts_intervals(Y_noisy: np.ndarray, graph: np.ndarray, beta_hat: np.ndarray, n: int, *,
                     noise_parameter: str, noise_value: float, regularization: float = 1.0,
                     confidence: float = 0.95, n_boot: int = DEFAULT_N_BOOT,
                     seed: np.random.SeedSequence | None = None, estimator: str = "spectral",
                     noise_var: float | None = None, progress: bool = False) -> BootstrapIntervals:
    """Intervals for the estimate from noisy counts (Gaussian or Laplace noise): the spectral
    estimate on the clipped counts (default) or the noise-aware one (``estimator="noise_aware"``;
    ``noise_var`` the variance of the released noise).

    Parameters
    ----------
    Y_noisy : ndarray (m, m)
        The released noisy counts (unclipped; zero outside the graph).
    graph : ndarray of bool (m, m)
        The public comparison graph.
    beta_hat : ndarray (m,)
        The estimate the intervals are for (spectral on the clipped counts, centred).
    n : int
        The public number of persons.
    noise_parameter, noise_value : str, float
        ``"sigma"`` (discrete Gaussian) or ``"scale"`` (discrete Laplace) and its value.
    regularization : float
        λ of the estimator.
    confidence : float in (0, 1)
    n_boot : int ≥ 20
    seed : SeedSequence, optional
        Seed of the bootstrap (ordinary randomness; not privacy noise).
    progress : bool
        Draw a progress bar on stderr (calibration replicates, then the bootstrap's).
    """
    G = np.asarray(graph, dtype=bool)
    beta_hat = np.asarray(beta_hat, dtype=float)
    Y_noisy = np.asarray(Y_noisy, dtype=float)  # once, not in every ability fit
    rng = numpy_rng(seed, "bootstrap")
    args = (Y_noisy, G, n)
    if estimator not in ("spectral", "noise_aware"):
        raise ValueError(f"estimator must be 'spectral' or 'noise_aware', got {estimator!r}")
    if estimator == "noise_aware" and noise_var is None:
        raise ValueError("noise_var is required with estimator='noise_aware'")
    kw = {"noise_parameter": noise_parameter, "noise_value": noise_value, "regularization": regularization,
          "estimator": estimator, "noise_var": noise_var,
          # the graph's part of the noise-aware fits, once for all replicates of all evaluations
          "design": graph_design(G) if estimator == "noise_aware" else None,
          "refits": bootstrap_refits(beta_hat.size) if estimator == "noise_aware" else "full"}
    if n < 2:  # public n: one person identifies no difference between items (as the totals path)
        note = warn_one_person("the spectral estimate")
        se = np.full(beta_hat.size, np.inf)
        return BootstrapIntervals(se=se, lo=-se, hi=se, info={
            "method": "none (one person)", "bootstrap_estimator": estimator, "n_boot": int(n_boot),
            "confidence": confidence, "informative": False, "centre": beta_hat.tolist(), "note": note})
    # the bootstrap's truth: the β whose replicates average β̂ (clipping attenuates the
    # estimate, and more so at small ε).  F(β₀) = mean of CALIBRATION_REPLICATES estimates
    # drawn at β₀ with common random numbers (one fixed seed), so F is smooth in β₀ and
    # F(β₀) = β̂ is solved by secant steps with one attenuation slope for all items.
    # The last secant step's truth is not evaluated: the bootstrap's own replicates there
    # make the final correction (the centre below), so CALIBRATION_STEPS evaluations in all.
    cal_seed = int(rng.integers(2**63))
    cal_reps = calibration_replicates(beta_hat.size)
    cal_total = CALIBRATION_STEPS * cal_reps
    tick = ticker(cal_total + int(n_boot), "bootstrap intervals", unit="replicates", enabled=progress,
                  phase=lambda d: "calibration" if d < cal_total else "replicates")

    tick(at=0)  # drawn before the first ability fit (seconds at thousands of items)
    ability: list = [None]  # (μ, τ) of the last truth: starts the next ability fit

    var: list = [None]  # the replicates' per-item variance at the last evaluation

    def F(b: np.ndarray, count: bool = True) -> np.ndarray:
        reps, mu_, tau_ = _replicates(np.random.default_rng(cal_seed), b, *args, cal_reps, **kw,
                                      on_batch=tick if count else None, ability=ability[0])
        ability[0] = (mu_, tau_)
        var[0] = reps.var(axis=0, ddof=1) if cal_reps > 1 else np.zeros(b.size)
        return reps.mean(axis=0)

    def probe(b: np.ndarray, mean_b: np.ndarray | None = None) -> float:
        """The slope as a common-random-numbers difference along a spread-out direction."""
        u = _probe_direction(b)
        if mean_b is None:
            mean_b = F(b, count=False)
        return float(((F(b + u, count=False) - mean_b) @ u) / (u @ u))

    truth = beta_hat.copy()
    mean = F(truth)
    a0 = _raw_slope(mean, truth)
    if a0 < MIN_SLOPE or _ratio_slope_se(var[0], truth, cal_reps) > SLOPE_SE_MAX:
        a0 = probe(truth, mean)  # items nearly alike: the ratio is Monte-Carlo noise
    a = _slope_of(a0)
    steps = 0
    info = {"method": "parametric bootstrap (persons simulated, fresh noise of the released kind)",
            "bootstrap_estimator": estimator, "n_boot": int(n_boot), "confidence": confidence,
            "calibration_replicates": cal_reps, "simulated_persons": _simulated_persons(n, beta_hat.size),
            "bootstrap_seed": describe_seed(seed), "bootstrap_refits": kw["refits"]}
    if a0 < MIN_SLOPE:  # all noise: no truth explains β̂ (docs/intervals.md §3b); stop here
        tick(at=cal_total + int(n_boot))
        se = _unbounded(beta_hat.size, a0)
        info.update({"ability_mean": ability[0][0], "ability_sd": ability[0][1], "attenuation": a0,
                     "calibration_steps": 0, "informative": False, "centre": beta_hat.tolist()})
        return BootstrapIntervals(se=se, lo=-se, hi=se, info=info)
    for steps in range(1, CALIBRATION_STEPS + 1):
        step = (beta_hat - mean) / a
        if np.abs(step).max() < CALIBRATION_TOL:
            break
        new = np.clip(truth + step, -MAX_LOGIT, MAX_LOGIT)
        new -= new.mean()
        if steps == CALIBRATION_STEPS:  # no evaluation after the last step (see above)
            truth = new
            break
        new_mean = F(new)
        dt, dm = new - truth, new_mean - mean
        if dt @ dt > 1e-12:
            a = float(np.clip((dm @ dt) / (dt @ dt), MIN_SLOPE, 2.0))
        truth, mean = new, new_mean
    tick(at=cal_total)  # the calibration may stop early
    reps, mu, tau = _replicates(rng, truth, *args, n_boot, **kw, on_batch=tick, ability=ability[0])
    mean = reps.mean(axis=0)
    # invert the linearised map β ↦ E β̂ ≈ mean + a·(β − truth) at β̂ ± z·sd, with the items'
    # own attenuation (the ratio slope; the secant slope above is the whole profile's, along
    # which the fitted spread moves too)
    a_raw = _raw_slope(mean, truth)
    if a_raw < MIN_SLOPE or _ratio_slope_se(reps.var(axis=0, ddof=1), truth, int(n_boot)) > SLOPE_SE_MAX:
        a_raw = probe(truth)  # as above, at the calibrated truth
    a = _slope_of(a_raw)
    info.update({"ability_mean": mu, "ability_sd": tau, "calibration_steps": steps})
    if a_raw < MIN_SLOPE:  # at the calibrated truth the estimate no longer responds: no finite interval
        se = _unbounded(beta_hat.size, a_raw)
        info.update({"attenuation": a_raw, "informative": False, "centre": beta_hat.tolist()})
        return BootstrapIntervals(se=se, lo=-se, hi=se, info=info)
    se = reps.std(axis=0, ddof=1) / a
    centre = truth + (beta_hat - mean) / a
    z = float(stats.norm.isf((1.0 - confidence) / 2.0))  # (isf: finite for confidence within 1e-16 of 1)
    info.update({"attenuation": a, "informative": True, "centre": centre.tolist()})
    return BootstrapIntervals(se=se, lo=centre - z * se, hi=centre + z * se, info=info)

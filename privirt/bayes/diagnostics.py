"""MCMC convergence diagnostics on draws shaped (chain, draw, parameter).

* :func:`rhat` — rank-normalised split R-hat (Vehtari, Gelman, Simpson, Carpenter & Bürkner
  2021), the maximum of the bulk and folded (tail) versions, as ArviZ/Stan report it.
* :func:`ess_bulk` — bulk effective sample size on rank-normalised split chains, with Geyer's
  initial monotone sequence estimator of the autocorrelation sum.
* :func:`mcse_batch_means` — Monte Carlo standard error of the mean by (non-overlapping)
  batch means, the estimator used by Sheng, Welling & Zhu (2014).

* :func:`summarize` — everything :meth:`privirt.Posterior.summary` reports for one block,
  computed together: one sort of each parameter's draws gives its bulk ranks, quantiles and
  median, the folded ranks come from merging the two sorted runs of |draw − median| in that
  order (a linear-time stable sort), the normal scores of ranks 1..N are computed once for all
  parameters, and one batched FFT gives every (parameter, chain) autocovariance; large
  blocks are split over threads by parameter, and in chunks whose working arrays fit in
  ``SUMMARY_BYTES``.

These are hand-written (rather than taken from ArviZ) because ArviZ is an optional
dependency; ``tests/test_posterior.py`` checks them against closed forms on AR(1) chains and
against ArviZ when it is installed.  Internally the draws are held parameter-major,
(parameter, chain, draw), so that every sort and FFT runs along contiguous memory.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import fft as sp_fft
from scipy import special

__all__ = [
    "rhat", "ess_bulk", "rhat_ess_bulk", "summarize", "working_bytes", "summary_bytes",
    "mcse_batch_means",
    "default_n_batches",
    "split_chains",
    "rank_normalize", "mark_constant",
]


def _as3d(draws: np.ndarray) -> np.ndarray:
    a = np.asarray(draws, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :, None]
    elif a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        raise ValueError(f"draws must be (chain, draw, parameter), got shape {a.shape}")
    return a


def split_chains(draws: np.ndarray) -> np.ndarray:
    """Split each chain in two halves (dropping the middle draw when odd)."""
    a = _as3d(draws)
    n = a.shape[1]
    half = n // 2
    if half < 1:
        return a
    return np.concatenate([a[:, :half], a[:, n - half :]], axis=0)


def _param_major_split(a: np.ndarray) -> np.ndarray:
    """Split chains of (chain, draw, parameter) draws as a contiguous (parameter, 2·chain,
    half) array (the chains unsplit when there are fewer than 2 draws)."""
    c, n, k = a.shape
    half = n // 2
    if half < 1:
        return np.ascontiguousarray(a.transpose(2, 0, 1))
    out = np.empty((k, 2 * c, half))
    out[:, :c] = a[:, :half].transpose(2, 0, 1)
    out[:, c:] = a[:, n - half :].transpose(2, 0, 1)
    return out


def _sorted_flat(x: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``order`` (k, N), each row's sorting permutation, made flat indices into ``x`` (in
    place), and the sorted rows ``x.ravel()[order]``."""
    k, N = x.shape
    order += (np.arange(k, dtype=order.dtype) * N)[:, None]
    return order, x.ravel()[order]


def _scores(k: int, N: int, order: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Normal scores Φ⁻¹((r − 3/8) / (N + 1/4)) of the average ranks r of every row of a
    (k, N) array, given its sorted rows ``xs`` and their flat positions ``order``.

    The scores of ranks 1..N are computed once and scattered into place by ``order``; only
    runs of tied values get scores of their own (ties share their mean rank, as
    ``scipy.stats.rankdata``)."""
    denom = N + 0.25
    z = np.empty((k, N))
    z.ravel()[order] = special.ndtri((np.arange(1, N + 1) - 0.375) / denom)
    if N > 1:
        rows, pos = np.nonzero(xs[:, 1:] == xs[:, :-1])  # positions pos and pos + 1 tie
        if rows.size:
            cells, scores = _tie_scores(rows * N + pos, N, denom)
            z.ravel()[order.ravel()[cells]] = scores
    return z


def _normal_scores(x: np.ndarray, want_sorted: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Rank-normalise each row of a 2-D array (k, N) (see :func:`_scores`).  Returns the
    scores and, with ``want_sorted``, the sorted rows."""
    k, N = x.shape
    order, xs = _sorted_flat(x, np.argsort(x, axis=1))
    return _scores(k, N, order, xs), (xs if want_sorted else None)


def _tie_scores(pairs: np.ndarray, N: int, denom: float) -> tuple[np.ndarray, np.ndarray]:
    """The flat sorted positions of every run of tied values and the score of its average
    rank.  ``pairs``: increasing flat positions p whose value equals the one at p + 1."""
    starts = np.r_[True, np.diff(pairs) != 1]  # a new run of ties begins at this pair
    first = pairs[starts]  # flat position of each run's first value
    last = pairs[np.r_[starts[1:], True]] + 1  # … and of its last value
    cells = np.unique(np.concatenate([pairs, pairs + 1]))
    run = np.searchsorted(first, cells, side="right") - 1
    rank = (first[run] + last[run]) / 2.0 - (cells // N) * N + 1.0  # average rank in the row
    return cells, special.ndtri((rank - 0.375) / denom)


def rank_normalize(draws: np.ndarray) -> np.ndarray:
    """Rank-normalise over all chains and draws (per parameter), Blom's offsets."""
    a = _as3d(draws)
    c, n, k = a.shape
    z, _ = _normal_scores(np.ascontiguousarray(a.reshape(c * n, k).T))
    return np.ascontiguousarray(z.T).reshape(c, n, k)


def _basic_rhat_pm(a: np.ndarray) -> np.ndarray:
    """Classical R-hat of (parameter, chain, draw) draws."""
    k, c, n = a.shape
    if c < 2 or n < 2:
        return np.full(k, np.nan)
    chain_means = a.mean(axis=2)
    chain_vars = a.var(axis=2, ddof=1)
    w = chain_vars.mean(axis=1)
    b = n * chain_means.var(axis=1, ddof=1)
    var_plus = (n - 1) / n * w + b / n
    with np.errstate(divide="ignore", invalid="ignore"):
        # draws that never change (w = b = 0) give 0/0 = NaN, as ArviZ and Stan report it
        return np.sqrt(var_plus / w)


def _rhat_pm(s: np.ndarray, z: np.ndarray, order: np.ndarray, xs: np.ndarray,
             median: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat from split draws ``s`` (k, m, h), their bulk normal scores
    ``z`` (same shape), their sorted rows ``xs`` (k, m·h) with flat positions ``order``, and
    per-parameter medians: max of the bulk and folded versions.

    The folded draws |s − median| in the bulk order fall then rise: two sorted runs, which a
    stable (merge) sort puts in order in linear time; that order composed with the bulk
    order ranks the folded draws."""
    k, m, h = s.shape
    if m < 2 or h < 2:
        return np.full(k, np.nan)
    N = m * h
    folded = np.abs(xs - median[:, None])
    fold_order, fs = _sorted_flat(folded, np.argsort(folded, axis=1, kind="stable"))
    zf = _scores(k, N, order.ravel()[fold_order], fs)
    return np.fmax(_basic_rhat_pm(z), _basic_rhat_pm(zf.reshape(k, m, h)))


def _autocov_fft(x: np.ndarray) -> np.ndarray:
    """Autocovariance along the last axis for every row, biased estimator."""
    n = x.shape[-1]
    xc = x - x.mean(axis=-1, keepdims=True)
    size = 1 << int(np.ceil(np.log2(2 * n)))
    f = sp_fft.rfft(xc, n=size, axis=-1)  # scipy's pocketfft: ~2× numpy's on many rows
    del xc
    re, im = f.real, f.imag  # |f|² = re² + im² (+ 0i), in place
    sq = im * im
    np.multiply(re, re, out=re)
    re += sq
    im[...] = 0.0
    del sq
    acov = sp_fft.irfft(f, n=size, axis=-1, overwrite_x=True)[..., :n]
    acov /= n
    return acov


def _ess_pm(a: np.ndarray, n_draws: int) -> np.ndarray:
    """ESS of (parameter, chain, draw) draws (Stan's algorithm; Geyer initial monotone), all
    parameters at once: one batched FFT for every (parameter, chain) autocovariance.

    ``n_draws`` is the number of draws per chain before splitting: NaN when it is below 4,
    ArviZ's rule (which tests the unsplit chains), so split halves of 2 or 3 draws count."""
    k, c, n = a.shape
    if n_draws < 4:  # (split halves of n_draws >= 4 draws have n >= 2)
        return np.full(k, np.nan)
    acov = _autocov_fft(a)  # (k, c, n)
    chain_mean = a.mean(axis=2)
    chain_var = acov[:, :, 0] * n / (n - 1.0)
    w = chain_var.mean(axis=1)
    var_plus = w * (n - 1.0) / n
    if c > 1:
        var_plus = var_plus + chain_mean.var(axis=1, ddof=1)
    out = np.full(k, np.nan)  # NaN too where var_plus = 0: draws that never change
    good = np.isfinite(var_plus) & (var_plus > 0)
    if good.any():
        rho = 1.0 - (w[good, None] - acov[good].mean(axis=1)) / var_plus[good, None]
        out[good] = c * n / _geyer_tau(rho, c * n)
    return out


def _geyer_tau(rho: np.ndarray, total: int) -> np.ndarray:
    """Integrated autocorrelation times from autocorrelations ``rho`` (parameter, lag), as Stan
    and ArviZ compute them: Geyer's initial positive sequence of pair sums
    P_m = rho[2m] + rho[2m+1] (P_0 = 1 + rho[1]), stopped at the first non-positive pair and
    3 lags before the end, completed by the last positive even-lag term, made monotone
    (each pair sum capped by the previous ones), and floored at ``1 / log10(total)``.

    Stan's loop in closed form, with m_last the pair where the sequence stops:
    tau = −1 + 2 Σ_{m < m_last} min(P_0..P_m) + e, where e = rho[2 m_last] when that is
    positive or the pair was kept (P ≥ 0), else 0 (and e = 1 when m_last = 0)."""
    k, n = rho.shape
    m_max = max((n - 3) // 2, 0)  # pairs m = 1..m_max fit before the end
    rows = np.arange(k)
    pairs = np.empty((k, m_max + 1))
    pairs[:, 0] = 1.0 + rho[:, 1]
    if m_max:
        pairs[:, 1:] = rho[:, 2 : 2 * m_max + 1 : 2] + rho[:, 3 : 2 * m_max + 2 : 2]
    stop = np.concatenate([pairs[:, 1:] <= 0.0, np.ones((k, 1), dtype=bool)], axis=1)
    m_last = np.minimum(stop.argmax(axis=1) + 1, m_max)  # first m ≥ 1 with P_m ≤ 0, or m_max
    m_last[pairs[:, 0] <= 0.0] = 0
    capped = np.minimum.accumulate(pairs, axis=1)
    csum = np.concatenate([np.zeros((k, 1)), np.cumsum(capped, axis=1)], axis=1)
    head = csum[rows, m_last]  # Σ_{m < m_last} of the capped pair sums
    even = rho[rows, 2 * m_last]
    kept = pairs[rows, m_last] >= 0.0
    tail = np.where((even > 0.0) | kept, even, 0.0)
    tail[m_last == 0] = 1.0
    tau = -1.0 + 2.0 * head + tail
    return np.maximum(tau, 1.0 / np.log10(total))


def rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat per parameter: NaN when a chain has fewer than 4 draws
    (split halves of fewer than 2; so 2 × 2 and 3 × 3 draws give NaN), as in ArviZ; one
    chain of 4 or more gives a finite split R-hat (as Stan; ArviZ: NaN)."""
    return rhat_ess_bulk(draws)[0]


def ess_bulk(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size per parameter (rank-normalised split chains): NaN when a
    chain has fewer than 4 draws, as in ArviZ.  With 4–9 draws per chain the value is Stan's
    and ArviZ's cap N log10(N) (N the draws in the split chains), not an estimate.  Draws
    that never change (pooled variance 0) have ESS NaN, like their R-hat (ArviZ reports N
    for them; a value that does not vary has no effective sample size)."""
    a = _as3d(draws)
    s = _param_major_split(a)
    k, m, h = s.shape
    z, _ = _normal_scores(s.reshape(k, m * h))
    return _ess_pm(z.reshape(k, m, h), a.shape[1])


def rhat_ess_bulk(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rhat` and :func:`ess_bulk` together, sharing the split chains and their rank
    normalisation."""
    out = summarize(draws, quantiles=())
    return out["rhat"], out["ess"]


#: Draws (all parameters) from which :func:`summarize` splits the parameters over threads.
PARALLEL_VALUES = 1 << 20

#: Bytes the working arrays of :func:`summarize` may take at once, all threads together: a
#: block that would need more is summarised in chunks of parameters (the same values).
SUMMARY_BYTES = 256 << 20


def _workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not on every platform
        return os.cpu_count() or 1


def working_bytes(n_chains: int, n_draws: int, n_params: int = 1) -> int:
    """Bytes of the working arrays :func:`summarize` needs for ``n_params`` parameters of
    ``n_chains`` × ``n_draws`` draws at once (an upper bound, beyond the draws themselves).

    Measured with tracemalloc, the peak is 9–13 times the draws: the split copy, the sort
    order, the sorted draws and their scores, the folded ranks', and the FFT's buffers of a
    power of two at least twice each half chain (so up to twice the draws' length) — here
    6 doubles a draw plus 4 a chain and FFT point — but 17 times where most draws tie (a
    constant or discrete parameter, draws rounded): the positions and scores of the runs of
    ties — here 18 doubles a draw; plus a few per parameter and, once a call, the normal
    scores of the ranks 1..N (3 doubles a draw of one parameter)."""
    c, n = int(n_chains), int(n_draws)
    size = 1 << max(1, n // 2 * 2 - 1).bit_length()  # the FFT length, 2·(n // 2) rounded up
    return 8 * (int(n_params) * (max(6 * c * n + 4 * c * size, 18 * c * n) + 64) + 3 * c * n)


def _plan(c: int, n: int, k: int) -> tuple[list[tuple[int, int]], int]:
    """The contiguous parameter ranges :func:`summarize` works in for a (c, n, k) block, and
    how many threads summarise them at once (1: in turn, on the calling thread).

    The threads are at most one a CPU core (only from ``PARALLEL_VALUES`` draws on) and at
    most as many as the working arrays of 2 parameters each fit in ``SUMMARY_BYTES``; the
    ranges are as few as make those of that many at once fit in it.  No range holds a single parameter
    of several: numpy sums a lone column's draws pairwise but a wider slice's sequentially,
    so the means would differ in the last bit; so where even 2 parameters exceed the budget
    the ranges are of 2 (or 3) and run in turn."""
    if k < 2:
        return [(0, k)], 1
    once = working_bytes(c, n, 0)  # a call's own arrays, beyond those of its parameters
    per = working_bytes(c, n) - once
    workers = max(1, min(_workers(), k // 2)) if c * n * k >= PARALLEL_VALUES else 1
    threads = max(1, min(workers, SUMMARY_BYTES // working_bytes(c, n, 2)))
    cap = max(2, min(-(-k // threads), (SUMMARY_BYTES // threads - once) // per))
    chunks = max(threads, min(-(-k // cap), k // 2))  # of 2 parameters at least
    cuts = np.linspace(0, k, chunks + 1).round().astype(int).tolist()
    return list(zip(cuts[:-1], cuts[1:])), min(threads, chunks)


def summary_bytes(n_chains: int, n_draws: int, n_params: int) -> int:
    """Bytes of the working arrays :func:`summarize` takes at most at once on this machine
    for a block of ``n_params`` parameters of ``n_chains`` × ``n_draws`` draws: those of the
    ``threads`` widest ranges it works in (``SUMMARY_BYTES`` at most, unless 2 or 3
    parameters alone need more)."""
    ranges, threads = _plan(int(n_chains), int(n_draws), int(n_params))
    widest = sorted((b - a for a, b in ranges), reverse=True)[:threads]
    return sum(working_bytes(n_chains, n_draws, m) for m in widest)


def summarize(draws: np.ndarray, quantiles: tuple[float, ...] = (0.025, 0.5, 0.975)) -> dict:
    """Mean, sd (ddof 1), ``quantiles`` (numpy's default, linear), batch-means MCSE, R-hat
    and bulk ESS of every parameter of (chain, draw, parameter) draws.

    Every statistic is per parameter, so with at least ``PARALLEL_VALUES`` draws in all the
    parameters are split into one contiguous range per CPU core, summarised by threads
    (numpy's sorts and gathers and scipy's FFT release the GIL): the same values, sooner.
    Ranges whose working arrays (:func:`working_bytes`) would together exceed
    ``SUMMARY_BYTES`` are cut into smaller chunks, summarised by fewer threads at once (in
    turn where 2 parameters of a long chain fill it), so that the memory needed beyond the
    draws is bounded (:func:`summary_bytes`) whatever their size: the same values again.

    Returns
    -------
    dict
        ``"mean", "sd", "mcse", "rhat", "ess"`` and ``"q"``, an array (len(quantiles), k).
    """
    a = _as3d(draws)
    c, n, k = a.shape
    ranges, threads = _plan(c, n, k)
    if len(ranges) < 2:
        return _summarize(a, quantiles)
    def part(r: tuple[int, int]) -> dict:
        return _summarize(a[:, :, r[0]:r[1]], quantiles)
    if threads < 2:
        parts = [part(r) for r in ranges]
    else:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="privirt-summary") as pool:
            parts = list(pool.map(part, ranges))
    return {key: np.concatenate([p[key] for p in parts], axis=-1) for key in parts[0]}


def _summarize(a: np.ndarray, quantiles: tuple[float, ...]) -> dict:
    """:func:`summarize` of (chain, draw, parameter) float64 draws, on the calling thread."""
    c, n, k = a.shape
    s = _param_major_split(a)
    _, m, h = s.shape
    N = m * h
    sk = s.reshape(k, N)
    order, xs = _sorted_flat(sk, np.argsort(sk, axis=1))
    z = _scores(k, N, order, xs)
    # the split chains hold every draw when n is even: their sorted rows give the quantiles
    if N == c * n and N > 0:
        q = _sorted_quantiles(xs, quantiles)
    elif quantiles:
        q = np.quantile(a.reshape(c * n, k), quantiles, axis=0)
    else:
        q = np.empty((0, k))
    # np.median's value (the mean of the two middle values when N is even): the folded
    # R-hat ranks |draw − median|, where the two middle draws tie exactly
    median = xs[:, N // 2] if N % 2 else (xs[:, N // 2 - 1] + xs[:, N // 2]) / 2.0
    r_hat, ess = _rhat_pm(s, z.reshape(k, m, h), order, xs, median), _ess_pm(z.reshape(k, m, h), n)
    # ranks of non-finite draws are meaningless (NaN sorts last): such a parameter has no R-hat or ESS
    bad = ~np.isfinite(xs).all(axis=1) if N else np.zeros(k, bool)
    if bad.any():
        r_hat, ess = np.where(bad, np.nan, r_hat), np.where(bad, np.nan, ess)
    out = {  # over (chain, draw) of a view: no copy of a thread's slice of the draws
        "mean": a.mean(axis=(0, 1)),
        "sd": a.std(axis=(0, 1), ddof=1) if c * n > 1 else np.full(k, np.nan),
        "q": q,
        "mcse": mcse_batch_means(a),
        "rhat": r_hat,
        "ess": ess,
    }
    if c * n:
        mark_constant(out, a.max(axis=(0, 1)) == a.min(axis=(0, 1)), a[0, 0])
    return out


def mark_constant(stats: dict, constant: np.ndarray, value: np.ndarray) -> None:
    """Give the parameters whose draws never change (``constant``, a boolean per parameter;
    e.g. a θ fixed by an anchor) the statistics of a pooled variance of exactly 0, in place:
    ``mean`` their ``value`` (the sum of many copies of 0.7 rounds off it), ``sd`` and ``mcse``
    0 (where defined, not NaN), ``rhat`` and ``ess`` NaN (0/0), with kept draws and streamed
    alike."""
    if not constant.any():
        return
    stats["mean"] = np.where(constant, value, stats["mean"])
    for key, value in (("sd", 0.0), ("mcse", 0.0)):
        stats[key] = np.where(constant & ~np.isnan(stats[key]), value, stats[key])
    for key in ("rhat", "ess"):
        stats[key] = np.where(constant, np.nan, stats[key])


def _sorted_quantiles(xs: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """``np.quantile(..., method="linear")`` of each already sorted row of ``xs``."""
    k, N = xs.shape
    out = np.empty((len(quantiles), k))
    for i, q in enumerate(quantiles):
        h = q * (N - 1)
        lo = int(np.floor(h))
        hi = min(lo + 1, N - 1)
        t = h - lo
        a, b = xs[:, lo], xs[:, hi]
        diff = b - a
        # numpy's lerp: a + (b − a) t, from the upper end when t ≥ 0.5
        out[i] = b - diff * (1.0 - t) if t >= 0.5 else a + diff * t
    return out


def default_n_batches(n_draws: int) -> int:
    """Batch means per chain for ``n_draws`` draws: ⌊√n⌋, at most 50 and at least 2 (the
    batch-means MCSE's rule, with and without kept draws)."""
    return min(50, max(2, math.isqrt(int(n_draws))))  # exact for any int (np.sqrt fails past int64)


def mcse_batch_means(draws: np.ndarray, n_batches: int | None = None) -> np.ndarray:
    """Monte Carlo standard error of the posterior mean by non-overlapping batch means.

    Each chain is cut into ``n_batches`` equal batches (default ⌊√n⌋, at most 50 and at
    least 2 where possible); the MCSE is the standard deviation of all batch means over
    √(number of batches).
    """
    a = _as3d(draws)
    c, n, k = a.shape
    if n_batches is None:
        n_batches = default_n_batches(n)
    elif isinstance(n_batches, bool) or not isinstance(n_batches, (int, np.integer)) or n_batches < 1:
        raise ValueError(f"n_batches must be a positive integer, got {n_batches!r}")
    n_batches = max(1, min(n_batches, n))
    size = n // n_batches
    if size < 1 or c * n_batches < 2:
        return np.full(k, np.nan)
    used = a[:, : size * n_batches].reshape(c, n_batches, size, k).mean(axis=2)
    bm = used.reshape(c * n_batches, k)
    return bm.std(axis=0, ddof=1) / np.sqrt(c * n_batches)

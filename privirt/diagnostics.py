"""MCMC convergence diagnostics on draws shaped (chain, draw, parameter).

* :func:`rhat` — rank-normalised split R-hat (Vehtari, Gelman, Simpson, Carpenter & Bürkner
  2021), the maximum of the bulk and folded (tail) versions, as ArviZ/Stan report it.
* :func:`ess_bulk` — bulk effective sample size on rank-normalised split chains, with Geyer's
  initial monotone sequence estimator of the autocorrelation sum.
* :func:`mcse_batch_means` — Monte Carlo standard error of the mean by (non-overlapping)
  batch means, the estimator used by Sheng, Welling & Zhu (2014).

These are hand-written (rather than taken from ArviZ) because ArviZ is an optional
dependency; ``tests/test_posterior.py`` checks them against closed forms on AR(1) chains and
against ArviZ when it is installed.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["rhat", "ess_bulk", "mcse_batch_means", "split_chains", "rank_normalize"]


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


def rank_normalize(draws: np.ndarray) -> np.ndarray:
    """Rank-normalise over all chains and draws (per parameter), Blom's offsets."""
    a = _as3d(draws)
    c, n, k = a.shape
    flat = a.reshape(c * n, k)
    ranks = np.empty_like(flat)
    for j in range(k):
        ranks[:, j] = _average_rank(flat[:, j])
    z = special.ndtri((ranks - 3.0 / 8.0) / (c * n + 1.0 / 4.0))
    return z.reshape(c, n, k)


def _average_rank(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x, method="average")


def _basic_rhat(a: np.ndarray) -> np.ndarray:
    c, n, _ = a.shape
    if c < 2 or n < 2:
        return np.full(a.shape[2], np.nan)
    chain_means = a.mean(axis=1)
    chain_vars = a.var(axis=1, ddof=1)
    w = chain_vars.mean(axis=0)
    b = n * chain_means.var(axis=0, ddof=1)
    var_plus = (n - 1) / n * w + b / n
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sqrt(var_plus / w)
    out[(w == 0) & (b == 0)] = 1.0
    return out


def rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat per parameter (NaN when fewer than 4 draws in total)."""
    a = _as3d(draws)
    s = split_chains(a)
    if s.shape[0] < 2 or s.shape[1] < 2:
        return np.full(a.shape[2], np.nan)
    bulk = _basic_rhat(rank_normalize(s))
    median = np.median(s.reshape(-1, s.shape[2]), axis=0)
    tail = _basic_rhat(rank_normalize(np.abs(s - median)))
    return np.fmax(bulk, tail)


def _autocov_fft(x: np.ndarray) -> np.ndarray:
    """Autocovariance along axis 1 for every (chain, parameter), biased estimator."""
    n = x.shape[1]
    xc = x - x.mean(axis=1, keepdims=True)
    size = 1 << int(np.ceil(np.log2(2 * n)))
    f = np.fft.rfft(xc, n=size, axis=1)
    acov = np.fft.irfft(f * np.conj(f), n=size, axis=1)[:, :n]
    return acov / n


def _ess(a: np.ndarray) -> np.ndarray:
    """ESS of (chain, draw, parameter) draws (Stan's algorithm; Geyer initial monotone)."""
    c, n, k = a.shape
    if n < 4:
        return np.full(k, np.nan)
    acov = _autocov_fft(a)  # (c, n, k)
    chain_mean = a.mean(axis=1)
    chain_var = acov[:, 0, :] * n / (n - 1.0)
    w = chain_var.mean(axis=0)
    var_plus = w * (n - 1.0) / n
    if c > 1:
        var_plus = var_plus + chain_mean.var(axis=0, ddof=1)
    out = np.empty(k)
    for j in range(k):
        if not np.isfinite(var_plus[j]) or var_plus[j] <= 0:
            out[j] = np.nan if var_plus[j] != 0 else float(c * n)
            continue
        rho = 1.0 - (w[j] - acov[:, :, j].mean(axis=0)) / var_plus[j]
        out[j] = c * n / _geyer_tau(rho, c * n)
    return out


def _geyer_tau(rho: np.ndarray, total: int) -> float:
    """Integrated autocorrelation time from autocorrelations ``rho`` (lag 0, 1, …), as Stan
    and ArviZ compute it: Geyer's initial positive sequence of pair sums
    ``rho[t] + rho[t+1]`` (stopped at the first non-positive pair and 3 lags before the
    end), completed by the last positive even-lag term, made monotone, and floored at
    ``1 / log10(total)``."""
    n = rho.shape[0]
    r = np.zeros(n)
    r[0] = 1.0
    even, odd = 1.0, rho[1]
    r[1] = odd
    t = 1
    while t < n - 3 and even + odd > 0.0:
        even, odd = rho[t + 1], rho[t + 2]
        if even + odd >= 0.0:
            r[t + 1], r[t + 2] = even, odd
        t += 2
    max_t = t - 2
    if even > 0.0:
        r[max_t + 1] = even
    t = 1
    while t <= max_t - 2:  # initial monotone sequence
        if r[t + 1] + r[t + 2] > r[t - 1] + r[t]:
            r[t + 1] = r[t + 2] = (r[t - 1] + r[t]) / 2.0
        t += 2
    tau = -1.0 + 2.0 * r[: max_t + 1].sum() + r[max_t + 1 : max_t + 2].sum()
    return max(tau, 1.0 / np.log10(total))


def ess_bulk(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size per parameter (rank-normalised split chains)."""
    s = split_chains(_as3d(draws))
    return _ess(rank_normalize(s))


def mcse_batch_means(draws: np.ndarray, n_batches: int | None = None) -> np.ndarray:
    """Monte Carlo standard error of the posterior mean by non-overlapping batch means.

    Each chain is cut into ``n_batches`` equal batches (default ⌊√n⌋, at most 50 and at
    least 2 where possible); the MCSE is the standard deviation of all batch means over
    √(number of batches).
    """
    a = _as3d(draws)
    c, n, k = a.shape
    if n_batches is None:
        n_batches = int(min(50, max(2, np.floor(np.sqrt(n)))))
    elif isinstance(n_batches, bool) or not isinstance(n_batches, (int, np.integer)) or n_batches < 1:
        raise ValueError(f"n_batches must be a positive integer, got {n_batches!r}")
    n_batches = max(1, min(n_batches, n))
    size = n // n_batches
    if size < 1 or c * n_batches < 2:
        return np.full(k, np.nan)
    used = a[:, : size * n_batches].reshape(c, n_batches, size, k).mean(axis=2)
    bm = used.reshape(c * n_batches, k)
    return bm.std(axis=0, ddof=1) / np.sqrt(c * n_batches)

"""Randomized-response helpers: randomize a response matrix, shuffle the reports, and the
unbiased estimate of the pairwise counts from randomized bits (formulas in ``docs/privacy.md``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data.responses import Responses

__all__ = ["randomize", "shuffle_rows", "debiased_counts", "debiased_count_sd", "uniform_bits"]

#: Rows are randomized in chunks of about this many cells (bounds the int64 temporaries).
_RR_CHUNK_CELLS = 1 << 22


def uniform_bits(shape: tuple[int, ...], rng: Any) -> np.ndarray:
    """Fair coin flips (int8 0/1) from a :class:`mechanisms.SecureRNG`."""
    size = int(np.prod(shape))
    return rng.random_bits(size).reshape(shape).astype(np.int8)


def randomize(resp: Responses, mech: Any, coin_rng: Any) -> np.ndarray:
    """n × m int8 0/1 matrix: ``mech`` (randomized response) on observed bits, a fair coin
    from ``coin_rng`` on missing cells.

    Rows are processed in chunks of about 4 M cells so that the mechanism's int64 output
    never needs more than ~32 MiB at a time.
    """
    codes = resp.codes
    n, m = codes.shape
    out = np.empty((n, m), dtype=np.int8)
    rows = max(1, _RR_CHUNK_CELLS // max(1, m))
    for start in range(0, n, rows):
        block = codes[start : start + rows]
        # arithmetic, not masks: the coins are drawn for every chunk and mixed in without a
        # branch per cell (drawing them only where a cell was missing, or copying them under a
        # mask, made the release's time tell whether and how many cells were missing)
        observed = (block >= 0).astype(np.int8)
        bits = np.maximum(block, 0).astype(np.int8)  # codes 1, 0, -1 (missing) -> 1, 0, 0
        flipped = np.asarray(mech.apply(bits)).reshape(bits.shape).astype(np.int8)
        coin = uniform_bits(bits.shape, coin_rng)
        out[start : start + rows] = flipped * observed + coin * (1 - observed)
    return out


def shuffle_rows(Z: np.ndarray, rng: Any) -> np.ndarray:
    """Rows in a uniformly random order (the shuffler of the shuffle model).

    The permutation sorts uniform 64-bit keys from the secure generator ``rng`` (a
    :class:`mechanisms.SecureRNG`: the amplification theorem needs a permutation nobody can
    predict).  The counts computed afterwards do not depend on row order; the shuffle is
    kept so that the randomized reports really pass through a shuffler.
    """
    keys = rng.random_uint64(Z.shape[0])
    return Z[np.argsort(keys, kind="stable")]


def debiased_counts(Z: np.ndarray, q: float, Y_plain: np.ndarray) -> np.ndarray:
    """Unbiased estimate of Y from randomized bits Z (keep probability q).

    X̂ = (Z − (1 − q)) / (2q − 1) is unbiased for each bit and the cells of a row are
    randomized independently, so Ŷ_ij = Σ_l X̂_li (1 − X̂_lj) is unbiased for Y_ij (i ≠ j) on
    complete data (a missing cell is a fair coin: it enters with mean ½).
    With a = 1/(2q−1), b = −(1−q)/(2q−1), s = column sums of Z and ZᵀZ = s1ᵀ − Y_plain:
    Ŷ_ij = −a² (s_i − Y_plain_ij) + a(1 − b) s_i − a b s_j + n b (1 − b).
    """
    n = Z.shape[0]
    s = Z.sum(axis=0, dtype=np.int64).astype(np.float64)
    a = 1.0 / (2.0 * q - 1.0)
    b = -(1.0 - q) * a
    Yh = -(a * a) * (s[:, None] - Y_plain) + a * (1 - b) * s[:, None] - a * b * s[None, :] + n * b * (1 - b)
    np.fill_diagonal(Yh, 0.0)
    return Yh


def debiased_count_sd(q: float, n_persons: int) -> float:
    """A lower bound, from public values only, on the noise SD of a debiased count
    (:func:`debiased_counts`) of ``n_persons`` rows randomized with keep probability ``q``.

    A debiased bit X̂ has mean x and variance v_b ≥ v = q(1 − q)/(2q − 1)² (a missing cell's
    fair coin has more), and a person's term X̂_i (1 − X̂_j), of independent factors, has
    variance (x_i² + v_i)((1 − x_j)² + v_j) − x_i²(1 − x_j)² ≥ v_i v_j ≥ v², whatever the
    answers.  The persons are independent, so the count's SD is at least √n · v.

    Parameters
    ----------
    q : float in (1/2, 1)
        The keep probability of the randomized response (public: set by ε₀).
    n_persons : int
        The public number of persons.

    Returns
    -------
    float
        √n · q(1 − q)/(2q − 1)².
    """
    return float(np.sqrt(n_persons) * q * (1.0 - q) / (2.0 * q - 1.0) ** 2)

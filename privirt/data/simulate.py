"""Simulated response data with known truth, for tests, examples and experiments.

All three generators draw persons' abilities θ ~ N(0, 1) and return ``(X, theta, <items>)``
where ``X`` is a float persons × items array with NaN for unobserved cells (each cell observed
independently with probability ``p_observed``).  Randomness comes from
:func:`numpy.random.default_rng` with the given ``seed`` — simulation is not a privacy
mechanism.  ``seed`` is the package's (an int ≥ 0, a ``numpy.random.SeedSequence`` or ``None``,
:mod:`privirt._seeds`) or a ``numpy.random.Generator`` to draw from; anything else (``True``, a
float, a string) is a ``ValueError`` naming ``seed``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy import special

from .._checks import brief, check_nonnegative_number
from .._seeds import SeedLike, numpy_rng

__all__ = ["simulate_rasch", "simulate_2pno", "simulate_2pl"]


def _check(n_persons: int, n_items: int, p_observed: float, beta_scale: float = 1.0) -> None:
    for name, v in (("n_persons", n_persons), ("n_items", n_items)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {brief(v)}")
    if int(n_persons) * int(n_items) > np.iinfo(np.intp).max:  # numpy: "Maximum allowed dimension"
        raise ValueError(f"n_persons × n_items = {n_persons} × {n_items} is too large for an array; "
                         "simulate fewer persons or items")
    if (
        isinstance(p_observed, bool)
        or not isinstance(p_observed, (int, float, np.integer, np.floating))
        or not 0.0 < float(p_observed) <= 1.0
    ):
        raise ValueError(f"p_observed must be a number in (0, 1], got {p_observed!r}")
    check_nonnegative_number("beta_scale", beta_scale)


def _rng(seed: Any) -> np.random.Generator:
    """The generator of a simulation: ``seed`` checked as everywhere in the package (a
    ``Generator`` is used as it is); ``default_rng(s)`` and ``numpy_rng(s)`` are one stream."""
    if isinstance(seed, np.random.Generator):
        return seed
    try:
        return numpy_rng(seed)
    except ValueError:
        raise ValueError(f"seed must be a non-negative integer, a numpy SeedSequence or Generator, "
                         f"or None, got {brief(seed)}") from None


#: cells drawn at a time: the response matrix is the only n × m array a simulation holds
_CHUNK_CELLS = 1 << 18


def _finish(prob_rows: Callable[[slice], np.ndarray], shape: tuple[int, int], p_observed: float,
            rng: np.random.Generator) -> np.ndarray:
    """The responses ``X`` (float, NaN where unobserved) for the probabilities
    ``prob_rows(rows)`` of a block of persons, drawn block by block: the same numbers as
    ``rng.random(shape) < prob`` and then the observation mask's ``rng.random(shape)`` (a
    Generator's doubles fill an array in C order), without holding the n × m probabilities
    and uniforms beside ``X``."""
    n, m = shape
    X = np.empty(shape, dtype=np.float64)
    step = max(1, _CHUNK_CELLS // m)
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        np.less(rng.random((rows.stop - rows.start, m)), prob_rows(rows), out=X[rows], casting="unsafe")
    if p_observed < 1.0:
        for start in range(0, n, step):
            rows = slice(start, min(n, start + step))
            block = X[rows]
            block[rng.random(block.shape) >= p_observed] = np.nan
    return X


def simulate_rasch(
    n_persons: int,
    n_items: int,
    *,
    p_observed: float = 1.0,
    beta_scale: float = 1.0,
    seed: SeedLike | np.random.Generator = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rasch data: P(X_li = 1) = logistic(θ_l − β_i).

    Difficulties β ~ N(0, ``beta_scale``²), centred to sum zero.

    Returns
    -------
    X : ndarray (n_persons, n_items), float with NaN for missing
    theta : ndarray (n_persons,)
    beta : ndarray (n_items,), centred
    """
    _check(n_persons, n_items, p_observed, beta_scale)
    rng = _rng(seed)
    theta = rng.standard_normal(n_persons)
    beta = rng.normal(0.0, beta_scale, n_items)
    with np.errstate(over="ignore", invalid="ignore"):
        beta -= beta.mean()
    if not np.isfinite(beta).all():  # (a finite beta_scale near 1e308 overflowed the draws)
        raise ValueError(f"beta_scale={beta_scale!r} gives difficulties beyond a double; use a smaller beta_scale")
    def prob(rows: slice) -> np.ndarray:
        return special.expit(theta[rows, None] - beta[None, :])

    return _finish(prob, (n_persons, n_items), p_observed, rng), theta, beta


def simulate_2pno(
    n_persons: int,
    n_items: int,
    *,
    p_observed: float = 1.0,
    seed: SeedLike | np.random.Generator = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two-parameter normal ogive data: P(X_ij = 1) = Φ(a_j θ_i − b_j).

    As in Sheng, Welling & Zhu (2014): a_j ~ U(0, 2) (shifted to U(0.2, 2) to keep items
    informative), b_j ~ U(−2, 2).

    Returns ``(X, theta, a, b)``.
    """
    _check(n_persons, n_items, p_observed)
    rng = _rng(seed)
    theta = rng.standard_normal(n_persons)
    a = rng.uniform(0.2, 2.0, n_items)
    b = rng.uniform(-2.0, 2.0, n_items)
    def prob(rows: slice) -> np.ndarray:
        return special.ndtr(theta[rows, None] * a[None, :] - b[None, :])

    return _finish(prob, (n_persons, n_items), p_observed, rng), theta, a, b


def simulate_2pl(
    n_persons: int,
    n_items: int,
    *,
    p_observed: float = 1.0,
    seed: SeedLike | np.random.Generator = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two-parameter logistic data: P(X_ij = 1) = logistic(a_j θ_i − b_j).

    a_j ~ U(0.5, 2.5), b_j ~ N(0, 1).

    Returns ``(X, theta, a, b)``.
    """
    _check(n_persons, n_items, p_observed)
    rng = _rng(seed)
    theta = rng.standard_normal(n_persons)
    a = rng.uniform(0.5, 2.5, n_items)
    b = rng.standard_normal(n_items)
    def prob(rows: slice) -> np.ndarray:
        return special.expit(theta[rows, None] * a[None, :] - b[None, :])

    return _finish(prob, (n_persons, n_items), p_observed, rng), theta, a, b

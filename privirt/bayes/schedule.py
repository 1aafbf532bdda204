"""The MCMC schedule shared by every sampler: iterations, warmup, thinning, chains.

One thinning rule for all samplers (Stan's): of the ``n_iter − warmup`` post-warmup
iterations the first is kept and then every ``thin``-th, so each chain yields
``ceil((n_iter − warmup) / thin)`` draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Schedule", "resolve_warmup"]

def _int_arg(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def resolve_warmup(warmup: Any, default: int = 5000) -> Any:
    """``warmup``, or ``default`` when it is None."""
    return default if warmup is None else warmup


@dataclass(frozen=True)
class Schedule:
    """Iterations of one run, validated.

    Parameters
    ----------
    n_iter : int
        Total iterations per chain, *including* the warmup (as ``iter`` in Stan).
    warmup : int
        Initial iterations discarded (and used for tuning where a sampler tunes);
        smaller than ``n_iter``.
    thin : int
        Keep the first post-warmup iteration and every ``thin``-th after it; at most the
        number of post-warmup iterations.
    n_chains : int
        Independent chains.
    """

    n_iter: int
    warmup: int
    thin: int = 1
    n_chains: int = 1

    def __post_init__(self) -> None:
        n_iter = _int_arg("n_iter", self.n_iter, 1)
        warmup = _int_arg("warmup", self.warmup, 0)
        thin = _int_arg("thin", self.thin, 1)
        n_chains = _int_arg("n_chains", self.n_chains, 1)
        if warmup >= n_iter:
            raise ValueError(
                f"warmup ({warmup}) must be smaller than n_iter ({n_iter}); n_iter counts all "
                "iterations including the warmup (e.g. n_iter=10000, warmup=5000)"
            )
        if thin > n_iter - warmup:
            raise ValueError(
                f"thin={thin} is larger than the {n_iter - warmup} post-warmup iterations; "
                "lower thin or raise n_iter"
            )
        for name, v in (("n_iter", n_iter), ("warmup", warmup), ("thin", thin),
                        ("n_chains", n_chains)):
            object.__setattr__(self, name, v)

    @property
    def n_draws(self) -> int:
        """Draws kept per chain: ``ceil((n_iter − warmup) / thin)``."""
        return -(-(self.n_iter - self.warmup) // self.thin)

    def is_kept(self, it: int) -> bool:
        """Whether iteration ``it`` (0-based) is kept."""
        return it >= self.warmup and (it - self.warmup) % self.thin == 0

    def kept_iterations(self) -> np.ndarray:
        """The 0-based iterations whose states are the draws, in order."""
        return np.arange(self.warmup, self.n_iter, self.thin)

    def info(self) -> dict[str, int]:
        """The schedule's entries of a sampler's ``info``."""
        return {"n_iter": self.n_iter, "warmup": self.warmup, "thin": self.thin,
                "n_chains": self.n_chains, "n_draws": self.n_draws}

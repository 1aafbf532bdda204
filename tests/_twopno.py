"""Shared test data: 2PNO responses with a ~ LogNormal(0, 0.3), b ~ N(0, 1), θ ~ N(0, 1) (the
private 2PL's design, ``docs/private_2pl.md``; the benchmark's ``simulate`` draws the same)."""

from __future__ import annotations

import numpy as np
from scipy import special


def lognormal_2pno(n: int = 2000, m: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X int8 (n, m), a, b)."""
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(0.0, 0.3, m))
    b = rng.normal(0.0, 1.0, m)
    theta = rng.standard_normal(n)
    X = (rng.random((n, m)) < special.ndtr(theta[:, None] * a - b)).astype(np.int8)
    return X, a, b

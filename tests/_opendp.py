"""Cross-check of a release's privacy statement against OpenDP (for the release test files)."""

from __future__ import annotations

import math

import pytest


def assert_statement_matches_opendp(privacy, parts, epsilon: float, delta: float = 1e-5) -> None:
    """``parts`` = [(σ, L2 sensitivity), ...] of the release's discrete Gaussian parts. OpenDP's
    Gaussian privacy maps, summed (zCDP composition), give ρ; its zCDP → (ε, δ) conversion gives
    ε at ``delta``. The statement may claim no less ρ and no smaller ε, and ε within the target."""
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    rho = sum(
        dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float),
                           scale=s).map(d)
        for s, d in parts)
    assert privacy.rho >= rho * (1 - 1e-12) and privacy.rho == pytest.approx(rho, rel=1e-9)
    scalar = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
                                scale=1 / math.sqrt(2 * privacy.rho))
    theirs = dp.c.make_zCDP_to_approxDP(scalar).map(1.0).epsilon(delta)
    assert privacy.epsilon == pytest.approx(theirs, rel=1e-6) and privacy.epsilon <= epsilon

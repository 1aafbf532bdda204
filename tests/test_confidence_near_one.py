"""A confidence level within 1e-16 of 1 is valid input: every private estimator's normal
intervals stay finite (z from the upper tail, not Φ⁻¹(0.5 + c/2), which rounds to Φ⁻¹(1) = ∞)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import privirt

NEAR_ONE = 0.9999999999999999  # 0.5 + NEAR_ONE / 2 == 1.0 in floating point


def _finite(ci) -> bool:
    frames = ci.values() if isinstance(ci, dict) else [ci]
    return all(np.isfinite(np.asarray(f, float)).all() for f in frames)


@pytest.mark.parametrize("estimate, options", [
    (privirt.private_2pl_estimate, {"n_boot": 20}),
    (privirt.private_totals_estimate, {"n_boot": 20}),
    (privirt.private_spectral_estimate, {}),
])
def test_intervals_at_a_confidence_next_to_one_are_finite_and_widest(estimate, options):
    assert 0.5 + NEAR_ONE / 2 == 1.0
    X, *_ = privirt.simulate_2pno(300, 5, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        near = estimate(X, epsilon=1.0, seed=1, confidence=NEAR_ONE, **options)
        usual = estimate(X, epsilon=1.0, seed=1, confidence=0.95, **options)
    assert _finite(near.ci)
    frames = (lambda ci: list(ci.values()) if isinstance(ci, dict) else [ci])
    for wide, narrow in zip(frames(near.ci), frames(usual.ci)):
        wide, narrow = np.asarray(wide, float), np.asarray(narrow, float)
        assert np.all(wide[:, 1] - wide[:, 0] > narrow[:, 1] - narrow[:, 0])

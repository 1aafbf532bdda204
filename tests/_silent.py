"""Shared test helper: a totals release whose score histogram says nothing about the ability
spread (``docs/totals.md`` §5.4, §7.4): the released histogram drowned in N(0, 10⁴²) noise, with
its declared noise scale raised to match (the release is otherwise the one given)."""

from __future__ import annotations

import dataclasses

import numpy as np

SILENT_SD = 1e4


def silent_histogram(rel, seed: int = 2):
    """``rel`` with its histogram plus rounded N(0, SILENT_SD²) noise (seeded) and
    ``sigma_histogram`` = SILENT_SD."""
    noise = np.rint(np.random.default_rng(seed).normal(0, SILENT_SD, rel.histogram.size)).astype(np.int64)
    return dataclasses.replace(rel, histogram=rel.histogram + noise, sigma_histogram=SILENT_SD)


def assert_se_scales_with_difficulty(fit) -> None:
    """Under a silent histogram every difficulty is uncertain by a common scale factor: the se of
    the items far from the centre (|β̂| > 0.8, at least 3 of them) is at least 0.2 |β̂|, and the
    se rises with |β̂| (correlation > 0.9)."""
    b, se = np.abs(fit.beta_unshrunk.to_numpy()), fit.se.to_numpy()
    far = b > 0.8
    assert far.sum() >= 3 and np.all(se[far] >= 0.2 * b[far]), (b, se)
    assert np.corrcoef(b, se)[0, 1] > 0.9

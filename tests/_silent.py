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

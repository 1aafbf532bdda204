"""Shared test fixtures and markers."""

from __future__ import annotations

import os

import numpy as np
import pytest

import privirt

os.environ.setdefault("MPLBACKEND", "Agg")

requires_gpu = pytest.mark.skipif(
    not privirt.gpu_available(), reason="needs a CUDA GPU with cupy"
)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261121)

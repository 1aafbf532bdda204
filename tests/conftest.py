"""Shared test fixtures and markers."""

from __future__ import annotations

import os

import numpy as np
import pytest

import privirt

os.environ.setdefault("MPLBACKEND", "Agg")

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``@pytest.mark.gpu`` skip cleanly where no CUDA GPU with cupy is present."""
    if privirt.gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU with cupy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261121)

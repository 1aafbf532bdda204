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
def noise_watch(monkeypatch):
    """``seen = noise_watch(ledger)``: from then on each discrete Gaussian draw appends how many
    spends ``ledger`` shows at that moment (the debit must come before any noise)."""
    mechanisms = pytest.importorskip("mechanisms")

    def watch(led) -> list:
        seen: list = []
        orig = mechanisms.DiscreteGaussian.apply

        def spy(self, values):
            seen.append(len(led.spends()))
            return orig(self, values)

        monkeypatch.setattr(mechanisms.DiscreteGaussian, "apply", spy)
        return seen

    return watch


@pytest.fixture
def forbid_noise(monkeypatch):
    """``forbid_noise()``: from then on any draw of noise (discrete Gaussian, discrete Laplace,
    randomized response) fails the test."""
    mechanisms = pytest.importorskip("mechanisms")

    def forbid() -> None:
        def boom(self, values):  # pragma: no cover - must not be reached
            raise AssertionError("noise drawn where nothing may be spent")

        monkeypatch.setattr(mechanisms.DiscreteGaussian, "apply", boom)
        monkeypatch.setattr(mechanisms.DiscreteLaplace, "apply", boom)
        monkeypatch.setattr(mechanisms.RandomizedResponse, "apply", boom)

    return forbid


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261121)

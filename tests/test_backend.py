"""The device switch."""

from __future__ import annotations

import numpy as np
import pytest

from privirt import _backend


def test_cpu_is_numpy():
    assert _backend.get_xp("cpu") is np
    assert _backend.resolve_device("cpu") == "cpu"


def test_invalid_device_names_the_choices():
    with pytest.raises(ValueError, match="auto"):
        _backend.resolve_device("tpu")


def test_auto_falls_back_to_cpu_without_gpu():
    expected = "gpu" if _backend.gpu_available() else "cpu"
    assert _backend.resolve_device("auto") == expected


def test_gpu_without_cupy_gives_install_hint():
    if _backend.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ImportError, match=r"privirt\[gpu\]"):
        _backend.resolve_device("gpu")


def test_to_numpy_passthrough():
    a = np.arange(3)
    assert _backend.to_numpy(a) is a
    assert _backend.to_numpy([1, 2]).tolist() == [1, 2]


@pytest.mark.gpu
def test_to_numpy_from_cupy():
    import cupy

    a = cupy.arange(4)
    out = _backend.to_numpy(a)
    assert isinstance(out, np.ndarray) and out.tolist() == [0, 1, 2, 3]

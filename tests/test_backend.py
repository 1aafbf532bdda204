"""The device switch."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privirt
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


def test_to_numpy_of_objects_with_a_get_method():
    # duck-typing on .get() (cupy's device-to-host copy) called DataFrame.get / dict.get
    frame = pd.DataFrame([[0, 1], [1, 0]])
    np.testing.assert_array_equal(_backend.to_numpy(frame), [[0, 1], [1, 0]])
    np.testing.assert_array_equal(_backend.to_numpy(pd.Series([1.0, 2.0])), [1.0, 2.0])


def test_graph_frame_and_beta_dict_are_accepted_or_refused_clearly():
    from privirt.stats.counts import pairwise_counts_frame
    from privirt.rasch.spectral import spectral_from_counts

    X = privirt.load_dataset("lsat6")
    Y, _ = pairwise_counts_frame(X)
    G = pd.DataFrame(~np.eye(5, dtype=bool), index=Y.index, columns=Y.columns)
    res = spectral_from_counts(Y, graph=G, device="cpu")
    np.testing.assert_allclose(res.beta, spectral_from_counts(Y, graph=G.to_numpy()).beta)
    with pytest.raises(ValueError, match="beta"):
        privirt.estimate_abilities(X, {"item1": 0.0}, device="cpu")


@pytest.mark.gpu
def test_to_numpy_from_cupy():
    import cupy

    a = cupy.arange(4)
    out = _backend.to_numpy(a)
    assert isinstance(out, np.ndarray) and out.tolist() == [0, 1, 2, 3]

"""The fused GPU update of the streaming summaries (``twopno_gpu.STREAMING_UPDATE``).

Its operation text is compiled for the host (each element a reference, as cupy's
``ElementwiseKernel`` makes it) and put in place of the cupy kernel, so that
``StreamingSummary.update`` takes its GPU branch with numpy arrays: the accumulators must
equal those of the array code exactly.  On a GPU the cupy kernel itself is compared
(marked ``gpu``).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from privirt.bayes import posterior
from privirt.bayes import twopno_gpu as gpu_mod
from privirt.bayes.posterior import StreamingSummary

_HOST = r"""
extern "C" void privirt_streaming_update_host(
        const double* v_, double count, int in_batch, int slot, long long n_kept,
        long long width, double* mean_, double* m2_, double* bsum_, double* kept,
        long long size) {
    for (long long i = 0; i < size; ++i) {
        const double& v = v_[i];
        double& mean = mean_[i];
        double& m2 = m2_[i];
        double& bsum = bsum_[i];
        BODY
    }
}
"""


@pytest.fixture(scope="module")
def host_update(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    in_params, out_params, body = gpu_mod.STREAMING_UPDATE
    assert [p.split()[-1] for p in in_params.split(",")] == [
        "v", "count", "in_batch", "slot", "n_kept", "width"]
    assert [p.split()[-1] for p in out_params.split(",")] == ["mean", "m2", "bsum", "kept"]
    d = tmp_path_factory.mktemp("streaming")
    src, lib = d / "u.cpp", d / "u.so"
    src.write_text(_HOST.replace("BODY", body))
    proc = subprocess.run([cxx, "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-o", str(lib),
                           str(src)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    fn = ctypes.CDLL(str(lib)).privirt_streaming_update_host
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_int, ctypes.c_int,
                   ctypes.c_longlong, ctypes.c_longlong] + [ctypes.c_void_p] * 4 + [
                   ctypes.c_longlong]

    def kernel(v, count, in_batch, slot, n_kept, width, mean, m2, bsum, kept):
        # the argument types cupy's kernel declares (numpy scalars passed by value)
        assert isinstance(count, np.float64) and isinstance(n_kept, np.int64)
        assert isinstance(in_batch, np.int32) and isinstance(slot, np.int32)
        v = np.ascontiguousarray(v, dtype=np.float64)
        assert v.shape == mean.shape == m2.shape == bsum.shape
        assert kept.shape[0] == v.shape[0] and kept.shape[2] == width
        fn(v.ctypes.data, count, in_batch, slot, n_kept, width, mean.ctypes.data,
           m2.ctypes.data, bsum.ctypes.data, kept.ctypes.data, v.size)

    return kernel


@pytest.mark.parametrize("n_draws", [1, 7, 120, 2503])
def test_fused_update_equals_the_array_code(host_update, monkeypatch, n_draws):
    rng = np.random.default_rng(n_draws)
    draws = rng.normal(size=(n_draws, 3, 5)) * 4 + 1
    plain = StreamingSummary(3, 5, n_draws, max_kept=100)
    for v in draws:
        plain.update(v)
    monkeypatch.setattr(posterior, "streaming_update_kernel", lambda xp: host_update)
    fused = StreamingSummary(3, 5, n_draws, max_kept=100)
    for v in draws:
        fused.update(v[:, ::-1][:, ::-1])  # a view, as the sampler's state arrays may be
    for name in StreamingSummary._ARRAYS:
        np.testing.assert_array_equal(getattr(fused, name), getattr(plain, name), err_msg=name)
    assert fused._n_kept == plain._n_kept and fused.count == plain.count


def test_no_fused_kernel_for_numpy():
    assert gpu_mod.streaming_update_kernel(np) is None


@pytest.mark.gpu
def test_device_kernel_equals_the_array_code():
    import cupy as cp

    rng = np.random.default_rng(5)
    draws = rng.normal(size=(300, 2, 9))
    host = StreamingSummary(2, 9, 300, max_kept=40)
    dev = StreamingSummary(2, 9, 300, max_kept=40, xp=cp)
    assert gpu_mod.streaming_update_kernel(cp) is not None
    for v in draws:
        host.update(v)
        dev.update(cp.asarray(v))
    dev.to_host()
    for name in StreamingSummary._ARRAYS:
        np.testing.assert_allclose(getattr(dev, name), getattr(host, name), rtol=1e-13,
                                   atol=1e-13, err_msg=name)

"""The one-pass byte → float16 conversion of the GPU counts (privirt/stats/_counts_gpu.py).

The CUDA kernel's text is compiled for the host (a C++ compiler, a few defines) and run
through ctypes on every byte value; the array fallback runs with numpy.  On a GPU the
kernel itself runs (marked ``gpu``).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import privirt
from privirt.stats import _counts_gpu as cg

_SHIM = r"""
#define __global__
struct HostDim3 { unsigned int x; };
static const HostDim3 blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
static inline int atomicOr(int* p, int v) { int old = *p; *p |= v; return old; }
"""


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    d = tmp_path_factory.mktemp("bytes_to_half")
    src, lib = d / "k.cpp", d / "k.so"
    src.write_text(_SHIM + cg.BYTES_TO_HALF_SOURCE)
    proc = subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    fn = ctypes.CDLL(str(lib)).privirt_bytes_to_half
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]

    def run(x: np.ndarray) -> tuple[np.ndarray, int]:
        x = np.ascontiguousarray(x)
        assert x.size % 4 == 0
        out = np.full(x.shape, np.nan, dtype=np.float16)
        bad = np.zeros(1, dtype=np.int32)
        fn(x.ctypes.data, out.ctypes.data, bad.ctypes.data, x.size // 4)
        return out, int(bad[0])

    return run


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_])
def test_kernel_text_converts_0_1_bytes_exactly(host_kernel, dtype):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, (37, 12)).astype(dtype)
    out, bad = host_kernel(x)
    assert bad == 0
    np.testing.assert_array_equal(out.view(np.uint16), x.astype(np.float16).view(np.uint16))


@pytest.mark.parametrize("value", [2, 3, 0x7F, 0x80, 0xFE, 0xFF])
@pytest.mark.parametrize("position", [0, 1, 2, 3, 41])
def test_kernel_text_flags_every_other_byte(host_kernel, value, position):
    """Any byte but 0 and 1 (int8 −1 is 0xFF), in any position of a word, sets the flag."""
    x = np.random.default_rng(1).integers(0, 2, 48).astype(np.uint8).reshape(6, 8)
    x.ravel()[position] = value
    assert host_kernel(x)[1] == 1


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_])
def test_array_fallback(dtype):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 2, (9, 7)).astype(dtype)  # 63 bytes: not a multiple of 4
    bad = np.zeros(1, dtype=np.int32)
    out = cg.bytes_to_half(np, x, bad)
    assert out.dtype == np.float16 and bad[0] == 0
    np.testing.assert_array_equal(out, x.astype(np.float16))
    if dtype is not np.bool_:
        x = x.copy()
        x[4, 5] = -1 if dtype is np.int8 else 7
        cg.bytes_to_half(np, x, bad)
        assert bad[0] == 1


def test_rejects_wider_types():
    with pytest.raises(TypeError, match="1-byte"):
        cg.bytes_to_half(np, np.zeros((2, 2), dtype=np.int16), np.zeros(1, np.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool"])
def test_device_kernel_counts_and_validation(dtype):
    import cupy as cp

    rng = np.random.default_rng(3)
    X = rng.integers(0, 2, (5003, 12)).astype(dtype)  # ragged last chunk
    Yc, Bc = privirt.pairwise_counts(X.astype(float), device="cpu")
    Xd = cp.asarray(X)
    bad = cp.zeros(1, dtype=cp.int32)
    half = cg.bytes_to_half(cp, Xd[:4000], bad)
    assert int(bad[0]) == 0
    np.testing.assert_array_equal(cp.asnumpy(half), X[:4000].astype(np.float16))
    Yg, Bg = privirt.pairwise_counts(Xd, device="gpu", chunk_size=1000)
    np.testing.assert_array_equal(Yg, Yc)
    np.testing.assert_array_equal(Bg, Bc)
    if dtype != "bool":
        X[1234, 5] = 2
        with pytest.raises(ValueError, match="2"):
            privirt.pairwise_counts(cp.asarray(X), device="gpu", chunk_size=1000)

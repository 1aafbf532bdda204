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
from privirt.stats.counts import differential_counts

_SHIM = r"""
#define __global__
struct HostDim3 { unsigned int x; };
static const HostDim3 blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
static inline int atomicOr(int* p, int v) { int old = *p; *p |= v; return old; }
"""


def _compile_on_host(tmp_path_factory, name: str, source: str) -> ctypes.CDLL:
    """The kernel text (behind the CUDA shim) compiled for the host as a shared library."""
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    d = tmp_path_factory.mktemp(name)
    src, lib = d / f"{name}.cpp", d / f"{name}.so"
    src.write_text(_SHIM + source)
    proc = subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return ctypes.CDLL(str(lib))


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    fn = _compile_on_host(tmp_path_factory, "bytes_to_half", cg.BYTES_TO_HALF_SOURCE).privirt_bytes_to_half
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


# ---------------------------------------------------------------------------------------
# 0/1/NaN floats: the scan (flags) and split (correct, wrong, observed) kernels
# ---------------------------------------------------------------------------------------
_UINT = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}
_NAME = {np.float16: "f16", np.float32: "f32", np.float64: "f64"}


@pytest.fixture(scope="module")
def host_float_kernels(tmp_path_factory):
    return _compile_on_host(tmp_path_factory, "float_kernels", cg.FLOAT_SOURCE)


def _scan(lib, x):
    fn = getattr(lib, f"privirt_scan_{_NAME[x.dtype.type]}")
    fn.restype = None
    flags = np.zeros(1, dtype=np.int32)
    fn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(flags.ctypes.data),
       ctypes.c_longlong(x.size))
    return int(flags[0])


def _split(lib, x, want_a):
    fn = getattr(lib, f"privirt_split_{_NAME[x.dtype.type]}")
    fn.restype = None
    out = [np.full(x.shape, np.nan, dtype=np.float16) for _ in range(3)]
    fn(*(ctypes.c_void_p(a.ctypes.data) for a in (x, *out)), ctypes.c_int(int(want_a)),
       ctypes.c_longlong(x.size))
    return out


def _nans(dtype):
    """Quiet, negative and signalling NaNs of the type, as bit patterns."""
    u = _UINT[dtype]
    bits = {np.float16: (0x7E00, 0xFE00, 0x7C01),
            np.float32: (0x7FC00000, 0xFFC00000, 0x7F800001),
            np.float64: (0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001)}[dtype]
    return np.array(bits, dtype=u).view(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_kernel_text_scans_and_splits(host_float_kernels, dtype):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 2, (31, 9)).astype(dtype)
    x[rng.random(x.shape) < 0.2] = np.nan
    x.ravel()[[3, 50, 77]] = _nans(dtype)
    x.ravel()[[5, 60]] = -0.0
    assert _scan(host_float_kernels, x) == 2
    assert _scan(host_float_kernels, np.nan_to_num(x)) == 0
    nan = np.isnan(x)
    for want_a in (True, False):
        C, W, A = _split(host_float_kernels, x, want_a)
        np.testing.assert_array_equal(C, (x == 1).astype(np.float16))
        np.testing.assert_array_equal(W, (x == 0).astype(np.float16))  # -0.0 is wrong
        if want_a:
            np.testing.assert_array_equal(A, (~nan).astype(np.float16))
        else:
            assert np.isnan(A).all()  # not written


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("bad", [0.5, 2.0, -1.0, np.inf, -np.inf, 1e-30, -1.0000001])
def test_float_kernel_text_flags_every_other_value(host_float_kernels, dtype, bad):
    x = np.zeros(40, dtype=dtype)
    x[::3] = 1
    x[7] = np.nan
    with np.errstate(over="ignore"):
        x[13] = dtype(bad)
    if x[13] in (0, 1):  # rounded to a valid value in this width (1e-30 in float16)
        assert _scan(host_float_kernels, x) == 2
    else:
        assert _scan(host_float_kernels, x) == 3


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_device_float_counts_and_validation(dtype):
    import cupy as cp

    rng = np.random.default_rng(6)
    X = rng.integers(0, 2, (4001, 13)).astype(dtype)
    X[rng.random(X.shape) < 0.15] = np.nan
    X[5, 2] = -0.0
    Yc, Bc = privirt.pairwise_counts(X.astype(float), device="cpu")
    for chunk in (1000, None):
        Yg, Bg = privirt.pairwise_counts(cp.asarray(X), device="gpu", chunk_size=chunk)
        np.testing.assert_array_equal(Yg, Yc)
        np.testing.assert_array_equal(Bg, Bc)
    Y_only = differential_counts(cp.asarray(X), chunk_size=1000)
    np.testing.assert_array_equal(Y_only, Yc)
    Xc = np.nan_to_num(X)  # complete
    Yc, Bc = privirt.pairwise_counts(Xc.astype(float), device="cpu")
    Yg, Bg = privirt.pairwise_counts(cp.asarray(Xc), device="gpu", chunk_size=1000)
    np.testing.assert_array_equal(Yg, Yc)
    np.testing.assert_array_equal(Bg, Bc)
    X[1234, 5] = 0.5
    with pytest.raises(ValueError, match="0.5"):
        privirt.pairwise_counts(cp.asarray(X), device="gpu")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("source", ["BYTES_TO_HALF_SOURCE", "FLOAT_SOURCE"])
def test_counts_kernels_compile_with_nvcc_for_sm90(tmp_path, source):
    f = tmp_path / "k.cu"
    f.write_text(getattr(cg, source))
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(f), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr

"""Checks of the GPU code paths that need no GPU.

* The fused Gibbs kernels (``privirt/bayes/gibbs_2pno.cu``, the exact text cupy's
  ``RawModule`` compiles) are compiled for sm_90 with ``nvcc`` and with NVRTC, when
  available.
* The same kernel bodies are compiled for the *host* with a C++ compiler (with host
  versions of ``__umulhi``, ``normcdf`` and ``normcdfinv``, and every array parameter a
  bounds-checked span) and called through ctypes in place of the device kernels, while the
  GPU driver code runs with numpy standing in for cupy.  This runs the real kernel text
  and the real Python-level GPU logic (shapes, argument types, batch indexing, draw
  stores, streaming summaries) on the CPU, and fails on any out-of-bounds index.
* The cuBLAS ``gemmEx`` call of the counts is checked against an independent
  column-major GEMM that reads the operands through the pointers, leading dimensions and
  transpose flags it is given.

Everything skips cleanly where a tool (nvcc, NVRTC, a C++ compiler) is missing.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
from scipy import special, stats

import privirt
import privirt._backend as backend
from privirt.stats import counts as counts_mod
from privirt.bayes import gibbs as gibbs_mod
from privirt.bayes import twopno
from privirt.bayes import twopno_gpu as gpu_mod
from tests._exact_posterior import assert_moments_match, tiny_2pno_problem, tiny_free_problem
from tests._philox import KNOWN_ANSWERS
from tests._philox import uniform2 as _uniform2

# ---------------------------------------------------------------------------------------
# the kernels' parameter lists
# ---------------------------------------------------------------------------------------
#: C type of a kernel parameter -> the numpy dtype its argument must have (cupy's RawKernel
#: passes an array as a bare pointer and a numpy scalar by value, without conversion).
_NPTYPES = {
    "double": np.float64, "float": np.float32, "signed char": np.int8,
    "unsigned char": np.uint8, "int": np.int32, "unsigned int": np.uint32,
    "long long": np.int64, "unsigned long long": np.uint64,
}
_CSCALAR = {
    "double": ctypes.c_double, "int": ctypes.c_int32, "unsigned int": ctypes.c_uint32,
    "long long": ctypes.c_int64,
}


def _parse(params: str) -> list[tuple[bool, bool, str, str]]:
    """``(is_pointer, is_const, C type, name)`` for each parameter of a kernel."""
    out = []
    for p in params.split(","):
        m = re.fullmatch(
            r"\s*(const\s+)?([a-z ]+?)\s*(\*\s*(?:__restrict__)?)?\s*([A-Za-z_]\w*)\s*", p
        )
        assert m, f"cannot parse parameter {p!r}"
        const, ctype, ptr, name = m.groups()
        assert ctype in _NPTYPES, f"unexpected type {ctype!r} in {p!r}"
        out.append((ptr is not None, const is not None, ctype, name))
    return out


@pytest.fixture(scope="module")
def kernel_source(tmp_path_factory):
    f = tmp_path_factory.mktemp("kernels") / "privirt_gibbs.cu"
    f.write_text(gpu_mod.cuda_source())
    return f


def test_kernel_specs_are_well_formed():
    """Parameters parse; every parameter is used; outputs are written, inputs never."""
    assert list(gpu_mod.kernel_specs()) == [
        "privirt_gibbs_z", "privirt_gibbs_theta", "privirt_gibbs_item_sums",
        "privirt_gibbs_item",
    ]
    for name, (params, body) in gpu_mod.kernel_specs().items():
        parsed = _parse(params)
        names = [n for *_, n in parsed]
        assert len(set(names)) == len(names), name
        assert "size" not in names and "i" not in names  # added by _cuda_source
        for ptr, const, _, n in parsed:
            assert re.search(rf"\b{n}\b", body), f"{name}: parameter {n} unused"
            written = re.search(rf"\b{n}\[[^\]]*\]\s*=(?!=)", body)
            if ptr and not const:
                assert written, f"{name}: output {n} never written"
            else:
                assert not written, f"{name}: input {n} written"
            assert ptr or not const, f"{name}: scalar {n} declared const"
    src = gpu_mod.cuda_source()
    for name in gpu_mod.kernel_specs():
        assert f'extern "C" __global__ void {name}(' in src


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_kernels_compile_with_nvcc_for_sm90(kernel_source):
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-Xptxas", "-warn-spills",
         str(kernel_source), "-o", str(kernel_source.with_suffix(".o"))],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr


def _nvrtc():
    try:
        from cupy_backends.cuda.libs import nvrtc  # type: ignore[import-not-found]

        nvrtc.getVersion()
    except Exception:
        return None
    return nvrtc


def test_kernels_compile_with_nvrtc_for_sm90(kernel_source):
    """NVRTC is what cupy's RawModule compiles the source with."""
    nvrtc = _nvrtc()
    if nvrtc is None:
        pytest.skip("needs cupy with a loadable NVRTC")
    prog = nvrtc.createProgram(kernel_source.read_text(), kernel_source.name, [], [])
    try:
        nvrtc.compileProgram(prog, ["--std=c++17", "-arch=compute_90"])
    except Exception:
        pytest.fail(nvrtc.getProgramLog(prog))
    ptx = nvrtc.getPTX(prog)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    for name in gpu_mod.kernel_specs():
        assert f".entry {name}(" in ptx


# ---------------------------------------------------------------------------------------
# the kernel bodies compiled for the host
# ---------------------------------------------------------------------------------------
_HOST_SHIM = r"""
#include <cmath>
#include <cstddef>
#include <type_traits>
#define __device__
#define __forceinline__ inline
#define __global__
struct HostDim3 { unsigned int x; };
static const HostDim3 blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
// every array parameter becomes a span that counts out-of-bounds accesses
static long long g_out_of_bounds = 0;
extern "C" long long host_out_of_bounds() { return g_out_of_bounds; }
template <typename T> struct Span {
    T* p; long long n;
    T& operator[](long long i) const {
        static typename std::remove_const<T>::type dummy{};
        if (i < 0 || i >= n) { ++g_out_of_bounds; return dummy; }
        return p[i];
    }
};
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}
static inline double normcdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
// inverse of normcdf: Acklam's rational approximation and two Halley refinements
static inline double normcdfinv(double p) {
    if (p <= 0.0) return -INFINITY;
    if (p >= 1.0) return INFINITY;
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
        -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01,
        2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
        -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
        -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00,
        2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
        2.445134137142996e+00, 3.754408661907416e+00};
    double x;
    if (p < 0.02425) {
        double q = std::sqrt(-2 * std::log(p));
        x = (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q+c[5]) /
            ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q+1);
    } else if (p > 1 - 0.02425) {
        double q = std::sqrt(-2 * std::log1p(-p));
        x = -(((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q+c[5]) /
            ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q+1);
    } else {
        double q = p - 0.5, r = q * q;
        x = (((((a[0]*r+a[1])*r+a[2])*r+a[3])*r+a[4])*r+a[5])*q /
            (((((b[0]*r+b[1])*r+b[2])*r+b[3])*r+b[4])*r+1);
    }
    for (int it = 0; it < 2; ++it) {
        double e = normcdf(x) - p;
        double u = e * std::sqrt(2 * M_PI) * std::exp(0.5 * x * x);
        x = x - u / (1 + 0.5 * x * u);
    }
    return x;
}
using std::sqrt; using std::log; using std::exp; using std::fmax; using std::fmin; using std::fabs;
"""


def _emit_host_source() -> str:
    """The preamble and kernel bodies of ``gibbs_2pno.cu`` verbatim; in each signature the
    array parameters become bounds-checked spans."""
    parts = [_HOST_SHIM, gpu_mod.cuda_preamble()]
    for name, (params, body) in gpu_mod.kernel_specs().items():
        decls = []
        for ptr, const, ctype, n in _parse(params):
            decls.append(f"Span<{'const ' if const else ''}{ctype}> {n}" if ptr else f"{ctype} {n}")
        parts.append(
            f'extern "C" __global__ void {name}({", ".join(decls)}, long long size) {{\n'
            f"{body}\n}}\n"
        )
    parts.append(
        'extern "C" void host_philox(unsigned int* c, unsigned int* k, unsigned int* o) {\n'
        "  philox4x32_10(c[0], c[1], c[2], c[3], k[0], k[1], o);\n}\n"
    )
    return "\n".join(parts)


class _Span(ctypes.Structure):
    _fields_ = [("p", ctypes.c_void_p), ("n", ctypes.c_longlong)]


class _HostKernel:
    """A host-compiled kernel called like the device launcher: ``kernel(size, *args)``.

    Arguments are checked as cupy's RawKernel would need them: arrays C-contiguous with
    exactly the parameter's element type, scalars numpy scalars of exactly its type (a
    Python int would reach the device as a 64-bit value).  After the call no array may
    have been indexed out of bounds.
    """

    def __init__(self, lib, name, params):
        self.lib = lib
        self.name = name
        self.fn = getattr(lib, name)
        self.fn.restype = None
        self.params = _parse(params)

    def __call__(self, size, *args):
        assert len(args) == len(self.params), f"{self.name}: wrong number of arguments"
        c_args = []
        for (ptr, const, ctype, n), v in zip(self.params, args):
            if ptr:
                assert isinstance(v, np.ndarray), f"{n}: expected an array"
                assert v.dtype == _NPTYPES[ctype], f"{n}: dtype {v.dtype}, kernel expects {ctype}"
                assert v.flags.c_contiguous, f"{n}: not contiguous"
                assert const or v.flags.writeable, f"{n}: read-only output"
                c_args.append(_Span(v.ctypes.data, v.size))
            else:
                assert isinstance(v, np.generic) and v.dtype == _NPTYPES[ctype], (
                    f"{self.name}: {n} must be a numpy {ctype} scalar, got {type(v).__name__}"
                )
                c_args.append(_CSCALAR[ctype](v.item()))
        before = self.lib.host_out_of_bounds()
        self.fn(*c_args, ctypes.c_longlong(int(size)))
        assert self.lib.host_out_of_bounds() == before, f"{self.name}: out-of-bounds index"


def _cxx() -> str | None:
    return shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++") or shutil.which("clang++")


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory):
    cxx = _cxx()
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    d = tmp_path_factory.mktemp("hostkernels")
    src = d / "kernels.cpp"
    src.write_text(_emit_host_source())
    lib = d / "kernels.so"
    proc = subprocess.run(
        [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wno-unused-variable",
         str(src), "-o", str(lib)], capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lib = ctypes.CDLL(str(lib))
    lib.host_out_of_bounds.restype = ctypes.c_longlong
    return lib


@pytest.fixture
def host_kernels(host_lib):
    return tuple(
        _HostKernel(host_lib, name, spec[0]) for name, spec in gpu_mod.kernel_specs().items()
    )


def _u32(*v):
    return tuple(np.uint32(x) for x in v)


def _i32(*v):
    return tuple(np.int32(x) for x in v)


def test_host_harness_catches_out_of_bounds(host_kernels):
    """Guard for the bounds check: an item-sums call with too short a Z is caught."""
    _, _, sums_kernel, _ = host_kernels
    n, k = 6, 3
    sums = [np.zeros(2 * k) for _ in range(6)]
    with pytest.raises(AssertionError, match="out-of-bounds"):
        sums_kernel(2 * k, np.zeros(n * k - 1), np.zeros(n), np.zeros(k), np.zeros(k),
                    np.zeros(n * k, np.int8), np.zeros(n, np.int8), *_i32(n, k, 1, 1, 1, 0, 3),
                    *sums, np.zeros(2 * 4), np.zeros(3))


def test_host_harness_rejects_python_scalars(host_kernels):
    """A Python int where the kernel takes a 32-bit int would be misread on the device."""
    theta_kernel = host_kernels[1]
    with pytest.raises(AssertionError, match="numpy int scalar"):
        theta_kernel(1, np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1, np.int8),
                     np.zeros(2, np.uint32), np.zeros(1, np.int8), np.zeros(1), np.uint32(0), 1,
                     *_i32(1, 1, 1, 0, -1, 0),
                     np.zeros(1), np.zeros(1))


def test_host_normcdfinv_shim_is_accurate(host_kernels):
    """The host stand-in for CUDA's normcdfinv must be accurate for the checks below.

    The θ kernel with no items (so precision 1 and mean 0) returns normcdfinv(u) for its
    Philox uniforms u.
    """
    theta_kernel = host_kernels[1]
    n = 4000
    out = np.empty(n)
    e = np.empty(0)
    theta_kernel(n, e, e, e, np.empty(0, np.int8), np.array([7, 9], dtype=np.uint32),
                 np.zeros(n, np.int8), np.zeros(n), np.uint32(3), *_i32(n, 0, 1, 1, 0, -1, 0),
                 out, np.zeros(1))
    # the uniforms are those of the numpy Philox port; the normal is their inverse CDF
    u0, _ = _uniform2(3, 1, np.arange(n), 0, 7, 9)
    np.testing.assert_allclose(out, special.ndtri(u0), rtol=1e-12, atol=1e-12)


def test_compiled_philox_matches_random123_known_answers(host_lib):
    """The CUDA Philox text, compiled, reproduces Random123's known-answer vectors."""
    for ctr, key, expected in KNOWN_ANSWERS:
        c = (ctypes.c_uint32 * 4)(*ctr)
        k = (ctypes.c_uint32 * 2)(*key)
        o = (ctypes.c_uint32 * 4)()
        host_lib.host_philox(c, k, o)
        assert tuple(o) == expected


def _batch_problem(rng, D, C, n, k, p_missing=0.3):
    B = D * C
    codes = rng.integers(0, 2, (D, n, k)).astype(np.int8)
    codes[rng.random((D, n, k)) < p_missing] = -1
    theta, a, b = rng.normal(size=(B, n)), rng.uniform(0.5, 2, (B, k)), rng.normal(size=(B, k))
    keys = rng.integers(0, 2**32, 2 * B, dtype=np.uint64).astype(np.uint32)
    return codes, theta, a, b, keys


def test_z_kernel_indexing_and_truncation(host_kernels):
    """Each cell reads its own data set, person, item and chain key; Z has the right sign."""
    z_kernel = host_kernels[0]
    rng = np.random.default_rng(0)
    D, C, n, k = 3, 2, 7, 5
    B = D * C
    codes, theta, a, b, keys = _batch_problem(rng, D, C, n, k)
    Z = np.full((B, n, k), np.nan)
    z_kernel(B * n * k, theta.ravel(), a.ravel(), b.ravel(), codes.ravel(), keys,
             np.uint32(11), *_i32(n, k, C, D), Z.ravel())
    y = np.repeat(codes, C, axis=0)  # batch element d·C + c uses data set d
    assert np.all(Z[y == -1] == 0)
    assert np.all(Z[y == 1] > 0) and np.all(Z[y == 0] < 0)
    # the draw is μ ± X with X from the inverse-CDF branch on the cell's own counter
    mu = theta[:, :, None] * a[:, None, :] - b[:, None, :]
    s = np.where(y == 1, 1.0, -1.0)
    L = -s * mu
    cell = np.broadcast_to(np.arange(n * k).reshape(n, k), (B, n, k))
    kk = keys.reshape(B, 2).astype(np.uint64)
    u0, _ = _uniform2(11, 0, cell, 0, kk[:, 0, None, None], kk[:, 1, None, None])
    x = -special.ndtri(u0 * special.ndtr(-L))
    ok = (y >= 0) & (L <= 5)
    np.testing.assert_allclose(Z[ok], (mu + s * x)[ok], rtol=1e-9, atol=1e-9)


def test_z_kernel_far_tail(host_kernels):
    """The exponential-rejection branch (L > 5) stays beyond the truncation point."""
    z_kernel = host_kernels[0]
    n = 20000
    codes = np.ones(n, dtype=np.int8)  # y = 1 everywhere, μ = −θ·1 − 0 = −8: L = 8
    Z = np.empty(n)
    z_kernel(n, np.full(n, 8.0), np.array([-1.0]), np.array([0.0]), codes,
             np.array([5, 6], dtype=np.uint32), np.uint32(0), *_i32(n, 1, 1, 1), Z)
    x = Z + 8.0  # X = Z − μ ~ N(0, 1) | X > 8
    assert np.all(x > 8.0)
    assert stats.kstest(x, stats.truncnorm(8.0, np.inf).cdf).pvalue > 1e-3


@pytest.mark.parametrize("missing", [0, 1])
def test_theta_kernel_matches_the_full_conditional(host_kernels, missing):
    """θ_i = (Σ' a_j (Z_ij + b_j)) / (1 + Σ' a_j²) + e / √(1 + Σ' a_j²), sums over observed
    items, e the inverse CDF of the person's stream-1 uniform; written to the draw slot."""
    theta_kernel = host_kernels[1]
    rng = np.random.default_rng(2)
    D, C, n, k = 2, 3, 9, 6
    B = D * C
    codes, _, a, b, keys = _batch_problem(rng, D, C, n, k, p_missing=0.3 if missing else 0.0)
    y = np.repeat(codes, C, axis=0)
    Z = np.where(y >= 0, rng.normal(size=(B, n, k)), 0.0)
    n_keep, slot = 4, 2
    store = np.full((B, n_keep, n), np.nan)
    out = np.empty((B, n))
    theta_kernel(B * n, Z.ravel(), a.ravel(), b.ravel(), codes.ravel(), keys,
                 np.zeros(n, np.int8), np.zeros(n), np.uint32(5),
                 *_i32(n, k, C, D, missing, slot, n_keep), out.ravel(), store.ravel())
    M = (y >= 0) if missing else np.ones_like(y, dtype=bool)
    prec = 1.0 + (M * a[:, None, :] ** 2).sum(axis=2)
    lin = (Z * a[:, None, :]).sum(axis=2) + (M * (a * b)[:, None, :]).sum(axis=2)
    kk = keys.reshape(B, 2).astype(np.uint64)
    u0, _ = _uniform2(5, 1, np.arange(n)[None, :], 0, kk[:, :1], kk[:, 1:])
    expected = lin / prec + special.ndtri(u0) / np.sqrt(prec)
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(store[:, slot], out)
    assert np.isnan(np.delete(store, slot, axis=1)).all()


def test_theta_kernel_applies_anchors(host_kernels):
    """Anchored persons: θ fixed at its value (con 2), or the person's conditional truncated
    to θ > 0 / θ < 0 (con ±1) by the inverse CDF of the same stream-1 uniform; the others
    are untouched by the anchors."""
    theta_kernel = host_kernels[1]
    rng = np.random.default_rng(4)
    D, C, n, k = 1, 2, 8, 5
    B = D * C
    codes, _, a, b, keys = _batch_problem(rng, D, C, n, k, p_missing=0.0)
    Z = rng.normal(size=(B, n, k))
    con = np.array([0, 1, -1, 2, 1, -1, 0, 2], dtype=np.int8)
    fix = np.array([0, 0, 0, 0.7, 0, 0, 0, -1.3])
    out = np.empty((B, n))
    theta_kernel(B * n, Z.ravel(), a.ravel(), b.ravel(), codes.ravel(), keys, con, fix,
                 np.uint32(6), *_i32(n, k, C, D, 0, -1, 0), out.ravel(), np.zeros(1))
    prec = 1.0 + (a**2).sum(axis=1)[:, None]
    m = ((Z * a[:, None, :]).sum(axis=2) + (a * b).sum(axis=1)[:, None]) / prec
    sd = 1.0 / np.sqrt(prec)
    kk = keys.reshape(B, 2).astype(np.uint64)
    u0, _ = _uniform2(6, 1, np.arange(n)[None, :], 0, kk[:, :1], kk[:, 1:])
    s = con.astype(float)
    L = -s * m / sd
    expected = np.where(con == 0, m + sd * special.ndtri(u0),
                        m + s * sd * -special.ndtri(u0 * special.ndtr(-L)))
    expected = np.where(con == 2, fix, expected)
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-9)
    assert np.all(out[:, con == 1] > 0) and np.all(out[:, con == -1] < 0)


@pytest.mark.parametrize("rows", [1, 4, 9, 13])
def test_item_sums_kernel_adds_up_to_the_item_sums(host_kernels, rows):
    """Partial sums over person chunks (the last one short) add up to Σ_i θ_i Z_ij, Σ_i Z_ij,
    and the masked Σ θ_i², Σ θ_i, Σ 1 of each batch element's data set."""
    sums_kernel = host_kernels[2]
    rng = np.random.default_rng(3)
    D, C, n, k = 2, 2, 13, 5
    B = D * C
    codes, theta, a, b, _ = _batch_problem(rng, D, C, n, k)
    y = np.repeat(codes, C, axis=0)
    Z = np.where(y >= 0, rng.normal(size=(B, n, k)), 0.0)
    P = -(-n // rows)
    parts = [np.full((P, B, k), np.nan) for _ in range(6)]
    con = np.zeros(n, np.int8)
    con[[1, 4, 7]] = [1, -1, 2]
    person = np.full((P, B, 4), np.nan)
    chain = np.full((B, 3), np.nan)
    sums_kernel(P * B * k, Z.ravel(), theta.ravel(), a.ravel(), b.ravel(), codes.ravel(), con,
                *_i32(n, k, C, D, B, 1, rows), *(p.ravel() for p in parts), person.ravel(),
                chain.ravel())
    M = (y >= 0).astype(float)
    th = theta[:, :, None]
    res = Z - (th * a[:, None, :] - b[:, None, :])
    expected = [(th * Z).sum(1), Z.sum(1), (th**2 * M).sum(1), (th * M).sum(1), M.sum(1),
                (res**2 * M).sum(1)]
    for got, want in zip(parts, expected):
        np.testing.assert_allclose(got.sum(axis=0), want, rtol=1e-12, atol=1e-12)
    # the orbit moves' sums: persons not fixed, the anchored extremes, the chain's items
    free = con != 2
    np.testing.assert_allclose(person[:, :, 0].sum(0), theta[:, free].sum(1), rtol=1e-12)
    np.testing.assert_allclose(person[:, :, 1].sum(0), (theta[:, free] ** 2).sum(1),
                               rtol=1e-12)
    np.testing.assert_array_equal(person[:, :, 2].min(0), theta[:, 1])
    np.testing.assert_array_equal(person[:, :, 3].max(0), theta[:, 4])
    np.testing.assert_allclose(chain, np.stack([a.sum(1), (a * a).sum(1), (a * b).sum(1)], 1),
                               rtol=1e-12)
    # each chunk holds its own rows only
    r = slice(0, rows)
    np.testing.assert_allclose(parts[1][0], Z[:, r].sum(1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("moved", [False, True])
@pytest.mark.parametrize("free", [0, 1])
def test_item_kernel_matches_the_cpu_item_step(host_kernels, free, moved):
    """Same uniforms in, same (a, b) out as the CPU's exact restricted-normal draw (free:
    unrestricted), from partial sums over chunks plus the prior terms; written to the draw
    slot.  ``moved``: the orbit moves first — the chain's scale c and shift d
    (:func:`privirt.bayes.moves.log_scale_mh`, :func:`~privirt.bayes.moves.shift_draw`) from
    the person and item sums, θ and its draw moved, each item's latent scale g_j — as the CPU
    engines compute them (``twopno.orbit_moves``, ``moves.shift_sums``)."""
    from privirt.bayes import moves

    item_kernel = host_kernels[3]
    rng = np.random.default_rng(1)
    B, k, P, n = 3, 40, 3, 60
    th = rng.normal(size=(B, n))
    s_tt = (th * th).sum(axis=1)[:, None] + np.zeros((B, k))
    s_t = th.sum(axis=1)[:, None] + np.zeros((B, k))
    s_1 = np.full((B, k), float(n))
    s_tz, s_z = rng.normal(0, 5, (B, k)), rng.normal(0, 5, (B, k))
    s_rr = rng.uniform(20, 80, (B, k))
    pa_prec, pa_lin, pb_prec, pb_lin = 0.5, 0.25, 0.1, -0.2
    a_prev, b_prev = rng.uniform(0.5, 2, (B, k)), rng.normal(size=(B, k))

    def split(x):  # P partials adding up to x
        w = np.moveaxis(rng.dirichlet(np.ones(P), size=x.shape), -1, 0)
        return np.ascontiguousarray(w * x)

    parts = [split(x) for x in (s_tz, s_z, s_tt, s_t, s_1, s_rr)]
    person = np.zeros((P, B, 4))
    person[:, :, 0], person[:, :, 1] = split(th.sum(1)), split((th * th).sum(1))
    person[:, :, 2], person[:, :, 3] = 1e308, -1e308
    chain = np.stack([a_prev.sum(1), (a_prev**2).sum(1), (a_prev * b_prev).sum(1)], 1)
    keys = np.array([1, 2, 3, 4, 5, 6], dtype=np.uint32)
    a_out, b_out, th_out = a_prev.copy(), b_prev.copy(), th.copy()
    n_keep, slot = 3, 0
    st_a, st_b = np.full((B, n_keep, k), np.nan), np.full((B, n_keep, k), np.nan)
    st_th = np.full((B, n_keep, n), np.nan)
    item_kernel(B * k, *(p.ravel() for p in parts), person.ravel(), chain.ravel(),
                *_i32(moved, moved, moved), np.float64(n), np.float64(n - k), *_i32(n, P, B),
                *(np.float64(x) for x in (pa_prec, pa_lin, pb_prec, pb_lin)), np.int32(free),
                keys, np.uint32(4), *_i32(k, slot, n_keep), a_out.ravel(), b_out.ravel(),
                st_a.ravel(), st_b.ravel(), th_out.ravel(), st_th.ravel())
    kk = keys.reshape(B, 2).astype(np.uint64)
    item = np.broadcast_to(np.arange(k), (B, k))
    if moved:
        u0, u1 = _uniform2(4, 4, 0, 0, kk[:, 0], kk[:, 1])
        v0, _ = _uniform2(4, 5, 0, 0, kk[:, 0], kk[:, 1])
        w0, w1 = _uniform2(4, 6, item, 0, kk[:, :1], kk[:, 1:])
        c, d = np.ones(B), np.zeros(B)
        for bb in range(B):
            c[bb] = np.exp(moves.log_scale_mh(n - k, 0.5 * (th[bb] ** 2).sum(),
                                              0.5 * pa_prec * chain[bb, 1], pa_lin * chain[bb, 0],
                                              0.0, special.ndtri(u0[bb]), u1[bb]))
            d[bb] = moves.shift_draw(c[bb], th[bb].sum(), chain[bb, 1], chain[bb, 2],
                                     chain[bb, 0], np.inf, -np.inf, n, pb_prec, pb_lin,
                                     special.ndtri(v0[bb]))
        a1, g = a_prev / c[:, None], np.ones((B, k))
        b1 = b_prev + a1 * d[:, None]
        for bb in range(B):
            for j in range(k):
                g[bb, j] = moves.latent_scale(s_rr[bb, j], a1[bb, j], b1[bb, j], n, pa_prec,
                                              pa_lin, pb_prec, pb_lin,
                                              special.ndtri(w0[bb, j]), w1[bb, j])
        assert np.all(c != 1) and np.all(d != 0) and np.mean(g != 1) > 0.5
        s_tz, s_z, s_tt, s_t = moves.shift_sums(c[:, None], d[:, None], g, s_tz, s_z, s_tt,
                                                s_t, s_1)
        np.testing.assert_allclose(th_out, c[:, None] * th + d[:, None], rtol=1e-12)
        np.testing.assert_array_equal(st_th[:, slot], th_out)
    else:
        np.testing.assert_array_equal(th_out, th)
        assert np.isnan(st_th).all()
    v, _ = _uniform2(4, 2, item, 0, kk[:, :1], kk[:, 1:])
    e, _ = _uniform2(4, 3, item, 0, kk[:, :1], kk[:, 1:])
    p_aa, p_ab, p_bb = s_tt + pa_prec, -s_t, s_1 + pb_prec
    r_a, r_b = s_tz + pa_lin, -s_z + pb_lin
    # both draw a from the inverse CDF of the upper tail when L = −m_a / sd_a ≤ 5
    det = p_aa * p_bb - p_ab**2
    m_a = (p_bb * r_a - p_ab * r_b) / det
    sd_a = np.sqrt(p_bb / det)
    assert np.all(-m_a / sd_a <= 5)
    a_cpu, b_cpu = twopno.draw_items(p_aa, p_ab, p_bb, r_a, r_b, v, special.ndtri(e),
                                     free=bool(free))
    if free:  # the untruncated draw gives negative slopes where the mean is small
        assert np.any(a_out < 0)
    else:
        assert np.all(a_out > 0)
    np.testing.assert_allclose(a_out, a_cpu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(b_out, b_cpu, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(st_a[:, slot], a_out)
    np.testing.assert_array_equal(st_b[:, slot], b_out)
    assert np.isnan(st_a[:, 1:]).all() and np.isnan(st_b[:, 1:]).all()


# ---------------------------------------------------------------------------------------
# the GPU driver with numpy standing in for cupy
# ---------------------------------------------------------------------------------------
class _FakeDevice:
    def synchronize(self) -> None:
        pass


def _fake_cupy() -> types.ModuleType:
    """numpy dressed as cupy: what the GPU code paths call on ``xp``."""
    mod = types.ModuleType("fake_cupy")
    mod.__getattr__ = lambda name: getattr(np, name)  # type: ignore[method-assign]
    mod.cuda = types.SimpleNamespace(Device=_FakeDevice)  # type: ignore[attr-defined]
    return mod


@pytest.fixture
def fake_gpu(monkeypatch):
    fake = _fake_cupy()
    monkeypatch.setattr(backend, "_cupy_or_none", lambda: fake)
    return fake


@pytest.fixture
def fake_gpu_gibbs(fake_gpu, host_kernels, monkeypatch):
    monkeypatch.setattr(gpu_mod, "gpu_kernels", lambda: host_kernels)
    return fake_gpu


def _z_scores(post, param, truth):
    s = post.summary(param)
    return (s["mean"].to_numpy() - truth) / s["sd"].to_numpy()


def test_gpu_sampler_recovers_parameters(fake_gpu_gibbs):
    """The device sampler (kernels compiled for the host) recovers simulated parameters:
    the truth lies within a few posterior standard deviations of the posterior mean."""
    X, theta, a, b = privirt.simulate_2pno(3000, 8, seed=3)
    post = privirt.gibbs_2pno(X, n_iter=500, warmup=200, seed=4, device="gpu", progress=False)
    assert post.info["device"] == "gpu"
    for param, truth in (("a", a), ("b", b)):
        z = _z_scores(post, param, truth)
        assert np.all(np.abs(z) < 4.5), (param, z)
        assert np.mean(z**2) < 4.0, (param, z)
    th_hat = post.summary("theta")["mean"].to_numpy()
    assert np.corrcoef(th_hat, theta)[0, 1] > 0.75  # 8 items: reliability ≈ 0.7
    assert isinstance(post.draws["a"], np.ndarray) and post.draws["a"].shape == (1, 300, 8)
    assert np.all(post.draws["a"] > 0)


def test_gpu_sampler_with_missing_data_and_chains(fake_gpu_gibbs):
    X, theta, a, b = privirt.simulate_2pno(2000, 6, seed=5, p_observed=0.7)
    post = privirt.gibbs_2pno(X, n_iter=1000, warmup=400, n_chains=2, seed=6, device="gpu",
                              progress=False, keep_draws=False)
    z = _z_scores(post, "b", b)
    assert np.all(np.abs(z) < 4.5) and np.mean(z**2) < 4.0, z
    assert np.all(post.summary("a")["rhat"].to_numpy() < 1.2)
    # the streaming accumulators come back as host arrays
    assert all(isinstance(p.mean, np.ndarray) for p in post.streaming.values())


def test_gpu_replicate_batches_data_sets_and_chains(fake_gpu_gibbs):
    """D data sets × C chains: each batch element samples from its own data set."""
    X1, _, _, b1 = privirt.simulate_2pno(800, 5, seed=7)
    X2 = 1.0 - X1  # mirror image: b flips sign
    posts = privirt.gibbs_2pno_replicate([X1, X2], n_iter=300, warmup=100, n_chains=2,
                                         seed=8, device="gpu", progress=False)
    m1 = posts[0].summary("b")["mean"].to_numpy()
    m2 = posts[1].summary("b")["mean"].to_numpy()
    np.testing.assert_allclose(m1, -m2, atol=0.25)
    assert np.corrcoef(m1, b1)[0, 1] > 0.9
    assert posts[0].n_chains == 2 and posts[1].n_chains == 2


def test_gpu_sampler_matches_the_exact_posterior_of_a_tiny_problem(fake_gpu_gibbs):
    """The device kernels (Z, θ, chunked item sums, item draw with proper priors, a missing
    cell) run as a whole chain and compared with the exact posterior moments of a 4 × 2
    problem (importance sampling), as the CPU sampler is in test_gibbs.py."""
    Y, priors, exact = tiny_2pno_problem()
    post = privirt.gibbs_2pno(Y, n_iter=3000, warmup=500, n_chains=40, seed=8,
                              progress=False, device="gpu", priors=priors)
    assert post.info["device"] == "gpu"
    assert_moments_match(post, exact)


@pytest.mark.parametrize("anchored", [True, False])
def test_gpu_free_slopes_match_the_exact_posterior_of_a_tiny_problem(fake_gpu_gibbs, anchored):
    """slopes="free" on the device kernels: the untruncated item draw, the anchored θ
    (truncated / fixed) and, without anchors, the reflection of whole chains before the first
    kept draw, against the exact moments of a 5 × 3 problem."""
    Y, kwargs, exact = tiny_free_problem(anchored)
    post = privirt.gibbs_2pno(Y, n_iter=3000, warmup=500, n_chains=40, seed=12,
                              progress=False, device="gpu", **kwargs)
    assert post.info["device"] == "gpu" and post.info["slopes"] == "free"
    assert_moments_match(post, exact)
    th = post.get_draws("theta")
    if anchored:
        assert np.all(th[:, :, 1] > 0) and np.all(th[:, :, 3] == 0.8)
    else:
        assert post.info["identification"].startswith("reflection")


def test_gpu_draws_written_by_the_kernels_equal_the_streamed_values(fake_gpu_gibbs):
    """With keep_draws the θ and item kernels write each kept draw into its slot; without,
    the same iterations feed the streaming summaries.  Same seed: the same numbers."""
    X, _, _, _ = privirt.simulate_2pno(150, 6, seed=21, p_observed=0.8)
    kw = dict(n_iter=70, warmup=31, thin=3, n_chains=2, seed=22, device="gpu", progress=False)
    kept = privirt.gibbs_2pno(X, keep_draws=True, **kw)
    streamed = privirt.gibbs_2pno(X, keep_draws=False, **kw)
    for param in ("a", "b", "theta"):
        d = kept.draws[param]
        assert d.shape[:2] == (2, 13) and np.isfinite(d).all()
        assert np.all(np.diff(d, axis=1) != 0)  # every slot written, by a later iteration
        np.testing.assert_allclose(d.mean(axis=1), streamed.streaming[param].mean, rtol=1e-12)


def test_gpu_replicate_reproduces_single_runs_exactly(fake_gpu_gibbs):
    """Replicate r is ``gibbs_2pno(datasets[r], seed=SeedSequence(s).spawn(R)[r])``; on the
    device the reductions have a fixed order, so the draws agree exactly."""
    X1, _, _, _ = privirt.simulate_2pno(120, 5, seed=23)
    X2, _, _, _ = privirt.simulate_2pno(120, 5, seed=24)
    kw = dict(n_iter=40, warmup=20, n_chains=2, device="gpu", progress=False, keep_draws=True)
    reps = privirt.gibbs_2pno_replicate([X1, X2], seed=25, **kw)
    child = np.random.SeedSequence(25).spawn(2)[1]
    single = privirt.gibbs_2pno(X2, seed=child, **kw)
    for param in ("a", "b", "theta"):
        np.testing.assert_array_equal(reps[1].draws[param], single.draws[param])
    assert not np.array_equal(reps[0].draws["b"], reps[1].draws["b"])


def test_gpu_step_has_no_host_round_trip(fake_gpu_gibbs, monkeypatch):
    """No device-to-host copy (to_numpy / .get() / float()) inside the iteration loop: the
    iteration's modules do not import to_numpy, and the driver's is not called."""
    from privirt.bayes import driver

    assert not hasattr(gibbs_mod, "to_numpy") and not hasattr(gpu_mod, "to_numpy")
    X, _, _, _ = privirt.simulate_2pno(200, 4, seed=9)
    calls = []
    real = driver.to_numpy
    monkeypatch.setattr(driver, "to_numpy", lambda x: calls.append(1) or real(x))
    resp = privirt.as_responses(X)
    codes = resp.codes[None]
    init = twopno.default_init(resp.codes, np.random.default_rng(0), False)
    batch = gibbs_mod._Batch(codes, 1, {"a": None, "b": None}, [init],
                             [np.random.SeedSequence(1)], "gpu")
    for _ in range(5):
        batch.step()
    assert calls == []
    assert batch.iteration == 5 and batch.a.shape == (1, 4) and batch.theta.shape == (1, 200)


# ---------------------------------------------------------------------------------------
# counts: the device path with numpy standing in for cupy, and the gemmEx arguments
# ---------------------------------------------------------------------------------------
class _Ptr:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class _DevArray(np.ndarray):
    """An ndarray that, like a cupy array, exposes ``.data.ptr`` and claims module cupy."""

    @property
    def data(self):  # type: ignore[override]
        return _Ptr(self.ctypes.data)

    def get(self) -> np.ndarray:
        return np.asarray(self).view(np.ndarray).copy()


_DevArray.__module__ = "cupy"

_DTYPES = {2: np.float16, 0: np.float32}


def _col_major(ptr: int, dtype, rows: int, cols: int, ld: int) -> np.ndarray:
    assert ld >= rows
    buf = np.ctypeslib.as_array(
        ctypes.cast(ptr, ctypes.POINTER(ctypes.c_uint16 if dtype == np.float16 else ctypes.c_float)),
        shape=(ld * (cols - 1) + rows,),
    ).view(dtype)
    return np.lib.stride_tricks.as_strided(
        buf, shape=(rows, cols), strides=(buf.itemsize, buf.itemsize * ld)
    )


class _FakeCublas:
    """cuBLAS ``cublasGemmEx`` semantics (column-major, host alpha/beta) in numpy."""

    CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT = 68, -1
    CUBLAS_POINTER_MODE_HOST, CUBLAS_POINTER_MODE_DEVICE = 0, 1

    def __init__(self) -> None:
        self.mode = self.CUBLAS_POINTER_MODE_DEVICE  # as another library might leave it
        self.calls = 0

    def getPointerMode(self, handle):
        return self.mode

    def setPointerMode(self, handle, mode):
        self.mode = mode

    def gemmEx(self, handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,
               beta, C, Ctype, ldc, computeType, algo):
        assert self.mode == self.CUBLAS_POINTER_MODE_HOST, "alpha/beta are host pointers"
        assert computeType == self.CUBLAS_COMPUTE_32F and Ctype == 0
        al = ctypes.c_float.from_address(alpha).value
        be = ctypes.c_float.from_address(beta).value
        opA = _col_major(A, _DTYPES[Atype], *((m, k) if transa == 0 else (k, m)), lda)
        opB = _col_major(B, _DTYPES[Btype], *((k, n) if transb == 0 else (n, k)), ldb)
        opA = opA if transa == 0 else opA.T
        opB = opB if transb == 0 else opB.T
        Cm = _col_major(C, np.float32, m, n, ldc)
        res = al * (opA.astype(np.float32) @ opB.astype(np.float32))
        if be != 0:  # cuBLAS does not read C when beta is 0 (it may be uninitialised: NaN)
            res = res + be * Cm
        Cm[...] = res
        self.calls += 1


def test_gemm_ex_arguments_give_a_transposed_product():
    """``_gemm_ex(a, b)`` is aᵀ b for row-major a (k × m), b (k × p), through cuBLAS's
    column-major contract (operand order, transposes, leading dimensions, types)."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, (3000, 7)).astype(np.float16)
    b = rng.integers(0, 2, (3000, 5)).astype(np.float16)
    cublas = _FakeCublas()
    device = types.SimpleNamespace(get_cublas_handle=lambda: 1234)

    class _XP:
        float32 = np.float32

        @staticmethod
        def ascontiguousarray(x):
            return np.ascontiguousarray(x).view(_DevArray)

        @staticmethod
        def empty(shape, dtype):
            return np.empty(shape, dtype).view(_DevArray)

    out = counts_mod._gemm_ex(_XP, cublas, device, a, b)
    assert cublas.calls == 1
    assert out.shape == (7, 5) and out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), a.astype(np.int64).T @ b.astype(np.int64))
    assert cublas.mode == cublas.CUBLAS_POINTER_MODE_DEVICE  # restored afterwards


def test_gemm_ex_constants_match_cupy():
    """The cudaDataType values hard-coded for gemmEx are cupy's (when cupy is importable)."""
    try:
        from cupy_backends.cuda.api import runtime  # type: ignore[import-not-found]
    except Exception:
        pytest.skip("needs cupy")
    assert counts_mod._CUDA_R_16F == runtime.CUDA_R_16F
    assert counts_mod._CUDA_R_32F == runtime.CUDA_R_32F


def test_gemm_ex_signature_matches_cupy():
    try:
        from cupy.cuda import cublas  # type: ignore[import-not-found]
    except Exception:
        pytest.skip("needs cupy with cuBLAS")
    doc = cublas.gemmEx.__doc__ or ""
    assert doc.startswith(
        "gemmEx(intptr_t handle, int transa, int transb, int m, int n, int k, size_t alpha, "
        "size_t A, int Atype, int lda, size_t B, int Btype, int ldb, size_t beta, size_t C, "
        "int Ctype, int ldc, int computeType, int algo)"
    )
    assert cublas.CUBLAS_COMPUTE_32F == _FakeCublas.CUBLAS_COMPUTE_32F
    assert cublas.CUBLAS_GEMM_DEFAULT == _FakeCublas.CUBLAS_GEMM_DEFAULT
    assert cublas.CUBLAS_POINTER_MODE_HOST == _FakeCublas.CUBLAS_POINTER_MODE_HOST
    assert (cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_T) == (0, 1)


@pytest.fixture
def fake_gpu_counts(fake_gpu, monkeypatch):
    # without cuBLAS the products take the float32 fallback, still through float16 chunks
    monkeypatch.setattr(counts_mod, "_GEMM_EX_OK", False)
    return fake_gpu


@pytest.mark.parametrize("p_observed", [1.0, 0.6])
def test_gpu_counts_equal_cpu_counts(fake_gpu_counts, p_observed):
    X, _, _ = privirt.simulate_rasch(700, 9, p_observed=p_observed, seed=11)
    Yc, Bc = privirt.pairwise_counts(X, device="cpu")
    Yg, Bg = privirt.pairwise_counts(X, device="gpu", chunk_size=128)
    np.testing.assert_array_equal(Yg, Yc)
    np.testing.assert_array_equal(Bg, Bc)
    assert isinstance(Yg, np.ndarray) and Yg.dtype == np.int64


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_device_resident_counts_equal_cpu_counts(fake_gpu_counts, dtype):
    X, _, _ = privirt.simulate_rasch(500, 7, p_observed=0.7, seed=12)
    Yc, Bc = privirt.pairwise_counts(X, device="cpu")
    Xd = X.astype(dtype).view(_DevArray)
    Yg, Bg = privirt.pairwise_counts(Xd, chunk_size=64)
    np.testing.assert_array_equal(Yg, Yc)
    np.testing.assert_array_equal(Bg, Bc)
    Y_only = counts_mod.differential_counts(Xd, chunk_size=100)
    np.testing.assert_array_equal(Y_only, Yc)


def test_device_resident_counts_complete_and_integer(fake_gpu_counts):
    rng = np.random.default_rng(13)
    X = rng.integers(0, 2, (300, 6)).astype(np.int8)
    Yc, Bc = privirt.pairwise_counts(X.astype(float), device="cpu")
    Yg, Bg = privirt.pairwise_counts(X.view(_DevArray), chunk_size=50)
    np.testing.assert_array_equal(Yg, Yc)
    np.testing.assert_array_equal(Bg, Bc)
    Yb, _ = privirt.pairwise_counts(X.astype(bool).view(_DevArray), chunk_size=50)
    np.testing.assert_array_equal(Yb, Yc)


def test_device_resident_invalid_values_fall_back_to_the_host_error(fake_gpu_counts):
    X = np.array([[1.0, 0.0], [2.0, np.nan], [0.0, 1.0]]).view(_DevArray)
    with pytest.raises(ValueError, match="2"):
        privirt.pairwise_counts(X, chunk_size=1)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint16, np.int64])
@pytest.mark.parametrize("bad", [2, -1, 255, -128])
def test_device_resident_integer_input_is_validated(fake_gpu_counts, dtype, bad):
    """An integer value other than 0 or 1 (−1 included, 255 as uint8) takes the host path,
    whose error names it; valid integer input of every width gives the exact counts."""
    rng = np.random.default_rng(16)
    X = rng.integers(0, 2, (40, 4))
    Yc, Bc = privirt.pairwise_counts(X.astype(float), device="cpu")
    Yg, Bg = privirt.pairwise_counts(X.astype(dtype).view(_DevArray), chunk_size=16)
    np.testing.assert_array_equal(Yg, Yc)
    np.testing.assert_array_equal(Bg, Bc)
    if not np.can_cast(np.min_scalar_type(bad), dtype) and not (
        np.iinfo(dtype).min <= bad <= np.iinfo(dtype).max
    ):
        return  # not representable in this dtype
    X = X.astype(dtype)
    X[23, 2] = bad
    with pytest.raises(ValueError, match=str(bad)):
        privirt.pairwise_counts(X.view(_DevArray), chunk_size=16)


def test_default_gpu_chunk_respects_the_exactness_bound():
    for m in (1, 2, 3, 10, 1000, 20000):
        c = counts_mod._check_chunk(None, m, "gpu")
        assert 1 <= c <= counts_mod.MAX_CHUNK
    assert counts_mod._check_chunk(None, 1000, "gpu") >= counts_mod._check_chunk(None, 1000, "cpu")


# ---------------------------------------------------------------------------------------
# spectral and abilities: the device code with numpy standing in for cupy
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("solver", ["power", "direct"])
def test_gpu_spectral_equals_cpu(fake_gpu_counts, solver):
    X, _, beta = privirt.simulate_rasch(3000, 12, p_observed=0.8, seed=14)
    cpu = privirt.spectral_estimate(X, device="cpu", solver=solver, tol=1e-13)
    gpu = privirt.spectral_estimate(X, device="gpu", solver=solver, tol=1e-13)
    assert gpu.solver == cpu.solver
    np.testing.assert_allclose(np.asarray(gpu.beta), np.asarray(cpu.beta), atol=1e-8)


@pytest.mark.parametrize("method", ["wle", "mle", "eap"])
def test_gpu_abilities_equal_cpu(fake_gpu, method):
    X, _, beta = privirt.simulate_rasch(400, 10, p_observed=0.8, seed=15)
    cpu = privirt.estimate_abilities(X, beta, method=method, device="cpu")
    gpu = privirt.estimate_abilities(X, beta, method=method, device="gpu")
    np.testing.assert_allclose(gpu["theta"].to_numpy(), cpu["theta"].to_numpy(), atol=1e-10)
    assert gpu.index.equals(cpu.index)


def test_fake_cupy_is_used(fake_gpu):
    """Guard for the tests above: device="gpu" really takes the device branch."""
    assert backend.resolve_device("gpu") == "gpu"
    assert backend.get_xp("gpu") is fake_gpu
    assert sys.modules.get("fake_cupy") is None

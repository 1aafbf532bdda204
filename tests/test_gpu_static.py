"""Checks of the GPU code paths that need no GPU.

* The fused Gibbs kernels are emitted as the CUDA source cupy's ``ElementwiseKernel``
  generates (parameter declarations as cupy types, the ``CUPY_FOR`` loop, references for
  non-raw outputs) and compiled for sm_90 with ``nvcc`` and with NVRTC, when available.
* The same kernel bodies are compiled for the *host* with a C++ compiler (with host
  versions of ``__umulhi``, ``normcdf`` and ``normcdfinv``) and called through ctypes in
  place of the cupy kernels, while the GPU driver code runs with numpy standing in for
  cupy.  This runs the real kernel text and the real Python-level GPU logic (shapes,
  dtypes, batch indexing, streaming summaries) on the CPU.
* The cuBLAS ``gemmEx`` call of the counts is checked against an independent
  column-major GEMM that reads the operands through the pointers, leading dimensions and
  transpose flags it is given.

Everything skips cleanly where a tool (nvcc, NVRTC, a C++ compiler) is missing.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

import privirt
import privirt._backend as backend
from privirt import counts as counts_mod
from privirt import gibbs as gibbs_mod
from tests._philox import uniform2 as _uniform2

# ---------------------------------------------------------------------------------------
# emitting the source cupy compiles for an ElementwiseKernel
# ---------------------------------------------------------------------------------------
_CTYPES = {
    "float64": "double", "float32": "float", "int8": "signed char", "uint8": "unsigned char",
    "int32": "int", "uint32": "unsigned int", "int64": "long long", "uint64": "unsigned long long",
    "bool": "bool",
}
_NPTYPES = {
    "float64": np.float64, "float32": np.float32, "int8": np.int8, "uint8": np.uint8,
    "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
    "bool": np.bool_,
}


def _parse(params: str) -> list[tuple[bool, str, str]]:
    out = []
    for p in params.split(","):
        words = p.split()
        raw = words[0] == "raw"
        if raw:
            words = words[1:]
        assert len(words) == 2, f"cannot parse parameter {p!r}"
        out.append((raw, words[0], words[1]))
    return out


def _emit_cupy_source(name: str, spec: tuple[str, str, str], preamble: str) -> str:
    """The kernel as cupy's ElementwiseKernel emits it for contiguous 1-D operands.

    Mirrors ``_get_elementwise_kernel_code`` in cupy/_core/_kernel.pyx: inputs are
    ``const``, array parameters are ``CArray<T, ndim, c_contiguous, 32-bit indexing>``,
    a non-raw output ``x`` is the reference ``T &x = _raw_x[_ind.get()]`` and the body runs
    inside ``CUPY_FOR(i, _ind.size())`` (``i`` is a ``ptrdiff_t``).  Raw operands are
    flattened by the caller (``_Batch._step_gpu``) and the outputs are C-contiguous, so
    cupy's dimension reduction makes every operand 1-D.
    """
    in_params, out_params, operation = spec
    decls, refs = [], []
    for (raw, t, n), is_out in [(p, False) for p in _parse(in_params)] + [
        (p, True) for p in _parse(out_params)
    ]:
        ct = _CTYPES[t]
        const = "" if is_out else "const "  # cupy declares every input parameter const
        if raw:
            decls.append(f"{const}CArray<{ct}, 1, true, true> {n}")
        elif is_out:
            decls.append(f"CArray<{ct}, 1, true, true> _raw_{n}")
            refs.append(f"{ct} &{n} = _raw_{n}[_ind.get()];")
        else:
            decls.append(f"{const}{ct} {n}")
    decls.append("CIndexer<1, true> _ind")
    return (
        "#include <cupy/carray.cuh>\n"
        f"{preamble}\n"
        f'extern "C" __global__ void {name}({", ".join(decls)}) {{\n'
        "  #pragma unroll 1\n"
        "  CUPY_FOR(i, _ind.size()) {\n"
        "    _ind.set(i);\n"
        f"    {' '.join(refs)}\n"
        f"{operation};\n"
        "  }\n"
        "}\n"
    )


def _cupy_include() -> Path | None:
    """cupy's kernel headers, located without importing cupy (no GPU needed)."""
    try:
        spec = importlib.util.find_spec("cupy")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    inc = Path(spec.origin).parent / "_core" / "include"
    return inc if (inc / "cupy" / "carray.cuh").exists() else None


# a minimal stand-in for cupy/carray.cuh where cupy is not installed: just what the
# emitted kernels use (1-D contiguous CArray, CIndexer, CUPY_FOR)
_MINI_CARRAY = r"""
#pragma once
#include <cstddef>
template <typename T, int ndim, bool c_contiguous = false, bool use_32bit = false>
struct CArray {
  T* data_; ptrdiff_t size_; ptrdiff_t shape_[1]; ptrdiff_t strides_[1];
  __device__ T& operator[](ptrdiff_t i) { return data_[i]; }
  __device__ const T& operator[](ptrdiff_t i) const { return data_[i]; }
  __device__ T& operator[](const ptrdiff_t* idx) { return data_[idx[0]]; }
  __device__ ptrdiff_t size() const { return size_; }
};
template <int ndim, bool use_32bit = false>
struct CIndexer {
  ptrdiff_t size_; ptrdiff_t shape_[1]; ptrdiff_t index_[1];
  __device__ ptrdiff_t size() const { return size_; }
  __device__ void set(ptrdiff_t i) { index_[0] = i; }
  __device__ const ptrdiff_t* get() const { return index_; }
};
#define CUPY_FOR(i, n) \
  for (ptrdiff_t i = static_cast<ptrdiff_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<ptrdiff_t>(blockDim.x) * gridDim.x)
"""


@pytest.fixture(scope="module")
def kernel_sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("kernels")
    inc = _cupy_include()
    if inc is None:
        (d / "cupy").mkdir()
        (d / "cupy" / "carray.cuh").write_text(_MINI_CARRAY)
        inc = d
    files = {}
    for name, spec in gibbs_mod._KERNEL_SPECS.items():
        f = d / f"{name}.cu"
        f.write_text(_emit_cupy_source(name, spec, gibbs_mod._CUDA_PREAMBLE))
        files[name] = f
    return files, inc


def test_kernel_specs_are_well_formed():
    """Parameters parse, types are cupy types, and every parameter is used by its body."""
    assert set(gibbs_mod._KERNEL_SPECS) == {
        "privirt_gibbs_z", "privirt_gibbs_theta", "privirt_gibbs_item"
    }
    for name, (inp, outp, op) in gibbs_mod._KERNEL_SPECS.items():
        params = _parse(inp) + _parse(outp)
        names = [n for _, _, n in params]
        assert len(set(names)) == len(names), name
        for raw, t, n in params:
            assert t in _CTYPES, (name, t)
            assert re.search(rf"\b{n}\b", op), f"{name}: parameter {n} unused"
        for raw, _, n in _parse(outp):
            assert not raw and re.search(rf"\b{n}\s*=", op), f"{name}: output {n} never set"
        # cupy reserves names starting with an underscore for its own variables
        assert not any(n.startswith("_") for n in names)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_kernels_compile_with_nvcc_for_sm90(kernel_sources):
    files, inc = kernel_sources
    for name, f in files.items():
        proc = subprocess.run(
            ["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-include", "cassert", f"-I{inc}",
             "-Xptxas", "-warn-spills", str(f), "-o", str(f.with_suffix(".o"))],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 0, f"{name}:\n{proc.stderr}"
        assert "warning" not in proc.stderr.lower(), f"{name}:\n{proc.stderr}"


def _nvrtc():
    if _cupy_include() is None:
        return None
    try:
        from cupy_backends.cuda.libs import nvrtc  # type: ignore[import-not-found]

        nvrtc.getVersion()
    except Exception:
        return None
    return nvrtc


def test_kernels_compile_with_nvrtc_for_sm90(kernel_sources):
    """NVRTC is what cupy itself compiles ElementwiseKernels with."""
    nvrtc = _nvrtc()
    if nvrtc is None:
        pytest.skip("needs cupy with a loadable NVRTC")
    files, inc = kernel_sources
    for name, f in files.items():
        prog = nvrtc.createProgram(f.read_text(), f.name, [], [])
        try:
            nvrtc.compileProgram(prog, [f"-I{inc}", "--std=c++17", "-arch=compute_90"])
        except Exception:
            pytest.fail(f"{name}:\n{nvrtc.getProgramLog(prog)}")
        ptx = nvrtc.getPTX(prog)
        ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
        assert f".entry {name}(" in ptx


# ---------------------------------------------------------------------------------------
# the kernel bodies compiled for the host
# ---------------------------------------------------------------------------------------
_HOST_SHIM = r"""
#include <cmath>
#include <cstddef>
#define __device__
#define __forceinline__ inline
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
using std::sqrt; using std::log; using std::fmax;
"""


def _emit_host_source() -> str:
    parts = [_HOST_SHIM, gibbs_mod._CUDA_PREAMBLE]
    for name, (inp, outp, op) in gibbs_mod._KERNEL_SPECS.items():
        decls, refs = ["ptrdiff_t _size"], []
        for raw, t, n in _parse(inp):
            ct = _CTYPES[t]
            decls.append(f"const {ct}* {n}" if raw else f"{ct} {n}")
        for raw, t, n in _parse(outp):
            ct = _CTYPES[t]
            decls.append(f"{ct}* _raw_{n}")
            refs.append(f"{ct} &{n} = _raw_{n}[i];")
        parts.append(
            f'extern "C" void host_{name}({", ".join(decls)}) {{\n'
            f"  for (ptrdiff_t i = 0; i < _size; ++i) {{\n    {' '.join(refs)}\n{op};\n  }}\n}}\n"
        )
    parts.append(
        'extern "C" void host_philox(unsigned int* c, unsigned int* k, unsigned int* o) {\n'
        "  philox4x32_10(c[0], c[1], c[2], c[3], k[0], k[1], o);\n}\n"
    )
    return "\n".join(parts)


class _HostKernel:
    """Calls a host-compiled kernel body like a cupy ElementwiseKernel (size from outputs)."""

    def __init__(self, lib, name, spec):
        self.fn = getattr(lib, f"host_{name}")
        self.ins = _parse(spec[0])
        self.outs = _parse(spec[1])
        self.fn.restype = None

    def __call__(self, *args):
        assert len(args) == len(self.ins) + len(self.outs), "wrong number of arguments"
        c_args, outs = [], []
        size = None
        for (raw, t, n), v in zip(self.ins + self.outs, args):
            if raw or isinstance(v, np.ndarray):
                # cupy passes raw operands as they are: the kernel reads them with the
                # declared element type, so the dtype must match exactly
                assert isinstance(v, np.ndarray), f"{n}: expected an array"
                assert v.dtype == _NPTYPES[t], f"{n}: dtype {v.dtype}, kernel expects {t}"
                assert v.flags.c_contiguous, f"{n}: not contiguous"
                c_args.append(v.ctypes.data_as(ctypes.c_void_p))
                if not raw:
                    outs.append(v)
                    size = v.size if size is None else size
                    assert v.size == size
            else:
                assert np.ndim(v) == 0, f"{n}: expected a scalar"
                c_type = {"uint32": ctypes.c_uint32, "int32": ctypes.c_int32,
                          "float64": ctypes.c_double, "int64": ctypes.c_int64}[t]
                assert np.can_cast(np.asarray(v).dtype, _NPTYPES[t], casting="same_kind")
                c_args.append(c_type(int(v) if "int" in t else float(v)))
        self.fn(ctypes.c_ssize_t(size), *c_args)
        return outs[0] if len(outs) == 1 else tuple(outs)


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
    return ctypes.CDLL(str(lib))


@pytest.fixture
def host_kernels(host_lib):
    return tuple(
        _HostKernel(host_lib, name, spec) for name, spec in gibbs_mod._KERNEL_SPECS.items()
    )


def test_host_normcdfinv_shim_is_accurate(host_lib):
    """The host stand-in for CUDA's normcdfinv must be accurate for the checks below.

    The θ kernel with lin = 0, prec = 1 returns normcdfinv(u) for its Philox uniforms u.
    """
    kern = _HostKernel(host_lib, "privirt_gibbs_theta", gibbs_mod._KERNEL_SPECS["privirt_gibbs_theta"])
    n = 4000
    out = kern(np.zeros(n), np.ones(n), np.array([7, 9], dtype=np.uint32), np.uint32(3),
               np.int32(n), np.empty(n))
    # the uniforms are those of the numpy Philox port; the normal is their inverse CDF
    u0, _ = _uniform2(3, 1, np.arange(n), 0, 7, 9)
    np.testing.assert_allclose(out, special.ndtri(u0), rtol=1e-12, atol=1e-12)


# numpy port of the Philox4x32-10 block (independent of the CUDA text)


def test_compiled_philox_matches_random123_known_answers(host_lib):
    """The CUDA Philox text, compiled, reproduces Random123's known-answer vectors."""
    kat = [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
         (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
    ]
    for ctr, key, expected in kat:
        c = (ctypes.c_uint32 * 4)(*ctr)
        k = (ctypes.c_uint32 * 2)(*key)
        o = (ctypes.c_uint32 * 4)()
        host_lib.host_philox(c, k, o)
        assert tuple(o) == expected


def test_z_kernel_indexing_and_truncation(host_kernels):
    """Each cell reads its own data set, person, item and chain key; Z has the right sign."""
    z_kernel = host_kernels[0]
    rng = np.random.default_rng(0)
    D, C, n, k = 3, 2, 7, 5
    B = D * C
    codes = rng.integers(-1, 2, (D, n, k)).astype(np.int8)
    theta, a, b = rng.normal(size=(B, n)), rng.uniform(0.5, 2, (B, k)), rng.normal(size=(B, k))
    keys = rng.integers(0, 2**32, 2 * B, dtype=np.uint64).astype(np.uint32)
    Z = np.full((B, n, k), np.nan)
    z_kernel(theta.ravel(), a.ravel(), b.ravel(), codes.ravel(), keys, np.uint32(11),
             np.int32(n), np.int32(k), np.int32(C), np.int32(D), Z)
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
    z_kernel(np.full(n, 8.0), np.array([-1.0]), np.array([0.0]), codes,
             np.array([5, 6], dtype=np.uint32), np.uint32(0), np.int32(n), np.int32(1),
             np.int32(1), np.int32(1), Z)
    x = Z + 8.0  # X = Z − μ ~ N(0, 1) | X > 8
    assert np.all(x > 8.0)
    assert stats.kstest(x, stats.truncnorm(8.0, np.inf).cdf).pvalue > 1e-3


def test_item_kernel_matches_the_cpu_item_step(host_kernels):
    """Same uniforms in, same (a, b) out as the CPU's exact restricted-normal draw."""
    item_kernel = host_kernels[2]
    rng = np.random.default_rng(1)
    B, k = 3, 40
    th = rng.normal(size=(B, 60))
    p_aa = (th * th).sum(axis=1)[:, None] + np.zeros((B, k))
    p_ab = -th.sum(axis=1)[:, None] + np.zeros((B, k))
    p_bb = np.full((B, k), 60.0)
    r_a, r_b = rng.normal(0, 5, (B, k)), rng.normal(0, 5, (B, k))
    keys = np.array([1, 2, 3, 4, 5, 6], dtype=np.uint32)
    a_out, b_out = np.empty((B, k)), np.empty((B, k))
    item_kernel(p_aa.ravel(), p_ab.ravel(), p_bb.ravel(), r_a.ravel(), r_b.ravel(), keys,
                np.uint32(4), np.int32(k), a_out, b_out)
    kk = keys.reshape(B, 2).astype(np.uint64)
    item = np.broadcast_to(np.arange(k), (B, k))
    v, _ = _uniform2(4, 2, item, 0, kk[:, :1], kk[:, 1:])
    e, _ = _uniform2(4, 3, item, 0, kk[:, :1], kk[:, 1:])
    # both draw a from the inverse CDF of the upper tail when L = −m_a / sd_a ≤ 5
    det = p_aa * p_bb - p_ab**2
    m_a = (p_bb * r_a - p_ab * r_b) / det
    sd_a = np.sqrt(p_bb / det)
    assert np.all(-m_a / sd_a <= 5)
    a_cpu, b_cpu = gibbs_mod._draw_items(p_aa, p_ab, p_bb, r_a, r_b, v, special.ndtri(e))
    assert np.all(a_out > 0)
    np.testing.assert_allclose(a_out, a_cpu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(b_out, b_cpu, rtol=1e-8, atol=1e-10)


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
    monkeypatch.setattr(gibbs_mod, "_gpu_kernels", lambda: host_kernels)
    return fake_gpu


def _z_scores(post, param, truth):
    s = post.summary(param)
    return (s["mean"].to_numpy() - truth) / s["sd"].to_numpy()


def test_gpu_sampler_recovers_parameters(fake_gpu_gibbs):
    """The device sampler (kernels compiled for the host) recovers simulated parameters:
    the truth lies within a few posterior standard deviations of the posterior mean."""
    X, theta, a, b = privirt.simulate_2pno(3000, 8, seed=3)
    post = privirt.gibbs_2pno(X, n_iter=500, burn_in=200, seed=4, device="gpu", progress=False)
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
    post = privirt.gibbs_2pno(X, n_iter=1000, burn_in=400, n_chains=2, seed=6, device="gpu",
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
    posts = privirt.gibbs_2pno_replicate([X1, X2], n_iter=300, burn_in=100, n_chains=2,
                                         seed=8, device="gpu", progress=False)
    m1 = posts[0].summary("b")["mean"].to_numpy()
    m2 = posts[1].summary("b")["mean"].to_numpy()
    np.testing.assert_allclose(m1, -m2, atol=0.25)
    assert np.corrcoef(m1, b1)[0, 1] > 0.9
    assert posts[0].n_chains == 2 and posts[1].n_chains == 2


def test_gpu_step_has_no_host_round_trip(fake_gpu_gibbs, monkeypatch):
    """No device-to-host copy (to_numpy / .get() / float()) inside the iteration loop."""
    X, _, _, _ = privirt.simulate_2pno(200, 4, seed=9)
    calls = []
    real = gibbs_mod.to_numpy
    monkeypatch.setattr(gibbs_mod, "to_numpy", lambda x: calls.append(1) or real(x))
    resp = privirt.as_responses(X)
    codes = resp.codes[None]
    init = gibbs_mod._default_init(resp.codes, np.random.default_rng(0), False)
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
        res = al * (opA.astype(np.float32) @ opB.astype(np.float32)) + be * Cm
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

"""One pass from 0/1 bytes (or 0/1/NaN floats) to float16 on the GPU, validation folded in.

The counts of complete data need each chunk as float16 0/1 (the operand of the tensor-core
GEMM).  Read one byte at a time, cupy's ``astype`` and a separate ``any(x > 1)`` check with
a device-to-host read per chunk took 117 ms of the 154 ms of 10^7 × 1000 int8 counts on an
H200 (the GEMM itself: 30 ms; BENCHMARKS.md, GPU checklist).  The kernel here reads four
bytes as one 32-bit word, writes their four float16 values as two 32-bit words, and records
in one device flag whether any byte was neither 0 nor 1 (int8 −1 is the byte 0xFF); the
flag is read once, after the last chunk.

A byte ``x`` ∈ {0, 1} becomes the float16 bit pattern ``x · 0x3C00`` (0x3C00 is 1.0); bytes
``w₀ w₁`` of a little-endian word go to the low and high halves of one output word as
``(w₀ | w₁ << 16) · 0x3C00``, which cannot carry between the halves.

Floats (0/1, NaN for missing, of any width) are read as their bit patterns: one kernel scans
the whole array once for values other than ±0, 1 and NaN and for NaNs (two flags, read
once); per chunk another writes the correct, wrong and observed indicators as float16 in
one pass, where cupy's array code made about twelve passes and two reads per chunk.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["BYTES_TO_HALF_SOURCE", "FLOAT_SOURCE", "bytes_to_half", "float_kernels_apply",
           "scan_floats", "split_floats"]

#: Threads per block of the conversion kernel.
BLOCK = 256

BYTES_TO_HALF_SOURCE = r"""
extern "C" __global__ void privirt_bytes_to_half(
        const unsigned int* __restrict__ x,
        unsigned int* __restrict__ out,
        int* __restrict__ bad,
        long long size) {
    int local = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < size; i += (long long)blockDim.x * gridDim.x) {
        const unsigned int w = x[i];
        local |= (w & 0xFEFEFEFEu) != 0u;
        out[2 * i] = ((w & 1u) | ((w & 0x100u) << 8)) * 0x3C00u;
        out[2 * i + 1] = (((w >> 16) & 1u) | ((w >> 8) & 0x10000u)) * 0x3C00u;
    }
    if (local) atomicOr(bad, 1);
}
"""


_FLOAT_MACRO = r"""
#define PRIVIRT_FLOAT_KERNELS(NAME, U, ABS, ONE, EXP, MANT)                            \
extern "C" __global__ void privirt_scan_##NAME(                                         \
        const U* __restrict__ x, int* __restrict__ flags, long long size) {             \
    int local = 0;                                                                      \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;                \
         i < size; i += (long long)blockDim.x * gridDim.x) {                            \
        const U v = x[i], m = v & ABS;                                                  \
        if ((m & EXP) == EXP && (m & MANT) != 0) local |= 2;                            \
        else if (m != 0 && v != ONE) local |= 1;                                        \
    }                                                                                   \
    if (local) atomicOr(flags, local);                                                  \
}                                                                                       \
extern "C" __global__ void privirt_split_##NAME(                                        \
        const U* __restrict__ x, unsigned short* __restrict__ c,                        \
        unsigned short* __restrict__ w, unsigned short* __restrict__ a, int want_a,     \
        long long size) {                                                               \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;                \
         i < size; i += (long long)blockDim.x * gridDim.x) {                            \
        const U v = x[i];                                                               \
        const bool one = v == ONE, zero = (v & ABS) == 0;                               \
        c[i] = one ? 0x3C00 : 0;                                                        \
        w[i] = zero ? 0x3C00 : 0;                                                       \
        if (want_a) a[i] = (one || zero) ? 0x3C00 : 0;                                  \
    }                                                                                   \
}
"""
#: Per float width: flags |= 1 for a value other than ±0, 1 and NaN (±inf included), |= 2
#: for a NaN; the split of validated values into correct (1), wrong (±0) and observed
#: indicators as float16 bit patterns (0x3C00 is 1.0).
FLOAT_SOURCE = _FLOAT_MACRO + r"""
PRIVIRT_FLOAT_KERNELS(f16, unsigned short, (unsigned short)0x7FFF, (unsigned short)0x3C00,
                      (unsigned short)0x7C00, (unsigned short)0x03FF)
PRIVIRT_FLOAT_KERNELS(f32, unsigned int, 0x7FFFFFFFu, 0x3F800000u, 0x7F800000u, 0x007FFFFFu)
PRIVIRT_FLOAT_KERNELS(f64, unsigned long long, 0x7FFFFFFFFFFFFFFFull, 0x3FF0000000000000ull,
                      0x7FF0000000000000ull, 0x000FFFFFFFFFFFFFull)
"""
_FLOAT_NAMES = {2: "f16", 4: "f32", 8: "f64"}


def _is_cupy(xp: Any) -> bool:
    return getattr(xp, "__name__", "") == "cupy"


@lru_cache(maxsize=1)
def _kernel() -> Any:  # pragma: no cover - needs a CUDA GPU
    import cupy as cp

    return cp.RawKernel(BYTES_TO_HALF_SOURCE, "privirt_bytes_to_half")


def bytes_to_half(xp: Any, block: Any, bad: Any) -> Any:
    """float16 copy of a 2-D block of 0/1 bytes (int8, uint8 or bool); sets ``bad`` (a
    one-element int32 device array) to 1, without a host round trip, when a byte is
    neither 0 nor 1, in which case the returned values are meaningless.

    The kernel runs for a C-contiguous cupy block whose size is a multiple of 4 and whose
    address is 4-byte aligned; otherwise (a last ragged chunk, a strided view, numpy
    standing in for cupy in the tests) the same result comes from array operations.
    """
    if block.dtype.itemsize != 1 or block.dtype.kind not in "biu":
        raise TypeError(f"bytes_to_half takes 1-byte 0/1 values, got {block.dtype}")
    u8 = block.view(xp.uint8)
    if (_is_cupy(xp) and block.flags.c_contiguous and block.size % 4 == 0
            and block.data.ptr % 4 == 0 and block.size > 0):  # pragma: no cover - needs a GPU
        out = xp.empty(block.shape, dtype=xp.float16)
        words = block.size // 4
        _kernel()((_grid(words),), (BLOCK,), (u8, out, bad, np.int64(words)))
        return out
    bad |= xp.any(u8 > 1).astype(xp.int32)
    return u8.astype(xp.float16)


@lru_cache(maxsize=1)
def _float_module() -> Any:  # pragma: no cover - needs a CUDA GPU
    import cupy as cp

    return cp.RawModule(code=FLOAT_SOURCE)


def _grid(size: int) -> int:
    return max(1, min(-(-size // BLOCK), 1 << 16))


def float_kernels_apply(xp: Any, X: Any) -> bool:
    """Whether the float kernels take ``X``: a C-contiguous, non-empty cupy float array."""
    return (_is_cupy(xp) and X.dtype.kind == "f" and X.dtype.itemsize in _FLOAT_NAMES
            and X.flags.c_contiguous and X.size > 0)


def scan_floats(xp: Any, X: Any) -> int:  # pragma: no cover - needs a CUDA GPU
    """Flags of a float array (:func:`float_kernels_apply`): bit 0, a value other than ±0, 1
    and NaN; bit 1, a NaN.  One pass, one read back."""
    flags = xp.zeros(1, dtype=xp.int32)
    fn = _float_module().get_function(f"privirt_scan_{_FLOAT_NAMES[X.dtype.itemsize]}")
    fn((_grid(X.size),), (BLOCK,), (X, flags, np.int64(X.size)))
    return int(flags[0])


def split_floats(xp: Any, block: Any, want_a: bool) -> tuple[Any, Any, Any]:  # pragma: no cover
    """Correct, wrong and (with ``want_a``, else ``None``) observed float16 indicators of a
    validated 0/1/NaN block (:func:`float_kernels_apply`), in one pass."""
    C = xp.empty(block.shape, dtype=xp.float16)
    W = xp.empty(block.shape, dtype=xp.float16)
    A = xp.empty(block.shape, dtype=xp.float16) if want_a else W  # W: a valid, unused pointer
    fn = _float_module().get_function(f"privirt_split_{_FLOAT_NAMES[block.dtype.itemsize]}")
    fn((_grid(block.size),), (BLOCK,), (block, C, W, A, np.int32(want_a), np.int64(block.size)))
    return C, W, (A if want_a else None)

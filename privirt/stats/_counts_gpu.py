"""One pass from 0/1 bytes to float16 on the GPU, with the validation folded in.

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
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["BYTES_TO_HALF_SOURCE", "bytes_to_half"]

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
        grid = max(1, min(-(-words // BLOCK), 1 << 16))
        _kernel()((grid,), (BLOCK,), (u8, out, bad, np.int64(words)))
        return out
    bad |= xp.any(u8 > 1).astype(xp.int32)
    return u8.astype(xp.float16)

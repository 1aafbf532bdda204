"""Pairwise differential counts of a persons × items 0/1 matrix, as chunked matrix products.

For items ``i ≠ j``::

    Y[i, j] = #{persons who answered both i and j, got i right and j wrong}
    B[i, j] = #{persons who answered both i and j}

With ``C`` the "correct" indicator (observed and 1), ``W`` the "wrong" indicator (observed
and 0) and ``A = C + W`` the "observed" indicator (all n × m, 0/1)::

    Y = Cᵀ W          B = Aᵀ A

and, without missing data (``A = 1``), ``B = n`` off the diagonal and
``Y = s 1ᵀ − Cᵀ C`` with ``s`` the item totals, so a single symmetric rank-k update
(SYRK) suffices.

Exactness
---------
Each product is computed chunk by chunk over persons in floating point and accumulated into
``int64``.  Every entry of a chunk's product is a sum of at most ``chunk_size`` terms, each
``0`` or ``1``; every partial sum is therefore an integer in ``[0, chunk_size]``.  IEEE
binary32 represents every integer up to ``2**24`` exactly, and the sum of two exactly
represented integers whose result is ≤ ``2**24`` is computed exactly (no rounding occurs
when the exact result is representable).  Hence, whatever the summation order the BLAS
uses, a chunk's float32 result is the exact integer as long as ``chunk_size ≤ 2**24``; the
chunk results are rounded (a no-op) and added in ``int64``, which is exact up to ``2**63``.
The same argument holds on the GPU with float16 or bfloat16 *inputs* (0 and 1 are exact in
both) and float32 accumulation, and with TF32 tensor cores (inputs rounded to 10 mantissa
bits, 0/1 unchanged).  ``chunk_size`` is capped at ``2**24`` accordingly.

Memory
------
The input is held once as ``int8`` codes (``n × m`` bytes).  The CPU path holds two float32
indicator buffers of ``c`` persons (one without missing cells), ``8 c m`` bytes, reused for
every chunk and each filled by a single pass over the codes; the default chunk keeps that
near 64 MiB, so peak memory is ``n m + O(64 MiB + m²)`` bytes — about the size of the input.
Without missing cells the item totals are read off the diagonal of ``CᵀC``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from .._checks import check_choice
from .._backend import get_xp, resolve_device, to_numpy
from ..data.responses import ResponsesLike, as_responses
from ._counts_gpu import bytes_to_half, float_kernels_apply, scan_floats, split_floats

__all__ = [
    "local_pairwise_counts",
    "pairwise_counts_frame",
    "differential_counts",
    "default_chunk_size",
    "MAX_CHUNK",
]

#: Largest chunk for which float32 partial sums of 0/1 products are exact integers.
MAX_CHUNK: int = 2**24
#: Target size in bytes of the per-chunk float indicator buffers.
_CHUNK_BYTES: int = 64 * 2**20
#: Below this observed fraction, ``method="auto"`` uses the scipy.sparse path on the CPU.
SPARSE_THRESHOLD: float = 0.05

Method = Literal["auto", "dense", "sparse"]


def default_chunk_size(n_items: int, bytes_per_cell: int = 8) -> int:
    """Persons per chunk so that the chunk's indicator buffers take about 64 MiB."""
    rows = _CHUNK_BYTES // max(1, bytes_per_cell * n_items)
    return int(min(MAX_CHUNK, max(1024, rows)))


def local_pairwise_counts(X: ResponsesLike, *, device: str = "auto", method: Method = "auto",
                          chunk_size: int | None = None, private: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(Y, B)`` of in-memory data: :func:`privirt.pairwise_counts` with ``engine="local"``.

    ``private=True`` (the private releases): the kernel is chosen from public values only — the
    dense kernel for data with missing cells, whatever the data hold — so that the running time
    does not tell how many cells are missing (``method="auto"`` picks the complete-data,
    missing-data or sparse kernel from the data)."""
    if not private:
        on_device = _device_pairwise(X, device, method, chunk_size, want_b=True)
        if on_device is not None:
            return on_device
    resp = as_responses(X, empty="keep")
    return _pairwise(resp, device, method, chunk_size, want_b=True, private=private)


def differential_counts(
    X: ResponsesLike,
    *,
    device: str = "auto",
    method: Method = "auto",
    chunk_size: int | None = None,
    private: bool = False,
) -> np.ndarray:
    """Only ``Y`` of :func:`pairwise_counts` (skips the ``B = AᵀA`` product).

    What the spectral estimator needs; with missing data this saves one of the two
    matrix products.  ``private``: as :func:`local_pairwise_counts`.
    """
    if not private:
        on_device = _device_pairwise(X, device, method, chunk_size, want_b=False)
        if on_device is not None:
            return on_device[0]
    resp = as_responses(X, empty="keep")
    return _pairwise(resp, device, method, chunk_size, want_b=False, private=private)[0]


def _device_pairwise(X, device, method, chunk_size, want_b):
    """Counts of a cupy array already in GPU memory, without copying it to the host.

    Returns ``None`` (use the host path) unless ``X`` is a cupy array and the device is not
    ``"cpu"``.  Values are validated on the device; invalid input falls back to the host
    path, whose error message names the offending value, row and column.
    """
    if type(X).__module__.split(".")[0] != "cupy" or device == "cpu":
        return None
    if method == "sparse":
        raise ValueError("method='sparse' runs on the CPU only; use method='dense' on the GPU")
    xp = get_xp("gpu")
    if X.ndim != 2 or X.size == 0:
        return None
    if X.dtype.kind not in "fbiu":
        return None
    n, m = X.shape
    chunk = _check_chunk(chunk_size, m, "gpu")
    if X.dtype.itemsize == 1 and X.dtype.kind in "biu":
        # 0/1 bytes: validated inside the conversion pass, read back once at the end
        out = _counts_dense_gpu(X, chunk, False, want_b, validate=True)
        if out is None:
            return None
        Y, B = out
        np.fill_diagonal(Y, 0)
        np.fill_diagonal(B, 0)
        return Y, B
    if float_kernels_apply(xp, X):
        # 0/1/NaN floats: one validating pass over the whole array, one read back
        flags = scan_floats(xp, X)
        if flags & 1:
            return None
        Y, B = _counts_dense_gpu(X, chunk, bool(flags & 2), want_b)
        np.fill_diagonal(Y, 0)
        np.fill_diagonal(B, 0)
        return Y, B
    # validate in row chunks: no n × m temporaries next to an input that may fill the GPU
    has_missing = False
    for start in range(0, n, chunk):
        block = X[start : start + chunk]
        if X.dtype.kind == "f":
            nan = xp.isnan(block)
            if bool(xp.any(~nan & (block != 0) & (block != 1))):
                return None
            has_missing = has_missing or bool(nan.any())
            del nan
        elif X.dtype.kind == "u":
            if bool(xp.any(block > 1)):
                return None
        elif X.dtype.kind == "i" and bool(xp.any((block < 0) | (block > 1))):
            return None
        del block
    Y, B = _counts_dense_gpu(X, chunk, has_missing, want_b)
    np.fill_diagonal(Y, 0)
    np.fill_diagonal(B, 0)
    return Y, B


def _device_codes(xp, block):
    """int8 codes (1, 0, −1 for missing) of a chunk of 0/1/NaN (or 0/1 integer) values."""
    if block.dtype.itemsize == 1 and block.dtype.kind in "biu":
        return block  # int8 codes, or 0/1 bytes (uint8, bool) converted by bytes_to_half
    if block.dtype.kind == "f":
        return xp.where(xp.isnan(block), -1, block).astype(xp.int8)
    return block.astype(xp.int8)


def _check_chunk(chunk_size, m: int, dev: str) -> int:
    if chunk_size is None:
        # CPU: two float32 indicators (8 bytes a cell) in ~64 MiB; GPU: ~256 MiB per float16
        # indicator (one to three at a time), fewer and larger GEMMs for tensor cores
        if dev == "cpu":
            return default_chunk_size(m)
        return min(MAX_CHUNK, default_chunk_size(m, 4) * 8)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    if chunk_size > MAX_CHUNK:
        raise ValueError(
            f"chunk_size must be at most 2**24 = {MAX_CHUNK} (float32 exactness bound), "
            f"got {chunk_size}"
        )
    return int(chunk_size)


def _pairwise(resp, device, method, chunk_size, want_b, private: bool = False):
    check_choice("method", method, ("auto", "dense", "sparse"))
    dev = resolve_device(device)
    m = resp.n_items
    chunk_size = _check_chunk(chunk_size, m, dev)
    if private:  # one kernel, whatever share of the cells is missing: never chosen from the data
        if method == "sparse":
            raise ValueError("private=True counts with the dense kernel (the sparse one is picked from the data)")
        Y, B = _counts_dense(resp.codes, chunk_size, dev, True, want_b)
    else:
        _cache_observed(resp)
        if method == "auto":
            method = "sparse" if (dev == "cpu" and resp.observed_fraction < SPARSE_THRESHOLD) else "dense"
        if method == "sparse":
            if dev == "gpu" and device == "gpu":
                raise ValueError("method='sparse' runs on the CPU only; use method='dense' on the GPU")
            Y, B = _counts_sparse(resp.codes, chunk_size, want_b)
        else:
            Y, B = _counts_dense(resp.codes, chunk_size, dev, resp.has_missing, want_b)
    np.fill_diagonal(Y, 0)
    np.fill_diagonal(B, 0)
    return Y, B


def pairwise_counts_frame(
    X: ResponsesLike, **kwargs
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`privirt.pairwise_counts` (in memory) as two DataFrames labelled by item on both axes."""
    resp = as_responses(X, empty="keep")
    Y, B = local_pairwise_counts(resp, **kwargs)
    items = resp.items
    return (
        pd.DataFrame(Y, index=items.copy(), columns=items.copy()),
        pd.DataFrame(B, index=items.copy(), columns=items.copy()),
    )


def _cache_observed(resp, rows: int = 1 << 16) -> None:
    """Count observed cells in chunks (no n × m boolean temporary) and cache the count."""
    if "n_observed" in resp._cache:
        return
    codes = resp.codes
    total = 0
    for start in range(0, codes.shape[0], rows):
        total += int(np.count_nonzero(codes[start : start + rows] >= 0))
    resp._cache["n_observed"] = total


def has_empty(resp, rows: int = 1 << 16) -> bool:
    """Whether some person or item has no observed response (chunked, no big temporary)."""
    codes = resp.codes
    col_any = np.zeros(codes.shape[1], dtype=bool)
    for start in range(0, codes.shape[0], rows):
        obs = codes[start : start + rows] >= 0
        if not obs.any(axis=1).all():
            return True
        col_any |= obs.any(axis=0)
    return not col_any.all()


# ---------------------------------------------------------------------------------------
# dense path (numpy or cupy)
# ---------------------------------------------------------------------------------------
def _counts_dense(codes: np.ndarray, chunk: int, dev: str, has_missing: bool, want_b: bool):
    n, m = codes.shape
    if dev == "gpu":
        return _counts_dense_gpu(codes, chunk, has_missing, want_b)
    if not has_missing:
        return _counts_complete_cpu(codes, chunk)
    Y = np.zeros((m, m), dtype=np.int64)
    B = np.zeros((m, m), dtype=np.int64)
    syrk = _ssyrk()
    rows = min(chunk, n)
    # two float32 buffers reused across chunks; each indicator is written by one ufunc pass
    # over the int8 codes (comparison with a float32 output), no separate conversion
    Cbuf = np.empty((rows, m), dtype=np.float32)
    Wbuf = np.empty((rows, m), dtype=np.float32)
    for start in range(0, n, chunk):
        block = codes[start : start + chunk]
        Cf, Wf = Cbuf[: len(block)], Wbuf[: len(block)]
        np.equal(block, 1, out=Cf)
        np.equal(block, 0, out=Wf)
        Y += np.rint(Cf.T @ Wf).astype(np.int64)
        if want_b:
            np.add(Cf, Wf, out=Cf)  # observed indicator A = C + W
            B += _sym_gram(Cf, syrk, mirror=False)
    if want_b:
        _mirror_upper(B)
    return Y, B


def _counts_complete_cpu(codes: np.ndarray, chunk: int):
    """Complete data: ``Y = s 1ᵀ − CᵀC`` and ``B = n`` from one SYRK per chunk.

    The codes are 0/1, so one cast (int8 → float32, into a reused buffer) gives ``C``; the
    item totals ``s`` are the diagonal of ``CᵀC`` (``Σ_l C_li² = Σ_l C_li``), not a separate
    pass over the data.
    """
    n, m = codes.shape
    syrk = _ssyrk()
    G = np.zeros((m, m), dtype=np.int64)
    buf = np.empty((min(chunk, n), m), dtype=np.float32)
    for start in range(0, n, chunk):
        block = codes[start : start + chunk]
        Cf = buf[: len(block)]
        np.copyto(Cf, block)
        G += _sym_gram(Cf, syrk, mirror=False)
    _mirror_upper(G)
    totals = np.diagonal(G).copy()
    Y = totals[:, None] - G
    B = np.full((m, m), n, dtype=np.int64)
    return Y, B


def _ssyrk():
    try:
        from scipy.linalg.blas import ssyrk
    except Exception:  # pragma: no cover - scipy always ships BLAS wrappers
        return None
    return ssyrk


def _mirror_upper(G: np.ndarray) -> None:
    """Copy the upper triangle of ``G`` onto its lower triangle, in place."""
    il = np.tril_indices_from(G, -1)
    G[il] = G.T[il]


def _sym_gram(F: np.ndarray, syrk, mirror: bool = True) -> np.ndarray:
    """Exact int64 ``Fᵀ F`` of a 0/1 float32 chunk via SYRK (half the flops of a GEMM).

    With ``mirror=False`` only the upper triangle is meaningful (the lower one is 0 with
    SYRK): chunk results can be summed and mirrored once.
    """
    if syrk is None:
        return np.rint(F.T @ F).astype(np.int64)
    # F is C-contiguous (c × m), so F.T is a Fortran-contiguous m × c view: no copy.
    upper = syrk(1.0, F.T, trans=0, lower=0)  # upper triangle of F.T @ F
    G = np.triu(np.rint(upper).astype(np.int64))
    if mirror:
        _mirror_upper(G)
    return G


def _counts_dense_gpu(codes, chunk: int, has_missing: bool, want_b: bool,
                      validate: bool = False):
    """cupy mirror of the dense path: float16 0/1 inputs, float32 accumulation.

    ``codes`` is a host int8 code matrix (copied to the device one chunk at a time) or a
    device array of 0/1/NaN values (converted to codes one chunk at a time), so that the
    only full-size array is the input itself.  Complete 1-byte codes become float16 in
    one pass (:func:`._counts_gpu.bytes_to_half`); with ``validate`` (device input not yet
    checked) that pass also flags bytes other than 0 and 1, and the result is ``None``
    when any was found.

    cupy's ``matmul`` on float16 returns float16 (whose 11-bit significand is *not* exact
    beyond 2048), so the products go through :func:`_gemm_tn_f32`, which asks cuBLAS for a
    float32 result (``gemmEx``, tensor cores) and otherwise falls back to float32 GEMM.
    """
    xp = get_xp("gpu")
    n, m = codes.shape
    Y = xp.zeros((m, m), dtype=xp.int64)
    B = xp.zeros((m, m), dtype=xp.int64)
    totals = xp.zeros(m, dtype=xp.int64)
    bad = xp.zeros(1, dtype=xp.int32)
    for start in range(0, n, chunk):
        block = xp.asarray(codes[start : start + chunk])
        if has_missing and float_kernels_apply(xp, block):  # validated 0/1/NaN on the device
            Ch, Wh, Ah = split_floats(xp, block, want_b)
            Y += xp.rint(_gemm_tn_f32(xp, Ch, Wh)).astype(xp.int64)
            if want_b:
                B += xp.rint(_gemm_tn_f32(xp, Ah, Ah)).astype(xp.int64)
            del Ch, Wh, Ah, block
            continue
        if has_missing:
            block = _device_codes(xp, block)
            Ch = (block == 1).astype(xp.float16)
        else:  # without missing cells the values are 0/1 already: at most one conversion pass
            Ch = _complete_operand(xp, block, bad)
        if has_missing:
            Wh = (block == 0).astype(xp.float16)
            Y += xp.rint(_gemm_tn_f32(xp, Ch, Wh)).astype(xp.int64)
            del Wh
            if want_b:
                Ah = (block >= 0).astype(xp.float16)
                B += xp.rint(_gemm_tn_f32(xp, Ah, Ah)).astype(xp.int64)
                del Ah
        else:
            G = xp.rint(_gemm_tn_f32(xp, Ch, Ch)).astype(xp.int64)
            totals += xp.diagonal(G)  # (CᵀC)_ii = Σ_l C_li² = item i's number correct
            Y -= G
            del G
        del Ch, block
    if validate and bool(bad[0]):
        return None
    if not has_missing:
        Y += totals[:, None]
        B[:] = n
    return to_numpy(Y), to_numpy(B)


def _complete_operand(xp, block, bad):
    """The float16 operand of a complete 0/1 chunk: float16 itself, 1-byte values in one
    validating pass (:func:`._counts_gpu.bytes_to_half`, flags into ``bad``), else a cast."""
    if block.dtype == xp.float16:
        return block
    if block.dtype.itemsize == 1 and block.dtype.kind in "biu":
        return bytes_to_half(xp, block, bad)
    return block.astype(xp.float16)


_GEMM_EX_OK: bool | None = None

#: ``cudaDataType`` values (library_types.h) for gemmEx's operand and result types.
_CUDA_R_16F: int = 2
_CUDA_R_32F: int = 0


def _gemm_tn_f32(xp, a, b):
    """``aᵀ b`` of float16 0/1 matrices with a float32 result (exact for ≤ 2**24 rows).

    Uses cuBLAS ``gemmEx`` (float16 inputs, float32 compute and output: tensor cores).  The
    first call checks it against a float32 GEMM on a small random 0/1 problem; if the call
    fails or disagrees, every later call uses the float32 GEMM instead (equally exact).
    """
    global _GEMM_EX_OK
    if _GEMM_EX_OK is None:
        _GEMM_EX_OK = _check_gemm_ex(xp)
    if _GEMM_EX_OK:
        from cupy.cuda import cublas, device  # type: ignore[import-not-found]

        return _gemm_ex(xp, cublas, device, a, b)
    return a.astype(xp.float32).T @ b.astype(xp.float32)


def _check_gemm_ex(xp) -> bool:
    try:
        from cupy.cuda import cublas, device  # type: ignore[import-not-found]

        rng = np.random.default_rng(0)
        a = xp.asarray(rng.integers(0, 2, (3000, 7)).astype(np.float16))
        b = xp.asarray(rng.integers(0, 2, (3000, 5)).astype(np.float16))
        got = _gemm_ex(xp, cublas, device, a, b)
        want = a.astype(xp.float32).T @ b.astype(xp.float32)
        return bool(xp.array_equal(got, want))
    except Exception:
        return False


def _gemm_ex(xp, cublas, device, a, b):
    # Row-major a (k × m), b (k × p); we want out = aᵀ b (m × p), row-major.
    # cuBLAS is column-major: a row-major (k × m) buffer is a column-major (m × k) matrix aᵀ.
    # Row-major out (m × p) is column-major outᵀ (p × m) = bᵀ a, i.e. op(b_cm)=bᵀ... computed
    # as gemm(transa=N on b_cm (p × k), transb=T on a_cm (m × k)).
    a = xp.ascontiguousarray(a)
    b = xp.ascontiguousarray(b)
    k, m = a.shape
    p = b.shape[1]
    out = xp.empty((m, p), dtype=xp.float32)
    one = np.array(1.0, dtype=np.float32)
    zero = np.array(0.0, dtype=np.float32)
    handle = device.get_cublas_handle()
    # alpha and beta are host pointers: make sure the shared handle is in host pointer mode
    mode = cublas.getPointerMode(handle)
    if mode != cublas.CUBLAS_POINTER_MODE_HOST:
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    try:
        cublas.gemmEx(
            handle,
            cublas.CUBLAS_OP_N,
            cublas.CUBLAS_OP_T,
            p,
            m,
            k,
            one.ctypes.data,
            b.data.ptr,
            _CUDA_R_16F,
            p,
            a.data.ptr,
            _CUDA_R_16F,
            m,
            zero.ctypes.data,
            out.data.ptr,
            _CUDA_R_32F,
            p,
            cublas.CUBLAS_COMPUTE_32F,
            cublas.CUBLAS_GEMM_DEFAULT,
        )
    finally:
        if mode != cublas.CUBLAS_POINTER_MODE_HOST:
            cublas.setPointerMode(handle, mode)
    return out


# ---------------------------------------------------------------------------------------
# sparse path (scipy.sparse, CPU)
# ---------------------------------------------------------------------------------------
def _counts_sparse(codes: np.ndarray, chunk: int, want_b: bool):
    from scipy import sparse

    n, m = codes.shape
    Y = np.zeros((m, m), dtype=np.int64)
    B = np.zeros((m, m), dtype=np.int64)
    for start in range(0, n, chunk):
        block = codes[start : start + chunk]
        rows, cols = np.nonzero(block >= 0)
        vals = block[rows, cols]
        shape = block.shape
        right = vals == 1
        one = np.ones(1, dtype=np.int64)
        C = sparse.csr_matrix((np.broadcast_to(one, right.sum()), (rows[right], cols[right])), shape=shape)
        W = sparse.csr_matrix(
            (np.broadcast_to(one, (~right).sum()), (rows[~right], cols[~right])), shape=shape
        )
        Y += (C.T @ W).toarray()
        if want_b:
            A = sparse.csr_matrix((np.broadcast_to(one, rows.size), (rows, cols)), shape=shape)
            B += (A.T @ A).toarray()
    return Y, B

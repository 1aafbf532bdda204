"""The 2PNO Gibbs iteration on a CUDA GPU: four fused kernels (``gibbs_2pno.cu``, compiled
by cupy's ``RawModule``) with a counter-based Philox4x32-10 generator evaluated inside them,
so no iteration waits for a copy back to the host.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

import numpy as np

from . import moves as _moves

__all__ = ["cuda_source", "cuda_preamble", "kernel_specs", "KERNEL_NAMES", "GpuIteration",
           "STREAMING_UPDATE", "streaming_update_kernel"]

#: The kernels of one iteration, in order.
KERNEL_NAMES = ("privirt_gibbs_z", "privirt_gibbs_theta", "privirt_gibbs_item_sums",
                "privirt_gibbs_item")
#: Threads per block of every kernel launch.
BLOCK = 128

_KERNEL_RE = re.compile(
    r'extern "C" __global__ void (\w+)\(([^)]*?),\s*long long size\)\s*\{\n(.*?)\n\}\n', re.S
)


@lru_cache(maxsize=1)
def cuda_source() -> str:
    """The CUDA C++ source of all kernels, exactly as it is compiled."""
    return resources.files(__package__).joinpath("gibbs_2pno.cu").read_text(encoding="utf-8")


def cuda_preamble() -> str:
    """The device functions before the first kernel (Philox, uniforms, truncated normal)."""
    src = cuda_source()
    return src[: src.index('extern "C"')]


def kernel_specs() -> dict[str, tuple[str, str]]:
    """``name: (parameters, body)`` of each kernel; the parameters exclude the trailing
    ``long long size`` and the body is everything inside the kernel's braces."""
    specs = {m.group(1): (" ".join(m.group(2).split()), m.group(3))
             for m in _KERNEL_RE.finditer(cuda_source())}
    if tuple(specs) != KERNEL_NAMES:
        raise RuntimeError(f"gibbs_2pno.cu defines {list(specs)}, expected {list(KERNEL_NAMES)}")
    return specs


#: One draw into a :class:`~privirt.bayes.StreamingSummary` on the GPU, elementwise over
#: (chain, parameter): Welford's mean and sum of squares, the running batch sum, and the
#: kept draw at ``slot`` (−1: not kept) of ``kept`` (chains, n_kept, width).  The same
#: operations, in the same order, as the array code of ``StreamingSummary.update``; one
#: launch instead of about eight (each ~15–20 µs of launch overhead on an H200, which made
#: the summaries 85 % of a CBASE-size iteration: BENCHMARKS.md, GPU checklist).
STREAMING_UPDATE = (
    "float64 v, float64 count, int32 in_batch, int32 slot, int64 n_kept, int64 width",
    "float64 mean, float64 m2, float64 bsum, raw float64 kept",
    """
    const double d = v - mean;
    mean = mean + d / count;
    m2 = m2 + d * (v - mean);
    if (in_batch) bsum = bsum + v;
    if (slot >= 0) {
        const long long c = i / width;
        kept[(c * n_kept + slot) * width + (i - c * width)] = v;
    }
    """,
)


def streaming_update_kernel(xp: Any) -> Any:
    """The fused summary update for cupy arrays (``None`` for numpy: the array code runs)."""
    if getattr(xp, "__name__", "") != "cupy":
        return None
    return _streaming_update_kernel()  # pragma: no cover - needs a CUDA GPU


@lru_cache(maxsize=1)
def _streaming_update_kernel() -> Any:  # pragma: no cover - needs a CUDA GPU
    import cupy as cp

    return cp.ElementwiseKernel(*STREAMING_UPDATE, "privirt_streaming_update",
                                options=("--fmad=false",))


class _Launcher:
    """Calls one compiled kernel as ``kernel(size, *args)`` over indices [0, size)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, size: int, *args: Any) -> None:
        grid = max(1, min(-(-size // BLOCK), 1 << 20))  # the grid-stride loop does the rest
        self.fn((grid,), (BLOCK,), (*args, np.int64(size)))


@lru_cache(maxsize=1)
def gpu_kernels() -> tuple[_Launcher, ...]:  # pragma: no cover - needs a CUDA GPU
    import cupy as cp

    module = cp.RawModule(code=cuda_source(), options=("--std=c++17",))
    return tuple(_Launcher(module.get_function(name)) for name in KERNEL_NAMES)


class GpuIteration:
    """Device buffers and one iteration of B = D·C batch elements.

    The item sums Σ_i θ_i Z_ij, … are reduced in two deterministic stages: ``P`` chunks of
    ``rows`` persons give partial sums (one thread per chunk × batch element × item), then
    the item kernel adds the P partials in a fixed order.  P ≈ √n balances the two loops.
    θ, a and b live in flat device arrays updated in place; ``theta``, ``a`` and ``b`` are
    (B, ·) views of them.
    """

    def __init__(self, xp: Any, codes: np.ndarray, n_chains: int, theta: np.ndarray,
                 a: np.ndarray, b: np.ndarray, seeds: list, priors: tuple[float, ...],
                 kernels: tuple, free: bool = False, anchors: Any = None,
                 moves: bool = True) -> None:
        D, n, k = codes.shape
        B = theta.shape[0]
        self.xp, self.B, self.C, self.D, self.n, self.k = xp, B, n_chains, D, n, k
        self.has_missing = bool((codes < 0).any())
        self.pa_prec, self.pa_lin, self.pb_prec, self.pb_lin = priors
        keys = np.stack([s.generate_state(2, dtype=np.uint32) for s in seeds])
        self.keys = xp.asarray(keys).ravel()  # (B·2,) uint32
        self.codes_dev = xp.asarray(codes).ravel()  # (D·n·k,) int8
        rows = math.ceil(n / max(1, math.isqrt(n)))
        self.rows = rows
        self.chunks = math.ceil(n / rows)
        self._theta_flat = xp.ascontiguousarray(xp.asarray(theta), dtype=xp.float64).ravel()
        self._a_flat = xp.ascontiguousarray(xp.asarray(a), dtype=xp.float64).ravel()
        self._b_flat = xp.ascontiguousarray(xp.asarray(b), dtype=xp.float64).ravel()
        self.theta = self._theta_flat.reshape(B, n)
        self.a = self._a_flat.reshape(B, k)
        self.b = self._b_flat.reshape(B, k)
        self.Z = xp.zeros((B, n, k))
        self._z_flat = self.Z.ravel()
        self._sums = tuple(xp.zeros(self.chunks * B * k) for _ in range(6))  # ... and R_j
        self._s_person = xp.zeros(self.chunks * B * 4)
        self._s_items = xp.zeros(B * 3)
        self._no_store = xp.zeros(1)  # stands in for the draw stores when nothing is kept
        self.free = np.int32(bool(free))
        con = np.zeros(n, np.int8) if anchors is None else np.asarray(anchors.con, np.int8)
        fix = np.zeros(n) if anchors is None else np.asarray(anchors.fix, np.float64)
        self.th_con = xp.ascontiguousarray(xp.asarray(con))
        self.th_fix = xp.ascontiguousarray(xp.asarray(fix))
        self.moves = _moves.move_spec(n, k, anchors, moves, flat_a=self.pa_prec == 0)
        self._kernels = kernels

    def step(self, iteration: int, store: Mapping[str, Any] | None, slot: int) -> None:
        """Iteration ``iteration``: four fused kernels, no host round trip.

        1. ``z``: Z for every cell (truncated normals);
        2. ``theta``: θ per person, one thread a row;
        3. ``item_sums``: partial item sums over chunks of persons (and the orbit moves'
           person and item sums);
        4. ``item``: the orbit moves (θ moved in place), then (a, b) per item from the summed
           partials.

        Every argument is a device array or a host scalar passed by value.  With ``store``
        (flat (B, n_keep, ·) arrays), kernels 2 and 4 also write θ, a and b into draw slot
        ``slot`` (kernel 4 rewrites θ's after the moves).
        """
        kz, kth, ks, kit = self._kernels
        B, n, k = self.B, self.n, self.k
        it = np.uint32(iteration)
        n32, k32, C32, D32 = np.int32(n), np.int32(k), np.int32(self.C), np.int32(self.D)
        miss = np.int32(self.has_missing)
        if store is None:
            keep, n_keep = np.int32(-1), np.int32(0)
            st_theta = st_a = st_b = self._no_store
        else:
            keep = np.int32(slot)
            n_keep = np.int32(store["a"].shape[1])
            st_theta, st_a, st_b = (store[p].ravel() for p in ("theta", "a", "b"))
        kz(B * n * k, self._theta_flat, self._a_flat, self._b_flat, self.codes_dev, self.keys,
           it, n32, k32, C32, D32, self._z_flat)
        kth(B * n, self._z_flat, self._a_flat, self._b_flat, self.codes_dev, self.keys,
            self.th_con, self.th_fix, it, n32, k32, C32, D32, miss, keep, n_keep,
            self._theta_flat, st_theta)
        ks(self.chunks * B * k, self._z_flat, self._theta_flat, self._a_flat, self._b_flat,
           self.codes_dev, self.th_con, n32, k32, C32, D32, np.int32(B), miss,
           np.int32(self.rows), *self._sums, self._s_person, self._s_items)
        mv = self.moves
        kit(B * k, *self._sums, self._s_person, self._s_items, np.int32(mv.scale),
            np.int32(mv.shift), np.int32(mv.latent), np.float64(mv.n_free),
            np.float64(mv.power), n32, np.int32(self.chunks), np.int32(B),
            np.float64(self.pa_prec), np.float64(self.pa_lin), np.float64(self.pb_prec),
            np.float64(self.pb_lin), self.free, self.keys, it, k32, keep, n_keep,
            self._a_flat, self._b_flat, st_a, st_b, self._theta_flat, st_theta)

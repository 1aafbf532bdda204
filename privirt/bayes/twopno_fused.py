"""Fused CPU engine of the 2PNO Gibbs sampler: numba kernel, numpy fallback.

:class:`FusedGibbs` holds B chains (chain ``bb`` on data set ``bb // n_chains``) and advances
them one iteration per :meth:`FusedGibbs.step`; :func:`run_chain` runs a whole schedule and
returns the kept draws.  Two engines compute the same iteration from the same random
numbers:

* ``"numba"`` (with the ``fast`` extra): :mod:`privirt.bayes.twopno_numba`, one sweep over the
  n × k matrix per iteration, split over the cores (Z, θ and the item sums from the same pass, Z
  never stored), then the (a, b) draws;
* ``"numpy"``: the one numpy iteration, :func:`privirt.bayes.twopno.cpu_iteration`, fed the
  kernel's random numbers by :class:`PhiloxDraws`.

Random numbers are the counter-based Philox4x32-10 stream of the GPU kernels, keyed per chain
by two 32-bit words: (iteration, 0, cell) for Z, (iteration, 1, person) for θ,
(iteration, 2 or 3, item) for a and b, and stream + (t << 8) for the t-th retry of a
far-tail rejection step.  So the draws do not depend on the engine (up to rounding: Φ is
Cody's algorithm and Φ⁻¹ Wichura's AS 241 in numba, ``scipy.special.ndtr`` and ``ndtri`` in
numpy) nor on the number of threads.
The model, priors and conditionals are those of :func:`privirt.gibbs_2pno` (``docs/gibbs.md``).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import special

from .._backend import numba_available
from . import moves as _moves
from . import twopno
from .truncnorm import FAR_TAIL as _FAR, POINT_MASS as _POINT_MASS

__all__ = ["FusedGibbs", "PhiloxDraws", "run_chain", "numba_available", "philox_keys"]

#: Persons per block of the numba sweep (fixed, so sums do not depend on the thread count).
BLOCK_ROWS = 64
#: Below this many cells per iteration (all chains) the numba sweep runs on one thread.
PARALLEL_CELLS = 16384
_M32 = np.uint64(0xFFFFFFFF)


@lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    """Worker threads for the numba sweep (the kernels release the GIL)."""
    return ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 1) - 1),
                              thread_name_prefix="privirt-gibbs")


# A forked child inherits the cached executor without its threads, while the executor's idle
# count still says they wait for work: it would start none and ``f.result()`` would hang.
# The child starts from an empty cache and makes its own pool on first use.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.cache_clear)


def _resolve_engine(engine: str) -> str:
    if engine not in ("auto", "numba", "numpy"):
        raise ValueError(f'engine must be "auto", "numba" or "numpy", got {engine!r}')
    if engine == "auto":
        return "numba" if numba_available() else "numpy"
    if engine == "numba" and not numba_available():
        raise ImportError(
            'engine="numba" needs numba: python -m pip install "privirt[fast]" '
            '(or use engine="numpy")'
        )
    return engine


def philox_keys(seeds: Sequence[np.random.SeedSequence]) -> np.ndarray:
    """The (B, 2) Philox keys of B chains, two 32-bit words of each chain's sequence (the
    same words as the GPU path of :func:`privirt.gibbs_2pno`)."""
    return np.stack([s.generate_state(2, dtype=np.uint32) for s in seeds]).astype(np.uint64)


# ---------------------------------------------------------------------------------------
# numpy twins of the kernel's random-number functions
# ---------------------------------------------------------------------------------------
def uniform2(c0: Any, c1: Any, c2: Any, c3: Any, k0: Any, k1: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two uniforms in (0, 1) per counter from Philox4x32-10 (uint64 lanes, 32-bit words)."""
    c0, c1, c2, c3, k0, k1 = (np.asarray(x, dtype=np.uint64) for x in (c0, c1, c2, c3, k0, k1))
    s32 = np.uint64(32)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (p1 >> s32) ^ c1 ^ k0, p1 & _M32, (p0 >> s32) ^ c3 ^ k1, p0 & _M32
        k0 = (k0 + np.uint64(0x9E3779B9)) & _M32
        k1 = (k1 + np.uint64(0xBB67AE85)) & _M32
    s6, s26 = np.uint64(6), np.uint64(26)
    u0 = (((c0 >> s6) << s26) + (c1 >> s6)).astype(np.float64)
    u1 = (((c2 >> s6) << s26) + (c3 >> s6)).astype(np.float64)
    return (u0 + 0.5) * 2.0**-52, (u1 + 0.5) * 2.0**-52


def std_tn_lower(L: np.ndarray, c0: Any, stream: int, c2: Any, c3: Any, k0: Any, k1: Any) -> np.ndarray:
    """X ~ N(0, 1) | X > L elementwise from the counters' uniforms: upper-tail inverse CDF for
    L ≤ 5, Robert's (1995) exponential rejection beyond (retry t on stream + (t << 8))."""
    L = np.asarray(L, dtype=np.float64)
    u0, u1 = uniform2(c0, stream, c2, c3, k0, k1)
    u0, u1 = np.broadcast_to(u0, L.shape), np.broadcast_to(u1, L.shape)
    out = special.ndtr(-L)
    out *= u0
    special.ndtri(out, out=out)
    np.negative(out, out=out)
    far = np.flatnonzero(L > _FAR)
    if far.size:
        Lf = L.ravel()[far]
        res = np.empty(far.size)
        # L ≥ 1e150 (or inf): the draw is L in doubles, and L·L may overflow, which left the
        # loop below without an exit (the kernel's _robert_tail, same rule)
        mass = ~(Lf < _POINT_MASS)
        res[mass] = Lf[mass]
        todo = np.flatnonzero(~mass)
        alpha = np.zeros(far.size)
        alpha[todo] = 0.5 * (Lf[todo] + np.sqrt(Lf[todo] * Lf[todo] + 4.0))
        v0, v1 = u0.ravel()[far][todo], u1.ravel()[far][todo]
        c0f, c2f, c3f = (np.broadcast_to(np.asarray(c, dtype=np.uint64), L.shape).ravel()[far]
                         for c in (c0, c2, c3))
        t = 0
        while todo.size:
            x = Lf[todo] - np.log(v0) / alpha[todo]
            ok = np.log(v1) <= -0.5 * (x - alpha[todo]) ** 2
            res[todo[ok]] = x[ok]
            todo = todo[~ok]
            t += 1
            v0, v1 = uniform2(c0f[todo], stream + (t << 8), c2f[todo], c3f[todo], k0, k1)
        out.ravel()[far] = res
    return out


class PhiloxDraws:
    """The random inputs of :func:`privirt.bayes.twopno.cpu_iteration` from the numba kernel's
    counter-based stream (the numpy engine here): iteration ``iteration`` of B chains with
    Philox keys ``keys`` (B, 2) on n persons × k items, the same numbers as the kernel."""

    def __init__(self, keys: np.ndarray, n: int, k: int) -> None:
        self.keys, self.iteration = keys, 0
        cells = np.arange(n * k, dtype=np.uint64).reshape(n, k)
        self._cell_lo, self._cell_hi = cells & _M32, cells >> np.uint64(32)
        self._persons = np.arange(n, dtype=np.uint64)
        self._items = np.arange(k, dtype=np.uint64)

    def z_upper(self, b0: int, b1: int, r0: int, r1: int, t: np.ndarray,
                out: np.ndarray) -> np.ndarray:
        """Y ~ N(0, 1) | Y < t: minus the kernel's X ~ N(0, 1) | X > −t (counters (it, 0, cell))."""
        lo, hi = self._cell_lo[r0:r1], self._cell_hi[r0:r1]
        for c in range(b1 - b0):
            k0, k1 = self.keys[b0 + c]
            np.negative(std_tn_lower(-t[c], self.iteration, 0, lo, hi, k0, k1), out=out[c])
        return out

    def theta_normals(self, b0: int, b1: int, r0: int, r1: int) -> np.ndarray:
        persons = self._persons[r0:r1]
        return np.stack([special.ndtri(uniform2(self.iteration, 1, persons, 0, *self.keys[bb])[0])
                         for bb in range(b0, b1)])

    def a_lower(self, lower: np.ndarray) -> np.ndarray:
        return np.stack([std_tn_lower(lower[bb], self.iteration, 2, self._items, 0, *self.keys[bb])
                         for bb in range(len(lower))])

    def b_normals(self, k: int) -> np.ndarray:
        return np.stack([special.ndtri(uniform2(self.iteration, 3, self._items, 0, *key)[0])
                         for key in self.keys])

    def a_free(self, k: int) -> np.ndarray:
        """The kernel's untruncated a step: −Φ⁻¹(u) on counters (it, 2, item)."""
        return np.stack([-special.ndtri(uniform2(self.iteration, 2, self._items, 0, *key)[0])
                         for key in self.keys])

    def move_normals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The kernel's scale and shift inputs per chain: Φ⁻¹(u₀) and u₁ on counters
        (it, 4, 0, 0), Φ⁻¹(u₀) on (it, 5, 0, 0)."""
        k0, k1 = self.keys[:, 0], self.keys[:, 1]
        s_scale, s_shift, _ = _moves.MOVE_STREAMS
        u0, u1 = uniform2(self.iteration, s_scale, 0, 0, k0, k1)
        v0, _ = uniform2(self.iteration, s_shift, 0, 0, k0, k1)
        return special.ndtri(u0), u1, special.ndtri(v0)

    def latent_normals(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(B, k): Φ⁻¹(u₀) and u₁ on counters (it, 6, item, 0), the items' latent scales."""
        u0, u1 = uniform2(self.iteration, _moves.MOVE_STREAMS[2], self._items[None, :], 0,
                          self.keys[:, :1], self.keys[:, 1:])
        return special.ndtri(u0), u1

    def theta_lower(self, b0: int, b1: int, r0: int, r1: int, side: np.ndarray,
                    lower: np.ndarray, e: np.ndarray) -> np.ndarray:
        """The kernel's sign-anchored θ: X ~ N(0, 1) | X > lower on counters (it, 1, person)."""
        persons = self._persons[r0:r1][side]
        return np.stack([std_tn_lower(lower[c], self.iteration, 1, persons, 0, *self.keys[bb])
                         for c, bb in enumerate(range(b0, b1))])


# ---------------------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------------------
class FusedGibbs:
    """B chains of the 2PNO Gibbs sampler, advanced one iteration per :meth:`step`.

    Parameters
    ----------
    codes : ndarray of int8, shape (D, n, k) or (n, k)
        Responses 1 / 0, −1 for a missing cell.  Every item needs two or more responses under
        the flat priors (the caller validates the data as :func:`privirt.gibbs_2pno` does).
    n_chains : int
        Chains per data set; chain ``bb`` (of B = D · n_chains) reads data set
        ``bb // n_chains``.
    priors : dict, optional
        ``{"a": (mean, var) or None, "b": (mean, var) or None}``, None meaning the flat prior
        (on a > 0 for a), as validated by ``privirt.bayes.twopno.check_priors``.
    theta, a, b : array_like, shapes (B, n), (B, k), (B, k)
        Starting values (a > 0).
    keys : array_like, shape (B, 2)
        Philox keys, 32-bit words (see :func:`philox_keys`).
    engine : {"auto", "numba", "numpy"}
        ``"auto"``: numba when installed.
    keep_z : bool
        Keep the latest Z in ``self.Z`` (B, n, k) (for tests; costs memory).
    free : bool
        ``slopes="free"``: a unrestricted (default False: a > 0).
    anchors : privirt.bayes.slopes.Anchors, optional
        Sign constraints and fixed values of some θ_i.
    moves : bool
        Draw the orbit moves (scale and shift, :mod:`privirt.bayes.moves`) between the θ and
        the (a, b) steps, where they are valid (default); ``False`` for the plain three-step
        sampler.
    threads : {None, 1}
        numba engine: ``None`` splits the blocks of persons into one contiguous range per CPU
        core, swept by worker threads (the kernel releases the GIL), when an iteration has at
        least ``PARALLEL_CELLS`` cells; ``1`` keeps the sweep on the calling thread (same
        draws either way).

    Attributes
    ----------
    theta, a, b : ndarray
        Current state, (B, n), (B, k), (B, k).
    iteration : int
        Iterations done (the counter word of the random stream).
    engine : str
        The engine in use.
    """

    def __init__(
        self,
        codes: np.ndarray,
        *,
        n_chains: int = 1,
        priors: Mapping[str, Any] | None = None,
        theta: Any,
        a: Any,
        b: Any,
        keys: Any,
        engine: str = "auto",
        keep_z: bool = False,
        threads: int | None = None,
        free: bool = False,
        anchors: Any = None,
        moves: bool = True,
    ) -> None:
        self.engine = _resolve_engine(engine)
        if threads not in (None, 1):
            raise ValueError(f"threads must be None or 1, got {threads!r}")
        codes = np.asarray(codes)
        if codes.ndim == 2:
            codes = codes[None]
        if codes.ndim != 3 or codes.dtype != np.int8:
            raise ValueError("codes must be an int8 array shaped (D, n, k) or (n, k)")
        self.codes = np.ascontiguousarray(codes)
        D, n, k = codes.shape
        B = D * int(n_chains)
        self.n, self.k, self.B = n, k, B
        self.data_of = np.arange(B, dtype=np.int64) // int(n_chains)
        self.theta = np.array(theta, dtype=np.float64, order="C", ndmin=2)
        self.a = np.array(a, dtype=np.float64, order="C", ndmin=2)
        self.b = np.array(b, dtype=np.float64, order="C", ndmin=2)
        self.keys = np.ascontiguousarray(np.asarray(keys, dtype=np.uint64).reshape(B, 2))
        for name, arr, size in (("theta", self.theta, n), ("a", self.a, k), ("b", self.b, k)):
            if arr.shape != (B, size):
                raise ValueError(f"{name} must be shaped ({B}, {size}), got {arr.shape}")
        self.free = bool(free)
        if not self.free and np.any(self.a <= 0):
            raise ValueError("a must be positive (the model restricts a > 0)")
        self.th_con = np.zeros(n, dtype=np.int8) if anchors is None else \
            np.ascontiguousarray(anchors.con, dtype=np.int8)
        self.th_fix = np.zeros(n) if anchors is None else np.ascontiguousarray(anchors.fix,
                                                                                dtype=np.float64)
        pri = priors or {}
        pa, pb = pri.get("a"), pri.get("b")
        self.pa_prec, self.pa_lin = (1.0 / pa[1], pa[0] / pa[1]) if pa else (0.0, 0.0)
        self.pb_prec, self.pb_lin = (1.0 / pb[1], pb[0] / pb[1]) if pb else (0.0, 0.0)
        self.moves = _moves.move_spec(n, k, anchors, moves, flat_a=not pa)
        self.iteration = 0
        self.keep_z = bool(keep_z)
        self.Z = np.zeros((B, n, k)) if keep_z else None
        self._no_store = np.zeros((1, 1, 1))
        if self.engine == "numba":
            try:
                from . import moves_numba, twopno_numba
            except ValueError as exc:  # numba refused its NUMBA_* settings (_backend.import_numba)
                raise ValueError(f'{exc}, or run without numba: engine="numpy"') from None

            self._nb, self._mv = twopno_numba, moves_numba
            blocks = -(-n // BLOCK_ROWS)
            self._cd = np.empty((B, 2))
            self._partial = np.zeros((B, blocks, 6, k))
            tasks = B * blocks
            workers = min(os.cpu_count() or 1, tasks)
            if threads == 1 or B * n * k < PARALLEL_CELLS or workers < 2:
                self._ranges = None
            else:  # contiguous task ranges, one per worker thread
                cuts = np.linspace(0, tasks, workers + 1).round().astype(int)
                self._ranges = list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))
        else:  # the one numpy iteration, fed the kernel's random numbers
            self._cpu = twopno.CpuData.build(self.codes, int(n_chains), pri, free=self.free,
                                             anchors=anchors, moves=moves)
            self._cpu.Z = self.Z
            self._draws = PhiloxDraws(self.keys, n, k)

    def step(self, store: Mapping[str, np.ndarray] | None = None, slot: int = -1) -> None:
        """One iteration of every chain; with ``store`` (C-contiguous ``{"theta", "a", "b"}``
        arrays shaped (B, n_keep, ·)) the new values are also written at draw ``slot``."""
        if self.engine == "numba":
            self._step_numba(store, slot)
        else:
            self._step_numpy()
            if store is not None:
                for p, v in (("theta", self.theta), ("a", self.a), ("b", self.b)):
                    store[p][:, slot] = v
        self.iteration += 1

    def _step_numba(self, store: Mapping[str, np.ndarray] | None, slot: int) -> None:
        st_theta, st_a, st_b = (store["theta"], store["a"], store["b"]) if store is not None \
            else (self._no_store,) * 3
        slot = slot if store is not None else -1
        z = self.Z if self.keep_z else self._no_store
        common = (self.codes, self.data_of, self.theta, self.a, self.b, self.keys,
                  self.iteration, BLOCK_ROWS, self.th_con, self.th_fix)
        args = (*common, self._partial, z, self.keep_z, st_theta, slot)
        if self._ranges is None:
            self._nb.sweep(0, self.B * self._partial.shape[1], *args)
        else:
            pool = _pool()
            futures = [pool.submit(self._nb.sweep, t0, t1, *args) for t0, t1 in self._ranges[1:]]
            self._nb.sweep(*self._ranges[0], *args)
            for f in futures:
                f.result()
        self._mv.moves(self.theta, self.a, self.b, self.keys, self.iteration, self.th_con,
                       *self.moves.args(), self.pa_prec, self.pa_lin, self.pb_prec,
                       self.pb_lin, self._cd)
        self._nb.items(self.theta, self.a, self.b, self.keys, self.iteration, self.pa_prec,
                       self.pa_lin, self.pb_prec, self.pb_lin, self.free, self._partial, st_a,
                       st_b, slot, self._cd, st_theta, self.moves.latent)

    def _step_numpy(self) -> None:
        self._draws.iteration = self.iteration
        state = twopno.cpu_iteration(twopno.GibbsState(self.theta, self.a, self.b),
                                     self._cpu, self._draws)
        self.theta[...], self.a[...], self.b[...] = state.theta, state.a, state.b


def run_chain(
    codes: np.ndarray,
    *,
    n_iter: int,
    warmup: int = 0,
    thin: int = 1,
    n_chains: int = 1,
    priors: Mapping[str, Any] | None = None,
    inits: Sequence[Mapping[str, np.ndarray]],
    seeds: Sequence[np.random.SeedSequence],
    engine: str = "auto",
    threads: int | None = None,
    free: bool = False,
    anchors: Any = None,
    moves: bool = True,
) -> dict[str, np.ndarray]:
    """Run B = D · n_chains chains for ``n_iter`` iterations and return the kept draws.

    Parameters
    ----------
    codes : ndarray of int8, shape (D, n, k) or (n, k)
        Responses 1 / 0 / −1 (missing).
    n_iter, warmup, thin : int
        Schedule as in :func:`privirt.gibbs_2pno`: iterations ``warmup + 1``,
        ``warmup + 1 + thin``, … ≤ ``n_iter`` are kept.
    n_chains : int
        Chains per data set.
    priors : dict, optional
        As in :class:`FusedGibbs`.
    inits : sequence of dict
        B starting points ``{"theta": (n,), "a": (k,), "b": (k,)}``.
    seeds : sequence of numpy.random.SeedSequence
        B sampler sequences; chain ``bb`` uses the Philox key ``philox_keys(seeds)[bb]``.
    engine : {"auto", "numba", "numpy"}
        See :class:`FusedGibbs`.
    threads, free, anchors, moves
        See :class:`FusedGibbs`.

    Returns
    -------
    dict of str to ndarray
        ``"theta"`` (B, n_keep, n), ``"a"`` and ``"b"`` (B, n_keep, k).
    """
    if len(inits) != len(seeds):
        raise ValueError(f"need one init per seed, got {len(inits)} and {len(seeds)}")
    kern = FusedGibbs(
        codes, n_chains=n_chains, priors=priors,
        theta=np.stack([i["theta"] for i in inits]), a=np.stack([i["a"] for i in inits]),
        b=np.stack([i["b"] for i in inits]), keys=philox_keys(seeds), engine=engine,
        threads=threads, free=free, anchors=anchors, moves=moves,
    )
    n_keep = -(-(n_iter - warmup) // thin)
    store = {p: np.empty((kern.B, n_keep, s)) for p, s in (("theta", kern.n), ("a", kern.k),
                                                           ("b", kern.k))}
    kept = 0
    for it in range(1, n_iter + 1):
        if it > warmup and (it - warmup - 1) % thin == 0:
            kern.step(store, kept)
            kept += 1
        else:
            kern.step()
    return store

"""Gibbs sampler for the two-parameter normal ogive (2PNO) model, on CPU and GPU.

Model (Albert 1992; Sheng, Welling & Zhu 2014)::

    P(y_ij = 1 | θ_i, a_j, b_j) = Φ(a_j θ_i − b_j),   θ_i ~ N(0, 1),   a_j > 0,

with, by default, the paper's priors: a flat prior on a_j restricted to a_j > 0 and a flat
prior on b_j.  ``priors={"a": (m, v)}`` replaces the first by N(m, v) truncated to a_j > 0,
``priors={"b": (m, v)}`` the second by N(m, v).

Each iteration performs the three blocked Gibbs steps of the paper, with a latent
Z_ij = a_j θ_i − b_j + ε_ij, ε_ij ~ N(0, 1):

1. Z_ij | · ~ N(a_j θ_i − b_j, 1) truncated to (0, ∞) if y_ij = 1, to (−∞, 0) if y_ij = 0;
   missing cells get no Z (it is held at zero and masked out of every sum below).
2. θ_i | · ~ N( Σ_j' a_j (Z_ij + b_j) / (1 + Σ_j' a_j²),  1 / (1 + Σ_j' a_j²) ), the sums
   running over the items person i answered.
3. ξ_j = (a_j, b_j) | · ~ N(P⁻¹ r, P⁻¹) restricted to a_j > 0, where with x_i = (θ_i, −1)
   over the persons who answered item j, P = Σ' x_i x_iᵀ + prior precision and
   r = Σ' x_i Z_ij + prior precision × prior mean.  The restricted bivariate normal is drawn
   *exactly* in one pass: a_j from its marginal N(m_a, (P⁻¹)_aa) truncated to a_j > 0, then
   b_j | a_j ~ N(m_b − (P_ab / P_bb)(a_j − m_a), 1 / P_bb).  (No rejection loop.)

Iterations are counted as in the paper: ``n_iter`` is the *total* number, including the
``burn_in`` first ones, which are discarded; of the remaining ``n_iter − burn_in`` every
``thin``-th is kept, starting with the first.

All chains (and, for :func:`gibbs_2pno_replicate`, all data sets) are advanced together as
one batch of arrays shaped (batch, persons, items): on the CPU with vectorised numpy/scipy
(one truncated-normal evaluation over the whole batch per iteration, batched matrix
products for the sums), on the GPU with cupy: four fused kernels per iteration and a
counter-based Philox4x32-10 generator evaluated inside them (no host round trip per
iteration).
See ``docs/gibbs.md`` for the algorithm as implemented.
"""

from __future__ import annotations

import math
import time
import warnings
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import special

from ._backend import get_xp, resolve_device, to_numpy
from ._truncnorm import std_truncnorm_lower, std_truncnorm_upper
from ._progress import ProgressBar
from .posterior import Posterior, StreamingSummary
from .responses import Responses, ResponsesLike, as_responses

__all__ = ["gibbs_2pno", "gibbs_2pno_replicate"]

SAMPLER = "gibbs_2pno"


# ---------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------
def _int_arg(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _check_keep_draws(keep_draws: Any) -> bool:
    if not isinstance(keep_draws, (bool, np.bool_)):
        raise ValueError(f"keep_draws must be True or False, got {keep_draws!r}")
    return bool(keep_draws)


def _check_schedule(n_iter: Any, burn_in: Any, thin: Any, n_chains: Any) -> tuple[int, int, int, int, int]:
    n_iter = _int_arg("n_iter", n_iter, 1)
    burn_in = _int_arg("burn_in", burn_in, 0)
    thin = _int_arg("thin", thin, 1)
    n_chains = _int_arg("n_chains", n_chains, 1)
    if burn_in >= n_iter:
        raise ValueError(
            f"burn_in ({burn_in}) must be smaller than n_iter ({n_iter}); n_iter counts all "
            "iterations including the burn-in (e.g. n_iter=10000, burn_in=5000)"
        )
    n_keep = -(-(n_iter - burn_in) // thin)
    return n_iter, burn_in, thin, n_chains, n_keep


def _check_priors(priors: Mapping[str, Any] | None) -> dict[str, tuple[float, float] | None]:
    out: dict[str, tuple[float, float] | None] = {"a": None, "b": None}
    if priors is None:
        return out
    if not isinstance(priors, Mapping):
        raise ValueError('priors must be a dict such as {"b": (0.0, 4.0)} or None')
    unknown = set(priors) - {"a", "b"}
    if unknown:
        raise ValueError(f"unknown prior key(s) {sorted(unknown)}; use 'a' and/or 'b'")
    for key, spec in priors.items():
        if spec is None:
            continue
        try:
            mean, var = (float(v) for v in spec)
        except (TypeError, ValueError):
            raise ValueError(
                f"priors[{key!r}] must be a (mean, variance) pair of numbers, got {spec!r}"
            ) from None
        if not (math.isfinite(mean) and math.isfinite(var) and var > 0):
            raise ValueError(
                f"priors[{key!r}] needs a finite mean and a finite positive variance, got {spec!r}"
            )
        out[key] = (mean, var)
    return out


def _seed_sequence(seed: Any) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        raise ValueError("seed must be an int, a numpy SeedSequence or None (not a Generator)")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise ValueError(f"seed must be a non-negative integer, a SeedSequence or None, got {seed!r}")
    if seed is not None and seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return np.random.SeedSequence(seed)


def _child(ss: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """A child sequence that does not depend on how often ``ss`` was spawned before."""
    return np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + tuple(key))


def _describe_seed(ss: np.random.SeedSequence) -> dict[str, Any]:
    return {"entropy": ss.entropy, "spawn_key": tuple(ss.spawn_key)}


def _check_item_precision(resp: Responses, priors: dict, where: str = "") -> None:
    """Refuse items whose (a, b) conditional has a singular precision under flat priors.

    With x_i = (θ_i, −1) over the n_j persons who answered item j, det P = n_j Σ'θ_i² −
    (Σ'θ_i)² = n_j Σ'(θ_i − θ̄)², zero when n_j = 1: the draw would be NaN and spread to
    every parameter.  A proper prior on a or on b adds its precision and makes P positive
    definite, so only the flat-flat case is refused.
    """
    if priors["a"] is not None or priors["b"] is not None:
        return
    n_obs = (resp.codes >= 0).sum(axis=0)
    few = n_obs == 1
    if few.any():
        raise ValueError(
            f"{where}item(s) {list(resp.items[few][:5])} were answered by a single person: "
            "under the flat priors on a and b their conditional has a singular precision "
            "matrix and no posterior draw exists; drop them or pass a proper prior, e.g. "
            'priors={"b": (0.0, 4.0)}'
        )


def _warn_improper(resp: Responses, priors: dict, where: str = "") -> None:
    _check_item_precision(resp, priors, where)
    if priors["b"] is not None:
        return
    obs = resp.codes >= 0
    correct = (resp.codes == 1).sum(axis=0)
    n_obs = obs.sum(axis=0)
    extreme = (correct == 0) | (correct == n_obs)
    if extreme.any():
        items = list(resp.items[extreme][:5])
        warnings.warn(
            f"{where}item(s) {items} were answered all correct or all incorrect: under the "
            "flat prior on b their posterior is improper and b drifts without bound; drop "
            'them or pass priors={"b": (0.0, 4.0)}',
            UserWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------------------------------
# starting values
# ---------------------------------------------------------------------------------------
def _default_init(codes: np.ndarray, rng: np.random.Generator, jitter: bool) -> dict[str, np.ndarray]:
    """Data-based starting values: b from the item p-values (a = 1), θ from sum scores."""
    obs = codes >= 0
    n_obs_item = np.maximum(obs.sum(axis=0), 1)
    p_item = np.clip((codes == 1).sum(axis=0) / n_obs_item, 0.02, 0.98)
    # with a = 1 and θ ~ N(0, 1): P(y = 1) = Φ(−b / √2)
    b = -np.sqrt(2.0) * special.ndtri(p_item)
    n_obs_person = np.maximum(obs.sum(axis=1), 1)
    p_person = np.clip((codes == 1).sum(axis=1) / n_obs_person, 0.02, 0.98)
    theta = special.ndtri(p_person)
    theta = (theta - theta.mean()) / (theta.std() if theta.std() > 0 else 1.0)
    a = np.ones(codes.shape[1])
    if jitter:  # over-dispersed starts so that R-hat can see non-convergence
        a = a * np.exp(rng.normal(0.0, 0.3, a.shape))
        b = b + rng.normal(0.0, 0.5, b.shape)
        theta = theta + rng.normal(0.0, 0.5, theta.shape)
    return {"theta": theta, "a": a, "b": b}


def _check_init(init: Mapping[str, Any] | None, n: int, k: int) -> dict[str, np.ndarray]:
    if init is None:
        return {}
    if not isinstance(init, Mapping):
        raise ValueError('init must be a dict with keys among "theta", "a", "b" or None')
    unknown = set(init) - {"theta", "a", "b"}
    if unknown:
        raise ValueError(f"unknown init key(s) {sorted(unknown)}; use 'theta', 'a', 'b'")
    out = {}
    for key, size in (("theta", n), ("a", k), ("b", k)):
        if key not in init or init[key] is None:
            continue
        try:
            v = np.asarray(init[key], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"init[{key!r}] must be a number or an array of numbers, got {init[key]!r}"
            ) from None
        if v.ndim == 0:
            v = np.full(size, float(v))
        if v.shape != (size,):
            raise ValueError(f"init[{key!r}] must have length {size}, got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"init[{key!r}] must be finite")
        if key == "a" and np.any(v <= 0):
            raise ValueError("init['a'] must be positive (the model restricts a > 0)")
        out[key] = v
    return out


# ---------------------------------------------------------------------------------------
# the (a, b) step: exact draw from a bivariate normal restricted to a > 0
# ---------------------------------------------------------------------------------------
def _draw_items(
    p_aa: np.ndarray, p_ab: np.ndarray, p_bb: np.ndarray, r_a: np.ndarray, r_b: np.ndarray,
    v: np.ndarray, e: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw (a, b) ~ N(P⁻¹ r, P⁻¹) restricted to a > 0, given uniforms v ∈ (0, 1], normals e.

    The restricted density factorises as p(a) p(b | a) with p(a) the N(m_a, (P⁻¹)_aa)
    marginal truncated to a > 0 (the restriction involves a only) and
    b | a ~ N(m_b − (P_ab / P_bb)(a − m_a), 1 / P_bb) — an exact joint draw, no rejection.
    """
    det = p_aa * p_bb - p_ab * p_ab
    m_a = (p_bb * r_a - p_ab * r_b) / det
    m_b = (p_aa * r_b - p_ab * r_a) / det
    sd_a = np.sqrt(p_bb / det)  # (P⁻¹)_aa = P_bb / det
    a = m_a + sd_a * std_truncnorm_lower(-m_a / sd_a, v)
    a = np.maximum(a, np.finfo(float).tiny)  # a = 0 exactly has probability ≤ 2⁻⁵³
    b = m_b - (p_ab / p_bb) * (a - m_a) + e / np.sqrt(p_bb)
    return a, b


# ---------------------------------------------------------------------------------------
# the batched sampler
# ---------------------------------------------------------------------------------------
class _Batch:
    """D data sets × C chains advanced together as B = D·C batch elements."""

    def __init__(
        self,
        codes: np.ndarray,  # (D, n, k) int8
        n_chains: int,
        priors: dict,
        inits: list[dict[str, np.ndarray]],  # length B
        seeds: list[np.random.SeedSequence],  # length B, sampler streams
        device: str,
        keep_z: bool = False,
    ) -> None:
        self.device = device
        xp = self.xp = get_xp(device)
        D, n, k = codes.shape
        C = n_chains
        self.D, self.C, self.B, self.n, self.k = D, C, D * C, n, k
        self.has_missing = bool((codes < 0).any())
        pa, pb = priors["a"], priors["b"]
        # prior precisions and precision × mean (0 for flat priors)
        self.pa_prec, self.pa_lin = (1.0 / pa[1], pa[0] / pa[1]) if pa else (0.0, 0.0)
        self.pb_prec, self.pb_lin = (1.0 / pb[1], pb[0] / pb[1]) if pb else (0.0, 0.0)

        def per_batch(arr: np.ndarray) -> np.ndarray:  # (D, ...) -> (B, ...)
            return arr if C == 1 else np.repeat(arr, C, axis=0)

        # (D, n, k) broadcasts against (B, n, k) when D = 1 (chains share one data set) or
        # C = 1 (B = D); only D > 1 with C > 1 needs the data repeated per chain.
        if device == "cpu":
            sign = np.where(codes == 1, 1.0, np.where(codes == 0, -1.0, 0.0))  # (D, n, k)
            self.S = per_batch(sign) if (D > 1 and C > 1) else sign
        else:  # the Z kernel reads the int8 codes directly
            self.S = None
        if device != "cpu":  # the GPU kernels read the mask from the int8 codes
            self.M = self.n_obs_item = None
        elif self.has_missing:
            mask = (codes >= 0).astype(np.float64)
            self.M = per_batch(mask) if (D > 1 and C > 1) else mask
            self.n_obs_item = per_batch(mask.sum(axis=1))  # (B, k)
        else:
            self.M = None
            self.n_obs_item = np.full((self.B, k), float(n))
        self.theta = xp.asarray(np.stack([i["theta"] for i in inits]))
        self.a = xp.asarray(np.stack([i["a"] for i in inits]))
        self.b = xp.asarray(np.stack([i["b"] for i in inits]))
        if device == "cpu":
            # two Philox streams per chain: uniforms of the Z step, and everything else
            self.rng_z = [np.random.Generator(np.random.Philox(_child(s, 0))) for s in seeds]
            self.rng_e = [np.random.Generator(np.random.Philox(_child(s, 1))) for s in seeds]
            self._plan_chunks()
            # the CPU path never needs all of Z at once; keep_z stores it (for tests)
            self.Z = np.zeros((self.B, n, k)) if keep_z else None
        else:
            keys = np.stack([s.generate_state(2, dtype=np.uint32) for s in seeds])
            self.keys = xp.asarray(keys).ravel()  # (B·2,) uint32
            self.codes_dev = xp.asarray(codes).ravel()  # (D·n·k,) int8
            self._setup_gpu()
        self.iteration = 0

    def step(self, store: Mapping[str, Any] | None = None, slot: int = -1) -> None:
        """One iteration of all batch elements.

        With ``store`` (C-contiguous arrays ``{"a", "b", "theta"}`` shaped (B, n_keep, ·) on
        the batch's device), this iteration's values are also written to draw ``slot``.
        """
        if self.device == "cpu":
            self._step_cpu()
            if store is not None:
                for p, v in (("a", self.a), ("b", self.b), ("theta", self.theta)):
                    store[p][:, slot] = v
        else:
            self._step_gpu(store, slot)
        self.iteration += 1

    # -- CPU steps -----------------------------------------------------------------------
    _CHUNK_CELLS = 1 << 15  # cells per block: the working set stays in the CPU cache

    def _plan_chunks(self) -> None:
        """Blocks (b0, b1, r0, r1) of batch elements × person rows, each ≤ _CHUNK_CELLS cells.

        Each chain's rows are visited in order with boundaries that depend only on (n, k), so
        its random streams do not depend on the batch it runs in.
        """
        B, n, k = self.B, self.n, self.k
        cap = self._CHUNK_CELLS
        if n * k >= cap:
            rows = max(1, cap // k)
            self.chunks = [(b, b + 1, r, min(r + rows, n)) for b in range(B) for r in range(0, n, rows)]
        else:
            g = max(1, cap // (n * k))
            self.chunks = [(b, min(b + g, B), 0, n) for b in range(0, B, g)]
        size = max((b1 - b0) * (r1 - r0) * k for b0, b1, r0, r1 in self.chunks)
        self._buf = np.empty((3, size))

    def _step_cpu(self) -> None:
        """One iteration, streamed over cache-sized blocks of persons.

        Per block: Z (truncated normals), then θ for those persons (their conditional uses
        only their own row of Z), then the block's contributions to the item sums Σθ_i Z_ij
        and Σ Z_ij.  The item step follows once all blocks are done.
        """
        B, n, k = self.B, self.n, self.k
        a, b, S, M = self.a, self.b, self.S, self.M
        theta_new = np.empty((B, n))
        s_tz = np.zeros((B, k))
        s_z = np.zeros((B, k))
        if M is None:
            prec_full = 1.0 + (a * a).sum(axis=1)  # (B,)
            ab_full = (a * b).sum(axis=1)
        else:
            a2, ab = (a * a)[:, :, None], (a * b)[:, :, None]
            s_tt = np.zeros((B, k))
            s_t = np.zeros((B, k))
        for b0, b1, r0, r1 in self.chunks:
            g, rows = b1 - b0, r1 - r0
            cells = g * rows * k
            mu = self._buf[0, :cells].reshape(g, rows, k)
            V = self._buf[1, :cells].reshape(g, rows, k)
            t = self._buf[2, :cells].reshape(g, rows, k)
            np.multiply(self.theta[b0:b1, r0:r1, None], a[b0:b1, None, :], out=mu)
            mu -= b[b0:b1, None, :]
            for c in range(g):
                self.rng_z[b0 + c].random(out=V[c])
            np.subtract(1.0, V, out=V)  # V in (0, 1]
            Sc = S[:, r0:r1] if S.shape[0] == 1 else S[b0:b1, r0:r1]
            # With s = ±1 (correct / incorrect): Z = μ − s·Y, Y ~ N(0,1) | Y < s·μ, so that
            # Z > 0 when s = 1 and Z < 0 when s = −1.  Missing cells: s = 0, masked below.
            np.multiply(Sc, mu, out=t)
            Y = std_truncnorm_upper(t, V, out=V)
            Y *= Sc
            Z = np.subtract(mu, Y, out=mu)
            if M is not None:
                Mc = M[:, r0:r1] if M.shape[0] == 1 else M[b0:b1, r0:r1]
                Z *= Mc
            if self.Z is not None:
                self.Z[b0:b1, r0:r1] = Z
            # θ_i | Z, a, b  (sums over the items person i answered)
            za = np.matmul(Z, a[b0:b1, :, None])[:, :, 0]
            if M is None:
                prec = prec_full[b0:b1, None]
                lin = za + ab_full[b0:b1, None]
            else:
                prec = 1.0 + np.matmul(Mc, a2[b0:b1])[:, :, 0]
                lin = za + np.matmul(Mc, ab[b0:b1])[:, :, 0]
            e = np.stack([self.rng_e[b0 + c].standard_normal(rows) for c in range(g)])
            th = lin / prec + e / np.sqrt(prec)
            theta_new[b0:b1, r0:r1] = th
            # this block's share of the item sums
            s_tz[b0:b1] += np.matmul(th[:, None, :], Z)[:, 0, :]
            s_z[b0:b1] += Z.sum(axis=1)
            if M is not None:
                s_tt[b0:b1] += np.matmul((th * th)[:, None, :], Mc)[:, 0, :]
                s_t[b0:b1] += np.matmul(th[:, None, :], Mc)[:, 0, :]
        self.theta = theta_new
        if M is None:
            s_tt = (theta_new * theta_new).sum(axis=1)[:, None]
            s_t = theta_new.sum(axis=1)[:, None]
        # (a_j, b_j) | Z, θ:  x_i = (θ_i, −1),  P = [[Σθ², −Σθ], [−Σθ, Σ1]] + prior,
        # r = [Σθ Z, −Σ Z] + prior precision × prior mean
        p_aa = s_tt + self.pa_prec
        p_ab = -s_t
        p_bb = self.n_obs_item + self.pb_prec
        r_a = s_tz + self.pa_lin
        r_b = -s_z + self.pb_lin
        v = np.stack([1.0 - g.random(k) for g in self.rng_e])
        e_b = np.stack([g.standard_normal(k) for g in self.rng_e])
        self.a, self.b = _draw_items(p_aa, p_ab, p_bb, r_a, r_b, v, e_b)

    # -- GPU steps -----------------------------------------------------------------------
    def _setup_gpu(self) -> None:
        """Device buffers, the kernels, and the split of the item sums over person chunks.

        The item sums Σ_i θ_i Z_ij, … are reduced in two deterministic stages: ``P`` chunks
        of ``rows`` persons give partial sums (one thread per chunk × batch element × item,
        reading Z along rows, so neighbouring threads read neighbouring items), then the
        item kernel adds the P partials in a fixed order.  P ≈ √n balances the two loops.
        """
        xp, B, n, k = self.xp, self.B, self.n, self.k
        rows = math.ceil(n / max(1, math.isqrt(n)))
        self.gpu_rows = rows
        self.gpu_chunks = math.ceil(n / rows)
        # flat device buffers (the kernels index them linearly); θ, a and b are updated in
        # place, and self.theta / self.a / self.b are (B, ·) views of them
        self._theta_flat = xp.ascontiguousarray(self.theta, dtype=xp.float64).ravel()
        self._a_flat = xp.ascontiguousarray(self.a, dtype=xp.float64).ravel()
        self._b_flat = xp.ascontiguousarray(self.b, dtype=xp.float64).ravel()
        self.theta = self._theta_flat.reshape(B, n)
        self.a = self._a_flat.reshape(B, k)
        self.b = self._b_flat.reshape(B, k)
        self.Z = xp.zeros((B, n, k))
        self._z_flat = self.Z.ravel()
        self._sums = tuple(xp.zeros(self.gpu_chunks * B * k) for _ in range(5))
        self._no_store = xp.zeros(1)  # stands in for the draw stores when nothing is kept
        self._kernels = _gpu_kernels()

    def _step_gpu(self, store: Mapping[str, Any] | None, slot: int) -> None:
        """One iteration on the device: four fused kernels, no host round trip.

        1. ``z``: Z for every cell (truncated normals);
        2. ``theta``: θ per person, one thread a row (Σ_j Z_ij a_j and the masked Σ a_j²,
           Σ a_j b_j in the same pass);
        3. ``item_sums``: partial item sums over chunks of persons;
        4. ``item``: (a, b) per item from the summed partials.

        Every argument is a device array or a host scalar passed by value (iteration, sizes,
        prior constants, the draw slot), so no iteration waits for a copy back.  With
        ``store`` (flat (B, n_keep, ·) arrays), kernels 2 and 4 also write this iteration's
        θ, a and b into draw slot ``slot``.
        """
        kz, kth, ks, kit = self._kernels
        B, n, k = self.B, self.n, self.k
        it = np.uint32(self.iteration)
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
        kth(B * n, self._z_flat, self._a_flat, self._b_flat, self.codes_dev, self.keys, it,
            n32, k32, C32, D32, miss, keep, n_keep, self._theta_flat, st_theta)
        ks(self.gpu_chunks * B * k, self._z_flat, self._theta_flat, self.codes_dev, n32, k32,
           C32, D32, np.int32(B), miss, np.int32(self.gpu_rows), *self._sums)
        kit(B * k, *self._sums, np.int32(self.gpu_chunks), np.int32(B),
            np.float64(self.pa_prec), np.float64(self.pa_lin), np.float64(self.pb_prec),
            np.float64(self.pb_lin), self.keys, it, k32, keep, n_keep,
            self._a_flat, self._b_flat, st_a, st_b)


# ---------------------------------------------------------------------------------------
# GPU kernels (cupy RawModule): counter-based Philox4x32-10 inside fused kernels
# ---------------------------------------------------------------------------------------
_CUDA_PREAMBLE = r"""
__device__ __forceinline__ void philox4x32_10(unsigned int c0, unsigned int c1,
        unsigned int c2, unsigned int c3, unsigned int k0, unsigned int k1,
        unsigned int* o) {
    for (int r = 0; r < 10; ++r) {
        unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    o[0] = c0; o[1] = c1; o[2] = c2; o[3] = c3;
}
// two uniforms in the open interval (0, 1), 52 random bits each, from one Philox block
__device__ __forceinline__ void uniform2(unsigned int c0, unsigned int c1,
        unsigned int c2, unsigned int c3, unsigned int k0, unsigned int k1,
        double* u) {
    unsigned int o[4];
    philox4x32_10(c0, c1, c2, c3, k0, k1, o);
    const double s = 2.220446049250313e-16;  /* 2^-52 */
    u[0] = ((double)(((unsigned long long)(o[0] >> 6) << 26) + (o[1] >> 6)) + 0.5) * s;
    u[1] = ((double)(((unsigned long long)(o[2] >> 6) << 26) + (o[3] >> 6)) + 0.5) * s;
}
// X ~ N(0,1) | X > L.  L <= 5: upper-tail inverse CDF; L > 5: Robert (1995) exponential
// rejection with the optimal rate (acceptance > 0.98).  `stream` separates the uses.
__device__ double std_tn_lower(double L, unsigned int c0, unsigned int stream,
        unsigned int c2, unsigned int c3, unsigned int k0, unsigned int k1) {
    double u[2];
    uniform2(c0, stream, c2, c3, k0, k1, u);
    if (L <= 5.0) {
        return -normcdfinv(u[0] * normcdf(-L));
    }
    const double alpha = 0.5 * (L + sqrt(L * L + 4.0));
    for (unsigned int t = 1; ; ++t) {
        double x = L - log(u[0]) / alpha;
        double d = x - alpha;
        if (log(u[1]) <= -0.5 * d * d) return x;
        uniform2(c0, stream + (t << 8), c2, c3, k0, k1, u);
    }
}
"""

#: The fused kernels, in the order of one iteration, as ``name: (parameters, body)``.
#: Each becomes ``extern "C" __global__ void name(parameters, long long size)`` whose
#: body runs once for every ``i`` in [0, size) (a grid-stride loop).  Arrays are flat:
#: Z (B, n, k); θ (B, n); a, b (B, k); the int8 codes (D, n, k), batch element ``bidx``
#: reading data set ``bidx / C``; the partial sums (P, B, k); the draw stores
#: (B, n_keep, ·), written at draw slot ``keep`` when ``keep >= 0``.  Random numbers: the
#: counter (iteration, stream, index, ·) under the batch element's two-word key, with
#: streams 0 (Z), 1 (θ), 2 and 3 (a and b), and stream + (t << 8) for the t-th retry of a
#: rejection step.
_KERNELS: dict[str, tuple[str, str]] = {
    "privirt_gibbs_z": (
        "const double* __restrict__ theta, const double* __restrict__ a, "
        "const double* __restrict__ b, const signed char* __restrict__ codes, "
        "const unsigned int* __restrict__ keys, unsigned int it, int n_persons, "
        "int n_items, int C, int D, double* __restrict__ z",
        r"""
        const long long nk = (long long)n_persons * n_items;
        const long long bidx = i / nk;
        const long long cell = i - bidx * nk;
        const long long row = cell / n_items, col = cell - row * n_items;
        const long long d = (D == 1) ? 0 : bidx / C;
        const signed char y = codes[d * nk + cell];
        if (y < 0) { z[i] = 0.0; }
        else {
            const double mu = theta[bidx * n_persons + row] * a[bidx * n_items + col]
                              - b[bidx * n_items + col];
            const double s = (y == 1) ? 1.0 : -1.0;
            const double x = std_tn_lower(-s * mu, it, 0u, (unsigned int)cell,
                                          (unsigned int)(cell >> 32),
                                          keys[2 * bidx], keys[2 * bidx + 1]);
            z[i] = mu + s * x;
        }
        """,
    ),
    "privirt_gibbs_theta": (
        "const double* __restrict__ z, const double* __restrict__ a, "
        "const double* __restrict__ b, const signed char* __restrict__ codes, "
        "const unsigned int* __restrict__ keys, unsigned int it, int n_persons, "
        "int n_items, int C, int D, int missing, int keep, int n_keep, "
        "double* __restrict__ theta, double* __restrict__ store",
        r"""
        const long long bidx = i / n_persons;
        const long long person = i - bidx * n_persons;
        const long long d = (D == 1) ? 0 : bidx / C;
        const long long row = i * n_items;  /* Z is 0 where missing */
        const long long crow = (d * n_persons + person) * n_items;
        const long long item0 = bidx * n_items;
        double za = 0.0, aa = 0.0, ab = 0.0;
        for (int j = 0; j < n_items; ++j) {
            const double aj = a[item0 + j];
            za += z[row + j] * aj;
            if (missing && codes[crow + j] < 0) continue;
            aa += aj * aj;
            ab += aj * b[item0 + j];
        }
        const double p = 1.0 + aa;
        double u[2];
        uniform2(it, 1u, (unsigned int)person, 0u, keys[2 * bidx], keys[2 * bidx + 1], u);
        const double t = (za + ab) / p + normcdfinv(u[0]) / sqrt(p);
        theta[i] = t;
        if (keep >= 0) store[(bidx * n_keep + keep) * n_persons + person] = t;
        """,
    ),
    "privirt_gibbs_item_sums": (
        "const double* __restrict__ z, const double* __restrict__ theta, "
        "const signed char* __restrict__ codes, int n_persons, int n_items, int C, int D, "
        "int batch, int missing, int rows, double* __restrict__ s_tz, "
        "double* __restrict__ s_z, double* __restrict__ s_tt, double* __restrict__ s_t, "
        "double* __restrict__ s_1",
        r"""
        const long long bk = (long long)batch * n_items;
        const long long chunk = i / bk;
        const long long bidx = (i - chunk * bk) / n_items;
        const long long j = i - chunk * bk - bidx * n_items;
        const long long d = (D == 1) ? 0 : bidx / C;
        const long long r0 = chunk * rows;
        const long long r1 = (r0 + rows < n_persons) ? r0 + rows : n_persons;
        double tz = 0.0, sz = 0.0, tt = 0.0, st = 0.0, s1 = 0.0;
        for (long long r = r0; r < r1; ++r) {
            const double zz = z[(bidx * n_persons + r) * n_items + j];
            const double th = theta[bidx * n_persons + r];
            tz += th * zz;
            sz += zz;
            if (missing && codes[(d * n_persons + r) * n_items + j] < 0) continue;
            tt += th * th;
            st += th;
            s1 += 1.0;
        }
        s_tz[i] = tz; s_z[i] = sz; s_tt[i] = tt; s_t[i] = st; s_1[i] = s1;
        """,
    ),
    "privirt_gibbs_item": (
        "const double* __restrict__ s_tz, const double* __restrict__ s_z, "
        "const double* __restrict__ s_tt, const double* __restrict__ s_t, "
        "const double* __restrict__ s_1, int chunks, int batch, double pa_prec, "
        "double pa_lin, double pb_prec, double pb_lin, const unsigned int* __restrict__ keys, "
        "unsigned int it, int n_items, int keep, int n_keep, double* __restrict__ a, "
        "double* __restrict__ b, double* __restrict__ store_a, double* __restrict__ store_b",
        r"""
        const long long bk = (long long)batch * n_items;
        const long long bidx = i / n_items;
        const long long item = i - bidx * n_items;
        double tz = 0.0, sz = 0.0, tt = 0.0, st = 0.0, s1 = 0.0;
        for (int c = 0; c < chunks; ++c) {
            const long long q = c * bk + i;
            tz += s_tz[q]; sz += s_z[q]; tt += s_tt[q]; st += s_t[q]; s1 += s_1[q];
        }
        /* x_i = (theta_i, -1): P = [[sum th^2, -sum th], [-sum th, sum 1]] + prior,
           r = [sum th Z, -sum Z] + prior precision x prior mean */
        const double paa = tt + pa_prec, pab = -st, pbb = s1 + pb_prec;
        const double ra = tz + pa_lin, rb = -sz + pb_lin;
        const unsigned int k0 = keys[2 * bidx], k1 = keys[2 * bidx + 1];
        const double det = paa * pbb - pab * pab;
        const double ma = (pbb * ra - pab * rb) / det;
        const double mb = (paa * rb - pab * ra) / det;
        const double sda = sqrt(pbb / det);
        double av = ma + sda * std_tn_lower(-ma / sda, it, 2u, (unsigned int)item, 0u, k0, k1);
        av = fmax(av, 2.2250738585072014e-308);
        double u[2];
        uniform2(it, 3u, (unsigned int)item, 0u, k0, k1, u);
        const double bv = mb - (pab / pbb) * (av - ma) + normcdfinv(u[0]) / sqrt(pbb);
        a[i] = av;
        b[i] = bv;
        if (keep >= 0) {
            const long long o = (bidx * n_keep + keep) * n_items + item;
            store_a[o] = av;
            store_b[o] = bv;
        }
        """,
    ),
}

#: Threads per block of every kernel launch.
_BLOCK = 128


def _cuda_source() -> str:
    """The CUDA C++ source of all kernels, as compiled by :func:`_gpu_kernels`."""
    parts = [_CUDA_PREAMBLE]
    for name, (params, body) in _KERNELS.items():
        parts.append(
            f'extern "C" __global__ void {name}({params}, long long size) {{\n'
            "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "         i < size; i += (long long)blockDim.x * gridDim.x) {\n"
            f"{body}\n"
            "    }\n"
            "}\n"
        )
    return "\n".join(parts)


class _Launcher:
    """Calls one compiled kernel as ``kernel(size, *args)`` over indices [0, size)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, size: int, *args: Any) -> None:
        grid = max(1, min(-(-size // _BLOCK), 1 << 20))  # the grid-stride loop does the rest
        self.fn((grid,), (_BLOCK,), (*args, np.int64(size)))


@lru_cache(maxsize=1)
def _gpu_kernels() -> tuple[_Launcher, ...]:  # pragma: no cover - needs a CUDA GPU
    import cupy as cp

    module = cp.RawModule(code=_cuda_source(), options=("--std=c++17",))
    return tuple(_Launcher(module.get_function(name)) for name in _KERNELS)


# ---------------------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------------------
def _run(
    resps: Sequence[Responses],
    *,
    n_iter: int,
    burn_in: int,
    thin: int,
    n_chains: int,
    n_keep: int,
    priors: dict,
    init: dict[str, np.ndarray],
    device: str,
    seqs: Sequence[np.random.SeedSequence],
    progress: bool,
    keep_draws: bool,
    label: str,
) -> list[Posterior]:
    dev = resolve_device(device)
    xp = get_xp(dev)
    codes = np.stack([r.codes for r in resps])  # (D, n, k)
    D, n, k = codes.shape
    inits, seeds = [], []
    for d, ss in enumerate(seqs):
        for c in range(n_chains):
            init_rng = np.random.Generator(np.random.Philox(_child(ss, c, 0)))
            start = _default_init(codes[d], init_rng, jitter=n_chains > 1)
            start.update(init)
            inits.append(start)
            seeds.append(_child(ss, c, 1))
    batch = _Batch(codes, n_chains, priors, inits, seeds, dev)
    B = batch.B
    sizes = {"a": k, "b": k, "theta": n}
    if keep_draws:
        store = {p: xp.empty((B, n_keep, s)) for p, s in sizes.items()}
    else:
        stream = {p: StreamingSummary(B, s, n_keep, xp=xp) for p, s in sizes.items()}
    bar = ProgressBar(n_iter, label, enabled=progress)
    t0 = time.perf_counter()
    kept = 0
    for it in range(1, n_iter + 1):
        if it > burn_in and (it - burn_in - 1) % thin == 0:
            if keep_draws:
                batch.step(store, kept)  # the step writes draw `kept` itself
            else:
                batch.step()
                for p, v in (("a", batch.a), ("b", batch.b), ("theta", batch.theta)):
                    stream[p].update(v)
            kept += 1
        else:
            batch.step()
        bar.update(it)
    if dev == "gpu":
        xp.cuda.Device().synchronize()
    seconds = time.perf_counter() - t0
    info_common = {
        "n_iter": n_iter, "burn_in": burn_in, "thin": thin, "n_chains": n_chains,
        "n_draws": n_keep, "device": dev,
        "priors": {"a": priors["a"] or "flat on a > 0", "b": priors["b"] or "flat"},
        "seconds": seconds, "batch_size": B,
        "iterations_per_second": n_iter / seconds if seconds > 0 else float("inf"),
    }
    out = []
    for d, resp in enumerate(resps):
        sl = slice(d * n_chains, (d + 1) * n_chains)
        labels = {"a": resp.items.copy(), "b": resp.items.copy(), "theta": resp.persons.copy()}
        info = dict(info_common, seed=_describe_seed(seqs[d]), n_persons=n, n_items=k,
                    has_missing=resp.has_missing)
        if keep_draws:
            draws = {p: to_numpy(store[p][sl]) for p in sizes}
            out.append(Posterior(draws=draws, labels=labels, sampler=SAMPLER, info=info))
        else:
            parts = {p: stream[p].to_host().select_chains(sl) for p in sizes}
            out.append(Posterior(draws=None, labels=labels, sampler=SAMPLER, streaming=parts,
                                 info=info))
    return out


def gibbs_2pno(
    X: ResponsesLike,
    *,
    n_iter: int = 10000,
    burn_in: int = 5000,
    thin: int = 1,
    n_chains: int = 1,
    priors: Mapping[str, Any] | None = None,
    init: Mapping[str, Any] | None = None,
    device: str = "auto",
    seed: int | np.random.SeedSequence | None = None,
    progress: bool = True,
    keep_draws: bool = True,
) -> Posterior:
    """Gibbs sampler for the two-parameter normal ogive model (Sheng, Welling & Zhu 2014).

    Samples the posterior of P(y_ij = 1) = Φ(a_j θ_i − b_j) with θ_i ~ N(0, 1) by Albert's
    (1992) data augmentation; see the module documentation and ``docs/gibbs.md`` for the
    exact conditionals.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses with missing cells (anything
        :func:`privirt.as_responses` accepts).  Missing cells are skipped: they contribute
        to no sum.  Persons or items without any response are dropped (with a warning).
    n_iter : int
        Total number of iterations, *including* the burn-in (the paper's convention:
        10,000 iterations of which 5,000 burn-in).
    burn_in : int
        Initial iterations discarded; must be smaller than ``n_iter``.
    thin : int
        Keep every ``thin``-th iteration after the burn-in.  Each chain yields
        ``ceil((n_iter − burn_in) / thin)`` draws.
    n_chains : int
        Independent chains, started from over-dispersed data-based values (when more than
        one) and advanced together in one batch.
    priors : dict, optional
        ``{"a": (mean, var)}``: N(mean, var) prior on a_j truncated to a_j > 0 (default:
        flat on a_j > 0, as in the paper); ``{"b": (mean, var)}``: N(mean, var) prior on b_j
        (default: flat, as in the paper).  With a flat prior on b, an item answered all
        correct or all incorrect has an improper posterior (a warning says so).  The flat
        prior on a is improper in the far tail (the likelihood stays positive as a → ∞):
        steep items in small samples can drift to huge slopes; ``{"a": (1.0, 1.0)}``
        avoids that (see ``docs/gibbs.md``).
    init : dict, optional
        Starting values ``{"theta": (n,), "a": (k,), "b": (k,)}`` (any subset; scalars are
        broadcast); the others start from the data (b from item p-values, a = 1, θ from
        standardised sum scores), jittered per chain when ``n_chains > 1``.
    device : {"auto", "cpu", "gpu"}
        Where to run; ``"auto"`` uses a CUDA GPU when cupy sees one.
    seed : int or numpy.random.SeedSequence, optional
        Makes the run reproducible (on a given device).  Chain c uses the streams
        ``SeedSequence(seed).spawn_key + (c, 0)`` (starting values) and ``+ (c, 1)`` (the
        sampler; numpy's Philox on CPU, a Philox4x32-10 counter-based stream on GPU).
    progress : bool
        Draw a progress bar on stderr.
    keep_draws : bool
        Keep every draw (``posterior.draws``, (chain, draw, index)); ``False`` keeps
        streaming summaries only, in memory independent of the number of iterations.

    Returns
    -------
    Posterior
        Blocks ``"a"``, ``"b"`` (labelled by item) and ``"theta"`` (by person);
        ``.summary(param)`` gives mean, sd, quantiles, batch-means MCSE, R-hat and ESS.

    Raises
    ------
    ValueError
        Bad responses, schedule (``burn_in >= n_iter``, non-positive counts), priors, init,
        seed or ``keep_draws`` (not a bool).
    ImportError
        ``device="gpu"`` without cupy.

    Examples
    --------
    >>> import privirt
    >>> X, theta, a, b = privirt.simulate_2pno(300, 8, seed=1)
    >>> post = privirt.gibbs_2pno(X, n_iter=400, burn_in=200, seed=2, progress=False)
    >>> post.summary("a").columns.tolist()
    ['mean', 'sd', 'q2.5', 'q50', 'q97.5', 'mcse', 'rhat', 'ess']
    """
    n_iter, burn_in, thin, n_chains, n_keep = _check_schedule(n_iter, burn_in, thin, n_chains)
    keep_draws = _check_keep_draws(keep_draws)
    pri = _check_priors(priors)
    resolve_device(device)
    ss = _seed_sequence(seed)
    resp = as_responses(X)
    start = _check_init(init, resp.n_persons, resp.n_items)
    _warn_improper(resp, pri)
    return _run(
        [resp], n_iter=n_iter, burn_in=burn_in, thin=thin, n_chains=n_chains, n_keep=n_keep,
        priors=pri, init=start, device=device, seqs=[ss], progress=bool(progress),
        keep_draws=bool(keep_draws), label="gibbs 2pno",
    )[0]


def gibbs_2pno_replicate(
    datasets: Sequence[ResponsesLike],
    *,
    n_iter: int = 10000,
    burn_in: int = 5000,
    thin: int = 1,
    n_chains: int = 1,
    priors: Mapping[str, Any] | None = None,
    device: str = "auto",
    seed: int | np.random.SeedSequence | None = None,
    progress: bool = True,
    keep_draws: bool = False,
) -> list[Posterior]:
    """Run the 2PNO Gibbs sampler on R same-shape data sets in one batch.

    This is the Monte Carlo study use case of Sheng, Welling & Zhu (2014): all R × n_chains
    chains advance together as one (R·n_chains, persons, items) array, on CPU or GPU.

    Parameters
    ----------
    datasets : sequence of ResponsesLike
        R response matrices of the same shape (persons × items).  Persons without a response
        are kept (their θ is sampled from the prior); an item without any response is an
        error.
    n_iter, burn_in, thin, n_chains, priors, device, progress
        As in :func:`gibbs_2pno`.
    seed : int or numpy.random.SeedSequence, optional
        Data set r uses the child ``SeedSequence(entropy, spawn_key=spawn_key + (r,))`` of
        the seed's sequence — ``SeedSequence(seed).spawn(R)[r]`` for an int seed or a
        sequence that has not spawned children yet — and gives the same draws as
        ``gibbs_2pno(datasets[r], seed=that child)`` (on the CPU up to floating-point
        summation order, on the GPU exactly).
    keep_draws : bool
        Default False: streaming summaries (memory independent of ``n_iter``).

    Returns
    -------
    list of Posterior
        One per data set, in order.
    """
    n_iter, burn_in, thin, n_chains, n_keep = _check_schedule(n_iter, burn_in, thin, n_chains)
    keep_draws = _check_keep_draws(keep_draws)
    pri = _check_priors(priors)
    resolve_device(device)
    ss = _seed_sequence(seed)
    if isinstance(datasets, (str, bytes, np.ndarray, pd.DataFrame)) and not (
        isinstance(datasets, np.ndarray) and datasets.ndim == 3
    ):
        raise ValueError(
            "datasets must be a sequence of response matrices (or a 3-D array R × n × k)"
        )
    resps = [as_responses(d, empty="keep") for d in datasets]
    if not resps:
        raise ValueError("datasets is empty; pass at least one response matrix")
    shape = resps[0].shape
    for r, resp in enumerate(resps):
        if resp.shape != shape:
            raise ValueError(
                f"all data sets must have the same shape; data set 0 is {shape}, "
                f"data set {r} is {resp.shape}"
            )
        empty_items = ~(resp.codes >= 0).any(axis=0)
        if empty_items.any():
            raise ValueError(
                f"data set {r}: item(s) {list(resp.items[empty_items][:5])} have no observed "
                "response; remove them from every data set"
            )
        _warn_improper(resp, pri, where=f"data set {r}: ")
    seqs = [_child(ss, r) for r in range(len(resps))]
    return _run(
        resps, n_iter=n_iter, burn_in=burn_in, thin=thin, n_chains=n_chains, n_keep=n_keep,
        priors=pri, init={}, device=device, seqs=seqs, progress=bool(progress),
        keep_draws=bool(keep_draws), label=f"gibbs 2pno ×{len(resps)}",
    )

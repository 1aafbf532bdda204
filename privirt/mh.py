"""Bayesian two-parameter logistic (2PL) model by Metropolis–Hastings, with missing data.

Model
-----
For person (voter) ``i`` and item (vote) ``j``

    P(y_ij = 1) = logistic(a_j θ_i − b_j),

with slope ``a_j`` (discrimination, "polarity" of a vote), intercept ``b_j`` (the
difficulty or cut point, in the same parametrisation as the 2PNO Gibbs sampler) and
ability / ideal point ``θ_i``.  Priors are independent normals

    θ_i ~ N(μ_θ, σ²_θ),   a_j ~ N(a0, A0),   b_j ~ N(b0, B0)   (mean, variance),

defaulting to θ ~ N(0, 1), a ~ N(0, 100), b ~ N(1, 100): the defaults of ``MH_irt`` in the
R/Rcpp tutorial this sampler follows, whose ``A0``/``B0`` are standard deviations (R's
``dnorm`` takes an sd) of 10 — here written as variances.  (The tutorial calls the intercept
α and the slope β; its ``a0, A0`` belong to the intercept and ``b0, B0`` to the slope.)
The slope is *not* constrained positive: in an ideal-point model a vote may discriminate in
either direction.  Missing responses (abstentions, absences) drop out of the likelihood.

Sampler
-------
Each iteration updates three blocks in turn — θ, then a, then b — by random-walk
Metropolis with a normal proposal per parameter.  Given the other two blocks, the
conditionals of the persons' θ_i are independent (and so are the items' a_j, and b_j), so
one vectorised proposal moves all persons (all items) at once and each is accepted or
rejected on its own log acceptance ratio.  The likelihood work is organised so that each
block costs one pass of ``softplus`` over the persons × items matrix:

* ``F = softplus(w·η)`` of the current state is kept, with ``w = 1 − 2y`` for an observed
  cell and 0 for a missing one: minus the cell's log-likelihood (a missing cell holds the
  constant log 2, which cancels).  The block's candidate ``F'`` is computed once, the row
  (θ) or column (a, b) sums of ``F − F'`` give the likelihood ratios, and accepted
  rows/columns are copied into ``F``.
* The random numbers are drawn ahead for up to 256 iterations, and everything in the
  accept test that does not depend on the state (the scaled proposals, the prior terms'
  constant parts, the uniforms) is computed once per segment of iterations, so an
  iteration is about 40 array calls — what counts for small problems.
* Several chains run as a leading array axis.

After the three blocks, two cheap moves along the directions in which the likelihood is
constant — a scale move (θ, a) -> (cθ, a/c) and a shift move (θ, b) -> (θ + d, b + a d) —
are proposed per chain and accepted on the priors and the Jacobian alone
(``ridge_moves=True``, the default; ``False`` leaves the tutorial's three-block scheme).

See ``docs/mh.md`` for the derivation, the adaptation rule and identification.
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ._backend import get_xp, resolve_device, to_numpy
from ._progress import ProgressBar
from .posterior import Posterior
from .responses import ResponsesLike, as_responses

__all__ = ["mh_2pl", "DEFAULT_PRIORS", "DEFAULT_PROPOSAL_SD", "TARGET_ACCEPTANCE"]

#: Prior (mean, variance) per block; the tutorial's ``MH_irt`` defaults as variances.
DEFAULT_PRIORS: dict[str, tuple[float, float]] = {
    "theta": (0.0, 1.0),
    "a": (0.0, 100.0),
    "b": (1.0, 100.0),
}
#: Proposal standard deviations (θ, a, b): the tutorial's ``MH_irt`` defaults.
DEFAULT_PROPOSAL_SD: tuple[float, float, float] = (0.4, 0.4, 0.4)
#: Acceptance rate the adaptation aims at (optimal one-dimensional random walk).
TARGET_ACCEPTANCE = 0.44
#: Acceptance band the adaptation is meant to reach.
ACCEPTANCE_BAND = (0.2, 0.5)

_BLOCKS = ("theta", "a", "b")
_ADAPT_WINDOW = 50
_SD_LIMITS = (1e-4, 1e2)
_RNG_BATCH = 256  # iterations of random numbers per draw call
_RNG_BUDGET = 2**20  # at most this many numbers per array and draw call
_SPLIT_SUMS_CELLS = 8192  # from this many cells, reduce F and F' separately
_RIDGE_SD0 = (0.05, 0.05)  # starting sds of the ridge moves' log-scale and shift


# ---------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------
def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _check_priors(priors: Mapping[str, Any] | None) -> dict[str, tuple[float, float]]:
    out = dict(DEFAULT_PRIORS)
    if priors is None:
        return out
    if not isinstance(priors, Mapping):
        raise ValueError(
            'priors must be a dict like {"theta": (0, 1), "a": (0, 100), "b": (1, 100)} '
            f"of (mean, variance) pairs, got {type(priors).__name__}"
        )
    for key, value in priors.items():
        if key not in _BLOCKS:
            raise ValueError(f"unknown prior block {key!r}; use 'theta', 'a' or 'b'")
        try:
            mean, var = (float(v) for v in value)
        except (TypeError, ValueError):
            raise ValueError(
                f"priors[{key!r}] must be a (mean, variance) pair of numbers, got {value!r}"
            ) from None
        if not (math.isfinite(mean) and math.isfinite(var)) or var <= 0:
            raise ValueError(
                f"priors[{key!r}] = ({mean}, {var}): the mean must be finite and the variance "
                "finite and positive"
            )
        out[key] = (mean, var)
    return out


def _check_proposal_sd(proposal_sd: Any) -> dict[str, float]:
    if isinstance(proposal_sd, Mapping):
        unknown = set(proposal_sd) - set(_BLOCKS)
        if unknown:
            raise ValueError(f"unknown proposal_sd block(s) {sorted(unknown)}; use theta, a, b")
        values = [proposal_sd.get(k, d) for k, d in zip(_BLOCKS, DEFAULT_PROPOSAL_SD)]
    elif np.isscalar(proposal_sd):
        values = [proposal_sd] * 3
    else:
        try:
            values = list(proposal_sd)
        except TypeError:
            values = []
        if len(values) != 3:
            raise ValueError(
                "proposal_sd must be (sd_theta, sd_a, sd_b), a dict or one number, "
                f"got {proposal_sd!r}"
            )
    out = {}
    for key, v in zip(_BLOCKS, values):
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"proposal_sd for {key} must be a number, got {v!r}") from None
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"proposal_sd for {key} must be finite and positive, got {v}")
        out[key] = v
    return out


def _match_label(index: pd.Index, key: Any) -> int:
    """Position of ``key`` in ``index``; also matches by ``str`` (labels typed on a CLI)."""
    if key in index:
        loc = index.get_loc(key)
        if isinstance(loc, (int, np.integer)):
            return int(loc)
    as_str = [str(x) for x in index]
    hits = [i for i, s in enumerate(as_str) if s == str(key)]
    if len(hits) == 1:
        return hits[0]
    shown = ", ".join(as_str[:8]) + (", ..." if len(as_str) > 8 else "")
    if len(hits) > 1:
        raise ValueError(f"anchor label {key!r} matches several persons")
    raise ValueError(f"unknown anchor label {key!r}; persons are: {shown}")


def _check_anchors(anchors: Mapping[Any, Any] | None, persons: pd.Index) -> list[tuple[int, float]]:
    if anchors is None:
        return []
    if not isinstance(anchors, Mapping):
        raise ValueError(
            'anchors must be a dict of person label -> sign or value, e.g. {"Ginsburg": -1, '
            f'"Scalia": 1}}, got {type(anchors).__name__}'
        )
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for key, value in anchors.items():
        pos = _match_label(persons, key)
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"anchor value for {key!r} must be a number, got {value!r}") from None
        if not math.isfinite(v) or v == 0:
            raise ValueError(
                f"anchor value for {key!r} must be a non-zero finite number (its sign is the "
                f"constraint, e.g. -1 or +1), got {value!r}"
            )
        if pos in seen:
            raise ValueError(f"person {key!r} is anchored twice")
        seen.add(pos)
        out.append((pos, v))
    return out


# ---------------------------------------------------------------------------------------
# initial values
# ---------------------------------------------------------------------------------------
def _default_init(y: np.ndarray, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Data-driven start: θ from the first principal component of the (mean-imputed,
    column-centred) response matrix, a from the item–score correlations, b from the
    item means.  A cheap, common start for ideal-point models."""
    n, m = y.shape
    cnt = obs.sum(axis=0)
    p = np.where(cnt > 0, y.sum(axis=0) / np.maximum(cnt, 1), 0.5)
    filled = np.where(obs, y, p[None, :]) - p[None, :]
    theta = np.zeros(n)
    if n > 1 and m > 0 and np.any(filled):
        u, s, _ = np.linalg.svd(filled, full_matrices=False)
        t = u[:, 0] * s[0]
        sd = t.std()
        if sd > 0:
            theta = (t - t.mean()) / sd
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = (filled * theta[:, None]).mean(axis=0)
        colsd = filled.std(axis=0)
        corr = np.where(colsd > 0, cov / colsd, 0.0)
    a = np.clip(2.0 * np.nan_to_num(corr), -2.0, 2.0)
    pc = np.clip(p, 0.05, 0.95)
    b = -np.log(pc / (1.0 - pc))
    return theta, a, b


def _user_init(value: Any, name: str, size: int, n_chains: int) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"init[{name!r}] must be a number or an array of numbers, got {value!r}"
        ) from None
    if arr.ndim == 0:
        arr = np.full(size, float(arr))
    if arr.shape == (size,):
        arr = np.broadcast_to(arr, (n_chains, size)).copy()
    if arr.shape != (n_chains, size):
        raise ValueError(
            f"init[{name!r}] must be a number, an array of {size} values or "
            f"({n_chains}, {size}) (one row per chain), got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"init[{name!r}] must be finite")
    return arr


def _initial_state(
    init: Any,
    y: np.ndarray,
    obs: np.ndarray,
    n_chains: int,
    anchors: list[tuple[int, float]],
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    n, m = y.shape
    if init is None or (isinstance(init, str) and init == "pca"):
        t0, a0, b0 = _default_init(y, obs)
        # orient the start as the draws will be reported: anchors on their sides, or
        # (without anchors) a non-negative mean slope
        if anchors:
            flip = sum(math.copysign(1.0, v) * t0[i] for i, v in anchors) < 0
        else:
            flip = a0.mean() < 0
        if flip:
            t0, a0 = -t0, -a0
        jitter = 0.25 if n_chains > 1 else 0.0
        state = {
            "theta": t0[None, :] + jitter * rng.standard_normal((n_chains, n)),
            "a": a0[None, :] + jitter * rng.standard_normal((n_chains, m)),
            "b": b0[None, :] + jitter * rng.standard_normal((n_chains, m)),
        }
    elif isinstance(init, str) and init == "tutorial":
        state = {
            "theta": np.full((n_chains, n), 0.1),
            "a": np.full((n_chains, m), 1.0),
            "b": np.zeros((n_chains, m)),
        }
    elif isinstance(init, Mapping):
        unknown = set(init) - set(_BLOCKS)
        if unknown:
            raise ValueError(f"unknown init block(s) {sorted(unknown)}; use theta, a, b")
        t0, a0, b0 = _default_init(y, obs)
        defaults = {"theta": t0, "a": a0, "b": b0}
        sizes = {"theta": n, "a": m, "b": m}
        state = {
            k: _user_init(init[k], k, sizes[k], n_chains)
            if k in init
            else np.broadcast_to(defaults[k], (n_chains, sizes[k])).copy()
            for k in _BLOCKS
        }
    else:
        raise ValueError(
            "init must be None/'pca' (data-driven start), 'tutorial' (θ=0.1, a=1, b=0) or a "
            f'dict like {{"theta": ..., "a": ..., "b": ...}}, got {init!r}'
        )
    if anchors:
        # reflect a chain's start (θ, a) -> (-θ, -a) when its anchored persons sit on the
        # wrong sides on balance; then anchored persons start at their anchor values
        idx = [i for i, _ in anchors]
        sgn = np.array([math.copysign(1.0, v) for _, v in anchors])
        wrong = (state["theta"][:, idx] * sgn).sum(axis=1) < 0
        state["theta"][wrong] *= -1.0
        state["a"][wrong] *= -1.0
        for i, v in anchors:
            state["theta"][:, i] = v
    return state


# ---------------------------------------------------------------------------------------
# the sampler
# ---------------------------------------------------------------------------------------
def mh_2pl(
    X: ResponsesLike,
    *,
    n_iter: int = 10000,
    warmup: int = 5000,
    thin: int = 1,
    proposal_sd: Sequence[float] | Mapping[str, float] | float = DEFAULT_PROPOSAL_SD,
    priors: Mapping[str, Sequence[float]] | None = None,
    init: Mapping[str, Any] | str | None = None,
    anchors: Mapping[Any, float] | None = None,
    adapt: bool = True,
    n_chains: int = 1,
    seed: int | None = None,
    progress: bool = True,
    device: str = "auto",
    ridge_moves: bool = True,
) -> Posterior:
    """Sample the posterior of the Bayesian 2PL model by blockwise random-walk Metropolis.

    Parameters
    ----------
    X : ResponsesLike
        Persons (voters) × items (votes) 0/1 matrix with missing entries (NaN), or anything
        :func:`privirt.as_responses` accepts.  Labels are kept in the result.
    n_iter : int
        Total iterations per chain, *including* the warmup (as ``iter`` in Stan).  The
        tutorial's ``iter = 10000, warmup = 5000`` is ``n_iter=15000, warmup=5000`` here.
    warmup : int
        Iterations discarded at the start (and, with ``adapt=True``, used to tune the
        proposal scales).  Must be smaller than ``n_iter``.
    thin : int
        Keep every ``thin``-th post-warmup iteration: ``(n_iter - warmup) // thin`` draws.
    proposal_sd : (float, float, float) or dict or float
        Starting standard deviations of the normal random-walk proposals for (θ, a, b)
        (tutorial defaults 0.4 each).  With ``adapt=False`` they stay fixed.
    priors : dict, optional
        ``{"theta": (mean, variance), "a": (a0, A0), "b": (b0, B0)}``; missing keys keep
        the defaults θ ~ N(0, 1), a ~ N(0, 100), b ~ N(1, 100).
    init : None, "pca", "tutorial" or dict
        Starting values.  ``None``/``"pca"``: θ from the first principal component of
        the responses, a from item–score correlations, b from item means (jittered per
        chain when ``n_chains > 1``); ``"tutorial"``: θ = 0.1, a = 1, b = 0; or a dict of
        numbers / arrays (length n, or one row per chain).
    anchors : dict, optional
        Person label -> non-zero number, e.g. ``{"Ginsburg": -1, "Scalia": +1}``.  Each
        anchored θ is constrained to the sign of its value (a truncated prior: proposals
        on the wrong side are rejected) and starts at that value.  Draws are then oriented
        so that the anchors have their signs.
    adapt : bool
        Tune each parameter's proposal sd during warmup, every 50 iterations, toward an
        acceptance rate of 0.44; frozen afterwards, so the kept draws come from a
        fixed-kernel Metropolis chain.  ``False``: plain fixed-scale Metropolis.
    n_chains : int
        Independent chains, run together as a leading array axis.
    seed : int, optional
        Seed of the random generator; results are reproducible for a given
        (seed, n_chains, device).
    progress : bool
        Print a progress line to stderr.
    device : {"auto", "cpu", "gpu"}
        Where the arrays live (the GPU path needs cupy).
    ridge_moves : bool
        After the three blocks, also propose (per chain) the two moves along which the
        likelihood is constant — a scale move (θ, a) -> (cθ, a/c) and a shift move
        (θ, b) -> (θ + d, b + a d) — accepted on the priors and the Jacobian alone.  They
        cost O(n + m) and speed up mixing along the 2PL's weakly identified scale and
        location; ``False`` gives the tutorial's algorithm exactly.  (An addition to the
        issue's signature.)

    Returns
    -------
    Posterior
        Draws ``theta`` (chain, draw, person), ``a`` and ``b`` (chain, draw, item), with
        ``acceptance`` (per block, (chain, index) acceptance rates over the post-warmup
        iterations) and ``info`` (settings and priors, final proposal sds
        ``proposal_sd``, ``sign_flips`` per chain, ``ridge_acceptance`` and ``ridge_sd`` of
        the scale/shift moves (chain, 2), ``time_s``).

    Raises
    ------
    ValueError
        Bad responses, settings, priors, proposal sds, initial values or anchors (an
        unknown anchor label, a zero anchor).
    """
    resp = as_responses(X)
    n_iter = _check_int("n_iter", n_iter, 1)
    warmup = _check_int("warmup", warmup, 0)
    thin = _check_int("thin", thin, 1)
    n_chains = _check_int("n_chains", n_chains, 1)
    if warmup >= n_iter:
        raise ValueError(
            f"warmup ({warmup}) must be smaller than n_iter ({n_iter}); n_iter counts all "
            "iterations including the warmup"
        )
    n_keep = (n_iter - warmup) // thin
    if n_keep < 1:
        raise ValueError(
            f"thin={thin} keeps no draw from {n_iter - warmup} post-warmup iterations; "
            "lower thin or raise n_iter"
        )
    if not isinstance(adapt, (bool, np.bool_)):
        raise ValueError(f"adapt must be True or False, got {adapt!r}")
    if not isinstance(ridge_moves, (bool, np.bool_)):
        raise ValueError(f"ridge_moves must be True or False, got {ridge_moves!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise ValueError(f"seed must be an integer or None, got {seed!r}")
    if seed is not None and seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    pri = _check_priors(priors)
    sd0 = _check_proposal_sd(proposal_sd)
    anc = _check_anchors(anchors, resp.persons)
    dev = resolve_device(device)
    xp = get_xp(dev)

    codes = resp.codes
    obs = codes >= 0
    y = (codes == 1).astype(np.float64)
    n, m = y.shape
    host_rng = np.random.default_rng(seed)
    state = _initial_state(init, y, obs, n_chains, anc, host_rng)

    start = time.perf_counter()
    result = _run(
        xp, y, obs, state, pri, sd0, anc,
        n_iter=n_iter, warmup=warmup, thin=thin, n_keep=n_keep, adapt=bool(adapt),
        seed=int(host_rng.integers(2**63 - 1)), progress=progress, gpu=(dev == "gpu"),
        ridge_moves=bool(ridge_moves),
    )
    elapsed = time.perf_counter() - start
    draws = {k: to_numpy(v) for k, v in result["draws"].items()}
    # Reflecting whole chains maps the posterior to itself only when the priors of θ and a
    # are symmetric about 0; otherwise the mirror image is a different (less probable)
    # distribution and a reflected chain would no longer sample the posterior.
    mirror_symmetric = pri["theta"][0] == 0.0 and pri["a"][0] == 0.0
    flips = _normalise_signs(draws, anc) if mirror_symmetric else [0] * n_chains
    acceptance = {k: to_numpy(v) for k, v in result["acceptance"].items()}
    info = {
        "n_iter": n_iter,
        "warmup": warmup,
        "thin": thin,
        "n_chains": n_chains,
        "seed": seed,
        "device": dev,
        "adapt": bool(adapt),
        "priors": pri,
        "proposal_sd_initial": sd0,
        "proposal_sd": {k: to_numpy(v) for k, v in result["sd"].items()},
        "anchors": {str(resp.persons[i]): v for i, v in anc},
        "sign_flips": flips,
        "sign_normalisation": mirror_symmetric,
        "ridge_moves": bool(ridge_moves),
        "ridge_acceptance": None if result["ridge_acceptance"] is None
        else to_numpy(result["ridge_acceptance"]),
        "ridge_sd": None if result["ridge_sd"] is None else to_numpy(result["ridge_sd"]),
        "time_s": elapsed,
        "n_persons": n,
        "n_items": m,
        "observed_fraction": resp.observed_fraction,
    }
    return Posterior(
        draws=draws,
        labels={"theta": resp.persons.copy(), "a": resp.items.copy(), "b": resp.items.copy()},
        sampler="mh_2pl",
        acceptance=acceptance,
        info=info,
    )


def _softplus_fast(xp: Any, E: Any) -> None:
    """E <- log1p(exp(E)) in place: two vectorised transcendental passes.

    Accurate to rounding for E ≤ 709; above, exp overflows to inf, which the caller
    detects (numpy's overflow flag) and then recomputes with :func:`_softplus_stable`.
    On the GPU the sampler always uses the stable form instead, since checking for
    overflow would wait on the device.  (The sampler makes the same two calls with positional
    outputs in ``neg_loglik``.)
    """
    xp.exp(E, out=E)  # the caller routes numpy's overflow report to a flag
    xp.log1p(E, out=E)


def _softplus_stable(xp: Any, E: Any) -> None:
    """E <- max(E, 0) + log1p(exp(-|E|)) in place (no overflow for any finite E)."""
    pos = xp.maximum(E, 0.0)
    xp.abs(E, out=E)
    xp.negative(E, out=E)
    xp.exp(E, out=E)
    xp.log1p(E, out=E)
    E += pos


class _Rng:
    """Random numbers drawn ahead of the iterations that use them.

    The proposals' standard normals and the accept tests' standard exponentials
    (``E = −log u``: accept when ``log r > −E``) do not depend on the state, so they are
    drawn for up to ``_RNG_BATCH`` iterations per call (fewer when a batch would exceed
    ``_RNG_BUDGET`` numbers) and scaled by the current proposal sds only when used.
    """

    def __init__(self, xp: Any, seed: int, shape: tuple[int, ...], gpu: bool) -> None:
        self.xp, self.shape = xp, shape
        self.gen = xp.random.RandomState(seed % (2**32)) if gpu else np.random.default_rng(seed)
        per_iter = max(1, int(np.prod(shape)))
        self.rows = max(1, min(_RNG_BATCH, _RNG_BUDGET // per_iter))

    def draw(self, rows: int) -> tuple[Any, Any]:
        size = (rows,) + self.shape
        z = self.xp.asarray(self.gen.standard_normal(size))
        e = self.xp.asarray(self.gen.standard_exponential(size))
        return z, e


def _segments(
    n_iter: int, warmup: int, batch: int, windows: bool
) -> list[tuple[int, int, bool]]:
    """Split the iterations into segments ``(start, end, new_batch)``: a segment never
    crosses a random-number batch, the end of warmup or (with ``windows``, during warmup)
    the end of an adaptation window, so its random numbers can be scaled once and its
    acceptance counts go to one place.  ``new_batch`` marks a segment that starts a
    batch."""
    out = []
    it, batch_end = 0, 0
    while it < n_iter:
        new_batch = it == batch_end
        if new_batch:
            batch_end = min(it + batch, n_iter)
        end = batch_end
        if it < warmup:
            end = min(end, warmup)
            if windows:
                end = min(end, (it // _ADAPT_WINDOW + 1) * _ADAPT_WINDOW)
        out.append((it, end, new_batch))
        it = end
    return out


class _OverflowFlag:
    """numpy floating-point error callback: records that an overflow happened."""

    def __init__(self) -> None:
        self.hit = False

    def __call__(self, err: str, flag: int) -> None:
        self.hit = True


def _run(xp: Any, *args: Any, gpu: bool, **kwargs: Any) -> dict[str, Any]:
    """Run the chains.  On the CPU, numpy reports an overflow of the softplus fast path to
    a flag (no warning, no extra pass over the data) and the block is then recomputed
    stably; on the GPU a non-finite block sum triggers the recomputation."""
    if gpu:
        return _run_chains(xp, *args, gpu=gpu, flag=None, **kwargs)
    flag = _OverflowFlag()
    with np.errstate(over="call", call=flag):
        return _run_chains(xp, *args, gpu=gpu, flag=flag, **kwargs)


def _run_chains(
    xp: Any,
    y_host: np.ndarray,
    obs_host: np.ndarray,
    state: dict[str, np.ndarray],
    pri: dict[str, tuple[float, float]],
    sd0: dict[str, float],
    anchors: list[tuple[int, float]],
    *,
    n_iter: int,
    warmup: int,
    thin: int,
    n_keep: int,
    adapt: bool,
    seed: int,
    progress: bool,
    gpu: bool,
    flag: _OverflowFlag | None,
    ridge_moves: bool,
) -> dict[str, Any]:
    C = state["theta"].shape[0]
    n, m = y_host.shape
    nm = n + 2 * m  # θ, a, nb = -b
    K = nm + 2  # then the ridge moves' log-scale and shift
    sl_t, sl_a, sl_b = slice(0, n), slice(n, n + m), slice(n + m, nm)
    i_sc = nm
    if flag is None:  # GPU: set below from a non-finite sum
        flag = _OverflowFlag()

    # Array calls with the output as a positional argument (cheaper to parse than out=);
    # cupy gets it as a keyword.  np.dot on 2-D views is the fastest product for one chain.
    if gpu:
        add, sub, mul, greater, exp, log1p, matmul = (
            _out_keyword(f)
            for f in (xp.add, xp.subtract, xp.multiply, xp.greater, xp.exp, xp.log1p, xp.matmul)
        )
    else:
        add, sub, mul, greater, exp, log1p, matmul = (
            np.add, np.subtract, np.multiply, np.greater, np.exp, np.log1p, np.matmul
        )
    copyto = xp.copyto
    # accepted rows / columns of a block's candidate into F: np.putmask with a broadcast
    # mask is faster than copyto(where=) when the mask selects columns
    putmask = _copy_where(xp) if gpu else np.putmask

    # F = softplus(W ∘ η) is minus the log-likelihood cell by cell: W = +1 where y = 0,
    # -1 where y = 1 (softplus(η) − η = softplus(−η)), and 0 where missing (a constant
    # log 2 that cancels in every difference).
    w_host = np.where(obs_host, 1.0 - 2.0 * y_host, 0.0)
    W = xp.asarray(np.ascontiguousarray(np.broadcast_to(w_host, (C, n, m))))

    # η = U @ V with U = [θ, 1] (C, n, 2) and V = [a; nb] (C, 2, m).  They are stored
    # parameter-major, so that θ, a and nb are contiguous rows and U, V transposed views:
    # UT = [θ; 1] (2, C, n), UTp = [θ'; 1] for the θ block's candidates, and for the items
    # one array of rows R = [a', a, nb, 1, nb'] (5, C, m) in which every product operand
    # is an evenly spaced pair of rows: V = [a; nb] (rows 1, 2), the a block's candidate
    # Va = [a'; nb] (rows 0, 2), the b block's Vb = [a; nb'] (rows 1, 4), and [a; nb; 1]
    # (rows 1-3) gives the ridge moves' sums.  So the current a and nb have one home.
    UT, UTp = xp.ones((2, C, n)), xp.ones((2, C, n))
    R = xp.ones((5, C, m))
    UT[0] = xp.asarray(state["theta"])
    R[1] = xp.asarray(state["a"])
    R[2] = -xp.asarray(state["b"])
    U, Up = UT.transpose(1, 2, 0), UTp.transpose(1, 2, 0)
    V = R[1:3].transpose(1, 0, 2)
    Va, Vb = R[0:3:2].transpose(1, 0, 2), R[1:5:3].transpose(1, 0, 2)
    theta, tp = UT[0][:, :, None], UTp[0][:, :, None]  # (C, n, 1)
    ap, a, nb, nbp = (R[r][:, None, :] for r in (0, 1, 2, 4))  # (C, 1, m)

    # Σ(F − F') over a block's axis: for small matrices one subtraction and one product
    # (fewest calls); for large ones a product each for F and F' and a subtraction of the
    # two sum vectors (one pass over each matrix instead of three, and no matrix D)
    split_sums = C * n * m >= _SPLIT_SUMS_CELLS
    E = xp.empty((C, n, m))  # candidate block's softplus(W ∘ η')
    F = xp.empty((C, n, m))  # current state's
    D = None if split_sums else xp.empty((C, n, m))  # F − F'
    ones_m = xp.ones((m, 1))
    ones_n = xp.ones((1, n))
    d_t, tmp_t = xp.empty((C, n, 1)), xp.empty((C, n, 1))
    d_m, tmp_m = xp.empty((C, 1, m)), xp.empty((C, 1, m))
    # operands of the products: 2-D views for one chain on the CPU, else batched
    if C == 1 and not gpu:
        prod = np.dot
        U_, Up_, V_, Va_, Vb_ = U[0], Up[0], V[0], Va[0], Vb[0]
        E_, F_, d_t_, d_m_, tmp_t_, tmp_m_ = E[0], F[0], d_t[0], d_m[0], tmp_t[0], tmp_m[0]
        D_ = None if D is None else D[0]
    else:
        prod = matmul
        U_, Up_, V_, Va_, Vb_, E_, F_, D_ = U, Up, V, Va, Vb, E, F, D
        d_t_, d_m_, tmp_t_, tmp_m_ = d_t, d_m, tmp_t, tmp_m

    def neg_loglik(out: Any, out_: Any, UU: Any, VV: Any) -> None:
        """out <- softplus(W ∘ (UU @ VV)) (``out_`` is ``out`` as the product's operand),
        recomputed stably if the fast path overflowed."""
        flag.hit = False
        if gpu:  # always the stable form: an overflow check would cost a host sync
            _stable(out, out_, UU, VV)
            return
        prod(UU, VV, out_)
        mul(out, W, out)
        exp(out, out)  # the fast softplus (see _softplus_fast); numpy flags an overflow
        log1p(out, out)
        if flag.hit:
            _stable(out, out_, UU, VV)
            flag.hit = False

    def _stable(out: Any, out_: Any, UU: Any, VV: Any) -> None:
        prod(UU, VV, out_)
        mul(out, W, out)
        _softplus_stable(xp, out)

    def item_step(p: Any, z: Any, pp: Any, VV_: Any, k1: Any, th: Any, acc: Any, accF: Any) -> None:
        """One item block (a, or nb = −b): propose p' = p + z for every item at once, accept
        where Σ_i (F − F') − k1·p > th (the state-free part of the log ratio and the
        log-uniform threshold are precomputed per segment), and keep F in step."""
        add(p, z, pp)
        neg_loglik(E, E_, U_, VV_)  # the candidate's softplus matrix
        if split_sums:  # Σ_i (F − F')
            prod(ones_n, F_, tmp_m_)
            prod(ones_n, E_, d_m_)
            sub(tmp_m, d_m, d_m)
        else:
            sub(F, E, D)
            prod(ones_n, D_, d_m_)
        mul(k1, p, tmp_m)
        sub(d_m, tmp_m, d_m)
        greater(d_m, th, acc)
        copyto(p, pp, where=acc)
        putmask(F, accF, E)

    neg_loglik(F, F[0] if prod is np.dot else F, U_, V_)

    # per-parameter constants of the prior term (internal coordinates: nb = -b has prior
    # mean -b0): with p' = p + z, log r = Σ(F − F') − c z (2 (p − μ) + z), c = 1 / (2 var)
    (mt, vt), (ma, va), (mb, vb) = pri["theta"], pri["a"], pri["b"]
    c_t, c_a, c_b = 1.0 / (2.0 * vt), 1.0 / (2.0 * va), 1.0 / (2.0 * vb)
    cvec_h = np.zeros(K)
    mu2_h = np.zeros(K)
    cvec_h[sl_t], cvec_h[sl_a], cvec_h[sl_b] = c_t, c_a, c_b
    mu2_h[sl_t], mu2_h[sl_a], mu2_h[sl_b] = 2.0 * mt, 2.0 * ma, -2.0 * mb
    cvec, two_c, mu2 = xp.asarray(cvec_h), xp.asarray(2.0 * cvec_h), xp.asarray(mu2_h)

    sd_all = xp.empty((C, K))
    sd_all[:, sl_t] = sd0["theta"]
    sd_all[:, sl_a] = sd0["a"]
    sd_all[:, sl_b] = sd0["b"]
    sd_all[:, i_sc] = _RIDGE_SD0[0]
    sd_all[:, i_sc + 1] = _RIDGE_SD0[1]
    cnt_win = xp.zeros((C, nm), dtype=xp.int64)
    cnt_post = xp.zeros((C, nm), dtype=xp.int64)
    draws = {
        "theta": xp.empty((C, n_keep, n)),
        "a": xp.empty((C, n_keep, m)),
        "b": xp.empty((C, n_keep, m)),
    }
    if anchors:
        anc_idx = xp.asarray(np.array([i for i, _ in anchors], dtype=np.int64))
        anc_sign = xp.asarray(np.array([math.copysign(1.0, v) for _, v in anchors]))
        tp2 = UTp[0]
    ridge = _RidgeMoves(xp, UT, R, pri, anchors) if ridge_moves else None
    ridge_win = [[0, 0] for _ in range(C)]
    ridge_post = [[0, 0] for _ in range(C)]
    rng = _Rng(xp, seed, (C, K), gpu)
    acc_buf = xp.empty((rng.rows, C, nm), dtype=bool)  # accept decisions of a segment
    reporter = ProgressBar(
        n_iter, "mh_2pl", enabled=progress,
        phase=lambda it: "warmup  " if it <= warmup else "sampling",
    ) if progress else None
    k_window = 0
    n_post = n_iter - warmup
    n_stored = 0
    next_keep = warmup + thin - 1  # iteration (0-based) whose state is the next draw

    for start, end, new_batch in _segments(n_iter, warmup, rng.rows, adapt):
        if new_batch:
            Z_raw, E_raw = rng.draw(min(rng.rows, n_iter - start))
            batch_start = start
        L = end - start
        rows = slice(start - batch_start, end - batch_start)
        # Scale this segment's proposals and fold everything that does not depend on the
        # state into two arrays: accept p' = p + z  <=>  Σ(F − F') − k1 p > thr, with
        # k1 = 2 c z and thr = c z (z − 2μ) − E.  Each is split by block and shaped to
        # broadcast against the (chain, person, item) arrays; iterating over the leading
        # axis then hands the loop one view per iteration.
        z = Z_raw[rows] * sd_all
        k1 = z * two_c
        thr = z - mu2
        thr *= z
        thr *= cvec
        thr -= E_raw[rows]
        per_iter = []
        for arr in (z, k1, thr):
            per_iter.append(xp.ascontiguousarray(arr[:, :, sl_t])[:, :, :, None])
            per_iter.append(xp.ascontiguousarray(arr[:, :, sl_a])[:, :, None, :])
            per_iter.append(xp.ascontiguousarray(arr[:, :, sl_b])[:, :, None, :])
        acc_seg = acc_buf[:L]
        acc_ts = acc_seg[:, :, sl_t][:, :, :, None]
        acc_as = acc_seg[:, :, sl_a][:, :, None, :]
        acc_bs = acc_seg[:, :, sl_b][:, :, None, :]
        per_iter += [acc_ts, acc_as, acc_bs]
        if gpu:  # copyto(where=) broadcasts the (C, n, 1) / (C, 1, m) masks itself
            per_iter += [acc_ts, acc_as, acc_bs]
        else:  # putmask wants a mask of the target's shape: broadcast views
            per_iter += [np.broadcast_to(s, (L, C, n, m)) for s in (acc_ts, acc_as, acc_bs)]
        if ridge_moves:
            ridge_z = z[:, :, i_sc:].tolist()
            ridge_le = (-E_raw[rows, :, i_sc:]).tolist()
        in_warmup = start < warmup
        ridge_cnt = ridge_win if in_warmup else ridge_post

        it = start
        for (z_t, z_a, z_b, k1_t, k1_a, k1_b, th_t, th_a, th_b,
             acc_t, acc_a, acc_b, accF_t, accF_a, accF_b) in zip(*per_iter):
            # ---- θ block: all persons at once -----------------------------------------
            add(theta, z_t, tp)
            neg_loglik(E, E_, Up_, V_)  # the candidate's softplus matrix
            if split_sums:  # Σ_j (F − F')
                prod(F_, ones_m, tmp_t_)
                prod(E_, ones_m, d_t_)
                sub(tmp_t, d_t, d_t)
            else:
                sub(F, E, D)
                prod(D_, ones_m, d_t_)
            mul(k1_t, theta, tmp_t)
            d_t -= tmp_t
            greater(d_t, th_t, acc_t)
            if anchors:  # truncated prior: reject anchored θ' on the wrong side of 0
                acc_t[:, anc_idx, 0] &= tp2[:, anc_idx] * anc_sign > 0
            copyto(theta, tp, where=acc_t)
            putmask(F, accF_t, E)

            # ---- a block, then the b block (as nb = -b): all items at once -------------
            item_step(a, z_a, ap, Va_, k1_a, th_a, acc_a, accF_a)
            item_step(nb, z_b, nbp, Vb_, k1_b, th_b, acc_b, accF_b)

            # ---- ridge moves: directions along which the likelihood is constant -------
            if ridge_moves:
                k = it - start
                ridge(ridge_z[k], ridge_le[k], ridge_cnt)

            # ---- storage ----------------------------------------------------------------
            if it == next_keep:
                draws["theta"][:, n_stored] = UT[0]
                draws["a"][:, n_stored] = R[1]
                draws["b"][:, n_stored] = R[2]  # negated below
                n_stored += 1
                next_keep = next_keep + thin if n_stored < n_keep else -1
            it += 1

        # ---- acceptance counts, adaptation (end of each warmup window), progress --------
        cnt = cnt_win if in_warmup else cnt_post
        cnt += acc_seg.sum(axis=0)
        if adapt and in_warmup and end % _ADAPT_WINDOW == 0:
            k_window += 1
            rate = xp.empty((C, K))
            rate[:, :nm] = cnt_win
            rate[:, nm:] = xp.asarray(np.array(ridge_win, dtype=float))
            step = 3.0 / math.sqrt(k_window + 2)
            rate *= step / _ADAPT_WINDOW
            rate -= step * TARGET_ACCEPTANCE
            sd_all *= xp.exp(rate)
            xp.clip(sd_all, _SD_LIMITS[0], _SD_LIMITS[1], out=sd_all)
            cnt_win[...] = 0
            ridge_win = [[0, 0] for _ in range(C)]
        if reporter is not None:
            reporter.update(end)
    if reporter is not None:
        reporter.update(n_iter)
    xp.negative(draws["b"], out=draws["b"])
    acc_post = xp.empty((C, K))
    acc_post[:, :nm] = cnt_post
    acc_post[:, nm:] = xp.asarray(np.array(ridge_post, dtype=float))
    rates = acc_post / n_post
    return {
        "draws": draws,
        "acceptance": {"theta": rates[:, sl_t], "a": rates[:, sl_a], "b": rates[:, sl_b]},
        "sd": {"theta": sd_all[:, sl_t], "a": sd_all[:, sl_a], "b": sd_all[:, sl_b]},
        "ridge_acceptance": rates[:, i_sc:] if ridge_moves else None,
        "ridge_sd": sd_all[:, i_sc:] if ridge_moves else None,
    }


def _out_keyword(f: Any) -> Any:
    """``f(x, y, out)`` as ``f(x, y, out=out)`` (and ``f(x, out)`` as ``f(x, out=out)``)."""

    def call(*args: Any) -> Any:
        return f(*args[:-1], out=args[-1])

    return call


def _copy_where(xp: Any) -> Any:
    """``putmask(dst, mask, src)`` done as ``copyto(dst, src, where=mask)``."""

    def putmask(dst: Any, mask: Any, src: Any) -> None:
        xp.copyto(dst, src, where=mask)

    return putmask


class _RidgeMoves:
    """Per chain: a scale move (θ, a) -> (cθ, a/c) then a shift move (θ, b) -> (θ + d,
    b + a d).  Both leave η = aθ − b, hence the likelihood and ``F``, unchanged; they are
    accepted on the priors and the Jacobian (c^(n−m) for the scale, 1 for the shift).

    Only sufficient statistics enter (Σθ, Σθ², Σa, Σa², Σ a·(−b)), obtained from two
    matrix–vector products, so a move costs O(n + m); the scalar work is done on host
    floats, and an accepted move scales or shifts its chain's rows in place.  ``UT`` =
    [θ; 1] and the rows 1-3 of ``R`` = [a; nb; 1] hold the state (nb = −b).
    """

    def __init__(
        self, xp: Any, UT: Any, R: Any, pri: dict[str, tuple[float, float]],
        anchors: list[tuple[int, float]],
    ) -> None:
        C, n = UT.shape[1], UT.shape[2]
        m = R.shape[2]
        self.n, self.m, self.C = n, m, C
        (self.mt, vt), (self.ma, va), (self.mb, vb) = pri["theta"], pri["a"], pri["b"]
        self.c_t, self.c_a, self.c_b = 1.0 / (2.0 * vt), 1.0 / (2.0 * va), 1.0 / (2.0 * vb)
        self.xp, self.UT = xp, UT
        if C == 1:  # [θ; 1] θ = [Σθ², Σθ] and [a; nb; 1] a = [Σa², Σ a·nb, Σa]
            self.u, self.t, self.s, self.a = UT[:, 0, :], UT[0, 0], R[1:4, 0, :], R[1, 0]
        else:
            self.u, self.t = UT.transpose(1, 0, 2), UT[0][:, :, None]
            self.s, self.a = R[1:4].transpose(1, 0, 2), R[1][:, :, None]
        self.th_rows = [UT[0, c] for c in range(C)]
        self.a_rows = [R[1, c] for c in range(C)]
        self.nb_rows = [R[2, c] for c in range(C)]
        self.anc_idx = [i for i, _ in anchors]
        self.anc_sign = [math.copysign(1.0, v) for _, v in anchors]

    def __call__(self, z: list, le: list, counts: list) -> None:
        """One scale and one shift proposal per chain; ``z[c]`` holds the chain's
        log-scale and shift proposals, ``le[c]`` their ``log u``, ``counts[c]`` the
        acceptance counters."""
        n, m = self.n, self.m
        mt, ma, mb, c_t, c_a, c_b = self.mt, self.ma, self.mb, self.c_t, self.c_a, self.c_b
        if self.C == 1:
            G = [self.u.dot(self.t).tolist()]
            H = [self.s.dot(self.a).tolist()]
        else:
            G = self.xp.matmul(self.u, self.t)[:, :, 0].tolist()
            H = self.xp.matmul(self.s, self.a)[:, :, 0].tolist()
        anc = self.UT[0][:, self.anc_idx].tolist() if self.anc_idx else None
        for c in range(self.C):
            stt, st = G[c]
            saa, sanb, sa = H[c]
            # scale move
            lc = z[c][0]
            k = math.exp(lc)
            lr = c_t * ((1.0 - k * k) * stt + 2.0 * mt * (k - 1.0) * st)
            lr += c_a * ((1.0 - 1.0 / (k * k)) * saa + 2.0 * ma * (1.0 / k - 1.0) * sa)
            lr += (n - m) * lc
            if lr > le[c][0]:
                self.th_rows[c] *= k
                self.a_rows[c] /= k
                stt, st = stt * k * k, st * k
                saa, sanb, sa = saa / (k * k), sanb / k, sa / k
                if anc is not None:
                    anc[c] = [v * k for v in anc[c]]
                counts[c][0] += 1
            # shift move: θ -> θ + d, b -> b + a d (nb -> nb − a d)
            d = z[c][1]
            lr = c_t * (-2.0 * d * (st - n * mt) - n * d * d)
            lr += c_b * (2.0 * d * (sanb + mb * sa) - d * d * saa)
            ok = lr > le[c][1]
            if ok and anc is not None:
                ok = all(sg * (v + d) > 0 for sg, v in zip(self.anc_sign, anc[c]))
            if ok:
                self.th_rows[c] += d
                self.nb_rows[c] -= d * self.a_rows[c]
                counts[c][1] += 1


# ---------------------------------------------------------------------------------------
# identification after sampling
# ---------------------------------------------------------------------------------------
def _normalise_signs(draws: dict[str, np.ndarray], anchors: list[tuple[int, float]]) -> list[int]:
    """Orient each chain: (θ, a) -> (-θ, -a) leaves the likelihood unchanged.

    Whole chains are flipped, never single draws (flipping draws one by one by a sign
    test would truncate the posterior).  With anchors, a chain is flipped when its anchored
    θ disagree with their signs on balance (with the sign constraints this never happens,
    but anchors given only as starting values would rely on it).  Without anchors, each
    chain is aligned with chain 0 (sign of the inner product of the centred posterior-mean
    θ), and then all chains are oriented so that the mean slope is non-negative.  Returns
    the number of flipped draws per chain.
    """
    theta, a = draws["theta"], draws["a"]
    C, D, n = theta.shape
    means = theta.mean(axis=1)  # (C, n)
    if anchors:
        idx = np.array([i for i, _ in anchors])
        sgn = np.array([math.copysign(1.0, v) for _, v in anchors])
        flip = (means[:, idx] * sgn).sum(axis=1) < 0
    else:
        centred = means - means.mean(axis=1, keepdims=True)
        flip = centred @ centred[0] < 0
        sign = np.where(flip, -1.0, 1.0)
        if (a.mean(axis=1) * sign[:, None]).mean() < 0:
            flip = ~flip
    for c in np.flatnonzero(flip):
        theta[c] *= -1.0
        a[c] *= -1.0
    return [D if f else 0 for f in flip]

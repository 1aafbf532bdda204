"""2PL model set-up for the Metropolis–Hastings sampler: argument checks, anchors,
starting values and the orientation of chains after sampling.

Model ``P(y_ij = 1) = logistic(a_j θ_i − b_j)`` with independent normal priors; see
``docs/mh.md``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .._checks import as_number, check_location, check_locations, check_variance
from .._threads import single_blas_thread
from ..exceptions import user_stacklevel

__all__ = ["DEFAULT_PRIORS", "DEFAULT_PROPOSAL_SD", "TARGET_ACCEPTANCE", "ACCEPTANCE_BAND",
           "check_priors", "check_proposal_sd", "check_anchors", "initial_state",
           "normalise_signs", "AMBIGUOUS_COS", "orient_slopes", "changed_init_message"]

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


# ---------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------
def check_priors(priors: Mapping[str, Any] | None) -> dict[str, tuple[float, float]]:
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
            mean, var = (as_number(v) for v in value)
        except (TypeError, ValueError):
            raise ValueError(
                f"priors[{key!r}] must be a (mean, variance) pair of numbers, got {value!r}"
            ) from None
        if not (math.isfinite(mean) and math.isfinite(var)) or var <= 0:
            raise ValueError(
                f"priors[{key!r}] = ({mean}, {var}): the mean must be finite and the variance "
                "finite and positive"
            )
        check_location(f"the mean of priors[{key!r}]", mean)
        check_variance(f"the variance of priors[{key!r}]", var)
        out[key] = (mean, var)
    return out


def check_proposal_sd(proposal_sd: Any) -> dict[str, float]:
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
            v = as_number(v)
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
    raise ValueError(f"unknown anchor label {key!r}; persons are: {shown} (a person who answered nothing "
                     "is dropped before the anchors are matched)")


def check_anchors(anchors: Mapping[Any, Any] | None, persons: pd.Index) -> list[tuple[int, float]]:
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
            if isinstance(value, (bool, np.bool_)):  # (True is not +1: gibbs_2pno refuses it too)
                raise TypeError
            v = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"anchor value for {key!r} must be a number, got {value!r}") from None
        if not math.isfinite(v) or v == 0:
            raise ValueError(
                f"anchor value for {key!r} must be a non-zero finite number (its sign is the "
                f"constraint, e.g. -1 or +1), got {value!r}"
            )
        check_location(f"the anchor for {key!r} (θ starts at it)", v)  # as init's values
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
        # on one BLAS thread: two spin on a busy core (short mh_2pl runs took 2.9x as long), and
        # the SVD's last bits, and so the start, depend on the thread count otherwise
        with single_blas_thread():
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
    raw = arr
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
    check_locations(f"init[{name!r}]", raw)  # |value| <= 1e6, as for prior means and anchors
    return arr


def _oriented_default(
    y: np.ndarray, obs: np.ndarray, anchors: list[tuple[int, float]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_default_init` oriented as the draws will be reported: anchors on their sides
    on balance, or (without anchors) a non-negative mean slope."""
    t0, a0, b0 = _default_init(y, obs)
    if anchors:
        flip = sum(math.copysign(1.0, v) * t0[i] for i, v in anchors) < 0
    else:
        flip = a0.mean() < 0
    return (-t0, -a0, b0) if flip else (t0, a0, b0)


#: |cos(a, a_default)| below this: a start's slopes have no clear direction against the
#: anchors (e.g. a = 1 on items of both signs), so each a_j takes the sign of a_default_j.
AMBIGUOUS_COS = 0.5


def orient_slopes(a: np.ndarray, a_ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orient rows of starting slopes ``a`` (C, m) like ``a_ref`` (m,), the anchor-oriented
    default start's slopes.

    A row with ``cos(a, a_ref) <= -AMBIGUOUS_COS`` is reflected (a -> -a); a row with
    ``|cos| < AMBIGUOUS_COS`` has no clear direction (``a · a_ref < 0`` would be a coin toss,
    and a constant θ then leaves the chain in either mode), so each a_j takes the sign of
    a_ref_j (a_j -> |a_j| sign(a_ref_j); a_j kept where a_ref_j = 0).  Returns the new
    slopes and the masks (C,) of the reflected and of the re-signed rows.
    """
    a = np.array(a, dtype=np.float64, copy=True)
    norm = np.linalg.norm(a, axis=1) * np.linalg.norm(a_ref)
    cos = np.divide(a @ a_ref, norm, out=np.zeros(len(a)), where=norm > 0)
    known = norm > 0
    flip = known & (cos <= -AMBIGUOUS_COS)
    signed = known & (np.abs(cos) < AMBIGUOUS_COS)
    a[flip] *= -1.0
    a[signed] = np.where(a_ref != 0, np.abs(a[signed]) * np.sign(a_ref), a[signed])
    return a, flip, signed


def changed_init_message(changes: Mapping[str, Any]) -> str:
    """One line saying how the user's starting values were changed to the anchors'
    orientation: ``changes`` maps ``"theta"`` / ``"a"`` (reflected) and ``"a signs"`` (set
    per item, :func:`orient_slopes`) to the chains concerned (a string, may be empty)."""
    maps = {"theta": "θ -> -θ", "a": "a -> -a"}
    told = [k for k in ("theta", "a") if k in changes]
    parts = []
    if told:
        where = changes[told[0]]
        parts.append(
            f"{' and '.join(f'init[{k!r}]' for k in told)} "
            f"{'point' if len(told) > 1 else 'points'} against the anchors' direction{where} "
            f"(the mirror mode), so {'they were' if len(told) > 1 else 'it was'} reflected "
            f"({', '.join(maps[k] for k in told)}) before sampling"
        )
    if "a signs" in changes:
        parts.append(
            f"init['a'] has no clear direction against the anchors{changes['a signs']} "
            f"(|cos(a, a_default)| < {AMBIGUOUS_COS}, a_default the default start's slopes), so "
            "each a_j was given the sign of a_default_j (a_j -> |a_j| sign(a_default_j)) "
            "before sampling"
        )
    return ("; ".join(parts) + "; give starting values in the anchors' orientation (or other "
            "anchors) to silence this")


def _orient_by_anchors(
    state: dict[str, np.ndarray], a_ref: np.ndarray, anchors: list[tuple[int, float]],
    given: tuple[str, ...],
) -> None:
    """Orient, per chain, the θ and the a of a start by the anchors.

    θ is reflected when its anchored persons sit on the wrong sides of the chain's mean θ on
    balance (a constant θ, as ``"tutorial"``'s, carries no direction and is left alone: the
    slopes then give the chain its direction); a is oriented like ``a_ref``, the slopes of
    the default start, oriented by the anchors (:func:`orient_slopes`: reflected, or signed
    per item when it has no clear direction).  So every ``init`` starts in the default
    start's orientation.  A changed block the user gave (``given``) is reported in one
    warning.
    """
    idx = [i for i, _ in anchors]
    sgn = np.array([math.copysign(1.0, v) for _, v in anchors])
    theta = state["theta"]
    wrong = ((theta[:, idx] - theta.mean(axis=1, keepdims=True)) * sgn).sum(axis=1) < 0
    state["theta"][wrong] *= -1.0
    state["a"], flip, signed = orient_slopes(state["a"], a_ref)
    rows = {k: r for k, r in (("theta", wrong), ("a", flip), ("a signs", signed))
            if k.split()[0] in given and r.any()}
    both = np.any([r for k, r in rows.items() if k != "a signs"], axis=0)  # one list if reflected
    changes = {k: f" in chain(s) {', '.join(map(str, np.flatnonzero(both if k != 'a signs' else r)))}"
               for k, r in rows.items()}
    if changes:
        warnings.warn(changed_init_message(changes), UserWarning, stacklevel=user_stacklevel())


def initial_state(
    init: Any,
    y: np.ndarray,
    obs: np.ndarray,
    n_chains: int,
    anchors: list[tuple[int, float]],
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Starting values ``{"theta": (C, n), "a": (C, m), "b": (C, m)}`` of ``n_chains`` chains.

    With anchors every chain starts in the anchors' orientation, whatever ``init`` is (see
    :func:`_orient_by_anchors`); the anchored persons then start at their values.
    """
    n, m = y.shape
    given: tuple[str, ...] = ()
    if init is None or (isinstance(init, str) and init == "pca"):
        t0, a0, b0 = _oriented_default(y, obs, anchors)
        jitter = 0.25 if n_chains > 1 else 0.0
        state = {
            "theta": t0[None, :] + jitter * rng.standard_normal((n_chains, n)),
            "a": a0[None, :] + jitter * rng.standard_normal((n_chains, m)),
            "b": b0[None, :] + jitter * rng.standard_normal((n_chains, m)),
        }
    elif isinstance(init, str) and init == "tutorial":
        a0 = _oriented_default(y, obs, anchors)[1] if anchors else None
        state = {
            "theta": np.full((n_chains, n), 0.1),
            "a": np.full((n_chains, m), 1.0),
            "b": np.zeros((n_chains, m)),
        }
    elif isinstance(init, Mapping):
        unknown = set(init) - set(_BLOCKS)
        if unknown:
            raise ValueError(f"unknown init block(s) {sorted(unknown)}; use theta, a, b")
        t0, a0, b0 = _oriented_default(y, obs, anchors)
        defaults = {"theta": t0, "a": a0, "b": b0}
        sizes = {"theta": n, "a": m, "b": m}
        state = {
            k: _user_init(init[k], k, sizes[k], n_chains)
            if k in init
            else np.broadcast_to(defaults[k], (n_chains, sizes[k])).copy()
            for k in _BLOCKS
        }
        given = tuple(k for k in _BLOCKS if k in init)
    else:
        raise ValueError(
            "init must be None/'pca' (data-driven start), 'tutorial' (θ=0.1, a=1, b=0) or a "
            f'dict like {{"theta": ..., "a": ..., "b": ...}}, got {init!r}'
        )
    if anchors:
        _orient_by_anchors(state, a0, anchors, given)
        for i, v in anchors:
            state["theta"][:, i] = v
    return state


# ---------------------------------------------------------------------------------------
# identification after sampling
# ---------------------------------------------------------------------------------------
def normalise_signs(draws: dict[str, np.ndarray], anchors: list[tuple[int, float]]) -> list[int]:
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

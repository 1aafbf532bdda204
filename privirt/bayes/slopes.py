"""Slopes of either sign for the 2PNO Gibbs sampler: the ``slopes`` option, anchors on persons
(MCMCirt1d's ``theta.constraints``), the free-slope starting values and the item–rest
correlation warning under ``slopes="positive"`` (``docs/gibbs.md``).  Imports data only."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd
from scipy import special

from .._checks import check_location
from .._threads import one_blas_thread
from ..data.responses import Responses
from ..exceptions import user_stacklevel
from ..data._labels import name_items

__all__ = ["SLOPES", "FREE", "ABOVE", "BELOW", "FIXED", "check_slopes", "Anchors", "check_anchors",
           "free_init", "apply_anchors", "item_rest_correlations", "warn_negative_items",
           "leading_scores", "orient_init", "warn_reflected_init"]

#: Values of ``slopes``: a_j > 0 (the educational-test model) or a_j of either sign.
SLOPES = ("positive", "free")
#: ``Anchors.con`` codes: no constraint, θ_i > 0, θ_i < 0, θ_i fixed.
FREE, ABOVE, BELOW, FIXED = 0, 1, -1, 2


def check_slopes(slopes: Any) -> bool:
    """``True`` for ``slopes="free"``, ``False`` for ``"positive"``."""
    if not isinstance(slopes, str) or slopes not in SLOPES:
        raise ValueError(
            f'slopes must be "positive" (a > 0, test items keyed one way) or "free" (either '
            f"sign: roll calls, reverse-worded items), got {slopes!r}"
        )
    return slopes == "free"


def item_rest_correlations(codes: np.ndarray) -> np.ndarray:
    """Pearson correlation of each item with the rest score, over the persons who answered it.

    The rest score of person i for item j is the proportion of 1s among the *other* items
    person i answered (the rest sum when nothing is missing, up to a per-person constant
    factor).  NaN for an item without variance in either variable.
    """
    obs = codes >= 0
    y = np.where(obs, codes, 0).astype(np.float64)
    n_other = obs.sum(axis=1, keepdims=True) - obs
    rest = np.divide(y.sum(axis=1, keepdims=True) - y, n_other,
                     out=np.zeros_like(y), where=n_other > 0)
    w = (obs & (n_other > 0)).astype(np.float64)
    cnt = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        my = (w * y).sum(axis=0) / cnt
        mr = (w * rest).sum(axis=0) / cnt
        dy, dr = w * (y - my), w * (rest - mr)
        r = (dy * dr).sum(axis=0) / np.sqrt((dy * dy).sum(axis=0) * (dr * dr).sum(axis=0))
    return r


def warn_negative_items(resp: Responses, where: str = "") -> np.ndarray:
    """One warning naming the items whose item–rest correlation is negative (``slopes=
    "positive"`` cannot fit them); returns their mask."""
    r = item_rest_correlations(resp.codes)
    neg = np.nan_to_num(r, nan=0.0) < -1e-9  # not rounding noise around 0
    if neg.any():
        warnings.warn(
            f"{where}item(s) {name_items(resp.items, neg)} correlate negatively with the rest of the "
            "responses: a slope a > 0 cannot fit them (roll calls, reverse-worded items); "
            'use slopes="free" (command line: --slopes free), with anchors to fix the direction',
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return neg


@dataclass
class Anchors:
    """Constraints on persons' θ: ``con[i]`` is 0 (none), 1 (θ_i > 0), −1 (θ_i < 0) or 2
    (θ_i fixed at ``fix[i]``); ``given`` maps person label -> the value as given."""

    con: np.ndarray  # (n,) int8
    fix: np.ndarray  # (n,) float64
    given: dict

    @property
    def identifies_sign(self) -> bool:
        """Whether the constraints rule out the reflection (θ, a) -> (−θ, −a)."""
        return bool(np.any(np.abs(self.con) == 1) or np.any((self.con == FIXED) & (self.fix != 0)))

    def signs(self) -> np.ndarray:
        """(n,) +1 / −1 for persons whose anchor has a sign (constraint or non-zero value)."""
        s = np.where(np.abs(self.con) == 1, self.con.astype(np.float64), 0.0)
        return np.where(self.con == FIXED, np.sign(self.fix), s)

    def constrain(self, th: np.ndarray, mean: np.ndarray, prec: np.ndarray, r0: int, r1: int,
                  tn_lower: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
        """Redo the θ draws of persons r0 … r1 − 1 (columns of ``th``, ``mean``, ``prec``)
        that are anchored: a sign constraint draws N(mean, 1/prec) truncated to that side,
        with X ~ N(0, 1) | X > lower from ``tn_lower(side, lower)`` (the draws' own rule: the
        θ step's random number, transformed); a fixed person keeps its value."""
        con = self.con[r0:r1]
        side = np.flatnonzero(np.abs(con) == 1)
        if side.size:
            s = con[side].astype(np.float64)
            m, sd = mean[:, side], 1.0 / np.sqrt(prec[:, side])
            th[:, side] = m + s * sd * tn_lower(side, -s * m / sd)
        fixed = np.flatnonzero(con == FIXED)
        if fixed.size:
            th[:, fixed] = self.fix[r0 + fixed]


def check_anchors(anchors: Mapping[Any, Any] | None, persons: pd.Index) -> Anchors | None:
    """Validate ``anchors``: person label -> a number (θ fixed at it) or ``"+"`` / ``"-"``
    (θ constrained to that sign), as in MCMCpack's ``theta.constraints``."""
    if anchors is None or (isinstance(anchors, Mapping) and not anchors):
        return None
    if not isinstance(anchors, Mapping):
        raise ValueError(
            'anchors must be a dict of person label -> value (θ fixed) or "+" / "-" (θ > 0 / '
            f'θ < 0), e.g. {{"KENNEDY": "-", "HELMS": "+"}}, got {type(anchors).__name__}'
        )
    from .twopl_setup import _match_label

    n = len(persons)
    con, fix = np.zeros(n, dtype=np.int8), np.zeros(n)
    given = {}
    for key, value in anchors.items():
        pos = _match_label(persons, key)
        if con[pos] != FREE:
            raise ValueError(f"person {key!r} is anchored twice")
        if isinstance(value, str) and value.strip() in ("+", "-"):
            con[pos] = ABOVE if value.strip() == "+" else BELOW
            given[str(persons[pos])] = value.strip()
            continue
        ok = not isinstance(value, (str, bool, np.bool_))
        try:
            v = float(value) if ok else math.nan
        except (TypeError, ValueError):
            v = math.nan
        if not math.isfinite(v):
            raise ValueError(
                f'anchor for {key!r} must be a finite number (θ fixed at it) or "+" / "-" '
                f"(θ constrained to that sign), got {value!r}"
            )
        check_location(f"the anchor for {key!r} (θ fixed at it)", v)
        con[pos], fix[pos] = FIXED, v
        given[str(persons[pos])] = v
    return Anchors(con=con, fix=fix, given=given)


def apply_anchors(theta: np.ndarray, anchors: Anchors | None) -> np.ndarray:
    """A starting θ that satisfies the anchors: fixed persons at their values, sign-constrained
    persons moved to their side (|θ_i|, at least 0.1, with the required sign)."""
    if anchors is None:
        return theta
    theta = theta.copy()
    side = np.abs(anchors.con) == 1
    theta[side] = anchors.con[side] * np.maximum(np.abs(theta[side]), 0.1)
    fixed = anchors.con == FIXED
    theta[fixed] = anchors.fix[fixed]
    return theta


def orient_init(start: dict[str, np.ndarray], init: Mapping[str, np.ndarray],
                anchors: Anchors | None) -> list[str]:
    """Put the user's starting θ and a (``init``) into ``start`` (the chain's free-slope
    default, already oriented by the anchors), each oriented by the anchors: θ is reflected
    when its persons with a signed anchor sit on the wrong sides of its mean on balance (a
    constant θ has no direction and is kept: the slopes give the chain its direction); a is
    oriented like the default's slopes (``twopl_setup.orient_slopes``: reflected when it
    points against them, each a_j given the sign of the default's when it has no clear
    direction, e.g. a = 1 on items of both signs).  A start in the mirror mode, or with no
    direction, would leave the chain there or let it fall into either mode.  Returns the
    changes made: ``"theta"``, ``"a"`` (reflected), ``"a signs"`` (for one warning per run)."""
    from .twopl_setup import orient_slopes

    default_a = start["a"]
    start.update(init)
    if anchors is None or not anchors.identifies_sign:
        return []
    changed = []
    if "theta" in init and float(((init["theta"] - init["theta"].mean()) * anchors.signs()).sum()) < 0:
        start["theta"] = -init["theta"]
        changed.append("theta")
    if "a" in init:
        a, flip, signed = orient_slopes(init["a"][None, :], default_a)
        start["a"] = a[0]
        changed += ["a"] * bool(flip[0]) + ["a signs"] * bool(signed[0])
    return changed


def warn_reflected_init(changes: Mapping[str, list[int]]) -> None:
    """One warning saying how :func:`orient_init` changed the ``init`` blocks (block ->
    the chains concerned)."""
    from .twopl_setup import changed_init_message

    if not changes:
        return
    refl = sorted({c for k in ("theta", "a") for c in changes.get(k, ())})
    where = {k: f" in chain(s) {', '.join(map(str, refl if k != 'a signs' else v))}"
             for k, v in changes.items()}
    warnings.warn(changed_init_message(where), UserWarning, stacklevel=user_stacklevel())


@one_blas_thread
def leading_scores(codes: np.ndarray) -> np.ndarray:
    """Standardised scores of persons on the first principal component of the item-
    standardised responses (missing cells at the item mean), oriented so that the sum of
    the item loadings is non-negative.

    On one BLAS thread: the SVD's last bits follow the number of BLAS threads, and through
    :func:`free_init`'s starting values so did every draw of ``slopes="free"``."""
    obs = codes >= 0
    y = np.where(obs, codes, 0).astype(np.float64)
    cnt = np.maximum(obs.sum(axis=0), 1)
    p = y.sum(axis=0) / cnt
    sd = np.sqrt(p * (1 - p))
    X = np.where(obs, (y - p) / np.where(sd > 0, sd, 1.0), 0.0)
    if min(X.shape) <= 2000:
        u, s, vt = np.linalg.svd(X, full_matrices=False)
        score, load = u[:, 0] * s[0], vt[0]
    else:  # pragma: no cover - large matrices
        from scipy.sparse.linalg import svds

        u, s, vt = svds(X, k=1, v0=np.ones(min(X.shape)), random_state=0)
        score, load = u[:, 0] * s[0], vt[0]
    if load.sum() < 0:
        score = -score
    sd_s = score.std()
    return (score - score.mean()) / (sd_s if sd_s > 0 else 1.0)


def free_init(codes: np.ndarray, rng: np.random.Generator, jitter: bool,
              anchors: Anchors | None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Starting values for ``slopes="free"`` and the reference direction of the chains.

    θ from :func:`leading_scores` (reflected when the anchors' signs disagree with it on
    balance), a_j = r_j / √(1 − r_j²) from the item's correlation r_j with it (clipped to
    ±3), b_j = −√(1 + a_j²) Φ⁻¹(p̂_j) (so that P(y = 1) = p̂_j at θ ~ N(0, 1)); jittered per
    chain like :func:`default_init`, then anchored persons set to their constraints.
    Returns the start and the un-jittered θ (the direction each chain is compared with).
    """
    ref = leading_scores(codes)
    if anchors is not None and (anchors.signs() * ref).sum() < 0:
        ref = -ref
    obs = codes >= 0
    y = np.where(obs, codes, 0).astype(np.float64)
    cnt = np.maximum(obs.sum(axis=0), 1)
    p = np.clip(y.sum(axis=0) / cnt, 0.02, 0.98)
    w = obs.astype(np.float64)
    tm = (w * ref[:, None]).sum(axis=0) / cnt
    dy, dt = w * (y - p), w * (ref[:, None] - tm)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (dy * dt).sum(axis=0) / np.sqrt((dy * dy).sum(axis=0) * (dt * dt).sum(axis=0))
    r = np.clip(np.nan_to_num(r), -0.95, 0.95)
    a = np.clip(r / np.sqrt(1 - r * r), -3.0, 3.0)
    b = -np.sqrt(1.0 + a * a) * special.ndtri(p)
    theta = ref.copy()
    if jitter:
        a = a * np.exp(rng.normal(0.0, 0.3, a.shape))
        b = b + rng.normal(0.0, 0.5, b.shape)
        theta = theta + rng.normal(0.0, 0.5, theta.shape)
    return {"theta": apply_anchors(theta, anchors), "a": a, "b": b}, ref


# ---------------------------------------------------------------------------------------
# starting values
# ---------------------------------------------------------------------------------------

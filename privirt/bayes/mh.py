"""The Bayesian 2PL model by Metropolis–Hastings (ideal points): :func:`mh_2pl`.

``P(y_ij = 1) = logistic(a_j θ_i − b_j)`` with independent normal priors θ_i ~ N(μ_θ, σ²_θ),
a_j ~ N(a0, A0), b_j ~ N(b0, B0) (defaults those of the R/Rcpp tutorial's ``MH_irt``, as
variances); the slope is not constrained positive.  Missing responses drop out of the
likelihood.  The kernel is :mod:`.twopl`, the set-up :mod:`.twopl_setup`; ``docs/mh.md``
has the derivation.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .._backend import get_xp, resolve_device, to_numpy
from .._checks import check_flag
from .._progress import resolve_progress
from .._seeds import seed_sequence
from ..data.responses import ResponsesLike, as_responses
from . import driver, twopl, twopl_setup
from .posterior import SamplerPosterior
from .schedule import Schedule, resolve_warmup
from .twopl_setup import DEFAULT_PROPOSAL_SD

__all__ = ["mh_2pl"]

SAMPLER = "mh_2pl"


def mh_2pl(
    X: ResponsesLike,
    *,
    n_iter: int = 10000,
    warmup: int | None = None,
    thin: int = 1,
    proposal_sd: Sequence[float] | Mapping[str, float] | float = DEFAULT_PROPOSAL_SD,
    priors: Mapping[str, Sequence[float]] | None = None,
    init: Mapping[str, Any] | str | None = None,
    anchors: Mapping[Any, float] | None = None,
    adapt: bool = True,
    n_chains: int = 1,
    seed: int | np.random.SeedSequence | None = None,
    progress: bool | None = None,
    device: str = "auto",
    ridge_moves: bool = True,
) -> SamplerPosterior:
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
        Iterations discarded at the start (default 5000; with ``adapt=True`` used to tune
        the proposal scales).  Must be smaller than ``n_iter``.
    thin : int
        Keep the first post-warmup iteration and every ``thin``-th after it: each chain
        yields ``ceil((n_iter − warmup) / thin)`` draws (the rule of every sampler here).
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
        numbers / arrays (length n, or one row per chain; finite, |value| <= 1e6, as prior
        means); blocks it leaves out come from the default start.  With ``anchors`` every
        start is oriented by them (a user's θ or a pointing against them is reflected, and an a
        with no clear direction, e.g. a = 1 on items of both signs, is signed per item like
        the default's, with a warning; docs/mh.md, *Identification*).
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
    seed : int or numpy.random.SeedSequence, optional
        Seed of the random generator; results are reproducible for a given
        (seed, n_chains, device).
    progress : bool or None
        Print a progress line to stderr; None: only when stderr is a terminal.
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
    SamplerPosterior
        A :class:`~privirt.bayes.Posterior` with draws ``theta`` (chain, draw, person),
        ``a`` and ``b`` (chain, draw, item), ``acceptance`` (per block, (chain, index)
        acceptance rates over the post-warmup iterations) and ``info``: the keys of
        :data:`privirt.bayes.COMMON_INFO_KEYS` (``seconds`` among them) plus the final
        proposal sds ``proposal_sd``, ``sign_flips`` per chain, ``ridge_acceptance`` and
        ``ridge_sd`` of the scale/shift moves (chain, 2).  ``.to_arviz()`` includes the
        pointwise log-likelihood.

    Raises
    ------
    ValueError
        Bad responses, settings, priors, proposal sds, initial values or anchors (an
        unknown anchor label, a zero anchor).
    """
    resp = as_responses(X)
    warmup = resolve_warmup(warmup)
    schedule = Schedule(n_iter, warmup, thin, n_chains)
    n_chains = schedule.n_chains
    check_flag("adapt", adapt)
    check_flag("ridge_moves", ridge_moves)
    ss = seed_sequence(seed) or np.random.SeedSequence()
    pri = twopl_setup.check_priors(priors)
    sd0 = twopl_setup.check_proposal_sd(proposal_sd)
    anc = twopl_setup.check_anchors(anchors, resp.persons)
    dev = resolve_device(device)
    xp = get_xp(dev)

    codes = resp.codes
    obs = codes >= 0
    y = (codes == 1).astype(np.float64)
    n, m = y.shape
    driver.check_memory(n_chains, schedule.n_draws, {"theta": n, "a": m, "b": m})  # before the chains' states
    host_rng = np.random.default_rng(ss)
    state = twopl_setup.initial_state(init, y, obs, n_chains, anc, host_rng)
    kernel_seed = int(host_rng.integers(2**63 - 1))
    bar = driver.progress_bar(schedule, SAMPLER, resolve_progress(progress))
    sink = driver.DrawSink(xp, n_chains, {"theta": n, "a": m, "b": m}, schedule.n_draws)
    result, seconds = driver.timed(lambda: twopl.run_chains(
        xp, y, obs, state, pri, sd0, anc, schedule=schedule, store=sink.store,
        adapt=bool(adapt), seed=kernel_seed, bar=bar, gpu=(dev == "gpu"),
        ridge_moves=bool(ridge_moves),
    ))
    draws = sink.draws()
    # Reflecting whole chains maps the posterior to itself only when the priors of θ and a
    # are symmetric about 0; otherwise the mirror image is a different (less probable)
    # distribution and a reflected chain would no longer sample the posterior.
    mirror_symmetric = pri["theta"][0] == 0.0 and pri["a"][0] == 0.0
    flips = twopl_setup.normalise_signs(draws, anc) if mirror_symmetric else [0] * n_chains
    acceptance = {k: to_numpy(v) for k, v in result["acceptance"].items()}
    info = driver.common_info(
        SAMPLER, schedule, seconds=seconds, device=dev, seed=ss, n_persons=n, n_items=m,
        observed_fraction=resp.observed_fraction, priors=pri,
        adapt=bool(adapt),
        proposal_sd_initial=sd0,
        proposal_sd={k: to_numpy(v) for k, v in result["sd"].items()},
        anchors={str(resp.persons[i]): v for i, v in anc},
        sign_flips=flips,
        sign_normalisation=mirror_symmetric,
        ridge_moves=bool(ridge_moves),
        ridge_acceptance=None if result["ridge_acceptance"] is None
        else to_numpy(result["ridge_acceptance"]),
        ridge_sd=None if result["ridge_sd"] is None else to_numpy(result["ridge_sd"]),
    )
    return SamplerPosterior(
        draws=draws,
        labels={"theta": resp.persons.copy(), "a": resp.items.copy(), "b": resp.items.copy()},
        sampler=SAMPLER,
        acceptance=acceptance,
        info=info,
        model="2pl",
        codes=codes,
    )

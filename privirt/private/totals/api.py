"""Private Rasch difficulties from noisy item totals and a coarse raw-score histogram.

Three layers, each usable alone:

1. statistics and sensitivity — :func:`totals_statistics`, :func:`totals_sensitivity`
   (replace-one-person; L2² = m + 2 jointly);
2. release — :func:`release_totals`: calibrate (ε, δ) → ρ, split ρ between the totals and the
   histogram by the derived rule, debit the ledger, then add exact discrete Gaussian noise;
   the :class:`TotalsRelease` may be published;
3. estimation — :func:`estimate_from_release`: pure post-processing (marginal fit of the
   ability spread, empirical-Bayes shrinkage with the known noise variance, parametric-bootstrap
   intervals); :func:`private_totals_estimate` is 2 then 3.

Complete data by default; ``missing="mcar"`` declares cells missing completely at random and
releases the answered counts too (maths: :mod:`privirt.private.totals.marginal_missing`).  Proofs and the
derivation of the split: ``docs/totals.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from . import intervals, marginal, marginal_missing, mcar_bootstrap, shrinkage
from ._release_check import check_release
from .saddle import EXACT_FIT_ITEMS
from ..._checks import brief, check_confidence, check_n_boot
from ..._constants import MISSING_DOMAINS
from ..._progress import resolve_progress, ticker
from ..._threads import one_blas_thread
from ..._results import ItemEstimate
from ..._seeds import describe_seed, estimate_stream, numpy_rng, seed_sequence
from ..accounting import NEIGHBOURING_RELATION
from ...exceptions import warn_if_noise_dominates, warn_one_person
from ..statement import PrivacyStatement
from .._inputs import refuse_absent_persons, validate_call
from ..measurements import TotalsGaussian
from ...data.responses import ResponsesLike
from ..sensitivity import Sensitivity, _sqrt_up
from ..spends import reports_spends

__all__ = ["totals_statistics", "totals_sensitivity", "missing_statistics", "missing_sensitivity",
           "TotalsRelease", "TotalsEstimate", "release_totals", "estimate_from_release",
           "private_totals_estimate", "check_release"]

# ---------------------------------------------------------------------------------------
# 1. statistics and sensitivity
def totals_statistics(codes: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Item totals s_i = Σ_l X_li and the binned raw-score histogram (both int64).

    ``codes`` is a complete persons × items 0/1 matrix; bin b counts the persons whose raw
    score lies in ``[edges[b], edges[b+1])``.
    """
    X = np.asarray(codes)
    totals = X.sum(axis=0, dtype=np.int64)
    scores = X.sum(axis=1, dtype=np.int64)
    hist = np.bincount(np.searchsorted(edges, scores, side="right") - 1, minlength=len(edges) - 1)
    return totals.astype(np.int64), hist.astype(np.int64)


def totals_sensitivity(n_items: int, n_bins: int, relation: str = "replace") -> Sensitivity:
    """Joint sensitivity of (totals, histogram) to replacing one person's row.

    A row change moves each total by 0 or ±1 (at most m coordinates) and moves at most one
    person between two bins (two coordinates by 1): L1 ≤ m + 2 and L2² ≤ m + 2, attained by
    the rows of all ones and all zeros when their scores fall in different bins
    (``docs/totals.md``).  With one bin the histogram is the public n: L2² = m.

    ``relation="add_remove"`` (a documented variant; no private function uses it): adding or
    removing a row changes the totals by the row and one bin by 1, so L1 = L2² = m + 1 (the
    all-ones row), whatever the bins — not half of the replace bound.
    """
    m = int(n_items)
    if relation == "add_remove":
        return Sensitivity(float(m + 1), _sqrt_up(m + 1), "tight", _ADD_REMOVE, m + int(n_bins))
    _check_relation(relation)
    extra = 2 if n_bins >= 2 else 0
    s = m + extra
    return Sensitivity(float(s), _sqrt_up(s), "tight", NEIGHBOURING_RELATION, m + int(n_bins))


_ADD_REMOVE = "add or remove one person's row"


def _check_relation(relation: str) -> None:
    if relation not in ("replace", "add_remove"):
        raise ValueError(f"relation must be 'replace' or 'add_remove', got {relation!r}")


def missing_statistics(
    codes: np.ndarray, k_edges: np.ndarray, r_edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Statistics of incomplete data: item totals, answered counts, binned (answered, score) histogram.

    ``codes`` is a persons × items matrix of 1 (correct), 0 (incorrect) or −1 (missing).
    Returns s_i = #{l : x_li = 1}, a_i = #{l : x_li ≠ −1} (both (m,)) and the (K, R) histogram
    of persons by the bin of their number of answered items k_l (``k_edges``) and the bin of
    their score r_l (``r_edges``); bins are ``[edges[b], edges[b+1])`` over 0 … m.
    What :func:`release_totals` releases (with noise) under ``missing="mcar"``
    (``docs/totals.md`` §7).
    """
    X = np.asarray(codes)
    correct = X == 1
    seen = X != -1
    totals = correct.sum(axis=0, dtype=np.int64)
    answered = seen.sum(axis=0, dtype=np.int64)
    K, R = len(k_edges) - 1, len(r_edges) - 1
    kb = np.searchsorted(k_edges, seen.sum(axis=1), side="right") - 1
    rb = np.searchsorted(r_edges, correct.sum(axis=1), side="right") - 1
    joint = np.bincount(kb * R + rb, minlength=K * R).reshape(K, R)
    return totals, answered, joint.astype(np.int64)


def missing_sensitivity(n_items: int, n_cells: int, relation: str = "replace") -> Sensitivity:
    """Joint sensitivity of :func:`missing_statistics` to replacing one person's row and mask.

    Per item the pair (Δs_i, Δa_i) is (0, 0), (±1, 0) (0 ↔ 1), (0, ±1) (0 ↔ missing) or
    (±1, ±1) (1 ↔ missing): squared and absolute norm ≤ 2; the person moves between at most two
    histogram cells (2 more).  L1 ≤ 2m + 2, L2² ≤ 2m + 2, attained by all-correct against
    all-missing when (m, m) and (0, 0) are in different cells, which holds for every layout
    with more than one cell (``docs/totals.md`` §7); with one cell, 2m.

    ``relation="add_remove"`` (a documented variant; no private function uses it): the row's
    own statistics, L1 = L2² = 2m + 1 (the all-correct row) — not half of the replace bound.
    """
    m = int(n_items)
    if relation == "add_remove":
        s = 2 * m + 1
        return Sensitivity(float(s), _sqrt_up(s), "tight", _ADD_REMOVE, 2 * m + int(n_cells))
    _check_relation(relation)
    s = 2 * m + (2 if n_cells >= 2 else 0)
    return Sensitivity(float(s), _sqrt_up(s), "tight", NEIGHBOURING_RELATION, 2 * m + int(n_cells))


# ---------------------------------------------------------------------------------------
# 2. the release
@dataclass(frozen=True, eq=False)
class TotalsRelease:
    """Noisy item totals and raw-score histogram: the output of :func:`release_totals`.

    Attributes
    ----------
    totals : pandas.Series of int64
        Noisy number of correct answers per item (indexed by item).
    histogram : pandas.Series of int64
        Noisy number of persons per raw-score bin (index ``"lo-hi"``, scores inclusive); with
        more than one bin of the number answered (``missing="mcar"``), per (answered, score)
        cell, answered-major (a two-level index ``answered``, ``score``).
    edges : ndarray of int
        Bin b holds raw scores ``edges[b] .. edges[b+1] - 1``.
    n_persons : int
        The public number of persons.
    sigma_totals, sigma_histogram : float
        Discrete Gaussian scales of the two parts.
    split : float
        Share of ρ spent on the histogram.
    privacy : PrivacyStatement
    missing : {"none", "mcar"}
        The declared input domain.  ``"mcar"``: ``totals`` counts correct answers,
        ``answered`` the noisy number of persons who answered each item, and the histogram is
        of (number answered, observed score) over ``k_edges`` × ``edges`` (``docs/totals.md`` §7).
    answered : pandas.Series of int64 or None
        Noisy answered counts (``missing="mcar"`` only).
    sigma_answered : float
        Their discrete Gaussian scale (NaN without them).
    k_edges : ndarray of int or None
        Bin c of the number answered holds ``k_edges[c] .. k_edges[c+1] - 1`` items
        (``missing="mcar"``; one bin ``[0, m + 1]`` when the design keeps one).
    """

    totals: pd.Series
    histogram: pd.Series
    edges: np.ndarray
    n_persons: int
    sigma_totals: float
    sigma_histogram: float
    split: float
    privacy: PrivacyStatement
    missing: str = "none"
    answered: pd.Series | None = None
    sigma_answered: float = math.nan
    k_edges: np.ndarray | None = None

    @property
    def items(self) -> pd.Index:
        return self.totals.index

    def to_dict(self) -> dict:
        """A JSON-friendly dict of everything released."""
        return {
            "items": [str(i) for i in self.items],
            "totals": [int(v) for v in self.totals],
            "histogram": [int(v) for v in self.histogram],
            "edges": [int(v) for v in self.edges],
            "n_persons": self.n_persons,
            "sigma_totals": self.sigma_totals,
            "sigma_histogram": self.sigma_histogram,
            "split": self.split,
            "missing": self.missing,
            **({} if self.answered is None else {"answered": [int(v) for v in self.answered],
                                                 "sigma_answered": self.sigma_answered,
                                                 "k_edges": [int(v) for v in self.k_edges]}),
            "privacy": self.privacy.to_dict(),
        }


_COMPLETE_ONLY = ('private_totals_estimate/release_totals were told missing="none" (complete data) but '
                  'the data have missing cells; declare missing="mcar" (missing completely at random) '
                  "or use privirt.private_spectral_estimate (nothing was spent)")


def _check_missing(missing: Any) -> str:
    if not isinstance(missing, str) or missing not in MISSING_DOMAINS:
        raise ValueError(f'missing must be "none" (complete data) or "mcar" (missing completely at '
                         f"random), got {brief(missing)}")
    return missing


@reports_spends
def release_totals(
    X: ResponsesLike,
    *,
    epsilon: float,
    delta: float | None = None,
    ledger: Any = None,
    seed: Any = None,
    items: Sequence[Any] | None = None,
    note: str = "",
    n_persons: int | None = None,
    engine: str = "local",
    client: Any = None,
    missing: str = "none",
) -> TotalsRelease:
    """Release noisy item totals and a raw-score histogram, (ε, δ)-DP.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses (one row per person); missing cells only with
        ``missing="mcar"``.
    epsilon, delta : float
        Target (ε, δ), ε > 0 finite, δ ∈ (0, 1); ``delta=None``: the ``ledger``'s δ, else 1e-4.
    ledger : Ledger or path, optional
        Debited (one transaction) before any noise is drawn.
    seed : int or numpy.random.SeedSequence, optional
        Reproducible noise **without privacy** (``privacy.private`` is False).
    items : sequence, optional
        The public item list (required for long input).
    note : str
        Stored with the ledger entry.
    n_persons : int, optional
        The public number of persons (required for long input and with ``engine="dask"``;
        see :func:`privirt.release_counts`).
    engine, client : {"local", "dask"}; distributed.Client, optional
        ``"dask"``: ``X`` is a Parquet folder/glob, a dask DataFrame/Array or a
        :class:`~privirt.stats.dask_engine.DaskSource`; the statistics are summed on the cluster
        (``client``, else a local cluster), then the ledger is debited, then the noise is
        drawn once.
    missing : {"none", "mcar"}
        The declared (public) input domain.  ``"none"``: complete data, missing cells are
        refused.  ``"mcar"``: cells may be missing completely at random; the release is the
        noisy correct counts, answered counts and the (number answered, observed score) histogram
        (joint L2² ≤ 2m + 2, ``docs/totals.md`` §7) — also for data that happen to be complete.

    Returns
    -------
    TotalsRelease
    """
    missing = _check_missing(missing)
    call = validate_call(X, epsilon=epsilon, delta=delta, seed=seed, ledger=ledger, device="cpu",
                         items=items, n_persons=n_persons, p0=1.0, note=note, engine=engine,
                         client=client)
    ss, ledger, resp = call.seed, call.ledger, call.resp
    on_dask = getattr(resp, "engine", "local") == "dask"
    mcar = missing == "mcar"
    if not mcar and not on_dask and resp.has_missing:
        raise ValueError(refuse_absent_persons(call.n_persons, call.data_persons) or _COMPLETE_ONLY)
    n, m = resp.shape
    meas = TotalsGaussian.calibrate(call.target, n_persons=n, n_items=m, missing=missing)
    warn_if_noise_dominates(meas.sigmas[0], n, "item totals")  # public n and σ only
    edges, k_edges = meas.edges, meas.k_edges
    B, K = len(edges) - 1, len(k_edges) - 1
    if mcar:
        sig_t, sig_a, sig_h = meas.sigmas
    else:
        (sig_t, sig_h), sig_a = meas.sigmas, math.nan

    if on_dask:  # exact sums from the cluster; nothing else comes back
        st = resp.statistics(pairwise=False)
        answered = np.asarray(st.answered, dtype=np.int64)
        if not mcar and np.any(answered != n):
            # (st.n_rows is the public n here: persons the data lack are exactly the missing cells
            # when every person answered all items or none; those are refused in their own words)
            by_k = np.asarray(st.score_hist).sum(axis=1)  # persons by number answered
            absent = None if by_k[1:-1].any() else n - int(by_k[0])
            raise ValueError(refuse_absent_persons(n, absent) or _COMPLETE_ONLY)
        totals = np.asarray(st.totals, dtype=np.int64)
        raw = np.asarray(st.score_hist, dtype=np.int64)  # persons by (number answered, observed score)
        raw = np.add.reduceat(raw, np.asarray(k_edges[:-1], dtype=np.intp), axis=0)
        hist = np.add.reduceat(raw, np.asarray(edges[:-1], dtype=np.intp), axis=1).astype(np.int64).ravel()
    elif mcar:
        totals, answered, joint = missing_statistics(resp.codes, k_edges, edges)
        hist = joint.ravel()
    else:
        totals, hist = totals_statistics(resp.codes, edges)
    exact = [totals, answered, hist] if mcar else [totals, hist]
    # committed before any noise exists
    spend_id = None if ledger is None else ledger.spend(meas.cost, mechanism=meas.ledger_label, note=str(note),
                                                        asked=call.target)
    noisy = meas.apply(exact, seed=ss)
    del totals, hist, exact
    statement = meas.statement(private=call.private, n_persons=n, spend_id=spend_id)
    labels = [f"{edges[b]}-{edges[b + 1] - 1}" for b in range(B)]
    if K > 1:
        hindex = pd.MultiIndex.from_product(
            [[f"{k_edges[c]}-{k_edges[c + 1] - 1}" for c in range(K)], labels], names=["answered", "score"])
    else:
        hindex = pd.Index(labels, name="score")
    return TotalsRelease(
        totals=pd.Series(noisy[0], index=resp.items.copy(), name="total"),
        histogram=pd.Series(noisy[-1], index=hindex, name="persons"),
        edges=np.asarray(edges, dtype=np.int64), n_persons=int(n), sigma_totals=float(sig_t),
        sigma_histogram=float(sig_h), split=meas.split, privacy=statement, missing=missing,
        answered=pd.Series(noisy[1], index=resp.items.copy(), name="answered") if mcar else None,
        sigma_answered=float(sig_a), k_edges=np.asarray(k_edges, dtype=np.int64) if mcar else None,
    )


# ---------------------------------------------------------------------------------------
# 3. estimation (post-processing)
@dataclass(frozen=True, eq=False)
class TotalsEstimate(ItemEstimate):
    """Result of :func:`private_totals_estimate` / :func:`estimate_from_release`.

    Attributes
    ----------
    beta : pandas.Series
        Private difficulties (centred; higher = harder), after shrinkage.
    se : pandas.Series
        Standard errors (sampling and privacy noise, the spread of difficulties the noise
        hides and the ability model's uncertainty; parametric bootstrap, ``docs/totals.md``
        §5.2, §5.4).
    ci : pandas.DataFrame
        Columns ``lo``, ``hi`` indexed by item: intervals at ``confidence``.
    beta_unshrunk : pandas.Series
        The marginal fit before shrinkage (what the intervals are built around).
    privacy : PrivacyStatement
    release : TotalsRelease
    info : dict
        Shrinkage factor, ability model (τ, κ, whether free ability weights were fitted),
        ``histogram_share`` φ ∈ [0, 1] (the release's share of the information about the ability
        spread; below ``intervals.LOW_HISTOGRAM_SHARE`` = ½ the prior holds most of it and the
        intervals are calibrated on average over the prior on the spread, ``docs/totals.md`` §5.4),
        bootstrap size, confidence, seed; for a ``missing="mcar"`` release also ``missing``,
        the mean answered share, ``k_bins`` (bins of the number answered) and ``answered_icc``
        (the fitted intra-class correlation of the number answered, not φ above; 0 with one bin).
    """

    beta: pd.Series
    se: pd.Series
    ci: pd.DataFrame
    beta_unshrunk: pd.Series
    privacy: PrivacyStatement
    release: TotalsRelease
    info: dict = field(default_factory=dict, repr=False)

    def _frame_columns(self) -> dict[str, Any]:
        return {"beta": self.beta, "se": self.se, "lo": self.ci["lo"], "hi": self.ci["hi"],
                "beta_unshrunk": self.beta_unshrunk}


def _fit(totals: np.ndarray, hist: np.ndarray, n: int, var_t: float, var_h: float, edges: np.ndarray,
         shrink: bool, support=None):
    """The marginal fit of the shrunk (or only re-centred) totals: (fit, β, factor, diagnostics)."""
    if shrink:
        p, c, diag = shrinkage.shrink_totals(totals, n, var_t)
    else:
        p, c, diag = shrinkage.centre_totals(totals, n, var_t), 1.0, {}
    fit = marginal.fit_spread(p, hist, n, var_h, edges, support=support)
    return fit, fit.beta, c, diag


# batched small refits: BLAS's threads only cost on shared cores (privirt._threads); large m
# (products with thousands of columns) keeps them until measured (BENCHMARKS.md, issue 24)
@one_blas_thread(when=lambda release, **kw: len(getattr(release, "totals", ())) <= 256)
def estimate_from_release(
    release: TotalsRelease,
    *,
    confidence: float = 0.95,
    n_boot: int = 200,
    seed: Any = None,
    progress: bool | None = None,
) -> TotalsEstimate:
    """Difficulties, standard errors and intervals from a :class:`TotalsRelease`.

    Pure post-processing (no privacy cost): the centred totals are shrunk by empirical Bayes
    with the known noise variance (all difficulties equal when their spread is not detectable),
    the ability distribution is fitted to the noisy histogram (a posterior over the spread τ
    and the bimodality κ of a normal-mixture model), and the totals are mapped to
    difficulties through it (``docs/totals.md``).  Intervals: parametric bootstrap of
    the unshrunk fit from the released statistics (``n_boot`` replicates, their true
    difficulties drawn from the shrinkage model's posterior, §5.2), normal quantiles around the
    unshrunk fit (bias-corrected only when free ability weights were fitted, §5.3).

    Parameters
    ----------
    release : TotalsRelease
    confidence : float in (0, 1)
    n_boot : int
        Bootstrap replicates (≥ 20), or 0 to skip the intervals (``se`` and ``ci`` are NaN).
    seed : int or SeedSequence, optional
        Seed of the bootstrap (ordinary randomness; it does not affect privacy), drawn from
        its child stream ``"estimate"`` as in :func:`private_totals_estimate`: the seed of the release
        here reproduces ``private_totals_estimate(X, seed=seed)`` exactly.
    progress : bool or None
        A progress bar on stderr for the bootstrap (simulation, then the refits); ``None``
        (default): only when stderr is a terminal.
    """
    if not isinstance(release, TotalsRelease):
        raise ValueError(f"release must be a TotalsRelease (from release_totals), got {type(release).__name__}")
    check_release(release)
    check_confidence(confidence)
    check_n_boot(n_boot)
    ss = estimate_stream(seed)
    tick = ticker(2 * int(n_boot), "bootstrap intervals", unit="steps", enabled=resolve_progress(progress),
                  phase=lambda d: "simulation" if d < n_boot else "refits")
    if release.missing == "mcar":
        return _estimate_mcar(release, confidence, n_boot, ss, tick)
    n = release.n_persons
    edges = release.edges
    t = release.totals.to_numpy(dtype=float)
    h = release.histogram.to_numpy(dtype=float)
    var_t = release.sigma_totals**2
    var_h = release.sigma_histogram**2

    # the two fits take seconds beyond EXACT_FIT_ITEMS items (saddlepoint bins): a bar of their own
    fit_tick = ticker(2, "ability model fit", unit="fits",
                      enabled=resolve_progress(progress) and t.size > EXACT_FIT_ITEMS)
    fit, beta, c, diag = _fit(t, h, n, var_t, var_h, edges, shrink=True)
    fit_tick(1)
    beta_u = _fit(t, h, n, var_t, var_h, edges, shrink=False, support=fit.support())[1]
    fit_tick(1)

    z = float(stats.norm.isf((1.0 - confidence) / 2.0))  # (isf: finite for confidence within 1e-16 of 1)
    if n_boot:
        # the replicates' truths redrawn from their posterior (docs/totals.md §5.2)
        err = intervals.bootstrap_errors(numpy_rng(ss, "bootstrap"), numpy_rng(ss, "bootstrap", "truth"), fit, beta,
                                         t, h, n, var_t, var_h, edges, release.sigma_totals,
                                         release.sigma_histogram, int(n_boot), tick)
        se = err.std(axis=0, ddof=1)
        centre = _centre(fit, beta_u, err)
    else:
        se = np.full(beta.size, np.nan)
        centre = np.full(beta.size, np.nan)
    info = {
        "shrinkage": float(c), "tau": float(fit.tau), "kappa": fit.kappa_mean, "free_ability_weights": fit.flexible,
        "histogram_share": intervals.histogram_share(fit), "n_boot": int(n_boot), "confidence": float(confidence),
        "split": release.split, "n_bins": int(len(edges) - 1), "detect": diag,
        "bootstrap_seed": describe_seed(ss),
    }
    return _result(release, beta, se, centre, z, beta_u, info)


def _centre(fit, beta_u: np.ndarray, err: np.ndarray) -> np.ndarray:
    """The intervals' centre: the unshrunk fit, bias-corrected only against free ability weights
    (the mixture's shape bias, measured on the distribution the histogram pinned down); under
    the mixture the bootstrap's bias is that of the priors where the histogram is vague and
    negligible where it is not (docs/totals.md §5.3; MCAR §7.3)."""
    beta_u = np.asarray(beta_u, dtype=float)
    return beta_u - err.mean(axis=0) if fit.flexible else beta_u.copy()


def _result(release: TotalsRelease, beta, se, centre, z, beta_u, info) -> TotalsEstimate:
    items = release.items
    if release.n_persons < 2 and info["n_boot"]:
        # one person: no difference between items is identified, and every replicate of one
        # person's scores refits to the same values (a zero-width interval): unbounded instead
        se = np.full(len(items), np.inf)
        centre = np.asarray(beta, dtype=float)
        info = {**info, "note": warn_one_person("the totals estimate")}  # public n only
    return TotalsEstimate(
        beta=pd.Series(beta, index=items.copy(), name="beta"),
        se=pd.Series(se, index=items.copy(), name="se"),
        ci=pd.DataFrame({"lo": centre - z * se, "hi": centre + z * se}, index=items.copy()),
        beta_unshrunk=pd.Series(beta_u, index=items.copy(), name="beta_unshrunk"),
        privacy=release.privacy, release=release, info=info,
    )


def _answered_model(release: TotalsRelease, q: np.ndarray):
    """(φ, thinning matrix) of the number answered fitted to the histogram's k-margins, or
    (0, None) with one bin of k (cells then modelled as answered independently)."""
    k_edges = release.k_edges
    if k_edges is None or len(k_edges) < 3:
        return 0.0, None
    h = release.histogram.to_numpy(dtype=float)
    mix = marginal_missing.answered_mixing(q)  # each item keeps its own answer rate
    icc = float(marginal_missing.fit_answered_icc(h, release.n_persons, release.sigma_histogram**2, np.mean(q),
                                                  k_edges, len(release.edges) - 1, mixing=mix))
    pk = marginal_missing.answered_distribution(len(release.items), np.mean(q), icc, mixing=mix)
    return icc, marginal_missing.thinning_matrix(pk, k_edges, release.edges)


def _fit_mcar(release: TotalsRelease, shrink: bool, support=None):
    """The MCAR fit of the released statistics: (fit, β, factor, diagnostics, q, φ)."""
    n = release.n_persons
    tp, q, v = marginal_missing.ratio_proportions(
        release.totals.to_numpy(dtype=float), release.answered.to_numpy(dtype=float), n,
        release.sigma_totals**2, release.sigma_answered**2)
    if shrink:
        p, c, diag = shrinkage.shrink_totals(tp, n, v)
    else:
        p, c, diag = shrinkage.centre_totals(tp, n, v), 1.0, {}
    icc, A = _answered_model(release, q)
    fit = marginal_missing.fit_spread_mcar(p, q, release.histogram.to_numpy(dtype=float), n,
                                           release.sigma_histogram**2, release.edges, support=support, A=A)
    return fit, fit.beta, c, diag, q, icc


def _estimate_mcar(release: TotalsRelease, confidence: float, n_boot: int, ss, tick) -> TotalsEstimate:
    """:func:`estimate_from_release` for a ``missing="mcar"`` release (``docs/totals.md`` §7)."""
    n, edges = release.n_persons, release.edges
    fit, beta, c, diag, q, icc = _fit_mcar(release, shrink=True)
    k_edges = None if release.k_edges is None or len(release.k_edges) < 3 else release.k_edges
    support = fit.support()
    beta_u = _fit_mcar(release, shrink=False, support=support)[1]
    z = float(stats.norm.isf((1.0 - confidence) / 2.0))  # (isf: finite for confidence within 1e-16 of 1)
    if n_boot:
        # the replicates' truths and ability models drawn from their posterior, as for complete data
        # (docs/totals.md §5.2, §7.3, §7.4)
        err = mcar_bootstrap.bootstrap_errors_mcar(
            numpy_rng(ss, "bootstrap"), numpy_rng(ss, "bootstrap", "truth"), fit, beta,
            release.totals.to_numpy(dtype=float), release.answered.to_numpy(dtype=float), n,
            (release.sigma_totals, release.sigma_answered, release.sigma_histogram), edges, k_edges, icc,
            int(n_boot), tick)
        se = err.std(axis=0, ddof=1)
        centre = _centre(fit, beta_u, err)
    else:
        se = np.full(beta.size, np.nan)
        centre = np.full(beta.size, np.nan)
    info = {
        "shrinkage": float(c), "tau": float(fit.tau), "kappa": fit.kappa_mean,
        "histogram_share": intervals.histogram_share(fit), "n_boot": int(n_boot), "confidence": float(confidence),
        "split": release.split, "n_bins": int(len(edges) - 1),
        "detect": diag, "bootstrap_seed": describe_seed(ss), "missing": "mcar",
        "answered_share": float(np.mean(q)), "k_bins": 1 if k_edges is None else int(len(k_edges) - 1),
        "answered_icc": float(icc),
    }
    return _result(release, beta, se, centre, z, beta_u, info)


@reports_spends
def private_totals_estimate(
    X: ResponsesLike,
    *,
    epsilon: float,
    delta: float | None = None,
    ledger: Any = None,
    seed: Any = None,
    items: Sequence[Any] | None = None,
    confidence: float = 0.95,
    n_boot: int = 200,
    note: str = "",
    n_persons: int | None = None,
    engine: str = "local",
    client: Any = None,
    missing: str = "none",
    progress: bool | None = None,
) -> TotalsEstimate:
    """Private Rasch difficulties with intervals: :func:`release_totals` then
    :func:`estimate_from_release`.

    Parameters are those of the two functions; ``seed`` seeds both the noise (then the result
    is NOT private) and the bootstrap.  ``missing="mcar"`` declares that cells may be missing
    completely at random (see :func:`release_totals`); ``progress`` as in :func:`estimate_from_release`.

    Examples
    --------
    >>> import privirt
    >>> X, theta, beta = privirt.simulate_rasch(2000, 20, seed=1)
    >>> fit = privirt.private_totals_estimate(X, epsilon=1.0)   # doctest: +SKIP
    >>> fit.to_frame().columns.tolist()                         # doctest: +SKIP
    ['beta', 'se', 'lo', 'hi', 'beta_unshrunk']
    """
    check_confidence(confidence)
    check_n_boot(n_boot)
    progress = resolve_progress(progress)
    ss = seed_sequence(seed)
    release = release_totals(X, epsilon=epsilon, delta=delta, ledger=ledger, seed=ss, items=items,
                             note=note, n_persons=n_persons, engine=engine,
                             client=client, missing=missing)
    return estimate_from_release(release, confidence=confidence, n_boot=n_boot,
                                 seed=ss, progress=progress)

"""The public private entry points: validate once → choose the measurement → debit the ledger
→ apply → state."""

from __future__ import annotations

import contextlib
from typing import Any, Literal, Sequence

import numpy as np
import pandas as pd

from ..._backend import resolve_device
from ..._checks import brief, check_choice, check_confidence, check_flag, check_n_boot
from ..._constants import MECHANISMS
from ..._progress import resolve_progress, ticker
from ..._threads import single_blas_thread
from ..._seeds import SeedLike, estimate_stream
from ...exceptions import warn_if_noise_dominates
from ...data.responses import Responses, ResponsesLike
from ..spends import reports_spends
from ..sensitivity import pairwise_counts_sensitivity
from .._inputs import PrivateCall, validate_call
from .graph import graph_frame, n_edges, sample_comparison_graph
from .intervals import counts_intervals, default_n_boot
from ..measurements import CountsGaussian, CountsLaplace, Measurement, ResponsesRR
from .noisy_likelihood import noise_aware_estimate, noise_aware_se0, noise_variance
from .results import NoisyCounts, PrivateSpectralResult, check_noisy_counts
from ..rr import debiased_count_sd, debiased_counts

__all__ = ["release_counts", "private_spectral_estimate", "spectral_from_release", "COUNT_MEASUREMENTS",
           "NOISE_AWARE_BELOW"]

CountMechanism = Literal["gaussian", "laplace"]
Mechanism = Literal[MECHANISMS]

#: ``mechanism=`` name -> the measurement that releases noisy pairwise counts.
COUNT_MEASUREMENTS: dict[str, type] = {"gaussian": CountsGaussian, "laplace": CountsLaplace}

#: ``estimator="auto"`` uses the noise-aware estimate where ``noise_aware_se0`` is below this
#: (measured better than the spectral estimate in every cell there, ``benchmarks/bench_noisy_y.py``)
NOISE_AWARE_BELOW: float = 0.3

Estimator = Literal["auto", "spectral", "noise_aware"]

#: Up to this many items the point estimate's solves run on one BLAS thread (as the bootstrap's).
SMALL_FIT_ITEMS: int = 256
#: From this many items ``progress`` draws a (one-step) bar for the point estimate too.
BAR_FROM_ITEMS: int = 1000


def _check_estimator(estimator: Any) -> None:
    check_choice("estimator", estimator, ("auto", "spectral", "noise_aware"))


def _debit(call: PrivateCall, meas: Measurement) -> int | None:
    """Debit the ledger (committed) before any noise is drawn."""
    if call.ledger is None:
        return None
    return call.ledger.spend(meas.cost, mechanism=meas.ledger_label, note=call.note, asked=call.target)


def _check_count_options(mechanism: Any, sensitivity: Any) -> None:
    if not isinstance(mechanism, str) or mechanism not in COUNT_MEASUREMENTS:  # ['gaussian']: unhashable
        raise ValueError(
            f"mechanism must be 'gaussian' or 'laplace' for released counts, got {brief(mechanism)} "
            "(randomized response is available in private_spectral_estimate)"
        )
    _check_sensitivity(sensitivity)


def _check_sensitivity(sensitivity: Any) -> None:
    if not isinstance(sensitivity, str) or sensitivity not in ("tight", "paper"):
        raise ValueError(f"sensitivity must be 'tight' or 'paper', got {brief(sensitivity)}")


# ---------------------------------------------------------------------------------------
@reports_spends
def release_counts(
    X: ResponsesLike,
    *,
    epsilon: float,
    delta: float | None = None,
    mechanism: CountMechanism = "gaussian",
    p0: float | str = 1.0,
    sensitivity: Literal["tight", "paper"] = "tight",
    ledger: Any = None,
    seed: SeedLike = None,
    device: str = "auto",
    note: str = "",
    items: Sequence[Any] | None = None,
    n_persons: int | None = None,
    engine: str = "local",
    client: Any = None,
    progress: bool | None = None,
) -> NoisyCounts:
    """Release the pairwise differential counts with discrete noise, (ε, δ)-DP.

    Y_ij = #persons who answered both i and j, i right and j wrong, for every directed pair
    of a comparison graph (complete for ``p0=1``, else Erdős–Rényi with edge probability
    ``p0``), plus independent integer noise calibrated to the target and the proven
    sensitivity (``docs/privacy.md``).  The result may be published.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, missing allowed.  One person = one row; the guarantee
        protects replacing any one row (responses *and* which items were answered).
    epsilon : float
        Target ε > 0 (finite).
    delta : float, optional
        Target δ in (0, 1); default: the ledger's δ
        (:meth:`~privirt.Ledger.default_delta`) when ``ledger`` is given, else 1e-4.
        The Gaussian spends it; the Laplace mechanism is pure ε-DP and
        leaves it unused (its δ is only the sampler's TV term, normally 0).
    mechanism : {"gaussian", "laplace"}
        Discrete Gaussian (σ calibrated by the tight zCDP → (ε, δ) conversion) or discrete
        Laplace (scale = Δ₁/ε).
    p0 : float in (0, 1] or "auto"
        Edge probability of the comparison graph; ``"auto"`` = (1 + c)·log m / m.  The graph
        is public and resampled until connected.
    sensitivity : {"tight", "paper"}
        ``"tight"`` (proven, default) or the paper's m(m−1) (one per released cell), kept for
        comparison.
    ledger : Ledger or path, optional
        Debited (one transaction) before any noise is drawn; raises
        :class:`~privirt.BudgetExceeded` — with nothing released and the ledger unchanged —
        when the composed total would pass the budget.  Refused together with ``seed``.
    seed : int, numpy.random.SeedSequence or None
        Reproducible noise **without privacy** (``privacy.private`` is False).  The graph,
        the noise and any coin flips come from named child streams of it.
    device : {"auto", "cpu", "gpu"}
        Where the counts are computed (the noise is drawn on the host).
    note : str
        Stored with the ledger entry.
    items : sequence, optional
        The public item set.  The result covers exactly these items, in this order; an item
        nobody answered is an all-missing column (it is not dropped, which would reveal that
        nobody answered it), and a data item not in the list is an error.  Without it the
        item set is the columns of ``X`` (wide input, a public schema); a long table's items
        are read from its rows and so depend on who is in the data: long input without
        ``items`` is refused.
    engine : {"local", "dask"}
        ``"dask"``: ``X`` is a wide Parquet folder/glob/file, a dask DataFrame or Array
        (``docs/scale.md``); the exact counts are summed on the cluster, then the ledger is
        debited and the noise drawn here.  Needs ``n_persons``.
    client : distributed.Client or str, optional
        ``engine="dask"``: the cluster or its scheduler address (default: a local cluster).
    n_persons : int, optional
        The public number of persons.  Required for a long table (whose persons are read
        from its rows: a person without answers has none); persons absent from the data count
        as all-missing rows, and more persons in the data than this is an error.  Without it
        the number of persons is the rows of ``X`` (wide input).
    progress : bool or None
        A progress bar on stderr while the noise is drawn, for releases of more than
        :data:`~privirt.private.measurements.NOISE_CHUNK` (4 million) counts (25 million at
        m = 5000 take about 10 s), and from :data:`BAR_FROM_ITEMS` items a one-step bar for the
        graph, calibration and exact counts before it; ``None`` (default): only when stderr is
        a terminal.

    Returns
    -------
    NoisyCounts
        ``.Y`` (noisy int64, items × items), ``.graph``, ``.privacy``.

    Raises
    ------
    ValueError
        ε ≤ 0, ε infinite or NaN, δ ∉ (0, 1), p0 ∉ (0, 1], an unknown mechanism, an ε whose
        noise cannot be sampled, ``seed`` together with ``ledger``.
    BudgetExceeded
        The ledger's budget would be exceeded.
    """
    _check_count_options(mechanism, sensitivity)
    call = validate_call(X, epsilon=epsilon, delta=delta, seed=seed, ledger=ledger, device=device,
                         items=items, n_persons=n_persons, p0=p0, note=note,
                         engine=engine, client=client)
    return _release_counts(call, mechanism, sensitivity, resolve_progress(progress))


def _release_counts(call: PrivateCall, mechanism: str, sensitivity: str, progress: bool = False) -> NoisyCounts:
    from ...stats.counts import differential_counts

    resp = call.resp
    m = resp.n_items
    # graph, calibration and exact counts: seconds at thousands of items (a one-step bar)
    prep = ticker(1, "pairwise counts and calibration", unit="step", enabled=progress and m >= BAR_FROM_ITEMS)
    prep(at=0)
    G = sample_comparison_graph(m, call.p0, seed=call.seed)
    sparse = not bool(G.sum() == m * (m - 1))
    sens = pairwise_counts_sensitivity(m, graph=G if sparse else None, bound=sensitivity)
    meas = COUNT_MEASUREMENTS[mechanism].calibrate(call.target, sens)
    # sd of the noise: σ (discrete Gaussian) or √2·scale (discrete Laplace), against the public n
    sd = meas.noise_value * (1.0 if mechanism == "gaussian" else 2.0**0.5)
    warn_if_noise_dominates(sd, call.n_persons, "pairwise counts")

    # The raw counts are computed, the ledger debited (committed), and only then is noise drawn.
    if getattr(resp, "engine", "local") == "dask":  # summed on the cluster, exact
        Y = resp.differential_counts()
    else:
        # one kernel whatever share of the cells is missing (the time tells nothing of it); its
        # small products on one BLAS thread (waking the pool cost ~40 ms a request at m = 40)
        with single_blas_thread() if m <= SMALL_FIT_ITEMS else contextlib.nullcontext():
            Y = differential_counts(resp, device=call.device, private=True)
    prep(1)
    spend_id = _debit(call, meas)
    r, c = np.nonzero(G)
    values = np.asarray(Y[r, c], dtype=np.int64)
    noisy_values = meas.apply(values, seed=call.seed, progress=progress)
    if noisy_values.shape != values.shape:  # pragma: no cover
        raise RuntimeError("the mechanism returned a different number of values")
    del Y, values
    Ynoisy = np.zeros((m, m), dtype=np.int64)
    Ynoisy[r, c] = noisy_values

    extra = ("sensitivity='paper': the paper's looser bound, more noise than needed",) \
        if sensitivity == "paper" else ()
    statement = meas.statement(private=call.private, p0=call.p0, n_edges=n_edges(G),
                               n_persons=call.n_persons, spend_id=spend_id, notes=extra)
    items = resp.items
    return NoisyCounts(Y=pd.DataFrame(Ynoisy, index=items.copy(), columns=items.copy()),
                       graph=graph_frame(G, items), privacy=statement)


# ---------------------------------------------------------------------------------------
@reports_spends
def private_spectral_estimate(
    X: ResponsesLike,
    *,
    epsilon: float,
    delta: float | None = None,
    mechanism: Mechanism = "gaussian",
    p0: float | str = 1.0,
    shuffle: bool = False,
    ledger: Any = None,
    seed: SeedLike = None,
    device: str = "auto",
    sensitivity: Literal["tight", "paper"] = "tight",
    rr_estimator: Literal["debiased", "plain"] = "debiased",
    note: str = "",
    items: Sequence[Any] | None = None,
    n_persons: int | None = None,
    engine: str = "local",
    client: Any = None,
    confidence: float = 0.95,
    n_boot: int | None = None,
    estimator: Estimator = "auto",
    progress: bool | None = None,
) -> PrivateSpectralResult:
    """Private Rasch item difficulties: the spectral estimator on private data (Algorithm 2).

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, missing allowed.
    epsilon, delta : float
        Target (ε, δ); ε > 0 finite, δ ∈ (0, 1).  δ is used by the Gaussian and by shuffled
        randomized response; Laplace and unshuffled randomized response are pure ε-DP.
        ``delta=None`` (default) is 1e-4, or against a ``ledger`` the ledger's δ — except for
        shuffled randomized response, which spends δ itself and so asks for
        :data:`~privirt.private.ledger.DEFAULT_DELTA_SHARE` (a tenth) of the ledger's δ, never all of it.
    mechanism : {"gaussian", "laplace", "randomized_response"}
        ``"gaussian"``/``"laplace"``: noisy counts as from :func:`release_counts`, clipped at
        zero, and the spectral estimator on the comparison graph with the default
        regularisation (λ = 1 on every graph edge), which keeps the chain irreducible.
        ``"randomized_response"``: every cell is randomized with ε₀ per bit (user-level
        ε = m·ε₀ by basic composition); **missing cells are replaced by a fair coin flip**, so
        which items a person answered is protected too and the guarantee holds on
        {0, 1, missing}^m (at the cost of shrinking estimates when data are missing).
    p0 : float in (0, 1] or "auto"
        Edge probability of the Erdős–Rényi comparison graph (1 = complete).
    shuffle : bool
        Randomized response only: shuffle the reports and claim the amplification of Feldman,
        McMillan & Talwar (2021) where its condition holds (otherwise no amplification is
        claimed and a note says so).  The calibration uses the public number of persons.
    ledger, seed, device, sensitivity, note, items, n_persons, engine, client
        As in :func:`release_counts` (randomized response needs the data in memory).
    rr_estimator : {"debiased", "plain"}
        Randomized response: which estimate is ``beta`` (both are returned).
    confidence : float in (0, 1), default 0.95
        Level of the intervals ``ci``.
    n_boot : int or None
        Parametric-bootstrap replicates for ``se`` and ``ci`` (≥ 20), or 0 to skip them
        (``se`` and ``ci`` are then NaN).  Post-processing of the release: no privacy cost
        (``docs/intervals.md``).  ``None`` (default): for ``"gaussian"`` and ``"laplace"``,
        200 up to 1000 items and 200·(1000/m)², at least 50, beyond
        (:func:`~privirt.private.counts.intervals.default_n_boot`: a replicate costs m²);
        ``"randomized_response"`` has no intervals (``se`` and ``ci`` are
        None; a bootstrap of it under-covers at the usual ε, so ``n_boot > 0`` is refused).
        ``seed`` also seeds the bootstrap; without it the bootstrap uses fresh OS entropy.
        Cost: each replicate simulates up to max(1000, 8·10⁶/m²) persons' counts (k·m²):
        about 0.2 s a call at n = 2000, m = 20 and 5 s at m = 100 on two cores; pass
        ``n_boot=0`` when only the point estimate is needed.
    estimator : {"auto", "spectral", "noise_aware"}
        Post-processing of the noisy counts (Gaussian/Laplace): ``"spectral"`` is Algorithm 2
        as published (spectral estimator on the counts clipped at zero); ``"noise_aware"`` the
        quasi-likelihood that knows the noise (:func:`~privirt.private.counts.noisy_likelihood.noise_aware_estimate`);
        ``"auto"`` (default) takes ``"noise_aware"`` where its public predicted standard error
        ``noise_aware_se0(n, m, ν)`` is below :data:`NOISE_AWARE_BELOW` (where it was measured
        better in every cell, ``BENCHMARKS.md``) and ``"spectral"`` otherwise.  The choice uses
        public n, m and the noise variance only; ``info["estimator"]`` says which was used.
        With ``mechanism="randomized_response"`` only ``"auto"``: ``rr_estimator`` chooses there.
    progress : bool or None
        A progress bar on stderr for the bootstrap (its calibration, then its replicates), the
        noise of releases beyond 4 million counts and, from :data:`BAR_FROM_ITEMS` items, one-step
        bars for the exact counts and for the point estimate; ``None`` (default): only when
        stderr is a terminal.

    Returns
    -------
    PrivateSpectralResult
        ``.beta``, ``.se``, ``.ci``, ``.privacy`` and the fit.
    """
    check_choice("mechanism", mechanism, MECHANISMS)
    check_flag("shuffle", shuffle)
    if shuffle and mechanism != "randomized_response":
        raise ValueError("shuffle=True applies to mechanism='randomized_response' only")
    check_choice("rr_estimator", rr_estimator, ("debiased", "plain"))
    _check_estimator(estimator)
    if mechanism == "randomized_response" and estimator == "noise_aware":
        raise ValueError("estimator='noise_aware' needs additive noise on the counts; use mechanism='gaussian' "
                         "or 'laplace' (randomized response has its own estimators, rr_estimator=)")
    if mechanism == "randomized_response" and estimator != "auto":
        # (it was accepted and ignored: the randomized bits are always post-processed by rr_estimator)
        raise ValueError(f"estimator={estimator!r} applies to additive noise on the counts (mechanism='gaussian' "
                         "or 'laplace'); randomized response has its own: rr_estimator='debiased' (default) or "
                         "'plain' (the spectral estimate on the randomized bits, as the paper)")
    confidence = check_confidence(confidence)
    progress = resolve_progress(progress)
    rr = mechanism == "randomized_response"
    n_boot = (0 if rr else None) if n_boot is None else check_n_boot(n_boot)  # None: default_n_boot(m)
    if rr and n_boot:
        raise ValueError("randomized response has no bootstrap intervals (they under-cover at the "
                         "usual epsilon, docs/intervals.md); pass n_boot=0 or use mechanism='gaussian'")
    if rr:  # unused by randomized response, but refused as for the counts, before any debit
        _check_sensitivity(sensitivity)
    else:
        _check_count_options(mechanism, sensitivity)
    call = validate_call(X, epsilon=epsilon, delta=delta, seed=seed, ledger=ledger, device=device,
                         items=items, n_persons=n_persons, p0=p0, note=note,
                         engine=engine, client=client, spends_delta=bool(rr and shuffle))

    if mechanism != "randomized_response":
        counts = _release_counts(call, mechanism, sensitivity, progress)
        return spectral_from_release(counts, confidence=confidence, n_boot=n_boot, seed=call.seed,
                                     device=call.device, estimator=estimator, progress=progress)
    return _private_spectral_rr(call, bool(shuffle), rr_estimator)


def _item_intervals(items: pd.Index, boot: Any) -> tuple[pd.Series, pd.DataFrame]:
    """``se`` and ``ci`` labelled by item (NaN without a bootstrap)."""
    nan = np.full(len(items), np.nan)
    se, lo, hi = (nan, nan, nan) if boot is None else (boot.se, boot.lo, boot.hi)
    return (pd.Series(se, index=items.copy(), name="se"),
            pd.DataFrame({"lo": lo, "hi": hi}, index=items.copy()))


def spectral_from_release(
    counts: NoisyCounts,
    *,
    confidence: float = 0.95,
    n_boot: int | None = None,
    seed: SeedLike = None,
    device: str = "auto",
    estimator: Estimator = "auto",
    progress: bool | None = None,
) -> PrivateSpectralResult:
    """Algorithm 2's estimate, standard errors and intervals from released noisy counts.

    Pure post-processing of a :class:`NoisyCounts` (no privacy cost): the spectral estimator
    on the counts clipped at zero, on the release's comparison graph with λ = 1 on every
    edge (as :func:`private_spectral_estimate`), and a parametric bootstrap that uses only the
    released counts, the public n, the graph and the known noise law (``docs/intervals.md``).

    Parameters
    ----------
    counts : NoisyCounts
        From :func:`release_counts` (discrete Gaussian or Laplace).  Read by item label
        (:func:`~privirt.private.counts.results.check_noisy_counts`): frames stored in another
        order are aligned to ``Y.index``; other labels, or a graph that is not symmetric or has
        self-loops, are refused in one line.
    confidence : float in (0, 1), default 0.95
    n_boot : int or None
        Bootstrap replicates (≥ 20), or 0 to skip the intervals (``se``, ``ci`` NaN).
        ``None`` (default): 200 up to 1000 items, fewer beyond (:func:`~privirt.private.counts.intervals.default_n_boot`).
    seed : int or SeedSequence, optional
        Seed of the bootstrap (ordinary randomness; it does not affect privacy), drawn from
        its child stream ``"estimate"`` as in :func:`private_spectral_estimate`: the seed of the release
        here reproduces ``private_spectral_estimate(X, seed=seed)`` exactly.
    device : {"auto", "cpu", "gpu"}
        Where the point estimate is solved (the bootstrap runs on the CPU).
    estimator : {"auto", "spectral", "noise_aware"}
        As in :func:`private_spectral_estimate`; the bootstrap re-runs the estimator used.
    progress : bool or None
        As in :func:`private_spectral_estimate`.

    Returns
    -------
    PrivateSpectralResult
    """
    from ...rasch.spectral import spectral_from_counts

    counts = check_noisy_counts(counts)  # read by item label; a malformed release refused
    confidence = check_confidence(confidence)
    n_boot = default_n_boot(len(counts.items)) if n_boot is None else check_n_boot(n_boot)
    progress = resolve_progress(progress)
    ss = estimate_stream(seed)
    st = counts.privacy
    if st.n_persons is None or st.noise_parameter not in ("sigma", "scale"):  # pragma: no cover
        raise ValueError("these counts do not say their number of persons and noise scale; "
                         "release them with release_counts")
    _check_estimator(estimator)
    resolve_device(device)  # checked whichever estimator runs (only the spectral one uses it)
    G = counts.graph.to_numpy()
    nu = noise_variance(st)
    se0 = noise_aware_se0(int(st.n_persons), len(counts.items), nu)
    used = estimator if estimator != "auto" else ("noise_aware" if se0 < NOISE_AWARE_BELOW else "spectral")
    # the fit's m × m solves (one per Fisher-scoring step) are small: BLAS's threads only cost
    # on shared cores (measured 54 ms a 100 × 100 solve at load 9, privirt._threads)
    # the point estimate takes seconds from ~5000 items (m² passes): a one-step bar says so
    point_bar = ticker(1, f"point estimate ({used})", unit="fit", enabled=progress and len(counts.items) >= BAR_FROM_ITEMS)
    point_bar(at=0)
    with single_blas_thread() if len(counts.items) <= SMALL_FIT_ITEMS else contextlib.nullcontext():
        if used == "noise_aware":
            fit = noise_aware_estimate(counts)
            reg = 1.0
        else:
            fit = spectral_from_counts(counts.clipped(), items=counts.items, graph=G,
                                       regularization="auto", device=device)
            reg = fit.regularization
    point_bar(1)
    boot = None
    if n_boot:
        boot = counts_intervals(counts.Y.to_numpy(), G, fit.beta.to_numpy(), int(st.n_persons),
                                noise_parameter=st.noise_parameter, noise_value=float(st.noise_value),
                                regularization=reg, confidence=confidence,
                                n_boot=n_boot, seed=ss, estimator=used, noise_var=nu, progress=progress)
    se, ci = _item_intervals(counts.items, boot)
    info = {"n_boot": n_boot, "confidence": confidence, "estimator": used, "noise_aware_se0": se0}
    if boot is not None:
        info.update(boot.info)
    return PrivateSpectralResult(beta=fit.beta, privacy=st, spectral=fit, graph=counts.graph,
                                 counts=counts, se=se, ci=ci, info=info)


def _private_spectral_rr(call: PrivateCall, shuffle: bool, rr_estimator: str) -> PrivateSpectralResult:
    from ...stats.counts import differential_counts
    from ...rasch.spectral import spectral_from_counts

    resp = call.resp
    if getattr(resp, "engine", "local") == "dask":
        raise ValueError("randomized response needs every response in memory; use "
                         "engine='local' or mechanism='gaussian' or 'laplace'")
    n, m = resp.shape
    G = sample_comparison_graph(m, call.p0, seed=call.seed)
    meas = ResponsesRR.calibrate(call.target, n_items=m, n_persons=n, shuffle=shuffle)
    # a lower bound on the debiased counts' noise SD, from public n and ε₀ only (as the counts' σ)
    warn_if_noise_dominates(debiased_count_sd(meas.keep_probability, n), n, "debiased counts")
    spend_id = _debit(call, meas)
    Z = meas.apply(resp, seed=call.seed)

    # post-processing of the randomized reports
    Y_plain = differential_counts(Responses(Z, pd.RangeIndex(n), resp.items), device=call.device)
    Y_plain = Y_plain.astype(np.float64)
    q = meas.keep_probability
    Y_deb = np.clip(debiased_counts(Z, q, Y_plain), 0.0, None)
    fits = {
        name: spectral_from_counts(np.where(G, Yc, 0.0), items=resp.items, graph=G,
                                   regularization="auto", device=call.device)
        for name, Yc in (("plain", Y_plain), ("debiased", Y_deb))
    }
    chosen = fits[rr_estimator]
    statement = meas.statement(private=call.private, p0=call.p0, n_edges=n_edges(G),
                               n_persons=n, spend_id=spend_id)
    info = {"keep_probability": q, "rr_estimator": rr_estimator, "n_boot": 0}
    return PrivateSpectralResult(
        beta=chosen.beta, privacy=statement, spectral=chosen, graph=graph_frame(G, resp.items),
        counts=None, beta_plain=fits["plain"].beta, beta_debiased=fits["debiased"].beta,
        info=info,
    )

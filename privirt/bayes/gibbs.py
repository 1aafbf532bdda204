"""The 2PNO Gibbs sampler (Sheng, Welling & Zhu 2014): :func:`gibbs_2pno` and
:func:`gibbs_2pno_replicate`.

All chains (and, for the replicate runner, all data sets) advance together as one batch of
arrays shaped (batch, persons, items): on the CPU by the fused engine of :mod:`.twopno_fused`
(``engine="fused"``, the numba kernel) or by :func:`.twopno.cpu_iteration`
(``engine="numpy"``), on the GPU by the fused kernels of :mod:`.twopno_gpu`.  See
``docs/gibbs.md``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .._backend import get_xp, resolve_device
from .._checks import check_flag
from .._progress import resolve_progress
from .._seeds import child, seed_sequence
from ..data.responses import Responses, ResponsesLike, as_responses
from . import driver, twopno, twopno_fused, twopno_gpu
from . import moves as _moves
from . import slopes as _slopes
from ..data._labels import name_items
from .posterior import SamplerPosterior
from .schedule import Schedule, resolve_warmup

__all__ = ["gibbs_2pno", "gibbs_2pno_replicate", "ENGINES"]

SAMPLER = "gibbs_2pno"
#: Values of ``engine``: ``"auto"`` is ``"fused"`` when numba is installed, else ``"numpy"``.
ENGINES = ("auto", "fused", "numpy")
#: Draw the orbit moves (scale and shift, :mod:`privirt.bayes.moves`) each iteration where
#: they are valid.  On by default; benchmarks and tests set it False for the plain
#: three-step sampler.
ORBIT_MOVES = True


def sampler_device(device: str, engine: Any) -> str:
    """The device that runs: ``device="auto"`` with a CPU engine named (``"fused"``,
    ``"numpy"``) is the CPU, so that the same call runs alike with and without a GPU."""
    if device == "auto" and isinstance(engine, str) and engine in ("fused", "numpy"):
        return "cpu"
    return resolve_device(device)


def resolve_engine(engine: Any, device: str) -> str:
    """The engine that runs: ``"fused"`` or ``"numpy"`` on the CPU, ``"gpu"`` on the GPU."""
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ValueError(f'engine must be "auto", "fused" or "numpy", got {engine!r}')
    if device != "cpu":
        if engine != "auto":
            raise ValueError(
                f'engine="{engine}" selects a CPU engine; pass device="cpu" with it '
                '(or engine="auto" on the GPU)'
            )
        return "gpu"
    if engine == "auto":
        return "fused" if twopno_fused.numba_available() else "numpy"
    if engine == "fused" and not twopno_fused.numba_available():
        raise ImportError(
            'engine="fused" needs numba: python -m pip install "privirt[fast]" '
            '(or use engine="numpy")'
        )
    return engine


def _check_keep_draws(keep_draws: Any) -> bool:
    return check_flag("keep_draws", keep_draws)


class _Batch:
    """D data sets × C chains advanced together as B = D·C batch elements."""

    #: cells per block of the CPU iteration (the working set stays in the CPU cache)
    _CHUNK_CELLS = twopno.CHUNK_CELLS

    def __init__(
        self,
        codes: np.ndarray,  # (D, n, k) int8
        n_chains: int,
        priors: dict,
        inits: list[dict[str, np.ndarray]],  # length B
        seeds: list[np.random.SeedSequence],  # length B, sampler streams
        device: str,
        keep_z: bool = False,
        engine: str = "auto",
        free: bool = False,
        anchors: _slopes.Anchors | None = None,
    ) -> None:
        self.device = device
        self.engine = resolve_engine(engine, device)
        D, n, k = codes.shape
        C = n_chains
        self.D, self.C, self.B, self.n, self.k = D, C, D * C, n, k
        pa, pb = priors["a"], priors["b"]
        # prior precisions and precision × mean (0 for flat priors)
        pa_prec, pa_lin = (1.0 / pa[1], pa[0] / pa[1]) if pa else (0.0, 0.0)
        pb_prec, pb_lin = (1.0 / pb[1], pb[0] / pb[1]) if pb else (0.0, 0.0)
        theta = np.stack([i["theta"] for i in inits])
        a = np.stack([i["a"] for i in inits])
        b = np.stack([i["b"] for i in inits])
        self.iteration = 0
        if device != "cpu":
            self.gpu = twopno_gpu.GpuIteration(
                get_xp(device), codes, C, theta, a, b, seeds, (pa_prec, pa_lin, pb_prec, pb_lin),
                twopno_gpu.gpu_kernels(), free=free, anchors=anchors, moves=ORBIT_MOVES,
            )
            self.theta, self.a, self.b = self.gpu.theta, self.gpu.a, self.gpu.b
            return
        if self.engine == "fused":
            # chain bb reads data set bb // C; the state arrays are updated in place
            self.fused = twopno_fused.FusedGibbs(
                codes, n_chains=C, priors=priors, theta=theta, a=a, b=b,
                keys=twopno_fused.philox_keys(seeds), engine="numba", keep_z=keep_z,
                free=free, anchors=anchors, moves=ORBIT_MOVES,
            )
            self.theta, self.a, self.b = self.fused.theta, self.fused.a, self.fused.b
            return

        self.cpu = twopno.CpuData.build(codes, C, priors, keep_z, self._CHUNK_CELLS, free=free,
                                        anchors=anchors, moves=ORBIT_MOVES)
        # two Philox streams per chain: uniforms of the Z step, and everything else
        self.draws = twopno.GeneratorDraws(
            [np.random.Generator(np.random.Philox(child(s, 0))) for s in seeds],
            [np.random.Generator(np.random.Philox(child(s, 1))) for s in seeds],
        )
        self.theta, self.a, self.b = theta, a, b

    def reflect(self, ref: Any) -> Any:
        """Reflect (θ, a) -> (−θ, −a) in place in every chain whose centred θ points away
        from ``ref`` ((B, n) on the batch's device); returns the (B,) flags."""
        xp = get_xp(self.device)
        th = self.theta
        flip = ((th - th.mean(axis=1, keepdims=True)) * ref).sum(axis=1) < 0
        sign = xp.where(flip, -1.0, 1.0)
        self.theta *= sign[:, None]
        self.a *= sign[:, None]
        return flip

    @property
    def Z(self) -> Any:
        """The latent Z of the last iteration (GPU; CPU only with ``keep_z=True``)."""
        if self.engine == "fused":
            return self.fused.Z
        return self.cpu.Z if self.engine == "numpy" else self.gpu.Z

    def step(self, store: Mapping[str, Any] | None = None, slot: int = -1) -> None:
        """One iteration of all batch elements.

        With ``store`` (C-contiguous arrays ``{"a", "b", "theta"}`` shaped (B, n_keep, ·) on
        the batch's device) and ``slot >= 0``, this iteration's values are also written to
        draw ``slot``.
        """
        if store is not None and slot < 0:
            store = None
        if self.engine == "fused":
            self.fused.step(store, slot)  # writes draw `slot` itself
        elif self.engine == "numpy":
            state = twopno.cpu_iteration(twopno.GibbsState(self.theta, self.a, self.b),
                                         self.cpu, self.draws)
            self.theta, self.a, self.b = state.theta, state.a, state.b
            if store is not None:
                for p, v in (("a", self.a), ("b", self.b), ("theta", self.theta)):
                    store[p][:, slot] = v
        else:
            self.gpu.step(self.iteration, store, slot)
        self.iteration += 1


def _run(
    resps: Sequence[Responses],
    *,
    schedule: Schedule,
    priors: dict,
    init: dict[str, np.ndarray],
    device: str,
    seqs: Sequence[np.random.SeedSequence],
    progress: bool,
    keep_draws: bool,
    label: str,
    engine: str,
    free: bool = False,
    anchors: _slopes.Anchors | None = None,
) -> list[SamplerPosterior]:
    dev = sampler_device(device, engine)
    xp = get_xp(dev)
    codes = np.stack([r.codes for r in resps])  # (D, n, k)
    D, n, k = codes.shape
    C, n_keep = schedule.n_chains, schedule.n_draws
    driver.check_memory(D * C, n_keep, {"a": k, "b": k, "theta": n}, keep_draws)  # before C starting points
    inits, seeds, refs = [], [], []
    changed: dict[str, list[int]] = {}  # init block -> chains it was oriented in
    for d, ss in enumerate(seqs):
        for c in range(C):
            init_rng = np.random.Generator(np.random.Philox(child(ss, c, 0)))
            if free:
                start, ref = _slopes.free_init(codes[d], init_rng, C > 1, anchors)
                refs.append(ref)
                for key in _slopes.orient_init(start, init, anchors):
                    changed.setdefault(key, []).append(c)
            else:
                start = twopno.default_init(codes[d], init_rng, jitter=C > 1)
                start.update(init)
            start["theta"] = _slopes.apply_anchors(start["theta"], anchors)
            inits.append(start)
            seeds.append(child(ss, c, 1))
    _slopes.warn_reflected_init(changed)
    batch = _Batch(codes, C, priors, inits, seeds, dev, engine=engine, free=free,
                   anchors=anchors)
    B = batch.B
    sink = driver.DrawSink(xp, B, {"a": k, "b": k, "theta": n}, n_keep, keep_draws)
    ident = _identification(free, anchors, priors)
    reflect = ident.startswith("reflection")
    flipped: list[Any] = []

    def step(slot: int) -> None:
        if reflect and slot == 0:  # orient every chain once, before its first kept draw
            flipped.append(batch.reflect(xp.asarray(np.stack(refs))))
        if keep_draws:
            batch.step(sink.store, slot)  # the step writes draw `slot` itself
        else:
            batch.step()
            if slot >= 0:
                sink.update({"a": batch.a, "b": batch.b, "theta": batch.theta})

    bar = driver.progress_bar(schedule, label, progress)
    sync = (lambda: xp.cuda.Device().synchronize()) if dev == "gpu" else None
    _, seconds = driver.timed(lambda: driver.iterate(step, schedule, bar), sync)
    prior_info = {"a": priors["a"] or ("flat" if free else "flat on a > 0"),
                  "b": priors["b"] or "flat"}
    flips = np.asarray(driver.to_numpy(flipped[0])) if flipped else np.zeros(B, dtype=bool)
    spec = _moves.move_spec(n, k, anchors, ORBIT_MOVES, flat_a=priors["a"] is None)
    orbit = [m for m in ("scale", "shift", "latent") if getattr(spec, m)]
    out = []
    for d, resp in enumerate(resps):
        sl = slice(d * C, (d + 1) * C)
        labels = {"a": resp.items.copy(), "b": resp.items.copy(), "theta": resp.persons.copy()}
        info = driver.common_info(
            SAMPLER, schedule, seconds=seconds, device=dev, seed=seqs[d], n_persons=n,
            n_items=k, observed_fraction=resp.observed_fraction, priors=prior_info,
            batch_size=B, has_missing=resp.has_missing, engine=batch.engine,
            slopes="free" if free else "positive", identification=ident,
            anchors=dict(anchors.given) if anchors is not None else {},
            reflected_chains=[int(c) for c in np.flatnonzero(flips[sl])], orbit_moves=orbit,
        )
        out.append(SamplerPosterior(
            draws=sink.draws(sl) if keep_draws else None,
            streaming=None if keep_draws else sink.summaries(sl),
            labels=labels, sampler=SAMPLER, info=info, model="2pno", codes=resp.codes,
        ))
    return out


def _identification(free: bool, anchors: _slopes.Anchors | None, priors: dict) -> str:
    """How the direction of the θ scale is fixed (``info["identification"]``)."""
    if not free:
        return "slopes a > 0"
    if anchors is not None and anchors.identifies_sign:
        return "anchors"
    if priors["a"] is not None and priors["a"][0] != 0:
        return "prior mean of a (weakly: the posterior is not symmetric under reflection)"
    return ("reflection: at the first kept draw each chain's (θ, a) is reflected to "
            "(−θ, −a) where its θ correlates negatively with the data's first principal "
            "component (oriented so that its item loadings sum to >= 0); "
            "info['reflected_chains'] lists them")


def gibbs_2pno(
    X: ResponsesLike,
    *,
    n_iter: int = 10000,
    warmup: int | None = None,
    thin: int = 1,
    n_chains: int = 1,
    priors: Mapping[str, Any] | None = None,
    init: Mapping[str, Any] | None = None,
    device: str = "auto",
    seed: int | np.random.SeedSequence | None = None,
    progress: bool | None = None,
    keep_draws: bool = True,
    engine: str = "auto",
    slopes: str = "positive",
    anchors: Mapping[Any, Any] | None = None,
) -> SamplerPosterior:
    """Gibbs sampler for the two-parameter normal ogive model (Sheng, Welling & Zhu 2014).

    Samples the posterior of P(y_ij = 1) = Φ(a_j θ_i − b_j) with θ_i ~ N(0, 1) by Albert's
    (1992) data augmentation, with three exact moves each iteration along the directions the
    single-site steps cross slowly (a joint rescaling of θ and a, a shift of θ against b, and
    each item's latent scale; ``info["orbit_moves"]`` lists those that run);
    ``docs/gibbs.md`` gives the exact conditionals and moves.  With
    ``slopes="free"`` it is the model of MCMCpack's ``MCMCirt1d`` (ideal points from roll
    calls, items keyed in either direction).

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses with missing cells (anything
        :func:`privirt.as_responses` accepts).  Missing cells are skipped: they contribute
        to no sum.  Persons or items without any response are dropped (with a warning).
    n_iter : int
        Total number of iterations, *including* the warmup (the paper's convention:
        10,000 iterations of which 5,000 warmup, its "burn-in").
    warmup : int
        Initial iterations discarded (default 5000); must be smaller than ``n_iter``.
    thin : int
        Keep the first post-warmup iteration and every ``thin``-th after it: each chain
        yields ``ceil((n_iter − warmup) / thin)`` draws (the rule of every sampler here).
    n_chains : int
        Independent chains, started from over-dispersed data-based values (when more than
        one) and advanced together in one batch.
    priors : dict, optional
        ``{"a": (mean, var)}``: N(mean, var) prior on a_j truncated to a_j > 0 (default:
        flat on a_j > 0, as in the paper; untruncated, and flat on the real line by default,
        with ``slopes="free"``); ``{"b": (mean, var)}``: N(mean, var) prior on b_j
        (default: flat, as in the paper).  With a flat prior on b, an item answered all
        correct or all incorrect has an improper posterior (a warning says so).  The flat
        prior on a is improper in the far tail: steep items in small samples can drift to
        huge slopes; ``{"a": (1.0, 1.0)}`` avoids that (see ``docs/gibbs.md``).
    init : dict, optional
        Starting values ``{"theta": (n,), "a": (k,), "b": (k,)}`` (any subset; scalars are
        broadcast; each finite with |value| <= 1e6, as prior means); the others start from
        the data, jittered per chain when ``n_chains > 1``: a = 1, b = −√2 Φ⁻¹(p̂_j) from
        item j's proportion correct p̂_j and θ the standardised probit Φ⁻¹ of each person's
        proportion correct (among the items answered); with ``slopes="free"`` θ the
        standardised first principal component, a from each item's correlation with it and
        b = −√(1 + a²) Φ⁻¹(p̂_j) (``docs/gibbs.md``, "Starting values").  With free slopes
        and anchors, a given θ or a that points against the anchors is reflected, and a given
        a with no clear direction (e.g. a = 1 on items of both signs) is signed per item like
        the default's (a warning says so).
    device : {"auto", "cpu", "gpu"}
        Where to run; ``"auto"`` uses a CUDA GPU when cupy sees one.
    seed : int or numpy.random.SeedSequence, optional
        Makes the run reproducible (on a given device).  Chain c uses the child streams
        ``(c, 0)`` (starting values) and ``(c, 1)`` (the sampler: a Philox4x32-10
        counter-based stream keyed by that sequence on GPU and in the fused CPU engine,
        numpy's Philox generators in the numpy engine) of the seed's sequence.  The same
        seed gives different chains on different engines.
    progress : bool or None
        Draw a progress bar on stderr; None: only when stderr is a terminal.
    keep_draws : bool
        Keep every draw (``posterior.draws``, (chain, draw, index)); ``False`` keeps
        streaming summaries only, in memory independent of the number of iterations.
    engine : {"auto", "fused", "numpy"}
        The CPU engine.  ``"fused"``: one multi-threaded numba sweep over the persons × items
        matrix per iteration (needs the ``fast`` extra, numba); ``"numpy"``: blocked
        whole-matrix numpy/scipy passes; ``"auto"``: ``"fused"`` when numba is installed,
        else ``"numpy"``.  Both sample the same posterior from different random streams
        (``docs/gibbs.md``).  The GPU has its own kernels: there ``engine`` must be
        ``"auto"``; ``device="auto"`` with a CPU engine named runs on the CPU.
        ``info["engine"]`` says which ran (``"gpu"`` on the GPU).
    slopes : {"positive", "free"}
        ``"positive"`` (default; the paper's model for test items keyed one way): a_j > 0,
        and a warning names the items whose item–rest correlation is negative (a > 0
        cannot fit them).  ``"free"``: a_j of either sign (roll calls, reverse-worded items),
        drawn from the untruncated bivariate normal conditional; ``priors["a"]`` is then an
        untruncated normal.  The reflection (θ, a) -> (−θ, −a) leaves the likelihood
        unchanged: ``anchors`` fix the direction, and without them each chain is reflected
        once, before its first kept draw, to agree with the data's first principal
        component (``info["identification"]`` and ``info["reflected_chains"]`` say which).
    anchors : dict, optional
        Person label -> a number (θ_i fixed at that value, never updated) or ``"+"`` /
        ``"-"`` (θ_i drawn from its conditional truncated to θ_i > 0 / θ_i < 0), as
        ``theta.constraints`` of MCMCpack's ``MCMCirt1d``, e.g. ``{"KENNEDY": "-", "HELMS":
        "+"}``.  Anchored persons start on their constraint.  (In :func:`privirt.mh_2pl` a
        number is a sign constraint; here it fixes the value, as in MCMCirt1d.)

    Returns
    -------
    SamplerPosterior
        A :class:`~privirt.bayes.Posterior` with blocks ``"a"``, ``"b"`` (labelled by
        item) and ``"theta"`` (by person); ``.summary(param)`` gives mean, sd, quantiles,
        batch-means MCSE, R-hat and ESS; ``.to_arviz()`` includes the pointwise
        log-likelihood; ``info`` holds the keys of :data:`privirt.bayes.COMMON_INFO_KEYS`
        plus ``batch_size``, ``has_missing``, ``engine``, ``slopes``, ``identification``,
        ``anchors``, ``reflected_chains`` and ``orbit_moves``.

    Raises
    ------
    ValueError
        Bad responses, schedule (``warmup >= n_iter``, non-positive counts), priors, init,
        seed, ``keep_draws`` (not a bool), ``slopes`` or anchors (unknown person, a value
        neither a finite number nor "+" / "-").
    ImportError
        ``device="gpu"`` without cupy.

    Examples
    --------
    >>> import privirt
    >>> X, theta, a, b = privirt.simulate_2pno(300, 8, seed=1)
    >>> post = privirt.gibbs_2pno(X, n_iter=400, warmup=200, seed=2, progress=False)
    >>> post.summary("a").columns.tolist()
    ['mean', 'sd', 'q2.5', 'q50', 'q97.5', 'mcse', 'rhat', 'ess']
    """
    warmup = resolve_warmup(warmup)
    schedule = Schedule(n_iter, warmup, thin, n_chains)
    keep_draws = _check_keep_draws(keep_draws)
    pri = twopno.check_priors(priors)
    resolve_engine(engine, sampler_device(device, engine))
    ss = seed_sequence(seed) or np.random.SeedSequence()
    free = _slopes.check_slopes(slopes)
    resp = as_responses(X)
    start = twopno.check_init(init, resp.n_persons, resp.n_items, free=free)
    anc = _slopes.check_anchors(anchors, resp.persons)
    twopno.warn_improper(resp, pri, anchors=anc)
    if not free:
        _slopes.warn_negative_items(resp)
    return _run(
        [resp], schedule=schedule, priors=pri, init=start, device=device, seqs=[ss],
        progress=resolve_progress(progress), keep_draws=keep_draws, label="gibbs 2pno", engine=engine,
        free=free, anchors=anc,
    )[0]


def gibbs_2pno_replicate(
    datasets: Sequence[ResponsesLike],
    *,
    n_iter: int = 10000,
    warmup: int | None = None,
    thin: int = 1,
    n_chains: int = 1,
    priors: Mapping[str, Any] | None = None,
    device: str = "auto",
    seed: int | np.random.SeedSequence | None = None,
    progress: bool | None = None,
    keep_draws: bool = False,
    engine: str = "auto",
    slopes: str = "positive",
    anchors: Mapping[Any, Any] | None = None,
) -> list[SamplerPosterior]:
    """Run the 2PNO Gibbs sampler on R same-shape data sets in one batch.

    This is the Monte Carlo study use case of Sheng, Welling & Zhu (2014): all R × n_chains
    chains advance together as one (R·n_chains, persons, items) array, on CPU or GPU.

    Parameters
    ----------
    datasets : sequence of ResponsesLike
        R response matrices of the same shape (persons × items).  Persons without a response
        are kept (their θ is sampled from the prior); an item without any response is an
        error.
    n_iter, warmup, thin, n_chains, priors, device, progress, engine
        As in :func:`gibbs_2pno`.
    seed : int or numpy.random.SeedSequence, optional
        Data set r uses the child ``(r,)`` of the seed's sequence —
        ``SeedSequence(seed).spawn(R)[r]`` for an int seed — and gives the same draws as
        ``gibbs_2pno(datasets[r], seed=that child)`` (on the CPU up to floating-point
        summation order, with the fused engine and on the GPU exactly).
    keep_draws : bool
        Default False: streaming summaries (memory independent of ``n_iter``).
    slopes : {"positive", "free"}
        As in :func:`gibbs_2pno` (without its warning about negatively correlated items).
    anchors : dict, optional
        As in :func:`gibbs_2pno`; every data set must hold the anchored persons at the same
        positions (the same labels in the same order, or plain arrays).

    Returns
    -------
    list of SamplerPosterior
        One per data set, in order.
    """
    warmup = resolve_warmup(warmup)
    schedule = Schedule(n_iter, warmup, thin, n_chains)
    keep_draws = _check_keep_draws(keep_draws)
    pri = twopno.check_priors(priors)
    resolve_engine(engine, sampler_device(device, engine))
    ss = seed_sequence(seed) or np.random.SeedSequence()
    free = _slopes.check_slopes(slopes)
    if (isinstance(datasets, (str, bytes, np.ndarray, pd.DataFrame)) or not hasattr(datasets, "__iter__")) \
            and not (isinstance(datasets, np.ndarray) and datasets.ndim == 3):  # None, a number
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
                f"data set {r}: item(s) {name_items(resp.items, empty_items)} have no observed "
                "response; remove them from every data set"
            )
    anc = _slopes.check_anchors(anchors, resps[0].persons)
    for r, resp in enumerate(resps[1:], start=1):
        other = _slopes.check_anchors(anchors, resp.persons)
        if anc is not None and not (np.array_equal(other.con, anc.con)
                                    and np.array_equal(other.fix, anc.fix)):
            raise ValueError(
                f"data set {r}: the anchored persons are not at the same positions as in data "
                "set 0; give every data set the same person labels in the same order"
            )
    for r, resp in enumerate(resps):
        twopno.warn_improper(resp, pri, where=f"data set {r}: ", anchors=anc)
    seqs = [child(ss, r) for r in range(len(resps))]
    return _run(
        resps, schedule=schedule, priors=pri, init={}, device=device, seqs=seqs,
        progress=resolve_progress(progress), keep_draws=keep_draws, label=f"gibbs 2pno ×{len(resps)}",
        engine=engine, free=free, anchors=anc,
    )

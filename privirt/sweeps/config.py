"""Sweep configuration: the TOML schema, its validation and the validated dataclasses.

:func:`load_config` reads a TOML file into a :class:`SweepConfig` of :class:`DatasetSpec`
tables; every invalid value is a one-line ``ValueError`` naming the key.  The layout is
documented in ``docs/sweeps.md``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .._constants import DEFAULT_DELTA
from ..private.accounting import MAX_EPSILON, MIN_EPSILON
from . import registry
from .results import METRICS

__all__ = ["SweepConfig", "DatasetSpec", "DEFAULT_EPSILONS", "DEFAULT_DELTA", "DEFAULT_TRIALS", "MAX_CELLS",
           "load_config", "parse_config"]

#: Default ε grid: 0.01 … 10, four points per decade, log-spaced.
DEFAULT_EPSILONS: tuple[float, ...] = tuple(float(f"{e:.6g}") for e in np.logspace(-2, 1, 13))
DEFAULT_TRIALS = 20
#: the most cells a sweep's grid may have (data sets × mechanisms × ε × trials): a million
#: cells take seconds and hundreds of MB to list before the first runs; ``trials = 10**12``
#: listed them for minutes, its memory growing, without a word
MAX_CELLS = 10**6
#: the longest data-set name, in UTF-8 bytes: it names the report's plot file ``NAME.png``
#: (and its temporary file), which must stay within a file system's 255-byte name limit
MAX_NAME_BYTES = 200

_SOURCES = {
    "synthetic": ({"n", "m"}, {"p_observed", "beta_scale", "resample"}),
    "bundled": ({"dataset"}, set()),
    "csv": ({"path"}, {"format", "person_col", "item_col", "response_col"}),
    "movielens": ({"m"}, {"rank", "min_item_ratings", "shrinkage", "path"}),
}
_DATASET_COMMON = {"source", "name", "mechanisms", "epsilons", "trials", "top_k"}
_TOP_KEYS = {
    "name", "seed", "trials", "epsilons", "delta", "mechanisms", "top_k", "device",
    "report", "mechanism_options", "datasets", "description",
}
_REPORT_KEYS = {"metric", "target"}


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
    """A validated sweep configuration (the TOML layout is in ``docs/sweeps.md``)."""

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
        If the file is not UTF-8 text, the TOML is malformed or a value is invalid; the
        message names the file or the key.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text (byte {exc.start} cannot be decoded); "
                         "save the configuration as UTF-8") from None
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
    source_text : str
        The configuration file's text, kept in the result (``SweepConfig.source_text``) and
        written beside the sweep's results.

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
    delta = _float(raw.get("delta", DEFAULT_DELTA), "the configuration's delta")  # (not "--delta": no such flag)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"the configuration's delta must be in (0, 1), got {delta!r}")
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
        if mech not in registry.REGISTRY:
            raise ValueError(f"mechanism_options: {registry.unknown_message(mech)}")
        if not isinstance(opts, Mapping):
            raise ValueError(f"mechanism_options.{mech} must be a table")
        _no_unknown(opts, set(registry.get(mech).option_keys), f"mechanism_options.{mech}")
        options[mech] = dict(opts)

    report = raw.get("report", {})
    if not isinstance(report, Mapping):
        raise ValueError("report must be a table, e.g. [report] metric = 'l2_error'")
    _no_unknown(report, _REPORT_KEYS, "the [report] table")
    if "target" in report:
        _float(report["target"], "report.target")
    if "metric" in report and (not isinstance(report["metric"], str) or report["metric"] not in METRICS):
        raise ValueError(f"report.metric: unknown metric {report['metric']!r}; choose one of "
                         f"{', '.join(METRICS)}")

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
    _check_cells(specs)
    # (the non-private spectral estimate is the reference on real data: no cells there)
    empty = [s.name for s in specs if s.source != "synthetic" and set(s.mechanisms) == {"spectral"}]
    if empty:  # (one such data set among others was dropped from the sweep without a word)
        what = "the configuration defines no cells" if len(empty) == len(specs) else \
            f"data set(s) {', '.join(map(repr, empty))} define no cells"
        raise ValueError(
            f"{what}: on real data ({', '.join(empty)}) the non-private 'spectral' estimate is "
            "the reference errors are measured against, so it gets no cells; add another "
            "mechanism to mechanisms")
    for where, value in (("name", raw.get("name", name)), ("description", raw.get("description", ""))):
        if not isinstance(value, str):
            raise ValueError(f"{where} must be text, got {value!r}")
    return SweepConfig(
        name=str(raw.get("name", name)), seed=seed, delta=delta, device=device,
        datasets=tuple(specs), mechanism_options=options, report=dict(report),
        description=str(raw.get("description", "")), source_text=source_text,
    )


def _dataset(table: Any, k: int, mechanisms, epsilons, trials, top_k,
             base_dir: Path) -> DatasetSpec:
    where = f"datasets[{k}]"
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be a table")
    source = table.get("source")
    if source is None:
        raise ValueError(f"{where} is missing the key 'source' (one of {', '.join(_SOURCES)})")
    if not isinstance(source, str) or source not in _SOURCES:
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
        if not 0 < params["beta_scale"] <= 1e300:  # (beyond, the simulated difficulties overflow)
            raise ValueError(f"{where}.beta_scale must be positive and at most 1e300, got {params['beta_scale']!r}")
        params["resample"] = _bool(table.get("resample", True), f"{where}.resample")
        default_name = f"synthetic_n{params['n']}_m{params['m']}"
    elif source == "bundled":
        from ..data.datasets import list_datasets

        params["dataset"] = str(table["dataset"])
        if params["dataset"] not in list_datasets():
            raise ValueError(f"{where}: unknown bundled data set {params['dataset']!r}; "
                             f"available: {list_datasets()}")
        default_name = params["dataset"]
    elif source == "csv":
        p = _data_file(table["path"], base_dir, where)
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
        if "path" in table:  # a MovieLens ML-100K ratings file (u.data) instead of latest-small
            p = _data_file(table["path"], base_dir, where)
            params["path"] = str(p)
            params["sha256"] = hashlib.sha256(p.read_bytes()).hexdigest()
        default_name = f"movielens_m{params['m']}"
    if not isinstance(table.get("name", default_name), str):
        raise ValueError(f"{where}: name must be text, got {table['name']!r}")
    name = str(table.get("name", default_name))
    check_dataset_name(name, where)
    mechs = _mechanisms(table["mechanisms"], f"{where}.mechanisms") if "mechanisms" in table \
        else mechanisms
    eps = _epsilons(table["epsilons"], f"{where}.epsilons") if "epsilons" in table else epsilons
    n_trials = _int(table["trials"], f"{where}.trials", minimum=1) if "trials" in table else trials
    k = _int(table["top_k"], f"{where}.top_k", minimum=1) if "top_k" in table else top_k
    if k is not None and "m" in params:
        check_top_k(k, params["m"], f"{where}.top_k" if "top_k" in table else "top_k", name)
    return DatasetSpec(name=name, source=source, params=params, mechanisms=mechs, epsilons=eps,
                       trials=n_trials, top_k=k, base_dir=str(base_dir))


def _cells(spec: DatasetSpec) -> int:
    """The number of cells of a data set, as ``grid.expand_grid`` makes them: one per trial and
    ε of a private mechanism, one per trial of a non-private one, none for ``spectral`` (the
    reference) on real data."""
    per_trial = sum((len(spec.epsilons) if registry.get(mech).private else 1)
                    for mech in spec.mechanisms
                    if not (mech == "spectral" and spec.source != "synthetic"))
    return per_trial * spec.trials


def _check_cells(specs: list[DatasetSpec]) -> None:
    """Refuse a grid of more than :data:`MAX_CELLS` cells, before anything lists them."""
    total = sum(_cells(s) for s in specs)
    if total > MAX_CELLS:
        trials = sorted({s.trials for s in specs})
        said = f"trials = {trials[0]}" if len(trials) == 1 else f"trials up to {trials[-1]}"
        raise ValueError(f"the grid has {total:,} cells (data sets × mechanisms × ε × trials; "
                         f"{said}), more than the {MAX_CELLS:,} a sweep runs; lower trials or the "
                         "number of ε, mechanisms or data sets")


def check_dataset_name(name: str, where: str) -> None:
    """Refuse a data set name that cannot name the report's plot file ``plots/NAME.png``: empty,
    with a path or separator character, or longer than :data:`MAX_NAME_BYTES` in UTF-8.

    Raises
    ------
    ValueError
        Beginning with ``where``.
    """
    if not name or any(c in name for c in '|/\\:*?"<>\n'):
        raise ValueError(f"{where}: data set name {name!r} must be non-empty and free of "
                         "path or separator characters")
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:  # (it names the report's plot file)
        raise ValueError(f"{where}: data set name {name[:20]!r}... is {size} bytes long "
                         f"(UTF-8); give it a 'name' of at most {MAX_NAME_BYTES} bytes (as many "
                         "ASCII characters): it names the report's plot file")


def check_top_k(k: int, m: int, key: str, dataset: str) -> None:
    """Refuse a top-K accuracy's ``k`` that is not below the data set's number of items ``m``.

    Raises
    ------
    ValueError
        If ``k >= m`` (one line naming ``key``, ``m`` and the data set).
    """
    if k >= m:
        raise ValueError(f"{key} = {k} must be less than m = {m}, the number of items of data set "
                         f"{dataset!r}; lower top_k to at most {m - 1}")


def _data_file(value: Any, base_dir: Path, where: str) -> Path:
    p = Path(str(value))
    if not p.is_absolute():
        p = (base_dir / p).resolve()
    if not p.is_file():
        raise ValueError(f"{where}: no such file {str(value)!r} "
                         "(relative paths are read from the config file's folder)")
    return p


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
        ranged = f"{key} = {{start = {start!r}, stop = {stop!r}, num = {num}}}"
    else:
        ranged = ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{key} must be a non-empty list of positive numbers or a table "
                         "{start, stop, num}")
    out: dict[float, float] = {}  # ε as the cell keys write it (6 significant digits) -> as given
    for v in value:
        v = _float(v, key)
        if v <= 0:
            raise ValueError(f"{key}: every ε must be positive (ε > 0), got {v!r}")
        if v < MIN_EPSILON:  # (ε = 1e-300 ran, every private cell failed, and the run exited 0)
            raise ValueError(f"{key}: every ε must be at least {MIN_EPSILON:g}, the smallest ε privirt "
                             f"calibrates a release for, got {v!r}")
        if v > MAX_EPSILON:  # (ε = 1e308 made a failed cell and a report that crashed on its axis)
            raise ValueError(f"{key}: every ε must be at most {MAX_EPSILON:g}, the largest ε privirt states a "
                             f"guarantee for, got {v!r}")
        r = float(f"{v:.6g}")
        if r in out:  # (merged, they made one cell: the grid silently had fewer points)
            if ranged:
                raise ValueError(f"{ranged} gives ε that coincide at 6 significant digits, the "
                                 f"precision of the cell keys ({out[r]!r} and {v!r}); lower num "
                                 "or widen the range")
            raise ValueError(f"{key}: ε = {out[r]!r} and {v!r} coincide at 6 significant digits, "
                             f"the precision of the cell keys (both {r:.6g}); give each ε once")
        out[r] = v
    return tuple(sorted(out))


def _mechanisms(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{key} must be a non-empty list of mechanism names")
    out: list[str] = []
    for v in value:
        if not isinstance(v, str):
            raise ValueError(f"{key} must be a list of mechanism names (text), got {v!r}")
        if v not in registry.REGISTRY:
            raise ValueError(f"{key}: {registry.unknown_message(v)}")
        if v in out:  # (merged, it made one set of cells from two entries)
            raise ValueError(f"{key}: mechanism {v!r} is listed twice; name each mechanism once")
        out.append(v)
    return tuple(out)

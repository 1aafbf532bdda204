"""The sweep's results file: one CSV row per finished cell, with a privacy note on top.

Columns (:data:`RESULT_COLUMNS`), the metric names a report can use (:data:`METRICS`), the
append-only writer, and :func:`read_results`.  Pandas is imported only when a file is read.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["RESULTS_FILE", "MANIFEST_FILE", "CONFIG_COPY", "RESULT_COLUMNS", "PRIVACY_NOTE",
           "METRICS", "DEFAULT_METRIC", "read_results", "ResultsWriter", "finished_keys",
           "has_rows", "repair_tail"]

RESULTS_FILE = "results.csv"
MANIFEST_FILE = "sweep.json"
CONFIG_COPY = "config.toml"
PRIVACY_NOTE = (
    "# privirt sweep results. Every cell's noise was drawn from a SEEDED generator, so these "
    "runs are NOT private (private=False): they measure accuracy and release nothing."
)

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

#: metric column -> (label, lower is better)
METRICS: dict[str, tuple[str, bool]] = {
    "l2_error": ("ℓ2 error ‖β̃ − β‖₂", True),
    "linf_error": ("ℓ∞ error ‖β̃ − β‖∞", True),
    "relative_l2_error": ("relative ℓ2 error ‖β̃ − β‖₂ / ‖β‖₂", True),
    "top_k_accuracy": ("top-K accuracy", False),
    "kendall_tau": ("Kendall τ", False),
}
DEFAULT_METRIC = "relative_l2_error"


def read_results(path: str | os.PathLike[str]) -> "pd.DataFrame":
    """Read a sweep's results CSV (a folder or the file itself) into a DataFrame.

    Leading ``#`` comment lines (the privacy note) are skipped; ``epsilon`` and ``delta`` are
    NaN for non-private baselines.

    Raises
    ------
    OSError
        If there is no results file.
    ValueError
        If the file is not a sweep results file.
    """
    import pandas as pd

    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    if not path.is_file():
        raise OSError(f"no sweep results at {path}; run `privirt sweep CONFIG --out DIR` first")
    not_ours = f"{path} is not a privirt sweep results file"
    skip = 0
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("#"):
                    skip += 1
                else:
                    break
    except UnicodeDecodeError:
        raise ValueError(f"{not_ours} (not UTF-8 text): move it away, or use a folder "
                         "that `privirt sweep` wrote") from None
    # Only an empty field is missing: a data set called "NA" or "null" stays a name, and the
    # 64-bit seeds stay exact (inferred, a column of seeds below 2**63 with blanks for the
    # non-private cells would become float64 and lose the low digits).
    text_cols = {c: str for c in ("dataset", "source", "mechanism", "status", "cell_key")}
    source: Any = path
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):  # a last line a crash cut short is not a finished cell
        import io

        source = io.BytesIO(data[: data.rfind(b"\n") + 1])
    try:
        frame = pd.read_csv(source, skiprows=skip, keep_default_na=False, na_values=[""],
                            dtype={**text_cols, "seed": "UInt64"})
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty, not a privirt sweep results file") from None
    except ValueError as exc:  # a ParserError, a UnicodeDecodeError, a seed that is not an int
        raise ValueError(f"{not_ours} ({' '.join(str(exc).split())}): move it away, "
                         "or use a folder that `privirt sweep` wrote") from None
    missing = [c for c in RESULT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{not_ours} (missing columns {missing})")
    frame["status"] = frame["status"].fillna("ok").astype(str)
    return frame


def has_rows(path: Path) -> bool:
    """Whether a results file holds at least one finished cell (not only its header)."""
    if not path.is_file():
        return False
    with path.open(encoding="utf-8", errors="replace") as fh:
        # only the leading comment lines (the privacy note) are skipped, as read_results does: a
        # row whose data set's name starts with "#" is a finished cell.  (A last line without
        # its newline was cut short by a crash: not a finished cell.)
        lines = itertools.dropwhile(lambda line: line.startswith("#"), fh)
        body = [line for line in lines if line.strip() and line.endswith("\n")]
    return len(body) > 1


def finished_keys(path: Path) -> set[str]:
    """The ``cell_key`` of every row of a results file (after dropping a torn last line)."""
    if not has_rows(path):
        return set()
    repair_tail(path)
    return set(read_results(path)["cell_key"].astype(str))


def repair_tail(path: Path) -> None:
    """Drop a partly written last line (left by a crash in the middle of a write)."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with path.open("r+b") as fh:
            fh.truncate(cut)


class ResultsWriter:
    """Appends rows to a results file, flushed one by one.

    The file (with the privacy note and the header) is created at the first row, so a run
    that fails before any cell finishes leaves no results file behind; a file that holds only
    a header is started afresh.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None
        self._csv: Any = None

    def _open(self) -> None:
        new = not has_rows(self.path)
        self._fh = self.path.open("w" if new else "a", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._fh, fieldnames=list(RESULT_COLUMNS),
                                   extrasaction="ignore", lineterminator="\n")
        if new:
            self._fh.write(PRIVACY_NOTE + "\n")
            self._csv.writeheader()

    def write(self, row: Mapping[str, Any]) -> None:
        if self._fh is None:
            self._open()
        self._csv.writerow({k: _csv_value(row.get(k, "")) for k in RESULT_COLUMNS})
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _csv_value(v: Any) -> Any:
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return v

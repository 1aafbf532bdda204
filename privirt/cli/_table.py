"""The estimate table on the terminal and in ``--out`` files (CSV with the statement as comment
lines, or JSON)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING

from .._files import atomic_write

if TYPE_CHECKING:  # (pandas is imported by the commands that build a table, not to parse arguments)
    import pandas as pd

__all__ = ["format_table", "write_table"]


def write_table(table: pd.DataFrame, path: Path, meta: dict | None = None,
                statement: str | None = None) -> None:
    """Write ``table`` (indexed by item) as CSV or JSON according to the suffix.

    ``statement`` (a private run's privacy statement) leads a CSV file as ``#`` comment lines.
    Text (the item labels, the header) is quoted and numbers are not (written in full), so
    labels such as ``q#1``, ``NA`` or ``01`` read back unchanged with ``pandas.read_csv(path,
    comment="#", dtype={"item": str}, keep_default_na=False, na_values=[""])`` (README.md;
    ``comment="#"`` alone cuts a line at an unquoted ``#``, and the defaults read ``NA`` as
    missing and ``01`` as 1); a NaN is an empty cell (``""``).  JSON carries it in ``meta``, and
    JSON having no Infinity, ±inf and NaN are the strings ``"inf"``, ``"-inf"`` and ``"nan"``
    there, as the service sends them (:func:`privirt._results.json_floats`), so an unbounded
    interval and a missing one stay apart.  The file is replaced whole or not at all
    (:func:`atomic_write`).
    """
    from .._results import json_floats  # (pandas: not when the parser is built)

    if path.suffix.lower() == ".csv":
        with atomic_write(path, newline="") as fh:
            for line in (statement or "").splitlines():
                fh.write(f"# {line}\n")
            table.to_csv(fh, index_label="item", quoting=csv.QUOTE_NONNUMERIC)
    else:
        records = [
            {"item": _jsonable(item), **dict(zip(row.index, json_floats(row)))}
            for item, row in table.iterrows()
        ]
        payload = {**(meta or {}), "items": records}
        with atomic_write(path) as fh:
            fh.write(json.dumps(payload, indent=2) + "\n")


def _jsonable(value):
    return value.item() if hasattr(value, "item") else value


def format_table(table: pd.DataFrame) -> str:
    return table.to_string(float_format=lambda v: f"{v: .4f}", index_names=False)

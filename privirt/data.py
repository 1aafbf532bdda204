"""Bundled example data sets (see ``datasets/README.md`` for provenance)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["load_dataset", "list_datasets", "dataset_path"]

_FREQUENCY = "frequency"


def _data_dir() -> Path:
    # Installed wheel (and editable install): the `datasets/` folder is mapped to the
    # package `privirt._data`.  Fallback: a source checkout with `datasets/` beside `privirt/`.
    try:
        root = resources.files("privirt._data")
        path = Path(str(root))
        if path.is_dir() and any(path.glob("*.csv")):
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    path = Path(__file__).resolve().parent.parent / "datasets"
    if path.is_dir():
        return path
    raise FileNotFoundError("privirt's bundled data folder is missing; reinstall privirt")


def list_datasets() -> list[str]:
    """Names of the bundled data sets."""
    return sorted(p.stem for p in _data_dir().glob("*.csv"))


def dataset_path(name: str) -> Path:
    """Path of the bundled CSV file for ``name`` (pattern-frequency layout)."""
    path = _data_dir() / f"{name}.csv"
    if not path.is_file():
        raise ValueError(f"unknown data set {name!r}; available: {list_datasets()}")
    return path


def load_dataset(name: str) -> pd.DataFrame:
    """Load a bundled data set as a persons × items DataFrame of 0/1 responses.

    Parameters
    ----------
    name : str
        One of :func:`list_datasets` (``"lsat6"``, ``"lsat7"``).

    Returns
    -------
    pandas.DataFrame
        Index ``person`` (``p0001`` …), one int column per item.

    Examples
    --------
    >>> import privirt
    >>> X = privirt.load_dataset("lsat6")
    >>> X.shape
    (1000, 5)
    """
    table = pd.read_csv(dataset_path(name))
    if _FREQUENCY not in table.columns:
        raise ValueError(f"data set {name!r} has no {_FREQUENCY!r} column")
    freq = table.pop(_FREQUENCY).to_numpy()
    values = np.repeat(table.to_numpy(dtype=np.int64), freq, axis=0)
    width = len(str(len(values)))
    index = pd.Index([f"p{k + 1:0{width}d}" for k in range(len(values))], name="person")
    return pd.DataFrame(values, index=index, columns=table.columns)

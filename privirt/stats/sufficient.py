"""Sufficient statistics of a responses matrix: sums over persons, on any engine.

Everything here is a sum of per-person terms, so it can be computed block by block (on one
machine or on a Dask cluster, :mod:`privirt.stats.dask_engine`) and added up exactly in ``int64``:

* the pairwise counts ``Y`` (and ``B``) of :func:`privirt.pairwise_counts`;
* the item totals ``s_i`` (persons who got item ``i`` right) and the per-item answered
  counts ``a_i`` (persons who answered item ``i``);
* the joint histogram ``H[k, r]`` of (number of items answered ``k``, raw score ``r``) over
  persons; without missing data every person has ``k = m`` and ``H[m]`` is the raw-score
  histogram.

The totals estimator releases noisy versions of these; nothing in this module adds noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._checks import brief, check_choice
from ..data.responses import Responses

__all__ = ["SufficientStatistics", "block_statistics", "add_statistics", "to_result", "is_dask_source"]

ENGINES = ("local", "dask")


@dataclass(frozen=True, eq=False)
class SufficientStatistics:
    """Exact (un-noised) sums over persons.  Never publish these as they are.

    Attributes
    ----------
    counts : tuple of (ndarray, ndarray) or None
        ``(Y, B)`` as returned by :func:`privirt.pairwise_counts` (int64, items × items), or
        ``None`` when they were not asked for.
    totals : pandas.Series of int64
        Persons who answered each item correctly, indexed by item.
    answered : pandas.Series of int64
        Persons who answered each item, indexed by item.
    score_hist : ndarray of int64, shape (m + 1, m + 1)
        ``score_hist[k, r]``: persons who answered ``k`` items and got ``r`` of them right.
    n_rows : int
        Rows counted (a data-dependent count: private paths compare it with the public
        ``n_persons`` and never release it).
    """

    counts: tuple[np.ndarray, np.ndarray] | None
    totals: pd.Series
    answered: pd.Series
    score_hist: np.ndarray
    n_rows: int

    @property
    def items(self) -> pd.Index:
        return self.totals.index

    @property
    def raw_score_hist(self) -> np.ndarray:
        """Persons with each raw score ``0..m`` (the column sums of ``score_hist``)."""
        return self.score_hist.sum(axis=0)

    def __iter__(self):
        """Unpack as ``counts, totals, answered, score_hist``."""
        return iter((self.counts, self.totals, self.answered, self.score_hist))


def block_statistics(codes: np.ndarray, *, pairwise: bool = True, chunk_size: int | None = None,
                     extras: bool = True) -> dict:
    """Sums of one block of int8 codes (1 right, 0 wrong, −1 missing) as int64 arrays.

    Returns a dict with ``Y``, ``B`` (only with ``pairwise``), ``totals``, ``answered``,
    ``hist`` (flattened ``(m + 1)²``) and ``n``; blocks combine with :func:`add_statistics`.
    ``extras=False`` leaves out ``totals``, ``answered`` and ``hist`` (counts only).
    The pairwise counts go through the in-memory :func:`privirt.pairwise_counts`, whose
    chunks keep every float32 partial sum below 2**24 (exact).
    """
    from .counts import local_pairwise_counts

    n, m = codes.shape
    out: dict[str, Any] = {"n": int(n)}
    if pairwise:
        resp = Responses(codes, pd.RangeIndex(n), pd.RangeIndex(m))
        out["Y"], out["B"] = local_pairwise_counts(resp, device="cpu", chunk_size=chunk_size)
    if not extras:
        return out
    right = codes == 1
    seen = codes >= 0
    out["totals"] = np.count_nonzero(right, axis=0).astype(np.int64)
    out["answered"] = np.count_nonzero(seen, axis=0).astype(np.int64)
    k = np.count_nonzero(seen, axis=1)
    r = np.count_nonzero(right, axis=1)
    out["hist"] = np.bincount(k * (m + 1) + r, minlength=(m + 1) ** 2).astype(np.int64)
    return out


def add_statistics(*parts: dict) -> dict:
    """Entrywise int64 sum of :func:`block_statistics` results (exact below 2**63)."""
    parts = tuple(p for p in parts if p is not None)
    if not parts:
        return None  # type: ignore[return-value]
    total = {key: (np.array(v, dtype=np.int64, copy=True) if key != "n" else int(v))
             for key, v in parts[0].items()}
    for part in parts[1:]:
        for key, v in part.items():
            if key == "n":
                total["n"] += int(v)
            else:
                total[key] += v
    return total


def to_result(stats: dict, items: pd.Index) -> SufficientStatistics:
    """Labelled :class:`SufficientStatistics` from summed block statistics."""
    m = len(items)
    counts = None
    if "Y" in stats:
        Y, B = stats["Y"], stats["B"]
        np.fill_diagonal(Y, 0)
        np.fill_diagonal(B, 0)
        counts = (Y, B)
    return SufficientStatistics(
        counts=counts,
        totals=pd.Series(stats["totals"], index=items.copy(), name="totals"),
        answered=pd.Series(stats["answered"], index=items.copy(), name="answered"),
        score_hist=stats["hist"].reshape(m + 1, m + 1),
        n_rows=int(stats["n"]),
    )


def is_dask_source(source: Any) -> bool:
    """Whether ``source`` is a dask collection (a DataFrame or an Array).

    The one test of the package: dask 2024.x-2025.1 define the DataFrame in ``dask_expr``.
    """
    return type(source).__module__.split(".")[0] in ("dask", "dask_expr")


def check_engine(engine: Any) -> str:
    check_choice("engine", engine, ENGINES)
    return engine


def check_n_rows(n_rows: int, n_persons: Any) -> None:
    """Refuse data with more rows than the public number of persons."""
    if isinstance(n_persons, bool) or not isinstance(n_persons, (int, np.integer)) or n_persons < 1:
        raise ValueError(f"n_persons must be a positive integer, got {brief(n_persons)}")
    if n_rows > n_persons:
        raise ValueError(
            f"the data have more rows than n_persons={n_persons}; pass the public number of "
            "persons (an upper bound on the rows) or remove the extra rows"
        )

"""Sufficient statistics of a responses matrix: sums over persons, on any engine.

Everything here is a sum of per-person terms, so it can be computed block by block (on one
machine or on a Dask cluster, :mod:`privirt.dask_engine`) and added up exactly in ``int64``:

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
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..data.responses import Responses, as_responses

__all__ = ["SufficientStatistics", "sufficient_statistics", "item_totals", "block_statistics"]

ENGINES = ("local", "dask")


@dataclass(frozen=True)
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
    from .counts import pairwise_counts

    n, m = codes.shape
    out: dict[str, Any] = {"n": int(n)}
    if pairwise:
        resp = Responses(codes, pd.RangeIndex(n), pd.RangeIndex(m))
        out["Y"], out["B"] = pairwise_counts(resp, device="cpu", chunk_size=chunk_size)
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


def check_engine(engine: Any) -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine must be 'local' or 'dask', got {engine!r}")
    return engine


def sufficient_statistics(
    source: Any,
    *,
    engine: str = "local",
    pairwise: bool = True,
    client: Any = None,
    items: Sequence[Any] | None = None,
    n_persons: int | None = None,
    chunk_size: int | None = None,
) -> SufficientStatistics:
    """Pairwise counts (optional), item totals, answered counts and score histogram.

    Parameters
    ----------
    source : ResponsesLike, Parquet folder/glob, dask DataFrame or dask Array
        With ``engine="local"`` anything :func:`privirt.as_responses` accepts; with
        ``engine="dask"`` a wide Parquet folder, glob or file (one column per item, nulls for
        missing), a ``dask.dataframe.DataFrame`` or a 2-D ``dask.array.Array``.
    engine : {"local", "dask"}
        ``"local"``: in memory, in this process.  ``"dask"``: per partition on a Dask
        cluster (``client``, or an embedded ``LocalCluster``), summed exactly in int64.
    pairwise : bool
        Also compute ``(Y, B)``.
    client : distributed.Client or str, optional
        Dask only: a client or a scheduler address such as ``"tcp://host:8786"``.
    items : sequence, optional
        The item labels, in order (default: the columns of the data).  An item of the list
        missing from the data is an error here; on private paths it is an all-missing column.
    n_persons : int, optional
        Public number of persons: data with more rows are refused (ValueError).
    chunk_size : int, optional
        Rows per in-memory chunk of the products (see :func:`privirt.pairwise_counts`).

    Returns
    -------
    SufficientStatistics
        Unpacks as ``counts, totals, answered, score_hist``.

    Examples
    --------
    >>> import numpy as np, privirt
    >>> st = privirt.sufficient_statistics(np.array([[1, 0], [1, 1], [0, np.nan]]))
    >>> st.totals.tolist(), st.answered.tolist(), st.raw_score_hist.tolist()
    ([2, 1], [3, 2], [1, 1, 1])
    """
    check_engine(engine)
    if engine == "dask":
        from .dask_engine import dask_statistics

        return dask_statistics(source, pairwise=pairwise, client=client, items=items,
                               n_persons=n_persons, chunk_size=chunk_size)
    if client is not None:
        raise ValueError("client= applies to engine='dask' only")
    if type(source).__module__.split(".")[0] == "dask":
        raise ValueError("a dask collection is counted with engine='dask'")
    resp = as_responses(source, empty="keep")
    if items is not None:
        resp = _select_items(resp, items)
    if n_persons is not None:
        check_n_rows(resp.n_persons, n_persons)
    return to_result(block_statistics(resp.codes, pairwise=pairwise, chunk_size=chunk_size),
                     resp.items)


def item_totals(source: Any, *, engine: str = "local", **kwargs: Any) -> pd.Series:
    """Persons who answered each item correctly (int64 Series indexed by item).

    Takes the sources and options of :func:`sufficient_statistics`.

    Examples
    --------
    >>> import numpy as np, privirt
    >>> privirt.item_totals(np.array([[1, 0], [1, 1], [0, np.nan]])).tolist()
    [2, 1]
    """
    return sufficient_statistics(source, engine=engine, pairwise=False, **kwargs).totals


def check_n_rows(n_rows: int, n_persons: Any) -> None:
    """Refuse data with more rows than the public number of persons."""
    if isinstance(n_persons, bool) or not isinstance(n_persons, (int, np.integer)) or n_persons < 1:
        raise ValueError(f"n_persons must be a positive integer, got {n_persons!r}")
    if n_rows > n_persons:
        raise ValueError(
            f"the data have more rows than n_persons={n_persons}; pass the public number of "
            "persons (an upper bound on the rows) or remove the extra rows"
        )


def _select_items(resp: Responses, items: Sequence[Any]) -> Responses:
    if isinstance(items, (str, bytes)):
        raise ValueError(f"items must be a sequence of item labels, not the string {items!r}")
    wanted = pd.Index(list(items))
    by_text = {str(label): label for label in resp.items}
    wanted = pd.Index([by_text.get(str(w), w) for w in wanted])
    pos = resp.items.get_indexer(wanted)
    if (pos < 0).any():
        raise ValueError(f"item {wanted[pos < 0][0]!r} of `items` is not in the data")
    return Responses(np.ascontiguousarray(resp.codes[:, pos]), resp.persons, wanted)

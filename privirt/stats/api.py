"""The public entry points of the exact statistics, with their one engine switch.

``engine="local"`` computes in memory (:mod:`.counts`, :mod:`.sufficient`); ``engine="dask"``
per partition on a Dask cluster (:mod:`.dask_engine`, ``docs/scale.md``).  Both engines are
below this module, so neither needs to know about the other.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from .._checks import check_choice, check_flag
from ..data._labels import item_labels
from ..data.responses import Responses, ResponsesLike, as_responses
from .counts import Method, local_pairwise_counts
from .sufficient import (
    SufficientStatistics,
    block_statistics,
    check_engine,
    check_n_rows,
    is_dask_source,
    to_result,
)

__all__ = ["pairwise_counts", "sufficient_statistics", "item_totals"]


def pairwise_counts(
    X: ResponsesLike,
    *,
    device: str = "auto",
    method: Method = "auto",
    chunk_size: int | None = None,
    engine: str = "local",
    client=None,
    items=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise differential counts ``Y`` and co-response counts ``B``.

    Parameters
    ----------
    X : ResponsesLike or cupy.ndarray
        Persons × items 0/1 responses with missing entries (anything
        :func:`privirt.as_responses` accepts).  A cupy array (0/1 with NaN for missing) is
        counted where it lies, on the GPU, without a copy to the host.
    device : {"auto", "cpu", "gpu"}
        Where the matrix products run (``"gpu"`` needs cupy).
    method : {"auto", "dense", "sparse"}
        ``"dense"``: chunked float32 GEMM/SYRK (numpy BLAS or cuBLAS).  ``"sparse"``: chunked
        ``scipy.sparse`` products with int64 entries (CPU only), faster when most cells are
        missing.  ``"auto"``: sparse on the CPU when fewer than 5 % of the cells are
        observed, dense otherwise.
    chunk_size : int, optional
        Persons per chunk (default: about 64 MiB of float32 buffers on the CPU, 256 MiB per
        float16 indicator on the GPU, up to three at a time; see :func:`default_chunk_size`).
        At most ``2**24`` (the exactness bound in the module docstring).
    engine : {"local", "dask"}
        ``"local"``: in memory, here.  ``"dask"``: ``X`` is a wide Parquet folder/glob/file, a
        dask DataFrame or a dask Array, counted per partition on a Dask cluster and summed
        exactly (:mod:`privirt.stats.dask_engine`, ``docs/scale.md``).
    client : distributed.Client or str, optional
        ``engine="dask"``: the cluster (or a scheduler address); default: an embedded
        ``LocalCluster``, closed afterwards.
    items : sequence, optional
        ``engine="dask"``: the item labels, in order (default: the data's columns).

    Returns
    -------
    Y, B : ndarray of int64, shape (m, m)
        ``Y[i, j]``: persons who answered both items, ``i`` right and ``j`` wrong;
        ``B[i, j]``: persons who answered both.  Zero diagonals; ``B`` is symmetric and
        ``Y + Yᵀ ≤ B`` entrywise.  Always host (numpy) arrays.

    Examples
    --------
    >>> import numpy as np, privirt
    >>> Y, B = privirt.pairwise_counts(np.array([[1, 0], [1, 1], [0, np.nan]]), device="cpu")
    >>> Y.tolist(), B.tolist()
    ([[0, 1], [0, 0]], [[0, 2], [2, 0]])
    """
    check_choice("engine", engine, ("local", "dask"))
    if engine != "local" or client is not None or items is not None or is_dask_source(X):
        from .dask_engine import dispatch_pairwise

        return dispatch_pairwise(X, engine, client, items, chunk_size, device, method)
    return local_pairwise_counts(X, device=device, method=method, chunk_size=chunk_size)


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
    pairwise = check_flag("pairwise", pairwise)
    if items is not None:
        items = item_labels(items)  # once: a generator is read here
        if len(items) == 0:  # statistics of no items: as the private paths, refused
            raise ValueError("items is empty: give at least one item label (or None for all)")
    if engine == "dask":
        from .dask_engine import dask_statistics

        return dask_statistics(source, pairwise=pairwise, client=client, items=items,
                               n_persons=n_persons, chunk_size=chunk_size)
    if client is not None:
        raise ValueError("client= applies to engine='dask' only")
    if is_dask_source(source):
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


def _select_items(resp: Responses, items: Sequence[Any]) -> Responses:
    wanted = item_labels(items)  # each once: an item paired with itself (B_ii off the diagonal)
    by_text = {str(label): label for label in resp.items}
    wanted = pd.Index([by_text.get(str(w), w) for w in wanted], tupleize_cols=False)
    pos = resp.items.get_indexer(wanted)
    if (pos < 0).any():
        raise ValueError(f"item {wanted[pos < 0][0]!r} of `items` is not in the data")
    return Responses(np.ascontiguousarray(resp.codes[:, pos]), resp.persons, wanted)

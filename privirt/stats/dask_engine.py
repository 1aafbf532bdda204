"""Sufficient statistics on a Dask cluster: per-partition sums, added up exactly.

Every partition (a Parquet row group read in batches, a dask DataFrame partition or a row
block of a dask Array) is converted to int8 codes and reduced on a worker to the int64 sums
of :func:`privirt.stats.sufficient.block_statistics`; the sums are added in a tree (fan-in 8) on the
cluster and only the final sums come back to the driver.  See ``docs/scale.md``.

Without a ``client`` an embedded :class:`distributed.LocalCluster` (one worker in this process
with a thread per core; no processes are started) is started and closed afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from .._threads import one_thread_in
from . import _dask_labels
from ._dask_cluster import address_client, computed
from ._dask_files import parquet_files as _parquet_files
from ..data._files import strip_labels
from ..data._labels import match_items, wide_item_columns
from .counts import MAX_CHUNK, default_chunk_size
from .sufficient import (
    SufficientStatistics,
    add_statistics,
    block_statistics,
    check_n_rows,
    is_dask_source,
    to_result,
)

__all__ = ["dask_statistics", "dask_pairwise", "embedded_client", "DASK_HINT"]

DASK_HINT = (
    'the Dask engine needs dask and distributed: python -m pip install "privirt[dask]"'
)
#: partial sums are added in a tree with this many children per node
FAN_IN: int = 8
#: the text of booleans that the CSV reader (pandas' default true/false values) reads as 1/0
_BOOL_TEXT = {"True": 1, "TRUE": 1, "true": 1, "False": 0, "FALSE": 0, "false": 0}


def _require_dask():
    try:
        import dask  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise ImportError(DASK_HINT) from exc


# ---------------------------------------------------------------------------------------
# the cluster
@contextlib.contextmanager
def embedded_client(client: Any = None) -> Iterator[Any]:
    """The given client, a client of the scheduler at an address, or an embedded cluster's.

    A client made here (from an address or with a new ``LocalCluster``) is closed on exit.
    """
    _require_dask()
    from distributed import Client, LocalCluster

    if client is not None and not isinstance(client, (str, Client)):
        raise ValueError(
            f"client must be a distributed.Client or a scheduler address such as "
            f"'tcp://host:8786', got {type(client).__name__}"
        )
    if isinstance(client, Client):
        yield client
        return
    if isinstance(client, str):
        with address_client(client) as own:
            yield own
        return
    threads = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    # Threads in this process, not worker processes: worker processes are spawned, and a
    # spawned process runs the caller's script again from the top (a script without an
    # ``if __name__ == "__main__":`` guard then fails and repeats its side effects).  The
    # partition work (Arrow reads, int8 conversion, BLAS products) releases the GIL; each
    # thread uses one BLAS thread so that the cores are not oversubscribed.  The worker's logs are
    # silenced up to CRITICAL: a failed partition (a bad cell) is raised to the caller with its
    # message, and its "Compute Failed" log with a traceback only repeated it on stderr.
    with _one_blas_thread(), LocalCluster(
        n_workers=1, threads_per_worker=threads, processes=False,
        # no dashboard; its HTTP server (health, metrics) on a free local port: the default
        # 8787, when taken, printed "Port 8787 is already in use" on stderr
        dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": False},
        memory_limit=0, silence_logs=logging.CRITICAL,
    ) as cluster, Client(cluster) as own:
        yield own


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """One BLAS/OpenMP thread while the embedded cluster runs (``threadpoolctl``; the limit is
    process-wide and shared with concurrent blocks, :func:`privirt._threads.one_thread_in`)."""
    from threadpoolctl import ThreadpoolController

    # (a fresh controller: it also sees the thread pools loaded since the package's was made)
    with one_thread_in(ThreadpoolController(), None):
        yield


# ---------------------------------------------------------------------------------------
# per-partition work (runs on the workers)
def _text_as_numbers(col, name: str, where: str, offset: int):
    """A text column as float64: numbers written as text (spaces trimmed), pandas' missing-value
    and true/false words missing and 1/0 (:func:`privirt.data._files.text_number`); any other
    text is refused by row, in the in-memory reader's words."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..data._files import CSV_WORDS, text_number

    text = pc.utf8_trim_whitespace(col)
    for words, value in CSV_WORDS:
        text = pc.if_else(pc.is_in(text, value_set=pa.array(words, type=text.type)),
                          pa.scalar(value, text.type), text)
    try:
        return pc.cast(text, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for i, v in enumerate(text.to_pylist()):  # (the error path only: find the first culprit)
            if v is not None and text_number(v) is None:
                raise ValueError(f"{where}: invalid response {v!r} for item {name!r} at row {offset + i}: "
                                 "responses must be 0, 1 or missing (null); convert text such as "
                                 "'yes'/'no' to 0/1 first") from None
        raise


def _column_codes(col, name: str, where: str, offset: int) -> np.ndarray:
    """int8 codes of one Arrow column of 0/1 values with nulls (NaN counts as null)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = _text_as_numbers(col, name, where, offset)  # as the in-memory reader takes "1", " 0", ""
    if pa.types.is_decimal(col.type):  # 0/1 as decimals (SQL exports), as the in-memory reader takes them
        col = pc.cast(col, pa.float64())
    t = col.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_null(t)):
        raise ValueError(
            f"{where}: item {name!r} has type {t}; responses must be numeric 0/1 with nulls "
            "for missing"
        )
    if pa.types.is_null(t):
        return np.full(len(col), -1, dtype=np.int8)
    if not pa.types.is_floating(t):
        # integers and booleans: validate with one min/max pass (nulls skipped), then let
        # Arrow write the codes (null -> -1) straight into int8
        if pa.types.is_boolean(t):
            col = pc.cast(col, pa.int8())
        lo_hi = pc.min_max(col)
        lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
        if lo is not None and (lo < 0 or hi > 1):
            bad_value = lo if lo < 0 else hi
            i = pc.index(col, pa.scalar(bad_value, col.type)).as_py()
            raise ValueError(
                f"{where}: invalid response {bad_value!r} for item {name!r} at row "
                f"{offset + i}: responses must be 0, 1 or missing (null)"
            )
        if t != pa.int8():
            col = pc.cast(col, pa.int8())  # safe: every value is 0 or 1
        if col.null_count:
            col = pc.fill_null(col, pa.scalar(-1, pa.int8()))
        return col.to_numpy(zero_copy_only=False)
    if col.null_count:
        valid = col.is_valid().to_numpy(zero_copy_only=False)
        vals = pc.fill_null(col, pa.scalar(0, t)).to_numpy(zero_copy_only=False)
    else:
        valid = None
        vals = col.to_numpy(zero_copy_only=False)
    nan = np.isnan(vals)
    if nan.any():
        valid = ~nan if valid is None else valid & ~nan
        vals = np.where(nan, 0, vals)
    bad = (vals != 0) & (vals != 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{where}: invalid response {vals[i].item()!r} for item {name!r} at row "
            f"{offset + i}: responses must be 0, 1 or missing (null)"
        )
    codes = vals.astype(np.int8)
    if valid is not None:
        codes[~valid] = -1
    return codes


def _parquet_part(fs, path: str, row_group: int, columns: list, positions: list, m: int,
                  offset: int, batch_rows: int, pairwise: bool, chunk_size,
                  extras: bool = True) -> dict:
    """Sums of one Parquet row group, read in batches of at most ``batch_rows`` rows."""
    import pyarrow.parquet as pq

    total = None
    with fs.open(path, "rb") as fh:
        pf = pq.ParquetFile(fh)
        for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[row_group],
                                     columns=columns, use_pandas_metadata=False):
            codes = np.full((batch.num_rows, m), -1, dtype=np.int8, order="F")
            for name, pos in zip(columns, positions):
                codes[:, pos] = _column_codes(batch.column(name), name, path, offset)
            offset += batch.num_rows
            part = block_statistics(np.ascontiguousarray(codes), pairwise=pairwise,
                                    chunk_size=chunk_size, extras=extras)
            del codes
            total = part if total is None else add_statistics(total, part)
    if total is None:
        total = block_statistics(np.empty((0, m), dtype=np.int8), pairwise=pairwise,
                                 extras=extras)
    return total


def _values_part(values, items: pd.Index, where: str, offset: int, pairwise: bool,
                 chunk_size, extras: bool = True, pos: list | None = None, table: bool = False,
                 rows: str | None = None) -> dict:
    """Sums of an in-memory block (numpy array or pandas frame) of 0/1/NaN values.

    ``pos``: the item positions of the block's columns (the other items are all-missing).
    ``table``: the block comes from a data frame (a pandas block is one too), whose first
    column may hold person labels: a bad value there gets the ``person_col`` hint.
    ``rows``: the part (a frame's partition) whose row offset in the table is not known: a bad
    value is named "at row i of <rows>", not by a person label or a row of the whole table.
    """
    from ..data.responses import _from_array, _unmasked

    m, full = len(items), len(items)
    if pos is not None:
        items, m = items[pos], len(pos)
    table = table or isinstance(values, pd.DataFrame)
    if isinstance(values, pd.DataFrame):
        values = values.to_numpy(dtype=np.float64, na_value=np.nan)
    values = _unmasked(values) if isinstance(values, np.ma.MaskedArray) else np.asarray(values)
    if values.shape[0] == 0:
        return block_statistics(np.empty((0, full), dtype=np.int8), pairwise=pairwise,
                                extras=extras)
    if values.ndim != 2 or values.shape[1] != m:
        raise ValueError(f"{where}: expected a block with {m} item columns, got shape {values.shape}")
    try:
        codes = _from_array(values, pd.RangeIndex(offset, offset + values.shape[0]), items,
                            table=table, rows=rows).codes
    except ValueError as exc:
        raise ValueError(str(exc) if rows and rows in str(exc) else f"{where}: {exc}") from None
    if m != full:  # public items absent from the data: all-missing columns
        codes, part = np.full((codes.shape[0], full), -1, dtype=np.int8), codes
        codes[:, pos] = part
    return block_statistics(codes, pairwise=pairwise, chunk_size=chunk_size, extras=extras)


# ---------------------------------------------------------------------------------------
# sources -> one delayed partial sum per partition
def _match_items(items: Sequence[Any] | None, columns: list, public: bool,
                 absent_ok: bool = False) -> tuple[pd.Index, list, list]:
    """Item labels, and which data columns go to which item position (the in-memory rules:
    :func:`privirt.data._labels.match_items`).  ``absent_ok``: one file of several may lack an
    item of a non-public ``items`` (the caller checks that some file has it)."""
    labels, where = match_items(items, columns, public=public)
    if not public and not absent_ok and (where < 0).any():
        raise ValueError(f"item {labels[where < 0][0]!r} of `items` is not a column of the data")
    if not public and items is not None:  # the data's labels, as engine='local' keeps them
        labels = pd.Index([columns[k] if k >= 0 else x for x, k in zip(labels, where)],
                          tupleize_cols=False)
    # a public item nobody answered (-1) is an all-missing column
    return labels, [columns[k] for k in where if k >= 0], [j for j, k in enumerate(where) if k >= 0]


def _parquet_tasks(source, items, public, person_col, pairwise, chunk_size, extras=True):
    import pyarrow.parquet as pq
    from dask import delayed

    fs, files = _parquet_files(source)
    tasks, labels, schema_cols, label_parts, found = [], None, None, [], {}
    for path in files:
        with fs.open(path, "rb") as fh:
            meta = pq.ParquetFile(fh)
            schema = meta.schema_arrow
            row_groups = [meta.metadata.row_group(i).num_rows for i in range(meta.num_row_groups)]
        index_cols = set()
        if schema.pandas_metadata:
            index_cols = {c for c in schema.pandas_metadata.get("index_columns", []) if isinstance(c, str)}
        raw = [c for c in schema.names if c not in index_cols]
        # matched stripped, as by the local reader; read by the names the file holds
        names = list(strip_labels(pd.Index(raw, dtype=object), str(path)))
        to_raw = dict(zip(names, raw))
        cols = wide_item_columns(names, person_col, index_cols, f" {path}", from_file=True)
        label_col = _dask_labels.label_column(names, cols, person_col, index_cols)
        label_col = to_raw.get(label_col, label_col)
        if schema_cols is None:
            schema_cols = cols
            labels, _, _ = _match_items(items, cols, public, absent_ok=True)
            if len(labels) < 1:
                raise ValueError(f"{path}: no item columns")
        if items is None and set(cols) != set(schema_cols):  # (each file is read by column name)
            lacks = [str(c) for c in schema_cols if c not in set(cols)]
            extra = [str(c) for c in cols if c not in set(schema_cols)]
            what = "; ".join(f"{w} {', '.join(v[:5])}{' ...' if len(v) > 5 else ''}"
                             for w, v in (("it lacks", lacks), ("it adds", extra)) if v)
            raise ValueError(
                f"{path} has different item columns from {files[0]} ({what}); every file of the "
                "data set needs the same item columns (or pass the item list as items=...)"
            )
        # each file's columns matched to the item positions (an item a file lacks is all-missing
        # there; a column outside the public item set is an error)
        here, use, pos = _match_items(labels if items is None else items, cols, public, absent_ok=True)
        for j in pos:
            found.setdefault(j, here[j])
        offset = 0
        for rg, rows in enumerate(row_groups):
            batch = min(MAX_CHUNK, chunk_size or default_chunk_size(len(labels)))
            tasks.append(delayed(_parquet_part, pure=True)(fs, path, rg, [to_raw[c] for c in use], pos,
                         len(labels), offset, batch, pairwise, chunk_size, extras))
            if label_col is not None:
                label_parts.append(delayed(_dask_labels.parquet_labels, pure=True)(fs, path, rg, label_col))
            offset += rows
    if not public and items is not None:  # every item in some file, with the data's label
        if len(found) < len(labels):
            raise ValueError(f"item {labels[min(set(range(len(labels))) - set(found))]!r} of "
                             "`items` is not a column of any file of the data")
        labels = pd.Index([found[j] for j in range(len(labels))], tupleize_cols=False)
    return tasks, labels, label_parts


def _frame_tasks(ddf, items, public, person_col, pairwise, chunk_size, extras=True):
    from dask import delayed

    cols = wide_item_columns(list(ddf.columns), person_col, [ddf.index.name])
    labels, use, pos = _match_items(items, cols, public)
    m = len(labels)

    def select(part, k, use=use, pos=pos, m=m):
        from ..data._cells import _frame_values  # the in-memory reader's conversion and words

        out = np.full((len(part), m), np.nan)
        if len(part):
            # dd.from_pandas turns object columns (True/None/False) into text: read the bools'
            # text as 1/0, as the CSV reader does
            part = part[use].apply(lambda c: c.astype(object).map(
                lambda v: _BOOL_TEXT.get(v, v) if isinstance(v, str) else v)
                if pd.api.types.is_string_dtype(c.dtype) else c)
            out[:, pos] = _frame_values(part, describe=lambda i, j, v: (
                f"invalid response {v!r} for item {use[j]!r} at row {i} of partition {k}: responses must "
                "be 0, 1 or missing (NaN); convert text such as 'yes'/'no' to 0/1 first"))
        return out

    parts = ddf.to_delayed()
    tasks = [
        delayed(_values_part, pure=True)(delayed(select, pure=True)(p, i), labels,
                                         f"partition {i}", 0, pairwise, chunk_size, extras,
                                         table=True, rows=f"partition {i}")
        for i, p in enumerate(parts)
    ]
    label_col = _dask_labels.label_column(list(ddf.columns), cols, person_col, [ddf.index.name])
    if label_col is None:
        return tasks, labels, []
    pick = (lambda p: p.index) if label_col not in ddf.columns else (lambda p: p[label_col])
    return tasks, labels, [delayed(pick, pure=True)(p) for p in parts]


def _array_tasks(arr, items, public, pairwise, chunk_size, extras=True):
    from dask import delayed

    if arr.ndim != 2:
        raise ValueError(f"responses must be a 2-D persons × items array, got {arr.ndim} dimension(s)")
    m = arr.shape[1]
    # the array's columns are labelled 0 … m-1 (as in memory): ``items`` is matched to them
    labels, use, pos = _match_items(items, list(range(m)), public)
    if items is None:
        labels = pd.RangeIndex(m)
    elif use != list(range(m)):
        arr = arr[:, use]
    arr = arr.rechunk({1: -1}) if len(arr.chunks[1]) > 1 else arr
    blocks = arr.to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(arr.chunks[0])[:-1]]).astype(int)
    tasks = [delayed(_values_part, pure=True)(b, labels, f"block {i}", int(s), pairwise,
                                                     chunk_size, extras, pos)
             for i, (b, s) in enumerate(zip(blocks, starts))]
    return tasks, labels, []  # an array has no person labels


def _tasks(source, items, public, person_col, pairwise, chunk_size, extras=True):
    if isinstance(source, (str, os.PathLike)):
        return _parquet_tasks(source, items, public, person_col, pairwise, chunk_size, extras)
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(source, dd.DataFrame):
        return _frame_tasks(source, items, public, person_col, pairwise, chunk_size, extras)
    if isinstance(source, da.Array):
        return _array_tasks(source, items, public, pairwise, chunk_size, extras)
    raise ValueError(
        "engine='dask' takes a Parquet folder, glob or file, a dask.dataframe.DataFrame or a "
        f"2-D dask.array.Array, got {type(source).__name__}"
    )


def _tree_sum(parts: list) -> Any:
    from dask import delayed

    while len(parts) > 1:
        parts = [delayed(add_statistics, pure=False)(*parts[i : i + FAN_IN])
                 for i in range(0, len(parts), FAN_IN)]
    return parts[0]


# ---------------------------------------------------------------------------------------
# entry points
def dask_statistics(
    source: Any,
    *,
    pairwise: bool = True,
    client: Any = None,
    items: Sequence[Any] | None = None,
    n_persons: int | None = None,
    chunk_size: int | None = None,
    person_col: str | None = None,
    public: bool = False,
) -> SufficientStatistics:
    """:func:`privirt.sufficient_statistics` with ``engine="dask"``.

    ``public=True`` (the private paths) treats ``items`` as the public item set: an item
    absent from the data is an all-missing column and a data column outside the list is an
    error.  Only the summed statistics come back from the cluster; an error on any
    partition raises here and returns nothing.
    """
    stats, labels = _dask_sums(source, pairwise, True, client, items, n_persons, chunk_size,
                               person_col, public)
    return to_result(stats, labels)


def _dask_sums(source, pairwise, extras, client, items, n_persons, chunk_size, person_col,
               public) -> tuple[dict, pd.Index]:
    """The summed block statistics (a dict, see ``block_statistics``) and the item labels."""
    _require_dask()
    from dask import delayed

    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
                                   or not 1 <= chunk_size <= MAX_CHUNK):
        raise ValueError(f"chunk_size must be an integer in [1, 2**24], got {chunk_size!r}")
    if n_persons is not None:
        check_n_rows(0, n_persons)  # validates n_persons before any work
    tasks, labels, label_parts = _tasks(source, items, public, person_col, pairwise, chunk_size,
                                        extras)
    if not tasks and n_persons is None:
        raise ValueError("the data set has no partitions")
    if not tasks:  # (files without row groups) on a private path: n_persons persons without answers
        tasks = [delayed(block_statistics, pure=True)(np.empty((0, len(labels)), dtype=np.int8),
                                                      pairwise=pairwise, extras=extras)]
    root = _tree_sum(tasks)
    if len(tasks) == 1:  # one partition: still a fresh key for this call
        root = delayed(add_statistics, pure=False)(root)
    # every person label at most once (as the in-memory reader), checked in the same computation
    checks = _dask_labels.label_checks(label_parts)
    with embedded_client(client) as cl:
        future = cl.compute(delayed(lambda st, *_: st, pure=False)(root, *checks) if checks else root)
        stats = computed(future, client if isinstance(client, str) else cl, private=public)
        del future
    if n_persons is not None:
        # the public number of persons: rows short of it (all of them, in a data set without
        # rows) are persons without answers, as on the in-memory private path
        check_n_rows(stats["n"], n_persons)
    elif stats["n"] == 0:
        raise ValueError("the data set has no rows")
    return stats, labels


def dask_pairwise(source: Any, *, want_b: bool = True, client: Any = None,
                  items: Sequence[Any] | None = None, chunk_size: int | None = None,
                  n_persons: int | None = None, public: bool = False,
                  person_col: str | None = None):
    """``(Y, B)`` (or ``Y``) of a Dask source: :func:`privirt.pairwise_counts` with engine='dask'.

    Only the counts are summed (no totals or histogram).
    """
    stats, _ = _dask_sums(source, True, False, client, items, n_persons, chunk_size,
                          person_col, public)
    Y, B = stats["Y"], stats["B"]
    np.fill_diagonal(Y, 0)
    np.fill_diagonal(B, 0)
    return (Y, B) if want_b else Y


def dispatch_pairwise(X, engine, client, items, chunk_size, device="auto", method="auto"):
    """The ``engine=`` switch of :func:`privirt.pairwise_counts` (validated here)."""
    from .sufficient import check_engine

    check_engine(engine)
    if engine == "local":
        if is_dask_source(X):
            raise ValueError("a dask collection is counted with engine='dask'")
        raise ValueError("client= and items= apply to engine='dask' only")
    if device not in ("auto", "cpu"):
        raise ValueError(f"engine='dask' counts on the workers' CPUs; got device={device!r}")
    if method not in ("auto", "dense"):
        raise ValueError(f"engine='dask' uses the dense products; got method={method!r}")
    return dask_pairwise(X, client=client, items=items, chunk_size=chunk_size)


# ---------------------------------------------------------------------------------------
# the private paths: a Dask data set with a public item set and a public number of persons
class DaskSource:
    """A Dask data set on a private path: its items and number of persons are public.

    Built by :func:`public_source` before anything is computed or debited; the private entry
    point then asks for the sums (:meth:`statistics`, :meth:`differential_counts`) — computed
    on the cluster, nothing but sums returned — debits the ledger, and draws the noise once.
    Rows beyond the public ``n_persons`` are refused; rows short of it count as persons
    without answers (as the in-memory private path pads them).
    """

    engine = "dask"

    def __init__(self, source: Any, items: pd.Index, n_persons: int, client: Any = None,
                 person_col: str | None = None) -> None:
        self.source, self.items, self._n = source, items, int(n_persons)
        self.client, self.person_col = client, person_col

    @property
    def n_persons(self) -> int:
        return self._n

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def shape(self) -> tuple[int, int]:
        return (self._n, len(self.items))

    def __repr__(self) -> str:
        return f"DaskSource({self._n} persons (public) × {len(self.items)} items)"

    def statistics(self, *, pairwise: bool = True) -> SufficientStatistics:
        """The exact sums, padded to the public number of persons (never publish as is)."""
        st = dask_statistics(self.source, pairwise=pairwise, client=self.client,
                             items=list(self.items), n_persons=self._n,
                             person_col=self.person_col, public=True)
        hist = st.score_hist.copy()
        hist[0, 0] += self._n - st.n_rows  # absent persons: nothing answered, score 0
        return SufficientStatistics(counts=st.counts, totals=st.totals, answered=st.answered,
                                    score_hist=hist, n_rows=self._n)

    def differential_counts(self) -> np.ndarray:
        """``Y`` of the whole data set (exact; the caller adds the noise)."""
        return dask_pairwise(self.source, want_b=False, client=self.client,
                             items=list(self.items), n_persons=self._n, public=True,
                             person_col=self.person_col)


def public_source(source: Any, *, items: Sequence[Any] | None, n_persons: Any,
                  client: Any = None, person_col: str | None = None) -> DaskSource:
    """Validate a Dask source for a private path: public ``n_persons`` (required) and items.

    The item set is ``items`` (an item absent from the data is an all-missing column, a data
    column outside it is an error) or else the data's schema (a wide table's columns).  Only
    metadata is read here.
    """
    _require_dask()
    if n_persons is None:
        raise ValueError(
            "engine='dask' on a private path needs the public number of persons: pass "
            "n_persons=... (CLI: --n-persons); counting the rows would make it depend on the data"
        )
    check_n_rows(0, n_persons)
    _, labels, _ = _tasks(source, items, True, person_col, False, None)
    if len(labels) < 2:
        raise ValueError(f"private estimation needs at least 2 items, got {len(labels)}")
    return DaskSource(source, labels, int(n_persons), client, person_col)


def as_public_source(source: Any, *, items: Sequence[Any] | None = None, n_persons: Any = None,
                     client: Any = None) -> DaskSource:
    """The :class:`DaskSource` of a private entry point's ``X`` (``engine="dask"``).

    ``source`` may already be a :class:`DaskSource` (then ``items`` and ``n_persons``, if
    given, must agree with it).
    """
    if isinstance(source, DaskSource):
        if n_persons is not None and n_persons != source.n_persons:
            raise ValueError(f"n_persons={n_persons!r} differs from the source's public "
                             f"n_persons={source.n_persons}")
        if items is not None and [str(i) for i in items] != [str(i) for i in source.items]:
            raise ValueError("items differs from the source's public item set")
        return source
    return public_source(source, items=items, n_persons=n_persons, client=client)

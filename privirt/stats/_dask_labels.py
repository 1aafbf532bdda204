"""The person-label check of the Dask engine: every person label at most once.

A person with two rows breaks the "replace one person's row" sensitivity that the noise is
calibrated for; the in-memory reader refuses such data (``duplicate person label ...``), and
so does the Dask engine, on every path (on a private one before the debit).  Each partition's
labels are checked on its worker and split by hash into :data:`BUCKETS` buckets; each bucket
(about ``n / BUCKETS`` labels, from every partition) is checked on one worker.  Only the bucket
sizes come back to the driver.  Cost: one more read of the label column and the labels moved
once between workers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..data._labels import _check_distinct_as_text, refuse_duplicate_labels
from ..data._names import find_column

#: the labels are checked in this many hash buckets (fewer when there are fewer partitions)
BUCKETS: int = 64


def label_column(names: list, items: list, person_col: Any, index_names: Any = ()) -> Any:
    """The column holding the person labels (``None`` without one), by the reader's rules.

    ``items`` are the item columns :func:`privirt.data._labels.wide_item_columns` kept of
    ``names``: the column it left out is the person column (``person``, ``person_col`` or a
    file's unnamed first column); ``person_col`` may also name an index.  Without one, a
    single named index holds the labels (as in memory); an unnamed index is not checked.
    """
    if person_col is not None and find_column(names, person_col, "person_col") is None:
        index = find_column(index_names, person_col, "person_col")  # (any case and normalisation)
        if index is not None:
            return index
    left_out = [c for c in names if c not in items]
    if left_out:
        return left_out[0]
    # else a named index (an unnamed one, such as each partition's own 0 … k-1, is no label)
    named = [c for c in index_names if c is not None and not str(c).startswith("__index_level_")]
    return named[0] if len(named) == 1 else None


def _refuse(labels: pd.Index, where: str) -> None:
    if labels.hasnans:
        raise ValueError(f"missing person label in {where}; every person needs a label")
    refuse_duplicate_labels(labels, "person")


def split_labels(values: Any, where: str, buckets: int) -> list:
    """One partition's labels, checked, as text (the in-memory reader compares labels as text:
    ``1`` in one file and ``"1"`` in another are one person) in ``buckets`` parts by hash
    (runs on a worker)."""
    labels = pd.Index(values.to_numpy() if hasattr(values, "to_numpy") else values)
    _refuse(labels, where)
    _check_distinct_as_text(labels, "person")  # 1 and "1" in one partition, as in memory
    labels = pd.Index(labels.astype(str), dtype=object)  # and across partitions, by bucket
    if buckets == 1:
        return [labels]
    h = pd.util.hash_array(np.asarray(labels, dtype=object)) % np.uint64(buckets)
    return [labels[h == k] for k in range(buckets)]


def check_bucket(*parts: pd.Index) -> int:
    """The number of labels in one bucket of every partition, refusing a duplicate (a worker)."""
    labels = parts[0].append(list(parts[1:])) if len(parts) > 1 else parts[0]
    _refuse(labels, "the data")
    return len(labels)


def label_checks(parts: list) -> list:
    """Delayed bucket checks of the partitions' delayed label columns ``parts``."""
    from dask import delayed

    if not parts:
        return []
    buckets = min(BUCKETS, len(parts))
    split = [delayed(split_labels, pure=True, nout=buckets)(p, f"partition {i}", buckets)
             for i, p in enumerate(parts)]
    return [delayed(check_bucket, pure=False)(*(s[k] for s in split)) for k in range(buckets)]


def parquet_labels(fs, path: str, row_group: int, column: Any) -> pd.Series:
    """The person labels of one Parquet row group (runs on a worker)."""
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as fh:
        return pq.ParquetFile(fh).read_row_group(row_group, columns=[column]).column(0).to_pandas()

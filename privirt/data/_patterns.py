"""Pattern (frequency) tables expanded to one row per person: the weights checked, matched to
the rows, bounded."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["MAX_EXPANDED_PERSONS", "expand_patterns"]


#: The most persons a pattern (frequency) table is expanded to: one row and one label per person.
MAX_EXPANDED_PERSONS = 50_000_000


def expand_patterns(codes: np.ndarray, persons: pd.Index, weights: Any, no_rows: bool = False
                    ) -> tuple[np.ndarray, pd.Index]:
    """The rows of ``codes`` each repeated ``weights[row]`` times (a pattern/frequency table to
    persons), with new person labels; a ``pandas.Series`` of weights is matched to the rows'
    labels ``persons`` where they have labels."""
    n = codes.shape[0]
    if isinstance(weights, Iterable) and not hasattr(weights, "__len__"):
        weights = list(weights)  # (a generator: numpy makes it one 0-d object, "1 entries")
    if isinstance(weights, pd.Series) and not weights.index.equals(persons):
        unlabelled = isinstance(persons, pd.RangeIndex) and persons.start == 0 and persons.step == 1
        shared = weights.index.isin(persons)
        if (unlabelled or not shared.any()) and len(weights) == n:
            weights = weights.to_numpy()  # rows without labels, or labels unrelated to the rows': row order
        elif weights.index.has_duplicates or set(weights.index) != set(persons):
            raise ValueError("weights is a Series whose labels are only partly the rows' labels; give one "
                             "weight per row labelled like the rows, or a plain array in row order")
        else:
            weights = weights.reindex(persons)  # (the same labels in another order)
    w = np.asarray(weights, dtype=object).ravel() if not isinstance(weights, np.ndarray) else weights.ravel()
    if len(w) != n:
        raise ValueError(f"weights has {len(w)} entries for {n} rows; give one per row")
    try:
        wf = np.asarray(w, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("weights must be non-negative whole numbers (pattern frequencies)") from None
    bad = ~np.isfinite(wf) | (wf < 0) | (wf != np.round(wf))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"weight {float(wf[i])} of row {i} is not a non-negative whole number: weights are pattern "
            "frequencies (how many persons gave that row's answers)"
        )
    if wf.sum() > MAX_EXPANDED_PERSONS:  # (in float: an int64 sum of huge weights wraps around)
        raise ValueError(
            f"the weights add up to {wf.sum():.6g} persons, more than a pattern table is expanded to in "
            f"memory ({MAX_EXPANDED_PERSONS:,}); check the weight column, or give the responses "
            "one row per person (a Parquet folder with --engine dask for very many)"
        )
    counts = wf.astype(np.int64)
    total = int(counts.sum())
    if total == 0 and not no_rows:
        raise ValueError("the weights add up to zero persons")
    width = len(str(total))
    return (np.ascontiguousarray(np.repeat(codes, counts, axis=0)),
            pd.Index([f"p{k + 1:0{width}d}" for k in range(total)], name="person"))

"""Labels of persons and items: as plain Python values in messages, and refused where two
differ only in type (labels are compared as text downstream)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

__all__: list[str] = []


def _py(value: Any) -> Any:
    """A numpy scalar as the plain Python value (so messages read ``5``, not ``np.int64(5)``)."""
    return value.item() if isinstance(value, np.generic) else value


def _check_distinct_as_text(idx: pd.Index, what: str) -> None:
    """Refuse labels that differ only in type (5 and "5"): labels are compared as text (files,
    ``--items``, the service).  Only an index of mixed types can hold such a pair."""
    text = idx.astype(str) if idx.dtype == object and idx.inferred_type != "string" else None
    if text is not None and text.has_duplicates:
        k = int(np.flatnonzero(text.duplicated())[0])
        other = idx[int(np.flatnonzero(text == text[k])[0])]
        raise ValueError(f"{what} labels {_py(other)!r} and {_py(idx[k])!r} are the same as text; give "
                         f"every {what} a distinct label")


def _all_distinct(col: pd.Series) -> bool:
    """Whether a column's values are all different (False for unhashable cells: lists, arrays)."""
    try:
        return bool(col.is_unique)
    except TypeError:
        return False


def item_labels(items: Sequence[Any]) -> pd.Index:
    """The item labels ``items`` (a sequence, not one string) as an index, checked.

    Parameters
    ----------
    items : sequence
        The item labels, in order.

    Returns
    -------
    pandas.Index
        The labels as given (``tupleize_cols=False``: a tuple stays one label).

    Raises
    ------
    ValueError
        ``items`` is a string; a label is missing (None, NaN) or not hashable (a list, an
        array); a label is listed twice, compared as text (``5`` and ``"5"`` are one label:
        labels are matched as text in files, ``--items`` and the service).
    """
    if isinstance(items, (str, bytes)):
        raise ValueError(f"items must be a sequence of item labels, not the string {items!r}")
    values = list(items)
    for k, label in enumerate(values):
        try:
            hash(label)
        except TypeError:
            raise ValueError(f"items has an unhashable label (a {type(label).__name__}) at position {k}; "
                             "give every item a string or number label") from None
    labels = pd.Index(values, tupleize_cols=False)
    if labels.hasnans:
        raise ValueError(f"items has a missing label (None or NaN) at position "
                         f"{int(np.flatnonzero(labels.isna())[0])}; every item needs a label")
    text = pd.Index([str(label) for label in values])
    if text.has_duplicates:
        raise ValueError(f"items lists {_py(labels[int(np.flatnonzero(text.duplicated())[0])])!r} twice "
                         "(item labels are compared as text); give each item once")
    return labels

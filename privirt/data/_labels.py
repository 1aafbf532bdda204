"""Labels of persons and items: as plain Python values in messages, and refused where two
differ only in type (labels are compared as text downstream)."""

from __future__ import annotations

from typing import Any

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

"""The one input type of privirt: a persons × items matrix of 0/1 responses with missing entries.

Every estimator accepts anything :func:`as_responses` accepts — a numpy array, a wide pandas
DataFrame (rows persons, columns items, NaN/None/pd.NA for missing), a long DataFrame with
``person, item, response`` columns, a path to a CSV or Parquet file in either layout, or a
:class:`Responses` — and keeps the person and item labels so that results come back labelled.

Storage is a single ``int8`` matrix of codes: ``1`` correct/yes, ``0`` incorrect/no and
``-1`` missing (one byte per cell), so that a 10^6 × 200 data set takes 200 MB.

Validation never coerces silently: a value other than 0, 1 or missing raises
:class:`ValueError` naming the value, its person (row) and item (column).

Empty persons/items
-------------------
A person with no observed response carries no information about anyone, and an item with
no observed response cannot be estimated.  ``empty="drop"`` (default) drops them with an
:class:`~privirt.exceptions.EmptyResponsesWarning` naming them; ``empty="error"`` raises
instead; ``empty="keep"`` keeps them (used by the private release paths, where the item set
is public and must not depend on the data).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Literal, Union

import numpy as np
import pandas as pd

from .._checks import check_flag
from ..exceptions import EmptyResponsesWarning, user_stacklevel
from ._codes import array_codes, as_array, observed_rows_cols
from ._cells import _FREQUENCY_NAMES, TEXT_ANSWERS_HINT, _cell_number, _first_offender, _frame_values, control_hint
from ._files import read_path, read_stream
from ._labels import (_all_distinct, _check_distinct_as_text, _person_col_hint, _py, check_not_long,
                      check_column_names, check_drop_cols, drop_columns, refuse_duplicate_labels, text_labels, unnamed_first)
from ._names import find_column, name_key
from ._patterns import expand_patterns

__all__ = ["Responses", "as_responses", "private_responses", "ResponsesLike"]

MISSING: int = -1
EmptyPolicy = Literal["drop", "error", "keep"]


@dataclass(frozen=True, eq=False)
class Responses:
    """A validated persons × items matrix of 0/1 responses with missing entries.

    Parameters
    ----------
    codes : ndarray of int8, shape (n_persons, n_items)
        ``1`` correct, ``0`` incorrect, ``-1`` missing.
    persons, items : pandas.Index
        Labels of the rows and columns.
    items_from_data : bool
        True when the item labels were collected from the rows of a long table, so that the
        item set itself depends on who is in the data (an item answered by one person comes
        and goes with that person).  Private estimators then ask for the public item list.
    persons_dropped, items_dropped : bool
        True when ``empty="drop"`` removed persons (items) with no response, so that n (the
        item set) depends on the data; private estimators then ask for ``n_persons=``
        (``items=``).

    Use :func:`as_responses` to build one from user data; the constructor checks shapes and
    codes but does not convert.
    """

    codes: np.ndarray
    persons: pd.Index
    items: pd.Index
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    items_from_data: bool = field(default=False, compare=False)
    persons_dropped: bool = field(default=False, compare=False)
    items_dropped: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        c = self.codes
        if not isinstance(c, np.ndarray) or c.dtype != np.int8 or c.ndim != 2:
            raise ValueError("Responses.codes must be a 2-D int8 numpy array; use as_responses()")
        if c.size and (c.min() < MISSING or c.max() > 1):  # two passes, no n × m temporary
            raise ValueError(
                "Responses.codes must be 1 (correct), 0 (incorrect) or -1 (missing); "
                "use as_responses() to convert data"
            )
        if len(self.persons) != c.shape[0] or len(self.items) != c.shape[1]:
            raise ValueError(
                f"label lengths ({len(self.persons)} persons, {len(self.items)} items) do not "
                f"match the matrix shape {c.shape}"
            )

    # -- shape and labels ---------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape  # type: ignore[return-value]

    @property
    def n_persons(self) -> int:
        return self.codes.shape[0]

    @property
    def n_items(self) -> int:
        return self.codes.shape[1]

    def __repr__(self) -> str:
        return (
            f"Responses({self.n_persons} persons × {self.n_items} items, "
            f"{self.observed_fraction:.1%} observed)"
        )

    # -- derived views ---------------------------------------------------------------
    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of observed cells."""
        return self.codes >= 0

    @property
    def n_observed(self) -> int:
        if "n_observed" not in self._cache:
            self._cache["n_observed"] = int(np.count_nonzero(self.codes >= 0))
        return self._cache["n_observed"]

    @property
    def observed_fraction(self) -> float:
        size = self.codes.size
        return self.n_observed / size if size else 0.0

    @property
    def has_missing(self) -> bool:
        return self.n_observed < self.codes.size

    def correct(self) -> np.ndarray:
        """int8 matrix with 1 where the response is observed and correct, else 0."""
        return (self.codes == 1).astype(np.int8)

    def to_float(self) -> np.ndarray:
        """float64 matrix with NaN for missing (allocates 8 bytes per cell)."""
        out = self.codes.astype(np.float64)
        out[self.codes < 0] = np.nan
        return out

    def to_frame(self) -> pd.DataFrame:
        """Wide DataFrame (float, NaN for missing) with the labels."""
        return pd.DataFrame(self.to_float(), index=self.persons.copy(), columns=self.items.copy())

    def to_long(self) -> pd.DataFrame:
        """Long DataFrame with columns ``person, item, response`` (observed cells only, person by
        person).  Read back, a long table orders its items by first appearance, so with missing
        cells they may come back in another order: ``.reindex(columns=...)`` the wide frame."""
        r, c = np.nonzero(self.codes >= 0)
        return pd.DataFrame(
            {
                "person": self.persons[r],
                "item": self.items[c],
                "response": self.codes[r, c].astype(np.int64),
            }
        )

    def subset(self, persons: Any = None, items: Any = None) -> "Responses":
        """A new Responses restricted to row/column positions (integer or boolean arrays)."""
        rows = slice(None) if persons is None else np.asarray(persons)
        cols = slice(None) if items is None else np.asarray(items)
        codes = np.ascontiguousarray(self.codes[rows][:, cols])
        return Responses(codes, self.persons[rows], self.items[cols], items_from_data=self.items_from_data,
                         persons_dropped=self.persons_dropped, items_dropped=self.items_dropped)


ResponsesLike = Union[Responses, np.ndarray, pd.DataFrame, str, os.PathLike, Iterable]


# ---------------------------------------------------------------------------------------
# construction
# ---------------------------------------------------------------------------------------
def as_responses(
    data: ResponsesLike,
    *,
    format: Literal["auto", "wide", "long"] = "auto",
    person_col: str | None = None,
    item_col: str = "item",
    response_col: str = "response",
    empty: EmptyPolicy = "drop",
    weights: str | Iterable[int] | None = None,
    labels_as_text: bool | None = None,
    drop_cols: Iterable[str] | None = None,
) -> Responses:
    """Validate user data and return a :class:`Responses`.

    Parameters
    ----------
    data : Responses, ndarray, DataFrame, str or path-like
        * 2-D array of 0/1 with NaN for missing (float) — bool and integer arrays are fine;
          the masked cells of a numpy masked array (``np.ma``) are missing, like NaN.
        * wide DataFrame: index = persons, columns = items.  A ``MultiIndex`` (of columns or
          rows) is flattened: each tuple, such as ``("s", 1)``, is one label, in a flat index
          without the level names, here and in every result.
        * long DataFrame with columns ``person, item, response`` (names configurable).
        * path to ``.csv`` (also compressed, ``.csv.gz``) / ``.parquet`` (``.pq``) in
          either layout, or an open text or binary file of comma-separated values.
    format : {"auto", "wide", "long"}
        ``"auto"`` treats a table with exactly the columns person/item/response as long.
    person_col : str, optional
        Wide tables: the column holding person labels.  By default a column named
        ``person`` (any case) or a file's unnamed first column (``Unnamed: 0``: a CSV's row
        labels, also in a Parquet file written from it) is used; every other column is an item.  Long tables: the person column (default ``"person"``).
    item_col, response_col : str
        Column names in the long layout (persons and items in order of first appearance).
    empty : {"drop", "error", "keep"}
        What to do with persons or items that have no observed response (see module doc).
    weights : str or sequence of int, optional
        A pattern table: each row is a response pattern held by ``weights`` persons (a column
        name of a wide table, such as the ``frequency`` column of the bundled LSAT files, or
        one non-negative integer per row).  Rows are expanded into that many persons,
        labelled ``p0001``, ``p0002``, … in row order.
    labels_as_text : bool, optional
        Read a long table's person and item labels, and a CSV's person column, as text (``5``
        and ``"5"`` are the same label ``"5"``; a CSV's ``01`` stays ``"01"`` and ``NA`` is a
        label, not a missing one).  Default: for files and open files (a CSV has no types: a
        reader that infers the column's type from the rows made ``001`` and ``1`` one label,
        and gives ``5`` or ``"5"`` depending on who is in the data), not for data in memory.
        The private paths always do (:func:`private_responses`).
    drop_cols : sequence of str, optional
        Columns of a table to remove before it is read, such as text label columns (state,
        party) beside the person column; an unknown name, or the person column, is refused.

    The column names given (``person_col``, ``item_col``, ``response_col``, ``weights``,
    ``drop_cols``) name a column exactly or else in any case and Unicode normalisation (a header
    saved on macOS is NFD); the labels in the data are compared exactly.

    Raises
    ------
    ValueError
        Empty input, wrong dimensions, a value other than 0/1/missing (the message names
        the value, the person and the item), duplicate labels, or duplicate long rows.
    FileNotFoundError
        A path that does not exist.
    """
    return _as_responses(data, format=format, person_col=person_col, item_col=item_col,
                         response_col=response_col, empty=empty, weights=weights,
                         labels_as_text=labels_as_text, no_rows=False, drop_cols=drop_cols)


def private_responses(
    data: ResponsesLike,
    *,
    format: Literal["auto", "wide", "long"] = "auto",
    person_col: str | None = None,
    item_col: str = "item",
    response_col: str = "response",
    weights: str | Iterable[int] | None = None,
    drop_cols: Iterable[str] | None = None,
) -> Responses:
    """The responses of a private path, read so that nothing about them depends on the data
    but the cells: empty persons and items are kept, a long table's labels are read as text
    (``labels_as_text``), and a table without rows gives a :class:`Responses` of no persons
    (all of the public persons are then absent: see
    :func:`privirt.private.public_responses`, which pads to the public number of persons).
    """
    return _as_responses(data, format=format, person_col=person_col, item_col=item_col,
                         response_col=response_col, empty="keep", weights=weights,
                         labels_as_text=True, no_rows=True, drop_cols=drop_cols)


def _as_responses(data, *, format, person_col, item_col, response_col, empty, weights,
                  labels_as_text: bool | None, no_rows: bool, drop_cols=None) -> Responses:
    check_column_names(person_col, item_col, response_col)
    if empty not in ("drop", "error", "keep"):
        raise ValueError(f"empty must be 'drop', 'error' or 'keep', got {empty!r}")
    if format not in ("auto", "wide", "long"):
        raise ValueError(f"format must be 'auto', 'wide' or 'long', got {format!r}")

    if (isinstance(weights, str) and not isinstance(data, (str, os.PathLike, pd.DataFrame))
            and not hasattr(data, "read")):
        raise ValueError(f"weights={weights!r} names a column: pass a table (DataFrame or file), "
                         "or one integer weight per row")
    weight_col = weights if isinstance(weights, str) else None
    if labels_as_text is None:  # a file's labels are text; data in memory keeps its types
        labels_as_text = isinstance(data, (str, os.PathLike)) or hasattr(data, "read")
    drop = check_drop_cols(drop_cols, isinstance(data, (str, os.PathLike, pd.DataFrame))
                           or hasattr(data, "read"))
    read = _Read(check_flag("labels_as_text", labels_as_text), no_rows, drop)
    if isinstance(data, Responses):
        resp = data
    elif isinstance(data, (str, os.PathLike)):
        resp = _from_path(Path(data), format, person_col, item_col, response_col, weight_col, read)
    elif hasattr(data, "read"):  # an open file, e.g. sys.stdin: comma-separated text
        resp = _from_stream(data, format, person_col, item_col, response_col, weight_col, read)
    elif isinstance(data, pd.DataFrame):
        resp = _from_frame(data, format, person_col, item_col, response_col, from_file=False,
                           weight_col=weight_col, read=read)
    elif isinstance(data, pd.Series):
        raise ValueError("a pandas Series is one-dimensional; pass a persons × items DataFrame")
    else:
        if _is_cupy(data):
            data = data.get()
        if type(data).__module__.startswith("scipy.sparse"):
            raise ValueError("a scipy.sparse matrix stores its absent cells as 0: pass a dense array "
                             "(X.toarray(), with NaN where a response is missing) or a DataFrame")
        if isinstance(data, dict):
            raise ValueError("a dict is not a responses table: pass a DataFrame (pd.DataFrame(data)), "
                             "an array or a file")
        values = _unmasked(data) if isinstance(data, np.ma.MaskedArray) else as_array(data)
        if values.ndim == 0:
            raise ValueError(f"responses must be a persons × items matrix (array, DataFrame or file), "
                             f"got {type(data).__name__}")
        if no_rows and values.ndim == 2 and values.shape[0] == 0 and values.shape[1] > 0:
            resp = _no_rows(values.shape[1], None)
        else:
            resp = _from_array(values, None, None)
    if weights is not None:
        counts = resp._cache.pop("pattern_weights", None) if weight_col else weights
        codes, persons = expand_patterns(resp.codes, resp.persons, counts, no_rows)
        resp = Responses(codes, persons, resp.items)
    return _apply_empty_policy(resp, empty)


@dataclass(frozen=True)
class _Read:
    """How a table is read: labels as text (private paths), tables without rows allowed."""

    labels_as_text: bool = False
    no_rows: bool = False
    drop: tuple = ()  # the columns to remove first (drop_cols)


def _no_rows(m: int, items: Any, items_from_data: bool = False) -> Responses:
    """A :class:`Responses` of no persons (a table without rows, on a private path)."""
    items = pd.RangeIndex(m) if items is None else pd.Index(items)
    return Responses(np.empty((0, len(items)), dtype=np.int8), pd.RangeIndex(0), items,
                     items_from_data=items_from_data)


def _unmasked(data: np.ma.MaskedArray) -> np.ndarray:
    """A masked array's values with its masked cells missing (NaN), as numpy's mask means.

    ``np.asarray`` would drop the mask and read a masked cell's hidden fill value as an
    answer.
    """
    mask = np.ma.getmaskarray(data)
    values = np.ma.getdata(data)
    if not mask.any():
        return np.asarray(values)
    values = values.astype(float if values.dtype.kind in "biuf" else object)
    values[mask] = np.nan
    return values


def _is_cupy(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "cupy"


#: compression suffixes read transparently (``responses.csv.gz``)
def _from_path(path: Path, fmt: str, person_col, item_col, response_col, weight_col=None,
               read: _Read = _Read()) -> Responses:
    frame = read_path(path, fmt, person_col, item_col, read.labels_as_text, read.no_rows)
    return _from_frame(frame, fmt, person_col, item_col, response_col, from_file=True,
                       weight_col=weight_col, read=read)


def _from_stream(stream: Any, fmt: str, person_col, item_col, response_col,
                 weight_col=None, read: _Read = _Read()) -> Responses:
    """A comma-separated table from an open file (``sys.stdin`` for the command line's ``-``)."""
    frame = read_stream(stream, fmt, person_col, item_col, read.labels_as_text, read.no_rows)
    return _from_frame(frame, fmt, person_col, item_col, response_col, from_file=True,
                       weight_col=weight_col, read=read)


def _from_frame(frame: pd.DataFrame, fmt, person_col, item_col, response_col, from_file,
                weight_col: str | None = None, read: _Read = _Read()) -> Responses:
    if read.drop:
        frame = drop_columns(frame, read.drop, person_col)
        read = replace(read, drop=())
    if frame.shape[0] == 0 and frame.shape[1] > 0 and read.no_rows:
        pass  # a private path: every public person is absent (all-missing rows)
    elif frame.shape[0] == 0 or frame.shape[1] == 0:
        raise ValueError(f"the responses table is empty (shape {frame.shape})")
    long_pcol = "person" if person_col is None else str(person_col)
    if weight_col is not None:
        # any case and Unicode normalisation, as the long layout's column names
        found = find_column(frame.columns, weight_col, "weights column")
        weight_col = weight_col if found is None else found
        if weight_col not in frame.columns:
            raise ValueError(f"weights column {weight_col!r} is not a column of the table "
                             f"(columns: {', '.join(map(str, frame.columns[:8]))})")
        check_not_long(frame, fmt, long_pcol, item_col, response_col, weight_col)
        counts = frame[weight_col].to_numpy()
        resp = _from_frame(frame.drop(columns=[weight_col]), "wide", person_col, item_col,
                           response_col, from_file, read=read)
        resp._cache["pattern_weights"] = counts
        return resp
    keys = {name_key(c) for c in frame.columns}
    check_not_long(frame, fmt, long_pcol, item_col, response_col)
    is_long = fmt == "long" or (
        fmt == "auto"
        and frame.shape[1] == 3
        and {name_key(long_pcol), name_key(item_col), name_key(response_col)} <= keys
    )
    if is_long:
        return _from_long(frame, long_pcol, item_col, response_col, read.labels_as_text)
    if (
        fmt == "auto"
        and frame.shape[1] == 3
        and {name_key(long_pcol), name_key(item_col)} <= keys
    ):
        other = [c for c in frame.columns if name_key(c) not in (name_key(long_pcol), name_key(item_col))]
        raise ValueError(
            f"this table looks long (columns {', '.join(map(str, frame.columns))}) but has no "
            f"{response_col!r} column: rename {other[0]!r} to {response_col!r}, or read it with "
            f"format='long' (CLI: --format long), which takes the third column as the responses"
        )

    # wide layout
    label_col = None
    if person_col is not None:
        # (any case and Unicode normalisation: a header saved on macOS is in NFD)
        label_col = find_column(frame.columns, person_col, "person_col")
        # a Parquet file written from a labelled frame restores that column as the index
        if label_col is None and find_column([frame.index.name], person_col, "person_col") is None:
            raise ValueError(f"person_col {person_col!r} is not a column of the table")
    elif "person" in keys:
        label_col = find_column(frame.columns, "person", "the person column")
    elif from_file and unnamed_first(frame.columns):
        label_col = frame.columns[0]
    if label_col is not None:
        frame = frame.set_index(label_col)
    # a CSV without a label column reads with index 0 … n-1; a Parquet file may restore
    # the labelled index it was written with: keep it
    persons = frame.index
    if frame.shape[1] == 0:
        raise ValueError("the responses table has no item columns")
    if frame.shape[0] == 0:  # read.no_rows
        return _no_rows(frame.shape[1], frame.columns)
    named = person_col is not None or label_col is not None  # (then no --person-col hint)
    values = _frame_values(frame, labelled=named)
    return _from_array(values, persons, frame.columns, table=not named)


def _from_long(frame, person_col, item_col, response_col, labels_as_text: bool = False) -> Responses:
    names = []
    lowered = {name_key(person_col), name_key(item_col)}  # (any case and Unicode normalisation)
    if (
        frame.shape[1] == 3
        and find_column(frame.columns, response_col, "response_col") is None
        and lowered <= {name_key(c) for c in frame.columns}
    ):
        # an explicit long table of three columns: the one that is not person/item holds the responses
        response_col = next(str(c) for c in frame.columns if name_key(c) not in lowered)
    for what, want in (("person_col", person_col), ("item_col", item_col), ("response_col", response_col)):
        found = find_column(frame.columns, want, what)
        if found is not None:
            names.append(found)
        else:
            raise ValueError(
                f"long-format responses need columns {person_col!r}, {item_col!r}, "
                f"{response_col!r}; got {list(frame.columns)}: name yours with person_col=, item_col=, "
                "response_col= (CLI: --person-col, --item-col, --response-col)"
            )
    pc, ic, rc = names
    if labels_as_text:  # 5 and "5" are one label, "5", whatever type the column was read as
        frame = text_labels(frame, [pc, ic])  # (" q1" and "q1" one label, "q1")
    if frame[pc].isna().any() or frame[ic].isna().any():
        bad = int(np.flatnonzero((frame[pc].isna() | frame[ic].isna()).to_numpy())[0])
        raise ValueError(f"row {bad} of the long table has a missing person or item label")
    dup = frame.duplicated(subset=[pc, ic], keep=False)
    if dup.any():
        r = int(np.flatnonzero(dup.to_numpy())[0])
        raise ValueError(
            f"person {_py(frame[pc].iloc[r])!r} answered item {_py(frame[ic].iloc[r])!r} more than once "
            f"(row {r} of the long table); keep one response per person and item"
        )
    persons = pd.Index(pd.unique(frame[pc]), name=None)
    items = pd.Index(pd.unique(frame[ic]), name=None)
    _check_distinct_as_text(persons, "person")
    _check_distinct_as_text(items, "item")

    def describe(i, j, v):
        return (
            f"invalid response {v!r} for person {_py(frame[pc].iloc[i])!r}, item "
            f"{_py(frame[ic].iloc[i])!r} (row {i} of the long table): responses must be 0, 1 "
            f"or missing; {control_hint(v) or TEXT_ANSWERS_HINT}"
        )

    vals = _frame_values(frame[[rc]], describe).ravel()
    bad = ~(np.isnan(vals) | (vals == 0) | (vals == 1))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"invalid response {_py(frame[rc].iloc[r])!r} for person {_py(frame[pc].iloc[r])!r}, item "
            f"{_py(frame[ic].iloc[r])!r} (row {r} of the long table): responses must be 0, 1 or missing"
        )
    codes = np.full((len(persons), len(items)), MISSING, dtype=np.int8)
    ri = persons.get_indexer(frame[pc])
    ci = items.get_indexer(frame[ic])
    obs = ~np.isnan(vals)
    codes[ri[obs], ci[obs]] = vals[obs].astype(np.int8)
    return Responses(codes, persons, items, items_from_data=True)


def _from_array(values: np.ndarray, persons, items, table: bool = False,
                rows: str | None = None) -> Responses:
    if values.dtype == object or values.dtype.kind in "US":
        values = _object_array(values.astype(object), persons, items)
    if values.ndim != 2:
        raise ValueError(
            f"responses must be a 2-D persons × items matrix, got an array with {values.ndim} "
            f"dimension(s) and shape {values.shape}"
        )
    if values.size == 0:
        raise ValueError(f"the responses matrix is empty (shape {values.shape})")
    if values.dtype.kind == "b":
        codes = values.astype(np.int8)
    elif values.dtype.kind in "iuf":  # in row blocks: the masks and temporaries stay a few MiB
        codes = array_codes(values, MISSING,
                            lambda i, j: _raise_bad(values, i, j, persons, items, table, rows))
    else:
        raise ValueError(
            f"responses must be numeric 0/1 with NaN for missing, got dtype {values.dtype}"
        )
    persons = pd.RangeIndex(values.shape[0]) if persons is None else pd.Index(persons)
    items = pd.RangeIndex(values.shape[1]) if items is None else pd.Index(items)
    for what, idx, axis in (("person", persons, "row"), ("item", items, "column")):
        if idx.hasnans:
            pos = int(np.flatnonzero(idx.isna())[0])
            raise ValueError(f"missing {what} label ({axis} {pos}); every {what} needs a label")
        refuse_duplicate_labels(idx, what, axis)
        _check_distinct_as_text(idx, what)
    return Responses(np.ascontiguousarray(codes), persons, items)


def _object_array(values: np.ndarray, persons=None, items=None) -> np.ndarray:
    flat = values.ravel()
    vals = [_cell_number(v) for v in flat]
    if any(v is None for v in vals):
        k = _first_offender(flat, vals)
        v = flat[k]
        idx = tuple(int(t) for t in np.unravel_index(k, values.shape))
        if values.ndim == 2:
            i, j = idx
            p = persons[i] if persons is not None else i
            it = items[j] if items is not None else j
            where = f"for person {p!r} (row {i}), item {it!r} (column {j})"
        else:
            where = f"at position {idx}"
        raise ValueError(
            f"invalid response {v!r} {where}: responses must be 0, 1 or missing (NaN)"
        )
    return np.array(vals, dtype=np.float64).reshape(values.shape)


def _raise_bad(values, i: int, j: int, persons, items, table: bool = False,
               rows: str | None = None) -> None:
    """Raise for the bad cell (i, j); ``rows``: the rows are those of a part (e.g. "partition 2")
    whose offset in the table is not known, so the cell is named by its item and row there."""
    p = persons[i] if persons is not None else i
    it = items[j] if items is not None else j
    hint = ""
    if str(it).strip().lower() in _FREQUENCY_NAMES:
        hint = (f"; if column {it!r} holds how many persons gave each row's answers (a pattern "
                f"table), pass weights={str(it)!r} (CLI: --weights-col {it})")
    elif j == 0 and table and _all_distinct(pd.Series(values[:, 0])):  # a table's numeric person ids?
        hint = f"; {_person_col_hint(it)}"
    cell = (f"for item {it!r} at row {i} of {rows}" if rows else
            f"for person {p!r} (row {i}), item {it!r} (column {j})")
    raise ValueError(
        f"invalid response {values[i, j].item()!r} {cell}: responses must be 0, 1 or missing "
        f"(NaN){hint}"
    )


def _apply_empty_policy(resp: Responses, empty: EmptyPolicy) -> Responses:
    if empty == "keep":
        return resp
    row_ok, col_ok = observed_rows_cols(resp.codes)  # in row blocks: no n·m mask
    if row_ok.all() and col_ok.all():
        return resp
    empty_p = list(resp.persons[~row_ok][:5])
    empty_i = list(resp.items[~col_ok][:5])
    desc = []
    if (~row_ok).any():
        desc.append(f"{int((~row_ok).sum())} person(s) with no response (e.g. {empty_p})")
    if (~col_ok).any():
        desc.append(f"{int((~col_ok).sum())} item(s) with no response (e.g. {empty_i})")
    msg = " and ".join(desc)
    if empty == "error":
        raise ValueError(f"{msg}; remove them or pass empty='drop'")
    warnings.warn(f"dropped {msg}", EmptyResponsesWarning, stacklevel=user_stacklevel())
    rows, cols = np.flatnonzero(row_ok), np.flatnonzero(col_ok)
    out = Responses(np.ascontiguousarray(resp.codes[rows][:, cols]), resp.persons[rows], resp.items[cols],
                    items_from_data=resp.items_from_data, persons_dropped=not row_ok.all(),
                    items_dropped=not col_ok.all())
    if out.n_persons == 0 or out.n_items == 0:
        raise ValueError("no observed responses at all")
    return out

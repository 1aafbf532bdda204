"""Labels of persons and items: as plain Python values in messages, refused where two differ
only in type (labels are compared as text downstream), and a wide table's item columns."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any, Sequence

import numpy as np
import pandas as pd
from mechanisms.measures import _brief

from ._names import find_column, name_key, same_name

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


def refuse_duplicate_labels(idx: pd.Index, what: str, axis: str | None = None) -> None:
    """Refuse a label that appears twice, naming it, where (``axis``: ``"row"`` or ``"column"``;
    None where the positions are not known, as in the Dask engine's buckets) and the remedy."""
    if not idx.has_duplicates:
        return
    label = idx[idx.duplicated()][0]
    where = ""
    if axis is not None:
        first, second = (int(k) for k in np.flatnonzero(idx == label)[:2])
        where = f" ({axis}s {first} and {second})"
    remedy = " or merge the rows" if what == "person" else ": rename or drop one of the columns"
    raise ValueError(f"duplicate {what} label {_py(label)!r}{where}: make the {what} labels "
                     f"unique{remedy}")


def _all_distinct(col: pd.Series) -> bool:
    """Whether a column's values are all different (False for unhashable cells: lists, arrays)."""
    try:
        return bool(col.is_unique)
    except TypeError:
        return False


def _first_repeat(texts: list[str]) -> str | None:
    """The first text that appears a second time in ``texts`` (None: all distinct)."""
    seen: set[str] = set()
    return next((t for t in texts if t in seen or seen.add(t)), None)


def text_labels(frame: pd.DataFrame, columns: list) -> pd.DataFrame:
    """``frame`` with its label ``columns`` as text, the spaces around each label stripped
    (``p1, q1`` in a long CSV is item ``q1``, as a header's `` q1`` is); a label of spaces
    only is a missing one.

    Parameters
    ----------
    frame : pandas.DataFrame
        A long table.
    columns : list
        Its person and item columns.

    Returns
    -------
    pandas.DataFrame
        A copy with those columns of pandas' string dtype.
    """
    out = frame.astype({c: "string" for c in columns})
    for c in columns:
        out[c] = out[c].str.strip().replace("", pd.NA)
    return out


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
    try:
        values = list(items)
    except TypeError:  # a number, None, a 0-d array
        raise ValueError(f"items must be a sequence of item labels, got {items!r}") from None
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


def aligned_frame(frame: Any, labels: pd.Index, what: str, *, items_of: str = "Y.index",
                  hint: str = "pass the NoisyCounts as released",
                  as_text: bool = False) -> pd.DataFrame:
    """``frame`` with its rows and columns in the order of the item ``labels``, read by label.

    Parameters
    ----------
    frame : pandas.DataFrame
        An items × items frame (counts, a comparison graph) labelled by item on both axes.
    labels : pandas.Index
        The items, in the order wanted (unique).
    what : str
        The frame's name in messages (``"the release's graph"``).
    items_of : str, optional
        Where ``labels`` come from, in messages.
    hint : str, optional
        What to do, ending a message.
    as_text : bool, optional
        Match the frame's labels to ``labels`` as text (:func:`match_items`, as ``items=`` is
        matched: ``0`` carries item ``"0"``); ``False``: exactly.

    Returns
    -------
    pandas.DataFrame
        ``frame`` itself when already in order, else its rows and columns of ``labels``.

    Raises
    ------
    ValueError
        In one line: ``frame`` is not a DataFrame, or an axis does not carry exactly ``labels``.
    """
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{what} must be a pandas DataFrame labelled by item, "
                         f"got {type(frame).__name__}")
    where = {}
    for axis, idx in (("index", frame.index), ("columns", frame.columns)):
        exact = len(idx) == len(labels) and not idx.has_duplicates and set(idx) == set(labels)
        if as_text and not idx.equals(labels):
            # the same labels exactly come first: counts labelled [0, 1, "1"] are unique, but
            # not as text, and a permuted graph with exactly their labels was refused
            where[axis] = idx.get_indexer(labels) if exact else _text_positions(labels, idx)
            bad = where[axis] is None
        else:
            bad = not idx.equals(labels) and not exact
        if bad:
            raise ValueError(f"{what} {axis} must carry the items of {items_of} "
                             f"({len(labels)} labels, e.g. {list(labels[:3])}), got {len(idx)} "
                             f"labels, e.g. {list(idx[:3])}; {hint}")
    if frame.index.equals(labels) and frame.columns.equals(labels):
        return frame
    if as_text:
        rows, cols = (where.get(axis, np.arange(len(labels))) for axis in ("index", "columns"))
        return frame.iloc[rows, cols]
    return frame.loc[labels, labels]


def _text_positions(labels: pd.Index, idx: pd.Index) -> np.ndarray | None:
    """For each of ``labels``, the position of its label in ``idx``, matched as text
    (:func:`match_items`); ``None`` unless ``idx`` carries exactly those items, each once."""
    if len(idx) != len(labels):
        return None
    try:
        _, pos = match_items(labels, idx, public=False)
    except ValueError:  # two labels of idx the same as text
        return None
    return pos if (pos >= 0).all() and len(set(pos.tolist())) == len(pos) else None


def match_items(items: Sequence[Any] | None, columns: Sequence[Any], *,
                public: bool) -> tuple[pd.Index, np.ndarray]:
    """The item labels ``items`` matched, as text, to a table's item columns (both engines).

    Parameters
    ----------
    items : sequence or None
        The item labels, in order (checked by :func:`item_labels`); ``None``: the columns.
    columns : sequence
        The table's item columns.
    public : bool
        ``items`` is a private path's public item set: it must be ordered (a list, not a
        set) and every column must be one of its items.

    Returns
    -------
    labels : pandas.Index
        The item labels: ``items`` as given, or the columns.
    positions : ndarray of int
        For each label, the position of its column (-1: not a column of the table).

    Raises
    ------
    ValueError
        Two columns are the same as text (``5`` and ``"5"``); ``items`` is refused by
        :func:`item_labels`; for a public item set, an unordered ``items`` or a column that
        is not one of its items.
    """
    data = pd.Index(list(columns), tupleize_cols=False)
    _check_distinct_as_text(data, "item")
    # (plain Python on the text: a pandas string index's engine swaps the warning filters,
    # which is not thread-safe, and the service calls this from request threads)
    data_text = [str(c).strip() for c in data]  # (spaces around a label: not another label)
    twice = _first_repeat(data_text)
    if twice is not None:
        raise ValueError(f"the data have two items labelled {twice!r} "
                         "(item labels are compared as text); rename one")
    if items is None:
        return data, np.arange(len(data))
    if public and not isinstance(items, (Sequence, np.ndarray, pd.Index, pd.Series)):
        # a set's order changes from run to run (string hashing): the output's order would too
        raise ValueError(f"items must be an ordered sequence of item labels (a list), got a "
                         f"{type(items).__name__}")
    labels = item_labels(items)  # a string, a missing or unhashable label, one listed twice
    public_text = [str(i).strip() for i in labels]
    twice = _first_repeat(public_text)
    if twice is not None:
        raise ValueError(f"items lists {twice!r} twice (labels are compared as text, without the "
                         "spaces around them); give each item once")
    if public:
        wanted = set(public_text)
        extra = [label for label, text in zip(data, data_text) if text not in wanted]
        if extra:
            shown = f"item(s) {extra}" if len(extra) <= 5 else f"{len(extra)} items (the first 5: {extra[:5]})"
            raise ValueError(
                f"the data have {shown} that are not in the public item set "
                f"`items`; {_normalisation_note(extra, public_text)}add them to `items` or remove "
                "them from the data"
            )
    where = {text: k for k, text in enumerate(data_text)}
    return labels, np.array([where.get(text, -1) for text in public_text], dtype=np.intp)


def _normalisation_note(extra: list, public_text: list[str]) -> str:
    """Words for a data item that is an item of ``items`` in another Unicode normalisation
    (NFC/NFD print alike; item labels are compared exactly, so they are other items): both
    shown with ``ascii()`` and what to do; ``""`` when there is none."""
    nfc = {unicodedata.normalize("NFC", t): t for t in public_text}
    for label in extra:
        twin = nfc.get(unicodedata.normalize("NFC", str(label).strip()))
        if twin is not None:
            return (f"{ascii(str(label))} in the data and {ascii(twin)} in `items` differ only in "
                    "Unicode normalisation (NFC/NFD): write `items` in the form of the data, or "
                    "normalise the file; else ")
    return ""


def unnamed_first(columns: Any) -> bool:
    """Whether a file's first column is unnamed (``Unnamed: 0``, as pandas names a CSV's row-label
    column, also after a round trip to Parquet): without a person column it holds the labels."""
    return len(columns) > 0 and str(columns[0]).startswith("Unnamed: 0")


def wide_item_columns(columns: list, person_col: str | None, index_names: Any = (),
                      where: str = "", from_file: bool = False) -> list:
    """The item columns of a wide table, by the in-memory reader's rules (the Dask engine reads
    the schema with them; :func:`privirt.data.responses._from_frame` is the in-memory reader).

    Parameters
    ----------
    columns : list
        The table's columns, without its (pandas) index columns.
    person_col : str or None
        The person column: it must be one of ``columns`` or ``index_names``.  Without it a
        column named ``person`` (any case) holds the labels.
    index_names : collection, optional
        The names of the table's index columns (a Parquet file's pandas index).
    where : str, optional
        Appended to an error's message (`` FILE``).
    from_file : bool, optional
        A file's table: without a person column an unnamed first column (:func:`unnamed_first`)
        holds the labels.

    Returns
    -------
    list
        ``columns`` without the person column.

    Raises
    ------
    ValueError
        For a long table (exactly the columns person, item and response, any case), which
        the in-memory reader reads as long and the Dask engine cannot read.
    """
    names = {name_key(c) for c in columns}
    if len(columns) == 3 and {name_key("person" if person_col is None else person_col), "item", "response"} <= names:
        raise ValueError(f"engine='dask' reads wide tables (one column per item), and the table"
                         f"{where} has the long layout (columns {', '.join(map(str, columns))}); "
                         "convert the long table or use engine='local'")
    if person_col is not None:  # (any case and Unicode normalisation, as the in-memory reader)
        found = find_column(columns, person_col, "person_col")
        if found is None and find_column(index_names, person_col, "person_col") is None:
            raise ValueError(f"person_col {person_col!r} is not a column of the table{where}")
    else:
        found = None
    items = [c for c in columns if not same_name(c, found)
             and (person_col is not None or name_key(c) != "person")]
    if from_file and person_col is None and len(items) == len(columns) and unnamed_first(items):
        return items[1:]
    return items


def check_not_long(frame: pd.DataFrame, fmt: str, person_col: str, item_col: str,
                   response_col: str, weight_col: Any = None) -> None:
    """Refuse a long table that would be read as wide: one with the long columns and more (a
    weights column, a ``time`` column), whose item column holds labels, not 0/1 answers (so
    that the wide reading would fail on it in any case).

    Parameters
    ----------
    frame : pandas.DataFrame
        The table as read.
    fmt : str
        The layout asked for: ``"auto"`` only is checked (a long table of exactly the three
        columns already reads as long).
    person_col, item_col, response_col : str
        The long table's column names (any case).
    weight_col : str, optional
        The weights column (``--weights-col``): weights apply to wide pattern tables.

    Raises
    ------
    ValueError
        One line naming the layout and what to do.
    """
    if fmt == "long" and weight_col is not None:
        raise ValueError("weights apply to wide pattern tables (one row per response pattern)")
    others = [c for c in frame.columns if c != weight_col]
    names = (name_key(person_col), name_key(item_col), name_key(response_col))
    if (fmt != "auto" or not set(names) <= {name_key(c) for c in others}
            or (len(others) == 3 and weight_col is None)):
        return
    item = frame[find_column(others, item_col, "item_col")]
    if pd.to_numeric(item, errors="coerce").isin([0, 1]).eq(item.notna()).all():
        return  # 0/1 answers: a wide table with an item called item
    shown = ", ".join(map(str, frame.columns))
    if weight_col is not None:
        raise ValueError(f"weights apply to wide pattern tables (one row per response pattern), and "
                         f"this table looks long (columns {shown}); drop weights= (CLI: --weights-col)")
    raise ValueError(f"this table looks long (columns {shown}): read it with format='long' "
                     "(CLI: --format long), which reads the person, item and response columns "
                     "and ignores the others")


def _person_col_hint(name: Any) -> str:
    """The hint for an invalid response in a table's first column, whose values may be person labels."""
    return f"if column {name!r} holds person labels, name it with person_col={name!r} (CLI: --person-col {name})"


def check_column_names(person_col: Any, item_col: Any, response_col: Any) -> None:
    """Refuse column-name options of the wrong type in one line, naming the option.

    Parameters
    ----------
    person_col : str or None
        A wide table's person column or a long table's (None: ``person``); any hashable column
        label is taken (a DataFrame's columns need not be strings).
    item_col, response_col : str
        A long table's item and response columns (matched in any case, so text).

    Raises
    ------
    ValueError
        For an ``item_col`` or ``response_col`` that is not a string, or an unhashable or bool
        ``person_col``.
    """
    for name, value in (("item_col", item_col), ("response_col", response_col)):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a column name (a string), got {_brief(value)}")
    if person_col is None or isinstance(person_col, str):
        return
    try:
        hash(person_col)
        hashable = True
    except TypeError:
        hashable = False
    if not hashable or isinstance(person_col, (bool, np.bool_)):
        raise ValueError(f"person_col must be a column name (a string) or None, got {_brief(person_col)}")


def check_drop_cols(drop_cols: Any, table: bool) -> tuple:
    """``drop_cols`` as a tuple of column names, refused for data that has no named columns."""
    if drop_cols is None:
        return ()
    if isinstance(drop_cols, str):
        names: tuple = (drop_cols,)
    elif isinstance(drop_cols, (bytes, dict)) or not isinstance(drop_cols, Iterable):
        raise ValueError(f"drop_cols must be a column name or a list of column names, got "
                         f"{_brief(drop_cols)}")
    else:
        names = tuple(drop_cols)
    if names and not table:
        raise ValueError("drop_cols names columns of a table: pass a DataFrame or a file, or leave "
                         "drop_cols out")
    return names


def drop_columns(frame: pd.DataFrame, names: tuple, person_col: Any) -> pd.DataFrame:
    """``frame`` without the columns ``names`` (``drop_cols``), refusing an unknown name and
    the person column."""
    # (None is no column's name: drop_cols=[None] is an unknown column); names are matched in
    # any case and Unicode normalisation (a header saved on macOS is in NFD), the person column
    # as the reader finds it: only that column is refused ('Person' beside a person column
    # 'person' may be dropped)
    columns = list(frame.columns)
    found = [find_column(columns, n, "drop_cols") for n in names]
    if None in found:
        cols = [str(c) for c in columns]
        shown = ", ".join(cols[:12]) + (f", ... ({len(cols)} columns)" if len(cols) > 12 else "")
        raise ValueError(f"drop_cols names {_py(names[found.index(None)])!r}, not a column of the "
                         f"table; name one of its columns: {shown}")
    try:
        person = find_column(columns, "person" if person_col is None else person_col)
    except ValueError:  # (two columns that the name fits alike: the reader refuses what is left)
        person = None
    if person is not None and any(same_name(person, f) for f in found):
        shown_name = names[next(k for k, f in enumerate(found) if same_name(person, f))]
        raise ValueError(f"drop_cols names the person column {_py(shown_name)!r}: leave it out (only "
                         "columns that hold neither person labels nor answers are to be dropped)")
    return frame.loc[:, [not any(same_name(c, f) for f in found) for c in columns]]


#: how many flagged items a message names before it cuts the list
NAMES_SHOWN = 5


def name_items(items: pd.Index, mask: np.ndarray, shown: int = NAMES_SHOWN) -> str:
    """The items flagged by ``mask``, e.g. ``"rc1, rc9, ... (76 of 672 items)"``.

    Parameters
    ----------
    items : pandas.Index
        Every item's label.
    mask : numpy.ndarray
        Boolean, one entry per item: the flagged ones.
    shown : int, optional
        How many flagged items to name; a longer list is cut with ``"..."`` and its count.

    Returns
    -------
    str
        The first ``shown`` flagged labels, comma separated, plus ``", ... (k of n items)"``
        when more are flagged.
    """
    flagged = items[np.asarray(mask, dtype=bool)]
    names = ", ".join(str(x) for x in flagged[:shown])
    if len(flagged) > shown:
        names += f", ... ({len(flagged)} of {len(items)} items)"
    return names

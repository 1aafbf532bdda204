"""Reading response tables from files and streams: CSV (also compressed), TSV and Parquet.

One-line errors naming the file (wrong delimiter, ragged rows, a header of responses); on the
private paths a long table's person and item columns are read as text.  :mod:`.responses`
turns the frames into :class:`~privirt.data.responses.Responses`.
"""

from __future__ import annotations

import contextlib
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._names import name_key

__all__ = ["read_path", "read_stream", "strip_labels", "table_suffix", "text_number"]

#: the strings pandas reads as missing by default (``pandas.read_csv``, ``na_values``): the
#: response column of a long CSV read with text labels keeps this rule, its labels do not
_CSV_NA_STRINGS = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                   "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")

#: the words ``pandas.read_csv`` reads as True and False (its defaults; pandas does not export them)
_CSV_TRUE, _CSV_FALSE = ("True", "TRUE", "true"), ("False", "FALSE", "false")
#: the words a text cell stands for as numeric text (None: missing), for Arrow (the Dask engine)
CSV_WORDS: tuple[tuple[list[str], str | None], ...] = (
    (list(_CSV_NA_STRINGS), None), (list(_CSV_TRUE), "1"), (list(_CSV_FALSE), "0"))

_COMPRESSED = (".gz", ".bz2", ".xz", ".zip", ".zst")


def table_suffix(path: Path) -> str:
    """The table suffix of ``path``, looking through a compression suffix (``.csv.gz``)."""
    suffixes = [s.lower() for s in path.suffixes]
    if len(suffixes) >= 2 and suffixes[-1] in _COMPRESSED:
        return suffixes[-2]
    return path.suffix.lower()


def text_number(text: str) -> float | None:
    """The value of a text cell (a Parquet string column) as a CSV reader reads the cell.

    Parameters
    ----------
    text : str
        The cell; spaces around it are ignored, as pandas ignores them around a number.

    Returns
    -------
    float or None
        NaN for pandas' missing-value words (``NA``, ``NULL``, ``N/A``, ``""``, ...), 1.0 and 0.0
        for its true/false words (``TRUE``, ``false``, ...), the number of numeric text
        (``"1"``, ``"1.0"``: ASCII digits, no ``_`` separators); None for other text (``"yes"``).
    """
    text = text.strip()
    if text in _CSV_NA_STRINGS:
        return np.nan
    if text in _CSV_TRUE or text in _CSV_FALSE:
        return 1.0 if text in _CSV_TRUE else 0.0
    if not text.isascii() or "_" in text:  # float() reads "١" and "1_0"; a CSV reader does not
        return None
    try:
        return float(text)
    except ValueError:
        return None


def read_path(path: Path, fmt: str, person_col, item_col, labels_as_text: bool,
              no_rows: bool = False) -> pd.DataFrame:
    """The table in ``path`` (CSV, compressed CSV, TSV or Parquet); one-line errors (a table
    without rows: unless ``no_rows``, a private path's)."""
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise ValueError(f"{path} is a directory; pass a CSV or Parquet file")
    suffix = table_suffix(path)
    if suffix in (".parquet", ".pq"):
        try:
            frame = pd.read_parquet(path)
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "reading Parquet needs pyarrow: python -m pip install \"privirt[data]\""
            ) from exc
        except Exception as exc:  # pyarrow's errors name neither the file nor what to do
            raise ValueError(f"cannot read {path} as Parquet ({' '.join(str(exc).split())}); "
                             "pass a Parquet file, or a CSV ending in .csv") from None
        if labels_as_text and not all(isinstance(c, str) for c in frame.columns):
            # a Parquet file's column names are text (pandas' metadata turns 0, 1, ... back into
            # ints; the Dask engine reads the schema's names): the item labels are the names
            frame.columns = pd.Index([str(c) for c in frame.columns], name=frame.columns.name)
        frame.columns = strip_labels(frame.columns, str(path))
    elif suffix in (".csv", ".txt", ".tsv"):
        sep = "\t" if suffix == ".tsv" else ","
        frame = _read_csv(lambda: path, str(path), sep, fmt=fmt, person_col=person_col,
                          item_col=item_col, labels_as_text=labels_as_text)
    else:
        raise ValueError(
            f"cannot tell the format of {path.name!r} from its suffix; use .csv, .tsv or "
            ".parquet (a CSV may be compressed: .csv.gz)"
        )
    if not no_rows:
        _check_has_rows(frame, str(path), fmt, person_col, item_col)
    return frame


def _check_has_rows(frame: pd.DataFrame, name: str, fmt: str, person_col: Any, item_col: str) -> None:
    """Refuse a table with column names but no data rows, naming the file, its item columns
    (the person column set aside) and what to add."""
    if frame.shape[0] or not frame.shape[1]:
        return
    names = [str(c) for c in frame.columns]
    person = name_key(person_col or "person")
    if fmt == "long" or (fmt == "auto" and len(names) == 3
                         and {person, name_key(item_col)} <= {name_key(c) for c in names}):
        what = "one row per answer (person, item, response)"
    else:
        items = [c for c in names if name_key(c) != person and not c.startswith("Unnamed: 0")]
        what = (f"one row per person, with an answer (0, 1 or empty) under each of the "
                f"{len(items)} item columns")
    raise ValueError(f"{name} has a header but no data rows; add {what}")


def strip_labels(columns: pd.Index, name: str) -> pd.Index:
    """A file's column names with the spaces around them stripped (``person, q1, q2``: a
    hand-written header), as ``--items`` is; two names that are then one are refused.

    Parameters
    ----------
    columns : pandas.Index
        The column names as read.
    name : str
        The file, for the message.

    Returns
    -------
    pandas.Index
        The names, text ones stripped (a name of spaces only is kept: pandas' reading of it).
    """
    if isinstance(columns, pd.MultiIndex) or not any(
            isinstance(c, str) and c.strip() and c != c.strip() for c in columns):
        return columns  # (as read: a MultiIndex, a RangeIndex, names without spaces around)
    stripped = pd.Index([c.strip() if isinstance(c, str) and c.strip() else c for c in columns],
                        name=columns.name, tupleize_cols=False)
    if stripped.has_duplicates:
        raise ValueError(
            f"duplicate column {stripped[stripped.duplicated()][0]!r} in {name}; item (and person) "
            "labels must be unique (spaces around a label do not make it another)"
        )
    return stripped


def _text_label_options(names: list[str], fmt: str, person_col, item_col) -> dict:
    """``read_csv`` options that read the label columns as written (text; only an empty field is
    a missing label), and every other column as usual: a long table's person and item columns,
    a wide table's person column (``person_col``, a column named ``person`` in any case, or an
    unnamed first column).  Inferred from the rows, ``001`` and ``1`` were one label, 1."""
    if fmt == "long" or (fmt == "auto" and len(names) == 3):
        wanted = {name_key(person_col or "person"), name_key(item_col)}
        labels = [c for c in names if name_key(c.strip()) in wanted]  # (" item": strip_labels)
    else:
        labels = []
    if not labels and fmt != "long":  # a wide table (or a 3-column one without the long names)
        wanted = {name_key(person_col or "person")}
        labels = [c for c in names if name_key(c.strip()) in wanted]
        if not labels and person_col is None and names and names[0] == "":
            labels = ["Unnamed: 0"]  # the name pandas gives the unnamed first column
    if not labels:
        return {}
    columns = [c if c else f"Unnamed: {k}" for k, c in enumerate(names)]  # as pandas names them
    return {"dtype": {c: str for c in labels}, "keep_default_na": False,
            "na_values": {c: ([""] if c in labels else list(_CSV_NA_STRINGS)) for c in columns}}


def read_stream(stream: Any, fmt: str, person_col, item_col, labels_as_text: bool,
                no_rows: bool = False) -> pd.DataFrame:
    """A comma-separated table from an open file (``sys.stdin`` for the command line's ``-``);
    a table without rows is refused unless ``no_rows``."""
    import io

    content = stream.read()
    name = str(getattr(stream, "name", "<stream>"))
    if isinstance(content, bytes):
        def source():
            return io.BytesIO(content)
    else:
        def source():
            return io.StringIO(content)
    frame = _read_csv(source, name, ",", compression=None, fmt=fmt, person_col=person_col,
                      item_col=item_col, labels_as_text=labels_as_text)
    if not no_rows:
        _check_has_rows(frame, name, fmt, person_col, item_col)
    return frame


def _read_csv(source: Any, name: str, sep: str, compression: Any = "infer", *, fmt: str = "auto",
              person_col: Any = None, item_col: Any = "item", labels_as_text: bool = False) -> pd.DataFrame:
    """Read a CSV table; every problem is one ``ValueError`` naming ``name`` and what to do.

    ``source()`` returns a fresh path or buffer (the header is read a second time, as text)."""
    import re

    try:
        header = pd.read_csv(source(), sep=sep, header=None, nrows=1, dtype=str,
                             keep_default_na=False, compression=compression).iloc[0].tolist()
        if (re.fullmatch(r"sep=.?", str(header[0]).strip(), re.IGNORECASE)
                and not any(str(h).strip() for h in header[1:])):
            raise ValueError(
                f"the first line of {name} ({str(header[0]).strip() + sep * (len(header) - 1)!r}) is a "
                "spreadsheet's separator line, not a header: delete that line, so that the first "
                "line names the items")
        options = (_text_label_options([str(c) for c in header], fmt, person_col, item_col)
                   if labels_as_text else {})
        frame = pd.read_csv(source(), sep=sep, compression=compression, **({"keep_default_na": True} | options))
        if isinstance(frame.index, pd.MultiIndex):
            # two or more fields beyond the header on the first data row: pandas took as many of
            # every row's first fields for its row labels (persons ('x', 'y'), answers shifted)
            _check_row_name_rows(source, name, sep, compression, len(header))
            # (rows that pandas alone reads, a .zip/.zst member: the count pandas found)
            raise ValueError(f"{name} is not a rectangular table: its first data row has "
                             f"{frame.index.nlevels} fields more than the header; every row needs "
                             "one field per column of the header (check for stray separators)")
        # every data row one field longer than the header: pandas takes the first field for row
        # labels.  Right for R's write.table (row names, the header without their column; R writes
        # a missing value as NA); wrong for rows that end in a separator, which shifted each item's
        # answers one column left.  Such a table is read again without row labels (the empty
        # trailing fields dropped); a non-empty extra field there is refused below, by line.
        default = isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0 and frame.index.step == 1
        maybe = "index_col" not in options and frame.shape[1] and (
            not default or frame.iloc[:, -1].isna().any())  # (ids 0, 1, ... also read as a RangeIndex)
        labelled = name_key(str(header[0]).strip()) == name_key(person_col or "person")
        trailing = bool(maybe) and _rows_end_in_separator(source, sep, compression, len(header), labelled)
        if trailing:
            # (a row whose extra field pandas would drop, with a ParserWarning, is found in the
            # rows first: recording warnings swaps process-wide state, which other threads share)
            _check_long_rows(source, name, sep, compression, len(header))
            # (usecols: the empty extra fields are not read, and pandas' warning of a "loss of
            # data", false here, is not given; catching it would swap process-wide state)
            frame = pd.read_csv(source(), sep=sep, compression=compression, index_col=False,
                                usecols=range(len(header)), **({"keep_default_na": True} | options))
        elif labels_as_text and "index_col" not in options and frame.shape[1] and (
                not default or _first_row_longer(source, sep, compression, len(header))):
            # R's write.table layout (row names, the header one field shorter): the row names are
            # the person labels, read as written ("001" and "1" were one label, 1; row names
            # 0, 01, 2 were read as a RangeIndex, like no labels at all)
            dtypes = {0: str, **options.get("dtype", {})}
            # (by position, 0 the row names: "NA" is a label there, as in a person column)
            nas = {k: [""] if k == 0 or header[k - 1] in dtypes else list(_CSV_NA_STRINGS)
                   for k in range(len(header) + 1)}
            frame = pd.read_csv(source(), sep=sep, compression=compression, index_col=0,
                                **(options | {"dtype": dtypes, "keep_default_na": False, "na_values": nas}))
    except pd.errors.EmptyDataError:
        raise ValueError(f"{name} is empty") from None
    except pd.errors.ParserError as exc:
        text = " ".join(str(exc).split())
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", text)
        detail = (f"line {m.group(2)} has {m.group(3)} fields where the first rows have "
                  f"{m.group(1)}" if m else text)
        raise ValueError(f"{name} is not a rectangular table: {detail}; every row needs one "
                         "field per column of the header (check for stray separators)") from None
    except UnicodeDecodeError as exc:  # (its position counts from the chunk pandas decoded: not shown)
        byte = f" (byte 0x{exc.object[exc.start]:02x} cannot be decoded)" if isinstance(exc.object, bytes) else ""
        raise ValueError(f"{name} is not UTF-8 text{byte}; save it as UTF-8") from None
    except (OSError, EOFError) as exc:
        raise ValueError(f"cannot read {name} as CSV text ({' '.join(str(exc).split())})") from None
    if frame.shape[1] == 1:
        cell = str(header[0])
        other = next((c for c in (";", "\t", "|") if c in cell), None)
        if other is not None:
            shown = {"\t": "tab"}.get(other, repr(other))
            raise ValueError(
                f"{name} reads as a single column {cell[:40]!r}: wrong delimiter? Its fields are "
                f"separated by {shown}; privirt reads comma-separated CSV"
                + (" (or tab-separated .tsv)" if other != "\t" else "; name a tab-separated file .tsv")
                + ", so convert the file"
            )
    _check_csv_header(header, name)
    width = frame.shape[1]
    frame = _drop_trailing_column(frame, header, name)
    width = len(header) - (width - frame.shape[1])  # (a header ending in a separator: its empty
    if frame.shape[0] and frame.shape[1] and frame.iloc[:, -1].isna().any():  # field dropped)
        # (a short row is padded with missing cells: the last column has one)
        if not trailing and _first_row_longer(source, sep, compression, len(header)):
            _check_row_name_rows(source, name, sep, compression, len(header))  # R's layout
        elif frame.shape[1] > 1:
            _check_short_rows(source, name, sep, compression, width)
    _check_answer_row_names(frame, name, header, person_col)
    frame.columns = strip_labels(frame.columns, name)
    return frame


def _check_answer_row_names(frame: pd.DataFrame, name: str, header: list, person_col: Any) -> None:
    """Refuse repeated row names that look like answers (0/1) where no person column replaces
    them: every row one field longer than the header reads as R's ``write.table`` layout, whose
    row names are unique; answers there mean the header is one field short (refused as
    "duplicate person label '1'", the wrong problem)."""
    index = frame.index
    if isinstance(index, pd.RangeIndex) or not index.has_duplicates or not all(
            str(v).strip() in _ANSWER_TEXT for v in index):
        return
    wanted = name_key(str(person_col or "person").strip())
    if any(name_key(str(c).strip()) == wanted for c in header) or (
            person_col is None and header and not str(header[0]).strip()):
        return  # (a person column: its labels, not the row names, name the persons)
    raise ValueError(
        f"{name}: every row has {frame.shape[1] + 1} fields and the header {frame.shape[1]}, "
        "R's write.table layout (a row name first), but the row names are answers (0/1) and "
        "repeat: the header is likely one field short; add the missing item's label to it"
    )


def _open_text(source: Any, compression: Any):
    """``source()``'s content as a text stream, through the compression ``read_csv`` inferred."""
    import io

    src = source()
    if not isinstance(src, (str, Path)):
        return (io.TextIOWrapper(src, encoding="utf-8", errors="replace", newline="")
                if isinstance(src, io.BytesIO) else src)
    path = Path(src)
    suffix = path.suffix.lower() if compression == "infer" else ""
    if suffix == ".gz":
        import gzip
        return gzip.open(path, "rt", newline="")
    if suffix == ".bz2":
        import bz2
        return bz2.open(path, "rt", newline="")
    if suffix == ".xz":
        import lzma
        return lzma.open(path, "rt", newline="")
    if suffix == ".zip":
        import io
        import zipfile

        with zipfile.ZipFile(path) as z:  # pandas reads the archive's one file
            names = [i for i in z.namelist() if not i.endswith("/")]
            if len(names) != 1:
                return None
            data = z.read(names[0])
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline="")
    if suffix == ".zst":
        try:
            import zstandard
        except ImportError:  # pragma: no cover - pandas needs it to read the file at all
            return None
        return zstandard.open(path, "rt", encoding="utf-8", errors="replace", newline="")
    return open(path, newline="", encoding="utf-8", errors="replace")


@contextlib.contextmanager
def _data_records(source: Any, sep: str, compression: Any) -> Iterator[Any]:
    """The data rows (after the header) as ``csv`` records, or None where only pandas reads the
    file (a .zip/.zst member)."""
    import csv

    stream = _open_text(source, compression)
    if stream is None:
        yield None
        return
    with stream:
        reader = csv.reader(stream, delimiter=sep)
        next(reader, None)  # the header
        yield reader


def _first_row_longer(source: Any, sep: str, compression: Any, width: int) -> bool:
    """Whether the first data row has one field more than the header's ``width`` (R's row names);
    unknown (a member pandas alone reads): no."""
    with _data_records(source, sep, compression) as rows:
        first = None if rows is None else next(rows, None)
    return first is not None and len(first) == width + 1


def _rows_end_in_separator(source: Any, sep: str, compression: Any, width: int, labelled: bool) -> bool:
    """Whether the first data row has one field more than the header's ``width`` (pandas then
    takes the first field for row labels), some such row ends in the separator, and the extra
    fields are not R's row names: every such row ends in the separator, or every such row's
    first field is an answer (0/1/empty), or -- where the header's first column is the person
    column (``labelled``) -- every such row's second field is an answer (it would be the person
    label in R's layout: row names, then the person column).  Where a row ending in the
    separator was enough, R's ``write.table(na="")`` layout was refused as soon as one person had
    skipped the last item; where the person column alone decided, it was so refused with a
    person column, and without the second-field test a person column of labels followed by
    answers was read shifted, its labels dropped.  Unknown (a .zip/.zst member pandas alone
    reads): yes, the safer reading."""
    with _data_records(source, sep, compression) as rows:
        if rows is None:
            return True
        first = next(rows, None)
        if first is None or len(first) != width + 1:
            return False
        some_empty = every_empty = first[-1] == ""
        answers, second = first[0].strip() in _ANSWER_TEXT, first[1].strip() in _ANSWER_TEXT
        for record in rows:
            if record and len(record) == width + 1:
                some_empty = some_empty or record[-1] == ""
                every_empty = every_empty and record[-1] == ""
                answers = answers and record[0].strip() in _ANSWER_TEXT
                second = second and record[1].strip() in _ANSWER_TEXT
        return some_empty and (every_empty or answers or (labelled and second))


_ANSWER_TEXT = frozenset({"", "0", "1", "0.0", "1.0"})


def _check_long_rows(source: Any, name: str, sep: str, compression: Any, width: int) -> None:
    """Refuse a row with a non-empty field beyond the header's ``width`` (``read_csv`` with
    ``index_col=False`` drops it with a warning; an empty one is a trailing separator)."""
    import csv

    stream = _open_text(source, compression)
    if stream is None:
        raise ValueError(f"{name} is not a rectangular table: a row has more fields than the header; "
                         "every row needs one field per column of the header (check for trailing separators)")
    with stream:
        reader = csv.reader(stream, delimiter=sep)
        for record in reader:
            if any(record[width:]):
                raise ValueError(
                    f"{name} is not a rectangular table: line {reader.line_num} has {len(record)} fields "
                    f"where the header has {width}; every row needs one field per column of the header "
                    "(check for trailing separators)"
                )


def _check_row_name_rows(source: Any, name: str, sep: str, compression: Any, width: int) -> None:
    """Refuse a table whose first data row has more fields than the header's ``width`` (pandas
    then takes every row's first fields for its row names; one, R's ``write.table`` layout)
    unless every data row has ``width + 1`` fields: one stray field on the first row shifted
    every answer one column left, two or more made pairs of row names (a MultiIndex), and a short
    row was padded with a missing cell.  The line named is the first that differs from the
    header (``width``) where more rows have the header's width, else the first that differs
    from ``width + 1``."""
    with _data_records(source, sep, compression) as rows:
        if rows is None:
            return
        count = {width: 0, width + 1: 0}
        first: dict[int, tuple[int, int]] = {}  # expected width -> (line, fields) of the first other
        for record in rows:
            if not record:  # (a blank line: pandas skips it)
                continue
            n = len(record)
            if n in count:
                count[n] += 1
            for expected in count:
                if n != expected and expected not in first:
                    first[expected] = (rows.line_num, n)
    if width + 1 not in first:
        return
    if count[width] >= count[width + 1]:
        line, n = first[width]
        where = f"the header has {width}"
        need = "one field per column of the header"
    else:
        line, n = first[width + 1]
        where = f"the header has {width} and the other rows {width + 1} (a row name first)"
        need = "a row name and one field per column of the header"
    raise ValueError(f"{name} is not a rectangular table: line {line} has {n} fields where {where}; "
                     f"every row needs {need} (check for stray separators)")


_CONTROL_NAMES = {"\x00": "a NUL byte", "\x1a": "a DOS end-of-file mark, Ctrl-Z",
                  "\x1b": "an escape character", "\x7f": "a delete character"}


def control_hint(value: Any) -> str | None:
    """The hint for a cell that is an answer (or nothing) plus control characters, such as a
    file's trailing Ctrl-Z or a NUL byte; None for any other cell."""
    if not isinstance(value, str):
        return None
    stray = [ch for ch in value if unicodedata.category(ch) == "Cc" and not ch.isspace()]
    rest = "".join(ch for ch in value if ch not in stray)
    if not stray or (rest.strip() and text_number(rest) is None):
        return None
    ch = stray[0]
    what = f"0x{ord(ch):02x}" + (f", {_CONTROL_NAMES[ch]}" if ch in _CONTROL_NAMES else "")
    return f"cell {value!r} holds a control character ({what}): remove it"


def _check_short_rows(source: Any, name: str, sep: str, compression: Any, width: int) -> None:
    """Refuse a row with fewer fields than the header (``read_csv`` pads it with missing
    cells, which would turn a truncated line into missing responses).  Only run when the last
    column has a missing cell, so a complete table is read once."""
    import csv

    stream = _open_text(source, compression)
    if stream is None:
        return
    with stream:
        reader = csv.reader(stream, delimiter=sep)
        for record in reader:
            if record and len(record) < width:
                # (a line of a control character alone: a DOS end-of-file mark after the last row)
                hint = control_hint(record[0]) if len(record) == 1 and record[0].strip() else None
                raise ValueError(
                    f"{name} is not a rectangular table: line {reader.line_num} has "
                    f"{len(record)} fields where the header has {width}; " + (hint or (
                        "every row needs one field per column of the header (an empty field is "
                        "a missing response)"))
                )


def _check_csv_header(header: list, name: str) -> None:
    """Refuse repeated column names (pandas would silently rename the second ``q1.1``)."""
    named = [label for label in header if label.strip()]
    if named and all(_looks_like_response(label) for label in named):
        raise ValueError(
            f"the first row of {name} ({', '.join(header[:6])}"
            f"{', …' if len(header) > 6 else ''}) looks like responses, not item labels: "
            "a CSV needs a header row naming the items (and optionally a person column); if "
            "these are the item labels, rename them (say q0, q1, …)"
        )
    for k, label in enumerate(header[1:-1], start=2):  # (an empty first cell: a person-label column;
        if not label.strip():                           # an empty last one: _drop_trailing_column)
            raise ValueError(f"column {k} of the header of {name} is empty; every item needs a label "
                             "in the header row")
    seen = set()
    for label in header:
        if label.strip() in seen:  # (" q1" and "q1" print alike)
            raise ValueError(
                f"duplicate column {label.strip()!r} in the header of {name}; item (and person) "
                "labels must be unique (spaces around a label do not make it another)"
            )
        seen.add(label.strip())


def _drop_trailing_column(frame: pd.DataFrame, header: list, name: str) -> pd.DataFrame:
    """A header and rows that all end in a separator (spreadsheet exports): the empty column at
    the end is dropped; an empty last label over a column with answers is refused."""
    if len(header) < 2 or str(header[-1]).strip() or frame.shape[1] < 2:
        return frame
    if frame.iloc[:, -1].isna().all():
        return frame.iloc[:, :-1]
    raise ValueError(f"column {len(header)} of the header of {name} is empty; every item needs a label "
                     "in the header row")


def _looks_like_response(name: str) -> bool:
    """A header cell that reads as a response value (0, 1, 0.0, 1.0)."""
    try:
        return float(name.strip()) in (0.0, 1.0)
    except ValueError:
        return False

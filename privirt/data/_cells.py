"""A table's cells as numbers: the column-wise conversion of a wide table, and the words for a
cell that is no response (with a hint at what the column is: labels, or text answers)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

from ._files import control_hint, text_number
from ._labels import _all_distinct, _person_col_hint, _py

__all__: list[str] = []

#: words that answer a yes/no question (compared in lower case); a text column holding one of
#: them is answers to convert, not labels
ANSWER_WORDS = frozenset({"yes", "no", "y", "n", "yea", "nay", "aye", "true", "false", "t", "f",
                          "correct", "incorrect", "right", "wrong", "agree", "disagree", "pass",
                          "fail", "present", "absent"})
#: the hint for answers written as text
TEXT_ANSWERS_HINT = "convert text such as 'yes'/'no' to 0/1 first"
#: more distinct texts than this in one column: labels, not answers
MAX_ANSWER_TEXTS = 4


def _answer_like(obj: np.ndarray, vals: list) -> bool:
    """Whether a text column's non-numbers read as answers (a few texts, one of them a
    recognised answer word) rather than labels (many texts, or none an answer word)."""
    texts = {str(v).strip().lower() for v, x in zip(obj, vals) if x is None}
    return len(texts) <= MAX_ANSWER_TEXTS and bool(texts & ANSWER_WORDS)


#: names of control characters that stray into a file
def _mostly_non_answers(vals: list) -> bool:
    """Whether most of a column's non-missing cells are no answers (text, or numbers other
    than 0 and 1): a label column, not answers with a bad cell or two."""
    given = [v for v in vals if v is None or not np.isnan(v)]
    return 2 * sum(v is None or v not in (0.0, 1.0) for v in given) > len(given)


#: column names that suggest a pattern table's frequencies (named in the error hint)
_FREQUENCY_NAMES = {"frequency", "freq", "count", "counts", "n", "weight", "weights"}
#: the highest score of an item scored on a scale 0..K (Likert 1-5, 0-10): a numeric column that
#: stays within it is answers to dichotomise, not labels
MAX_SCORE = 10


def _numeric_labels(vals: np.ndarray) -> bool:
    """Whether a numeric column reads as labels (ids, codes, years) rather than answers.

    The rule: most non-missing cells are not 0 or 1, and the column either holds a value above
    ``MAX_SCORE`` or (whole numbers only) more distinct values than a scale 0..``MAX_SCORE`` has.
    Items scored 1-5 or 0-10, and fractions within 0..``MAX_SCORE`` (partial credit,
    proportions), fail both, so they keep the advice that responses must be 0 or 1; a state
    code of 41, an id of 49700 or a year does not.
    """
    given = vals[~np.isnan(vals)]
    if 2 * int(np.count_nonzero((given != 0) & (given != 1))) <= given.size:
        return False
    whole = bool(np.all(given == np.round(given)))
    return bool(given.max() > MAX_SCORE) or (whole and np.unique(given).size > MAX_SCORE + 1)


def _label_col_hint(name: Any) -> str:
    """The hint for a column of text that is not answers."""
    return (f"column {name!r} looks like a label column, not answers: remove it before the table "
            f"is read with drop_cols=[{name!r}] (CLI: --drop-cols {name})")


def _frame_values(frame: pd.DataFrame, describe=None, labelled: bool = False) -> np.ndarray:
    """Column-wise conversion that refuses strings and other non-numeric dtypes.

    ``describe(i, j, value)``, if given, words the error for the cell in row ``i`` and
    column ``j``; ``labelled``: the person labels are known (a person column was named or
    found), so a bad first column gets no hint to name it as the person column.
    """
    out = np.empty(frame.shape, dtype=np.float64)
    numeric_label = None  # the first numeric column that reads as labels: its cell and hint
    for j, (name, col) in enumerate(frame.items()):
        dtype = col.dtype
        if getattr(dtype, "kind", "") == "c":  # numeric to pandas; the cast drops the imaginary part
            raise ValueError(f"responses must be numeric 0/1 with NaN for missing, got dtype {dtype}")
        if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
            out[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
            frequency = str(name).strip().lower() in _FREQUENCY_NAMES  # (its own hint: weights)
            if describe is None and numeric_label is None and not frequency:
                bad = np.flatnonzero(~(np.isnan(out[:, j]) | (out[:, j] == 0) | (out[:, j] == 1)))
                if bad.size and _numeric_labels(out[:, j]):
                    hint = _label_col_hint(name)
                    if j == 0 and not labelled and _all_distinct(col):
                        hint = f"{_person_col_hint(name)}; otherwise {hint}"
                    numeric_label = (int(bad[0]), j, out[bad[0], j].item(), hint)
        else:
            obj = col.to_numpy(dtype=object)
            vals = [_cell_number(v, numeric_text=True) for v in obj]
            if any(v is None for v in vals):
                i = _first_offender(obj, vals)
                v = obj[i]
                if describe is not None:
                    raise ValueError(describe(i, j, v))
                control, labels = control_hint(v), _mostly_non_answers(vals)
                if control is not None:
                    hint = control
                elif _answer_like(obj, vals):
                    hint = TEXT_ANSWERS_HINT
                elif labels:
                    hint = _label_col_hint(name)
                else:  # (one stray text in a column of answers: not a label column)
                    hint = f"most cells of column {name!r} are answers: correct or empty this one"
                first = j == 0 and control is None and (_all_distinct(col) or labels)
                # (a label column of distinct names anywhere may be the persons': say both)
                names = hint == _label_col_hint(name) and _distinct_texts(obj)
                if not labelled and (first or names):
                    hint = f"{_person_col_hint(name)}; otherwise {hint}"
                _raise_cell(frame, i, j, v, hint)
            out[:, j] = vals
    if numeric_label is not None:  # (after the text columns, whose words may name the persons')
        _raise_cell(frame, *numeric_label)
    return out


def _distinct_texts(obj: np.ndarray) -> bool:
    """Whether a column's cells are all given (none missing or blank) and all different."""
    texts = [str(v).strip() for v in obj]
    return not pd.isna(obj).any() and all(texts) and len(set(texts)) == len(texts)


def _raise_cell(frame: pd.DataFrame, i: int, j: int, v: Any, hint: str) -> None:
    """Raise for the cell in row ``i`` and column ``j`` of ``frame`` that is no response."""
    raise ValueError(
        f"invalid response {v!r} for person {_py(frame.index[i])!r} (row {i}), item "
        f"{frame.columns[j]!r} (column {j}): responses must be 0, 1 or missing (NaN); {hint}"
    )


def _cell_number(v: Any, numeric_text: bool = False) -> float | None:
    """The float value of one cell of an object array (NaN if missing), None if no number.

    ``numeric_text``: table columns read as text (a Parquet string column) accept numeric text
    the way a CSV reader parses it; arrays of strings are refused."""
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return np.nan
    if isinstance(v, (bool, np.bool_, int, np.integer, float, np.floating, Decimal)):
        return float(v)  # (Decimal: a Parquet decimal column's cells)
    if numeric_text and isinstance(v, str):
        # numeric text ("0", "1", "1.0"), pandas' missing-value and true/false words ("NA",
        # "TRUE"), as a CSV reader parses them; a Parquet or object column keeps them as text
        return text_number(v)
    return None


def _first_offender(obj: Any, vals: list) -> int:
    """Position of the non-number to report: the first that is not even numeric text.

    One word in a CSV column makes pandas read the whole column as text, so its first
    cell (say ``'1'``) is not the problem; the word is.
    """
    bad = [i for i, v in enumerate(vals) if v is None]
    for i in bad:
        try:
            float(obj[i])
        except (TypeError, ValueError):
            return i
    return bad[0]

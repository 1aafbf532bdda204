"""Column names as the user gives them (``person_col``, ``item_col``, ``response_col``, the
``weights`` column, ``drop_cols``): matched to a table's columns exactly, else in any case and
either Unicode normalisation (a header saved on macOS is in NFD, a name typed on Linux in NFC)."""

from __future__ import annotations

import unicodedata
from typing import Any, Iterable

__all__: list[str] = []


def name_key(name: Any) -> str:
    """The key two column names are the same by: the text's NFC form, case-folded.

    Parameters
    ----------
    name : object
        A column name (a non-string one as its text).

    Returns
    -------
    str
        ``unicodedata.normalize("NFC", str(name)).casefold()``.
    """
    return unicodedata.normalize("NFC", str(name)).casefold()


def find_column(columns: Iterable[Any], name: Any, what: str = "column") -> Any:
    """The column of ``columns`` that ``name`` names, or ``None``.

    A column equal to ``name`` is it; else the one column whose :func:`name_key` is
    ``name``'s.  Columns that are the same by that key and print alike (they differ only in
    Unicode normalisation) cannot be told apart by a typed name: refused.

    Parameters
    ----------
    columns : iterable
        The table's column names.
    name : object
        The name given (``None``: no column).
    what : str, optional
        The option, for the message (``"person_col"``).

    Returns
    -------
    object
        The column as it is in ``columns``; ``None`` when none is ``name``.

    Raises
    ------
    ValueError
        In one line, naming both columns with ``ascii()``, when ``name`` matches two.
    """
    if name is None:
        return None
    columns = list(columns)
    key = name_key(name)
    same = [c for c in columns if name_key(c) == key]
    exact = [c for c in columns if same_name(c, name)]
    nfc = unicodedata.normalize("NFC", str(name))
    if exact:
        # another column that differs from it only in normalisation prints the same
        twins = [c for c in same if not same_name(c, name) and unicodedata.normalize("NFC", str(c)) == nfc]
        if not twins:
            return exact[0]
        same = [exact[0], twins[0]]
    if len(same) > 1:
        raise ValueError(f"{what} {name!r} names two columns, {ascii(same[0])} and {ascii(same[1])}, "
                         "which differ only in case or Unicode normalisation; rename one of them "
                         "in the table")
    return same[0] if same else None


def same_name(column: Any, name: Any) -> bool:
    """Whether a column is ``name`` exactly (False where comparing them fails or gives no bool)."""
    try:
        return bool(column == name)
    except (TypeError, ValueError):
        return False

"""A numeric responses array converted to int8 codes in row blocks, so that the checks' masks and
the cast's temporaries stay a few MiB whatever the array's size (docs/spectral.md, memory bound)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["BLOCK_CELLS", "array_codes", "as_array", "observed_rows_cols"]


#: cells per row block: the temporaries of one block (masks and a float64 copy) are ~11 MiB
BLOCK_CELLS = 2**20


def as_array(data: Any) -> np.ndarray:
    """``numpy.asarray(data)``, refusing rows of different lengths in one line (numpy's own
    message, "setting an array element with a sequence ... inhomogeneous shape", says neither
    which rows nor what to do).

    Parameters
    ----------
    data : array_like
        The responses, one row (a sequence of values) per person.

    Returns
    -------
    numpy.ndarray
        The array.
    """
    try:
        return np.asarray(data)
    except ValueError as exc:
        if "inhomogeneous" not in str(exc):
            raise

    def size(row: Any) -> int:  # (a number where a row belongs: one value)
        return len(row) if hasattr(row, "__len__") and not isinstance(row, (str, bytes)) else 1
    rows = list(data)
    first = size(rows[0])
    k = next((k for k, row in enumerate(rows) if size(row) != first), None)
    if k is None:  # (the rows alike, a cell a sequence: [[1, [0, 1]], [0, 1]])
        raise ValueError("a row holds a sequence where a value belongs: give every person one value "
                         "(0, 1 or NaN) per item") from None
    n = size(rows[k])
    raise ValueError(f"rows have different lengths (row {k} has {n} value{'s' * (n != 1)}, row 0 has "
                     f"{first}): give every person one value per item") from None


def array_codes(values: np.ndarray, missing: int, on_bad: Callable[[int, int], None],
                block_cells: int | None = None) -> np.ndarray:
    """Int8 codes of a 2-D integer or float responses array, converted a block of rows at a time.

    Parameters
    ----------
    values : numpy.ndarray
        A 2-D array of integer or floating dtype: 0, 1 and (floats) NaN for missing.
    missing : int
        The code of a missing (NaN) cell.
    on_bad : callable
        Called with ``(row, column)`` of the first cell in row-major order that is neither 0, 1
        nor NaN; it is expected to raise. If it returns, :class:`ValueError` is raised.
    block_cells : int, optional
        About how many cells each block holds (at least one row a block); default
        :data:`BLOCK_CELLS`.

    Returns
    -------
    numpy.ndarray
        C-contiguous int8 array of ``values.shape``: 1, 0, or ``missing``; the same values as
        converting the whole array at once.
    """
    n, m = values.shape
    codes = np.empty((n, m), dtype=np.int8)
    rows = max(1, (BLOCK_CELLS if block_cells is None else block_cells) // max(m, 1))
    is_float = values.dtype.kind == "f"
    for start in range(0, n, rows):
        block = values[start:start + rows]
        bad = (block != 0) & (block != 1)
        nan = np.isnan(block) if is_float else None
        if nan is not None:
            bad &= ~nan
        if bad.any():
            i, j = (int(t[0]) for t in np.nonzero(bad))
            on_bad(start + i, j)
            raise ValueError(f"invalid response at row {start + i}, column {j}")
        if nan is not None:
            block = np.where(nan, missing, block)
        codes[start:start + rows] = block.astype(np.int8)
    return codes


def observed_rows_cols(codes: np.ndarray, block_cells: int | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Which rows and which columns of a codes matrix have an observed (non-negative) cell.

    The ``codes >= 0`` mask is built a block of rows at a time, so that the temporary is a few
    MiB instead of one byte a cell (the same pattern as :func:`privirt.stats.counts.has_empty`).

    Parameters
    ----------
    codes : numpy.ndarray
        A 2-D int8 codes matrix: 1, 0, or a negative code for missing.
    block_cells : int, optional
        About how many cells each block holds (at least one row a block); default
        :data:`BLOCK_CELLS`.

    Returns
    -------
    row_ok, col_ok : numpy.ndarray of bool
        ``codes.shape[0]`` and ``codes.shape[1]`` flags: True where the row (column) has at
        least one observed cell; the same as ``(codes >= 0).any(axis=1)`` and ``axis=0``.
    """
    n, m = codes.shape
    row_ok = np.empty(n, dtype=bool)
    col_ok = np.zeros(m, dtype=bool)
    rows = max(1, (BLOCK_CELLS if block_cells is None else block_cells) // max(m, 1))
    for start in range(0, n, rows):
        obs = codes[start:start + rows] >= 0
        obs.any(axis=1, out=row_ok[start:start + rows])
        col_ok |= obs.any(axis=0)
    return row_ok, col_ok

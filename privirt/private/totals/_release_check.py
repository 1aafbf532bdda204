"""The check of a :class:`~privirt.private.totals.api.TotalsRelease` before it is estimated or
rebuilt from the service's JSON: :func:`check_release` (the layout :func:`release_totals` makes)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..._constants import MISSING_DOMAINS
from ..._checks import brief
from ..statement import PrivacyStatement

__all__ = ["check_release", "AS_MADE"]

#: what every refusal asks for
AS_MADE = "pass the TotalsRelease as release_totals made it"


def _refuse(what: str) -> ValueError:
    return ValueError(f"the release's {what}; {AS_MADE}")


def _check_counts(values: Any, name: str, length: int, what: str) -> None:
    """One released part: a numeric pandas Series of ``length`` finite values (noisy counts
    may be negative or exceed n: that is noise, not tampering)."""
    if not isinstance(values, pd.Series):
        raise _refuse(f"{name} must be a pandas Series, got {type(values).__name__}")
    if len(values) != length:
        raise _refuse(f"{name} has {len(values)} entries, {what} has {length}")
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        raise _refuse(f"{name} must hold numbers, got dtype {values.dtype}")
    if not np.isfinite(values.to_numpy(dtype=np.float64)).all():
        raise _refuse(f"{name} must be finite")


def _check_edges(edges: Any, name: str, m: int) -> int:
    """Integer bin edges strictly increasing from 0 to m + 1; returns the number of bins."""
    e = np.asarray(edges) if isinstance(edges, (np.ndarray, list, tuple)) else None
    if e is None or e.ndim != 1 or e.size < 2 or not np.issubdtype(e.dtype, np.integer):
        raise _refuse(f"{name} must be a 1-D array of at least 2 integers, got {brief(edges)}")
    if e[0] != 0 or e[-1] != m + 1 or np.any(np.diff(e) <= 0):
        raise _refuse(f"{name} must rise strictly from 0 to {m + 1} (the number of items + 1), "
                      f"got {brief(e.tolist())}")
    return int(e.size - 1)


def _check_positive(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise _refuse(f"{name} must be a finite number > 0, got {brief(value)}")


def check_release(release: Any) -> Any:
    """Check that a :class:`~privirt.private.totals.api.TotalsRelease` is well formed.

    ``totals.index`` names the items (at least 2, unique); ``totals`` (and ``answered``,
    indexed as ``totals``) hold m finite numbers and ``histogram`` (len(edges) − 1) ×
    (len(k_edges) − 1) (one bin of the number answered without ``k_edges``); ``edges`` (and
    ``k_edges``) are integers rising strictly from 0 to m + 1; ``n_persons`` is an integer ≥ 1;
    the noise scales are finite and > 0; ``split`` is in (0, 1); ``missing`` is one of
    :data:`~privirt._constants.MISSING_DOMAINS`, with ``answered``, ``sigma_answered`` and
    ``k_edges`` exactly for ``"mcar"``; ``privacy`` is a :class:`PrivacyStatement` of the same
    number of persons and, when it lists them, as many noisy parts.  Noisy counts may be
    negative or exceed n.

    Parameters
    ----------
    release : TotalsRelease
        Its type is checked by the caller (this module sits below the class).

    Returns
    -------
    TotalsRelease
        ``release`` itself.

    Raises
    ------
    ValueError
        In one line, naming the first field that does not hold.
    """
    totals = release.totals
    if not isinstance(totals, pd.Series):
        raise _refuse(f"totals must be a pandas Series indexed by item, got {type(totals).__name__}")
    items, m = totals.index, len(totals)
    if m < 2:
        raise _refuse(f"totals hold {m} item(s); a totals release has at least 2")
    if items.has_duplicates:
        raise _refuse(f"items (totals.index) must be unique; repeated: {list(items[items.duplicated()].unique()[:5])}")
    _check_counts(totals, "totals", m, f"a release of {m} items")
    missing = release.missing
    if not isinstance(missing, str) or missing not in MISSING_DOMAINS:
        raise _refuse(f"missing must be one of {MISSING_DOMAINS}, got {brief(missing)}")
    B = _check_edges(release.edges, "edges", m)
    K = 1
    if missing == "mcar":
        for name in ("answered", "k_edges"):
            if getattr(release, name) is None:
                raise _refuse(f'missing is "mcar" but it has no {name}')
        K = _check_edges(release.k_edges, "k_edges", m)
        _check_counts(release.answered, "answered", m, f"a release of {m} items")
        if not release.answered.index.equals(items):
            raise _refuse("answered must be indexed by the items of totals in their order")
        _check_positive(release.sigma_answered, "sigma_answered")
    elif release.answered is not None or release.k_edges is not None:
        raise _refuse('answered counts or k_edges are given but missing is "none" (complete data); '
                      'a release with answered counts says missing="mcar"')
    _check_counts(release.histogram, "histogram", B * K,
                  f"a release of {B} score bin(s) × {K} bin(s) of the number answered")
    n = release.n_persons
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise _refuse(f"n_persons must be an integer ≥ 1, got {brief(n)}")
    _check_positive(release.sigma_totals, "sigma_totals")
    _check_positive(release.sigma_histogram, "sigma_histogram")
    split = release.split
    if isinstance(split, bool) or not isinstance(split, (int, float, np.integer, np.floating)) \
            or not 0 < split < 1:
        raise _refuse(f"split (the histogram's share of rho) must be a number in (0, 1), got {brief(split)}")
    _check_privacy(release.privacy, int(n), 3 if missing == "mcar" else 2)
    return release


def _check_privacy(privacy: Any, n: int, n_parts: int) -> None:
    """The statement: a :class:`PrivacyStatement` of ``n`` persons and ``n_parts`` noisy parts
    (when it lists its parts: statements of older services do not)."""
    if not isinstance(privacy, PrivacyStatement):
        raise _refuse(f"privacy must be a PrivacyStatement (the release's guarantee), got {type(privacy).__name__}")
    if privacy.n_persons is not None and privacy.n_persons != n:
        raise _refuse(f"privacy states {brief(privacy.n_persons)} persons but n_persons is {n}")
    if privacy.parts and len(privacy.parts) != n_parts:
        raise _refuse(f"privacy states {len(privacy.parts)} noisy parts, a release of its missing domain "
                      f"has {n_parts}")

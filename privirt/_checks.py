"""Validation of the numeric options the estimators share (one wording everywhere), and the
memory a process may still allocate (:func:`available_memory`) for the checks of a run's size."""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

# ``float(value)`` of a real number, with an int beyond the float range as ``±inf`` (not an
# OverflowError), so that ``np.isfinite`` can judge it (it refuses Python ints past int64): the
# mechanisms' own conversion, one place for it
from mechanisms.measures import _as_float as real_float, _brief


def holds_bools(values: Any) -> bool:
    """Whether ``values`` (a Series, an array or a sequence) is or holds a bool."""
    if isinstance(values, (bool, np.bool_)):
        return True
    dtype = getattr(values, "dtype", None)  # an array or a pandas Series
    if dtype is not None:
        if getattr(dtype, "kind", "") == "b":  # numpy's bool and pandas' nullable "boolean"
            return True
        return dtype == object and any(isinstance(v, (bool, np.bool_))
                                       for v in np.ravel(np.asarray(values, dtype=object)))
    if isinstance(values, (list, tuple)):
        return any(isinstance(v, (bool, np.bool_)) for v in values)
    return False


def check_positive_int(name: str, value: Any) -> int:
    """``value`` as an int ≥ 1 (bools and non-integers refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {brief(value)}")
    return int(value)


def check_positive_number(name: str, value: Any) -> float:
    """``value`` as a finite float > 0 (bools and non-numbers refused)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not (np.isfinite(real_float(value)) and value > 0)
    ):
        raise ValueError(f"{name} must be a positive number, got {brief(value)}")
    return float(value)


def check_nonnegative_number(name: str, value: Any, what: str = "") -> float:
    """``value`` as a finite float >= 0 (bools and non-numbers refused); ``what`` (e.g.
    ``" (seconds)"``) follows the requirement in the message."""
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not (np.isfinite(real_float(value)) and value >= 0)
    ):
        raise ValueError(f"{name} must be a finite number >= 0{what}, got {brief(value)}")
    return float(value)


def check_flag(name: str, value: Any) -> bool:
    """``value`` as a bool: only ``True``/``False`` (and numpy's) are taken, so that a truthy
    ``"no"`` or ``1.5`` is refused rather than read as ``True``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {brief(value)}")
    return bool(value)


def brief(value: Any) -> str:
    """``repr(value)`` on one line for a message, cut short (a 2-D array's repr has several
    lines, a huge int hundreds of digits): :func:`mechanisms.measures._brief`, 60 characters."""
    return _brief(value, limit=60, keep=40)


def check_choice(name: str, value: Any, allowed: Sequence[str], what: str | None = None) -> str:
    """``value`` as one of the strings ``allowed``; anything else, an array included (whose
    ``in`` test numpy cannot answer), is refused in one line naming ``name``.

    Parameters
    ----------
    name : str
        The option's name in the message.
    value : object
        The value given.
    allowed : sequence of str
        The choices.
    what : str, optional
        The requirement as the message states it (default ``'a', 'b' or 'c'``).

    Returns
    -------
    str
        ``value``.

    Raises
    ------
    ValueError
        For a value that is not one of ``allowed`` (a non-string in particular).
    """
    if not isinstance(value, str) or value not in allowed:
        quoted = [repr(a) for a in allowed]
        want = what or (", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0])
        raise ValueError(f"{name} must be {want}, got {brief(value)}")
    return value


def check_note(note: Any) -> str:
    """``note`` (a ledger entry's free text) as a str: anything else (None, a list, an array) is
    refused rather than stored as its ``str()``.  Characters UTF-8 cannot encode (a file name's
    undecodable bytes, as ``\udcff``) come back escaped (:func:`storable_text`)."""
    if not isinstance(note, str):
        raise ValueError(f'note must be a string (use "" for no note), got {brief(note)}')
    return storable_text(note)


def storable_text(text: str) -> str:
    """``text`` with the characters UTF-8 cannot encode (lone surrogates, such as the
    ``\udcff`` that stands for a file name's byte 0xff) written as backslash escapes, so that a
    database stores it and a reader sees where the odd bytes were."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def as_number(value: Any) -> float:
    """``float(value)`` of a number, never of a bool (``True`` is not 1.0 here): TypeError or
    ValueError otherwise, for the caller's message."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"a bool is not a number: {brief(value)}")
    return float(value)


#: the largest |prior mean| or |fixed θ| the samplers take: item and person parameters live
#: within a few units of 0 on the probit/logit scale, so 1e6 already means nothing, and
#: values near 1e154 overflow the samplers' squares (NaN draws)
LOCATION_MAX = 1e6


def check_location(what: str, value: float) -> None:
    """Refuse a prior mean or fixed θ ``value`` with ``|value| > LOCATION_MAX``, naming ``what``."""
    if abs(value) > LOCATION_MAX:
        raise ValueError(
            f"{what} is {float(value)!r}, too large: the parameters live within a few units of 0 on the "
            f"probit/logit scale; use a value with |value| <= {LOCATION_MAX:g} (e.g. 0 or 1)"
        )


def check_locations(what: str, values: Any) -> None:
    """:func:`check_location` on every element of ``values`` (finite numbers), naming the first
    offending one as ``what[i]`` (``what`` alone for a single number)."""
    arr = np.asarray(values, dtype=np.float64)
    big = np.abs(arr) > LOCATION_MAX
    if big.any():
        idx = np.unravel_index(int(np.argmax(big)), arr.shape)
        check_location(what + "".join(f"[{i}]" for i in idx), float(arr[idx]))


#: the smallest prior variance the samplers take: a prior SD of 1e-6 on the probit/logit scale
#: already fixes the parameter, and far smaller variances make 1/variance and mean/variance
#: overflow the samplers' precisions (NaN draws, or "math domain error" from a square root)
VARIANCE_MIN = 1e-12


def check_variance(what: str, value: float) -> None:
    """Refuse a prior variance ``value < VARIANCE_MIN``, naming ``what``."""
    if value < VARIANCE_MIN:
        raise ValueError(
            f"{what} is {value:g}, too small: a prior SD of 1e-06 on the probit/logit scale "
            f"already fixes the parameter, and far smaller ones overflow the sampler (NaN draws); "
            f"use a variance >= {VARIANCE_MIN:g} (e.g. 1 or 4)"
        )


#: the most bootstrap replicates any estimator takes (public): 50 times the default 200 and
#: 10 times the service's cap, where the intervals' Monte-Carlo error is long negligible; the
#: replicate arrays (n_boot x m floats, n_boot x m(m-1)/2 for the 2PL) stay within a few GB at
#: the sizes the docs run, while 1e7 or 1e11 would run for days or exhaust memory after the debit
MAX_N_BOOT = 10_000


def check_n_boot(n_boot: Any) -> int:
    """``n_boot`` (bootstrap replicates) as an int: 0 (no intervals) or 20 to :data:`MAX_N_BOOT`.

    Parameters
    ----------
    n_boot : int
        The number of bootstrap replicates asked for.

    Returns
    -------
    int
        ``n_boot`` as a Python int.

    Raises
    ------
    ValueError
        For a bool, a non-integer, 1 to 19, or more than :data:`MAX_N_BOOT` (checked before
        anything is spent).
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or not (n_boot == 0 or n_boot >= 20):
        raise ValueError(f"n_boot must be 0 (no intervals) or an integer >= 20, got {brief(n_boot)}")
    if n_boot > MAX_N_BOOT:
        raise ValueError(f"n_boot must be at most {MAX_N_BOOT} (more replicates do not improve the "
                         f"intervals and can run for days or exhaust memory), got {int(n_boot)}; "
                         f"pass n_boot=200 (the usual default) or another value up to {MAX_N_BOOT}")
    return int(n_boot)


def check_confidence(confidence: Any) -> float:
    """``confidence`` (level of an interval) as a float in (0, 1)."""
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.integer, np.floating)) \
            or not 0 < confidence < 1:
        raise ValueError(f"confidence must be a number in (0, 1), got {brief(confidence)}")
    return float(confidence)


def _label_kind(labels: Any) -> tuple[str, str | None]:
    """How a set of labels reads in a message ("text", "numbers (int)", ...) and the ``astype``
    argument that converts other labels to it (None where there is no one type)."""
    types = {type(x) for x in labels}
    if types and all(issubclass(t, str) for t in types):
        return "text", "str"
    if types and all(issubclass(t, (int, np.integer)) and not issubclass(t, (bool, np.bool_))
                     for t in types):
        return "numbers", "int"
    if types and all(issubclass(t, (float, np.floating)) for t in types):
        return "numbers (float)", "float"
    return "of type " + "/".join(sorted(t.__name__ for t in types)), None


def label_type_mismatch(labels: Any, expected: Any, what: str, against: str) -> str | None:
    """The one-line message for labels that equal ``expected`` only as text (``"10"`` against
    ``10``, as from JSON or a CSV read with ``dtype=str``), else None.

    Parameters
    ----------
    labels, expected : pandas.Index
        The labels given (``what``'s) and those they must equal (``against``'s).
    what, against : str
        Their names in the message, e.g. ``"beta"`` and ``"the responses"``.

    Returns
    -------
    str or None
        The message, naming both types and a conversion; None where the labels differ as text
        too (or do not differ).
    """
    if set(labels) == set(expected) or {str(x) for x in labels} != {str(x) for x in expected}:
        return None
    (kind, _), (want, cast) = _label_kind(labels), _label_kind(expected)

    def show(index: Any) -> str:
        return ", ".join([repr(x.item() if isinstance(x, np.generic) else x) for x in index[:3]]
                         + (["..."] if len(index) > 3 else []))

    fix = (f"{what}.index = {what}.index.astype({cast})" if cast is not None
           else f"relabel {what} with {against}' labels")
    return (f"{what}'s labels are {kind} ({show(labels)}) and {against}' are {want} "
            f"({show(expected)}): they are equal only as text; convert them, e.g. {fix}")


def refuse_duplicate_items(labels: Any, what: str = "beta") -> None:
    """Refuse item labels (a pandas Index) that repeat, naming a few (one value per item).

    Raises
    ------
    ValueError
        ``"beta has duplicate item label(s) ['q0']; pass one difficulty per item"``.
    """
    if not labels.has_duplicates:
        return
    dup = list(dict.fromkeys(labels[labels.duplicated()]))
    shown = [x.item() if isinstance(x, np.generic) else x for x in dup[:5]]
    more = f" and {len(dup) - 5} more" if len(dup) > 5 else ""
    raise ValueError(f"{what} has duplicate item label(s) {shown}{more}; pass one difficulty per item")


def available_memory() -> float:
    """Bytes this process may still allocate: the machine's physical memory, or less where an
    address-space limit (``ulimit -v``) leaves less beyond what the process already maps;
    2⁶³ where neither is known."""
    try:
        have = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        have = 2.0**63
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):  # pragma: no cover - not on every platform
        return have
    if limit == resource.RLIM_INFINITY or limit < 0:
        return have
    try:
        with open("/proc/self/statm") as f:
            mapped = float(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        mapped = 0.0
    return min(have, max(0.0, limit - mapped))

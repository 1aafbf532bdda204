"""Input checks shared by the mechanisms (errors say what was wrong and what to do)."""

from __future__ import annotations

import math
import numbers
import sys
from fractions import Fraction

import numpy as np

from .measures import _as_float, _brief, _exact, _is_finite, _round_up

#: Noise scales accepted by the native samplers (the float error analysis of the Gaussian
#: acceptance test and the int64 output range are proven for this range).
MIN_SCALE = 2.0**-10
MAX_SCALE = 2.0**40
_MAX_ABS_INPUT = 1 << 61


def check_scale(name: str, value: object) -> float:
    """A finite, positive real noise scale in ``[MIN_SCALE, MAX_SCALE]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a positive real number, got {_brief(value)}")
    v = _as_float(value)
    if math.isnan(v):
        raise ValueError(f"{name} must be a positive real number, got NaN")
    if math.isinf(v) and not _is_finite(value):
        raise ValueError(f"{name} must be finite, got {v}")
    if v <= 0:
        raise ValueError(f"{name} must be > 0, got {v}; pass the noise scale (a standard deviation-like "
                         "parameter), not a privacy budget")
    if not MIN_SCALE <= v <= MAX_SCALE:
        shown = repr(v) if math.isfinite(v) else _brief(value)
        raise ValueError(f"{name}={shown} is outside the supported range [2**-10, 2**40]")
    return v


#: Largest per-bit ε of randomized response: beyond it the keep probability rounds to 1.
EPSILON_MAX = 700.0


def check_epsilon(value: object, *, upper: float = EPSILON_MAX) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"epsilon must be a positive real number, got {_brief(value)}")
    v = _as_float(value)
    if math.isnan(v) or (math.isinf(v) and not _is_finite(value)):
        raise ValueError(f"epsilon must be finite, got {v}")
    if v <= 0:
        raise ValueError(f"epsilon must be > 0, got {v}")
    if v > upper:
        shown = v if math.isfinite(v) else _brief(value)
        raise ValueError(f"epsilon={shown} is above {upper}: the keep probability would round to 1 "
                         "(no privacy); use a smaller epsilon")
    return v


def check_sensitivity(name: str, value: object) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a non-negative real number, got {_brief(value)}")
    v = _as_float(value)
    if math.isnan(v) or (math.isinf(v) and not _is_finite(value)) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {v}")
    return _exact(value)  # exactly (Fraction(1, 3), 2**53 + 1, np.longdouble), not rounded to a float


#: Most values one draw may return: an int64 array's bytes must be indexable by numpy (2**60).
MAX_SIZE = (np.iinfo(np.intp).max + 1) // 8


def check_shape(size: object) -> tuple[int, ...]:
    """A non-negative int or a tuple of non-negative ints, as a shape tuple of at most
    :data:`MAX_SIZE` values (with no dimension above it)."""
    dims = (size,) if isinstance(size, numbers.Integral) else size
    if isinstance(dims, (tuple, list)) and all(
        isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0 for s in dims
    ) and not isinstance(size, bool):
        shape = tuple(int(s) for s in dims)
        if math.prod(shape) > MAX_SIZE or any(s > MAX_SIZE for s in shape):  # Python ints: no overflow
            raise ValueError(f"size={_brief(size)} asks for more than 2**{MAX_SIZE.bit_length() - 1} "
                             "values, more than an int64 array can hold; draw fewer (in batches)")
        return shape
    raise ValueError(f"size must be a non-negative int or a tuple of non-negative ints, got {_brief(size)}")


def as_integer_array(values: object, what: str = "values") -> np.ndarray:
    """Integer input as int64; floats are refused (noise is never added to floats)."""
    arr = np.asarray(values)
    if arr.size == 0 and arr.dtype.kind in "biuf":
        return arr.astype(np.int64)  # e.g. an empty list (numpy makes it float64)
    if arr.dtype == object:
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in arr.flat):
            raise ValueError(f"{what} must be integers; got non-integer objects")
        if any(abs(int(v)) > _MAX_ABS_INPUT for v in arr.flat):  # before int64 (which would overflow)
            raise ValueError(f"{what} exceed 2**61 in magnitude; noisy results could overflow int64")
        arr = arr.astype(np.int64)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise ValueError(
            f"{what} must be an integer array, got dtype {arr.dtype}. Discrete noise is only added to "
            "integers (adding noise to floats leaks through their low-order bits, Mironov 2012); "
            "if the values are integral counts, convert them first, e.g. np.rint(x).astype(np.int64)"
        )
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > _MAX_ABS_INPUT:
        raise ValueError(f"{what} exceed 2**61 in magnitude; noisy results could overflow int64")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (int(arr.max()) > _MAX_ABS_INPUT or int(arr.min()) < -_MAX_ABS_INPUT):
        raise ValueError(f"{what} exceed 2**61 in magnitude; noisy results could overflow int64")
    return arr


def round_up(x: Fraction, *, what: str, fix: str) -> float:
    """Smallest float >= the exact rational ``x`` (privacy parameters are rounded up), by
    :func:`mechanisms.measures._round_up`; a finite bound is required, so an ``x`` above the
    largest double is refused.

    Parameters
    ----------
    x : Fraction
        The exact privacy parameter.
    what : str
        How it is computed, for the message (``"epsilon * n_bits"``).
    fix : str
        What to change instead (``"fewer n_bits"``).

    Raises
    ------
    ValueError
        If no finite double is >= ``x``.
    """
    f = _round_up(x)
    if math.isinf(f):
        raise ValueError(f"{what} is above the largest finite number ({sys.float_info.max:.6g}), so no "
                         f"finite privacy bound can be stated; use {fix}")
    return f

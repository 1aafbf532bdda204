"""Validation of the numeric options the estimators share (one wording everywhere)."""

from __future__ import annotations

from typing import Any

import numpy as np


def check_positive_int(name: str, value: Any) -> int:
    """``value`` as an int ≥ 1 (bools and non-integers refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_positive_number(name: str, value: Any) -> float:
    """``value`` as a finite float > 0 (bools and non-numbers refused)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not (np.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)

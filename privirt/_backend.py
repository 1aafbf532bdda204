"""One backend switch for every array computation: ``device="auto" | "cpu" | "gpu"``.

Code that runs on either device asks :func:`get_xp` for the array module (``numpy`` or
``cupy``) and writes the computation once against it.  :func:`to_numpy` brings results
back to the host.  ``"auto"`` picks the GPU when cupy is installed and a CUDA device is
visible, otherwise the CPU; ``"gpu"`` without cupy raises an :class:`ImportError` that
says how to install it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import warnings
from functools import lru_cache
from types import ModuleType
from typing import Any, Literal

import numpy as np

Device = Literal["auto", "cpu", "gpu"]
from ._checks import brief, check_choice
from .exceptions import PrivirtRuntimeWarning, user_stacklevel

_VALID = ("auto", "cpu", "gpu")

GPU_INSTALL_HINT = (
    "the GPU path needs cupy: install it with `python -m pip install \"privirt[gpu]\"` "
    "(or the cupy wheel matching your CUDA version), or pass device=\"cpu\""
)


@lru_cache(maxsize=1)
def _cupy_or_none() -> ModuleType | None:
    try:
        import cupy  # type: ignore[import-not-found]
    except Exception:  # ImportError, or a broken CUDA install raising at import
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:
        return None
    return cupy


def numba_available() -> bool:
    """Whether numba is installed (the ``fast`` extra: the Gibbs sampler's fused kernel, the
    private 2PL fit's pair kernels)."""
    return importlib.util.find_spec("numba") is not None


def import_numba() -> ModuleType:
    """:mod:`numba`, imported for privirt's kernels (every ``*_numba`` module imports it here).

    numba reads its ``NUMBA_*`` environment variables when it is first imported and refuses
    some values in its own words (``NUMBA_NUM_THREADS=0``: "Number of threads specified must
    be > 0."), which name neither the variable nor the remedy.

    Returns
    -------
    module
        :mod:`numba`.

    Raises
    ------
    ValueError
        numba refused its configuration: one line naming ``NUMBA_NUM_THREADS`` (or the
        ``NUMBA_*`` variables) and what to do.
    ImportError
        numba is not installed, or cannot be imported (as raised by numba).
    """
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import numba
    except ImportError:
        raise
    except Exception as exc:  # numba's own check of its configuration (a ValueError today)
        said = " ".join(str(exc).split()) or type(exc).__name__
        threads = os.environ.get("NUMBA_NUM_THREADS")
        if threads is not None and "thread" in said.lower():
            raise ValueError(
                f"the environment variable NUMBA_NUM_THREADS={brief(threads)} is refused by numba "
                f"({said}): unset NUMBA_NUM_THREADS or set it to a positive integer"
            ) from None
        raise ValueError(
            f"numba (the fast extra) refused its configuration ({said}): check the NUMBA_* "
            f"environment variables (unset them for numba's defaults)"
        ) from None
    _rewarn(caught)
    return numba


#: numba's warning for a ``NUMBA_*`` value it cannot parse (it goes on with its default); its
#: text holds the parse error's whole traceback
_UNPARSED = re.compile(r"Environment variable '(NUMBA_\w+)' is defined but its associated value '(.*?)' "
                       r"could not be parsed", re.S)


def _rewarn(caught: list[warnings.WarningMessage]) -> None:
    """Issue again the warnings numba's import gave, its warning for a ``NUMBA_*`` value it
    cannot parse (a traceback's text in a warning) as one line naming the variable and the remedy."""
    for w in caught:
        found = _UNPARSED.match(str(w.message))
        if found is None:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        else:
            name, value = found.groups()
            warnings.warn(f"the environment variable {name}={brief(value)} is not a value numba can read; "
                          f"numba ignores it and uses its default: unset {name} or correct it",
                          PrivirtRuntimeWarning, stacklevel=user_stacklevel())


def gpu_available() -> bool:
    """Whether cupy is importable and at least one CUDA device is visible."""
    return _cupy_or_none() is not None


def resolve_device(device: str = "auto") -> Literal["cpu", "gpu"]:
    """Turn ``"auto" | "cpu" | "gpu"`` into the concrete device, validating the value."""
    check_choice("device", device, _VALID, what=f"one of {_VALID}")
    if device == "cpu":
        return "cpu"
    if device == "gpu":
        if _cupy_or_none() is None:
            raise ImportError(GPU_INSTALL_HINT)
        return "gpu"
    return "gpu" if gpu_available() else "cpu"


def get_xp(device: str = "auto") -> ModuleType:
    """The array module for ``device``: :mod:`numpy` or :mod:`cupy`."""
    return _cupy_or_none() if resolve_device(device) == "gpu" else np  # type: ignore[return-value]


def to_numpy(a: Any) -> np.ndarray:
    """A host numpy array from a numpy or cupy array (no copy for numpy input)."""
    if isinstance(a, np.ndarray):
        return a
    # cupy's .get() is the device-to-host copy; other objects' .get (dict, DataFrame) is not
    if type(a).__module__.split(".")[0] in ("cupy", "cupyx"):
        return a.get()
    return np.asarray(a)

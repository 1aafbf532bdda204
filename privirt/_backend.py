"""One backend switch for every array computation: ``device="auto" | "cpu" | "gpu"``.

Code that runs on either device asks :func:`get_xp` for the array module (``numpy`` or
``cupy``) and writes the computation once against it.  :func:`to_numpy` brings results
back to the host.  ``"auto"`` picks the GPU when cupy is installed and a CUDA device is
visible and passes a short test (:func:`_gpu_probe`), otherwise the CPU; ``"gpu"`` without
a usable GPU raises an :class:`ImportError` that says how to install cupy, or why the GPU
failed the test.
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


#: the probe's kernel, compiled by NVRTC as the GPU samplers' RawModule/RawKernel are
_PROBE_KERNEL = r'''extern "C" __global__ void privirt_probe(long long* x) { x[threadIdx.x] += 1; }'''
#: an absolute path in a driver's message (a library's folder): only its last part is said
_PATH = re.compile(r"(?:[A-Za-z]:)?[\\/](?:[^\s'\"\\/]+[\\/])+(?=[^\s'\"\\/])")


def gpu_error_text(exc: BaseException) -> str:
    """``exc`` as a short line for a message: its type and text on one line, absolute paths
    cut to their last part, at most 200 characters."""
    text = " ".join(str(exc).split()) or "no message"
    text = _PATH.sub("", text)
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= 200 else text[:197] + "..."


def is_gpu_error(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by cupy (a GPU that failed in use: a broken driver, a
    missing NVRTC, a kernel that cannot be launched)."""
    return type(exc).__module__.split(".")[0] in ("cupy", "cupyx", "cupy_backends")


@lru_cache(maxsize=1)
def _gpu_probe() -> tuple[ModuleType | None, str]:
    """``(cupy, "")`` when a GPU is usable, else ``(None, why not)`` (``""``: cupy is not installed).

    Besides the device count, the probe allocates, runs an elementwise operation and a
    reduction, compiles and launches a trivial kernel (NVRTC, as the samplers' kernels) and
    copies the result back, so that a broken driver or CUDA install is "no usable GPU"
    rather than a failure at the first real use.  Run once per process, when a device is
    first resolved (never at ``import privirt``).
    """
    try:
        import cupy  # type: ignore[import-not-found]
    except ModuleNotFoundError as exc:
        if exc.name == "cupy":
            return None, ""
        return None, gpu_error_text(exc)
    except Exception as exc:  # a broken CUDA install raising at import
        return None, gpu_error_text(exc)
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None, "no CUDA device is visible"
        x = cupy.arange(4, dtype=cupy.int64) * 2
        cupy.RawKernel(_PROBE_KERNEL, "privirt_probe")((1,), (4,), (x,))
        cupy.cuda.Device().synchronize()
        if int(x.sum()) != 16:  # 0+2+4+6, each plus one
            return None, "a test kernel gave a wrong result"
    except Exception as exc:
        return None, gpu_error_text(exc)
    return cupy, ""


def _cupy_or_none() -> ModuleType | None:
    """cupy where a GPU is usable (see :func:`_gpu_probe`), else None."""
    return _gpu_probe()[0]


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
    """Whether cupy is importable and a CUDA device is visible and passes a short test
    (allocation, arithmetic, a compiled kernel)."""
    return _cupy_or_none() is not None


def resolve_device(device: str = "auto") -> Literal["cpu", "gpu"]:
    """Turn ``"auto" | "cpu" | "gpu"`` into the concrete device, validating the value."""
    check_choice("device", device, _VALID, what=f"one of {_VALID}")
    if device == "cpu":
        return "cpu"
    if device == "gpu":
        if _cupy_or_none() is None:
            why = _gpu_probe()[1]
            if why:  # cupy is installed but the GPU failed the probe
                raise ImportError(f"no usable GPU: {why}; check the CUDA driver and that the cupy wheel "
                                  "matches your CUDA version, or pass device=\"cpu\"")
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

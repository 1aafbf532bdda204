"""One BLAS thread around batched small-matrix work (bootstrap replicates, batched refits).

Stacks of small solves / products (m × m per replicate, m ≲ a few hundred) gain nothing from
OpenBLAS's threads and lose up to ~10× when the cores are shared (every call spins and
synchronises its threads; a notebook, CI or a server always shares them): measured in
``benchmarks/bench_defaults.py``.  ``threadpoolctl`` (a core dependency: small, pure Python,
the scikit-learn project's tool for exactly this) limits the BLAS pools of the process for
the duration of the block and restores them afterwards.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, TypeVar

__all__ = ["single_blas_thread", "one_blas_thread", "LIMIT_BLAS"]

F = TypeVar("F", bound=Callable[..., Any])

#: Set to False to keep BLAS's own threads (benchmarks compare both).
LIMIT_BLAS: bool = True


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    """Limit BLAS to one thread inside the block (no-op when :data:`LIMIT_BLAS` is False or
    threadpoolctl is missing)."""
    if not LIMIT_BLAS:
        yield
        return
    controller = _controller()
    if controller is None:  # pragma: no cover - a core dependency; be lenient in odd installs
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


@functools.lru_cache(maxsize=1)
def _controller() -> Any:
    """threadpoolctl's view of the process's thread pools, scanned once (a scan of the loaded
    libraries costs ~7 ms, which a request of the curator service paid on every call).  numpy
    and scipy load their BLAS at import, before any block here runs."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover
        return None
    import numpy  # noqa: F401 - make sure numpy's BLAS is loaded before the scan
    import scipy.linalg  # noqa: F401 - and scipy's (it may bundle its own OpenBLAS)

    return ThreadpoolController()


def one_blas_thread(fn: F | None = None, *, when: Callable[..., bool] | None = None) -> Any:
    """Decorator: run ``fn`` inside :func:`single_blas_thread` (only where ``when(*args,
    **kwargs)`` is true, if given: e.g. only for small matrices)."""

    def deco(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if when is not None and not when(*args, **kwargs):
                return f(*args, **kwargs)
            with single_blas_thread():
                return f(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return deco if fn is None else deco(fn)

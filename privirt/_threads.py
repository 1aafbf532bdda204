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
import os
import threading
from typing import Any, Callable, Iterator, TypeVar

__all__ = ["single_blas_thread", "one_blas_thread", "one_thread_in", "LIMIT_BLAS"]

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
    with one_thread_in(controller, "blas"):
        yield


# The limits are process-wide, while the blocks run in many threads: each block restoring "the
# limits it found" left the process at one thread for good when two blocks overlapped (the
# second in found 1 and, last out, put 1 back).  So the blocks share one count: every block
# applies its limit, and the last one out restores, newest first, what the blocks changed.
_LIMIT_LOCK = threading.Lock()
_LIMIT_DEPTH = 0
_LIMIT_UNDO: list[Any] = []  # threadpoolctl limiters that changed a pool, oldest first
if hasattr(os, "register_at_fork"):  # a fork never sees the lock held by a vanished thread
    os.register_at_fork(before=_LIMIT_LOCK.acquire, after_in_parent=_LIMIT_LOCK.release,
                        after_in_child=_LIMIT_LOCK.release)


@contextlib.contextmanager
def one_thread_in(controller: Any, user_api: str | None) -> Iterator[None]:
    """Limit the thread pools of ``controller`` (a ``threadpoolctl.ThreadpoolController``) of
    ``user_api`` (``"blas"``, or None for all) to one thread inside the block; concurrent
    blocks share the limit, and the last one out restores the limits found by the first in.

    Parameters
    ----------
    controller : threadpoolctl.ThreadpoolController
        The pools to limit.
    user_api : str or None
        Which of its pools (threadpoolctl's ``user_api``).
    """
    global _LIMIT_DEPTH
    with _LIMIT_LOCK:
        before = controller.info()
        limiter = controller.limit(limits=1, user_api=user_api)
        _release_openblas_control()
        if controller.info() != before:
            _LIMIT_UNDO.append(limiter)
        _LIMIT_DEPTH += 1
    try:
        yield
    finally:
        with _LIMIT_LOCK:
            _LIMIT_DEPTH -= 1
            if _LIMIT_DEPTH == 0:
                while _LIMIT_UNDO:
                    _LIMIT_UNDO.pop().restore_original_limits()
                _release_openblas_control()


def _release_openblas_control() -> None:
    """Recent threadpoolctl (3.8 here) lets only the thread that last set OpenBLAS's (pthreads)
    limit set it again, until that thread releases it, as its own ``with`` blocks do on exit:
    released here after each change, so that the block that restores may run in another thread."""
    try:
        from threadpoolctl import OpenBLASController
    except ImportError:  # pragma: no cover - older threadpoolctl: no controlling thread
        return
    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear()


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

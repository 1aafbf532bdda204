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

#: Set to False to keep BLAS's own threads (benchmarks compare both).  The limit is
#: process-wide while a block runs: another thread's own ``threadpool_limits`` block opened
#: meanwhile (scikit-learn opens such blocks) records the 1 as what it restores, which this
#: module cannot see; set it to False where other threads use BLAS at the same time.
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
_LIMIT_OPEN: dict[int, int] = {}  # open blocks by the thread that opened them
_LIMIT_UNDO: list[Any] = []  # threadpoolctl limiters that changed a pool, oldest first


def _after_fork_in_child() -> None:
    """Only the forking thread lives on in a child: the blocks other threads had open never
    close there, so the child kept one BLAS thread for good.  They are dropped, and with none
    of its own open the child's limits are restored at once."""
    global _LIMIT_DEPTH
    mine = _LIMIT_OPEN.get(threading.get_ident(), 0)
    _LIMIT_OPEN.clear()
    if mine:
        _LIMIT_OPEN[threading.get_ident()] = mine
    _LIMIT_DEPTH = mine
    try:
        if not mine:
            while _LIMIT_UNDO:
                _LIMIT_UNDO.pop().restore_original_limits()
            _release_openblas_control()
    except Exception:  # pragma: no cover - a child with more BLAS threads is only slower
        _LIMIT_UNDO.clear()
    finally:
        _LIMIT_LOCK.release()


if hasattr(os, "register_at_fork"):  # a fork never sees the lock held by a vanished thread
    os.register_at_fork(before=_LIMIT_LOCK.acquire, after_in_parent=_LIMIT_LOCK.release,
                        after_in_child=_after_fork_in_child)


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
    me = threading.get_ident()
    with _LIMIT_LOCK:
        before = controller.info()
        limiter = controller.limit(limits=1, user_api=user_api)
        _release_openblas_control()
        if controller.info() != before:
            _LIMIT_UNDO.append(limiter)
        _LIMIT_DEPTH += 1
        _LIMIT_OPEN[me] = _LIMIT_OPEN.get(me, 0) + 1
    try:
        yield
    finally:
        with _LIMIT_LOCK:
            if _LIMIT_OPEN.get(me, 0) > 1:
                _LIMIT_OPEN[me] -= 1
            else:
                _LIMIT_OPEN.pop(me, None)
            _LIMIT_DEPTH = max(_LIMIT_DEPTH - 1, 0)
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

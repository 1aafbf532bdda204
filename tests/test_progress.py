"""The shared progress bar."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

import privirt
from privirt._progress import ProgressBar, resolve_progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_stream_prints_one_line_per_tenth_and_the_end():
    out = io.StringIO()
    bar = ProgressBar(100, "job", unit="cells", stream=out)
    for done in range(1, 101):
        bar.update(done)
    lines = out.getvalue().splitlines()
    assert len(lines) == 11  # the first step, then 10 %, 20 %, ..., 100 %
    assert lines[-1].startswith("job [") and "100/100 cells 100%" in lines[-1]
    assert "\r" not in out.getvalue()


def test_tty_redraws_in_place_and_ends_with_newline():
    out = FakeTTY()
    bar = ProgressBar(5, "mh", stream=out, min_interval=0.0, phase=lambda d: "warmup" if d < 3 else "sampling")
    for done in range(1, 6):
        bar.update(done)
    text = out.getvalue()
    assert text.count("\r") == 5 and text.endswith("\n")
    assert "mh warmup" in text and "mh sampling" in text and "5/5 it 100%" in text


@pytest.mark.parametrize("columns", [80, 40, 20, 10])
def test_tty_lines_fit_the_terminal_width(monkeypatch, columns):
    # a drawn line as wide as the terminal wraps, and "\r" then redraws only the last row
    import os
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((columns, 24)))
    out = FakeTTY()
    bar = ProgressBar(240, "privirt sweep", unit="cells", stream=out, min_interval=0.0,
                      phase=lambda d: "warmup" if d < 100 else "sampling")
    for done in range(1, 241):
        bar.update(done, failed=done // 100)
    lines = [part for chunk in out.getvalue().split("\n") for part in chunk.split("\r") if part]
    assert len(lines) == 240
    assert max(len(line) for line in lines) <= columns - 1
    assert out.getvalue().endswith("\n")
    if columns == 80:  # the bar shrinks first, the counts and timing stay while they fit
        assert "99/240 cells" in lines[98] and "ETA" in lines[98] and "[##" in lines[98]
        assert "240/240 cells 100%, 2 failed" in lines[-1]


def test_plain_stream_lines_are_not_cut(monkeypatch):
    import os
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((20, 24)))
    out = io.StringIO()
    ProgressBar(3, "a long label for a plain log", stream=out).update(3)
    assert "elapsed, ETA" in out.getvalue() and "[########################]" in out.getvalue()


def test_failures_repeated_calls_and_disabled():
    out = io.StringIO()
    bar = ProgressBar(2, "s", stream=out)
    bar.update(2, failed=1)
    bar.update(2, failed=1)  # same position: printed once
    assert out.getvalue().count("\n") == 1 and "1 failed" in out.getvalue()
    quiet = io.StringIO()
    ProgressBar(3, "q", stream=quiet, enabled=False).update(3)
    ProgressBar(0, "empty", stream=quiet).update(0)
    assert quiet.getvalue() == ""


# -- progress= of the samplers: validated as in the rest of the API (None = auto) ------------
def _samplers():
    X, *_ = privirt.simulate_2pno(40, 3, seed=3_800_030)
    return {
        "gibbs_2pno": lambda p: privirt.gibbs_2pno(X, n_iter=6, warmup=2, seed=3_800_031, progress=p),
        "gibbs_2pno_replicate": lambda p: privirt.gibbs_2pno_replicate(
            [X], n_iter=6, warmup=2, seed=3_800_031, progress=p),
        "mh_2pl": lambda p: privirt.mh_2pl(X, n_iter=6, warmup=2, seed=3_800_031, progress=p),
    }


def test_samplers_refuse_what_is_not_a_progress_flag():
    for name, run in _samplers().items():
        for bad in ("no", "False", 0.0, 2):
            with pytest.raises(ValueError, match="^progress must be True, False or None") as e:
                run(bad)
            assert "\n" not in str(e.value), name


def test_samplers_progress_none_is_auto_and_numpy_bools_are_flags(capsys, monkeypatch):
    assert resolve_progress(np.True_) is True and resolve_progress(np.False_) is False
    runs = _samplers()
    for run in runs.values():
        run(None)  # capsys' stderr is not a terminal: no bar
        run(np.False_)
    assert capsys.readouterr().err == ""
    for name, run in runs.items():
        run(np.True_)
        assert "100%" in capsys.readouterr().err, name
    for name, run in runs.items():
        tty = FakeTTY()
        monkeypatch.setattr(sys, "stderr", tty)
        run(None)  # on a terminal: the bar
        assert "100%" in tty.getvalue(), name


def test_the_width_is_read_from_the_terminal_the_bar_is_drawn_on(monkeypatch):
    # shutil.get_terminal_size asks stdout: with stdout redirected to a file the bar on a 30-column
    # stderr terminal was fitted to 80 columns and wrapped at every redraw
    import fcntl
    import os
    import shutil
    import struct
    import termios

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((200, 24)))
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 30, 0, 0))
        with open(slave, "w", closefd=False) as stream:
            bar = ProgressBar(50, "privirt gibbs", unit="iterations", stream=stream, min_interval=0.0)
            assert bar.tty
            for done in range(1, 51):
                bar.update(done)
        os.set_blocking(master, False)
        text = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            text += chunk
    finally:
        os.close(master)
        os.close(slave)
    lines = [part for chunk in text.decode().replace("\r\n", "\n").split("\n") for part in chunk.split("\r") if part]
    assert len(lines) >= 50 and max(len(line) for line in lines) <= 29

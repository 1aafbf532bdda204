"""The shared progress bar."""

from __future__ import annotations

import io

from privirt._progress import ProgressBar


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

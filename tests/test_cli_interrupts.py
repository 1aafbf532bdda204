"""The command line interrupted or cut off: SIGTERM and SIGHUP as Ctrl-C, a closed stdout,
``--out`` files replaced whole or not at all, a terminal progress bar ended before the error
line, and whether the budget was spent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privirt.private.ledger import Ledger
from tests._env import child_env

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def csv_file(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    path = tmp_path / "x.csv"
    pd.DataFrame((rng.random((200, 6)) < 0.5).astype(int),
                 columns=[f"i{j}" for j in range(6)]).to_csv(path, index=False)
    return path


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _start(argv: list[str], hook: str = "", **popen) -> subprocess.Popen:
    """``privirt ARGV`` in a child whose noise draw (after the debit) hangs 120 s when ``hook``
    is ``"hang"``; SIGINT, SIGTERM and SIGHUP have their defaults, as under a terminal (a suite
    started with ``nohup`` or as a background job ignores SIGHUP or SIGINT, and the command
    rightly keeps an ignored signal ignored: the SIGHUP case then hung until its time-out)."""
    code = "import sys, time\n"
    if hook == "hang":
        code += textwrap.dedent("""
            import mechanisms
            def stuck(self, values):            # test-only hook: hang where noise is drawn
                for _ in range(1200):  # short sleeps: a SIGINT taken by another thread (BLAS) wakes no long sleep
                    time.sleep(0.1)
            mechanisms.DiscreteGaussian.apply = stuck
            """)
    code += f"from privirt.cli import main\nsys.exit(main({argv!r}))\n"
    env = child_env()
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-c", code], cwd=str(ROOT), env=env, text=True,
                            preexec_fn=_terminal_signals, **popen)


def _terminal_signals() -> None:
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def _wait_for_spends(proc: subprocess.Popen, led: Path, count: int) -> None:
    deadline = time.time() + 60
    while len(Ledger(led).spends()) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize("name, status", [("SIGTERM", 143), ("SIGHUP", 129)])
def test_sigterm_after_the_debit_says_the_budget_was_spent(tmp_path, csv_file, name, status):
    """SIGTERM (kill, timeout, CI) after the debit ended the run silently (-15) with the budget
    spent; it is reported as Ctrl-C is, with the status a shell gives the signal."""
    if not hasattr(signal, name):
        pytest.skip(f"no {name} here")
    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=5.0, delta=1e-5)
    proc = _start(["estimate", str(csv_file), "--epsilon", "1", "--ledger", str(led)], "hang")
    _wait_for_spends(proc, led, 1)
    proc.send_signal(getattr(signal, name))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    line = _one_line(err)
    assert line.startswith("privirt: interrupted; the privacy budget WAS spent (asked ε=1, δ=1e-05; "
                           "cost ρ="), line
    assert str(led) in line and "spend #1" in line
    assert len(Ledger(led).spends()) == 1


def test_sigterm_handlers_are_restored_after_main(csv_file, capsys):
    from privirt.cli import main

    before = signal.getsignal(signal.SIGTERM)
    assert main(["estimate", str(csv_file)]) == 0
    assert signal.getsignal(signal.SIGTERM) is before


def _interrupt(*a, **k):
    raise KeyboardInterrupt


@pytest.mark.parametrize("ledger", [True, False])
def test_interrupt_before_the_debit_says_nothing_was_spent(tmp_path, csv_file, capsys, monkeypatch,
                                                           ledger):
    """Ctrl-C before the debit said only "privirt: interrupted", as if it could not tell; with a
    ledger the journal tells (a run without one is not journaled: the line stays plain)."""
    from privirt.cli import main
    from privirt.private import measurements

    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=5.0, delta=1e-5)
    monkeypatch.setattr(measurements.CountsGaussian, "calibrate", classmethod(_interrupt))
    monkeypatch.setattr(measurements.TotalsGaussian, "calibrate", classmethod(_interrupt))
    argv = ["estimate", str(csv_file), "--epsilon", "1"] + (["--ledger", str(led)] if ledger else [])
    assert main(argv) == 130
    said = _one_line(capsys.readouterr().err)
    assert said == "privirt: interrupted" + (" (nothing was spent)" if ledger else "")
    assert len(Ledger(led).spends()) == 0


@pytest.mark.parametrize("argv, said", [
    (["estimate", "x.csv", "--epsilon", "1", "--ledger", "l.ledger"], " (nothing was spent)"),
    (["estimate", "x.csv", "--ledger=l.ledger"], " (nothing was spent)"),
    (["estimate", "x.csv", "--ledg", "l.ledger"], " (nothing was spent)"),  # argparse takes it
    (["gibbs", "x.csv"], ""),
    (["gibbs", "x.csv", "--l"], ""),
])
def test_interrupt_while_the_command_line_is_read(monkeypatch, capsys, argv, said):
    import privirt.cli as cli

    monkeypatch.setattr(cli, "build_parser", _interrupt)
    assert cli.main(argv) == 130
    assert _one_line(capsys.readouterr().err) == "privirt: interrupted" + said


# -- --out files are replaced whole or not at all ----------------------------------------------
def _to_csv_failing_midway(self, path_or_buf=None, *args, **kwargs):
    """``DataFrame.to_csv`` that writes a first line, then fails (a full disk, an interruption)."""
    if isinstance(path_or_buf, (str, os.PathLike)):
        with open(path_or_buf, "w") as fh:
            fh.write("item,partial\n")
    else:
        path_or_buf.write("item,partial\n")
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("command", [
    ["estimate"], ["fit"],
    ["gibbs", "--iter", "20", "--warmup", "10", "--seed", "1", "--device", "cpu", "--no-progress"],
])
def test_out_file_failing_midway_leaves_the_old_file(tmp_path, csv_file, capsys, monkeypatch, command):
    """An interrupted --out write left a truncated file under the final name, the old one lost."""
    from privirt.cli import main

    folder = tmp_path / "outs"
    folder.mkdir()
    out = folder / "result.csv"
    out.write_text("the old result\n")
    monkeypatch.setattr(pd.DataFrame, "to_csv", _to_csv_failing_midway)
    assert main([command[0], str(csv_file), *command[1:], "--out", str(out)]) == 2
    err = capsys.readouterr().err  # (random answers: gibbs warns about the slopes first)
    assert err.strip().splitlines()[-1].startswith(
        f"privirt: error: could not write --out {out} (No space left on device); the result is printed above"), err
    assert out.read_text() == "the old result\n"
    assert [p.name for p in folder.iterdir()] == ["result.csv"]  # no temporary file left


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path):
    from privirt._files import atomic_write

    path = tmp_path / "r.json"
    path.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(path) as fh:
            fh.write("half of the n")
            raise KeyboardInterrupt
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]
    with atomic_write(path) as fh:
        fh.write("new ε")
    assert path.read_text(encoding="utf-8") == "new ε"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as a new file gets, not mkstemp's 0600


# -- a terminal progress bar left mid-line ------------------------------------------------------
class _Terminal(__import__("io").StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("raised, said", [(KeyboardInterrupt, "privirt: interrupted"),
                                          (ValueError("bad value"), "privirt: error: bad value")])
def test_error_after_a_terminal_bar_starts_on_its_own_line(csv_file, monkeypatch, raised, said):
    """On a terminal a bar ends in "\\r" until it is done: the error line was glued onto it."""
    from privirt._progress import ProgressBar
    from privirt.cli import estimate, main

    def drawn_then_fails(*args, **kwargs):
        ProgressBar(10, "fits", unit="fits").update(3)
        raise raised

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(estimate, "show_result", drawn_then_fails)
    assert main(["estimate", str(csv_file)]) != 0
    text = terminal.getvalue()
    bar, line, end = text.split("\n")
    assert bar.startswith("\rfits [") and "3/10 fits" in bar and line == said and end == "", repr(text)


def test_a_finished_bar_gets_no_extra_newline(monkeypatch):
    from privirt._progress import ProgressBar, end_open_line

    terminal = _Terminal()
    bar = ProgressBar(2, "x", stream=terminal, min_interval=0)
    bar.update(1)
    bar.update(2)
    end_open_line()
    assert terminal.getvalue().count("\n") == 1 and terminal.getvalue().endswith("\n")


# -- stdout closed after the debit ---------------------------------------------------------------
@pytest.mark.parametrize("model", [[], ["--model", "2pl", "--n-boot", "0"]])
def test_closed_stdout_after_the_debit_reports_the_spend_and_writes_out(tmp_path, csv_file, model):
    """`privirt estimate ... --ledger L --out f.csv | head -1`: the reader gone, the run returned
    141 without a word about the spend, and --out (written after the table) was never written."""
    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=50.0, delta=1e-5)
    out = tmp_path / "f.csv"
    proc = _start(["estimate", str(csv_file), "--epsilon", "5", "--ledger", str(led), "--out", str(out),
                   *model])
    proc.stdout.close()  # the reader is gone before privirt writes
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 141, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("privirt: stdout closed; the privacy budget WAS spent (asked ε=5"), err
    assert "spend #1" in line and str(led) in line and "Traceback" not in err
    table = pd.read_csv(out, comment="#", index_col=0)
    assert len(table) == 6 and len(Ledger(led).spends()) == 1


@pytest.mark.parametrize("model", [[], ["--epsilon", "5", "--seed", "1"],
                                   ["--model", "2pl", "--epsilon", "5", "--seed", "1", "--n-boot", "0"]])
def test_every_estimate_writes_out_before_the_table_through_one_helper(tmp_path, csv_file, capsys,
                                                                       monkeypatch, model):
    """The Rasch and the 2PL results had two copies of "write --out, then print": both go through
    _write_then_print, which has written the file (whole) when the table is printed."""
    from privirt.cli import estimate, main

    out, seen, real_format = tmp_path / "f.csv", [], estimate.format_table

    def format_table(table):
        seen.append(len(pd.read_csv(out, comment="#", index_col=0)))  # already written
        return real_format(table)

    monkeypatch.setattr(estimate, "format_table", format_table)
    calls = []
    real = estimate._write_then_print
    monkeypatch.setattr(estimate, "_write_then_print", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert main(["estimate", str(csv_file), "--out", str(out), *model]) == 0
    assert calls == [1] and seen == [6]
    assert capsys.readouterr().err.startswith(f"wrote {out}")


def test_closed_stdout_still_gets_fit_out_written(tmp_path, csv_file):
    out = tmp_path / "fit.csv"
    proc = _start(["fit", str(csv_file), "--out", str(out)])
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 141 and "Traceback" not in err, err
    assert len(pd.read_csv(out, index_col=0)) == 6


def test_an_ignored_sighup_stays_ignored(csv_file, monkeypatch):
    """Under `nohup` SIGHUP is ignored: main() must not make it an interruption."""
    from privirt.cli import estimate, main

    seen = {}
    monkeypatch.setattr(estimate, "show_result",
                        lambda *a, **k: seen.update(hup=signal.getsignal(signal.SIGHUP)) or 0)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert main(["estimate", str(csv_file)]) == 0
        assert seen["hup"] is signal.SIG_IGN and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


# -- found by the review of the day's last commits ----------------------------------------------
def test_atomic_write_through_a_symlink_replaces_its_target_and_keeps_link_and_mode(tmp_path):
    # the temp file was made in the link's folder and os.replace put a regular file in place of
    # the link (the target kept its old content; a 0600 output became 0644)
    from privirt._files import atomic_write

    (tmp_path / "rw").mkdir()
    target = tmp_path / "rw" / "real.csv"
    target.write_text("old")
    os.chmod(target, 0o600)
    link = tmp_path / "latest.csv"
    link.symlink_to(target)
    with atomic_write(link) as fh:
        fh.write("new")
    assert link.is_symlink() and target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in (tmp_path / "rw").iterdir()) == ["real.csv"]


def test_a_pooled_sweep_worker_ends_at_once_on_sigterm():
    # a forked worker inherited the CLI's Python SIGTERM handler, which runs only after a long C
    # call returns: the parent's terminate() then waited for the call (50 s after Ctrl-C)
    code = ("import signal; signal.signal(signal.SIGTERM, lambda *a: None)\n"
            "from privirt.sweeps.execute import init_worker\n"
            "init_worker({}, pooled=True)\n"
            "print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=child_env())
    assert out.stdout.strip() == "True", out.stderr


def test_a_second_interrupt_while_the_first_is_reported_never_says_nothing_was_spent(
        tmp_path, csv_file, capsys, monkeypatch):
    # a KeyboardInterrupt raised while _main reported a debited interrupt reached main()'s outer
    # handler, which said "(nothing was spent)" with a spend in the ledger
    import inspect

    from privirt.cli import main
    from privirt.private import spends

    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=5.0, delta=1e-5)
    spend = Ledger.spend

    def spend_then_interrupt(self, *a, **k):
        spend(self, *a, **k)
        raise KeyboardInterrupt  # the first Ctrl-C, just after the debit

    describe, raised = spends.Spend.describe, []

    def describe_once_interrupted(self):
        if not raised and any(f.function == "_spent" for f in inspect.stack()):
            raised.append(1)
            raise KeyboardInterrupt  # the second, while the first is reported
        return describe(self)

    monkeypatch.setattr(Ledger, "spend", spend_then_interrupt)
    monkeypatch.setattr(spends.Spend, "describe", describe_once_interrupted)
    assert main(["estimate", str(csv_file), "--epsilon", "0.5", "--ledger", str(led),
                 "--method", "spectral"]) == 130
    said = _one_line(capsys.readouterr().err)
    assert raised and "WAS spent" in said and "nothing was spent" not in said, said
    assert len(Ledger(led).spends()) == 1


def test_a_warning_during_a_terminal_bar_starts_on_its_own_line(monkeypatch, csv_file):
    """A warning shown while a terminal bar was drawn mid-line was appended to the bar's line."""
    import warnings

    from privirt._progress import ProgressBar
    from privirt.cli import estimate, main

    def drawn_then_warns(*args, **kwargs):
        bar = ProgressBar(10, "fits", unit="fits", min_interval=0)
        bar.update(3)
        warnings.warn("something to know")
        bar.update(10)
        raise ValueError("stop here")

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(estimate, "show_result", drawn_then_warns)
    assert main(["estimate", str(csv_file)]) != 0
    lines = terminal.getvalue().split("\n")
    assert lines[0].startswith("\rfits [") and "3/10 fits" in lines[0], lines
    assert lines[1] == "privirt: warning: something to know", lines
    assert lines[2].startswith("\rfits [") and "10/10 fits" in lines[2], lines

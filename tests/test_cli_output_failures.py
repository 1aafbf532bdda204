"""A command whose output cannot be written (a full disk, a non-UTF-8 stdout, a closed stdout)
after it debited a ledger or committed a change: the result is not lost silently, and the one
error line says what happened and what to do."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import privirt
from privirt.cli import main
from privirt.private.ledger import Ledger

from ._full import fill_disk
from tests._env import child_env

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def data(tmp_path) -> Path:
    X, _, _ = privirt.simulate_rasch(300, 5, seed=4)
    path = tmp_path / "d.csv"
    pd.DataFrame(X, columns=[f"q{i}" for i in range(5)]).to_csv(path, index_label="person")
    return path


@pytest.fixture()
def ledger(tmp_path, capsys) -> Path:
    path = tmp_path / "L.db"
    assert main(["budget", "init", str(path), "--epsilon", "5", "--delta", "1e-5"]) == 0
    capsys.readouterr()
    return path


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = child_env(**env)
    return subprocess.run([sys.executable, "-m", "privirt", *args], capture_output=True,
                          env=environ, timeout=60)


def test_ascii_stdout_does_not_fail_a_private_run(data, ledger):
    # '×' and 'ρ' cannot be encoded in ASCII: they used to fail the run after the debit
    proc = _run(["estimate", str(data), "--epsilon", "0.5", "--ledger", str(ledger), "--n-boot", "0"],
                PYTHONIOENCODING="ascii")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode("ascii")
    assert "\\xd7" in out and "q0" in out and "privacy" in out.lower()
    assert len(Ledger(ledger).spends()) == 1


@pytest.mark.parametrize("twice, flag", [
    (["--eps", "0.2", "--epsilon", "0.9"], "--epsilon"),
    (["--epsilon", "0.2", "--delta", "1e-6", "--delta=1e-7"], "--delta"),
    (["--epsilon", "0.2", "--ledger", "OTHER", "--ledger", "LEDGER"], "--ledger"),
])
def test_a_privacy_option_given_twice_is_refused(data, ledger, tmp_path, capsys, twice, flag):
    other = tmp_path / "other.db"
    assert main(["budget", "init", str(other), "--epsilon", "5", "--delta", "1e-5"]) == 0
    capsys.readouterr()
    twice = [{"OTHER": str(other), "LEDGER": str(ledger)}.get(a, a) for a in twice]
    if flag != "--ledger":
        twice += ["--ledger", str(ledger)]
    with pytest.raises(SystemExit) as exc:
        main(["estimate", str(data), "--n-boot", "0", *twice])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"privirt: error: {flag} given twice; give it once") and "\n" not in err
    assert len(Ledger(ledger).spends()) == 0 and len(Ledger(other).spends()) == 0


@pytest.mark.parametrize("args", [
    ["budget", "init", "NEW", "--epsilon", "1", "--epsilon", "2", "--delta", "1e-5"],
    ["budget", "init", "NEW", "--epsilon", "1", "--delta", "1e-5", "--delta", "1e-6"],
    ["serve", "dataset", "add", "NEW", "ds", "d.csv", "--epsilon", "1", "--eps", "2", "--delta", "1e-6"],
    ["demo", "--epsilon", "1", "--epsilon", "2"],
])
def test_a_repeated_budget_is_refused(tmp_path, capsys, args):
    new = tmp_path / "new.db"
    with pytest.raises(SystemExit) as exc:
        main([str(new) if a == "NEW" else a for a in args])
    assert exc.value.code != 0
    assert "given twice; give it once" in capsys.readouterr().err
    assert not new.exists()


@pytest.fixture()
def full_disk(monkeypatch) -> None:
    fill_disk(monkeypatch)


def _error_line(err: str) -> str:
    last = err.strip().splitlines()[-1]
    assert last.startswith("privirt: error: "), err
    return last


def _says_not_written(line: str, out: Path) -> None:
    assert f"could not write --out {out} ({os.strerror(errno.ENOSPC)}); the result is printed above" in line


def test_a_private_estimate_whose_out_fails_prints_the_paid_result(data, ledger, tmp_path, full_disk, capsys):
    out = tmp_path / "o.csv"
    status = main(["estimate", str(data), "--epsilon", "0.5", "--ledger", str(ledger), "--n-boot", "0",
                   "--top-k", "2", "--out", str(out)])
    assert status != 0
    std = capsys.readouterr()
    for item in ("q0", "q4", "top 2 hardest"):
        assert item in std.out
    assert "ledger spend id: 1" in std.out  # the privacy statement
    line = _error_line(std.err)
    _says_not_written(line, out)
    assert "the privacy budget WAS spent" in line and str(ledger) in line
    assert len(Ledger(ledger).spends()) == 1 and not out.exists()
    assert list(tmp_path.glob(".o.csv.*")) == []  # no temporary file left


def test_fit_whose_out_fails_prints_the_table(data, tmp_path, full_disk, capsys):
    out = tmp_path / "fit.csv"
    assert main(["fit", str(data), "--method", "spectral", "--out", str(out)]) != 0
    std = capsys.readouterr()
    assert "infit" in std.out and "q3" in std.out and "reliability" in std.out
    _says_not_written(_error_line(std.err), out)
    assert not out.exists()


@pytest.mark.parametrize("sampler", ["gibbs", "mh"])
def test_a_sampler_whose_out_fails_prints_the_summary(data, tmp_path, full_disk, capsys, sampler):
    out = tmp_path / "post.csv"
    assert main([sampler, str(data), "--iter", "30", "--warmup", "10", "--seed", "1", "--no-progress",
                 "--device", "cpu", "--out", str(out)]) != 0
    std = capsys.readouterr()
    assert "rhat" in std.out and "theta" in std.out and "q2" in std.out
    _says_not_written(_error_line(std.err), out)
    assert not out.exists()


def _full_plots(monkeypatch) -> None:
    """Saving a figure fails as on a full disk."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def savefig(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", savefig)


_SAMPLE = ["--iter", "30", "--warmup", "10", "--seed", "1", "--no-progress", "--device", "cpu"]


@pytest.mark.parametrize("sampler", ["gibbs", "mh"])
def test_a_sampler_whose_out_fails_still_warns_and_writes_the_plots(data, tmp_path, full_disk, capsys, sampler):
    # the out failure used to end the run at once: no convergence warning, no plots folder
    pytest.importorskip("matplotlib")
    out, plots = tmp_path / "post.csv", tmp_path / "pl"
    assert main([sampler, str(data), *_SAMPLE, "--out", str(out), "--plots", str(plots)]) != 0
    err = capsys.readouterr().err
    assert "the chains have not converged" in err and "do not use these estimates yet" in err  # 30 draws
    _says_not_written(_error_line(err), out)
    assert "plots" not in _error_line(err)
    assert sorted(plots.glob("*.png")) and not out.exists()


@pytest.mark.parametrize("command", [["gibbs", *_SAMPLE], ["mh", *_SAMPLE], ["fit", "--method", "spectral"]])
def test_out_and_plots_both_failing_say_so_in_one_line(data, tmp_path, full_disk, monkeypatch, capsys, command):
    _full_plots(monkeypatch)
    out, plots = tmp_path / "o.csv", tmp_path / "pl"
    assert main([command[0], str(data), *command[1:], "--out", str(out), "--plots", str(plots)]) != 0
    std = capsys.readouterr()
    assert "q2" in std.out  # the result, printed
    line = _error_line(std.err)
    _says_not_written(line, out)
    assert "the plots were not written either" in line and str(plots) in line
    assert os.strerror(errno.ENOSPC) in line.split("either")[1]
    assert "Traceback" not in std.err and not list(plots.glob("*.png"))
    if command[0] != "fit":
        assert "the chains have not converged" in std.err


def test_fit_whose_out_fails_writes_the_plots(data, tmp_path, full_disk, capsys):
    pytest.importorskip("matplotlib")
    out, plots = tmp_path / "fit.csv", tmp_path / "pl"
    assert main(["fit", str(data), "--method", "spectral", "--out", str(out), "--plots", str(plots)]) != 0
    err = capsys.readouterr().err
    _says_not_written(_error_line(err), out)
    assert (plots / "wright_map.png").is_file() and not out.exists()

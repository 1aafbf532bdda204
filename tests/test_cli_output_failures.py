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
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
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

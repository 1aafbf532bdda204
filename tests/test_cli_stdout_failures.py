"""A stdout that fails (a full disk) after a command debited a ledger or committed a change: one
line saying the result could not be printed, where it is (or that --out failed too), and what
was spent or changed; never a bare errno."""

from __future__ import annotations

import contextlib
import errno
import io
import os

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.cli import main
from privirt.private.ledger import Ledger

from ._full import NO_SPACE, fill_disk
from ._full import FullStdout as _FullStdout
from tests._env import child_env


def _fails(*args: str) -> str:
    err = io.StringIO()
    with contextlib.redirect_stdout(_FullStdout()), contextlib.redirect_stderr(err):
        assert main(list(args)) != 0
    text = err.getvalue()
    assert text.count("privirt: error") == 1 and "Errno" not in text and "Traceback" not in text, text
    return text.strip().splitlines()[-1]  # (before it, only a 'wrote --out' line)


@pytest.fixture()
def data(tmp_path):
    X, _, _ = privirt.simulate_rasch(200, 4, seed=3)
    path = tmp_path / "d.csv"
    pd.DataFrame(X, columns=[f"q{i}" for i in range(4)]).to_csv(path, index_label="person")
    ledger = tmp_path / "L.db"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-5"]) == 0
    return path, ledger


def _estimate(data, *more: str) -> list[str]:
    path, ledger = data
    return ["estimate", str(path), "--epsilon", "0.5", "--ledger", str(ledger), "--n-boot", "0", *more]


def test_a_paid_estimate_whose_stdout_fails_says_so_and_where_it_is(data, tmp_path):
    out = tmp_path / "r.json"
    line = _fails(*_estimate(data, "--out", str(out)))
    assert line.startswith(f"privirt: error: could not print the result on stdout ({NO_SPACE}); "
                           f"it was written to --out {out}")
    assert "the privacy budget WAS spent" in line and out.is_file()
    assert len(Ledger(data[1]).spends()) == 1


def test_stdout_and_out_both_failing_are_both_named(data, tmp_path, monkeypatch):
    fill_disk(monkeypatch)
    out = tmp_path / "r.json"
    line = _fails(*_estimate(data, "--out", str(out)))
    assert f"could not print the result on stdout ({NO_SPACE}), nor write --out {out} ({NO_SPACE})" in line
    assert "the result is lost" in line and "the privacy budget WAS spent" in line and not out.exists()


def test_a_non_private_estimate_whose_stdout_fails_is_one_line(data):
    line = _fails("estimate", str(data[0]), "--method", "spectral")
    assert line.startswith(f"privirt: error: could not print the result on stdout ({NO_SPACE})")


def _state(tmp_path) -> str:
    pytest.importorskip("fastapi")
    from privirt.serve.store import open_store

    state = str(tmp_path / "st.db")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["serve", "init", state]) == 0
    open_store(state).add_dataset(name="d", epsilon=5.0, delta=1e-6, n_persons=2, items=["q"],
                                  missing="none", codes=np.zeros((2, 1), dtype=np.int8), source="test")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["serve", "analyst", "add", state, "bob", "--allowance", "d=0.2"]) == 0
    return state


def test_serve_changes_whose_stdout_fails_say_the_change_was_made(tmp_path):
    from privirt.serve.store import open_store

    state = _state(tmp_path)
    line = _fails("serve", "analyst", "allow", state, "bob", "--allowance", "d=1")
    assert line == (f"privirt: error: could not print the result on stdout ({NO_SPACE}); the allowances "
                    f"of 'bob' WERE set; see `privirt serve list {state}`")
    assert [a["epsilon"] for a in open_store(state).allowances() if a["analyst"] == "bob"] == [1.0]
    line = _fails("serve", "limits", state, "--max-releases", "3")
    assert "the limit WAS set" in line and open_store(state).max_releases() == 3
    line = _fails("serve", "analyst", "revoke", state, "bob")
    assert f"could not print the result on stdout ({NO_SPACE}); the key of 'bob' WAS revoked" in line
    line = _fails("serve", "list", state)  # nothing changed: the plain line
    assert line.startswith(f"privirt: error: could not print the result on stdout ({NO_SPACE})")


def _closed_stdout(*args: str, cwd) -> "subprocess.CompletedProcess":
    """``privirt ARGS >&-``: a process that starts with its stdout closed (sys.stdout is None)."""
    import subprocess
    import sys
    env = child_env()
    return subprocess.run([sys.executable, "-m", "privirt", *args], stdout=None, stderr=subprocess.PIPE,
                          text=True, cwd=cwd, env=env, timeout=300, preexec_fn=lambda: os.close(1))


def test_a_closed_stdout_is_one_line_where_a_result_is_lost(data, tmp_path):
    """With stdout closed (`>&-`) the flushes added for full disks met sys.stdout = None: a
    traceback and 'internal error' after a private spend.  A paid result with nowhere to go is
    one line saying so; one written to --out, and commands with nothing to lose, end quietly."""
    data, _ = data
    ledger = tmp_path / "L.sqlite"
    res = _closed_stdout("budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-5", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "" and ledger.exists()
    res = _closed_stdout("estimate", str(data), "--epsilon", "1", "--ledger", str(ledger), "--n-boot", "0",
                         "--no-progress", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert "could not print the result on stdout (stdout is closed); the result is lost" in res.stderr
    assert "WAS spent" in res.stderr and len(Ledger(ledger).spends()) == 1
    out = tmp_path / "o.csv"
    res = _closed_stdout("estimate", str(data), "--epsilon", "1", "--ledger", str(ledger), "--n-boot", "0",
                         "--no-progress", "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0 and "Traceback" not in res.stderr and out.exists(), res.stderr
    state = tmp_path / "s.db"
    assert _closed_stdout("serve", "init", str(state), cwd=tmp_path).returncode == 0
    res = _closed_stdout("serve", "curator-key", str(state), cwd=tmp_path)  # a key shown once: lost, said
    assert res.returncode == 2 and "could not be shown (stdout is closed)" in res.stderr, res.stderr


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_a_sampler_whose_out_and_stdout_both_fail_names_both(data, tmp_path, monkeypatch, command):
    """The summary's fallback print went to a full stdout too: its failure reached main() as a bare
    'could not print the result on stdout ... the result is lost', dropping the --out failure."""
    fill_disk(monkeypatch)
    path, _ = data
    out = tmp_path / "s.csv"
    line = _fails(command, str(path), "--iter", "40", "--warmup", "20", "--seed", "1", "--no-progress",
                  "--out", str(out))
    assert f"nor write --out {out} ({NO_SPACE})" in line and "the result is lost" in line, line
    assert not out.exists()

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

NO_SPACE = os.strerror(errno.ENOSPC)


class _FullStdout(io.StringIO):
    """stdout on a full disk."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, NO_SPACE)


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
    import privirt._files

    class _FullDisk:
        def __getattr__(self, name: str):
            return getattr(os, name)

        @staticmethod
        def fsync(fd: int) -> None:
            raise OSError(errno.ENOSPC, NO_SPACE)

    monkeypatch.setattr(privirt._files, "os", _FullDisk())
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

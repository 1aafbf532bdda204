"""A key shown once that cannot be shown (stdout on a full disk, a closed pipe): the change is
committed, so the one error line says so and how to get a key; the key never goes to stderr."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("fastapi")

from ._serve import cli, env  # noqa: E402

from ._full import NO_SPACE  # noqa: E402
from ._full import FullStdout as _FullStdout  # noqa: E402


def _state(tmp_path) -> str:
    from privirt.serve.store import open_store

    state = str(tmp_path / "st.db")
    cli("serve", "init", state)
    open_store(state).add_dataset(name="d", epsilon=5.0, delta=1e-6, n_persons=2, items=["q"],
                                  missing="none", codes=np.zeros((2, 1), dtype=np.int8), source="test")
    return state


def _fails(*args: str) -> str:
    from privirt.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(_FullStdout()), contextlib.redirect_stderr(err):
        assert main(list(args)) != 0
    return err.getvalue()


def test_analyst_add_with_a_full_stdout_says_the_analyst_was_added(tmp_path):
    state = _state(tmp_path)
    err = _fails("serve", "analyst", "add", state, "bob", "--allowance", "d=0.2")
    assert err == (f"privirt: error: analyst 'bob' was added but the key could not be shown ({NO_SPACE}); "
                   f"give them a new key with `privirt serve analyst new-key {state} bob`\n")
    assert "bob" in cli("serve", "list", state).stdout
    # what the line says works: a new key for the same record
    assert cli("serve", "analyst", "new-key", state, "bob").stdout.strip().splitlines()[-1]


def test_new_key_and_curator_key_with_a_full_stdout(tmp_path):
    state = _state(tmp_path)
    cli("serve", "analyst", "add", state, "bob", "--allowance", "d=0.2")
    err = _fails("serve", "analyst", "new-key", state, "bob")
    assert err.startswith("privirt: error: the new key of 'bob' could not be shown") and err.count("\n") == 1
    assert f"`privirt serve analyst new-key {state} bob`" in err
    err = _fails("serve", "curator-key", state)
    assert err == ("privirt: error: the old curator keys were revoked and the new one could not be shown "
                   f"({NO_SPACE}); run `privirt serve curator-key {state}` again\n")


def test_a_buffered_stdout_on_a_full_device_fails_before_exit(tmp_path):
    # block-buffered, print() succeeded and the key was lost at exit: status 0 (or 120 with
    # "Exception ignored"); now the key is flushed at once and the failure reported
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    state = _state(tmp_path)
    environ = {k: v for k, v in env().items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "privirt", "serve", "analyst", "add", state, "bob",
                               "--allowance", "d=0.2"], stdout=full, stderr=subprocess.PIPE, text=True,
                              env=environ, timeout=60)
    assert proc.returncode not in (0, 120), proc.stderr
    assert proc.stderr.startswith("privirt: error: analyst 'bob' was added") and proc.stderr.count("\n") == 1

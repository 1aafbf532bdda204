"""The files that hold raw responses, key hashes or the spend history are created private
(mode 0600 whatever the umask): the service's state, its backups and their SQLite side files,
and a ledger; an existing state others can read is named in a warning at ``serve run``; an
``init`` that fails leaves no file behind."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from ._serve import cli

posix_modes = pytest.mark.skipif(os.name != "posix", reason="needs POSIX file modes")


@pytest.fixture
def umask_022():
    """The common default umask, under which a file created 0666 is readable by everyone."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@posix_modes
def test_a_new_state_its_side_files_and_a_backup_are_private(tmp_path, umask_022):
    state, copy = tmp_path / "s.db", tmp_path / "copy.db"
    cli("serve", "init", state)
    assert _mode(state) == 0o600
    con = sqlite3.connect(state)  # a write while it is open: the WAL and its index exist
    try:
        con.execute("INSERT INTO meta (key, value) VALUES ('test', 'x')")
        con.commit()
        sides = [state.with_name(state.name + s) for s in ("-wal", "-shm")]
        assert [p for p in sides if p.exists()], "no side file was created"
        assert {p.name: _mode(p) for p in sides if p.exists()} == {p.name: 0o600 for p in sides if p.exists()}
    finally:
        con.close()
    cli("serve", "backup", state, copy)
    assert _mode(copy) == 0o600


@posix_modes
def test_a_new_ledger_is_private(tmp_path, umask_022):
    from privirt import Ledger

    path = tmp_path / "b.ledger"
    Ledger(path, epsilon=1.0, delta=1e-6)
    assert _mode(path) == 0o600
    cli("budget", "init", tmp_path / "c.ledger", "--epsilon", "1", "--delta", "1e-6")
    assert _mode(tmp_path / "c.ledger") == 0o600


@posix_modes
def test_serve_run_warns_in_one_line_about_a_state_others_can_read(tmp_path, monkeypatch):
    pytest.importorskip("fastapi")
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    state = tmp_path / "s.db"
    cli("serve", "init", state)
    os.chmod(state, 0o644)
    proc = cli("serve", "run", state, "--port", "1")  # (a port nothing listens on is not checked first)
    warnings = [line for line in proc.stderr.splitlines() if "readable by other users" in line]
    assert len(warnings) == 1 and f"chmod 600 {state}" in warnings[0], proc.stderr
    assert _mode(state) == 0o644  # named, not changed
    os.chmod(state, 0o600)
    assert "readable by other users" not in cli("serve", "run", state, "--port", "1").stderr


def test_an_init_that_fails_before_its_commit_leaves_no_file(tmp_path, monkeypatch):
    from privirt.serve import _admin, store

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    state = tmp_path / "s.db"
    with monkeypatch.context() as m:
        for module in (store, _admin):  # (the schema is written by one of them, the one that logs 'init')
            m.setattr(module, "log_event", full, raising=False)
        proc = cli("serve", "init", state, check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "full" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    cli("serve", "init", state)  # a second init works
    cli("serve", "list", state)

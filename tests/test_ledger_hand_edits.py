"""A ledger edited by hand (sqlite3) with values SQLite's CHECK constraints let through — text,
an infinite cost, an infinite budget — is a damaged ledger: one line for the CLI, a
:class:`~privirt.exceptions.LedgerError` for the library, nothing spent; never a traceback, an
off-topic message, or an unlimited budget."""

from __future__ import annotations

import contextlib
import io
import sqlite3
from pathlib import Path

import pytest

from privirt.cli import main
from privirt.exceptions import LedgerError
from privirt.private.accounting import PrivacyCost
from privirt.private.ledger import Ledger

LSAT6 = Path(__file__).resolve().parents[1] / "datasets" / "lsat6.csv"

EDITS = [
    "UPDATE spends SET rho = 9e999",
    "UPDATE budget SET epsilon = 9e999",
    "UPDATE budget SET epsilon = 2e6",
    "UPDATE spends SET rho = 'abc'",
    "UPDATE spends SET epsilon = 9e999",
    "UPDATE spends SET delta = 'x'",
    "UPDATE spends SET asked_epsilon = 'zz'",
    "UPDATE spends SET asked_delta = 9e999",
]


def _cli(*args: object) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue()


def _n_spends(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT COUNT(*) FROM spends").fetchone()[0]
    finally:
        con.close()


@pytest.fixture(params=EDITS)
def edited(request, tmp_path) -> Path:
    """A ledger (ε = 10) with two spends of ρ = 0.3, then edited by hand."""
    path = tmp_path / "b.ledger"
    ledger = Ledger(path, epsilon=10.0, delta=1e-6)
    for _ in range(2):
        ledger.spend(PrivacyCost(rho=0.3, epsilon=0.0, delta=0.0), mechanism="test", asked=(0.5, 1e-6))
    con = sqlite3.connect(path)
    con.execute(request.param)
    con.commit()
    con.close()
    return path


def _damaged_line(code: int, err: str, path: Path) -> None:
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"the ledger {path} is damaged" in err and "nothing was spent" in err, err


def test_budget_show_says_the_ledger_is_damaged(edited):
    _damaged_line(*_cli("budget", "show", edited), edited)


def test_estimate_with_the_ledger_is_refused_and_spends_nothing(edited):
    code, err = _cli("estimate", LSAT6, "--weights-col", "frequency", "--epsilon", "0.5", "--ledger", edited,
                     "--method", "spectral")
    _damaged_line(code, err, edited)
    assert _n_spends(edited) == 2


def test_the_python_ledger_raises_the_damaged_ledger_error(edited):
    with pytest.raises(LedgerError, match="is damaged"):
        ledger = Ledger(edited)
        ledger.spend(PrivacyCost(rho=0.01, epsilon=0.0, delta=0.0), mechanism="test")
    assert _n_spends(edited) == 2
    with pytest.raises(LedgerError, match="is damaged"):
        Ledger(edited).account()

"""The ledger's file and what it stores: bound to one file whatever the working folder, refused
when written by a newer privirt or for another neighbouring relation, and paths too long."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from privirt.exceptions import BudgetExceeded
from privirt.private.accounting import PrivacyCost
from privirt.private.ledger import Ledger


def test_a_ledger_opened_by_a_relative_path_stays_bound_to_its_file(tmp_path, monkeypatch):
    # after os.chdir the object must debit the file it opened, not another folder's ledger of
    # the same name (the second 0.9 was accepted against B's file: A's data got 1.8 of 1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "b")
    Ledger("budget.ledger", epsilon=1.0, delta=1e-5)
    monkeypatch.chdir(tmp_path / "a")
    led = Ledger("budget.ledger", epsilon=1.0, delta=1e-5)
    led.spend(PrivacyCost(epsilon=0.9), mechanism="laplace")
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(BudgetExceeded):
        led.spend(PrivacyCost(epsilon=0.9), mechanism="laplace")
    assert led.spent().epsilon == pytest.approx(0.9)
    assert len(Ledger(tmp_path / "a" / "budget.ledger").spends()) == 1
    assert len(Ledger(tmp_path / "b" / "budget.ledger").spends()) == 0
    assert str(led.path) == "budget.ledger"  # printed as given


def test_a_ledger_opened_through_a_symlink_stays_bound_to_its_file(tmp_path):
    first = Ledger(tmp_path / "first.ledger", epsilon=1.0, delta=1e-5)
    Ledger(tmp_path / "second.ledger", epsilon=1.0, delta=1e-5)
    link = tmp_path / "current.ledger"
    link.symlink_to(tmp_path / "first.ledger")
    led = Ledger(link)
    link.unlink()
    link.symlink_to(tmp_path / "second.ledger")
    led.spend(PrivacyCost(epsilon=0.5), mechanism="laplace")
    assert len(first.spends()) == 1 and len(Ledger(tmp_path / "second.ledger").spends()) == 0


def test_the_service_state_stays_bound_to_its_file(tmp_path, monkeypatch):
    from privirt.serve._backends import _backend

    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    b = _backend("state.db")
    monkeypatch.chdir(tmp_path)
    with b.read() as con:  # (a connection opened after the chdir, as a new thread's would be)
        con.execute("CREATE TABLE t (x)")
    b.close()
    assert (tmp_path / "a" / "state.db").exists() and not (tmp_path / "state.db").exists()
    assert b.describe == "state.db"

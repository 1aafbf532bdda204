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


def _set_budget_row(path: Path, column: str, value) -> None:
    with sqlite3.connect(path) as con:
        con.execute(f"UPDATE budget SET {column} = ?", (value,))
    con.close()


@pytest.mark.parametrize("column, value, words", [
    ("schema_version", 99, "was written by a newer privirt (schema 99"),
    ("relation", "add or remove one person", "is for the neighbouring relation 'add or remove one person'"),
])
def test_a_newer_or_foreign_ledger_is_refused_with_nothing_spent(tmp_path, capsys, column, value, words):
    from privirt.cli import main
    from privirt.exceptions import LedgerError

    path = tmp_path / "survey.ledger"
    led = Ledger(path, epsilon=1.0, delta=1e-5)
    _set_budget_row(path, column, value)
    before = path.read_bytes()
    for open_it in (lambda: Ledger(path), lambda: Ledger(path, epsilon=1.0, delta=1e-5)):
        with pytest.raises(LedgerError, match="nothing was spent") as info:
            open_it()
        assert words in str(info.value) and "\n" not in str(info.value)
    # an object opened before the file changed refuses its debit too
    with pytest.raises(LedgerError, match=words.replace("(", r"\(")):
        led.spend(PrivacyCost(epsilon=0.1), mechanism="laplace")
    assert main(["budget", "show", str(path)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("privirt: error:") and words in err and len(err.splitlines()) == 1
    assert path.read_bytes() == before


def test_remaining_amounts_are_the_exact_remainder_not_the_tolerance(tmp_path, monkeypatch):
    # remaining_epsilon() said 0.7500000000010001 after 0.25 of 1: the 1e-12 acceptance
    # tolerance handed out as budget, and spending it showed "spent ε = 1.00001"
    import privirt.private.ledger as ledger_module
    from privirt.private._sums import SpendSums

    led = Ledger(tmp_path / "scores.ledger", epsilon=1.0, delta=1e-5)
    assert led.spend(PrivacyCost(epsilon=0.25), mechanism="laplace") == 1
    assert led.remaining_epsilon() == 0.75
    led.spend(PrivacyCost(epsilon=led.remaining_epsilon()), mechanism="laplace")
    assert led.spent().epsilon <= 1.0 and led.remaining_epsilon() == 0.0
    for seed in range(4_300_000, 4_300_020):  # any state: spending what remains stays within budget
        rng = __import__("numpy").random.default_rng(seed)
        sums = SpendSums.of([(float(r), float(e), 0.0) for r, e in rng.random((3, 2)) * [0.001, 0.1]])
        eps, dlt = float(rng.uniform(0.5, 3)), 1e-6
        left = sums.largest_pure_fit(eps, dlt)
        assert left > 0 and sums.plus((0.0, left, 0.0)).total(dlt) <= eps
    # the Gaussian remainder: its ρ (seen through an identity conversion) fits the exact budget
    gauss = Ledger(tmp_path / "gauss.ledger", epsilon=1.0, delta=1e-5)
    gauss.spend(PrivacyCost(epsilon=0.25), mechanism="laplace")
    monkeypatch.setattr(ledger_module, "zcdp_to_approx_dp", lambda rho, delta: rho)
    gauss.spend(PrivacyCost(rho=gauss.remaining_gaussian_epsilon()), mechanism="gaussian")
    assert gauss.spent().epsilon <= 1.0


def test_the_ledger_docstring_example_prints_what_it_shows(tmp_path, monkeypatch):
    # skipped by doctest (it writes a file): run here, in an empty folder, without the skips
    import doctest

    monkeypatch.chdir(tmp_path)
    text = Ledger.__doc__.replace("# doctest: +SKIP", "")
    test = doctest.DocTestParser().get_doctest(text, {"Ledger": Ledger, "PrivacyCost": PrivacyCost},
                                               "Ledger", None, 0)
    runner = doctest.DocTestRunner(verbose=False)
    result = runner.run(test)
    assert result.attempted == 3 and result.failed == 0


def test_a_ledger_name_too_long_is_one_line_with_nothing_spent(tmp_path, capsys):
    from privirt.cli import main
    from privirt.exceptions import LedgerError

    path = tmp_path / ("x" * 300 + ".ledger")
    for make, verb in ((lambda: Ledger(path, epsilon=1.0, delta=1e-5), "create"), (lambda: Ledger(path), "open")):
        with pytest.raises(LedgerError, match=f"cannot {verb} the ledger .*nothing was spent — check the path"):
            make()
    for argv in (["budget", "init", str(path), "--epsilon", "1", "--delta", "1e-5"], ["budget", "show", str(path)]):
        assert main(argv) != 0
        err = capsys.readouterr().err.strip()
        assert err.startswith("privirt: error: cannot") and "nothing was spent" in err and len(err.splitlines()) == 1
    assert os.listdir(tmp_path) == []


def test_a_warning_turned_into_an_error_after_the_debit_says_the_budget_was_spent(tmp_path):
    import warnings

    led = Ledger(tmp_path / "rr.ledger", epsilon=1.0, delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="used the last of ledger") as info:
            led.spend(PrivacyCost(epsilon=0.1, delta=1e-5), mechanism="shuffled rr")
    spends = info.value.privirt_spends
    assert [(s.spend_id, s.certain) for s in spends] == [(1, True)]
    assert any("WAS spent" in n and "spend #1" in n for n in info.value.__notes__)
    assert len(led.spends()) == 1  # the debit stands, and the exception says so


def test_the_budget_is_printed_exactly_and_spent_amounts_rounded_up(tmp_path, capsys):
    # ':g' printed the budget ε 0.1234567 as 0.123457 (above it) and stated the total spent
    # "at δ = 2e-06", below the ledger's δ of 2.0000004e-06
    from privirt.cli import main

    path = tmp_path / "d.ledger"
    assert main(["budget", "init", str(path), "--epsilon", "0.1234567", "--delta", "2.0000004e-6"]) == 0
    assert "budget ε = 0.1234567, δ = 2.0000004e-06 " in capsys.readouterr().out
    led = Ledger(path)
    led.spend(PrivacyCost(rho=1e-4), mechanism="g")
    text = led.summary()
    assert "budget: ε = 0.1234567, δ = 2.0000004e-06" in text
    assert "at δ = 2e-06" not in text and text.count("at δ = 2.0000004e-06") == 2
    with pytest.raises(BudgetExceeded) as info:
        led.spend(PrivacyCost(epsilon=1.0), mechanism="laplace")
    assert "at the ledger's δ=2.0000004e-06, against a budget of ε=0.1234567" in str(info.value)
    from mechanisms.measures import format_exact

    assert [format_exact(x) for x in (1.0, 1e-5, 0.5, 0.1 + 0.2)] == ["1", "1e-05", "0.5", "0.30000000000000004"]


def test_a_ledger_whose_budget_row_was_deleted_is_damaged_not_newer(tmp_path):
    # an open Ledger's debit said "written by a newer privirt (schema None) ... upgrade privirt"
    # once the budget row was gone: upgrading cannot repair that file
    from privirt.exceptions import LedgerError

    path = tmp_path / "a.ledger"
    led = Ledger(path, epsilon=1.0, delta=1e-5)
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM budget")
    con.close()
    with pytest.raises(LedgerError, match="no budget row") as info:
        led.spend(PrivacyCost(epsilon=0.1), mechanism="laplace")
    assert "newer privirt" not in str(info.value) and "\n" not in str(info.value)
    assert "nothing was spent" in str(info.value)
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT COUNT(*) FROM spends").fetchone()[0] == 0
    con.close()


def test_the_ledger_folder_is_checked_as_given_not_as_resolved_by_text(tmp_path, monkeypatch, capsys):
    # `budget init nosuchdir/../b.ledger` created ./b.ledger (realpath collapses "nosuchdir/.."
    # by text), and a regular file in place of the folder got "does not exist ... mkdir -p"
    from privirt.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"folder nosuchdir/\.\. does not exist; create it first"):
        Ledger("nosuchdir/../b.ledger", epsilon=1.0, delta=1e-5)
    assert main(["budget", "init", "nosuchdir/../b.ledger", "--epsilon", "1", "--delta", "1e-5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privirt: error: folder nosuchdir/.. does not exist") and len(err.splitlines()) == 1
    (tmp_path / "afile").write_text("not a folder")
    for given in ("afile/x.ledger", "afile/sub/x.ledger"):
        with pytest.raises(NotADirectoryError, match="afile is a file, not a folder") as info:
            Ledger(given, epsilon=1.0, delta=1e-5)
        assert "mkdir" not in str(info.value)
        assert main(["budget", "init", given, "--epsilon", "1", "--delta", "1e-5"]) == 2
        err = capsys.readouterr().err.strip()
        assert err == "privirt: error: afile is a file, not a folder; choose another path for the ledger"
    assert sorted(os.listdir(tmp_path)) == ["afile"]  # nothing written


def test_the_last_of_the_delta_warning_states_the_ledger_delta_exactly(tmp_path):
    # it said "δ=2e-06" for a ledger of δ = 2.0000004e-06 (:.3g), below the real value
    import warnings

    led = Ledger(tmp_path / "b.ledger", epsilon=1.0, delta=2.0000004e-06)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        led.spend(PrivacyCost(epsilon=0.1, delta=2.0000004e-06), mechanism="shuffled rr")
    text = [str(w.message) for w in caught if "last of ledger" in str(w.message)]
    assert len(text) == 1 and "b.ledger's δ=2.0000004e-06:" in text[0]


@pytest.mark.parametrize("new_epsilon", [1.0, 10.0])
def test_a_ledger_object_refuses_to_spend_on_a_file_that_replaced_its_ledger(tmp_path, new_epsilon):
    """An object kept the budget it read when opened: after the file was replaced by another
    ledger (ε = 1), a spend of 3 was checked against ε = 10 and written into the new file,
    three times over its budget.  The same budget made anew is another ledger too."""
    from privirt import Ledger
    from privirt.exceptions import LedgerError
    from privirt.private.accounting import PrivacyCost

    path = tmp_path / "s.ledger"
    old = Ledger(path, epsilon=10.0, delta=1e-5)
    path.unlink()
    Ledger(path, epsilon=new_epsilon, delta=1e-5)
    with pytest.raises(LedgerError, match=r"is not the one this object opened .*nothing was spent"):
        old.spend(PrivacyCost(epsilon=3.0), mechanism="laplace")
    assert len(Ledger(path).spends()) == 0
    fresh = Ledger(path)  # opened again: spends as usual
    fresh.spend(PrivacyCost(epsilon=0.5), mechanism="laplace")
    assert len(Ledger(path).spends()) == 1

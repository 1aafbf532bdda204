"""The ledger's failure modes, as a user meets them: a damaged or foreign file, a missing folder,
an interrupt or an error after the debit, δ spent by shuffled randomized response, and the
numbers of a refusal and of ``budget show``."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.private.accounting import PrivacyCost
from privirt.cli import main
from privirt.exceptions import LedgerError, PrivirtError
from privirt.private.ledger import DEFAULT_DELTA_SHARE, Ledger
from tests._env import child_env

ROOT = Path(__file__).resolve().parents[1]
_rng = np.random.default_rng(5)
X = (_rng.random((300, 6)) < 0.6).astype(float)


@pytest.fixture()
def csv_file(tmp_path) -> Path:
    path = tmp_path / "x.csv"
    pd.DataFrame(X.astype(int), columns=[f"i{j}" for j in range(6)]).to_csv(path, index=False)
    return path


def _one_line(err: str) -> str:
    lines = [l for l in err.strip().splitlines() if l]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- item 6: a damaged ledger -------------------------------------------------------------
def _ledger_with_spends(path: Path) -> Path:
    led = Ledger(path, epsilon=100.0, delta=1e-5)
    for _ in range(40):  # several pages of spends
        led.spend(PrivacyCost(epsilon=0.01), mechanism="laplace", note="x" * 300)
    return path


def _damage_page(path: Path) -> None:
    b = bytearray(path.read_bytes())
    start = len(b) - 4096  # the last page: spends rows
    b[start:start + 200] = b"\xab" * 200
    path.write_bytes(bytes(b))


def _run_sql(path: Path, statement: str) -> None:
    con = sqlite3.connect(path)
    con.execute(statement)
    con.commit()
    con.close()


def _drop_spends(path: Path) -> None:
    _run_sql(path, "DROP TABLE spends")


def _not_sqlite(path: Path) -> None:
    path.write_bytes(b"these are my notes, not a database\n" * 200)


def _schema_not_utf8(path: Path) -> None:
    """One byte of the stored schema text made invalid UTF-8: SQLite's "malformed database schema"
    message quotes it, which Python's sqlite3 cannot decode (a raw UnicodeDecodeError before)."""
    b = bytearray(path.read_bytes())
    at = b.find(b"CREATE TABLE budget")
    assert at >= 0
    b[at + 7] = 0xFF
    path.write_bytes(bytes(b))


DAMAGE = {"malformed page": _damage_page, "dropped table": _drop_spends, "not SQLite": _not_sqlite,
          "schema not UTF-8": _schema_not_utf8}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_ledger_is_a_privirt_error_naming_the_file(tmp_path, kind):
    path = _ledger_with_spends(tmp_path / "d.ledger")
    DAMAGE[kind](path)
    before = path.read_bytes()
    with pytest.raises(LedgerError) as info:
        Ledger(path)
    msg = str(info.value)
    assert isinstance(info.value, PrivirtError)
    assert str(path) in msg and "nothing was spent" in msg and "backup" in msg and "\n" not in msg
    with pytest.raises(LedgerError):  # through a private call: refused before any release
        privirt.release_counts(X, epsilon=1.0, ledger=str(path))
    assert path.read_bytes() == before


def _truncate(path: Path) -> None:
    path.write_bytes(b"")


def _delete_budget(path: Path) -> None:
    _run_sql(path, "DELETE FROM budget")


def _drop_budget(path: Path) -> None:
    _run_sql(path, "DROP TABLE budget")


@pytest.mark.parametrize("damage", [_truncate, _drop_spends, _delete_budget, _drop_budget, _damage_page,
                                    _schema_not_utf8])
def test_create_or_open_never_gives_a_damaged_ledger_a_fresh_budget(tmp_path, damage):
    """``Ledger(path, epsilon=, delta=)`` (create, or open the same budget) on a truncated file, a
    dropped spends table or a deleted budget row re-created the schema and the budget row: the
    spends were gone (remaining = the full budget), or the budget took the new ε. Refused now,
    the file untouched, as ``Ledger(path)`` refuses it."""
    path = _ledger_with_spends(tmp_path / "d.ledger")
    damage(path)
    before = path.read_bytes()
    for eps in (100.0, 500.0):
        with pytest.raises(LedgerError, match="damaged"):
            Ledger(path, epsilon=eps, delta=1e-5)
    assert path.read_bytes() == before


def test_a_ledger_whose_file_went_away_leaves_no_empty_file(tmp_path):
    """Opening the file for a spend no longer creates it: a held ledger whose file was moved
    used to leave an empty file at its path, which a later create-or-open took as new."""
    path = _ledger_with_spends(tmp_path / "d.ledger")
    led = Ledger(path)
    path.rename(tmp_path / "moved.ledger")
    with pytest.raises(LedgerError, match="cannot open the ledger"):
        led.spend(PrivacyCost(epsilon=0.01), mechanism="laplace")
    assert not path.exists()
    fresh = Ledger(tmp_path / "new.ledger", epsilon=1.0, delta=1e-6)  # a new path is still created
    assert fresh.remaining_epsilon() == pytest.approx(1.0)


def test_ledger_damaged_after_it_was_opened_refuses_the_debit(tmp_path):
    path = _ledger_with_spends(tmp_path / "d.ledger")
    led = Ledger(path)
    _drop_spends(path)
    with pytest.raises(LedgerError, match="no such table: spends.*nothing was spent"):
        privirt.release_counts(X, epsilon=1.0, ledger=led)
    for method in (led.spends, led.spent, led.summary, led.remaining_epsilon):
        with pytest.raises(LedgerError, match=str(path.name)):
            method()


def test_ledger_whose_schema_text_went_bad_after_it_was_opened_refuses_every_use(tmp_path):
    path = _ledger_with_spends(tmp_path / "d.ledger")
    led = Ledger(path)
    _schema_not_utf8(path)
    before = path.read_bytes()
    uses = (led.spends, led.spent, lambda: led.would_exceed(PrivacyCost(epsilon=0.1)),
            lambda: privirt.release_counts(X, epsilon=1.0, ledger=led))
    for use in uses:
        with pytest.raises(LedgerError, match=f"{path.name} is damaged.*malformed database schema.*backup"):
            use()
    assert path.read_bytes() == before


def test_a_spend_note_that_is_not_utf8_is_a_damaged_ledger(tmp_path, capsys):
    """A note whose stored bytes are not UTF-8 said "could not be used (Could not decode to UTF-8 column
    'note' ...); fix the cause (disk space, file system)", advice that cannot help."""
    path = tmp_path / "n.ledger"
    Ledger(path, epsilon=1.0, delta=1e-5).spend(PrivacyCost(epsilon=0.1), mechanism="laplace", note="marker-note")
    raw = bytearray(path.read_bytes())
    raw[raw.find(b"marker-note")] = 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(LedgerError, match=r"n\.ledger is damaged.*Could not decode.*backup"):
        Ledger(path).spends()
    assert main(["budget", "show", str(path)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "is damaged" in line and "disk space" not in line
    assert path.read_bytes() == bytes(raw)


def test_a_note_utf8_cannot_encode_is_stored_escaped(tmp_path):
    """A note with a lone surrogate (a file name's undecodable byte, as os.fsdecode gives it)
    raised a raw UnicodeEncodeError ("surrogates not allowed") and nothing was spent; the spend
    now succeeds with the character escaped."""
    led = Ledger(tmp_path / "u.ledger", epsilon=5.0, delta=1e-5)
    led.spend(PrivacyCost(epsilon=0.1), mechanism="laplace", note="direct \udcff")
    privirt.release_totals(X, epsilon=0.5, ledger=led, note="bad \udcff")
    assert list(led.spends()["note"]) == ["direct \\udcff", "bad \\udcff"]


def test_a_service_debit_note_utf8_cannot_encode_is_stored_escaped(tmp_path):
    """The service's state stores a debit's note too: a lone surrogate raised UnicodeEncodeError."""
    pytest.importorskip("fastapi")
    from privirt.serve.store import init_store

    store = init_store(str(tmp_path / "s.db"))
    did = store.add_dataset(name="d", epsilon=1.0, delta=1e-6, n_persons=3, items=["a", "b"],
                            missing="complete", codes=np.zeros((3, 2), dtype=np.int8), source="test")
    aid = store.authenticate(store.add_analyst("a", {"d": (1.0, 1e-6)}), "analyst").id
    store.debit(analyst_id=aid, dataset_id=did, cost=PrivacyCost(epsilon=0.1), mechanism="m", endpoint="e",
                params={}, idem_key=None, note="bad \udcff")
    with sqlite3.connect(tmp_path / "s.db") as con:
        assert con.execute("SELECT note FROM spends").fetchall() == [("bad \\udcff",)]
    # and a data set's source (`privirt serve dataset add` stores the file's name): it raised too
    store.add_dataset(name="e", epsilon=1.0, delta=1e-6, n_persons=3, items=["a", "b"], missing="complete",
                      codes=np.zeros((3, 2), dtype=np.int8), source="bad\udcffname.csv")
    with sqlite3.connect(tmp_path / "s.db") as con:
        assert con.execute("SELECT source FROM datasets WHERE name = 'e'").fetchall() == [("bad\\udcffname.csv",)]


def test_cli_data_file_name_not_utf8_is_spent_with_an_escaped_note(tmp_path, capsys):
    """``privirt estimate $'bad\\xffname.csv' --ledger L`` failed with "'utf-8' codec can't encode
    character '\\udcff' ..." (nothing spent): the spend's note names the file; it now runs."""
    name = os.fsdecode(b"bad\xffname.csv")
    try:
        data = tmp_path / name
        pd.DataFrame(X.astype(int), columns=[f"i{j}" for j in range(6)]).to_csv(data, index=False)
    except (OSError, UnicodeEncodeError):  # pragma: no cover - a file system that takes no such name
        pytest.skip("this file system does not take a file name with the byte 0xff")
    path = tmp_path / "s.ledger"
    Ledger(path, epsilon=5.0, delta=1e-5)
    assert main(["estimate", str(data), "--epsilon", "0.5", "--ledger", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "error" not in err and out
    notes = list(Ledger(path).spends()["note"])
    assert len(notes) == 1 and "bad\\udcffname.csv" in notes[0]


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_cli_damaged_ledger_is_one_line(tmp_path, capsys, csv_file, kind):
    path = _ledger_with_spends(tmp_path / "d.ledger")
    DAMAGE[kind](path)
    before = path.read_bytes()
    assert main(["budget", "show", str(path)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("privirt: error: ") and str(path) in line and "backup" in line
    assert main(["estimate", str(csv_file), "--epsilon", "1", "--ledger", str(path)]) == 2
    out, err = capsys.readouterr()
    assert str(path) in _one_line(err) and out == ""
    assert path.read_bytes() == before


# -- item 11: one rule for a missing folder ---------------------------------------------------
def test_missing_folder_is_refused_in_python_and_cli(tmp_path, capsys):
    target = tmp_path / "nodir" / "x.ledger"
    with pytest.raises(FileNotFoundError, match="nodir does not exist; create it first"):
        Ledger(target, epsilon=1.0, delta=1e-5)
    assert not target.parent.exists()
    assert main(["budget", "init", str(target), "--epsilon", "1", "--delta", "1e-5"]) == 2
    assert "nodir does not exist; create it first" in _one_line(capsys.readouterr().err)
    assert not target.parent.exists()
    target.parent.mkdir()
    assert Ledger(target, epsilon=1.0, delta=1e-5).epsilon == 1.0


def test_a_dangling_link_names_its_target_folder_not_its_own(tmp_path, capsys, monkeypatch):
    """A symbolic link to nowhere/x said "folder . does not exist; create it first (mkdir -p .)"."""
    import re

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    target = os.path.join("nowhere", "x")
    cases = {"sl.ledger": "nowhere", os.path.join("sub", "l.ledger"): os.path.join("sub", "nowhere")}
    for link, missing in cases.items():
        Path(link).symlink_to(target)
        said = f"{link} is a symbolic link to {target}, whose folder {missing} does not exist; create it or choose"
        with pytest.raises(FileNotFoundError, match="^" + re.escape(said)):
            Ledger(link, epsilon=1.0, delta=1e-5)
        assert main(["budget", "init", link, "--epsilon", "1", "--delta", "1e-5"]) == 2
        assert said in _one_line(capsys.readouterr().err)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["sl.ledger", "sub", *list(cases)[1:]]
    (tmp_path / "nowhere").mkdir()
    assert Ledger("sl.ledger", epsilon=1.0, delta=1e-5).created and (tmp_path / target).is_file()


# -- item 9: an interrupt or error after the debit says what was spent -------------------------
@pytest.mark.parametrize("raised", [RuntimeError("boom"), KeyboardInterrupt()])
def test_api_error_after_the_debit_carries_the_spend(tmp_path, monkeypatch, raised):
    import mechanisms

    led = Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)

    def fail(self, values):
        raise raised

    monkeypatch.setattr(mechanisms.DiscreteGaussian, "apply", fail)
    with pytest.raises(type(raised)) as info:
        privirt.private_spectral_estimate(X, epsilon=1.0, delta=1e-5, ledger=led, n_boot=0)
    exc = info.value
    (rec,) = exc.privirt_spends
    assert rec.spend_id == int(led.spends().index[0]) and rec.asked.epsilon == 1.0 and rec.cost.rho > 0
    notes = [n for n in exc.__notes__ if "WAS spent" in n]
    assert len(notes) == 1 and "asked ε=1, δ=1e-05" in notes[0] and str(led.path) in notes[0]


def test_api_error_before_the_debit_says_nothing_about_a_spend(tmp_path, monkeypatch):
    from privirt.private import measurements

    led = Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)

    def fail(*a, **k):
        raise RuntimeError("before")

    monkeypatch.setattr(measurements.CountsGaussian, "calibrate", classmethod(fail))
    with pytest.raises(RuntimeError) as info:
        privirt.private_spectral_estimate(X, epsilon=1.0, ledger=led)
    assert not getattr(info.value, "privirt_spends", None) and len(led.spends()) == 0


def test_totals_error_after_the_debit_carries_the_spend(tmp_path, monkeypatch):
    from privirt.private.measurements import TotalsGaussian

    led = Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)

    def fail(self, values, *, seed):
        raise KeyboardInterrupt

    monkeypatch.setattr(TotalsGaussian, "apply", fail)
    with pytest.raises(KeyboardInterrupt) as info:
        privirt.private_totals_estimate(X, epsilon=1.0, delta=1e-5, ledger=led)
    assert len(info.value.privirt_spends) == 1 and len(led.spends()) == 1


def test_interrupt_right_after_the_commit_is_reported(tmp_path, monkeypatch):
    """An interrupt between the commit and the bookkeeping: the row is looked up and reported."""
    import privirt.private.ledger as ledger_mod

    led = Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    real = ledger_mod._journal
    calls = []

    def interrupted_once(rec):
        calls.append(rec)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(rec)

    monkeypatch.setattr(ledger_mod, "_journal", interrupted_once)
    with pytest.raises(KeyboardInterrupt) as info:
        led.spend(PrivacyCost(epsilon=0.5), mechanism="laplace", asked=(0.5, 1e-5))
    (rec,) = info.value.privirt_spends
    assert rec.certain and rec.spend_id == 1 and len(led.spends()) == 1


def test_a_failing_call_reports_its_spend_whatever_other_threads_debit(tmp_path):
    """The journal was one deque of 4096 debits shared by all threads: another thread's 4200
    debits while a call ran pushed out its own, and its failure no longer said the budget was
    spent. Each thread now has its own journal; the report lists exactly the call's spends."""
    import threading

    from privirt.private.spends import Spend, _journal, reports_spends

    debited, others_done = threading.Event(), threading.Event()

    @reports_spends
    def call():
        _journal(Spend(tmp_path / "a.ledger", 7, PrivacyCost(epsilon=0.5), "mine"))
        debited.set()
        others_done.wait(30)
        raise MemoryError("failure after the debit")

    def others():
        debited.wait(30)
        for k in range(4200):
            _journal(Spend(tmp_path / "b.ledger", k + 1, PrivacyCost(epsilon=1e-6), "other"))
        others_done.set()

    caught = []

    def run():
        try:
            call()
        except MemoryError as exc:
            caught.append(exc)

    threads = [threading.Thread(target=run), threading.Thread(target=others)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    (exc,) = caught
    assert [(r.spend_id, r.mechanism) for r in getattr(exc, "privirt_spends", [])] == [(7, "mine")]
    assert any("WAS spent" in note and "spend #7" in note for note in exc.__notes__)


def test_cli_error_after_the_debit_is_one_line_with_the_spend(tmp_path, capsys, csv_file, monkeypatch):
    from privirt.cli import estimate

    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=5.0, delta=1e-5)

    def fail(*a, **k):
        raise OSError("No space left on device")

    monkeypatch.setattr(estimate, "show_result", fail)
    assert main(["estimate", str(csv_file), "--epsilon", "1", "--ledger", str(led)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "No space left on device" in line and "WAS spent" in line and "asked ε=1, δ=1e-05" in line
    assert str(led) in line and "spend #1" in line

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(estimate, "show_result", interrupt)
    assert main(["estimate", str(csv_file), "--epsilon", "1", "--ledger", str(led)]) == 130
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("privirt: interrupted; the privacy budget WAS spent") and "spend #2" in line

    def bug(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(estimate, "show_result", bug)
    assert main(["estimate", str(csv_file), "--epsilon", "1", "--ledger", str(led)]) == 1
    err = capsys.readouterr().err
    assert "ZeroDivisionError" in err and err.strip().splitlines()[-1].startswith(
        "privirt: error: internal error; the privacy budget WAS spent")
    assert len(Ledger(led).spends()) == 3


def test_cli_interrupt_before_any_debit_says_nothing_was_spent(tmp_path, capsys, csv_file, monkeypatch):
    from privirt.private import measurements

    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=5.0, delta=1e-5)

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(measurements.CountsGaussian, "calibrate", classmethod(interrupt))
    monkeypatch.setattr(measurements.TotalsGaussian, "calibrate", classmethod(interrupt))
    assert main(["estimate", str(csv_file), "--epsilon", "1", "--ledger", str(led)]) == 130
    assert _one_line(capsys.readouterr().err) == "privirt: interrupted (nothing was spent)"


def test_cli_interrupt_while_the_command_line_is_read_is_one_line(capsys, monkeypatch):
    """Ctrl-C in the first seconds (building the parser, its imports) was a traceback."""
    import privirt.cli as cli

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupt)
    assert cli.main(["estimate", "x.csv"]) == 130
    assert _one_line(capsys.readouterr().err) == "privirt: interrupted"


@pytest.mark.parametrize("via", ["cli", "api"])
def test_sigint_after_the_debit(tmp_path, csv_file, via):
    """A real SIGINT to a process that hangs where the noise is drawn (`privirt estimate`, or a
    script calling the API that prints what the KeyboardInterrupt carries)."""
    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=5.0, delta=1e-5)
    marker = tmp_path / "in_noise"
    if via == "cli":
        run = (f"from privirt.cli import main\n"
               f"sys.exit(main(['estimate', {str(csv_file)!r}, '--epsilon', '1', '--ledger', {str(led)!r}]))")
    else:
        run = (f"import privirt, pandas as pd\n"
               f"try:\n"
               f"    privirt.release_counts(pd.read_csv({str(csv_file)!r}), epsilon=1.0, delta=1e-5, "
               f"ledger={str(led)!r})\n"
               f"except KeyboardInterrupt as exc:\n"
               f"    print(exc.__notes__[-1], file=sys.stderr)\n"
               f"    sys.exit(130)")
    code = textwrap.dedent(f"""
        import sys, time
        import mechanisms
        def stuck(self, values):            # test-only hook: hang where noise is drawn
            open({str(marker)!r}, "w").write("x")
            for _ in range(1200):  # short sleeps: a SIGINT taken by another thread (BLAS) wakes no long sleep
                time.sleep(0.1)
        mechanisms.DiscreteGaussian.apply = stuck
        """) + run
    env = child_env()
    # a shell's background job (`pytest &`) ignores SIGINT, and so would the child (the hook's
    # sleep then ran out: the "flake" of the last sessions); give it the default, as a terminal does
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=str(ROOT), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    line = _one_line(err)
    prefix = "privirt: interrupted; " if via == "cli" else "privirt: "
    assert line.startswith(prefix + "the privacy budget WAS spent (asked ε=1, δ=1e-05; cost ρ="), line
    assert str(led) in line and "spend #1" in line
    assert len(Ledger(led).spends()) == 1


# -- item 10: δ of shuffled randomized response, refusals that add up, budget show -----------
def test_shuffled_rr_default_delta_is_a_share_of_the_ledger(tmp_path):
    led = Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    res = privirt.private_spectral_estimate(X, epsilon=1.0, mechanism="randomized_response",
                                            shuffle=True, ledger=led)
    assert res.privacy.delta == pytest.approx(DEFAULT_DELTA_SHARE * 1e-5)
    # a tenth of 1e-05 is 1e-06, not the float product 1.0000000000000002e-06 that the
    # statement and the summary rounded up to 1.01e-06
    assert res.privacy.delta <= 1e-6 and led.default_delta(True) == 1e-6
    assert str(res.privacy).splitlines()[0] == "privacy: (1, 1e-06)-differential privacy"
    assert "δ used by approximate-DP spends: 1e-06 of 1e-05 (9e-06 left" in led.summary()
    row = led.spends().iloc[0]
    assert row["asked_delta"] == pytest.approx(1e-6) and row["delta"] <= 1e-6 * (1 + 1e-12)
    # the Gaussian still has δ left to be converted at: not refused
    privirt.private_spectral_estimate(X, epsilon=1.0, delta=1e-5, ledger=led, n_boot=0)
    assert led.delta_spent() == pytest.approx(1e-6)


def test_cli_shuffled_rr_default_delta_leaves_room_for_gaussian(tmp_path, capsys, csv_file):
    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=5.0, delta=1e-5)
    base = ["estimate", str(csv_file), "--ledger", str(led), "--epsilon", "1"]
    assert main([*base, "--mechanism", "randomized_response", "--shuffle"]) == 0
    assert main(base) == 0  # a Gaussian release after it
    capsys.readouterr()
    assert Ledger(led).spends()["asked_delta"].tolist() == pytest.approx([1e-6, 1e-5])


def test_delta_exhausted_is_said_when_spent_and_when_refused(tmp_path, capsys, csv_file):
    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=5.0, delta=1e-5)
    base = ["estimate", str(csv_file), "--ledger", str(led), "--epsilon", "1"]
    assert main([*base, "--mechanism", "randomized_response", "--shuffle", "--delta", "1e-5"]) == 0
    err = capsys.readouterr().err
    assert "used the last of ledger l.ledger's δ=1e-05" in err and "refused" in err
    assert main(base) == 3
    line = _one_line(capsys.readouterr().err)
    assert "δ=1e-05 is used up by approximate-DP spends" in line and "ε=inf" not in line
    assert "pure-ε releases" in line and "nothing was spent" in line
    assert main(["budget", "show", str(led)]) == 0
    assert "exhausted: Gaussian releases are refused" in capsys.readouterr().out
    assert Ledger(led).remaining_gaussian_epsilon() == 0.0


def test_a_delta_larger_than_what_is_left_is_refused_in_those_words(tmp_path):
    led = Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    with pytest.raises(privirt.BudgetExceeded, match=r"δ=0.0001 is more than the ledger's δ left"):
        privirt.private_spectral_estimate(X, epsilon=1.0, delta=1e-4, mechanism="randomized_response",
                                          shuffle=True, ledger=led)
    assert len(led.spends()) == 0


def test_refusal_numbers_add_up(tmp_path):
    led = Ledger(tmp_path / "l.ledger", epsilon=1.2, delta=1e-5)
    privirt.release_counts(X, epsilon=0.9, delta=1e-5, ledger=led)
    with pytest.raises(privirt.BudgetExceeded) as info:
        privirt.release_counts(X, epsilon=0.9, delta=1e-5, ledger=led)
    msg = str(info.value)
    assert "asked ε=0.9, δ=1e-05" in msg and "composed under zCDP" in msg
    assert "one more Gaussian release of ε=" in msg and "nothing was spent" in msg
    # the stated Gaussian remainder is what one more Gaussian call can indeed ask for
    rem = led.remaining_gaussian_epsilon()
    assert 0 < rem < 0.9
    with pytest.raises(privirt.BudgetExceeded):
        privirt.release_counts(X, epsilon=rem * 1.01, delta=1e-5, ledger=led)
    privirt.release_counts(X, epsilon=rem * 0.99, delta=1e-5, ledger=led)
    assert led.spent().epsilon <= 1.2 * (1 + 1e-12)


def test_budget_show_lists_what_was_asked_beside_rho(tmp_path, capsys, csv_file):
    led = tmp_path / "l.ledger"
    Ledger(led, epsilon=5.0, delta=1e-5)
    assert main(["estimate", str(csv_file), "--ledger", str(led), "--epsilon", "0.7",
                 "--method", "spectral"]) == 0
    capsys.readouterr()
    assert main(["budget", "show", str(led)]) == 0
    out = capsys.readouterr().out
    row = [l for l in out.splitlines() if "discrete Gaussian counts" in l][0]
    assert "ε=0.7, δ=1e-05" in row and "ρ=" in row and "0.0" not in row.split("ρ=")[0].split("δ=1e-05")[1]
    assert "composed under zCDP" in out and "for one discrete Gaussian release" in out
    assert main(["budget", "show", str(led), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (spend,) = doc["spends"]
    assert spend["asked_epsilon"] == 0.7 and spend["asked_delta"] == 1e-5 and spend["rho"] > 0
    assert doc["remaining_gaussian_epsilon"] > 0 and doc["delta_spent"] == 0


_V1_SCHEMA = """
CREATE TABLE budget (id INTEGER PRIMARY KEY CHECK (id = 1), epsilon REAL NOT NULL, delta REAL NOT NULL,
    relation TEXT NOT NULL, created TEXT NOT NULL, schema_version INTEGER NOT NULL);
CREATE TABLE spends (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, mechanism TEXT NOT NULL,
    rho REAL NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL, note TEXT NOT NULL DEFAULT '');
INSERT INTO budget VALUES (1, 2.0, 1e-5, 'replace one person''s row', '2026-01-01T00:00:00', 1);
INSERT INTO spends (time, mechanism, rho, epsilon, delta, note)
    VALUES ('2026-01-01T00:00:01', 'discrete Gaussian counts', 0.01, 0.0, 0.0, 'old');
"""


def test_old_ledger_is_read_and_migrated_at_its_next_debit(tmp_path, capsys):
    path = tmp_path / "old.ledger"
    con = sqlite3.connect(path)
    con.executescript(_V1_SCHEMA)
    con.close()
    os.chmod(path, 0o444)  # reading an old ledger needs no write
    try:
        led = Ledger(path)
        df = led.spends()
        assert list(df.columns[-2:]) == ["asked_epsilon", "asked_delta"] and df["asked_epsilon"].isna().all()
        assert "(not recorded)" in led.summary()
    finally:
        os.chmod(path, 0o644)
    privirt.release_counts(X, epsilon=0.5, delta=1e-5, ledger=led)
    df = led.spends()
    assert math.isnan(df.iloc[0]["asked_epsilon"]) and df.iloc[1]["asked_epsilon"] == 0.5
    con = sqlite3.connect(path)
    assert con.execute("SELECT schema_version FROM budget").fetchone()[0] == 2
    con.close()
    assert main(["budget", "show", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # valid JSON: null, not NaN
    assert doc["spends"][0]["asked_epsilon"] is None


def test_concurrent_creators_share_one_complete_ledger(tmp_path):
    """Eight threads create the same ledger at once: one links its complete file, the others
    open it; no creating file is left behind."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "shared.ledger"
    with ThreadPoolExecutor(8) as pool:
        ledgers = list(pool.map(lambda _: Ledger(path, epsilon=2.0, delta=1e-6), range(8)))
    assert all(led.epsilon == 2.0 and led.delta == 1e-6 for led in ledgers)
    assert sum(led.created for led in ledgers) == 1  # each says whether it made the file
    ledgers[0].spend(PrivacyCost(epsilon=0.5), mechanism="laplace")
    assert Ledger(path).remaining_epsilon() == pytest.approx(1.5)
    assert [p.name for p in tmp_path.iterdir()] == ["shared.ledger"]


def test_unusual_ledger_paths_are_created_or_refused_in_one_line(tmp_path):
    """The ledger's file is created beside its path under a short name of its own (a long ledger
    name plus a suffix passed the file system's name limit); a symlink loop is a LedgerError."""
    long = tmp_path / ("x" * 240 + ".ledger")
    assert Ledger(long, epsilon=1.0, delta=1e-6).remaining_epsilon() == pytest.approx(1.0)
    spaced = tmp_path / "a b?#%é.ledger"
    Ledger(spaced, epsilon=1.0, delta=1e-6).spend(PrivacyCost(epsilon=0.25), mechanism="laplace")
    assert Ledger(spaced).remaining_epsilon() == pytest.approx(0.75)
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    with pytest.raises(LedgerError, match="nothing was spent"):
        Ledger(tmp_path / "loop1", epsilon=1.0, delta=1e-6)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".creating", "-journal"))]


def test_creating_a_ledger_where_sqlite_cannot_write_is_one_line(tmp_path, monkeypatch):
    """A read-only or full folder raised SQLite's own exception from the file created beside the
    ledger (the test runs as root, who may write anywhere: SQLite's failure is made here)."""
    import privirt.private.ledger as ledger_module

    real = ledger_module.sqlite3.connect

    def failing(target, *args, **kwargs):
        if str(target).endswith(".creating"):
            raise sqlite3.OperationalError("unable to open database file")
        return real(target, *args, **kwargs)

    monkeypatch.setattr(ledger_module.sqlite3, "connect", failing)
    with pytest.raises(LedgerError, match="cannot create the ledger .*nothing was spent"):
        Ledger(tmp_path / "a.ledger", epsilon=1.0, delta=1e-6)
    assert not (tmp_path / "a.ledger").exists()


def test_a_full_disk_during_a_spend_is_named_in_one_line(tmp_path, capsys, csv_file, monkeypatch):
    """SQLite rolls a transaction back by itself on SQLITE_FULL; the explicit ROLLBACK that
    followed failed ("cannot rollback - no transaction is active") and its message replaced the
    real one.  A full disk is made here with ``max_page_count`` on the spend's connection."""
    import privirt.private.ledger as ledger_module

    real = ledger_module.make_durable

    def full(con):
        real(con)
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        con.execute(f"PRAGMA max_page_count={pages}")

    path = tmp_path / "a.ledger"
    led = Ledger(path, epsilon=1.0, delta=1e-6)
    monkeypatch.setattr(ledger_module, "make_durable", full)
    with pytest.raises(LedgerError) as info:
        led.spend(PrivacyCost(epsilon=0.1), mechanism="laplace", note="x" * 20000)  # needs new pages
    message = str(info.value)
    assert "database or disk is full" in message and "nothing was spent" in message, message
    assert "rollback" not in message and "\n" not in message
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM spends").fetchone()[0] == 0
    # the CLI's spend (a short note): fill the ledger's pages until such a row needs a new one
    con = sqlite3.connect(path, isolation_level=None)
    row = "INSERT INTO spends (time, mechanism, rho, epsilon, delta, note) VALUES ('t', 'm', 0, 1e-12, 0, '')"
    while True:
        con.execute("BEGIN")
        before = con.execute("PRAGMA page_count").fetchone()[0]
        con.execute(row)
        grows = con.execute("PRAGMA page_count").fetchone()[0] > before
        con.execute("ROLLBACK")
        if grows:
            break
        con.execute(row)
    filled = con.execute("SELECT COUNT(*) FROM spends").fetchone()[0]
    con.close()
    out = tmp_path / "est.json"
    assert main(["estimate", str(csv_file), "--epsilon", "0.5", "--ledger", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("privirt: error:") and "database or disk is full" in err and "Traceback" not in err, err
    assert not out.exists()
    monkeypatch.undo()
    assert len(Ledger(path).spends()) == filled


def test_printed_spent_is_rounded_up_and_printed_remaining_fits(tmp_path):
    """summary() printed spent ε rounded to nearest (0.123456 after a spend of 0.1234564) and
    remaining to nearest (0.876544, which was then refused); the refusal said 'total ε=1 ...
    budget ε=1; already spent ε=1'.  Spent amounts print rounded up, remaining ones down."""
    from mechanisms.measures import format_down, format_up

    led = Ledger(tmp_path / "a.ledger", epsilon=1.0, delta=1e-5)
    led.spend(PrivacyCost(epsilon=0.1234564), mechanism="laplace")
    lines = led.summary().splitlines()
    spent = float([l for l in lines if l.startswith("spent")][0].split("ε = ")[1].split()[0])
    remaining = float([l for l in lines if l.startswith("remaining")][0].split("ε = ")[1].split()[0])
    assert spent >= led.spent().epsilon and spent == 0.123457
    assert remaining <= led.remaining_epsilon() and remaining == 0.876543
    led.spend(PrivacyCost(epsilon=remaining), mechanism="laplace")  # the printed remaining fits
    # round numbers print as before
    assert format_up(1.0, 6) == "1" and format_down(0.5, 6) == "0.5" and format_down(0.8765436000010001, 6) == "0.876543"
    whole = Ledger(tmp_path / "b.ledger", epsilon=1.0, delta=1e-5)
    whole.spend(PrivacyCost(epsilon=0.5), mechanism="laplace")
    text = whole.summary()
    assert "spent: ε = 0.5 at" in text and "remaining: ε = 0.5 for pure-ε spends" in text
    whole.spend(PrivacyCost(epsilon=0.5), mechanism="laplace")
    with pytest.raises(privirt.BudgetExceeded) as info:
        whole.spend(PrivacyCost(epsilon=1e-5), mechanism="laplace")
    assert "total spent to ε=1.00001 " in str(info.value) and "already spent ε=1 " in str(info.value)


def _creator(path: Path, how: str) -> subprocess.Popen:
    """A process creating the ledger at ``path`` that stops inside the creation (the schema
    written, not committed): ``how="die"`` kills itself with SIGKILL, ``"wait"`` prints
    ``ready`` and waits for a line on its stdin, then finishes."""
    code = textwrap.dedent(f"""
        import os, signal, sys
        from privirt.private import ledger as lg
        real = lg.Ledger._create_in
        def stop(self, con, epsilon, delta):  # test-only hook
            real(self, con, epsilon, delta)
            if {how!r} == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            print("ready", flush=True)
            sys.stdin.readline()
        lg.Ledger._create_in = stop
        lg.Ledger({str(path)!r}, epsilon=1.0, delta=1e-6)
        """)
    env = child_env()
    return subprocess.Popen([sys.executable, "-c", code], cwd=str(ROOT), env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _creating_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".creating" in p.name)


def test_a_creating_file_left_by_a_killed_process_is_removed_by_the_next_creation(tmp_path, capsys):
    # a process killed with SIGKILL while creating a ledger left its .creating file (and its
    # journal) in the folder for good; a live creator's file must never be taken for one
    dead = _creator(tmp_path / "a.ledger", "die")
    dead.communicate(timeout=120)
    assert dead.returncode == -signal.SIGKILL
    left = _creating_files(tmp_path)
    assert left and not (tmp_path / "a.ledger").exists()
    live = _creator(tmp_path / "b.ledger", "wait")
    try:
        assert live.stdout.readline() == "ready\n", live.stderr.read()
        mine = [n for n in _creating_files(tmp_path) if n not in left]
        assert mine
        # the same command again: it works, the dead process's files go, the live one's stay
        assert main(["budget", "init", str(tmp_path / "a.ledger"), "--epsilon", "1", "--delta", "1e-6"]) == 0
        assert _creating_files(tmp_path) == mine
        live.stdin.write("\n")
        live.stdin.flush()
        live.communicate(timeout=120)
    finally:
        live.kill()
    assert live.returncode == 0
    assert _creating_files(tmp_path) == []
    assert Ledger(tmp_path / "a.ledger").epsilon == Ledger(tmp_path / "b.ledger").epsilon == 1.0
    capsys.readouterr()


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -1, "1", True, None, [1.0]],
                         ids=repr)
def test_timeout_must_be_a_finite_number_at_least_zero(tmp_path, timeout):
    # it went to float() unchecked: nan, -1, "1" and True were taken, None raised a TypeError
    path = tmp_path / "t.ledger"
    with pytest.raises(ValueError, match=r"^timeout must be a finite number >= 0 \(seconds\), got"):
        Ledger(path, epsilon=1.0, delta=1e-5, timeout=timeout)
    assert not path.exists()  # nothing was created
    assert Ledger(path, epsilon=1.0, delta=1e-5, timeout=0).timeout == 0.0


@pytest.mark.parametrize("path", [None, 5, b"t.ledger", ["t.ledger"]], ids=repr)
def test_path_of_the_wrong_type_is_one_line_naming_path(tmp_path, path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"^path must be the ledger's file path"):
        Ledger(path, epsilon=1.0, delta=1e-5)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("asked", ["x", 0.5, (0.5,), (0.5, 1e-6, 0), {"epsilon": 0.5}], ids=repr)
def test_spend_refuses_an_asked_that_is_not_an_epsilon_delta_pair(tmp_path, asked):
    # a string or a number reached ApproxDP(*asked): a TypeError about its arguments
    led = Ledger(tmp_path / "a.ledger", epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match=r"^asked must be an ApproxDP or an \(epsilon, delta\) pair"):
        led.spend(PrivacyCost(epsilon=0.1), mechanism="laplace", asked=asked)
    assert led.spends().empty
    led.spend(PrivacyCost(epsilon=0.1), mechanism="laplace", asked=[0.1, 0.0])
    assert led.spends()["asked_epsilon"].tolist() == [0.1]


def test_a_delta_that_uses_up_what_gaussian_spends_need_is_said_not_epsilon_inf(tmp_path):
    """After a Gaussian (ρ) spend, an (ε, δ) spend whose δ is exactly the δ left was refused
    with "would bring the total spent to ε=inf" (docs/privacy.md: such a refusal says so)."""
    from privirt.exceptions import BudgetExceeded
    from privirt.private.accounting import PrivacyCost
    from privirt.private.ledger import Ledger

    led = Ledger(tmp_path / "d.ledger", epsilon=5.0, delta=1e-5)
    led.spend(PrivacyCost(rho=0.01), mechanism="gauss")
    with pytest.raises(BudgetExceeded) as info:
        led.spend(PrivacyCost(epsilon=0.1, delta=1e-5), mechanism="shuffle")
    msg = str(info.value)
    assert "inf" not in msg and "would use up the ledger's δ left" in msg
    assert "ask for a smaller delta; nothing was spent" in msg
    led.spend(PrivacyCost(epsilon=0.1, delta=4e-6), mechanism="shuffle")  # a smaller one fits

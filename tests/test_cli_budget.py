"""The ``privirt budget`` command and the private options of ``privirt estimate``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.cli import main
from tests._env import child_env

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def responses_csv(tmp_path) -> Path:
    X, _, _ = privirt.simulate_rasch(400, 6, seed=3, p_observed=0.9)
    path = tmp_path / "resp.csv"
    pd.DataFrame(X, columns=[f"item{i}" for i in range(1, 7)]).to_csv(path, index_label="person")
    return path


def _one_line_error(err: str) -> str:
    lines = [l for l in err.strip().splitlines() if l]
    assert len(lines) == 1, err
    assert lines[0].startswith("privirt: error: ")
    return lines[0]


def test_budget_init_and_show(tmp_path, capsys):
    path = tmp_path / "b.ledger"
    assert main(["budget", "init", str(path), "--epsilon", "2", "--delta", "1e-6"]) == 0
    out = capsys.readouterr().out
    assert "ε = 2" in out and "replace one person's row" in out
    assert main(["budget", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "budget: ε = 2, δ = 1e-06" in out and "0 spend(s)" in out
    assert main(["budget", "show", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["budget"] == {"epsilon": 2.0, "delta": 1e-6} and doc["spends"] == []


@pytest.mark.parametrize(
    "args",
    [
        ["--epsilon", "0", "--delta", "1e-5"],
        ["--epsilon", "-1", "--delta", "1e-5"],
        ["--epsilon", "nan", "--delta", "1e-5"],
        ["--epsilon", "inf", "--delta", "1e-5"],
        ["--epsilon", "1", "--delta", "0"],
        ["--epsilon", "1", "--delta", "1.5"],
    ],
)
def test_budget_init_bad_values(tmp_path, capsys, args):
    path = tmp_path / "b.ledger"
    assert main(["budget", "init", str(path), *args]) == 2
    _one_line_error(capsys.readouterr().err)
    assert not path.exists()


def test_budget_init_refuses_existing_and_show_missing(tmp_path, capsys):
    path = tmp_path / "b.ledger"
    assert main(["budget", "init", str(path), "--epsilon", "1", "--delta", "1e-5"]) == 0
    capsys.readouterr()
    assert main(["budget", "init", str(path), "--epsilon", "5", "--delta", "1e-5"]) == 2
    assert "already exists" in _one_line_error(capsys.readouterr().err)
    assert privirt.Ledger(path).epsilon == 1.0
    assert main(["budget", "show", str(tmp_path / "nope.ledger")]) == 2
    assert "budget init" in _one_line_error(capsys.readouterr().err)
    assert main(["budget"]) == 2
    _one_line_error(capsys.readouterr().err)


def test_budget_init_losing_a_creation_race_is_refused(tmp_path, capsys, monkeypatch):
    """Another process creates the ledger (and spends) right after `budget init` checked that the
    path is free: this init did not create it, so it must not say "created ledger" (exit 0) but
    refuse as for an existing path."""
    from pathlib import Path as _Path

    from privirt.private.accounting import PrivacyCost

    path = tmp_path / "x.ledger"
    real = _Path.exists
    first = [True]

    def exists(self, *args, **kwargs):
        found = real(self, *args, **kwargs)
        if self == path and first[0]:  # the other process wins the race right after the check
            first[0] = False
            privirt.Ledger(path, epsilon=1.0, delta=1e-5).spend(PrivacyCost(epsilon=0.5), mechanism="laplace")
        return found

    monkeypatch.setattr(_Path, "exists", exists)
    assert main(["budget", "init", str(path), "--epsilon", "1", "--delta", "1e-5"]) == 2
    monkeypatch.undo()
    captured = capsys.readouterr()
    assert "created" not in captured.out
    assert "already exists" in _one_line_error(captured.err)
    assert len(privirt.Ledger(path).spends()) == 1


def test_budget_init_losing_a_creation_race_to_another_budget_is_refused_the_same_way(tmp_path, capsys,
                                                                                       monkeypatch):
    """The winner's budget differs: the library's "open it without epsilon/delta" (Python names)
    was printed; the command says the path exists, as for any existing path."""
    from pathlib import Path as _Path

    path = tmp_path / "x.ledger"
    real = _Path.exists
    first = [True]

    def exists(self, *args, **kwargs):
        found = real(self, *args, **kwargs)
        if self == path and first[0]:
            first[0] = False
            privirt.Ledger(path, epsilon=2.0, delta=1e-6)
        return found

    monkeypatch.setattr(_Path, "exists", exists)
    assert main(["budget", "init", str(path), "--epsilon", "1", "--delta", "1e-5"]) == 2
    monkeypatch.undo()
    line = _one_line_error(capsys.readouterr().err)
    assert "already exists" in line and "epsilon/delta" not in line
    assert privirt.Ledger(path).epsilon == 2.0


def test_ledger_created_says_whether_this_call_made_the_file(tmp_path, monkeypatch):
    """``Ledger.created``: True only for the call that made the file, with hard links and where
    the file system has none (created in place)."""
    path = tmp_path / "a.ledger"
    assert privirt.Ledger(path, epsilon=1.0, delta=1e-5).created is True
    assert privirt.Ledger(path, epsilon=1.0, delta=1e-5).created is False
    assert privirt.Ledger(path).created is False

    def no_links(src, dst):
        raise PermissionError("no hard links here")

    monkeypatch.setattr(os, "link", no_links)
    other = tmp_path / "b.ledger"
    assert privirt.Ledger(other, epsilon=1.0, delta=1e-5).created is True
    assert privirt.Ledger(other, epsilon=1.0, delta=1e-5).created is False


def test_private_estimate_debits_and_over_budget_exits_nonzero(tmp_path, capsys, responses_csv):
    path = tmp_path / "b.ledger"
    main(["budget", "init", str(path), "--epsilon", "1", "--delta", "1e-5"])
    capsys.readouterr()
    out_json = tmp_path / "est.json"
    rc = main(["estimate", str(responses_csv), "--epsilon", "0.7", "--ledger", str(path),
               "--device", "cpu", "--out", str(out_json)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "private spectral estimate" in out and "discrete Gaussian" in out
    assert "replace one person's row" in out and "NOT PRIVATE" not in out
    doc = json.loads(out_json.read_text())
    assert doc["privacy"]["mechanism"] == "discrete Gaussian" and len(doc["items"]) == 6
    led = privirt.Ledger(path)
    assert len(led.spends()) == 1
    before = path.read_bytes()
    rc = main(["estimate", str(responses_csv), "--epsilon", "0.7", "--ledger", str(path), "--device", "cpu"])
    assert rc == 3
    captured = capsys.readouterr()
    assert "budget exceeded" in _one_line_error(captured.err)
    assert "beta" not in captured.out  # nothing was printed
    assert path.read_bytes() == before  # ledger unchanged
    # a smaller Laplace spend still fits
    rc = main(["estimate", str(responses_csv), "--epsilon", "0.05", "--mechanism", "laplace",
               "--ledger", str(path), "--device", "cpu"])
    assert rc == 0 and "discrete Laplace" in capsys.readouterr().out
    assert len(privirt.Ledger(path).spends()) == 2


def test_private_estimate_checks_its_options_before_spending(tmp_path, capsys, responses_csv):
    # a --top-k larger than the (public) number of items, or an --out folder that does not
    # exist, used to be found only after the ledger was debited and the noise drawn
    path = tmp_path / "b.ledger"
    main(["budget", "init", str(path), "--epsilon", "1", "--delta", "1e-5"])
    capsys.readouterr()
    rc = main(["estimate", str(responses_csv), "--epsilon", "0.5", "--ledger", str(path),
               "--device", "cpu", "--top-k", "9"])
    assert rc == 2
    assert "exceeds the number of items" in _one_line_error(capsys.readouterr().err)
    rc = main(["estimate", str(responses_csv), "--epsilon", "0.5", "--ledger", str(path),
               "--device", "cpu", "--out", str(tmp_path / "nowhere" / "est.json")])
    assert rc == 2
    captured = capsys.readouterr()
    assert "nowhere" in _one_line_error(captured.err) and "beta" not in captured.out
    assert len(privirt.Ledger(path).spends()) == 0


def test_private_estimate_options(capsys, responses_csv):
    rc = main(["estimate", str(responses_csv), "--epsilon", "2", "--mechanism", "randomized_response",
               "--p0", "auto", "--seed", "3", "--device", "cpu", "--top-k", "2"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "NOT PRIVATE: seeded noise" in out and "randomized response" in out
    assert "top 2 hardest" in out


@pytest.mark.parametrize(
    "extra",
    [
        ["--epsilon", "0"],
        ["--epsilon", "-0.5"],
        ["--epsilon", "nan"],
        ["--epsilon", "inf"],
        ["--epsilon", "1", "--delta", "0"],
        ["--epsilon", "1", "--delta", "2"],
        ["--epsilon", "1", "--p0", "0"],
        ["--epsilon", "1", "--p0", "1.5"],
        ["--epsilon", "1", "--method", "cmle"],
        ["--delta", "1e-5"],  # private option without --epsilon: refuse, don't run non-privately
        ["--mechanism", "laplace"],
    ],
)
def test_private_estimate_bad_input(capsys, responses_csv, extra):
    rc = main(["estimate", str(responses_csv), "--device", "cpu", *extra])
    assert rc == 2
    captured = capsys.readouterr()
    _one_line_error(captured.err)
    assert "beta" not in captured.out


def test_missing_ledger_is_not_created(tmp_path, capsys, responses_csv):
    path = tmp_path / "typo.ledger"
    rc = main(["estimate", str(responses_csv), "--epsilon", "1", "--ledger", str(path), "--device", "cpu"])
    assert rc == 2 and not path.exists()
    _one_line_error(capsys.readouterr().err)


def test_non_private_estimate_unchanged(capsys, responses_csv):
    assert main(["estimate", str(responses_csv), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("spectral estimate") and "privacy" not in out


def test_subprocess_over_budget(tmp_path, responses_csv):
    path = tmp_path / "b.ledger"
    env = child_env()

    def run(*args):
        return subprocess.run([sys.executable, "-m", "privirt", *args], cwd=str(ROOT), env=env,
                              capture_output=True, text=True, timeout=120)

    assert run("budget", "init", str(path), "--epsilon", "0.5", "--delta", "1e-5").returncode == 0
    r = run("estimate", str(responses_csv), "--epsilon", "0.6", "--ledger", str(path), "--device", "cpu")
    assert r.returncode == 3
    assert r.stderr.strip().count("\n") == 0 and "budget exceeded" in r.stderr
    assert len(privirt.Ledger(path).spends()) == 0  # ledger unchanged


def test_private_estimate_keeps_empty_items(tmp_path, capsys):
    X, _, _ = privirt.simulate_rasch(300, 4, seed=1)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    frame["d"] = np.nan  # nobody answered d: a private run must not drop it (data-dependent)
    path = tmp_path / "r.csv"
    frame.to_csv(path, index_label="person")
    assert main(["estimate", str(path), "--epsilon", "1", "--seed", "0", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "4 items" in out and "\nd " in out


@pytest.mark.parametrize("seed", [None, "4"])
def test_private_csv_output_carries_the_privacy_statement(tmp_path, capsys, responses_csv, seed):
    # the CSV is a released file: without the statement a seeded (NOT private) table would be
    # indistinguishable from a private one
    out = tmp_path / "beta.csv"
    extra = [] if seed is None else ["--seed", seed]
    assert main(["estimate", str(responses_csv), "--epsilon", "1", "--device", "cpu",
                 "--out", str(out), *extra]) == 0
    text = out.read_text()
    header = [l for l in text.splitlines() if l.startswith("#")]
    assert header and text.startswith("#")
    assert any("privacy: (" in l for l in header)
    assert any("NOT PRIVATE" in l for l in header) == (seed is not None)
    frame = pd.read_csv(out, comment="#", index_col="item")
    assert list(frame.columns) == ["beta", "se", "lo", "hi"] and len(frame) == 6


def test_budget_init_zero_epsilon_names_the_budget_and_missing_folder_is_refused(tmp_path, capsys):
    path = tmp_path / "b.ledger"
    assert main(["budget", "init", str(path), "--epsilon", "0", "--delta", "1e-5"]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "budget" in line and "spectral_estimate" not in line
    deep = tmp_path / "no" / "such" / "b.ledger"
    assert main(["budget", "init", str(deep), "--epsilon", "1", "--delta", "1e-5"]) == 2
    assert "does not exist" in _one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("method", ["totals", "spectral"])
def test_api_and_cli_default_delta_against_a_ledger_is_the_ledgers(tmp_path, capsys, method):
    """With a ledger and no δ the library used 1e-4 while the CLI used the ledger's δ: the same
    call cost more ε through Python (1.57 instead of 1 against δ_B = 1e-8)."""
    X, _, _ = privirt.simulate_rasch(2000, 8, seed=4_200_010)
    path = tmp_path / "x.csv"
    pd.DataFrame(X, columns=[f"i{j}" for j in range(8)]).to_csv(path, index=False)
    f = {"totals": privirt.private_totals_estimate, "spectral": privirt.private_spectral_estimate}[method]
    debits, stated = [], []
    for who in ("api", "cli"):
        led = privirt.Ledger(tmp_path / f"{who}.db", epsilon=2.0, delta=1e-8)
        if who == "api":
            r = f(X, epsilon=1.0, ledger=led, n_boot=0)
            stated.append(r.privacy.delta)
        else:
            assert main(["estimate", str(path), "--epsilon", "1", "--method", method,
                         "--ledger", str(led.path), "--n-boot", "0", "--no-progress"]) == 0
            assert "(1, 1e-08)" in capsys.readouterr().out
        spends = led.spends()
        assert len(spends) == 1
        debits.append(led.spent().epsilon)  # a Gaussian spend is stored as ρ: its ε at δ_B
        stated.append(float(spends["asked_delta"].iloc[0]))
    assert stated == [1e-8] * 3
    assert debits[0] == debits[1] == pytest.approx(1.0)


def test_budget_init_refuses_a_name_whose_sqlite_side_files_would_be_too_long(responses_csv, tmp_path, capsys):
    """A 250-byte ledger name was created ("created ledger ..."), but SQLite's NAME-journal went
    over the 255-byte name limit: every later spend failed with "cannot open the ledger"."""
    folder = tmp_path / "led"
    folder.mkdir()
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    longest = name_max - len("-journal")
    err = _refused_then_the_longest_spends(folder, "b", longest, responses_csv, capsys)
    assert f"its file name is {longest + 1} bytes long, at most {longest} here" in err
    assert main(["budget", "show", str(folder / ("b" * (longest - 3) + ".db"))]) == 0
    assert "(1 spend(s)" in capsys.readouterr().out


def _refused_then_the_longest_spends(folder, letter, room, responses_csv, capsys) -> str:
    """``budget init`` of a ledger name one byte longer than ``room`` (``.db`` included) is
    refused with nothing created; the longest one is created and spent from.  Returns the
    refusal's line."""
    too_long = folder / (letter * (room + 1 - 3) + ".db")
    assert main(["budget", "init", str(too_long), "--epsilon", "1", "--delta", "1e-3"]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert list(folder.iterdir()) == []
    ok = folder / (letter * (room - 3) + ".db")
    assert main(["budget", "init", str(ok), "--epsilon", "1", "--delta", "1e-3"]) == 0
    assert main(["estimate", str(responses_csv), "--epsilon", "0.5", "--ledger", str(ok), "--n-boot", "0"]) == 0
    capsys.readouterr()
    return err


@pytest.mark.skipif(os.name != "posix", reason="SQLite's unix VFS limit")
def test_budget_init_refuses_a_path_sqlite_cannot_open(responses_csv, tmp_path, capsys):
    # a path over SQLite's 512 bytes (with NAME-journal) was created, and every later spend
    # failed with 'unable to open database file ... check the folder, its permissions and free space'
    folder = tmp_path
    while len(os.fsencode(str(folder))) < 440:
        folder = folder / ("d" * min(60, 440 - len(os.fsencode(str(folder)))))
    folder.mkdir(parents=True)
    room = 512 - len("-journal") - len(os.fsencode(str(folder))) - 1  # bytes left for the name
    err = _refused_then_the_longest_spends(folder, "L", room, responses_csv, capsys)
    assert f"its path is {512 - len('-journal') + 1} bytes long, at most {512 - len('-journal')} for SQLite" in err


def test_a_folder_given_as_the_ledger(tmp_path, capsys, responses_csv):
    """A folder is named as such (not as a ledger that "already exists" or cannot be opened)."""
    folder = tmp_path / "adir"
    folder.mkdir()
    for args in (["budget", "init", str(folder), "--epsilon", "1", "--delta", "1e-5"],
                 ["budget", "show", str(folder)],
                 ["estimate", str(responses_csv), "--epsilon", "1", "--ledger", str(folder), "--device", "cpu"]):
        assert main(args) != 0
        out, err = capsys.readouterr()
        assert out == "" and f"{folder} is a folder, not a ledger file" in _one_line_error(err)
        assert "choose a file path" in err
    assert list(folder.iterdir()) == []
    with pytest.raises(privirt.LedgerError, match="is a folder"):
        privirt.Ledger(folder, epsilon=1.0, delta=1e-5)

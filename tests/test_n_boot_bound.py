"""``n_boot`` has a public upper bound (``privirt._checks.MAX_N_BOOT``), checked before anything
is spent: ``--n-boot 100000000000`` was accepted, the ledger debited, and then the bootstrap
ran out of memory (or would have run for days)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt._checks import MAX_N_BOOT, check_n_boot
from privirt.cli import main

HUGE = 100_000_000_000


def test_check_n_boot_bound():
    assert check_n_boot(MAX_N_BOOT) == MAX_N_BOOT
    assert check_n_boot(np.int64(200)) == 200
    for bad in (MAX_N_BOOT + 1, HUGE, np.int64(HUGE)):
        with pytest.raises(ValueError, match=f"n_boot must be at most {MAX_N_BOOT}") as err:
            check_n_boot(bad)
        assert "\n" not in str(err.value) and "n_boot=200" in str(err.value)


@pytest.mark.parametrize("estimate", [privirt.private_totals_estimate, privirt.private_spectral_estimate,
                                      privirt.private_2pl_estimate])
def test_library_refuses_huge_n_boot_before_the_debit(estimate, tmp_path):
    X, _, _ = privirt.simulate_rasch(200, 6, seed=1)
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match=f"at most {MAX_N_BOOT}"):
        estimate(X, epsilon=1.0, ledger=ledger, n_boot=HUGE, progress=False)
    assert len(privirt.Ledger(tmp_path / "l.db").spends()) == 0


def test_estimate_from_release_refuses_huge_n_boot():
    X, _, _ = privirt.simulate_rasch(200, 6, seed=1)
    for release, estimate in ((privirt.release_totals(X, epsilon=1.0, seed=1), privirt.estimate_from_release),
                              (privirt.release_counts(X, epsilon=1.0, seed=1), privirt.spectral_from_release),
                              (privirt.release_2pl(X, epsilon=1.0, seed=1), privirt.estimate_2pl_from_release)):
        with pytest.raises(ValueError, match=f"at most {MAX_N_BOOT}"):
            estimate(release, n_boot=HUGE, progress=False)


@pytest.mark.parametrize("extra", [["--method", "totals"], ["--method", "spectral"], ["--model", "2pl"], []])
def test_cli_refuses_huge_n_boot_in_one_line_nothing_spent(extra, tmp_path, capsys):
    X, _, _ = privirt.simulate_rasch(200, 6, seed=1)
    data, ledger, out = tmp_path / "wide.csv", tmp_path / "nb.db", tmp_path / "beta.csv"
    pd.DataFrame(X, columns=[f"i{j}" for j in range(6)]).to_csv(data, index=False)
    assert main(["budget", "init", str(ledger), "--epsilon", "10", "--delta", "1e-3"]) == 0
    capsys.readouterr()
    rc = main(["estimate", str(data), "--epsilon", "1", "--ledger", str(ledger), *extra,
               "--n-boot", str(HUGE), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc != 0
    assert err.count("\n") == 1 and err.startswith(f"privirt: error: --n-boot must be at most {MAX_N_BOOT}")
    assert "--n-boot 200" in err and "Traceback" not in err
    assert len(privirt.Ledger(ledger).spends()) == 0 and not out.exists()


def test_sweep_with_huge_n_boot_fails_every_cell_at_once(tmp_path, capsys):
    """A sweep checks option values in each cell (failed cells are listed, docs/sweeps.md): a
    huge n_boot fails them at the bound at once instead of exhausting memory or running for days."""
    toml = tmp_path / "s.toml"
    toml.write_text('name = "t"\nseed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["totals"]\n'
                    '[[datasets]]\nsource = "synthetic"\nname = "s"\nn = 100\nm = 5\n'
                    f'[mechanism_options.totals]\nn_boot = {HUGE}\n')
    assert main(["sweep", str(toml), "--out", str(tmp_path / "o"), "--jobs", "1", "--no-progress"]) != 0
    assert f"n_boot must be at most {MAX_N_BOOT}" in capsys.readouterr().out

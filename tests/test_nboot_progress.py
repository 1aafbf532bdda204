"""``n_boot=0`` / ``--n-boot`` and the bootstrap's progress bar (issue 24)."""

from __future__ import annotations

import io
import sys

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt._progress import resolve_progress
from privirt.cli import main

ESTIMATES = {"spectral": privirt.private_spectral_estimate, "totals": privirt.private_totals_estimate}


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def X():
    return privirt.simulate_rasch(400, 8, seed=3)[0]


@pytest.mark.parametrize("method", sorted(ESTIMATES))
def test_n_boot_zero_gives_no_intervals_and_spends_the_same(method, X, tmp_path):
    spent = {}
    for n_boot in (0, 20):
        path = tmp_path / f"{method}{n_boot}.ledger"
        assert main(["budget", "init", str(path), "--epsilon", "5", "--delta", "1e-5"]) == 0
        ledger = privirt.Ledger(path)
        res = ESTIMATES[method](X, epsilon=1.0, delta=1e-6, ledger=ledger, n_boot=n_boot, progress=False)
        assert res.se.isna().all() == (n_boot == 0)
        assert res.ci.isna().all().all() == (n_boot == 0)
        spent[n_boot] = (ledger.spent().epsilon, ledger.spent().delta)
    assert spent[0] == spent[20] and spent[0][0] > 0


@pytest.mark.parametrize("method", sorted(ESTIMATES))
def test_progress_true_draws_and_auto_is_silent_off_a_terminal(method, X, capsys):
    ESTIMATES[method](X, epsilon=1.0, seed=1, n_boot=20, progress=True)
    err = capsys.readouterr().err
    assert "bootstrap intervals" in err and "100%" in err
    ESTIMATES[method](X, epsilon=1.0, seed=1, n_boot=20)  # auto: capsys' stderr is not a TTY
    ESTIMATES[method](X, epsilon=1.0, seed=1, n_boot=20, progress=False)
    assert capsys.readouterr().err == ""


def test_resolve_progress_auto_follows_the_terminal(monkeypatch):
    assert resolve_progress(None, io.StringIO()) is False
    assert resolve_progress(None, FakeTTY()) is True
    monkeypatch.setattr(sys, "stderr", FakeTTY())
    assert resolve_progress(None) is True
    assert resolve_progress(False) is False and resolve_progress(True) is True
    with pytest.raises(ValueError, match="progress must be"):
        resolve_progress("yes")


def test_cli_n_boot(X, tmp_path, capsys):
    path = tmp_path / "x.csv"
    pd.DataFrame(X).to_csv(path, index=False)
    for method in ("spectral", "totals"):
        assert main(["estimate", str(path), "--epsilon", "1", "--seed", "1", "--method", method,
                     "--n-boot", "0"]) == 0
        out, err = capsys.readouterr()
        assert " se " not in out and " lo " not in out and "beta" in out
        assert "bootstrap" not in err  # stderr is not a terminal: no bar
        assert main(["estimate", str(path), "--epsilon", "1", "--seed", "1", "--method", method,
                     "--n-boot", "20"]) == 0
        out = capsys.readouterr().out
        assert " se " in out or "se" in out.split("\n")[1].split()
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-5"]) == 0
    assert main(["estimate", str(path), "--epsilon", "1", "--ledger", str(ledger), "--n-boot", "5"]) == 2
    err = capsys.readouterr().err
    assert "--n-boot" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert privirt.Ledger(ledger).spent().epsilon == 0
    assert main(["estimate", str(path), "--n-boot", "0"]) == 2  # needs --epsilon
    assert "--n-boot needs --epsilon" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["estimate", str(path), "--epsilon", "1", "--seed", "1", "--n-boot", "-1"])
    assert exc.value.code == 2 and "non-negative integer" in capsys.readouterr().err


def test_bootstraps_run_with_one_blas_thread(X, monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from privirt.private.counts import intervals
    from privirt.private.totals import marginal

    seen = []

    def spy(orig):
        def wrapped(*args, **kwargs):
            seen.append({i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"})
            return orig(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(marginal, "fit_support_batch", spy(marginal.fit_support_batch))
    monkeypatch.setattr(intervals, "spectral_batch", spy(intervals.spectral_batch))
    privirt.private_totals_estimate(X, epsilon=1.0, seed=1, n_boot=20, progress=False)
    privirt.private_spectral_estimate(X, epsilon=1.0, seed=1, n_boot=20, progress=False, estimator="spectral")
    assert seen and all(s <= {1} for s in seen)


@pytest.mark.parametrize("method", sorted(ESTIMATES))
def test_the_bar_names_its_phases_on_a_terminal(method, X, monkeypatch):
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    ESTIMATES[method](X, epsilon=1.0, seed=1, n_boot=20)  # auto: stderr is a terminal
    out = tty.getvalue()
    assert "bootstrap intervals" in out and "100%" in out
    if method == "spectral":
        assert "calibration" in out and "replicates" in out


def test_a_large_release_draws_its_noise_in_chunks_behind_a_bar(X, monkeypatch, capsys):
    from privirt.private import measurements

    whole = privirt.release_counts(X, epsilon=1.0, seed=3, progress=True)
    assert capsys.readouterr().err == ""  # one chunk: no bar, and the draws are as before
    monkeypatch.setattr(measurements, "NOISE_CHUNK", 10)  # 56 released counts: 6 chunks
    chunked = privirt.release_counts(X, epsilon=1.0, seed=3, progress=True)
    err = capsys.readouterr().err
    assert "noise" in err and "100%" in err
    again = privirt.release_counts(X, epsilon=1.0, seed=3, progress=False)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(again.Y.to_numpy(), chunked.Y.to_numpy())  # seeded: reproducible
    from privirt.stats.counts import differential_counts

    noise = chunked.Y.to_numpy() - differential_counts(X)
    off = ~np.eye(8, dtype=bool)
    assert np.all(noise[~off] == 0) and np.std(noise[off]) > 1  # every released count got noise
    assert whole.privacy.noise_value == chunked.privacy.noise_value


def test_the_spectral_path_draws_a_bar_for_every_long_step(X, monkeypatch):
    # release noise, point estimate, calibration and replicates (issue 24 target 3, at
    # thousands of items; thresholds lowered here so that a small case shows every bar)
    from privirt.private import measurements
    from privirt.private.counts import api

    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(measurements, "NOISE_CHUNK", 10)
    monkeypatch.setattr(api, "BAR_FROM_ITEMS", 8)
    privirt.private_spectral_estimate(X, epsilon=1.0, seed=1, n_boot=20, estimator="spectral")
    out = tty.getvalue()
    for phase in ("pairwise counts and calibration", "noise", "point estimate (spectral)", "calibration",
                  "replicates"):
        assert phase in out, phase
    assert out.index("pairwise counts") < out.index("noise") < out.index("point estimate") \
        < out.index("bootstrap intervals calibration")
    assert "bootstrap intervals calibration [" in out and " 0/" in out  # drawn before the first fit
    tty2 = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty2)
    privirt.private_spectral_estimate(X, epsilon=1.0, seed=1, n_boot=20, estimator="spectral", progress=False)
    assert tty2.getvalue() == ""

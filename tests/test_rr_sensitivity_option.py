"""``sensitivity=`` was checked only for the additive-noise mechanisms: randomized response
accepted "bogus", None or 3, and debited the ledger; a sweep with
``[mechanism_options.rr] sensitivity = "bogus"`` wrote a status=ok row.  It is now refused in one
line for every mechanism, before anything is spent."""

from __future__ import annotations

import numpy as np
import pytest

import privirt
from privirt import sweeps as sw


@pytest.mark.parametrize("bad", ["bogus", None, 3, ["tight"]])
@pytest.mark.parametrize("shuffle", [False, True])
def test_rr_refuses_a_bad_sensitivity_before_any_debit(tmp_path, bad, shuffle):
    X = (np.random.default_rng(23_000_002).random((200, 5)) < 0.5).astype(int)
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=10.0, delta=1e-5)
    with pytest.raises(ValueError, match=r"^sensitivity must be 'tight' or 'paper', got .+$"):
        privirt.private_spectral_estimate(X, epsilon=1.0, mechanism="randomized_response",
                                          shuffle=shuffle, ledger=led, sensitivity=bad)
    assert len(led.spends()) == 0 and led.spent().epsilon == 0


def test_rr_still_takes_both_valid_sensitivities():  # unused by RR; the sweeps pass them on
    X = (np.random.default_rng(23_000_003).random((200, 5)) < 0.5).astype(int)
    for ok in ("tight", "paper"):
        res = privirt.private_spectral_estimate(X, epsilon=2.0, mechanism="randomized_response",
                                                sensitivity=ok, seed=1)
        assert np.isfinite(res.beta.to_numpy()).all()


def test_a_sweep_with_a_bad_rr_sensitivity_is_refused_and_keeps_no_row(tmp_path, capsys):
    from privirt.cli import main

    cfg = tmp_path / "cfg.toml"
    cfg.write_text('seed = 23000004\ntrials = 1\nepsilons = [2.0]\ndelta = 1e-4\nmechanisms = ["rr"]\n'
                   '[mechanism_options.rr]\nsensitivity = "bogus"\n'
                   '[[datasets]]\nsource = "synthetic"\nn = 100\nm = 5\n', encoding="utf-8")
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) != 0
    err = capsys.readouterr().err.strip()
    # randomized response has no sensitivity to choose: the configuration is refused when read
    assert err == ("privirt: error: unknown key(s) ['sensitivity'] in mechanism_options.rr; "
                   "allowed: ['p0']")
    assert not out.exists()

"""Every private method at tiny and huge ε: calibrated with a valid claim, or refused in one line
(naming the smallest supported ε) before anything is spent — never an internal error."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.private.accounting import MIN_EPSILON
from privirt.cli import main
from privirt.private.ledger import Ledger
from privirt.private.counts.api import private_spectral_estimate
from privirt.private.totals.api import private_totals_estimate

TINY = [1e-300, 1e-200, 1e-30]
OK_OR_REFUSED = [1e-6, 1e6]

_rng = np.random.default_rng(0)
X = (_rng.random((300, 6)) < 0.6).astype(float)
XM = X.copy()
XM[_rng.random(X.shape) < 0.05] = np.nan

METHODS = {
    "gaussian": lambda e, **kw: private_spectral_estimate(X, epsilon=e, n_boot=0, **kw),
    "laplace": lambda e, **kw: private_spectral_estimate(X, epsilon=e, mechanism="laplace", n_boot=0, **kw),
    "rr": lambda e, **kw: private_spectral_estimate(X, epsilon=e, mechanism="randomized_response", **kw),
    "shuffled_rr": lambda e, **kw: private_spectral_estimate(
        X, epsilon=e, mechanism="randomized_response", shuffle=True, **kw),
    "totals": lambda e, **kw: private_totals_estimate(X, epsilon=e, n_boot=0, **kw),
    "totals_mcar": lambda e, **kw: private_totals_estimate(XM, epsilon=e, n_boot=0, missing="mcar", **kw),
}


@pytest.mark.parametrize("eps", TINY)
@pytest.mark.parametrize("method", list(METHODS))
def test_tiny_epsilon_is_refused_naming_the_smallest_before_any_spend(tmp_path, method, eps):
    led = Ledger(tmp_path / "b.ledger", epsilon=1.0, delta=1e-4)
    with pytest.raises(ValueError, match=f"smallest ε .*{MIN_EPSILON:g}.*nothing was spent"):
        METHODS[method](eps, ledger=led)
    assert len(led.spends()) == 0


@pytest.mark.parametrize("eps", OK_OR_REFUSED)
@pytest.mark.parametrize("method", list(METHODS))
def test_edge_epsilon_calibrates_validly_or_refuses_in_words(tmp_path, method, eps):
    led = Ledger(tmp_path / "b.ledger", epsilon=1e6, delta=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = METHODS[method](eps, ledger=led)
        except ValueError as exc:  # the samplers' range: a sentence, not an internal error
            assert "outside the range" in str(exc) and "\n" not in str(exc)
            assert len(led.spends()) == 0
            return
    assert res.privacy.guarantee.epsilon <= eps
    assert len(led.spends()) == 1


def test_the_shared_rule_is_the_boundary():
    # just above the smallest ε every method calibrates; just below, every one refuses
    below = MIN_EPSILON * (1 - 1e-9)
    for method in METHODS:
        with pytest.raises(ValueError, match="smallest ε"):
            METHODS[method](below)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = METHODS["gaussian"](MIN_EPSILON)
    assert res.privacy.guarantee.epsilon <= MIN_EPSILON


CLI_METHODS = {
    "default": [],
    "gaussian": ["--method", "spectral", "--mechanism", "gaussian"],
    "laplace": ["--method", "spectral", "--mechanism", "laplace"],
    "rr": ["--method", "spectral", "--mechanism", "randomized_response"],
    "shuffled_rr": ["--method", "spectral", "--mechanism", "randomized_response", "--shuffle"],
    "totals": ["--method", "totals"],
}


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("eps") / "x.csv"
    pd.DataFrame(X.astype(int), columns=[f"i{j}" for j in range(6)]).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("eps", ["1e-300", "1e-200", "1e-30"])
@pytest.mark.parametrize("method", list(CLI_METHODS))
def test_cli_tiny_epsilon_is_one_line_and_spends_nothing(tmp_path, capsys, csv_file, method, eps):
    led = tmp_path / "b.ledger"
    Ledger(led, epsilon=1.0, delta=1e-4)
    code = main(["estimate", str(csv_file), "--epsilon", eps, "--ledger", str(led), *CLI_METHODS[method]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("privirt: error: ") and "1e-06" in err[0], err
    assert len(Ledger(led).spends()) == 0


@pytest.mark.parametrize("eps", ["1e-6", "1e6"])
@pytest.mark.parametrize("method", list(CLI_METHODS))
def test_cli_edge_epsilon_runs_or_is_one_line(tmp_path, capsys, csv_file, method, eps):
    led = tmp_path / "b.ledger"
    Ledger(led, epsilon=1e6, delta=1e-4)
    code = main(["estimate", str(csv_file), "--epsilon", eps, "--ledger", str(led), *CLI_METHODS[method]])
    out, err = capsys.readouterr()
    n = len(Ledger(led).spends())
    if code == 0:
        assert "privacy: " in out and n == 1
    else:
        lines = [l for l in err.splitlines() if l.startswith("privirt: error")]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err and n == 0, err


def test_demo_refuses_tiny_epsilon_first(capsys):
    assert main(["demo", "--epsilon", "1e-300"]) == 2
    assert "1e-06" in capsys.readouterr().err


def test_measurements_apply_the_shared_rule_themselves():
    from mechanisms.measures import ApproxDP

    from privirt.private.measurements import CountsGaussian, CountsLaplace, ResponsesRR, TotalsGaussian
    from privirt.private.sensitivity import pairwise_counts_sensitivity

    sens = pairwise_counts_sensitivity(6)
    tiny = ApproxDP(1e-300, 1e-4)
    for build in (lambda: CountsGaussian.calibrate(tiny, sens), lambda: CountsLaplace.calibrate(tiny, sens),
                  lambda: ResponsesRR.calibrate(tiny, n_items=6, n_persons=300, shuffle=True),
                  lambda: TotalsGaussian.calibrate(tiny, n_persons=300, n_items=6)):
        with pytest.raises(ValueError, match="smallest ε"):
            build()


def test_an_epsilon_above_the_largest_stated_is_refused_everywhere_in_one_line(tmp_path, capsys):
    """ε = 1e308 said 'rho must be a finite number >= 0, got inf' or 'too small to calibrate';
    a ledger of ε = 1e155 was created and then could not print its summary (OverflowError);
    a sweep of ε = 1e308 made a report that crashed on its axis."""
    import pandas as pd

    from privirt.cli import main
    from privirt.private.accounting import MAX_EPSILON
    from privirt.private.ledger import Ledger
    from privirt.sweeps.config import parse_config

    X = privirt.simulate_rasch(100, 5, seed=310_100)[0]
    for call in (privirt.release_counts, privirt.release_totals, privirt.release_2pl,
                 privirt.private_spectral_estimate, privirt.private_totals_estimate):
        with pytest.raises(ValueError, match=r"epsilon must be at most 1e\+06, the largest ε privirt states a guarantee for"):
            call(X, epsilon=1e308)
    with pytest.raises(ValueError, match="must be at most 1e\\+06"):
        Ledger(tmp_path / "l.db", epsilon=1e155, delta=1e-3)
    assert not (tmp_path / "l.db").exists()
    Ledger(tmp_path / "ok.db", epsilon=MAX_EPSILON, delta=1e-3).summary()  # the largest prints
    path = tmp_path / "x.csv"
    pd.DataFrame(X).to_csv(path, index=False)
    for argv in (["estimate", str(path), "--epsilon", "1e308"], ["demo", "--epsilon", "1e308"],
                 ["budget", "init", str(tmp_path / "b.db"), "--epsilon", "1e155", "--delta", "1e-3"]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and "--epsilon must be at most 1e+06" in captured.err
    with pytest.raises(ValueError, match="every ε must be at most 1e\\+06"):
        parse_config({"epsilons": [1.0, 1e308], "datasets": [{"source": "synthetic", "n": 20, "m": 4}]})

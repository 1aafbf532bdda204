"""Bad input that escaped as a numpy/pandas/Python internal error naming no parameter (an
unhashable option, an int beyond int64 given to ``np.isfinite``, a scalar where item labels go,
``None`` for the data sets): each is now one ValueError naming the parameter."""

from __future__ import annotations

import numpy as np
import pytest

import privirt


@pytest.fixture(scope="module")
def data():
    X, _, _ = privirt.simulate_rasch(40, 4, seed=45_000_011)
    Y, _ = privirt.pairwise_counts(X)
    return X, Y


CASES = {
    "mechanism-list": (lambda X, Y, L: privirt.release_counts(
        X, epsilon=1.0, delta=1e-6, mechanism=["gaussian"], ledger=L), r"^mechanism must be"),
    "release_counts-n_persons-beyond-any-array": (lambda X, Y, L: privirt.release_counts(
        X, epsilon=1.0, delta=1e-6, n_persons=10**30, ledger=L), r"^n_persons=10+ is too large"),
    "simulate-beyond-any-array": (lambda X, Y, L: privirt.simulate_rasch(10**30, 3),
                                  r"^n_persons × n_items = 10+ × 3 is too large"),
    "simulate_2pl-beyond-any-array": (lambda X, Y, L: privirt.simulate_2pl(3, 2**62),
                                      r"^n_persons × n_items = 3 × \d+ is too large"),
    "regularization-huge-int": (lambda X, Y, L: privirt.spectral_estimate(
        X, regularization=10**30), r"^regularization must be at most"),
    "regularization-int-beyond-float": (lambda X, Y, L: privirt.spectral_from_counts(
        Y, regularization=10**400), r"^regularization must be a finite number"),
    "noise_var-int-beyond-float": (lambda X, Y, L: privirt.noise_aware_estimate(
        Y, noise_var=10**400), r"^noise_var must be a finite number"),
    "tol-int-beyond-float": (lambda X, Y, L: privirt.cmle_estimate(X, tol=10**400),
                             r"^tol must be a positive number"),
    "spectral_from_counts-items-int": (lambda X, Y, L: privirt.spectral_from_counts(
        Y, items=5), r"^items must be a sequence of item labels, got 5"),
    "noise_aware-items-str": (lambda X, Y, L: privirt.noise_aware_estimate(
        Y, noise_var=1.0, items="abcd"), r"^items must be a sequence of item labels, not the str"),
    "sufficient_statistics-items-int": (lambda X, Y, L: privirt.sufficient_statistics(
        X, items=5), r"^items must be a sequence of item labels, got 5"),
    "gibbs_2pno_replicate-None": (lambda X, Y, L: privirt.gibbs_2pno_replicate(
        None, n_iter=40, warmup=10, progress=False), r"^datasets must be a sequence"),
    "gibbs_2pno_replicate-int": (lambda X, Y, L: privirt.gibbs_2pno_replicate(
        5, n_iter=40, warmup=10, progress=False), r"^datasets must be a sequence"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_line_value_error_naming_the_parameter(case, data, tmp_path):
    call, match = CASES[case]
    ledger = privirt.Ledger(tmp_path / "b.ledger", epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match=match):
        call(*data, ledger)
    assert ledger.spends().empty  # nothing spent


def test_item_labels_of_spectral_from_counts_still_work(data):
    _, Y = data
    r = privirt.spectral_from_counts(Y, items=["a", "b", "c", "d"])
    assert list(r.beta.index) == ["a", "b", "c", "d"]
    assert np.isfinite(r.beta).all()


@pytest.mark.parametrize("note", [None, 5, ["x"], np.ones((2, 2))])
def test_a_note_that_is_not_a_string_is_refused_before_anything_is_spent(tmp_path, note):
    # note=None was stored as 'None', ['x'] as "['x']" and a 2-D array as two lines of text
    X = (np.random.default_rng(62_000_020).random((50, 4)) < .5).astype(int)
    ledger = privirt.Ledger(tmp_path / "n.ledger", epsilon=10.0, delta=1e-5)
    with pytest.raises(ValueError, match=r'^note must be a string \(use "" for no note\), got [^\n]*$'):
        privirt.release_totals(X, epsilon=0.5, ledger=ledger, note=note)
    with pytest.raises(ValueError, match=r"^note must be a string"):
        ledger.spend(privirt.accounting.PureDP(0.1), mechanism="laplace", note=note)
    assert len(ledger.spends()) == 0
    privirt.release_totals(X, epsilon=0.5, ledger=ledger, note="a note")
    assert ledger.spends()["note"].tolist() == ["a note"]


_CHOICES = {
    "device": lambda X, v, L: privirt.release_counts(X, epsilon=1.0, device=v, ledger=L),
    "engine": lambda X, v, L: privirt.release_totals(X, epsilon=1.0, engine=v, ledger=L),
    "engine (2PL)": lambda X, v, L: privirt.release_2pl(X, epsilon=1.0, engine=v, ledger=L),
    "mechanism": lambda X, v, L: privirt.private_spectral_estimate(X, epsilon=1.0, mechanism=v, ledger=L),
    "estimator": lambda X, v, L: privirt.private_spectral_estimate(X, epsilon=1.0, estimator=v, ledger=L),
    "rr_estimator": lambda X, v, L: privirt.private_spectral_estimate(X, epsilon=1.0, rr_estimator=v, ledger=L),
    "method": lambda X, v, L: privirt.estimate_abilities(X, np.zeros(4), method=v),
    "extreme": lambda X, v, L: privirt.item_fit(X, np.zeros(4), extreme=v),
    "solver": lambda X, v, L: privirt.spectral_estimate(X, solver=v),
    "normalizer": lambda X, v, L: privirt.spectral_estimate(X, normalizer=v),
    "method (counts)": lambda X, v, L: privirt.pairwise_counts(X, method=v),
    "engine (counts)": lambda X, v, L: privirt.pairwise_counts(X, engine=v),
    "engine (statistics)": lambda X, v, L: privirt.sufficient_statistics(X, engine=v),
}


@pytest.mark.parametrize("value", [np.array(["cpu", "gpu"]), np.array([]), np.array([["local"]], dtype=object)])
@pytest.mark.parametrize("option", list(_CHOICES))
def test_a_choice_given_an_array_is_refused_naming_the_option(tmp_path, option, value):
    # numpy's "The truth value of an array ... is ambiguous", which named no option
    X = (np.random.default_rng(62_000_030).random((40, 4)) < .5).astype(int)
    ledger = privirt.Ledger(tmp_path / "c.ledger", epsilon=10.0, delta=1e-5)
    with pytest.raises(ValueError, match=rf"^{option.split()[0]} must be [^\n]*, got (engine=)?array\(") as info:
        _CHOICES[option](X, value, ledger)
    assert "ambiguous" not in str(info.value)
    assert len(ledger.spends()) == 0


_VALUES = {
    "epsilon": lambda X, v, L: privirt.release_totals(X, epsilon=v, ledger=L),
    "delta": lambda X, v, L: privirt.release_totals(X, epsilon=1, delta=v, ledger=L),
    "n_persons": lambda X, v, L: privirt.release_totals(X, epsilon=1, n_persons=v, ledger=L),
    "confidence": lambda X, v, L: privirt.private_totals_estimate(X, epsilon=1, confidence=v, ledger=L),
    "p0": lambda X, v, L: privirt.release_counts(X, epsilon=1, p0=v, ledger=L),
    "missing": lambda X, v, L: privirt.release_totals(X, epsilon=1, missing=v, ledger=L),
    "progress": lambda X, v, L: privirt.private_totals_estimate(X, epsilon=1, progress=v, ledger=L),
    "sensitivity": lambda X, v, L: privirt.private_spectral_estimate(X, epsilon=1, sensitivity=v, ledger=L),
    "k": lambda X, v, L: privirt.metrics.top_k_accuracy(np.zeros(4), np.zeros(4), k=v),
    "n_items": lambda X, v, L: privirt.sensitivity.pairwise_counts_sensitivity(v),
    "data set": lambda X, v, L: privirt.load_dataset(v),
    "rho": lambda X, v, L: privirt.accounting.zcdp_delta(v, 1.0),
    "seed": lambda X, v, L: privirt.simulate_rasch(10, 4, seed=v),
    "n_persons (simulate)": lambda X, v, L: privirt.simulate_rasch(v, 4),
    "mechanism": lambda X, v, L: privirt.release_counts(X, epsilon=1, mechanism=v, ledger=L),
    "intervals": lambda X, v, L: privirt.private_2pl_estimate(X, epsilon=1, intervals=v, ledger=L),
    "sigma": lambda X, v, L: __import__("mechanisms").DiscreteGaussian(sigma=v),
    "l2_sensitivity": lambda X, v, L: privirt.accounting.calibrate_gaussian_sigma(v, 1.0, 1e-5),
}


@pytest.mark.parametrize("option", list(_VALUES))
def test_a_rejected_2d_array_is_shown_on_one_line(tmp_path, option):
    # the message held the array's repr, two lines long ("array([[1., 1.],\n       [1., 1.]])")
    X = (np.random.default_rng(62_000_040).random((40, 4)) < .5).astype(int)
    ledger = privirt.Ledger(tmp_path / "v.ledger", epsilon=10.0, delta=1e-5)
    with pytest.raises(ValueError) as info:
        _VALUES[option](X, np.ones((2, 2)), ledger)
    assert "\n" not in str(info.value) and str(info.value).startswith(option.split()[0] if option != "data set" else "unknown")
    assert len(ledger.spends()) == 0

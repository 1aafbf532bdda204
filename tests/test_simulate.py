"""Simulators: shapes, missingness rate, and that the generating model is the stated one."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

import privirt


def test_rasch_shapes_centring_and_missing_rate():
    X, theta, beta = privirt.simulate_rasch(4000, 12, p_observed=0.7, seed=3)
    assert X.shape == (4000, 12) and theta.shape == (4000,) and beta.shape == (12,)
    assert abs(beta.mean()) < 1e-12
    assert abs(np.isnan(X).mean() - 0.3) < 0.02
    assert set(np.unique(X[~np.isnan(X)])) <= {0.0, 1.0}


def test_rasch_item_means_follow_the_model():
    X, theta, beta = privirt.simulate_rasch(20000, 5, seed=11)
    expected = special.expit(theta[:, None] - beta[None, :]).mean(axis=0)
    assert np.allclose(X.mean(axis=0), expected, atol=0.015)


@pytest.mark.parametrize("fn, link", [(privirt.simulate_2pno, special.ndtr),
                                      (privirt.simulate_2pl, special.expit)])
def test_two_parameter_models(fn, link):
    X, theta, a, b = fn(20000, 4, seed=5)
    assert np.all(a > 0)
    expected = link(theta[:, None] * a - b).mean(axis=0)
    assert np.allclose(X.mean(axis=0), expected, atol=0.015)


@pytest.mark.parametrize("beta_scale", [None, "1", -1.0, float("nan"), float("inf"), True,
                                        np.bool_(True), [1.0], 10**400],
                         ids=lambda v: repr(v)[:12])
def test_beta_scale_must_be_a_finite_number_at_least_zero(beta_scale):
    # it went unchecked to numpy: NaN difficulties with a full X, or numpy's own errors
    with pytest.raises(ValueError, match=r"^beta_scale must be a finite number >= 0, got "):
        privirt.simulate_rasch(5, 3, beta_scale=beta_scale, seed=1)


def test_beta_scale_zero_and_integers_are_taken():
    _, _, beta = privirt.simulate_rasch(5, 3, beta_scale=0, seed=1)
    assert np.all(beta == 0)
    a = privirt.simulate_rasch(5, 3, beta_scale=2, seed=1)
    b = privirt.simulate_rasch(5, 3, beta_scale=np.float64(2.0), seed=1)
    assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


@pytest.mark.parametrize("kwargs, match", [
    ({"p_observed": "0.5"}, "p_observed"),
    ({"p_observed": None}, "p_observed"),
    ({"n_persons": True}, "n_persons"),
    ({"n_items": False}, "n_items"),
])
def test_bad_arguments_are_value_errors(kwargs, match):
    args = {"n_persons": 5, "n_items": 3, **kwargs}
    for fn in (privirt.simulate_rasch, privirt.simulate_2pno, privirt.simulate_2pl):
        with pytest.raises(ValueError, match=match):
            fn(**args)


def test_seed_reproducible_and_bad_arguments():
    a = privirt.simulate_rasch(50, 3, seed=1)[0]
    b = privirt.simulate_rasch(50, 3, seed=1)[0]
    assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="p_observed"):
        privirt.simulate_rasch(10, 3, p_observed=0)
    with pytest.raises(ValueError, match="n_items"):
        privirt.simulate_2pl(10, 0)


@pytest.mark.parametrize("seed", [True, 1.5, "7", -1, [1, 2]])
def test_seed_is_checked_as_everywhere_in_the_package(seed):
    """The simulators took seed=True as seed 1 and gave numpy's TypeError for a float or a
    string; they now refuse what the private functions refuse, in one line naming seed."""
    for fn in (privirt.simulate_rasch, privirt.simulate_2pno, privirt.simulate_2pl):
        with pytest.raises(ValueError, match=r"^seed must be a non-negative integer") as info:
            fn(5, 3, seed=seed)
        assert "\n" not in str(info.value)


def test_seed_accepts_an_int_a_seed_sequence_and_a_generator_as_one_stream():
    for fn in (privirt.simulate_rasch, privirt.simulate_2pno, privirt.simulate_2pl):
        base = fn(20, 3, seed=4)
        for seed in (np.int64(4), np.random.SeedSequence(4), np.random.default_rng(4)):
            for x, y in zip(base, fn(20, 3, seed=seed)):
                assert np.array_equal(x, y, equal_nan=True)


def _drawn_whole(seed, n, m, p_observed, model):
    """The draws as one n × m block (the simulators' stream before they drew block by block)."""
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal(n)
    if model == "rasch":
        beta = rng.normal(0.0, 1.0, m)
        beta -= beta.mean()
        prob, items = special.expit(theta[:, None] - beta[None, :]), (beta,)
    elif model == "2pno":
        a, b = rng.uniform(0.2, 2.0, m), rng.uniform(-2.0, 2.0, m)
        prob, items = special.ndtr(theta[:, None] * a - b), (a, b)
    else:
        a, b = rng.uniform(0.5, 2.5, m), rng.standard_normal(m)
        prob, items = special.expit(theta[:, None] * a - b), (a, b)
    X = (rng.random(prob.shape) < prob).astype(np.float64)
    X[rng.random(prob.shape) >= p_observed] = np.nan
    return (X, theta, *items)


@pytest.mark.parametrize("model,fn", [("rasch", privirt.simulate_rasch), ("2pno", privirt.simulate_2pno),
                                      ("2pl", privirt.simulate_2pl)])
@pytest.mark.parametrize("n,m", [(3, 2), (5000, 300), (70, 20_000)])  # blocks of rows; one row wider than a block
def test_drawing_by_blocks_of_persons_gives_the_same_data(model, fn, n, m):
    for p_observed in (1.0, 0.7):
        got = fn(n, m, p_observed=p_observed, seed=96_500_100 + n)
        want = _drawn_whole(96_500_100 + n, n, m, p_observed, model)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_a_simulation_holds_little_more_than_its_responses():
    # it held the probabilities, the uniforms and a boolean copy beside X: about 3.1 × X's bytes
    from tests._memory import traced_peak

    n, m = 50_000, 100
    (X, _, _), peak = traced_peak(privirt.simulate_rasch, n, m, p_observed=0.9, seed=96_500_200)
    assert X.nbytes == 8 * n * m and peak < 1.3 * X.nbytes

"""Conditional ML against a brute-force conditional likelihood maximised by scipy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import optimize

import privirt
from privirt import metrics
from privirt.exceptions import DisconnectedComparisonGraph
from tests._memory import traced_peak


def brute_conditional_nll(beta: np.ndarray, X: np.ndarray) -> float:
    """−log Π_persons P(x | score, observed items), by enumerating all patterns."""
    total = 0.0
    for row in X:
        obs = ~np.isnan(row)
        x = row[obs].astype(int)
        b = beta[obs]
        k, s = int(obs.sum()), int(x.sum())
        if s in (0, k):
            continue
        patterns = [p for p in itertools.product([0, 1], repeat=k) if sum(p) == s]
        log_den = np.log(sum(np.exp(-np.dot(p, b)) for p in patterns))
        total += -np.dot(x, b) - log_den
    return -total


@pytest.fixture(scope="module")
def tiny():
    X, _, _ = privirt.simulate_rasch(250, 5, p_observed=0.8, seed=3)
    opt = optimize.minimize(
        brute_conditional_nll, np.zeros(5), args=(X,), method="BFGS", options={"gtol": 1e-9}
    )
    return X, opt


def test_matches_brute_force_with_missing(tiny):
    X, opt = tiny
    res = privirt.cmle_estimate(X)
    ref = opt.x - opt.x.mean()
    assert res.converged
    np.testing.assert_allclose(res.beta.to_numpy(), ref, atol=2e-5)
    assert res.loglik == pytest.approx(-opt.fun, rel=1e-9)
    assert res.beta.mean() == pytest.approx(0, abs=1e-12)


def test_standard_errors_match_brute_force_information(tiny):
    X, opt = tiny
    res = privirt.cmle_estimate(X)
    b = res.beta.to_numpy()
    m, h = b.size, 1e-4
    H = np.empty((m, m))
    for i in range(m):
        for j in range(m):
            ei, ej = np.eye(m)[i] * h, np.eye(m)[j] * h
            H[i, j] = (
                brute_conditional_nll(b + ei + ej, X) - brute_conditional_nll(b + ei - ej, X)
                - brute_conditional_nll(b - ei + ej, X) + brute_conditional_nll(b - ei - ej, X)
            ) / (4 * h * h)
    P = np.eye(m) - 1.0 / m
    cov = np.linalg.pinv(P @ H @ P, hermitian=True)
    np.testing.assert_allclose(res.se.to_numpy(), np.sqrt(np.diag(cov)), rtol=1e-3)


def test_lsat6_order_and_labels():
    X = privirt.load_dataset("lsat6")
    res = privirt.cmle_estimate(X)
    assert list(res.beta.index) == list(X.columns)
    # difficulty order is the reverse of the proportion-correct order
    p = X.mean()
    assert list(res.beta.sort_values().index) == list(p.sort_values(ascending=False).index)
    assert np.all(res.se > 0) and np.all(res.se < 0.2)
    assert res.n_persons_used < len(X)  # all-correct persons carry no information


def test_recovery_on_simulated_data():
    X, _, beta = privirt.simulate_rasch(4000, 15, p_observed=0.6, seed=9)
    res = privirt.cmle_estimate(X)
    assert res.converged
    assert metrics.linf_error(res.beta, beta) < 0.15
    # roughly 95 % of true values within 2 SE
    z = np.abs(res.beta.to_numpy() - beta) / res.se.to_numpy()
    assert np.mean(z < 2.5) >= 0.8


def test_extreme_item_raises():
    X = np.array([[1, 0, 1], [1, 1, 0], [1, 0, 0], [1, 1, 0]], dtype=float)
    with pytest.raises(ValueError, match="infinite"):
        privirt.cmle_estimate(X)


def test_disconnected_items_raise():
    rng = np.random.default_rng(0)
    X = np.full((400, 4), np.nan)
    X[:200, :2] = rng.integers(0, 2, (200, 2))
    X[200:, 2:] = rng.integers(0, 2, (200, 2))
    with pytest.raises(DisconnectedComparisonGraph) as info:
        privirt.cmle_estimate(X)
    # the line says what to do, in the library's words and, unchanged, on the command line
    remedy = "estimate the parts separately, or collect responses that link them"
    assert str(info.value).endswith("difficulties are not identified; " + remedy)
    from privirt.cli._words import cli_message

    assert cli_message(info.value).endswith(remedy)
    # the spectral estimate is no remedy: nobody links the parts for it either, whatever λ
    with pytest.raises(DisconnectedComparisonGraph):
        privirt.spectral_estimate(X, device="cpu")


def test_one_way_linked_item_sets_raise_instead_of_huge_estimates():
    # every item has a non-extreme total and all items share persons, but nobody gets item
    # 2 or 3 right while getting item 0 or 1 wrong: the CML likelihood grows without bound
    # as beta_2, beta_3 - beta_0, beta_1 -> infinity (Fischer's condition fails)
    X = np.array([[1, 1, 1, 0], [1, 1, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0]] * 5, dtype=float)
    with pytest.raises(ValueError, match=r"infinite.*\[2, 3\]|\[2, 3\].*infinite"):
        privirt.cmle_estimate(X)


def test_option_validation():
    X = privirt.load_dataset("lsat6")
    with pytest.raises(ValueError, match="tol"):
        privirt.cmle_estimate(X, tol=-1)
    with pytest.raises(ValueError, match="max_iter"):
        privirt.cmle_estimate(X, max_iter=0)


def test_non_numeric_tol_is_a_value_error():
    X = privirt.load_dataset("lsat6")
    for bad in ("x", None, float("nan")):
        with pytest.raises(ValueError, match="tol"):
            privirt.cmle_estimate(X, tol=bad)


def test_top_k():
    res = privirt.cmle_estimate(privirt.load_dataset("lsat6"))
    assert list(res.top_k(2)) == list(res.beta.sort_values(ascending=False).index[:2])


# ---------------------------------------------------------------------------------------
# an independent CML by enumeration: log-likelihood, gradient and Hessian of the
# conditional likelihood, summing over every response pattern with each person's score on
# each person's answered items (exact, no finite differences)
# ---------------------------------------------------------------------------------------
def enumerated_terms(beta: np.ndarray, X: np.ndarray):
    """(ℓ, ∇ℓ, ∇²ℓ) of the conditional log-likelihood, by enumerating patterns."""
    from scipy.special import logsumexp

    m = beta.size
    ll, grad, hess = 0.0, np.zeros(m), np.zeros((m, m))
    cache = {}
    for row in X:
        obs = ~np.isnan(row)
        x = row[obs].astype(int)
        k, s = int(obs.sum()), int(x.sum())
        if s in (0, k):
            continue
        key = (tuple(np.flatnonzero(obs)), s)
        if key not in cache:
            pats = np.array([p for p in itertools.product([0, 1], repeat=k) if sum(p) == s])
            logw = -pats @ beta[obs]
            lz = logsumexp(logw)
            w = np.exp(logw - lz)
            mean = w @ pats
            cov = (pats * w[:, None]).T @ pats - np.outer(mean, mean)
            cache[key] = (lz, mean, cov)
        lz, mean, cov = cache[key]
        idx = np.flatnonzero(obs)
        ll += -x @ beta[obs] - lz
        grad[idx] += -x + mean
        hess[np.ix_(idx, idx)] -= cov
    return ll, grad, hess


def enumerated_cml(X: np.ndarray):
    """Newton's method on the enumerated likelihood: centred β and covariance."""
    m = X.shape[1]
    beta = np.zeros(m)
    for _ in range(50):
        _, g, H = enumerated_terms(beta, X)
        A = -H + 1.0 / m
        step = np.linalg.solve(A, g)
        beta = beta + step - step.mean()
        if np.max(np.abs(g)) < 1e-11 * len(X):
            break
    _, _, H = enumerated_terms(beta, X)
    cov = np.linalg.inv(-H + 1.0 / m) - 1.0 / m
    return beta, cov


def _data_sets():
    out = {}
    out["complete"] = privirt.simulate_rasch(400, 6, seed=5)[0]
    out["missing"] = privirt.simulate_rasch(300, 6, p_observed=0.7, seed=6)[0]
    X = privirt.simulate_rasch(300, 5, seed=7)[0]
    out["tied columns"] = np.column_stack([X, X[:, 1]])  # equal totals: tied estimates
    rng = np.random.default_rng(8)
    b = np.array([-3.0, -1.5, 0.0, 0.2, 1.5, 3.5])
    th = rng.normal(size=500) * 2
    out["wide spread"] = (rng.random((500, 6)) < 1 / (1 + np.exp(-(th[:, None] - b)))).astype(float)
    out["lsat6"] = privirt.load_dataset("lsat6").to_numpy(dtype=float)
    return out


@pytest.mark.parametrize("name", list(_data_sets()))
def test_equals_independent_enumerated_cml(name):
    X = _data_sets()[name]
    ref_beta, ref_cov = enumerated_cml(X)
    res = privirt.cmle_estimate(X)
    assert res.converged
    np.testing.assert_allclose(res.beta.to_numpy(), ref_beta, atol=1e-6)
    np.testing.assert_allclose(res.se.to_numpy(), np.sqrt(np.diag(ref_cov)), rtol=1e-6)
    np.testing.assert_allclose(res.info["cov"], ref_cov, atol=1e-8)
    assert res.loglik == pytest.approx(enumerated_terms(ref_beta, X)[0], rel=1e-10)


def _evaluate(beta, X):
    from privirt.rasch.cmle import _evaluate, _statistics

    resp = privirt.as_responses(X)
    return _evaluate(np.asarray(beta, dtype=float), _statistics(resp.codes), X.shape[1])


@pytest.mark.parametrize(
    "beta",
    [
        [0.3, -1.2, 0.8, 0.1, -0.4, 0.4],
        [0.5, 0.5, 0.5, -0.5, -0.5, -0.5],  # exact ties: the near-pair recursion
        [0.5, 0.5 + 1e-7, 0.5 + 4e-4, -0.5, -0.5 + 2e-3, -0.5],  # near ties on both sides of the cut
        [-12.0, 9.0, 0.0, 14.0, -7.0, 3.0],  # wide spread
        [-400.0, 380.0, 0.0, 420.0, -350.0, 5.0],  # log-space ESFs (scaled arithmetic would overflow)
    ],
)
@pytest.mark.parametrize("observed", [1.0, 0.7])
def test_analytic_derivatives_equal_enumeration_per_missingness_pattern(beta, observed):
    X = privirt.simulate_rasch(200, 6, p_observed=observed, seed=11)[0]
    X = X[~np.isnan(X).all(axis=1)]
    ll, g, H = _evaluate(beta, X)
    ll_e, g_e, H_e = enumerated_terms(np.asarray(beta, dtype=float), X)
    assert ll == pytest.approx(ll_e, rel=1e-11, abs=1e-9)
    scale = max(1.0, np.max(np.abs(H_e)))
    np.testing.assert_allclose(g, g_e, atol=1e-9 * len(X))
    np.testing.assert_allclose(H, H_e, atol=1e-9 * scale)
    np.testing.assert_allclose(H @ np.ones(6), 0, atol=1e-8 * scale)  # score is fixed: rows sum to 0


def test_missing_patterns_of_different_sizes_in_one_batch():
    # patterns of 2..8 answered items, many persons per pattern, several batches' worth of sizes
    rng = np.random.default_rng(4)
    X, _, _ = privirt.simulate_rasch(1500, 8, seed=4)
    k = rng.integers(2, 9, size=len(X))
    for row, kk in zip(X, k):
        row[rng.permutation(8)[kk:]] = np.nan
    ref_beta, ref_cov = enumerated_cml(X)
    res = privirt.cmle_estimate(X)
    np.testing.assert_allclose(res.beta.to_numpy(), ref_beta, atol=1e-6)
    np.testing.assert_allclose(res.se.to_numpy(), np.sqrt(np.diag(ref_cov)), rtol=1e-6)


def test_tied_items_have_equal_estimates():
    X = _data_sets()["tied columns"]
    res = privirt.cmle_estimate(X)
    assert res.beta.iloc[1] == pytest.approx(res.beta.iloc[5], abs=1e-9)
    assert res.se.iloc[1] == pytest.approx(res.se.iloc[5], rel=1e-7)


def test_existence_bound_on_totals_agrees_with_fischer_graph_condition():
    # complete data: "no finite maximiser" read off the totals polytope must agree with
    # the strong connectivity of the "right on i, wrong on j" graph, on many small data sets
    from privirt.rasch.cmle import _check_fischer

    rng = np.random.default_rng(0)
    seen = {True: 0, False: 0}
    for _ in range(700):
        n, m = int(rng.integers(4, 14)), int(rng.integers(2, 6))
        X = (rng.random((n, m)) < rng.uniform(0.2, 0.8, size=m)).astype(float)
        if rng.random() < 0.6 and m >= 3:
            # an easy block U and a hard block T, answered in that order (on the boundary),
            # then a few flips (often back inside)
            u = int(rng.integers(1, m - 1))
            for row, s in zip(X, rng.integers(1, m, size=n)):
                row[:] = 0
                if s <= u:
                    row[rng.permutation(u)[:s]] = 1
                else:
                    row[:u] = 1
                    row[u + rng.permutation(m - u)[: s - u]] = 1
            if rng.random() < 0.5:
                flip = rng.random(X.shape) < 0.03
                X[flip] = 1 - X[flip]
        resp = privirt.as_responses(X)
        score = X.sum(axis=1)
        used = X[(score > 0) & (score < m)]
        if len(used) == 0 or np.any(used.sum(0) == 0) or np.any(used.sum(0) == len(used)):
            continue
        try:
            _check_fischer(resp)
            graph_ok = True
        except ValueError:
            graph_ok = False
        try:
            privirt.cmle_estimate(X)
            ours_ok = True
        except ValueError as exc:
            assert "infinite" in str(exc)
            ours_ok = False
        assert ours_ok == graph_ok
        seen[graph_ok] += 1
    assert seen[True] > 20 and seen[False] > 15


def test_result_contract():
    from privirt._results import ItemEstimate

    X = privirt.load_dataset("lsat6")
    res = privirt.cmle_estimate(X)
    assert isinstance(res, ItemEstimate)
    assert list(res.items) == list(X.columns)
    frame = res.to_frame()
    assert list(frame.columns) == ["beta", "se"] and list(frame.index) == list(X.columns)
    np.testing.assert_array_equal(frame["se"].to_numpy(), res.se.to_numpy())
    assert list(res.top_k(2, largest=False)) == list(res.beta.sort_values().index[:2])
    assert res.info["optimizer"].startswith("Newton") and res.info["n_groups"] == 1


def test_benchmark_reference_cml_agrees():
    # the plain CML the benchmark compares against at scale is itself a correct CML
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_cmle.py"
    spec = importlib.util.spec_from_file_location("bench_cmle", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    X = bench.simulate(3000, 12, 0.0, seed=3)
    ref = bench.reference_cml(X)
    np.testing.assert_allclose(privirt.cmle_estimate(X).beta.to_numpy(), ref, atol=1e-6)


# ---------------------------------------------------------------------------------------
# memory: few persons, many items (issue 21: 30 × 5000 asked for 47.9 GiB)
def test_many_tied_items_fit_in_memory_quadratic_in_m():
    """Few persons and many items: thousands of exactly tied difficulties (equal totals),
    each pair formerly costing an O(m) row in one (pairs × m) array (cubic in m: 30 × 400
    peaked at ~250 MiB, 30 × 5000 asked for 47.9 GiB).  Now the peak stays at a few m × m
    arrays."""

    n, m = 30, 400
    X = (np.random.default_rng(0).random((n, m)) < 0.5).astype(np.int8)
    res, peak = traced_peak(privirt.cmle_estimate, X)
    assert res.converged
    assert peak < 100 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    totals = X.sum(axis=0)
    same = totals == totals[0]
    assert np.ptp(res.beta.to_numpy()[same]) < 1e-9  # tied items tie


def test_near_pair_terms_in_chunks_equal_one_pass(monkeypatch):
    from privirt.rasch import _esf

    rng = np.random.default_rng(5)
    K, G = 12, 3
    beta = rng.normal(size=(G, K))
    beta[:, 3] = beta[:, 2] + 1e-5  # near pairs (distinct: not merged)
    real = np.ones((G, K), dtype=bool)
    sizes = np.full(G, K)
    lg, shift, _, bt = _esf.batch_probabilities(beta, real, sizes)
    counts = rng.integers(0, 5, size=(G, K + 1)).astype(float)
    gi, ia, ib = (a.ravel() for a in np.meshgrid(np.arange(G), np.arange(K), np.arange(K),
                                                 indexing="ij"))
    keep = ia != ib
    gi, ia, ib = gi[keep], ia[keep], ib[keep]
    whole = _esf.near_pair_terms(lg, bt, sizes, counts, gi, ia, ib)
    monkeypatch.setattr(_esf, "NEAR_CHUNK_CELLS", 3 * (K + 1))  # chunks of 3 triples
    np.testing.assert_array_equal(_esf.near_pair_terms(lg, bt, sizes, counts, gi, ia, ib), whole)
    # the same triples duplicated are computed once and spread back
    np.testing.assert_array_equal(
        _esf.near_pair_terms(lg, bt, sizes, counts, np.r_[gi, gi], np.r_[ia, ia], np.r_[ib, ib]),
        np.r_[whole, whole])


@pytest.mark.parametrize("tol", [1e-10, 1e-13])
@pytest.mark.parametrize("max_iter", [1, 2, 3, 4, 100])
def test_converged_means_the_documented_gradient_tolerance_was_met(tol, max_iter):
    # at max_iter=3 the gradient was 2.4e-10·n_used: above tol·n_used, yet reported converged
    rng = np.random.default_rng(16000123)
    theta, b = rng.normal(size=500), np.linspace(-2, 2, 10)
    X = (rng.random((500, 10)) < 1 / (1 + np.exp(b - theta[:, None]))).astype(float)
    res = privirt.cmle_estimate(X, tol=tol, max_iter=max_iter)
    gmax = np.max(np.abs(_evaluate(res.beta.to_numpy(), X)[1]))
    assert res.converged == (gmax <= tol * max(1, res.n_persons_used))
    if max_iter == 100:
        assert res.converged  # the tolerance is reachable: rounding leaves ~1e-14·n_used


def test_progress_bar_ends_complete_and_leaves_the_estimate_unchanged(capsys):
    X, _, _ = privirt.simulate_rasch(400, 12, p_observed=0.8, seed=2_000_011)
    quiet = privirt.cmle_estimate(X, progress=False)
    assert capsys.readouterr().err == ""
    auto = privirt.cmle_estimate(X)  # None: stderr (captured) is not a terminal
    assert capsys.readouterr().err == ""
    shown = privirt.cmle_estimate(X, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert quiet.n_iter < 100  # converged early: the bar must still end complete
    assert lines[0].startswith("CML estimate statistics [") and "0/102 steps" in lines[0]
    assert lines[-1].startswith(f"CML estimate converged after {quiet.n_iter} iterations [")
    assert "102/102 steps 100%" in lines[-1] and "\r" not in "".join(lines)
    for res in (auto, shown):  # bit for bit
        assert np.array_equal(res.beta.to_numpy(), quiet.beta.to_numpy())
        assert np.array_equal(res.se.to_numpy(), quiet.se.to_numpy())
        assert np.array_equal(res.info["cov"], quiet.info["cov"])
        assert res.loglik == quiet.loglik and res.n_iter == quiet.n_iter


def test_progress_bar_counts_every_iteration_up_to_the_limit(capsys):
    X, _, _ = privirt.simulate_rasch(300, 6, seed=2_000_012)
    res = privirt.cmle_estimate(X, max_iter=1, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert res.n_iter == 1 and not res.converged
    assert lines[-1].startswith("CML estimate stopped after 1 iteration [") and "3/3 steps 100%" in lines[-1]


def test_progress_must_be_a_bool_or_none():
    with pytest.raises(ValueError, match="progress must be True, False or None"):
        privirt.cmle_estimate(privirt.load_dataset("lsat6"), progress="yes")

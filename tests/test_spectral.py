"""Spectral estimator: exact recovery from expected counts, LSAT6 vs CML, simulation recovery,
solvers, regularisation, graph handling and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt import metrics
from privirt.exceptions import DisconnectedComparisonGraph
from privirt.rasch.spectral import SpectralResult, spectral_estimate, spectral_from_counts


def expected_counts(beta: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Counts whose ratios are exactly Rasch: Y_ij / Y_ji = exp(β_j − β_i)."""
    e = np.exp(beta)
    Y = c * e[None, :] / (e[:, None] + e[None, :])
    np.fill_diagonal(Y, 0.0)
    return Y


@pytest.mark.parametrize("solver", ["direct", "power"])
@pytest.mark.parametrize("normalizer", ["max", "row"])
def test_exact_recovery_from_rasch_ratios(solver, normalizer):
    rng = np.random.default_rng(0)
    m = 12
    beta = rng.normal(size=m)
    beta -= beta.mean()
    c = rng.uniform(50, 500, (m, m))
    c = c + c.T  # symmetric number of comparisons
    res = spectral_from_counts(
        expected_counts(beta, c), regularization=0, solver=solver, normalizer=normalizer,
        device="cpu", tol=1e-13,
    )
    assert res.converged and res.solver == solver
    np.testing.assert_allclose(res.beta.to_numpy(), beta, atol=1e-8)
    assert abs(res.pi.sum() - 1) < 1e-12
    assert res.beta.mean() == pytest.approx(0, abs=1e-12)


def test_lsat6_close_to_cmle():
    X = privirt.load_dataset("lsat6")
    spec = spectral_estimate(X, device="cpu")
    cml = privirt.cmle_estimate(X)
    assert list(spec.beta.index) == list(X.columns)
    assert metrics.linf_error(spec.beta, cml.beta) < 0.05
    assert metrics.kendall_tau(spec.beta, cml.beta) == pytest.approx(1.0)
    # the hardest item is the one answered correctly least often
    assert spec.top_k(1)[0] == X.mean().idxmin()


def test_recovery_on_simulated_rasch_with_missing():
    X, _, beta = privirt.simulate_rasch(20_000, 20, p_observed=0.5, seed=5)
    res = spectral_estimate(X, device="cpu")
    assert metrics.linf_error(res.beta, beta) < 0.12
    assert metrics.l2_error(res.beta, beta, relative=True) < 0.05
    assert metrics.kendall_tau(res.beta, beta) > 0.9


def test_power_and_direct_agree_on_data():
    X, _, _ = privirt.simulate_rasch(3000, 15, p_observed=0.7, seed=1)
    a = spectral_estimate(X, solver="power", device="cpu", tol=1e-13)
    b = spectral_estimate(X, solver="direct", device="cpu")
    assert a.solver == "power" and a.n_iter > 0 and b.n_iter == 0
    np.testing.assert_allclose(a.beta, b.beta, atol=1e-8)


def test_the_direct_solver_is_the_dense_solve_its_docstring_names_also_on_a_sparse_graph(monkeypatch):
    import scipy.sparse.linalg as sla

    from privirt.private.counts.graph import sample_comparison_graph

    calls = {"dense": 0}
    dense = np.linalg.solve

    def counted(*a, **k):
        calls["dense"] += 1
        return dense(*a, **k)

    def sparse_solve(*a, **k):  # pragma: no cover - the docstring once promised SuperLU here
        raise AssertionError("a sparse solve ran")

    monkeypatch.setattr(np.linalg, "solve", counted)
    monkeypatch.setattr(sla, "splu", sparse_solve)
    monkeypatch.setattr(sla, "spsolve", sparse_solve)
    m = 120
    G = sample_comparison_graph(m, 0.05, seed=3_800_070)
    Y = np.random.default_rng(3_800_071).integers(1, 50, (m, m)) * G
    res = spectral_from_counts(Y, graph=G, solver="direct", device="cpu")
    assert res.solver == "direct" and calls["dense"] == 1
    doc = " ".join(spectral_from_counts.__doc__.split())
    assert "dense LU solve" in doc and "SuperLU" not in doc


def test_disconnected_graph_raises_named_error():
    rng = np.random.default_rng(2)
    X = np.full((400, 4), np.nan)
    # persons 0..199 answer items 0,1; persons 200..399 answer items 2,3: never linked
    X[:200, :2] = rng.integers(0, 2, (200, 2))
    X[200:, 2:] = rng.integers(0, 2, (200, 2))
    with pytest.raises(DisconnectedComparisonGraph, match="separate parts"):
        spectral_estimate(X, device="cpu")
    # it is also a ValueError, so the CLI reports it in one line
    assert issubclass(DisconnectedComparisonGraph, ValueError)


def test_one_directional_pair_needs_regularization():
    # item 0 beaten by nobody: without regularisation state 0 cannot be left... and entered
    Y = np.array([[0, 5, 3], [0, 0, 4], [0, 2, 0]], dtype=float)
    with pytest.raises(DisconnectedComparisonGraph):
        spectral_from_counts(Y, regularization=0, device="cpu")
    from privirt.exceptions import IdentifiabilityWarning

    with pytest.warns(IdentifiabilityWarning, match=r"item\(s\) \[0\]"):
        res = spectral_from_counts(Y, device="cpu")  # λ = 1 makes every compared pair two-way
    assert res.regularization == 1.0
    assert np.all(np.isfinite(res.beta)) and res.converged
    assert res.top_k(1, largest=False)[0] == 0  # item 0 (never wrong when 1/2 right) easiest


def test_float_noisy_counts_and_labels():
    Y = pd.DataFrame([[0, 10.5, 3.2], [4.1, 0, 6.0], [1.0, 2.5, 0]], index=["a", "b", "c"],
                     columns=["a", "b", "c"])
    res = spectral_from_counts(Y, device="cpu")
    assert list(res.beta.index) == ["a", "b", "c"]
    frame = res.to_frame()
    assert list(frame.columns) == ["beta", "pi", "d"]
    np.testing.assert_allclose(frame["beta"], np.log(res.pi / res.d) - np.log(res.pi / res.d).mean())


def test_count_frame_is_aligned_by_label():
    # Y[i, j] is meaningful only when row i and column i are the same item: a frame whose
    # rows were reordered (and columns not) gave silently wrong difficulties
    from privirt.stats.counts import pairwise_counts_frame

    Y, _ = pairwise_counts_frame(privirt.load_dataset("lsat6"))
    ref = spectral_from_counts(Y, device="cpu").beta
    order = ["item5", "item4", "item3", "item2", "item1"]
    res = spectral_from_counts(Y.loc[order], device="cpu")
    assert list(res.beta.index) == order
    np.testing.assert_allclose(res.beta[order], ref[order], atol=1e-10)
    with pytest.raises(ValueError, match="same item labels"):
        spectral_from_counts(Y.rename(columns={"item1": "zzz"}), device="cpu")


def test_graph_restricts_transitions():
    rng = np.random.default_rng(4)
    m = 6
    beta = rng.normal(size=m)
    beta -= beta.mean()
    Y = expected_counts(beta, np.full((m, m), 200.0))
    ring = np.zeros((m, m), dtype=bool)
    for i in range(m):
        ring[i, (i + 1) % m] = ring[(i + 1) % m, i] = True
    res = spectral_from_counts(Y, graph=ring, regularization=0, device="cpu")
    np.testing.assert_allclose(res.beta, beta, atol=1e-8)  # a ring suffices for exact ratios
    # a path split in two is disconnected
    split = ring.copy()
    split[0, 1] = split[1, 0] = split[3, 4] = split[4, 3] = False
    with pytest.raises(DisconnectedComparisonGraph):
        spectral_from_counts(Y, graph=split, device="cpu")
    with pytest.raises(ValueError, match="symmetric"):
        spectral_from_counts(Y, graph=np.triu(ring), device="cpu")


def _star_graph_counts():
    """Labelled counts a..e and a labelled star on a plus the edge b–c (reviewer's example)."""
    X, _, _ = privirt.simulate_rasch(5000, 5, seed=72001300)
    items = list("abcde")
    Y = pd.DataFrame(privirt.pairwise_counts(X)[0], index=items, columns=items)
    G = pd.DataFrame(False, index=items, columns=items)
    for u, v in (("a", "b"), ("a", "c"), ("a", "d"), ("a", "e"), ("b", "c")):
        G.loc[u, v] = G.loc[v, u] = True
    return Y, G


def test_a_labelled_graph_is_read_by_label_not_by_position():
    # the same labelled graph stored in another order was read by position: another design
    # (a star on e) gave other estimates; a graph with foreign labels was taken silently
    from privirt.private.counts.noisy_likelihood import noise_aware_estimate

    Y, G = _star_graph_counts()
    rev = list("edcba")
    for fit in (lambda g: spectral_from_counts(Y, graph=g, device="cpu").beta,
                lambda g: noise_aware_estimate(Y, noise_var=100.0, graph=g).beta,
                lambda g: spectral_from_counts(Y.to_numpy(), items=Y.index, graph=g, device="cpu").beta):
        ref = fit(G.to_numpy())
        np.testing.assert_array_equal(fit(G), ref)
        np.testing.assert_allclose(fit(G.loc[rev, rev]), ref, rtol=0, atol=1e-12)
        foreign = pd.DataFrame(G.to_numpy(), index=list("vwxyz"), columns=list("vwxyz"))
        with pytest.raises(ValueError, match=r"^graph index must carry the items of the counts \(5 labels"):
            fit(foreign)
    # unlabelled counts keep reading a frame by position
    plain = spectral_from_counts(Y.to_numpy(), graph=G.loc[rev, rev], device="cpu").beta
    np.testing.assert_array_equal(
        plain, spectral_from_counts(Y.to_numpy(), graph=G.loc[rev, rev].to_numpy(), device="cpu").beta)


def test_a_labelled_graph_matches_the_items_as_text():
    # 69965f8 compared a labelled graph's labels with items= exactly: Y and its graph labelled
    # 0..4 with items=["0", ...] (matched to Y as text) refused the graph that carries Y's labels
    from privirt.private.counts.noisy_likelihood import noise_aware_estimate

    Y, G = _star_graph_counts()
    Yn, Gn = (f.set_axis(range(5), axis=0).set_axis(range(5), axis=1) for f in (Y, G))
    text = ["4", "3", "2", "1", "0"]
    rev = [4, 3, 2, 1, 0]
    for fit in (lambda **kw: spectral_from_counts(Yn, device="cpu", **kw).beta,
                lambda **kw: noise_aware_estimate(Yn, noise_var=100.0, **kw).beta):
        ref = fit(items=text, graph=Gn.to_numpy()[np.ix_(rev, rev)])
        np.testing.assert_allclose(fit(items=text, graph=Gn), ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(fit(items=text, graph=Gn.loc[rev, rev]), ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(fit(graph=Gn.rename(index=str, columns=str)), ref[::-1].to_numpy(),
                                   rtol=0, atol=1e-12)
        for bad in (Gn.set_axis(range(1, 6), axis=0).set_axis(range(1, 6), axis=1),
                    Gn.set_axis([0, 1, 2, 3, "3"], axis=0).set_axis([0, 1, 2, 3, "3"], axis=1)):
            with pytest.raises(ValueError, match=r"^graph index must carry the items of the counts \(5 labels"):
                fit(items=text, graph=bad)


def test_items_orders_a_labelled_count_frame_by_label_and_refuses_other_labels():
    # items= renamed a labelled frame by position: items=list("edcba") reported item a's
    # difficulty under e, and foreign labels were taken
    from privirt.private.counts.noisy_likelihood import noise_aware_estimate

    Y, _ = _star_graph_counts()
    rev = list("edcba")
    for fit in (lambda **kw: spectral_from_counts(Y, device="cpu", **kw).beta,
                lambda **kw: noise_aware_estimate(Y, noise_var=100.0, **kw).beta):
        ref = fit()
        res = fit(items=rev)
        assert list(res.index) == rev
        np.testing.assert_allclose(res[list("abcde")], ref[list("abcde")], rtol=0, atol=1e-12)
        for bad, match in ((list("vwxyz"), r"\['v', 'w', 'x'\] … are not among its labels"),
                           (list("abcd"), r"it leaves out 1 \(\['e'\]\)")):
            with pytest.raises(ValueError, match=r"^items must name the items of the counts frame Y .*" + match):
                fit(items=bad)
    # labels are matched as text, as elsewhere; a plain array still takes items= as its labels
    Yn = Y.set_axis(range(5), axis=0).set_axis(range(5), axis=1)
    res = spectral_from_counts(Yn, items=["4", "3", "2", "1", "0"], device="cpu").beta
    ref = spectral_from_counts(Y, device="cpu").beta
    np.testing.assert_allclose(res.to_numpy(), ref.to_numpy()[::-1], rtol=0, atol=1e-12)
    assert list(spectral_from_counts(Y.to_numpy(), items=rev, device="cpu").beta.index) == rev
    # with items=, a labelled graph is read by the same labels
    _, G = _star_graph_counts()
    np.testing.assert_allclose(
        spectral_from_counts(Y, items=rev, graph=G, device="cpu").beta[list("abcde")],
        spectral_from_counts(Y, graph=G, device="cpu").beta, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "Y, match",
    [
        (np.array([[0, -1.0], [2, 0]]), "non-negative"),
        (np.array([[0, np.nan], [2, 0]]), "finite"),
        (np.ones((2, 3)), "square"),
        (np.zeros((1, 1)), "at least 2"),
    ],
)
def test_count_validation(Y, match):
    with pytest.raises(ValueError, match=match):
        spectral_from_counts(Y, device="cpu")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"regularization": -1}, "regularization"),
        ({"regularization": "big"}, "regularization"),
        ({"solver": "eigen"}, "solver"),
        ({"normalizer": "sum"}, "normalizer"),
        ({"tol": 0}, "tol"),
        ({"max_iter": 0}, "max_iter"),
    ],
)
def test_option_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        spectral_from_counts(np.array([[0, 1.0], [1, 0]]), device="cpu", **kwargs)


def test_top_k_semantics():
    beta = pd.Series([0.3, -1.0, 1.2, -0.5], index=list("wxyz"))
    res = SpectralResult(beta=beta, pi=beta * 0 + 0.25, d=beta * 0 + 1, n_iter=0,
                         converged=True, solver="direct", regularization=1.0)
    assert list(res.top_k(2)) == ["y", "w"]
    assert list(res.top_k(1, largest=False)) == ["x"]
    with pytest.raises(ValueError, match="k must"):
        res.top_k(5)


@pytest.mark.gpu
def test_gpu_matches_cpu():
    X, _, _ = privirt.simulate_rasch(5000, 30, p_observed=0.6, seed=8)
    for solver in ("power", "direct"):
        g = spectral_estimate(X, device="gpu", solver=solver, tol=1e-13)
        c = spectral_estimate(X, device="cpu", solver=solver, tol=1e-13)
        np.testing.assert_allclose(g.beta, c.beta, atol=1e-8)


def test_responses_with_empty_item_is_dropped_with_warning():
    X, _, _ = privirt.simulate_rasch(500, 4, seed=3)
    X = np.column_stack([X, np.full(500, np.nan)])
    resp = privirt.as_responses(X, empty="keep")
    with pytest.warns(privirt.EmptyResponsesWarning):
        res = spectral_estimate(resp, device="cpu")
    assert list(res.beta.index) == [0, 1, 2, 3]
    # a clean Responses is used as is and gives the same estimate as the array
    clean = privirt.as_responses(X[:, :4])
    np.testing.assert_allclose(spectral_estimate(clean, device="cpu").beta, res.beta)


def test_from_counts_refuses_repeated_labels_and_boolean_tol():
    Y = np.array([[0, 3, 1], [2, 0, 4], [5, 1, 0]])
    with pytest.raises(ValueError, match="unique; repeated: \\['q1'\\]"):
        spectral_from_counts(Y, items=["q1", "q2", "q1"])
    with pytest.raises(ValueError, match="tol"):
        spectral_from_counts(Y, tol=True)
    frame = pd.DataFrame(Y, index=["x", "x", "y"], columns=["x", "x", "y"])
    with pytest.raises(ValueError, match="unique"):
        spectral_from_counts(frame)
    assert np.isfinite(spectral_from_counts(Y, items=["q1", "q2", "q3"]).beta).all()


def test_one_person_is_warned_that_regularization_not_data_sets_the_estimates():
    from privirt.exceptions import IdentifiabilityWarning

    X = np.array([[1, 0, 1]])
    with pytest.warns(IdentifiabilityWarning, match=r"set by the regularization λ = 1"):
        privirt.spectral_estimate(X, device="cpu")
    with pytest.raises(privirt.DisconnectedComparisonGraph, match="--regularization 1"):
        privirt.spectral_estimate(X, device="cpu", regularization=0)
    # connected data: no warning
    X2, _, _ = privirt.simulate_rasch(300, 5, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentifiabilityWarning)
        privirt.spectral_estimate(X2, device="cpu")


def test_a_regularization_that_overflows_is_refused():
    """λ = 1e308 overflowed the chain's row sums: NaN difficulties reported as converged."""
    X = (np.random.default_rng(0).random((300, 4)) < 0.5).astype(float)
    with pytest.raises(ValueError, match="regularization must be at most"):
        spectral_estimate(X, regularization=1e308)
    big = spectral_estimate(X, regularization=1e15)  # the largest accepted: every β tied at 0
    assert np.allclose(big.beta, 0.0, atol=1e-6)


def test_a_graph_with_exactly_the_counts_labels_is_read_by_them_in_any_order():
    # d534efa matched a labelled graph as text only: counts labelled [0, 1, "1", 2] (unique, but
    # not as text) refused a permuted graph that carried exactly their labels
    from privirt.rasch.spectral import spectral_from_counts

    rng = np.random.default_rng(65_300_001)
    Y = rng.integers(5, 50, size=(4, 4)).astype(float)
    np.fill_diagonal(Y, 0)
    G = np.ones((4, 4))
    np.fill_diagonal(G, 0)
    G[0, 3] = G[3, 0] = 0
    want = spectral_from_counts(Y, graph=G).beta.to_numpy()
    perm = [2, 0, 3, 1]
    for labels in ([0, 1, "1", 2], ["a", "b", " b", "d"]):
        frame = pd.DataFrame(G, index=labels, columns=labels).iloc[perm, perm]
        got = spectral_from_counts(pd.DataFrame(Y, index=labels, columns=labels), graph=frame)
        np.testing.assert_allclose(got.beta.to_numpy(), want, rtol=0, atol=1e-12)
        assert list(got.beta.index) == labels

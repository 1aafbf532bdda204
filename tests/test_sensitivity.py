"""Sensitivity of the pairwise counts: exhaustive checks of the proven bounds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privirt.stats.api import pairwise_counts
from privirt.private.sensitivity import (
    count_contribution,
    max_cut,
    max_cut_upper_bound,
    pairwise_counts_sensitivity,
)
import privirt.private.sensitivity as sens_mod


def _all_rows(m: int) -> np.ndarray:
    """Every row in {1, 0, missing}^m."""
    return np.array(list(itertools.product((1, 0, -1), repeat=m)), dtype=np.int8)


def _contributions(rows: np.ndarray, graph: np.ndarray | None = None) -> np.ndarray:
    """Released contribution of each row (flattened directed pairs of the graph)."""
    m = rows.shape[1]
    G = ~np.eye(m, dtype=bool) if graph is None else graph
    out = []
    for r in rows:
        # computed with the package's counting code on a one-person data set
        Y, _ = pairwise_counts(_as_float(r), device="cpu")
        out.append(Y[G])
    return np.array(out, dtype=np.int64)


def _as_float(r: np.ndarray) -> np.ndarray:
    x = r.astype(float)
    x[r < 0] = np.nan
    return x[None, :]


def _brute_max_cut(G: np.ndarray) -> int:
    m = G.shape[0]
    best = 0
    for mask in range(1 << m):
        side = np.array([(mask >> i) & 1 for i in range(m)], dtype=bool)
        best = max(best, int(np.count_nonzero(G[np.ix_(side, ~side)])))
    return best


@pytest.mark.parametrize("m", [2, 3, 4, 5])
def test_exhaustive_full_graph_replace(m):
    rows = _all_rows(m)
    C = _contributions(rows)
    # every pair of rows (including rows with missing entries): D = C[a] − C[b]
    D = C[:, None, :] - C[None, :, :]
    assert set(np.unique(D)).issubset({-1, 0, 1})  # a 0/±1 vector
    l1 = np.abs(D).sum(axis=2)
    l2sq = (D**2).sum(axis=2)
    assert np.array_equal(l1, l2sq)  # L1 = L2² for 0/±1 vectors
    bound = 2 * (m // 2) * ((m + 1) // 2)
    s = pairwise_counts_sensitivity(m)
    assert l1.max() == bound == s.l1  # bound holds and is attained: tight
    assert s.l2 == pytest.approx(np.sqrt(bound))
    assert s.bound == "tight" and "replace" in s.relation
    # the paper's bound is m(m−1) and looser for m ≥ 3
    paper = pairwise_counts_sensitivity(m, bound="paper")
    assert paper.l1 == m * (m - 1) >= bound


@pytest.mark.parametrize("m", [2, 3, 4, 5])
def test_exhaustive_add_remove(m):
    C = _contributions(_all_rows(m))
    # add/remove: the difference is one person's contribution
    assert np.abs(C).sum(axis=1).max() == (m // 2) * ((m + 1) // 2)
    assert pairwise_counts_sensitivity(m, relation="add_remove").l1 == (m // 2) * ((m + 1) // 2)


def test_contribution_is_outer_product_and_sums_to_counts():
    rng = np.random.default_rng(0)
    codes = rng.integers(-1, 2, size=(30, 6)).astype(np.int8)
    X = codes.astype(float)
    X[codes < 0] = np.nan
    Y, _ = pairwise_counts(X, device="cpu")
    total = sum(count_contribution(r) for r in codes)
    assert np.array_equal(Y, total)


@pytest.mark.parametrize("seed", range(6))
def test_exhaustive_sparse_graph_is_twice_max_cut(seed):
    m = 5
    rng = np.random.default_rng(seed)
    G = np.triu(rng.random((m, m)) < 0.5, 1)
    G = G | G.T
    C = _contributions(_all_rows(m), graph=G)
    worst = np.abs(C[:, None, :] - C[None, :, :]).sum(axis=2).max()
    cut = _brute_max_cut(G)
    assert max_cut(G) == cut
    s = pairwise_counts_sensitivity(m, graph=G)
    assert worst == 2 * cut == s.l1  # attained: the exact max-cut bound is tight
    assert s.bound in ("sparse-maxcut", "tight")
    assert s.l1 <= 2 * int(np.count_nonzero(np.triu(G, 1)))  # each edge contributes at most 2


@pytest.mark.parametrize("seed", range(5))
def test_spectral_max_cut_bound_is_an_upper_bound(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    m = 14
    G = np.triu(rng.random((m, m)) < 0.3, 1)
    G = G | G.T
    exact = max_cut(G)
    monkeypatch.setattr(sens_mod, "EXACT_MAXCUT_MAX_ITEMS", 0)
    bound, label = max_cut_upper_bound(G)
    assert label == "sparse-spectral"
    assert exact <= bound <= int(np.count_nonzero(np.triu(G, 1)))


def test_spectral_bound_on_complete_and_bipartite_graphs(monkeypatch):
    monkeypatch.setattr(sens_mod, "EXACT_MAXCUT_MAX_ITEMS", 0)
    # complete graph K_m: λ_max(L) = m, bound m²/4 = ⌊m/2⌋⌈m/2⌉ for even m
    K = ~np.eye(10, dtype=bool)
    assert max_cut_upper_bound(K)[0] == 25
    # complete bipartite graph: every edge is cut, the bound must reach |E|
    B = np.zeros((10, 10), dtype=bool)
    B[:4, 4:] = True
    B |= B.T
    assert max_cut_upper_bound(B)[0] == 24


def test_large_graph_uses_spectral_bound():
    rng = np.random.default_rng(3)
    m = 60
    G = np.triu(rng.random((m, m)) < 0.1, 1)
    G = G | G.T
    s = pairwise_counts_sensitivity(m, graph=G)
    assert s.bound == "sparse-spectral"
    assert s.l1 <= 2 * int(np.count_nonzero(np.triu(G, 1)))
    assert s.n_released == int(G.sum())
    # sparser graph, smaller sensitivity than the complete graph
    assert s.l1 < pairwise_counts_sensitivity(m).l1


def test_bad_inputs():
    with pytest.raises(ValueError):
        pairwise_counts_sensitivity(0)
    with pytest.raises(ValueError):
        pairwise_counts_sensitivity(4, bound="loose")
    with pytest.raises(ValueError):
        pairwise_counts_sensitivity(4, relation="swap")
    asym = np.zeros((4, 4), dtype=bool)
    asym[0, 1] = True
    with pytest.raises(ValueError, match="symmetric"):
        pairwise_counts_sensitivity(4, graph=asym)
    with pytest.raises(ValueError):
        pairwise_counts_sensitivity(4, graph=np.ones((3, 3), dtype=bool))


def test_l2_is_rounded_up_so_it_stays_an_upper_bound():
    # Δ₂ = √s for the integer s = ‖D‖₂²; the float square root rounded to nearest falls below
    # √s for many s (e.g. s = 18 at m = 6), which would understate ρ = Δ₂²/(2σ²).
    from fractions import Fraction

    rng = np.random.default_rng(0)
    G = np.triu(rng.random((7, 7)) < 0.5, 1)
    G = G | G.T
    cases = [pairwise_counts_sensitivity(m) for m in range(2, 60)]
    cases += [pairwise_counts_sensitivity(m, bound="paper") for m in range(2, 60)]
    cases += [pairwise_counts_sensitivity(7, graph=G)]
    for s in cases:
        assert Fraction(s.l2) ** 2 >= Fraction(s.l1), s  # an upper bound on √(Δ₁) = Δ₂
        assert s.l2 == pytest.approx(np.sqrt(s.l1), rel=1e-15)


def test_a_printed_sensitivity_is_never_below_the_proved_bound():
    """Six significant digits to nearest printed L1 = 2.006e+06 for 2 006 004 (m = 2003)."""
    from privirt.private.sensitivity import bound_text, pairwise_counts_sensitivity
    from privirt.private.twopl.measurement import PairsGaussian
    from mechanisms.measures import ApproxDP

    s = pairwise_counts_sensitivity(2003)
    assert str(s).startswith("L1 = 2006004, L2 = ")
    l2 = float(str(s).split("L2 = ")[1].split()[0])
    assert l2 >= s.l2 and l2 ** 2 >= 2006004
    assert bound_text(1416.3311) == "1416.34" and bound_text(7.0) == "7"
    notes = PairsGaussian.calibrate(ApproxDP(1.0, 1e-5), n_items=2003).notes[0]
    assert "L2² ≤ 1003002," in notes


@pytest.mark.parametrize("adjacency", [5, None, np.array([1, 0, 1]), np.ones((2, 3)), np.full((2, 2), "a")])
@pytest.mark.parametrize("fn", ["max_cut", "max_cut_upper_bound"])
def test_max_cut_refuses_what_is_not_a_square_adjacency(fn, adjacency):
    # 5 and None gave IndexError (tuple index out of range); a 2 × 3 matrix and [1, 0, 1] gave 2
    with pytest.raises(ValueError, match=r"^adjacency must"):
        getattr(sens_mod, fn)(adjacency)


@pytest.mark.parametrize("fn", ["max_cut", "max_cut_upper_bound"])
def test_max_cut_refuses_a_directed_graph_or_self_loops(fn):
    # the upper triangle alone was read: the edge 1 → 0 of a directed 3-path counted as no edge
    # (max cut 1 where the undirected graph's is 2); a self-loop changed λ_min(A) of the bound
    directed = np.array([[0, 1, 0], [0, 0, 0], [0, 1, 0]])
    with pytest.raises(ValueError, match=r"^adjacency must be symmetric .*A \| A\.T"):
        getattr(sens_mod, fn)(directed)
    loop = np.eye(3, dtype=bool)
    with pytest.raises(ValueError, match=r"^adjacency must have no self-loops"):
        getattr(sens_mod, fn)(loop)
    assert getattr(sens_mod, "max_cut")(directed | directed.T) == 2


@pytest.mark.parametrize("row", [None, "abc", np.array([2, 0, 1]), np.ones((2, 2)), np.array([0.5, 1])])
def test_count_contribution_refuses_what_is_not_a_row_of_codes(row):
    # None and "abc" returned [[0]], and code 2 was taken
    with pytest.raises(ValueError, match=r"^row must be a 1-D array of response codes"):
        sens_mod.count_contribution(row)
    assert sens_mod.count_contribution(np.array([1, 0, -1])).tolist() == [[0, 1, 0], [0, 0, 0], [0, 0, 0]]


@pytest.mark.parametrize("n_items", [True, np.bool_(True)])
def test_pairwise_counts_sensitivity_refuses_a_bool_n_items(n_items):
    with pytest.raises(ValueError, match=r"n_items must be a positive integer"):
        sens_mod.pairwise_counts_sensitivity(n_items)

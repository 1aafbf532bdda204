"""The item × score-group table's sensitivities (brute force over all pairs of rows) and its
information bound's model (``benchmarks/score_group_bound.py``, ``docs/private_2pl.md``,
"Difficulties": an item × score-group table)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ndtr

from mechanisms.measures import ApproxDP
from privirt.private.twopl.bound import jacobian, relative_noise_bounds
from privirt.private.twopl.measurement import PairsGaussian

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("score_group_bound", ROOT / "benchmarks" / "score_group_bound.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sg = _load()


def _max_sq_change(V: np.ndarray) -> int:
    """max over all pairs of rows of ‖v(x) − v(x′)‖² (V: rows × cells)."""
    V = V.astype(np.int64)
    sq = np.sum(V * V, 1)
    return int(np.max(sq[:, None] + sq[None, :] - 2 * V @ V.T))


CASES = [(m, G) for m in range(2, 8) for G in sorted({2, 3, 4, m + 1}) if G <= m + 1]


@pytest.mark.parametrize("m,G", CASES)
def test_part_sensitivities_are_the_brute_force_maxima(m, G):
    groups = sg.score_groups(m, G)
    sens = sg.part_sensitivities(m, groups)
    for part, bound in sens.items():
        assert _max_sq_change(sg.contributions(m, groups, part)) == bound, part
    # the flipped coding never needs more than the totals' m (and the plain table more than 2m − 1)
    assert sens["Tf"] <= m and sens["T"] <= 2 * m - 1


@pytest.mark.parametrize("m,G", [(5, 2), (6, 3), (7, 4), (7, 8)])
def test_combined_releases_within_the_sum_of_their_parts(m, G):
    groups = sg.score_groups(m, G)
    sens = sg.part_sensitivities(m, groups)
    for parts in (("T", "N"), ("Tf", "N"), ("s", "T"), ("s", "Tf"), ("D", "T"), ("s", "D", "T"),
                  ("s", "D", "Tf", "N")):
        V = np.concatenate([sg.contributions(m, groups, p) for p in parts], axis=1)
        assert _max_sq_change(V) <= sum(sens[p] for p in parts), parts


def test_score_groups_are_public_nonempty_runs():
    for m in (3, 5, 20, 50):
        for G in (1, 2, 3, 4, 6, m + 1):
            if G > m + 1:
                continue
            g = sg.score_groups(m, G)
            assert g.shape == (m + 1,) and g[0] == 0 and g[-1] == G - 1
            assert set(np.diff(g)) <= {0, 1}  # every group a non-empty run of scores
            assert np.array_equal(g, sg.score_groups(m, G))
    with pytest.raises(ValueError):
        sg.score_groups(4, 6)


def test_table_model_matches_enumeration_of_response_patterns():
    # P(X_i = 1, R = r) by summing every response pattern's probability (no Lord–Wingersky)
    rng = np.random.default_rng(3)
    m = 5
    a, b = np.exp(rng.normal(0, 0.3, m)), rng.normal(0, 1, m)
    tau = b / np.sqrt(1 + a * a)
    T, N = sg.score_table_model(tau, np.log(a))
    P = ndtr(sg._X[:, None] * a - b)
    X = np.array(list(itertools.product([0, 1], repeat=m)))
    lik = sg._W @ np.prod(np.where(X[None], P[:, None, :], 1 - P[:, None, :]), axis=2)  # (patterns,)
    r = X.sum(1)
    Te = np.array([[lik[(X[:, i] == 1) & (r == s)].sum() for s in range(m + 1)] for i in range(m)])
    Ne = np.array([lik[r == s].sum() for s in range(m + 1)])
    np.testing.assert_allclose(T, Te, atol=1e-12)
    np.testing.assert_allclose(N, Ne, atol=1e-12)
    np.testing.assert_allclose(T.sum(1), ndtr(-tau), atol=1e-7)  # the totals' Φ(−τ)


def test_grouped_jacobian_sums_to_the_totals_rows_of_bound_jacobian():
    tau, a = sg.draw_designs(6, 1)[0]
    full = sg.full_jacobians(tau, a)
    J = sg.jacobians(full, sg.score_groups(6, 3))
    np.testing.assert_allclose(J["pi"], jacobian(tau, a)[:6], atol=2e-6)
    # flipped and plain codings carry the same cells given N: Tf + T = N in the flipped groups
    fl = sg.flipped(6, sg.score_groups(6, 3))
    T, Tf = J["T"].reshape(6, 3, -1), J["Tf"].reshape(6, 3, -1)
    np.testing.assert_allclose((T + Tf)[:, fl], np.broadcast_to(J["N"][fl], T[:, fl].shape), atol=1e-9)


def test_current_release_reproduces_bound_py():
    m, n = 8, 10_000
    designs = sg.draw_designs(m, 2)
    groups = sg.score_groups(m, 2)
    sens = sg.part_sensitivities(m, groups)
    Ks = [sg.fisher_blocks(sg.jacobians(sg.full_jacobians(t, a), groups), sens, n) for t, a in designs]
    f, b1, a1, t1 = sg.best_split(Ks, ("s", "D"), designs, fixed=(0.3, 0.7))
    rho = sg.rho_of(1.0, m)
    meas = PairsGaussian.calibrate(ApproxDP(1.0, 1e-4), n_items=m)
    ref = [relative_noise_bounds(t, a, n, *meas.sigmas) for t, a in designs]
    assert b1 / np.sqrt(rho) == pytest.approx(np.mean([r["b"] for r in ref]), rel=1e-4)
    assert a1 / np.sqrt(rho) == pytest.approx(np.mean([r["a"] for r in ref]), rel=1e-4)
    # a table alone of two groups identifies (τ, log a); a single group (the totals) does not
    assert np.isfinite(sg.best_split(Ks, ("Tf",), designs)[1])
    K1 = [sg.fisher_blocks(sg.jacobians(sg.full_jacobians(t, a), sg.score_groups(m, 1)), {"T": m}, n)
          for t, a in designs]
    assert not sg.identified(K1[0], ("T",))

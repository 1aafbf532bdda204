"""The information bound of an item × score-group table (issue 25; measured, not adopted).

Issue 25 names two releases from which the 2PNO P = Φ(a θ − b), θ ~ N(0, 1), can be estimated:
the totals with second moments (the package's release: totals s_i and disagreement counts D_ij)
and "an item × score-group table".  This measures the second by the linearised information bound
that ``privirt/private/twopl/bound.py`` computes for the first (``docs/private_2pl.md``,
"Difficulties", "An item × score-group table"):

* score groups g = 1 … G are bins of the raw score r = Σ_i x_i with PUBLIC edges (a function of
  m and G only): equal-probability bins of the score distribution under the reference model
  a = 1, b = 0, θ ~ N(0, 1) (:func:`score_groups`);
* the table T[i, g] = #{persons in group g with item i right} (part ``T``), or its *flipped*
  coding (part ``Tf``: the same cell counts persons with item i **wrong** in the groups above the
  middle score, which halves the largest contribution of one row), and the group sizes N_g
  (part ``N``); beside them the item totals (``s``) and the disagreement counts (``D``);
* expected proportions under the 2PNO by Gauss–Hermite quadrature over θ, the score
  distribution given θ by the Lord–Wingersky recursion (item i's own answer inside the score);
  their Jacobian with respect to (τ, log a), τ = b/√(1 + a²), by central differences; the s and
  D rows are ``bound.jacobian``'s;
* each part p of a release spends a share f_p of ρ with discrete Gaussian noise of
  σ_p² = Δ_p²/(2 f_p ρ) (Δ_p² its replace-one L2 sensitivity, squared; the parts' ρ added),
  per-cell variance (σ_p/n)²; ρ from (ε, δ) by the package's own calibration of the 2PNO release
  (``PairsGaussian.calibrate``); the bound (Jᵀ Σ⁻¹ J)⁻¹ mapped to b, a and τ (relative ℓ2, b and
  τ centred) by ``bound.relative_bounds``.

The bound scales as 1/√ρ, so the best split of ρ among a release's parts (a grid of shares in
steps of 0.025, 0.05 for four parts, chosen to minimise b's bound averaged over the design draws)
does not depend on ε.

    python benchmarks/score_group_bound.py              # (10 000, 20) at ε ∈ {0.1, 0.3, 1, 3};
                                                        # (10 000, 5) and (10 000, 50) at ε = 1
    python benchmarks/score_group_bound.py --m 50 --eps 1 --G 10 17 26 51

Deterministic (seeded design draws, no data, no noise): a minute or two on one core.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import ndtr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_private_2pl import DELTA, item_parameters  # noqa: E402
from mechanisms.measures import ApproxDP  # noqa: E402
from privirt.private.twopl.bound import jacobian as pairs_jacobian, relative_bounds  # noqa: E402
from privirt.private.twopl.measurement import TOTALS_SHARE, PairsGaussian  # noqa: E402
from privirt.private.twopl.statistics import pair_index  # noqa: E402

NODES = 81
N_PERSONS = 10_000
#: the private totals estimator's β vs CML at (10 000, 20) (BENCHMARKS.md, "Issue 25: difficulties")
BETA_TOTALS = {0.1: 0.082, 0.3: 0.032, 1.0: 0.0144, 3.0: 0.0071}

_X, _W = hermegauss(NODES)
_W = _W / math.sqrt(2.0 * math.pi)


# --------------------------------------------------------------------------- public score groups


def lord_wingersky(P: np.ndarray) -> np.ndarray:
    """Score distribution given θ: P (nodes, k) item probabilities → (nodes, k + 1) pmf."""
    f = np.zeros((P.shape[0], P.shape[1] + 1))
    f[:, 0] = 1.0
    for j in range(P.shape[1]):
        p = P[:, j:j + 1]
        f[:, 1:j + 2] = f[:, 1:j + 2] * (1 - p) + f[:, :j + 1] * p
        f[:, 0] *= 1 - P[:, j]
    return f


def score_groups(m: int, G: int) -> np.ndarray:
    """The group (0 … G − 1) of each raw score 0 … m: equal-probability bins of the score
    distribution under the public reference model a = 1, b = 0, θ ~ N(0, 1) (a function of m and
    G only).  Cut c_k (k = 1 … G − 1) is the first score whose reference CDF below it reaches
    k/G, moved up or down so that every group is a non-empty run of scores."""
    if not 1 <= G <= m + 1:
        raise ValueError(f"G must be between 1 and m + 1 = {m + 1}, got {G}")
    pmf = _W @ lord_wingersky(np.tile(ndtr(_X)[:, None], (1, m)))
    below = np.concatenate([[0.0], np.cumsum(pmf)[:-1]])  # P(R < r)
    cuts = []
    for k in range(1, G):
        c = int(np.argmin(np.abs(below[1:] - k / G))) + 1
        c = max(c, cuts[-1] + 1 if cuts else 1)
        cuts.append(min(c, m - (G - 1 - k)))
    return np.searchsorted(np.asarray(cuts), np.arange(m + 1), side="right")


def flipped(m: int, groups: np.ndarray) -> np.ndarray:
    """Per group, whether the flipped coding counts wrong answers there: the groups whose scores
    lie above m/2 on average (public)."""
    G = int(groups.max()) + 1
    r = np.arange(m + 1)
    return np.array([r[groups == g].mean() > m / 2 for g in range(G)])


# --------------------------------------------------------------------------- sensitivities


def table_sensitivity(m: int, groups: np.ndarray, flip: bool = False) -> int:
    """Replace-one L2² of the table T (``flip``: of its flipped coding).

    One row with score r in group g contributes its vector of right answers (flipped group:
    wrong answers), of weight w(r) = r (m − r), to column g only.  Replacing x (group g) by x′
    (group g′ ≠ g) changes two disjoint columns: ‖Δ‖² = w(r) + w(r′), largest for the two groups
    of largest max w.  Within one group ‖Δ‖² is the Hamming distance, at most
    min(r + r′, 2m − r − r′) for scores r, r′ (the overlap of the two supports is at least
    r + r′ − m)."""
    G = int(groups.max()) + 1
    fl = flipped(m, groups) if flip else np.zeros(G, bool)
    r = np.arange(m + 1)
    top = sorted((int(np.max(np.where(fl[g], m - r, r)[groups == g])) for g in range(G)), reverse=True)
    across = top[0] + top[1] if G >= 2 else 0
    within = max(min(r1 + r2, 2 * m - r1 - r2) for r1 in r for r2 in r if groups[r1] == groups[r2])
    return int(max(across, within))


def group_size_sensitivity(groups: np.ndarray) -> int:
    """Replace-one L2² of the group sizes N_g: 2 (one group loses a person, another gains one)."""
    return 2 if groups.max() >= 1 else 0


def part_sensitivities(m: int, groups: np.ndarray) -> dict:
    """L2² of every part: s (m), D (⌊m/2⌋⌈m/2⌉, ``docs/private_2pl.md`` §2), T, Tf, N."""
    return {"s": m, "D": (m // 2) * ((m + 1) // 2), "T": table_sensitivity(m, groups),
            "Tf": table_sensitivity(m, groups, flip=True), "N": group_size_sensitivity(groups)}


def contributions(m: int, groups: np.ndarray, part: str) -> np.ndarray:
    """Every row's contribution to a part (2^m rows × cells): for the brute-force tests."""
    X = np.array(list(itertools.product([0, 1], repeat=m)), dtype=np.int64)
    G = int(groups.max()) + 1
    g = groups[X.sum(1)]
    if part == "s":
        return X
    if part == "D":
        i, j = pair_index(m)
        return (X[:, i] != X[:, j]).astype(np.int64)
    if part == "N":
        return np.eye(G, dtype=np.int64)[g]
    fl = flipped(m, groups) if part == "Tf" else np.zeros(G, bool)
    V = np.where(fl[g][:, None], 1 - X, X)
    out = np.zeros((X.shape[0], m, G), dtype=np.int64)
    out[np.arange(X.shape[0]), :, g] = V
    return out.reshape(X.shape[0], -1)


# --------------------------------------------------------------------------- expected proportions


def score_table_model(tau: np.ndarray, log_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expected proportions under the 2PNO at full resolution: (m, m + 1) of P(X_i = 1, R = r)
    (R the raw score, item i's own answer inside it) and (m + 1,) of P(R = r)."""
    a = np.exp(log_a)
    b = tau * np.sqrt(1.0 + a * a)
    P = ndtr(_X[:, None] * a - b)  # (nodes, m)
    m = P.shape[1]
    T = np.zeros((m, m + 1))
    for i in range(m):
        rest = lord_wingersky(np.delete(P, i, axis=1))  # (nodes, m): score of the other items
        T[i, 1:] = (_W * P[:, i]) @ rest  # item i right: score 1 + r
    return T, _W @ lord_wingersky(P)


def group_parts(T: np.ndarray, Ng: np.ndarray, groups: np.ndarray) -> dict:
    """Group a full-resolution table (scores on axis 1 of ``T``, axis 0 of ``Ng``; any trailing
    axes, e.g. a Jacobian's, carried along): T (item-major, flattened), Tf (its flipped coding),
    N, and the totals π (the sum over groups, a check of the quadrature)."""
    m = T.shape[0]
    H = np.eye(int(groups.max()) + 1)[groups]  # (m + 1, G): score → group
    Tg = np.einsum("ir...,rg->ig...", T, H)
    Ngg = np.einsum("r...,rg->g...", Ng, H)
    fl = flipped(m, groups).reshape((1, -1) + (1,) * (Tg.ndim - 2))
    Tf = np.where(fl, Ngg[None] - Tg, Tg)
    flat = (m * Tg.shape[1],) + Tg.shape[2:]
    return {"T": Tg.reshape(flat), "Tf": Tf.reshape(flat), "N": Ngg, "pi": Tg.sum(1)}


def table_model(tau: np.ndarray, log_a: np.ndarray, groups: np.ndarray) -> dict:
    """Expected proportions of every table part at the given groups (see :func:`group_parts`)."""
    return group_parts(*score_table_model(tau, log_a), groups)


def full_jacobians(tau: np.ndarray, a: np.ndarray, h: float = 1e-5) -> dict:
    """∂/∂(τ, log a) of the full-resolution table (``Tr``: (m, m + 1, 2m)) and score
    distribution (``Nr``: (m + 1, 2m)) by central differences, and of s and D from
    ``bound.jacobian``; grouping is linear, so :func:`group_parts` maps these to any G."""
    m = tau.size
    th = np.concatenate([tau, np.log(a)])
    JT, JN = np.empty((m, m + 1, 2 * m)), np.empty((m + 1, 2 * m))
    for c in range(2 * m):
        e = np.zeros(2 * m)
        e[c] = h
        (T1, N1), (T0, N0) = score_table_model(*np.split(th + e, 2)), score_table_model(*np.split(th - e, 2))
        JT[:, :, c], JN[:, c] = (T1 - T0) / (2 * h), (N1 - N0) / (2 * h)
    Jp = pairs_jacobian(tau, a)
    return {"Tr": JT, "Nr": JN, "s": Jp[:m], "D": Jp[m:]}


def jacobians(full: dict, groups: np.ndarray) -> dict:
    """Every part's Jacobian (rows: cells; columns: (τ, log a)) at the given groups."""
    return {**group_parts(full["Tr"], full["Nr"], groups), "s": full["s"], "D": full["D"]}


# --------------------------------------------------------------------------- the bound


def rho_of(epsilon: float, m: int) -> float:
    """ρ that the package's 2PNO release spends at (ε, δ = 1e-4) (its own calibration)."""
    return float(PairsGaussian.calibrate(ApproxDP(epsilon, DELTA), n_items=m).native.rho)


def fisher_blocks(J: dict, sens: dict, n: int) -> dict:
    """Per part, the information about (τ, log a) at ρ = 1 and share 1: 2 n² JᵀJ / Δ²
    (per-cell noise variance (σ/n)² with σ² = Δ²/(2 f ρ))."""
    return {p: 2.0 * n * n * (J[p].T @ J[p]) / sens[p] for p in sens}


def share_grid(k: int, step: float = 0.05) -> np.ndarray:
    """Shares (f_1 … f_k) > 0 summing to 1 on a grid of ``step``."""
    if k == 1:
        return np.ones((1, 1))
    u = int(round(1 / step))
    rows = [c for c in itertools.product(range(1, u), repeat=k - 1) if sum(c) < u]
    return np.array([list(c) + [u - sum(c)] for c in rows]) / u


def information(K: dict, parts: tuple, shares) -> np.ndarray:
    """Σ_p f_p K_p: the information about (τ, log a) at ρ = 1."""
    return sum(f * K[p] for p, f in zip(parts, shares))


def identified(K: dict, parts: tuple) -> bool:
    """Whether the release determines (τ, log a) at all (the information is nonsingular; with
    every share > 0 this does not depend on the split)."""
    w = np.linalg.eigvalsh(information(K, parts, np.ones(len(parts))))
    return bool(w[0] > 1e-10 * w[-1])


def best_split(Ks: list, parts: tuple, designs: list, fixed=None) -> tuple:
    """The grid split (shares > 0 in steps of 0.025; 0.05 for four parts) minimising b's bound
    averaged over the design draws (at ρ = 1), and the mean bounds (b, a, τ) there."""
    if not all(identified(K, parts) for K in Ks):
        return (tuple(np.full(len(parts), np.nan)), math.inf, math.inf, math.inf)
    grid = np.array([fixed]) if fixed is not None else share_grid(len(parts), 0.05 if len(parts) > 3 else 0.025)
    best = None
    for f in grid:
        r = [relative_bounds(np.linalg.inv(information(K, parts, f)), tau, a) for K, (tau, a) in zip(Ks, designs)]
        mb = float(np.mean([x["b"] for x in r]))
        if best is None or mb < best[1]:
            best = (tuple(float(v) for v in f), mb, float(np.mean([x["a"] for x in r])),
                    float(np.mean([x["tau"] for x in r])))
    return best


def draw_designs(m: int, draws: int, seed: int = 50_000) -> list:
    """(τ, a) of the design, a ~ LogNormal(0, 0.3), b ~ N(0, 1), as ``bench_private_2pl.simulate``
    draws them (``item_parameters``; seeds 50 000 + k: its sweep's data sets)."""
    out = []
    for k in range(draws):
        a, b = item_parameters(m, np.random.default_rng(seed + k))
        out.append((b / np.sqrt(1 + a * a), a))
    return out


def releases(m: int, Gs: list) -> list:
    """(label, G, parts, fixed shares or None)."""
    rows = [("s + D (current, f = 0.3)", None, ("s", "D"), (TOTALS_SHARE, 1 - TOTALS_SHARE)),
            ("s + D (best f)", None, ("s", "D"), None)]
    for G in Gs:
        for parts in (("T",), ("T", "N"), ("Tf",), ("Tf", "N"), ("s", "T"), ("s", "Tf"),
                      ("D", "T"), ("s", "D", "T"), ("s", "D", "Tf"), ("s", "D", "Tf", "N")):
            rows.append((" + ".join(parts), G, parts, None))
    return rows


def run(m: int, eps_list: list, draws: int, n: int = N_PERSONS, Gs: list | None = None) -> list:
    Gs = sorted({G for G in (Gs or [2, 3, 4, 6, m + 1]) if G <= m + 1})
    designs = draw_designs(m, draws)
    rhos = {e: rho_of(e, m) for e in eps_list}
    full = [full_jacobians(tau, a) for tau, a in designs]
    cache: dict = {}
    out = []
    for label, G, parts, fixed in releases(m, Gs):
        if G not in cache:
            groups = score_groups(m, G if G is not None else 2)
            sens = part_sensitivities(m, groups)
            Ks = [fisher_blocks(jacobians(F, groups), sens, n) for F in full]
            cache[G] = (groups, sens, Ks)
        groups, sens, Ks = cache[G]
        f, b1, a1, t1 = best_split(Ks, parts, designs, fixed)
        out.append({"m": m, "release": label, "G": G, "shares": f, "sens": {p: sens[p] for p in parts},
                    "b": {e: b1 / math.sqrt(r) for e, r in rhos.items()},
                    "a": {e: a1 / math.sqrt(r) for e, r in rhos.items()},
                    "tau": {e: t1 / math.sqrt(r) for e, r in rhos.items()},
                    "cuts": None if G is None else [int(c) for c in np.flatnonzero(np.diff(groups)) + 1]})
    return out


def print_table(rows: list, eps_list: list) -> None:
    e1 = 1.0 if 1.0 in eps_list else eps_list[-1]
    print("| m | release | G (cuts) | Δ² per part | " + " | ".join(f"b at ε = {e:g}" for e in eps_list)
          + f" | a at ε = {e1:g} | τ at ε = {e1:g} | best shares |")
    print("|---" * (7 + len(eps_list)) + "|")
    for r in rows:
        g = "" if r["G"] is None else f"{r['G']} ({', '.join(map(str, r['cuts']))})"
        print(f"| {r['m']} | {r['release']} | {g} | {', '.join(f'{p} {v}' for p, v in r['sens'].items())} | "
              + " | ".join(f"{r['b'][e]:.4f}" for e in eps_list)
              + f" | {r['a'][e1]:.4f} | {r['tau'][e1]:.4f} | {', '.join(f'{v:.3g}' for v in r['shares'])} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, nargs="*", default=None)
    ap.add_argument("--eps", type=float, nargs="*", default=None)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--n", type=int, default=N_PERSONS)
    ap.add_argument("--G", type=int, nargs="*", default=None, help="numbers of groups (default 2 3 4 6 m+1)")
    args = ap.parse_args(argv)
    cells = ([(m, args.eps or [1.0]) for m in args.m] if args.m
             else [(20, args.eps or [0.1, 0.3, 1.0, 3.0]), (5, [1.0]), (50, [1.0])])
    for m, eps in cells:
        t0 = time.process_time()
        rows = run(m, eps, args.draws, args.n, args.G)
        print(f"\n(n, m) = ({args.n}, {m}), {args.draws} design draws, ρ at ε = "
              + ", ".join(f"{e:g}: {rho_of(e, m):.5f}" for e in eps) + f"; {time.process_time() - t0:.1f} CPU s")
        if m == 20:
            print("totals estimator's β vs CML at (10 000, 20): "
                  + ", ".join(f"ε = {e:g}: {v}" for e, v in BETA_TOTALS.items()))
        print_table(rows, eps)


if __name__ == "__main__":
    main()

"""Private totals under missing completely at random (MCAR) against Algorithm 2, on the release path.

Both estimators are privirt's public private entry points on the same data with missing
cells (NaN), δ = 1e-4:

* ``private_totals_estimate(missing="mcar", n_boot=0)``: noisy correct counts, answered counts
  and the (number answered, observed score) histogram (joint L2² ≤ 2m + 2), the derived split
  and bins, the MCAR fit (``docs/totals.md`` §7);
* ``private_spectral_estimate`` (Algorithm 2, dense discrete Gaussian), which handles missing
  cells natively.

The noise is seeded (accuracy only; the results are NOT private).  Relative error
‖β̂ − β‖/‖β‖ on centred vectors, cells n ∈ {1000, 2000}, m ∈ {20, 50}, ε ∈ {0.3, 1, 3}, 10 %
and 30 % of cells missing independently (``--pattern items``) or with a per-person missing
rate drawn from Beta (mean the same; ``--pattern persons``: still MCAR, but the number answered
varies between persons far more than under independent cells) or with item answer rates that
differ (``--pattern rates``: item i missing independently at the rate × U(0.2, 1.8), drawn per
data set; still MCAR, but the design's reference has equal rates).  The ``k bins`` column is the
number of bins of the number answered the design chose (public n, m, ε).  Then the
coverage of the 95 % intervals (n_boot = 200) at n = 2000, m = 20, 20 % missing.

    python benchmarks/bench_totals_missing.py [--trials 8] [--coverage 30] [--pattern items]
    python benchmarks/bench_totals_missing.py --corner --trials 12     # short tests (default rule)
    python benchmarks/bench_totals_missing.py --corner --corner-m 5,10 --eps 0.1,0.3,1 --trials 24
    python benchmarks/bench_totals_missing.py --corner --corner-m 5,10 --corner-n 200,500,2000 \
        --corner-miss 0.2,0.5 --eps 0.3,1 --trials 24 --corner-coverage 12   # issue 26's MCAR corner

``--corner-coverage N`` adds the coverage of the 95 % intervals (n_boot = 200) over N data sets
per corner cell (± its SE over the data sets); with ``--trials 0`` only that.  ``--abilities
bimodal2.5`` (or ``bimodal1.5``) draws the persons from two groups at ±2.5 (SD 0.5 each) and
difficulties N(0, 1) instead of ``simulate_rasch``; ``--mode-only`` holds every bootstrap
replicate at the ability model's posterior mode (the MCAR intervals before session 11);
``--design B3`` / ``half`` / ``q0.5`` replaces the public design by a variant (``docs/totals.md``
§7.5); ``--abilities skewed`` draws standardised Gamma(2) abilities; ``--mcar-point mean|mode``
and ``--mcar-kappa-top 0.97`` replace the MCAR fit's point rule or extend its κ grid (session 12's
comparisons, ``docs/totals.md`` §7.4; not adopted).  Issue 26's MCAR coverage, paired on data and seeds (``docs/totals.md`` §7.4):

    python benchmarks/bench_totals_missing.py --corner --trials 0 --corner-coverage 16 --corner-m 5,10 \
        --corner-n 200,500 --corner-miss 0.2,0.5 --eps 0.3,1 --abilities bimodal2.5 --mode-only --save before.npz
    python benchmarks/bench_totals_missing.py ...same... --save after.npz --against before.npz

``--pattern rare`` measures one rarely answered item instead (session 23, ``docs/totals.md`` §7.3):
item 0 answered by a share of the persons (``--rare-share``, MCAR), every other item by everyone;
n = 2000, m = 10, ε = 1 unless ``--rare-n``/``--rare-m``/``--eps`` say otherwise, ``--rare-datasets``
data sets per share.  Per share: the relative error and RMSE of the other items (all vectors centred
over all m items, the intervals' parametrisation), the rare item's RMSE, for the totals estimator's
default call (``private_totals_estimate(missing="mcar")``, n_boot = 200) and Algorithm 2
(``estimator="spectral"``, as above) with the paired MSE ratio of the other items; the coverage of
the totals estimator's 95 % intervals for the other items and for the rare item (± SE over the data
sets), their mean widths, the median ``info["shrinkage"]`` and seconds per totals call.  Only the
public entry points are used, so the same script scores an older checkout (copy it into that
checkout's ``benchmarks/``: the script puts its own checkout first on ``sys.path``):

    python benchmarks/bench_totals_missing.py --pattern rare --rare-share 0.03,0.1,0.3 --rare-datasets 60 \
        --seed 27100000 [--save FILE.npz] [--against FILE.npz]

``--save FILE.npz`` keeps the totals estimator's squared errors per data set and cell;
``--against FILE.npz`` (saved by another version of the code, same seeds) adds the paired MSE
ratio before/after (> 1: this code better) with its SE.

``--corner`` also scores Algorithm 2 with its default estimator (the default call where the
chooser picks it; column "A2 default/totals": its MSE over the totals estimator's, > 1: totals
better) and gives every MSE ratio its delta-method SE over the paired data sets.

Seeds from 30 000 (``--tune``: from 0).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import privirt  # noqa: E402
from mechanisms.measures import ApproxDP  # noqa: E402
from privirt.private import TotalsGaussian  # noqa: E402

DELTA = 1e-4


def centred(b):
    b = np.asarray(b, dtype=float)
    return b - b.mean()


#: ``--abilities``: bimodal groups ±s (SD 0.5 each) as in ``bench_private_totals.GRID_SHAPES``
ABILITIES = ("normal", "bimodal1.5", "bimodal2.5", "skewed")


def make_data(n: int, m: int, rate: float, pattern: str, rng: np.random.Generator, abilities: str = "normal"):
    """(X with NaN for missing, centred β): ``simulate_rasch`` (``abilities`` other than normal:
    two groups at ±s + N(0, 0.5²), difficulties N(0, 1)) then an MCAR mask."""
    if abilities == "normal":
        X, _, beta = privirt.simulate_rasch(n, m, seed=int(rng.integers(2**31)))
    else:
        r2 = np.random.default_rng(int(rng.integers(2**31)))
        if abilities == "skewed":  # standardised Gamma(2), as bench_private_totals' "skewed"
            theta = (r2.gamma(2.0, 1.0, n) - 2.0) / np.sqrt(2.0)
        else:
            sep = float(abilities[len("bimodal"):])
            theta = np.where(r2.random(n) < 0.5, -sep, sep) + 0.5 * r2.standard_normal(n)
        beta = r2.standard_normal(m)
        X = r2.random((n, m)) < 1.0 / (1.0 + np.exp(beta[None, :] - theta[:, None]))
    X = np.asarray(X, dtype=float)
    if pattern == "items":
        miss = rng.random(X.shape) < rate
    elif pattern == "rates":  # item i missing at rate × U(0.2, 1.8): answer rates differ by item
        miss = rng.random(X.shape) < np.clip(rate * rng.uniform(0.2, 1.8, size=(1, m)), 0.0, 0.95)
    elif pattern == "rare":  # item 0 missing for a share `rate` of the persons, the others complete
        miss = np.zeros(X.shape, dtype=bool)
        miss[:, 0] = rng.random(n) < rate
    elif pattern == "persons":  # person-level rate ~ Beta(2, 2(1 − rate)/rate): mean `rate`
        r = rng.beta(2.0, 2.0 * (1 - rate) / rate, size=(n, 1))
        miss = rng.random(X.shape) < r
    else:
        raise ValueError(f"pattern must be 'items', 'rates', 'rare' or 'persons', got {pattern!r}")
    X[miss] = np.nan
    return X, centred(beta)


def one_pair(X: np.ndarray, beta: np.ndarray, eps: float, seed: int,
             default: bool = False) -> tuple[float, ...]:
    """(relative error totals, relative error Alg. 2, squared errors) on the same data; with
    ``default`` also the squared error of Algorithm 2 with its default estimator (``"auto"``:
    what the default call gives where :mod:`privirt.private.choose` picks Algorithm 2)."""
    nb = np.linalg.norm(beta)
    t = centred(privirt.private_totals_estimate(X, epsilon=eps, delta=DELTA, seed=seed, n_boot=0,
                                                missing="mcar").beta)
    a = centred(privirt.private_spectral_estimate(X, epsilon=eps, delta=DELTA, seed=seed, n_boot=0, estimator="spectral").beta)
    et, ea = t - beta, a - beta
    out = (float(np.linalg.norm(et) / nb), float(np.linalg.norm(ea) / nb), float(et @ et), float(ea @ ea))
    if default:
        d = centred(privirt.private_spectral_estimate(X, epsilon=eps, delta=DELTA, seed=seed, n_boot=0).beta) - beta
        out += (float(d @ d),)
    return out


def ratio_se(a, t):
    """MSE ratio mean(a)/mean(t) of paired squared errors and its delta-method SE."""
    a, t = np.asarray(a, dtype=float), np.asarray(t, dtype=float)
    r = a.mean() / t.mean()
    return float(r), float(np.std(a - r * t, ddof=1) / np.sqrt(len(a)) / t.mean()) if len(a) > 1 else float("nan")


def corner_coverage(n: int, m: int, miss: float, eps: float, pattern: str, seed0: int,
                    datasets: int, abilities: str = "normal") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Whether each item's 95 % interval (n_boot = 200) covers its centred difficulty, over
    ``datasets`` data sets of a corner cell (their own seeds), each data set's mean width and its
    fit's histogram share φ (``info["histogram_share"]``, ``docs/totals.md`` §5.4)."""
    hits, width, share = [], [], []
    for k in range(datasets):
        rng = np.random.default_rng([seed0, 91, n, m, int(eps * 1000), int(miss * 100), k])
        X, beta = make_data(n, m, miss, pattern, rng, abilities)
        fit = privirt.private_totals_estimate(X, epsilon=eps, delta=DELTA, seed=seed0 + k, missing="mcar")
        lo, hi = fit.ci["lo"].to_numpy(), fit.ci["hi"].to_numpy()
        hits.append((lo <= beta) & (beta <= hi))
        width.append(np.mean(hi - lo))
        share.append(fit.info["histogram_share"])
    return np.array(hits, dtype=float), np.array(width), np.array(share)


def rare_item(n: int, m: int, share: float, eps: float, seed0: int, datasets: int,
              abilities: str = "normal") -> dict[str, np.ndarray]:
    """Item 0 answered by ``share`` of the persons (MCAR), the others by everyone, over ``datasets``
    data sets (their own seeds): per data set the centred errors of the totals estimator's default
    call and of Algorithm 2 (``estimator="spectral"``), whether each item's 95 % interval covers its
    centred difficulty, the intervals' widths, ``info["shrinkage"]`` and the call's seconds."""
    out: dict[str, list] = {"err": [], "err_a2": [], "hits": [], "width": [], "shrink": [], "secs": [],
                            "beta_sq": []}
    for k in range(datasets):
        rng = np.random.default_rng([seed0, 23, n, m, int(eps * 1000), int(round(share * 1000)), k])
        X, beta = make_data(n, m, 1.0 - share, "rare", rng, abilities)
        t1 = time.perf_counter()
        fit = privirt.private_totals_estimate(X, epsilon=eps, delta=DELTA, seed=seed0 + k, missing="mcar")
        out["secs"].append(time.perf_counter() - t1)
        a = privirt.private_spectral_estimate(X, epsilon=eps, delta=DELTA, seed=seed0 + k, n_boot=0,
                                              estimator="spectral")
        lo, hi = fit.ci["lo"].to_numpy(), fit.ci["hi"].to_numpy()
        out["err"].append(centred(fit.beta) - beta)
        out["err_a2"].append(centred(a.beta) - beta)
        out["hits"].append((lo <= beta) & (beta <= hi))
        out["width"].append(hi - lo)
        out["shrink"].append(float(fit.info.get("shrinkage", np.nan)))
        out["beta_sq"].append(float(beta[1:] @ beta[1:]))
    return {key: np.array(v, dtype=float) for key, v in out.items()}


def rare_section(args, seed0: int, saved: dict, before: dict | None) -> None:
    """``--pattern rare``: one table row per answer share of item 0 (see the module docstring)."""
    n, m = args.rare_n, args.rare_m
    eps_list = [float(e) for e in (args.eps or "1").split(",")]
    print(f"## one rarely answered item (item 0, MCAR), the other {m - 1} answered by all: n={n}, m={m}, "
          f"delta={DELTA:g}, {args.rare_datasets} data sets per share, abilities: {args.abilities}, "
          f"seeds from {seed0}; privirt from {Path(privirt.__file__).resolve().parent}; seeded noise, NOT private")
    print("errors on vectors centred over all items; 'others': items 1..m-1; coverage ± SE over data sets")
    print(f"{'share':>5} {'eps':>4} {'K':>2} | {'rel oth T':>9} {'rel oth A2':>10} | {'A2/T MSE':>8} {'±SE':>5} | "
          f"{'RMSE oth T':>10} {'A2':>5} | {'RMSE rare T':>11} {'A2':>5} | {'cov oth':>7} {'±SE':>5} "
          f"{'cov rare':>8} {'±SE':>5} | {'w oth':>5} {'w rare':>6} | {'shrink':>6} {'s/call':>6}")
    for eps in eps_list:
        for share in [float(v) for v in args.rare_share.split(",")]:
            r = rare_item(n, m, share, eps, seed0, args.rare_datasets, args.abilities)
            K = len(TotalsGaussian.calibrate(ApproxDP(eps, DELTA), n_persons=n, n_items=m,
                                             missing="mcar").k_edges) - 1
            sq, sq_a2 = (r["err"][:, 1:] ** 2).sum(axis=1), (r["err_a2"][:, 1:] ** 2).sum(axis=1)
            rat, rse = ratio_se(sq_a2, sq)
            per = r["hits"][:, 1:].mean(axis=1)  # SE over the data sets (items of one data set correlate)
            rare = r["hits"][:, 0]
            d = r["hits"].shape[0]
            key = f"rare-{share:g}-{n}-{m}-{eps:g}"
            saved[key + "-sq"], saved[key + "-hits"], saved[key + "-rare-sq"] = sq, r["hits"], r["err"][:, 0] ** 2
            print(f"{share:>5g} {eps:>4g} {K:>2} | {np.mean(np.sqrt(sq / r['beta_sq'])):>9.3f} "
                  f"{np.mean(np.sqrt(sq_a2 / r['beta_sq'])):>10.3f} | {rat:>8.2f} {rse:>5.2f} | "
                  f"{np.sqrt(sq.mean() / (m - 1)):>10.3f} {np.sqrt(sq_a2.mean() / (m - 1)):>5.3f} | "
                  f"{np.sqrt(np.mean(r['err'][:, 0] ** 2)):>11.3f} {np.sqrt(np.mean(r['err_a2'][:, 0] ** 2)):>5.3f} | "
                  f"{per.mean():>7.3f} {per.std(ddof=1) / np.sqrt(d):>5.3f} {rare.mean():>8.3f} "
                  f"{rare.std(ddof=1) / np.sqrt(d):>5.3f} | {r['width'][:, 1:].mean():>5.2f} {r['width'][:, 0].mean():>6.2f} | "
                  f"{np.median(r['shrink']):>6.2f} {np.median(r['secs']):>6.2f}", flush=True)
            if before is not None and key + "-sq" in before and len(before[key + "-sq"]) >= d:
                # paired: data set k has the same data and seeds in both runs
                br, bse = ratio_se(before[key + "-sq"][:d], sq)
                dc = per - before[key + "-hits"][:d, 1:].mean(axis=1)
                dr = rare - before[key + "-hits"][:d, 0]
                rr = np.sqrt(before[key + "-rare-sq"][:d].mean() / saved[key + "-rare-sq"].mean())
                print(f"{'':>13}before/after: MSE others {br:.2f} ± {bse:.2f}, RMSE rare ×{rr:.2f} (> 1: this code "
                      f"better); coverage after − before: others {dc.mean():+.3f} ± {dc.std(ddof=1) / np.sqrt(d):.3f}, "
                      f"rare {dr.mean():+.3f} ± {dr.std(ddof=1) / np.sqrt(d):.3f}", flush=True)


def use_design(name: str) -> None:
    """Replace the MCAR design (``marginal_missing.mcar_design``, still a function of public n, m,
    ρ) by a variant, and empty the calibration cache (``--design``)."""
    import functools

    from privirt.private import measurements
    from privirt.private.totals import marginal_missing as mm

    design = mm.mcar_design
    if name.startswith("B"):
        variant = functools.partial(design, score_bins=[int(name[1:])])
    elif name == "half":
        def variant(n, m, rho, **kw):
            return design(n, m, rho, score_bins=range(3, max(3, min((m + 2) // 2, 16)) + 1), **kw)
    elif name.startswith("q"):
        variant = functools.partial(design, q=float(name[1:]))
    else:
        raise SystemExit(f"--design: unknown design {name!r}; use B<number>, half or q<share>")
    mm.mcar_design = variant
    measurements._calibrated_totals.cache_clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--coverage", type=int, default=30, help="data sets per ε for the coverage check (0: skip)")
    ap.add_argument("--pattern", choices=("items", "rates", "persons", "rare"), default="items",
                    help="the MCAR mask; 'rare': one rarely answered item, its own table (--rare-*)")
    ap.add_argument("--rare-share", default="0.03,0.1,0.3",
                    help="--pattern rare: shares of the persons who answer item 0 (comma-separated)")
    ap.add_argument("--rare-n", type=int, default=2000, help="--pattern rare: number of persons")
    ap.add_argument("--rare-m", type=int, default=10, help="--pattern rare: number of items")
    ap.add_argument("--rare-datasets", type=int, default=40, help="--pattern rare: data sets per share")
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--corner", action="store_true",
                    help="only short tests: n in {200, 500, 1000}, m = 10, 20%% missing (the default-method rule)")
    ap.add_argument("--eps", default=None, help="privacy levels (comma-separated; default 0.3,1,3, "
                                                 "--pattern rare: 1)")
    ap.add_argument("--corner-n", default="200,500,1000", help="--corner: numbers of persons")
    ap.add_argument("--corner-m", default="10", help="--corner: numbers of items")
    ap.add_argument("--corner-miss", default="0.2", help="--corner: shares of cells missing")
    ap.add_argument("--corner-coverage", type=int, default=0,
                    help="--corner: data sets per cell for the coverage of the 95%% intervals (0: skip)")
    ap.add_argument("--abilities", choices=ABILITIES, default="normal",
                    help="--corner: the persons' abilities (bimodal S: two groups at ±S, SD 0.5 each)")
    ap.add_argument("--mode-only", action="store_true",
                    help="every bootstrap replicate at the ability model's posterior mode (the intervals "
                         "before session 11; intervals.MODEL_DRAWS off) for a paired before/after")
    ap.add_argument("--design", default=None,
                    help="another public MCAR design, for paired comparisons: 'B3' (only 3 score bins; any "
                         "B), 'half' (at most ceil((m+1)/2) score bins) or 'q0.5' (the reference mask at 50%% "
                         "missing instead of 20%%)")
    ap.add_argument("--mcar-point", choices=("nearest", "mode", "mean"), default=None,
                    help="the MCAR fit's point rule (docs/totals.md §7.6 experiments): the grid point nearest "
                         "the posterior mean (the rule), the posterior mode, or the posterior mean of β")
    ap.add_argument("--mcar-kappa-top", type=float, default=None,
                    help="the MCAR fit's κ grid reaches this value (e.g. 0.97: the first grid gets the point and "
                         "the refinement is clipped there; docs/totals.md §7.6 experiments)")
    ap.add_argument("--seed", type=int, default=None, help="first seed (default 30 000; --tune 0)")
    ap.add_argument("--save", default=None, help="save the totals' squared errors per cell (.npz)")
    ap.add_argument("--against", default=None, help="a --save file of another version: paired MSE ratio")
    args = ap.parse_args()
    if args.pattern == "rare" and args.corner:
        ap.error("--pattern rare has its own table; leave out --corner")
    if args.pattern == "rare" and (args.rare_n < 1 or args.rare_m < 2 or args.rare_datasets < 2):
        ap.error("--pattern rare needs --rare-n >= 1, --rare-m >= 2 and --rare-datasets >= 2")
    if args.pattern == "rare":
        try:
            shares = [float(v) for v in args.rare_share.split(",")]
        except ValueError:
            shares = []
        if not shares or not all(0 < v <= 1 for v in shares):
            ap.error(f"--rare-share: shares of the persons must be numbers in (0, 1], got {args.rare_share}")
    saved, before = {}, (dict(np.load(args.against)) if args.against else None)
    seed0 = args.seed if args.seed is not None else 0 if args.tune else 30_000
    if args.design:
        use_design(args.design)
    if args.mcar_point or args.mcar_kappa_top:
        from privirt.private.totals import marginal_missing as mm
        if args.mcar_point:
            mm.MCAR_POINT = args.mcar_point
        if args.mcar_kappa_top:
            mm.MCAR_KAPPA_GRID = np.append(mm.KAPPA_GRID[mm.KAPPA_GRID < args.mcar_kappa_top], args.mcar_kappa_top)
            mm.MCAR_KAPPA_TOP = args.mcar_kappa_top
    if args.mode_only:
        from privirt.private.totals import intervals
        intervals.MODEL_DRAWS = False
    t0 = time.time()
    if args.pattern == "rare":
        rare_section(args, seed0, saved, before)
        if args.save:
            np.savez(args.save, **saved)
        print(f"\ntotal time {time.time() - t0:.0f} s")
        return
    args.eps = args.eps or "0.3,1,3"
    print(f"## MCAR totals (release path) vs Algorithm 2 ({args.trials} trials, delta={DELTA:g}, "
          f"mask: {args.pattern}, abilities: {args.abilities}{', replicates at the mode' if args.mode_only else ''}"
          f"{f', MCAR point {args.mcar_point}' if args.mcar_point else ''}"
          f"{f', MCAR kappa to {args.mcar_kappa_top:g}' if args.mcar_kappa_top else ''}; "
          f"seeded noise, NOT private)")
    print(f"{'miss':>5} {'n':>5} {'m':>3} {'eps':>4} | {'rel totals':>10} {'rel alg2':>9} | {'MSE ratio':>9} "
          f"{'±SE':>5} | {'k bins':>6}" + (f" | {'A2 default/totals':>17} {'±SE':>5}" if args.corner else "")
          + (f" | {'coverage':>8} {'±SE':>5} {'width':>5} {'φ':>5}" if args.corner and args.corner_coverage else ""))
    grid = (([float(v) for v in args.corner_miss.split(",")], [int(v) for v in args.corner_n.split(",")], [int(v) for v in args.corner_m.split(",")])
            if args.corner else ([0.1, 0.3], [1000, 2000], [20, 50]))
    if args.corner:
        args.coverage = 0
    for miss in grid[0] if args.trials > 0 or (args.corner and args.corner_coverage) else ():
        for n in grid[1]:
            for m in grid[2]:
                for eps in [float(e) for e in args.eps.split(",")]:
                    r = []
                    for k in range(args.trials):  # --corner --trials 0: the corner's coverage only
                        rng = np.random.default_rng([seed0, n, m, int(eps * 1000), int(miss * 100), k])
                        X, beta = make_data(n, m, miss, args.pattern, rng, args.abilities)
                        r.append(one_pair(X, beta, eps, seed0 + k, default=args.corner))
                    r = np.array(r).reshape(args.trials, -1) if r else np.full((1, 5), np.nan)
                    K = len(TotalsGaussian.calibrate(
                        ApproxDP(eps, DELTA), n_persons=n, n_items=m, missing="mcar").k_edges) - 1
                    rat, se = ratio_se(r[:, 3], r[:, 2]) if args.trials else (np.nan, np.nan)
                    extra = ""
                    key = f"{miss:g}-{n}-{m}-{eps:g}"
                    if args.trials:
                        saved[key] = r[:, 2]
                    if before is not None and key in before and args.trials:
                        br, bse = ratio_se(before[key], r[:, 2])
                        extra += f" | before/after {br:.3f} ± {bse:.3f}"
                    if args.corner:
                        dr, dse = ratio_se(r[:, 4], r[:, 2]) if args.trials else (np.nan, np.nan)
                        extra = f" | {dr:>17.2f} {dse:>5.2f}" + extra
                    if args.corner and args.corner_coverage:
                        cov, width, share = corner_coverage(n, m, miss, eps, args.pattern, seed0,
                                                            args.corner_coverage, args.abilities)
                        saved[key + "-coverage"], saved[key + "-width"], saved[key + "-share"] = cov, width, share
                        per = cov.mean(axis=1)  # SE over the data sets (items of one data set correlate)
                        cse = per.std(ddof=1) / np.sqrt(per.size)
                        extra += f" | {per.mean():>8.3f} {cse:>5.3f} {width.mean():>5.2f} {np.median(share):>5.2f}"
                        if before is not None and key + "-width" in before and len(before[key + "-width"]) >= per.size:
                            # paired: data set k has the same seeds in both runs
                            d = per - before[key + "-coverage"].mean(axis=1)[:per.size]
                            wb = before[key + "-width"][:per.size].mean()
                            extra += (f" | coverage after − before {d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(d.size):.3f}"
                                      f", width ×{width.mean() / wb:.2f}")
                    print(f"{miss:>5.0%} {n:>5} {m:>3} {eps:>4g} | {r[:, 0].mean():>10.3f} {r[:, 1].mean():>9.3f} | "
                          f"{rat:>9.2f} {se:>5.2f} | {K:>6}{extra}", flush=True)
    if args.save:
        np.savez(args.save, **saved)
    if args.coverage:
        print(f"\n## coverage of the 95% intervals: n=2000, m=20, 20% missing, n_boot=200, "
              f"{args.coverage} data sets per eps")
        print(f"{'eps':>4} | {'coverage':>8} {'mean width':>10} {'s/call':>7}")
        for eps in (0.3, 1.0, 3.0):
            hits, width, secs = [], [], []
            for k in range(args.coverage):
                rng = np.random.default_rng([seed0, 77, int(eps * 1000), k])
                X, beta = make_data(2000, 20, 0.2, args.pattern, rng)
                t1 = time.perf_counter()
                fit = privirt.private_totals_estimate(X, epsilon=eps, delta=DELTA, seed=seed0 + k,
                                                      missing="mcar")
                secs.append(time.perf_counter() - t1)
                lo, hi = fit.ci["lo"].to_numpy(), fit.ci["hi"].to_numpy()
                hits.append((lo <= beta) & (beta <= hi))
                width.append(np.mean(hi - lo))
            print(f"{eps:>4g} | {np.mean(hits):>8.3f} {np.mean(width):>10.3f} {np.median(secs):>7.2f}", flush=True)
    print(f"\ntotal time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()

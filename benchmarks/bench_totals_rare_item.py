"""MCAR totals intervals when one item is answered by few persons (``docs/totals.md`` §7.3 step 1).

Rasch data (``simulate_rasch``, n persons, m items), 20 % of the cells missing independently and
item 0 answered by each person with probability ``rate`` (0: by nobody), ε = 1, noise seeded
(accuracy only; NOT private).  Reported over the data sets: the coverage of the 95 % intervals of
the other items (± its SE), their mean width, the RMS error of their centre, the rare item's
coverage, and how many point estimates lie outside their own interval
(``bench_totals_missing.py --pattern rare`` measures one rare item with the other items complete,
against Algorithm 2, without the last count).

    python benchmarks/bench_totals_rare_item.py --n 1000 --rate 0.02 --datasets 40
    python benchmarks/bench_totals_rare_item.py --n 400 --rate 0.05 --datasets 40
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import privirt


def run(n: int, m: int, rate: float, datasets: int, n_boot: int, seed: int) -> dict:
    """The figures above over ``datasets`` data sets (seeds from ``seed`` on)."""
    other, rare, width, err, outside = [], [], [], [], 0
    for r in range(datasets):
        s = seed + 11 * r
        X, _, b = privirt.simulate_rasch(n, m, seed=s)
        X = np.asarray(X, dtype=float)
        rng = np.random.default_rng(s + 1)
        miss = rng.random(X.shape) < 0.2
        miss[:, 0] = rng.random(n) >= rate
        X[miss] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = privirt.private_totals_estimate(X, epsilon=1.0, missing="mcar", seed=s + 2, n_boot=n_boot).to_frame()
        truth = np.asarray(b) - np.mean(b)
        lo, hi = d["lo"].to_numpy(), d["hi"].to_numpy()
        hit = (lo <= truth) & (truth <= hi)
        other.append(hit[1:].mean())
        rare.append(hit[0])
        width.append(np.mean(hi[1:] - lo[1:]))
        err.append(np.sqrt(np.mean(((lo + hi)[1:] / 2 - truth[1:]) ** 2)))
        outside += int(((d["beta"] < d["lo"]) | (d["beta"] > d["hi"])).sum())
    return {"coverage_other": float(np.mean(other)), "se": float(np.std(other) / np.sqrt(datasets)),
            "width_other": float(np.mean(width)), "centre_rmse_other": float(np.mean(err)),
            "coverage_rare": float(np.mean(rare)), "point_outside": outside, "estimates": m * datasets}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--m", type=int, default=6)
    ap.add_argument("--rate", type=float, default=0.02, help="item 0's answer rate (0: nobody)")
    ap.add_argument("--datasets", type=int, default=40)
    ap.add_argument("--n-boot", type=int, default=50)
    ap.add_argument("--seed", type=int, default=95_500_100)
    a = ap.parse_args()
    res = run(a.n, a.m, a.rate, a.datasets, a.n_boot, a.seed)
    print(f"n={a.n} m={a.m} rate={a.rate} datasets={a.datasets}: "
          f"other items coverage {res['coverage_other']:.3f} ± {res['se']:.3f}, width {res['width_other']:.2f}, "
          f"centre RMSE {res['centre_rmse_other']:.3f}; rare item coverage {res['coverage_rare']:.2f}; "
          f"point outside its interval {res['point_outside']} of {res['estimates']}")


if __name__ == "__main__":
    main()

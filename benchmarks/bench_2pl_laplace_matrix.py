"""The private 2PL's Laplace intervals from the fit's Newton matrix (the rule before session 17:
the Newton matrix where positive definite, else the Gauss–Newton matrix) against the Gauss–Newton
matrix (the expected information; the rule now), on the same releases where the noise swamps the
pairs: coverage of a, b and τ by 95 % intervals around the same estimate, and the median SDs.

Data ``bench_private_2pl.simulate(n, m, seed)``, ``release_2pl(..., seed=seed + 1)`` (δ = 1e-4),
seed = 283 000 + 1000·k + m + 7·round(100 ε) + 13·(n mod 997); only releases on the Laplace route
(``intervals="auto"``) are summarised.

Run::

    python benchmarks/bench_2pl_laplace_matrix.py --cells "500,200,0.3;700,250,0.2" --sets 8 --out lap.jsonl
    python benchmarks/bench_2pl_laplace_matrix.py --summary lap.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import by_cell, jsonl_rows  # noqa: E402
from bench_private_2pl import DELTA, simulate  # noqa: E402
from privirt.private.twopl import estimate as E  # noqa: E402
from privirt.private.twopl import release_2pl  # noqa: E402

CELLS = "300,20,0.3;400,30,0.1;500,40,0.3;1000,20,0.1;1000,50,0.1;300,80,0.3;400,60,0.2;400,100,0.5;" \
        "600,120,0.3;500,200,0.3;700,250,0.2;500,300,0.3;1000,300,0.3"


def _coverage(C: np.ndarray, a, b, at, bt, z: float) -> dict:
    m = a.size
    ti, li = np.arange(m), np.arange(m, 2 * m)
    se_t, se_la = np.sqrt(C[ti, ti]), np.sqrt(C[li, li])
    tau, tt = b / np.sqrt(1 + a * a), bt / np.sqrt(1 + at * at)
    q, g = np.sqrt(1 + a * a), tau * a * a / np.sqrt(1 + a * a)
    se_b = np.sqrt(np.maximum(q * q * se_t**2 + g * g * se_la**2 + 2 * q * g * C[ti, li], 0))
    return dict(cov_a=float(np.mean(np.abs(np.log(a) - np.log(at)) <= z * se_la)),
                cov_b=float(np.mean(np.abs(b - bt) <= z * se_b)), cov_tau=float(np.mean(np.abs(tau - tt) <= z * se_t)),
                sd_la=float(np.median(se_la)), sd_b=float(np.median(se_b)), sd_t=float(np.median(se_t)))


def run(cells: str, sets: int, out: str | None) -> None:
    captured = {}
    laplace = E._laplace

    def spy(fit):
        captured["fit"] = fit
        return laplace(fit)

    E._laplace = spy
    z = float(stats.norm.ppf(0.975))
    for cell in cells.split(";"):
        n, m, e = cell.split(",")
        n, m, e = int(n), int(m), float(e)
        for k in range(sets):
            seed = 283_000 + 1000 * k + m + 7 * int(round(100 * e)) + 13 * (n % 997)
            X, at, bt = simulate(n, m, seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rl = release_2pl(X, epsilon=e, delta=DELTA, seed=seed + 1)
                _, _, a, b, _, (share, _, name) = E._point(rl)
            fit = captured["fit"]
            newton = E._inverse(fit.hessian[0][0])
            gn = E._inverse(fit.gauss_newton[0])
            if gn is None:  # (never seen: the Gauss–Newton matrix is positive definite with the priors)
                print(json.dumps(dict(n=n, m=m, eps=e, k=k, skipped="no positive definite Gauss–Newton matrix")))
                continue
            row = dict(n=n, m=m, eps=e, k=k, share=share, share_from=name,
                       route="laplace" if gn is not None and share < E.PRIOR_HELD_SHARE else "bootstrap")
            row["newton_rule"] = _coverage(newton if newton is not None else gn, a, b, at, bt, z)
            row["gauss_newton"] = _coverage(gn, a, b, at, bt, z)
            print(json.dumps(row), flush=True)
            if out:
                with open(out, "a") as fh:
                    fh.write(json.dumps(row) + "\n")


def summary(path: str) -> None:
    cells = by_cell(r for r in jsonl_rows(path) if "skipped" not in r)
    print("| n | m | ε | releases (Laplace route) | cov τ: Newton rule / Gauss–Newton (± SE over releases) "
          "| cov b | cov a | SD τ (release median, mean) | SD b (same) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (n, m, e), rs in sorted(cells.items()):
        lap = [r for r in rs if r["route"] == "laplace"]
        if not lap:
            print(f"| {n} | {m} | {e:g} | 0 of {len(rs)} | | | | | |")
            continue

        def both(key, se=False):
            x = [np.array([r[t][key] for r in lap]) for t in ("newton_rule", "gauss_newton")]
            if se:
                return " / ".join(f"{v.mean():.3f} ± {v.std(ddof=1) / np.sqrt(v.size):.3f}" for v in x)
            return " / ".join(f"{v.mean():.3f}" for v in x)

        print(f"| {n} | {m} | {e:g} | {len(lap)} of {len(rs)} | {both('cov_tau', True)} | {both('cov_b', True)} "
              f"| {both('cov_a')} | {both('sd_t')} | {both('sd_b')} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=CELLS, help='"n,m,eps;..."')
    ap.add_argument("--sets", type=int, default=8)
    ap.add_argument("--out", default=None, help="append one JSON line per release")
    ap.add_argument("--summary", default=None, metavar="FILE", help="summarise a --out file")
    args = ap.parse_args()
    if args.summary:
        summary(args.summary)
    else:
        run(args.cells, args.sets, args.out)


if __name__ == "__main__":
    main()

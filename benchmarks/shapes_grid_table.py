"""The issue-26 shapes grid's table from the JSON-lines files of ``bench_private_totals.py --only shapes_grid``.

Per (m, n, ε), over the shapes found: the totals estimator's worst shape (MSE ratio Algorithm 2
as published / totals ± SE), the geometric mean over the shapes, the same for the default call
under the *current* chooser (``private.choose``; "A2" where it picks Algorithm 2, whose default
estimator must then have been scored by the run: a cell where the run's default was the totals
estimator but the chooser now picks Algorithm 2 is shown as "?"), the lowest coverage of the
totals estimator's 95 % intervals ± SE (shape) and the highest, the default's coverage range,
the binomial band of one cell and the number of shapes; then which cells miss the targets
(a cell misses only when ±2 SE excludes the target).

    python benchmarks/shapes_grid_table.py --ratios ratios.jsonl --coverage coverage.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_private_totals import DELTA, coverage_outside, coverage_se, ratio_se  # noqa: E402
from privirt.private.choose import default_private_method  # noqa: E402


def load(paths):
    """{(shape, m, n, ε): rows} from JSON-lines files (a later line for the same cell wins)."""
    out = {}
    for p in paths or ():
        for line in Path(p).read_text().splitlines():
            if line.strip():
                d = json.loads(line)
                out[(d["shape"], int(d["m"]), int(d["n"]), float(d["eps"]))] = np.array(d["rows"], dtype=float)
    return out


def default_errors(r, m, n, eps):
    """The default call's squared errors and coverages under the current chooser, or None if
    the run did not score the Algorithm 2 default the chooser now picks."""
    if default_private_method(n, m, eps, DELTA) == "totals":
        return r[:, 0], r[:, 3]
    if np.array_equal(r[:, 2], r[:, 0]):  # the run's default was the totals estimator
        return None
    return r[:, 2], r[:, 5]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratios", nargs="*", default=[], help="JSON-lines files with the MSE runs")
    ap.add_argument("--coverage", nargs="*", default=[], help="JSON-lines files with the bootstrap runs")
    args = ap.parse_args()
    rat, cov = load(args.ratios), load(args.coverage)
    cells = defaultdict(list)
    for key in rat:
        cells[key[1:]].append(key[0])
    print(f"{'m':>2} {'n':>5} {'ε':>4} | {'totals: worst shape':<28} | {'geo':>4} | {'default: worst shape':<30} | "
          f"{'cov. totals: min (shape) – max':<38} | {'cov. default':<13} | {'band':>6} | k")
    miss_t, miss_d, miss_c, below_t, below_d, out_c = [], [], [], [], [], []
    n_cov = 0
    for (m, n, eps) in sorted(cells):
        shapes = sorted(cells[(m, n, eps)])
        need = 1.0 if (m >= 10 and n >= 1000) else 0.9
        rt, rd = [], []
        for sh in shapes:
            r = rat[(sh, m, n, eps)]
            rt.append((*ratio_se(r[:, 1], r[:, 0]), sh))
            d = default_errors(r, m, n, eps)
            a2 = default_private_method(n, m, eps, DELTA) != "totals"
            rd.append((*ratio_se(r[:, 1], d[0]), sh + (", A2" if a2 else "")) if d is not None else (np.nan, np.nan, sh + ", ?"))
        wt = min(rt, key=lambda x: x[0])
        wd = min(rd, key=lambda x: x[0] if np.isfinite(x[0]) else np.inf)
        geo = float(np.exp(np.mean(np.log([x[0] for x in rt]))))
        for x in rt:
            if x[0] < need:
                below_t.append((m, n, eps, x))
                if x[0] + 2 * x[1] < need:
                    miss_t.append((m, n, eps, x))
        for x in rd:
            if np.isfinite(x[0]) and x[0] < need:
                below_d.append((m, n, eps, x))
                if x[0] + 2 * x[1] < need:
                    miss_d.append((m, n, eps, x))
        ct, cd = [], []
        for sh in shapes:
            if (sh, m, n, eps) in cov:
                c = cov[(sh, m, n, eps)]
                ct.append((*coverage_se(c[:, 3], m), sh, len(c)))
                d = default_errors(c, m, n, eps)
                if d is not None:
                    cd.append(coverage_se(d[1], m)[0])
        if ct:
            n_cov += len(ct)
            lo = min(ct, key=lambda x: x[0])
            hi = max(x[0] for x in ct)
            band = 1.96 * np.sqrt(0.95 * 0.05 / (lo[4] * m))
            covtxt = f"{lo[0]:.3f} ± {lo[1]:.3f} ({lo[3]}) – {hi:.3f}"
            dtxt = f"{min(cd):.3f} – {max(cd):.3f}" if cd else "-"
            btxt = f"±{band:.3f}"
            for x in ct:
                if not 0.90 <= x[0] <= 0.98:
                    miss_c.append((m, n, eps, x))
                    if coverage_outside(x[0], x[1], x[4], m):
                        out_c.append((m, n, eps, x))
        else:
            covtxt, dtxt, btxt = "-", "-", "-"
        wdt = f"{wd[0]:.2f} ± {wd[1]:.2f} ({wd[2]})" if np.isfinite(wd[0]) else f"? ({wd[2]})"
        print(f"{m:>2} {n:>5} {eps:>4g} | {f'{wt[0]:.2f} ± {wt[1]:.2f} ({wt[2]})':<28} | {geo:>4.2f} | {wdt:<30} | "
              f"{covtxt:<38} | {dtxt:<13} | {btxt:>6} | {len(shapes)}{f'/{len(ct)}' if ct and len(ct) != len(shapes) else ''}")

    def fmt(lst):
        return "; ".join(f"{x[2]} ({m}, {n}, {e:g}) {x[0]:.2f} ± {x[1]:.2f}" for m, n, e, x in lst) or "none"

    print(f"\ncells: {len(cells)} (cell-shapes {len(rat)}); with coverage: {n_cov} cell-shapes")
    print(f"totals: point estimates below target: {len(below_t)}: {fmt(below_t)}")
    print(f"totals: clearly below (ratio + 2 SE < target): {len(miss_t)}: {fmt(miss_t)}")
    print(f"default: point estimates below target: {len(below_d)}: {fmt(below_d)}")
    print(f"default: clearly below: {len(miss_d)}: {fmt(miss_d)}")
    print(f"coverage: point estimates outside 0.90–0.98: {len(miss_c)}; clearly outside: {len(out_c)}: "
          + ("; ".join(f"{x[2]} ({m}, {n}, {e:g}) {x[0]:.3f} ± {x[1]:.3f}" for m, n, e, x in out_c) or "none"))
    if cov:
        allc = np.concatenate([c[:, 3] for c in cov.values()])
        by_m = {mm: np.mean(np.concatenate([c[:, 3] for k, c in cov.items() if k[1] == mm]))
                for mm in sorted({k[1] for k in cov})}
        print(f"coverage pooled {allc.mean():.3f} over {allc.size} data sets; by m: "
              + ", ".join(f"m = {k}: {v:.3f}" for k, v in by_m.items()))


if __name__ == "__main__":
    main()

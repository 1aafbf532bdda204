"""Coverage of the totals estimator's intervals by the histogram's share φ (issue 26, session 13).

φ (``info["histogram_share"]``, ``docs/totals.md`` §5.4) is the noisy histogram's share of the
information about the ability spread; below ½ the public prior holds most of it and the
intervals are calibrated on average over that prior.  From the JSON-lines files of
``bench_private_totals.py --only shapes_grid`` (each data set's row carries φ last):

* per (m, n, ε): φ's median and range over the cell's data sets (all shapes);
* per shape: the pooled coverage of the data sets with φ < ½ and of those with φ ≥ ½;
* the cell-shapes outside 90–98 % at the point estimate (and clearly outside: ±2 SE, at least
  the binomial SE), by the class of their median φ.

    python benchmarks/histogram_share_table.py grid.jsonl [more.jsonl ...]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_private_totals import coverage_outside, coverage_se  # noqa: E402
from shapes_grid_table import load  # noqa: E402

from privirt.private.totals.intervals import LOW_HISTOGRAM_SHARE  # noqa: E402

COVERAGE, SHARE = 3, -1  # columns of a grid row: the totals estimator's coverage, φ


def by_share(cov: dict, threshold: float = LOW_HISTOGRAM_SHARE) -> dict:
    """The three summaries of the module docstring from ``{(shape, m, n, ε): rows}``.

    Returns ``cells`` {(m, n, ε): (median φ, min φ, max φ, share of data sets below)},
    ``shapes`` {shape: {"low"|"high": (pooled coverage, SE over data sets, data sets)}} and
    ``outside`` {"low"|"high": {"cells", "below", "above", "clearly"}} (cell-shapes classed by
    their median φ; "clearly" lists (shape, m, n, ε, coverage, SE))."""
    cells, shapes = defaultdict(list), defaultdict(lambda: {"low": [], "high": []})
    outside = {c: {"cells": 0, "below": 0, "above": 0, "clearly": []} for c in ("low", "high")}
    for (shape, m, n, eps), r in sorted(cov.items()):
        phi, c = r[:, SHARE], r[:, COVERAGE]
        cells[(m, n, eps)].append(phi)
        low = phi < threshold
        shapes[shape]["low"].append(c[low])
        shapes[shape]["high"].append(c[~low])
        cls = "low" if np.median(phi) < threshold else "high"
        mean, se, _ = coverage_se(c, m)
        outside[cls]["cells"] += 1
        outside[cls]["below"] += mean < 0.90
        outside[cls]["above"] += mean > 0.98
        if coverage_outside(mean, se, len(c), m):
            outside[cls]["clearly"].append((shape, m, n, eps, mean, se))
    cell_rows = {}
    for key, parts in cells.items():
        phi = np.concatenate(parts)
        cell_rows[key] = (float(np.median(phi)), float(phi.min()), float(phi.max()), float(np.mean(phi < threshold)))
    shape_rows = {}
    for shape, parts in shapes.items():
        shape_rows[shape] = {}
        for cls, cs in parts.items():
            c = np.concatenate(cs)
            se = float(np.std(c, ddof=1) / np.sqrt(c.size)) if c.size > 1 else float("nan")
            shape_rows[shape][cls] = (float(c.mean()) if c.size else float("nan"), se, int(c.size))
    return {"cells": cell_rows, "shapes": shape_rows, "outside": outside}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="JSON-lines files of the shapes grid with bootstrap intervals")
    ap.add_argument("--threshold", type=float, default=LOW_HISTOGRAM_SHARE)
    args = ap.parse_args()
    cov = {k: r for k, r in load(args.files).items() if r.shape[1] > 7 and np.isfinite(r[:, COVERAGE]).all()}
    if not cov:
        sys.exit("no grid rows with coverage and φ (run bench_private_totals.py --only shapes_grid --grid-boot 200)")
    s = by_share(cov, args.threshold)
    t = args.threshold
    print(f"| m | n | ε | φ median | φ min – max | data sets with φ < {t:g} |\n|---|---|---|---|---|---|")
    for (m, n, eps), (med, lo, hi, frac) in sorted(s["cells"].items()):
        print(f"| {m} | {n} | {eps:g} | {med:.2f} | {lo:.2f} – {hi:.2f} | {frac:.2f} |")
    print(f"\n| shape | φ < {t:g}: coverage ± SE (data sets) | φ ≥ {t:g}: coverage ± SE (data sets) |\n|---|---|---|")
    for shape, row in sorted(s["shapes"].items()):
        txt = [f"{c:.3f} ± {se:.3f} ({k})" if k else "—" for c, se, k in (row["low"], row["high"])]
        print(f"| {shape} | {txt[0]} | {txt[1]} |")
    for cls, name in (("low", f"median φ < {t:g}"), ("high", f"median φ ≥ {t:g}")):
        o = s["outside"][cls]
        clear = "; ".join(f"{sh} ({m}, {n}, {e:g}) {c:.3f} ± {se:.3f}" for sh, m, n, e, c, se in o["clearly"]) or "none"
        print(f"\n{name}: {o['cells']} cell-shapes; point estimates below 0.90: {o['below']}, above 0.98: "
              f"{o['above']}; clearly outside: {len(o['clearly'])}: {clear}")


if __name__ == "__main__":
    main()

"""Two shapes-grid runs of ``bench_private_totals.py --only shapes_grid`` on the same seeds, paired.

Per (m, n, ε, shape) found in both JSON-lines files (runs of several ``--grid-seed`` are pooled):
the MSE ratio B/A of the totals estimator ± its paired delta-method SE (the same data sets,
release and bootstrap seeds), the MSE ratio Algorithm 2 / totals under A and under B (Algorithm 2
is the same draw in both), and the coverage of the totals estimator's 95 % intervals under each
(± SE over the data sets) and their paired difference; then per (m, n, ε) the same pooled over the shapes (and the
geometric mean of the shapes' MSE ratios B/A).

    python benchmarks/paired_grid_ratio.py cur.jsonl inf.jsonl --names merged,full
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_private_totals import coverage_se, ratio_se  # noqa: E402


def load(path):
    """{(m, n, ε, shape): {seed: rows}} (a later line for the same cell and seed wins)."""
    out = defaultdict(dict)
    for line in Path(path).read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            out[(int(d["m"]), int(d["n"]), float(d["eps"]), d["shape"])][int(d["seed"])] = np.array(d["rows"], float)
    return out


def paired(a, b):
    """Per cell found in both (and seeds in both): (rows of A, rows of B), stacked over the seeds."""
    out = {}
    for key in sorted(set(a) & set(b)):
        seeds = sorted(set(a[key]) & set(b[key]))
        ra = [a[key][s] for s in seeds]
        rb = [b[key][s] for s in seeds]
        if seeds and all(x.shape == y.shape for x, y in zip(ra, rb)):
            out[key] = (np.vstack(ra), np.vstack(rb))
    return out


def line(label, ra, rb, m):
    r, se = ratio_se(rb[:, 0], ra[:, 0])
    qa, qase = ratio_se(ra[:, 1], ra[:, 0])
    qb, qbse = ratio_se(rb[:, 1], rb[:, 0])
    assert np.array_equal(ra[:, 1], rb[:, 1]), "not paired: Algorithm 2's errors differ"
    ca, cas, _ = coverage_se(ra[:, 3], m)
    cb, cbs, _ = coverage_se(rb[:, 3], m)
    d = rb[:, 3] - ra[:, 3]
    dse = np.std(d, ddof=1) / np.sqrt(len(d)) if len(d) > 1 else np.nan
    return (f"| {label} | {len(ra)} | {r:.2f} ± {se:.2f} | {qa:.2f} ± {qase:.2f} | {qb:.2f} ± {qbse:.2f} | "
            f"{ca:.3f} ± {cas:.3f} | {cb:.3f} ± {cbs:.3f} | {d.mean():+.3f} ± {dse:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--names", default="A,B")
    args = ap.parse_args()
    na, nb = args.names.split(",")
    cells = paired(load(args.a), load(args.b))
    print(f"| (m, n, ε) shape | data sets | MSE {nb}/{na} ± SE | Alg. 2/totals, {na} | Alg. 2/totals, {nb} | "
          f"coverage, {na} | coverage, {nb} | Δ coverage ± paired SE |")
    print("|---|---|---|---|---|---|---|---|")
    by = defaultdict(list)
    for (m, n, e, sh), (ra, rb) in cells.items():
        by[(m, n, e)].append((ra, rb))
        print(line(f"({m}, {n}, {e:g}) {sh}", ra, rb, m))
    for (m, n, e), parts in by.items():
        ra = np.vstack([p[0] for p in parts])
        rb = np.vstack([p[1] for p in parts])
        geo = np.exp(np.mean([np.log(p[1][:, 0].mean() / p[0][:, 0].mean()) for p in parts]))
        print(line(f"**({m}, {n}, {e:g}) pooled, {len(parts)} shapes** (geometric mean of the shapes' "
                   f"{nb}/{na} {geo:.2f})", ra, rb, m))


if __name__ == "__main__":
    main()

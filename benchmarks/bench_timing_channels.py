"""Whether a private release's running time tells anything about the data beyond its public shape.

Each private release is timed on data sets of one public shape (n persons, m items, declared
domain) whose content differs: complete, 30 % of the cells missing, 1 % of the cells answered
(the MCAR domain protects which cells are missing).  Medians over ``--reps`` releases after a
warm-up, data sets interleaved.  With ``--baseline DIR`` the same runs against another checkout
(e.g. ``git worktree add /tmp/base f9279d9``), in a child process per tree.  ``--design`` times
the totals estimator's MCAR design (``marginal_missing.mcar_design``) at the given item counts.

    python benchmarks/bench_timing_channels.py [--n 4000 --m 40 --reps 15] [--baseline DIR] [--busy]
    python benchmarks/bench_timing_channels.py --design 50,150,300 [--baseline DIR]

The noise is seeded (the releases are discarded; only their times are kept).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _harness import busy_core, run_in_tree  # noqa: E402

_CHILD = r'''
import json, time, warnings, numpy as np
warnings.simplefilter("ignore")
import privirt
from privirt.data.responses import private_responses
n, m, reps, design = {n}, {m}, {reps}, {design}
out = {{"privirt": privirt.__file__}}
if design:
    from privirt.private.totals import marginal_missing as mm
    for mi in design:
        t = time.perf_counter(); mm.mcar_design(1000, mi, 0.5); out[f"design m={{mi}}"] = time.perf_counter() - t
else:
    rng = np.random.default_rng(14_700_000)
    full = (rng.random((n, m)) < 0.5).astype(float)
    some = full.copy(); some[rng.random((n, m)) < 0.3] = np.nan
    few = full.copy(); few[rng.random((n, m)) > 0.01] = np.nan
    data = {{"complete": full, "30% missing": some, "1% answered": few}}
    resp = {{k: private_responses(v) for k, v in data.items()}}
    releases = {{
        "counts (Gaussian)": lambda r: privirt.release_counts(r, epsilon=1.0, delta=1e-5, seed=1, device="cpu"),
        "randomized response": lambda r: privirt.private_spectral_estimate(
            r, epsilon=2.0, mechanism="randomized_response", seed=1, device="cpu"),
        "totals (MCAR)": lambda r: privirt.release_totals(r, epsilon=1.0, delta=1e-5, seed=1, missing="mcar"),
    }}
    for name, run in releases.items():
        times = {{k: [] for k in resp}}
        for k, r in resp.items():
            run(r)  # warm-up
        for _ in range(reps):
            for k, r in resp.items():
                t = time.perf_counter(); run(r); times[k].append(time.perf_counter() - t)
        out[name] = {{k: float(np.median(v)) for k, v in times.items()}}
print(json.dumps(out))
'''


def _measure(tree: Path, args) -> dict:
    design = [int(x) for x in args.design.split(",")] if args.design else []
    stdout, err = run_in_tree(tree, _CHILD.format(n=args.n, m=args.m, reps=args.reps, design=design))
    if stdout is None:
        raise SystemExit(f"{tree}: {err}")
    return json.loads(stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--m", type=int, default=40)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--design", default=None, help="item counts for the MCAR design's time (comma-separated)")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to time beside this one")
    ap.add_argument("--busy", action="store_true", help="keep another core busy meanwhile")
    args = ap.parse_args()
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    with busy_core(args.busy):
        results = [(label, _measure(tree, args)) for label, tree in trees]
    what = ("the MCAR design at n = 1000, ρ = 0.5" if args.design else
            f"n = {args.n}, m = {args.m}, {args.reps} releases per cell (medians, ms)")
    print(f"{what}; busy core: {args.busy}")
    for label, res in results:
        print(f"\n{label} ({res.pop('privirt')})")
        for name, value in res.items():
            if isinstance(value, dict):
                cells = "  ".join(f"{k} {v * 1e3:7.1f}" for k, v in value.items())
                spread = max(value.values()) / min(value.values())
                print(f"  {name:22s} {cells}   max/min {spread:.2f}")
            else:
                print(f"  {name:22s} {value:7.2f} s")


if __name__ == "__main__":
    main()

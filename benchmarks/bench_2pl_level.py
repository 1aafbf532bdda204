"""The private 2PL's common level where the noise swamps the pairs: relative ℓ2 error of the
shrunk a against the true a, beside all a equal at the true geometric mean, on cells with few
persons, small ε and up to a few hundred items, this tree's code and (``--baseline DIR``) another
checkout's side by side on the same releases.

Data ``bench_private_2pl.simulate(n, m, seed)`` (a ~ LogNormal(0, 0.3), b ~ N(0, 1)), one
``release_2pl(..., seed=seed + 1)`` per data set (δ = 1e-4), seeds
12 000 000 + 1000·(n mod 997) + 10·m + 700·ε + k; ``estimate_2pl_from_release(..., n_boot=0)``.
Each tree runs in a child process that imports privirt from it. The last two columns count the
releases flagged as a prior–data conflict on the level (``info["level_prior_conflict"]``) and the
largest distance of the level from the release's own value in its likelihood's scales.

Run::

    nice -n 10 python benchmarks/bench_2pl_level.py --sets 8 --baseline ../base --out level.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from _harness import by_cell, jsonl_rows, run_in_tree

HERE = Path(__file__).resolve().parent
CELLS = "400,100,0.5;600,120,0.3;500,200,0.3;300,60,0.3;1000,50,0.1;1000,20,0.1;2000,200,0.1;1000,5,0.1;" \
        "10000,5,0.1;10000,20,0.3;1000,20,1"

CHILD = r"""
import json, sys, time, warnings
sys.path.insert(0, {tree!r})
import privirt  # from the tree, before bench_private_2pl puts this checkout first on the path
sys.path.insert(0, {bench!r})
import numpy as np
from bench_private_2pl import DELTA, rel, simulate
from privirt.private.twopl import estimate_2pl_from_release, release_2pl
assert privirt.__file__.startswith({tree!r}), privirt.__file__
for cell in {cells!r}.split(";"):
    n, m, e = cell.split(","); n, m, e = int(n), int(m), float(e)
    for k in range({first}, {first} + {sets}):
        seed = 12_000_000 + 1000 * (n % 997) + 10 * m + k + int(round(e * 100)) * 7
        X, a, b = simulate(n, m, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rl = release_2pl(X, epsilon=e, delta=DELTA, seed=seed + 1)
            t0 = time.process_time()
            f = estimate_2pl_from_release(rl, n_boot=0, progress=False)
        print(json.dumps({{"n": n, "m": m, "eps": e, "k": k, "err_a": rel(f.a.to_numpy(), a),
                          "equal": rel(np.full(m, np.exp(np.log(a).mean())), a), "level": f.info["mean_log_a"],
                          "true_level": float(np.log(a).mean()), "cpu": time.process_time() - t0,
                          "conflict": f.info.get("level_prior_conflict"),
                          "conflict_sds": (abs(f.info["release_mean_log_a"] - f.info["mean_log_a"])
                                           / f.info["release_sd_mean_log_a"]) if "release_mean_log_a" in f.info
                                          else None}}), flush=True)
"""


def run(tree: Path, cells: str, sets: int, first: int) -> list[dict]:
    stdout, why = run_in_tree(tree, CHILD.format(tree=str(tree), bench=str(HERE), cells=cells, sets=sets, first=first))
    if stdout is None:
        raise SystemExit(f"{tree}: {why}")
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def table(rows: list[dict]) -> None:
    print("| code | n | m | ε | sets | rel. error a: mean | largest | above 1 | above all a equal | all a equal: mean "
          "| |level − true level|: mean | CPU s (median) | prior–data conflicts | largest |x − ℓ|/w |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (n, m, e), in_cell in by_cell(rows).items():
        by: dict = {}
        for r in in_cell:
            by.setdefault(r["code"], []).append(r)
        for code, rs in by.items():
            err = np.array([r["err_a"] for r in rs])
            eq = np.array([r["equal"] for r in rs])
            lev = np.array([abs(r["level"] - r["true_level"]) for r in rs])
            sds = [r["conflict_sds"] for r in rs if r.get("conflict_sds") is not None]
            flagged = sum(bool(r.get("conflict")) for r in rs)
            print(f"| {code} | {n} | {m} | {e:g} | {len(rs)} | {err.mean():.3f} | {err.max():.3f} | {(err > 1).sum()} "
                  f"| {(err > eq).sum()} | {eq.mean():.3f} | {lev.mean():.3f} | {np.median([r['cpu'] for r in rs]):.1f} "
                  f"| {flagged if sds else '—'} | {f'{max(sds):.2f}' if sds else '—'} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=CELLS, help="n,m,eps triples separated by ';'")
    ap.add_argument("--sets", type=int, default=8)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--baseline", default=None, help="a checkout of other code, run on the same releases")
    ap.add_argument("--out", default=None, help="append JSON lines here")
    ap.add_argument("--summary", default=None, help="print the table of a JSON-lines file")
    args = ap.parse_args(argv)
    if args.summary:
        table(jsonl_rows(args.summary))
        return
    trees = [("this", HERE.parent)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    rows = []
    for code, tree in trees:
        for r in run(tree, args.cells, args.sets, args.first):
            r["code"] = code
            rows.append(r)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(r) + "\n")
    table(rows)


if __name__ == "__main__":
    main()

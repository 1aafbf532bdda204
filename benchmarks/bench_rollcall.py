"""Benchmark: privirt.gibbs_2pno(slopes="free") against MCMCpack's MCMCirt1d on Senate roll calls.

Both samplers run the same model and the same Gibbs algorithm (Albert 1992 data
augmentation; MCMCirt1d is Quinn's C++ implementation):

    P(y_ij = 1) = Φ(β_j θ_i − α_j)     (MCMCirt1d's α, β)  =  Φ(a_j θ_i − b_j)  (privirt's a, b),

θ_i ~ N(0, 1) (MCMCirt1d ``t0 = 0, T0 = 1``), (α_j, β_j) ~ N(0, 4 I) (``ab0 = 0, AB0 = 0.25``;
privirt ``priors={"a": (0, 4), "b": (0, 4)}``), the direction fixed by the same sign
constraints (``theta.constraints = list(KENNEDY = "-", HELMS = "+")``; privirt
``anchors={"KENNEDY": "-", "HELMS": "+"}``).  So β = a and α = b with no change of sign or
scale, and the posterior means are compared directly (correlation and RMSD of θ, a, b).

The votes are the 106th Senate's roll calls (102 senators × 672 roll calls, 1 yea, 0 nay,
empty absent) from ``../shared/data/senate106_rollcalls.csv`` (not shipped with privirt;
``--data`` points elsewhere); the 76 unanimous roll calls are dropped (MCMCirt1d's
``drop.constant.items``), leaving 102 × 596.  ESS is privirt's bulk ESS (rank-normalised,
Stan's estimator) computed on both samplers' draws; seconds are the sampling call only
(R: ``proc.time()`` around ``MCMCirt1d``; privirt: around ``gibbs_2pno``, after a warm-up
call that loads the compiled numba kernel), wall clock and CPU (user + system; privirt's
fused engine runs threads on every core).

R runs through ``Rscript`` when it and MCMCpack are installed (Debian: ``apt-get install
r-base-core r-cran-mcmcpack``); otherwise only privirt runs and the table says so.

Usage::

    python benchmarks/bench_rollcall.py                       # burn-in 1000, 5000 draws
    python benchmarks/bench_rollcall.py --burnin 1000 --mcmc 20000
    python benchmarks/bench_rollcall.py --quick               # 200 + 500, smoke run
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir)))

import privirt  # noqa: E402
from privirt.bayes import ess_bulk  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA_NAME = "senate106_rollcalls.csv"


def find_data(name: str = DATA_NAME) -> Path:
    """``shared/data/NAME`` in the nearest folder above the repository that has it (the
    repository's ``../shared/data/``, or further up for a worktree)."""
    for folder in ROOT.parents:
        if (folder / "shared" / "data" / name).is_file():
            return folder / "shared" / "data" / name
    return ROOT.parent / "shared" / "data" / name


DEFAULT_DATA = find_data()
LABEL_COLUMNS = ("id", "statecode", "state", "party", "member")
ANCHORS = {"KENNEDY": "-", "HELMS": "+"}

R_SCRIPT = r"""
suppressMessages(library(MCMCpack))
args <- commandArgs(trailingOnly = TRUE)
Y <- as.matrix(read.csv(args[1], row.names = 1, check.names = FALSE))
cons <- eval(parse(text = args[6]))
t0 <- proc.time()
post <- MCMCirt1d(Y, theta.constraints = cons, burnin = as.integer(args[3]),
                  mcmc = as.integer(args[4]), thin = 1, store.item = TRUE,
                  seed = as.integer(args[5]), verbose = 0)
dt <- proc.time() - t0
writeBin(as.vector(post), args[2])
writeLines(colnames(post), paste0(args[2], ".names"))
cat(sprintf("%d %.3f %.3f\n", nrow(post), dt[["elapsed"]], dt[["user.self"]] + dt[["sys.self"]]))
"""


def load_votes(path: Path) -> pd.DataFrame:
    """Senators × roll calls (1 / 0 / NaN), labelled by name, unanimous roll calls dropped."""
    raw = pd.read_csv(path)
    votes = raw.drop(columns=[c for c in LABEL_COLUMNS if c in raw.columns])
    votes.index = raw["member"].astype(str) if "member" in raw.columns else raw.index
    p = votes.mean()
    return votes.loc[:, (p > 0) & (p < 1)]


def r_available() -> str | None:
    """Why R cannot run (None when Rscript and MCMCpack are there)."""
    rscript = shutil.which("Rscript")
    if rscript is None:
        return "Rscript not found (apt-get install r-base-core r-cran-mcmcpack)"
    proc = subprocess.run([rscript, "-e", "suppressMessages(library(MCMCpack))"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return "R package MCMCpack not installed (apt-get install r-cran-mcmcpack)"
    return None


def _r_constraints(anchors: dict) -> str:
    parts = [f'`{k}` = "{v}"' if isinstance(v, str) else f"`{k}` = {float(v)!r}"
             for k, v in anchors.items()]
    return f"list({', '.join(parts)})"


def run_mcmcirt1d(votes: pd.DataFrame, burnin: int, mcmc: int, seed: int,
                  anchors: dict = ANCHORS) -> dict:
    """MCMCirt1d's draws {"theta": (draws, n), "a": (draws, k), "b": (draws, k)} (its β, α)
    and its seconds (wall, CPU)."""
    with tempfile.TemporaryDirectory() as tmp:
        csv, out, script = (Path(tmp) / n for n in ("votes.csv", "draws.bin", "run.R"))
        votes.to_csv(csv)
        script.write_text(R_SCRIPT)
        proc = subprocess.run(
            ["Rscript", str(script), str(csv), str(out), str(burnin), str(mcmc), str(seed),
             _r_constraints(anchors)], capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"MCMCirt1d failed: {proc.stderr.strip()[-500:]}")
        rows, wall, cpu = proc.stdout.split()[-3:]
        names = Path(str(out) + ".names").read_text().split("\n")[:-1]
        flat = np.fromfile(out, dtype=np.float64)
    draws = flat.reshape(len(names), int(rows)).T  # R stores column-major
    col = pd.Index(names)

    def block(prefix: str, labels: pd.Index) -> np.ndarray:
        return draws[:, col.get_indexer([f"{prefix}.{x}" for x in labels])]

    return {"theta": block("theta", votes.index), "a": block("beta", votes.columns),
            "b": block("alpha", votes.columns), "wall_s": float(wall), "cpu_s": float(cpu)}


def run_privirt(votes: pd.DataFrame, burnin: int, mcmc: int, seed: int,
                anchors: dict = ANCHORS, engine: str = "auto") -> dict:
    kw = dict(slopes="free", anchors=anchors, priors={"a": (0.0, 4.0), "b": (0.0, 4.0)},
              device="cpu", engine=engine, progress=False)
    privirt.gibbs_2pno(votes, n_iter=4, warmup=2, seed=0, **kw)  # loads the compiled kernel
    w0, c0 = time.perf_counter(), time.process_time()
    post = privirt.gibbs_2pno(votes, n_iter=burnin + mcmc, warmup=burnin, seed=seed, **kw)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    out = {p: post.get_draws(p)[0] for p in ("theta", "a", "b")}
    out.update(wall_s=wall, cpu_s=cpu, engine=post.info["engine"])
    return out


def compare(ours: dict, theirs: dict) -> dict:
    """Correlations and RMSDs of the posterior means, block by block."""
    res = {}
    for p in ("theta", "a", "b"):
        x, y = ours[p].mean(axis=0), theirs[p].mean(axis=0)
        res[p] = (float(np.corrcoef(x, y)[0, 1]), float(np.sqrt(np.mean((x - y) ** 2))))
    return res


def ess_row(draws: dict, seconds: float) -> dict:
    out = {}
    for p in ("theta", "a"):
        e = ess_bulk(draws[p][None])
        out[p] = (float(np.median(e)), float(np.min(e)), float(np.median(e)) / seconds)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--burnin", type=int, default=1000)
    ap.add_argument("--mcmc", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engine", default="auto", choices=["auto", "fused", "numpy"])
    ap.add_argument("--quick", action="store_true", help="burn-in 200, 500 draws")
    args = ap.parse_args(argv)
    if args.quick:
        args.burnin, args.mcmc = 200, 500
    if not args.data.is_file():
        print(f"no roll-call file at {args.data}; pass --data PATH", file=sys.stderr)
        return 2
    votes = load_votes(args.data)
    n, k = votes.shape
    print(f"# roll calls: {n} senators × {k} non-unanimous roll calls, "
          f"{votes.isna().to_numpy().mean():.1%} absent; burn-in {args.burnin}, "
          f"{args.mcmc} draws, 1 chain; load average {os.getloadavg()[0]:.1f}")
    ours = run_privirt(votes, args.burnin, args.mcmc, args.seed, engine=args.engine)
    why = r_available()
    theirs = None if why else run_mcmcirt1d(votes, args.burnin, args.mcmc, args.seed)
    print("\n| sampler | wall s | CPU s | ESS θ median (min) | ESS a median (min) "
          "| ESS θ / CPU s | ESS a / CPU s |")
    print("|---|---|---|---|---|---|---|")
    rows = [(f"privirt gibbs_2pno (slopes=\"free\", {ours['engine']} engine)", ours)]
    if theirs is not None:
        rows.append(("MCMCpack MCMCirt1d", theirs))
    for name, res in rows:
        e = ess_row(res, res["cpu_s"])
        print(f"| {name} | {res['wall_s']:.1f} | {res['cpu_s']:.1f} "
              f"| {e['theta'][0]:.0f} ({e['theta'][1]:.0f}) | {e['a'][0]:.0f} ({e['a'][1]:.0f}) "
              f"| {e['theta'][2]:.2f} | {e['a'][2]:.2f} |")
    if theirs is None:
        print(f"\nMCMCirt1d not run: {why}")
        return 0
    cmp = compare(ours, theirs)
    print("\nposterior means, privirt vs MCMCirt1d (a = β, b = α):")
    for p, (r, rmsd) in cmp.items():
        print(f"  {p:5s}  correlation {r:.5f}   RMSD {rmsd:.4f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

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

The peers run through ``Rscript`` when R and the package are installed (Debian: ``apt-get
install r-base-core r-cran-mcmcpack r-cran-pscl``); a missing peer is skipped with a note.
pscl's ``ideal`` (Clinton, Jackman & Rivers 2004; Jackman's C code) is the same data
augmentation Gibbs sampler; it runs with the same priors (``xpv = 1`` and ``bpv = 0.25``,
precisions), ``normalize = FALSE`` (the scale identified by θ's prior, as in the other two),
no sign constraint (its eigen start values pick the direction; θ and a are compared after
aligning the sign), ``burnin`` discarded iterations and ``mcmc`` kept draws, thin 1.

Threads: every sampler runs on **one thread** by default (``--threads 1``): privirt's fused
sweep on the calling thread (``privirt.bayes.twopno_fused.PARALLEL_CELLS`` raised for the
run) with BLAS pools limited to one thread by threadpoolctl, R with ``OMP_NUM_THREADS=1`` and
``OPENBLAS_NUM_THREADS=1`` (MCMCpack and pscl are single-threaded C/C++ anyway).  ESS per CPU
second then compares the samplers' work; ``--threads all`` lets privirt use every core.
θ's ESS is low and noisy on these data (one slow joint mode, see BENCHMARKS.md), so
``--seeds N`` repeats every sampler with N seeds and reports each run and the mean.

Usage::

    python benchmarks/bench_rollcall.py                       # burn-in 1000, 5000 draws
    python benchmarks/bench_rollcall.py --burnin 1000 --mcmc 10000 --seeds 2
    python benchmarks/bench_rollcall.py --quick               # 200 + 500, smoke run
    python benchmarks/bench_rollcall.py --plain --peers ""    # privirt with and without its
                                                              # orbit moves (docs/gibbs.md)
    python benchmarks/bench_rollcall.py --data PATH           # votes elsewhere (or env
                                                              # PRIVIRT_ROLLCALL_DATA)
    python benchmarks/bench_rollcall.py --gpu --peers ""      # privirt on the GPU too (cupy);
                                                              # compared by ESS per wall second
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


DEFAULT_DATA = Path(os.environ["PRIVIRT_ROLLCALL_DATA"]) if os.environ.get(
    "PRIVIRT_ROLLCALL_DATA") else find_data()
LABEL_COLUMNS = ("id", "statecode", "state", "party", "member")
ANCHORS = {"KENNEDY": "-", "HELMS": "+"}

#: R's side: read the votes, time the sampler with proc.time(), write θ, slopes and
#: intercepts (draws × n, draws × k, draws × k, column-major doubles) and the seconds.
R_HEAD = r"""
args <- commandArgs(trailingOnly = TRUE)
Y <- as.matrix(read.csv(args[1], row.names = 1, check.names = FALSE))
burnin <- as.integer(args[3]); mcmc <- as.integer(args[4]); seed <- as.integer(args[5])
"""
R_TAIL = r"""
dt <- proc.time() - t0
con <- file(args[2], "wb")
writeBin(as.vector(theta), con); writeBin(as.vector(a), con); writeBin(as.vector(b), con)
close(con)
cat(sprintf("%d %.3f %.3f\n", nrow(theta), dt[["elapsed"]], dt[["user.self"]] + dt[["sys.self"]]))
"""
R_SCRIPTS = {
    "MCMCpack": r"""
suppressMessages(library(MCMCpack))
cons <- eval(parse(text = args[6]))
t0 <- proc.time()
post <- MCMCirt1d(Y, theta.constraints = cons, burnin = burnin, mcmc = mcmc, thin = 1,
                  store.item = TRUE, seed = seed, verbose = 0)
nm <- colnames(post)
theta <- post[, paste0("theta.", rownames(Y)), drop = FALSE]
a <- post[, paste0("beta.", colnames(Y)), drop = FALSE]
b <- post[, paste0("alpha.", colnames(Y)), drop = FALSE]
""",
    # ideal keeps iterations burnin, burnin + thin, ..., maxiter: burnin + 1 and
    # burnin + mcmc give `burnin` discarded iterations and `mcmc` kept draws
    "pscl": r"""
suppressMessages(library(pscl))
set.seed(seed)
rc <- rollcall(Y, yea = 1, nay = 0, missing = NA, legis.names = rownames(Y),
               vote.names = colnames(Y), desc = "votes")
t0 <- proc.time()
post <- ideal(rc, d = 1, maxiter = burnin + mcmc, burnin = burnin + 1, thin = 1,
              normalize = FALSE, store.item = TRUE, startvals = "eigen", verbose = FALSE,
              priors = list(xp = 0, xpv = 1, bp = 0, bpv = 0.25))
theta <- post$x[, rownames(Y), 1]
a <- post$beta[, colnames(Y), 1]
b <- post$beta[, colnames(Y), 2]
""",
}
PEERS = {"MCMCpack": "MCMCirt1d", "pscl": "ideal"}


def load_votes(path: Path) -> pd.DataFrame:
    """Senators × roll calls (1 / 0 / NaN), labelled by name, unanimous roll calls dropped."""
    raw = pd.read_csv(path)
    votes = raw.drop(columns=[c for c in LABEL_COLUMNS if c in raw.columns])
    votes.index = raw["member"].astype(str) if "member" in raw.columns else raw.index
    p = votes.mean()
    return votes.loc[:, (p > 0) & (p < 1)]


def r_available(package: str = "MCMCpack") -> str | None:
    """Why R cannot run ``package`` (None when Rscript and the package are there)."""
    deb = {"MCMCpack": "r-cran-mcmcpack", "pscl": "r-cran-pscl"}[package]
    rscript = shutil.which("Rscript")
    if rscript is None:
        return f"Rscript not found (apt-get install r-base-core {deb})"
    proc = subprocess.run([rscript, "-e", f"suppressMessages(library({package}))"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return f"R package {package} not installed (apt-get install {deb})"
    return None


def _r_constraints(anchors: dict) -> str:
    parts = [f'`{k}` = "{v}"' if isinstance(v, str) else f"`{k}` = {float(v)!r}"
             for k, v in anchors.items()]
    return f"list({', '.join(parts)})"


def run_r(package: str, votes: pd.DataFrame, burnin: int, mcmc: int, seed: int,
          anchors: dict = ANCHORS) -> dict:
    """The peer's draws {"theta": (draws, n), "a": (draws, k), "b": (draws, k)} (slopes
    and intercepts as the peer defines them) and its seconds (wall, CPU), one thread."""
    n, k = votes.shape
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        csv, out, script = (Path(tmp) / name for name in ("votes.csv", "draws.bin", "run.R"))
        votes.to_csv(csv)
        script.write_text(R_HEAD + R_SCRIPTS[package] + R_TAIL)
        proc = subprocess.run(
            ["Rscript", str(script), str(csv), str(out), str(burnin), str(mcmc), str(seed),
             _r_constraints(anchors)], capture_output=True, text=True, env=env,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{package} failed: {proc.stderr.strip()[-500:]}")
        rows, wall, cpu = proc.stdout.split()[-3:]
        flat = np.fromfile(out, dtype=np.float64)
    r = int(rows)
    theta, a, b = np.split(flat, [r * n, r * n + r * k])
    return {"theta": theta.reshape(n, r).T, "a": a.reshape(k, r).T, "b": b.reshape(k, r).T,
            "wall_s": float(wall), "cpu_s": float(cpu), "n_iter": burnin + mcmc}


def run_mcmcirt1d(votes: pd.DataFrame, burnin: int, mcmc: int, seed: int,
                  anchors: dict = ANCHORS) -> dict:
    """MCMCirt1d's draws (its β as a, α as b) and seconds."""
    return run_r("MCMCpack", votes, burnin, mcmc, seed, anchors)


def run_privirt(votes: pd.DataFrame, burnin: int, mcmc: int, seed: int,
                anchors: dict = ANCHORS, engine: str = "auto", threads: int | None = 1,
                device: str = "cpu") -> dict:
    """privirt's draws and seconds; ``threads=1``: the fused sweep on the calling thread and
    BLAS limited to one thread (threadpoolctl), ``None``: every core; ``device="gpu"``: the
    CUDA kernels (``engine`` is then ``"auto"``; the CPU seconds are the host's alone)."""
    from threadpoolctl import threadpool_limits

    from privirt.bayes import twopno_fused

    kw = dict(slopes="free", anchors=anchors, priors={"a": (0.0, 4.0), "b": (0.0, 4.0)},
              device=device, engine=engine if device == "cpu" else "auto", progress=False)
    saved = twopno_fused.PARALLEL_CELLS
    if threads == 1:
        twopno_fused.PARALLEL_CELLS = np.iinfo(np.int64).max
    try:
        with threadpool_limits(limits=threads):
            privirt.gibbs_2pno(votes, n_iter=4, warmup=2, seed=0, **kw)  # loads the kernel
            w0, c0 = time.perf_counter(), time.process_time()
            post = privirt.gibbs_2pno(votes, n_iter=burnin + mcmc, warmup=burnin, seed=seed,
                                      **kw)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    finally:
        twopno_fused.PARALLEL_CELLS = saved
    out = {p: post.get_draws(p)[0] for p in ("theta", "a", "b")}
    out.update(wall_s=wall, cpu_s=cpu, engine=post.info["engine"], n_iter=burnin + mcmc,
               device=device)
    return out


def compare(ours: dict, theirs: dict) -> dict:
    """Correlations and RMSDs of the posterior means, block by block (the peer's draws
    multiplied by −1 where its direction is the opposite of ours: θ and a change sign
    together, b keeps its own sign per peer)."""
    res = {}
    flip = np.sign(np.corrcoef(ours["theta"].mean(axis=0), theirs["theta"].mean(axis=0))[0, 1])
    for p in ("theta", "a", "b"):
        x, y = ours[p].mean(axis=0), theirs[p].mean(axis=0)
        if p != "b":
            y = flip * y
        elif np.corrcoef(x, y)[0, 1] < 0:
            y = -y
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
    ap.add_argument("--seed", type=int, default=1, help="first seed")
    ap.add_argument("--seeds", type=int, default=1, help="runs per sampler (seeds seed, seed+1, …)")
    ap.add_argument("--engine", default="auto", choices=["auto", "fused", "numpy"])
    ap.add_argument("--threads", default="1", choices=["1", "all"],
                    help="privirt's threads (the R peers are single-threaded)")
    ap.add_argument("--peers", default="MCMCpack,pscl",
                    help="comma-separated R peers: MCMCpack, pscl (empty: none)")
    ap.add_argument("--quick", action="store_true", help="burn-in 200, 500 draws")
    ap.add_argument("--plain", action="store_true",
                    help="also run privirt without its orbit moves (the plain three-step "
                         "Gibbs sampler of MCMCirt1d), to show what the moves add")
    ap.add_argument("--gpu", action="store_true",
                    help="also run privirt on the GPU (needs cupy and a CUDA device); it is "
                         "compared by ESS per wall second (its CPU seconds are the host's)")
    args = ap.parse_args(argv)
    if args.quick:
        args.burnin, args.mcmc = 200, 500
    if not args.data.is_file():
        print(f"no roll-call file at {args.data}; pass --data PATH", file=sys.stderr)
        return 2
    peers = [p for p in args.peers.split(",") if p]
    if any(p not in R_SCRIPTS for p in peers):
        print(f"--peers: choose from {sorted(R_SCRIPTS)}", file=sys.stderr)
        return 2
    threads = 1 if args.threads == "1" else None
    votes = load_votes(args.data)
    n, k = votes.shape
    print(f"# roll calls: {n} senators × {k} non-unanimous roll calls, "
          f"{votes.isna().to_numpy().mean():.1%} absent; burn-in {args.burnin}, "
          f"{args.mcmc} draws, 1 chain, {args.seeds} seed(s); privirt threads: {args.threads}; "
          f"load average {os.getloadavg()[0]:.1f}")
    runs: dict[str, list[dict]] = {}
    skipped = {}
    for seed in range(args.seed, args.seed + args.seeds):
        res = run_privirt(votes, args.burnin, args.mcmc, seed, engine=args.engine,
                          threads=threads)
        runs.setdefault(f"privirt gibbs_2pno (slopes=\"free\", {res['engine']} engine)",
                        []).append(dict(res, seed=seed))
        if args.plain:
            from privirt.bayes import gibbs

            gibbs.ORBIT_MOVES = False
            try:
                res = run_privirt(votes, args.burnin, args.mcmc, seed, engine=args.engine,
                                  threads=threads)
            finally:
                gibbs.ORBIT_MOVES = True
            runs.setdefault("privirt without the orbit moves", []).append(dict(res, seed=seed))
        if args.gpu:
            res = run_privirt(votes, args.burnin, args.mcmc, seed, device="gpu")
            runs.setdefault("privirt gibbs_2pno (slopes=\"free\") on the GPU", []).append(
                dict(res, seed=seed))
        for peer in peers:
            why = r_available(peer)
            if why:
                skipped[peer] = why
                continue
            res = run_r(peer, votes, args.burnin, args.mcmc, seed)
            runs.setdefault(f"{peer} {PEERS[peer]}", []).append(dict(res, seed=seed))
    print("\n| sampler | seed | wall s | CPU s | CPU ms / it | ESS θ median (min) "
          "| ESS a median (min) | ESS θ / CPU s | ESS a / CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    means = {}
    for name, rs in runs.items():
        rates = []
        for res in rs:
            e = ess_row(res, res["cpu_s"])
            rates.append((e["theta"][2], e["a"][2], res["cpu_s"] / res["n_iter"] * 1e3))
            print(f"| {name} | {res['seed']} | {res['wall_s']:.1f} | {res['cpu_s']:.1f} "
                  f"| {rates[-1][2]:.2f} | {e['theta'][0]:.0f} ({e['theta'][1]:.0f}) "
                  f"| {e['a'][0]:.0f} ({e['a'][1]:.0f}) | {e['theta'][2]:.2f} "
                  f"| {e['a'][2]:.2f} |")
        means[name] = np.mean(rates, axis=0)
    ours_name = next(iter(runs))
    ours = means[ours_name]
    for name, m in list(means.items())[1:]:
        print(f"\nprivirt / {name} (mean over seeds): ESS θ per CPU s {ours[0] / m[0]:.2f}×, "
              f"ESS a per CPU s {ours[1] / m[1]:.2f}×, CPU per iteration {m[2] / ours[2]:.2f}×")
        cmp = compare(runs[ours_name][0], runs[name][0])
        print(f"posterior means, privirt vs {name} (first seed; sign aligned):")
        for p, (r, rmsd) in cmp.items():
            print(f"  {p:5s}  correlation {r:.5f}   RMSD {rmsd:.4f}")
    gpu_name = next((name for name, rs in runs.items() if rs[0].get("device") == "gpu"), None)
    if gpu_name is not None:
        def per_wall(name: str) -> tuple[float, float]:
            rs = runs[name]
            return (float(np.mean([ess_row(r, r["wall_s"])["a"][2] for r in rs])),
                    float(np.mean([r["wall_s"] for r in rs])))
        (g_ess, g_wall), (c_ess, c_wall) = per_wall(gpu_name), per_wall(ours_name)
        print(f"\nGPU / CPU privirt (mean over seeds): ESS a per wall s {g_ess / c_ess:.2f}×, "
              f"wall seconds {c_wall / g_wall:.2f}× fewer")
        cmp = compare(runs[ours_name][0], runs[gpu_name][0])
        print("posterior means, privirt on the CPU vs on the GPU (first seed):")
        for p, (r, rmsd) in cmp.items():
            print(f"  {p:5s}  correlation {r:.5f}   RMSD {rmsd:.4f}")
    for peer, why in skipped.items():
        print(f"\n{peer} not run: {why}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

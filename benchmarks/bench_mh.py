"""Benchmark: privirt.mh_2pl against a line-for-line numpy port of the R/Rcpp tutorial.

The peer ("port") follows the tutorial's ``MH_irt`` step by step: for every block
(θ, then the intercepts α, then the slopes β) it draws a random-walk candidate, recomputes
the *full* persons × items log-likelihood matrix for the candidate and again for the old
values, sums it over the block's axis with missing entries removed (R's
``sum(x, na.rm = TRUE)``), adds ``log(dnorm(...))`` prior and proposal terms and accepts by
``log(runif) < log(ap)``.  Its ``dnorm`` is the closed-form normal density written with
numpy (not :mod:`scipy.stats`, whose per-call overhead would flatter privirt).

Cases (both run in the same process, one chain each):

(a) 9 voters × 43 votes, 15,000 iterations (warmup 5,000, thin 10), the tutorial's Supreme
    Court run with its tuning (proposal sds θ 0.9, slope 0.6, intercept 2; priors
    intercept N(0, sd 10), slope N(1, sd 0.2); starts 0.1 and ±2 for two anchor voters).
    Simulated 2PL votes of that shape by default, or ``--data PATH`` (a votes CSV; add
    ``--transpose`` when voters are columns, ``--person-col`` for the label column).
    The tutorial reports 28.5 s for this run in R.
(b) 100 × 700 simulated 2PL responses with 20 % missing, 20,000 iterations (warmup
    10,000, thin 10).  The port may be timed on fewer iterations (``--port-iters``) and
    extrapolated linearly (its cost per iteration is constant); the table says so.

privirt runs with the same proposal sds, priors and starts, ``adapt=False`` and
``ridge_moves=False`` (the same fixed-kernel algorithm); ``--adapt`` and ``--ridge`` time it
with adaptation and with its extra scale/shift moves (privirt's defaults) instead.

Usage::

    python benchmarks/bench_mh.py                 # both cases
    python benchmarks/bench_mh.py --quick         # short smoke run
    python benchmarks/bench_mh.py --repeat 3      # three runs of each case and their medians
    python benchmarks/bench_mh.py --data votes.csv --person-col case --transpose
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir)))

import privirt  # noqa: E402
from privirt.data.simulate import simulate_2pl  # noqa: E402


# ---------------------------------------------------------------------------------------
# the peer: a line-for-line numpy port of the tutorial's R code
# ---------------------------------------------------------------------------------------
def dnorm(x, mean, sd):
    """R's dnorm(x, mean, sd)."""
    return np.exp(-((x - mean) ** 2) / (2.0 * sd**2)) / (sd * math.sqrt(2.0 * math.pi))


def log_likelihood(Y, alpha, beta, theta):
    """The tutorial's Rcpp log_likelihood: an I × J matrix (NaN where Y is missing)."""
    eta = np.outer(theta, beta) - alpha[None, :]
    prob = np.exp(eta) / (1 + np.exp(eta))
    log_p = Y * np.log(prob) + (1 - Y) * np.log(1 - prob)
    return log_p


def sum_(x, axis):
    return np.nansum(x, axis=axis)  # sum(x, na.rm = TRUE)


def alpha_sampling(Y, old, a0, A0, rng):
    alpha_old = old["alpha"]
    MH_alpha = old["MH"]["alpha"]
    J = len(alpha_old)
    alpha_star = rng.normal(alpha_old, MH_alpha, J)
    log_cc_star = sum_(log_likelihood(Y, alpha_star, old["beta"], old["theta"]), 0) + np.log(
        dnorm(alpha_star, a0, A0)
    )
    log_cc_old = sum_(log_likelihood(Y, alpha_old, old["beta"], old["theta"]), 0) + np.log(
        dnorm(alpha_old, a0, A0)
    )
    log_prop_star = np.log(dnorm(alpha_star, alpha_old, MH_alpha))
    log_prop_old = np.log(dnorm(alpha_old, alpha_star, MH_alpha))
    log_ac = np.minimum(log_cc_star + log_prop_old - log_cc_old - log_prop_star, 0)
    acc_new = np.where(np.log(rng.uniform(size=J)) < log_ac, 1, 0)
    cur = dict(old)
    cur["alpha"] = np.where(acc_new == 1, alpha_star, alpha_old)
    cur["acc"] = dict(old["acc"], alpha=old["acc"]["alpha"] + acc_new)
    return cur


def beta_sampling(Y, old, b0, B0, rng):
    beta_old = old["beta"]
    MH_beta = old["MH"]["beta"]
    J = len(beta_old)
    beta_star = rng.normal(beta_old, MH_beta, J)
    log_cc_star = sum_(log_likelihood(Y, old["alpha"], beta_star, old["theta"]), 0) + np.log(
        dnorm(beta_star, b0, B0)
    )
    log_cc_old = sum_(log_likelihood(Y, old["alpha"], beta_old, old["theta"]), 0) + np.log(
        dnorm(beta_old, b0, B0)
    )
    log_prop_star = np.log(dnorm(beta_star, beta_old, MH_beta))
    log_prop_old = np.log(dnorm(beta_old, beta_star, MH_beta))
    log_ac = np.minimum(log_cc_star + log_prop_old - log_cc_old - log_prop_star, 0)
    acc_new = np.where(np.log(rng.uniform(size=J)) < log_ac, 1, 0)
    cur = dict(old)
    cur["beta"] = np.where(acc_new == 1, beta_star, beta_old)
    cur["acc"] = dict(old["acc"], beta=old["acc"]["beta"] + acc_new)
    return cur


def theta_sampling(Y, old, rng):
    theta_old = old["theta"]
    MH_theta = old["MH"]["theta"]
    I = len(theta_old)
    theta_star = rng.normal(theta_old, MH_theta, I)
    log_cc_star = sum_(log_likelihood(Y, old["alpha"], old["beta"], theta_star), 1) + np.log(
        dnorm(theta_star, 0, 1)
    )
    log_cc_old = sum_(log_likelihood(Y, old["alpha"], old["beta"], theta_old), 1) + np.log(
        dnorm(theta_old, 0, 1)
    )
    log_prop_star = np.log(dnorm(theta_star, theta_old, MH_theta))
    log_prop_old = np.log(dnorm(theta_old, theta_star, MH_theta))
    log_ac = np.minimum(log_cc_star + log_prop_old - log_cc_old - log_prop_star, 0)
    acc_new = np.where(np.log(rng.uniform(size=I)) < log_ac, 1, 0)
    cur = dict(old)
    cur["theta"] = np.where(acc_new == 1, theta_star, theta_old)
    cur["acc"] = dict(old["acc"], theta=old["acc"]["theta"] + acc_new)
    return cur


def MH_irt(Y, alpha_init, beta_init, theta_init, MH_alpha, MH_beta, MH_theta,
           iter, warmup, thin, seed, a0, A0, b0, B0):
    """The tutorial's MH_irt (iter = kept iterations after warmup, as in the R code)."""
    rng = np.random.default_rng(seed)
    I, J = Y.shape
    total_iter = iter + warmup
    alpha_store = np.full((J, iter // thin), np.nan)
    beta_store = np.full((J, iter // thin), np.nan)
    theta_store = np.full((I, iter // thin), np.nan)
    cur = {
        "alpha": alpha_init, "beta": beta_init, "theta": theta_init,
        "MH": {"alpha": MH_alpha, "beta": MH_beta, "theta": MH_theta},
        "acc": {"alpha": 0, "beta": 0, "theta": 0},
    }
    with np.errstate(all="ignore"):  # R returns NaN/Inf silently
        for ii in range(1, total_iter + 1):
            cur = theta_sampling(Y, cur, rng)
            cur = alpha_sampling(Y, cur, a0, A0, rng)
            cur = beta_sampling(Y, cur, b0, B0, rng)
            if ii > warmup and (ii - warmup) % thin == 0:
                iii = (ii - warmup) // thin - 1
                alpha_store[:, iii] = cur["alpha"]
                beta_store[:, iii] = cur["beta"]
                theta_store[:, iii] = cur["theta"]
    return {
        "theta": theta_store, "alpha": alpha_store, "beta": beta_store,
        "ac_rate": {k: v / total_iter for k, v in cur["acc"].items()},
    }


# ---------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------
TUTORIAL = dict(MH_alpha=2.0, MH_beta=0.6, MH_theta=0.9, a0=0.0, A0=10.0, b0=1.0, B0=0.2)


def run_case(name, Y, n_iter, warmup, thin, port_iters, adapt, seed, anchor_rows,
             ridge=False):
    I, J = Y.shape
    theta_init = np.full(I, 0.1)
    lo, hi = anchor_rows
    theta_init[lo], theta_init[hi] = -2.0, 2.0
    alpha_init = np.full(J, 0.1)
    beta_init = np.full(J, 0.1)

    # port (timed on port_iters total iterations, same warmup fraction)
    p_total = min(port_iters, n_iter) if port_iters else n_iter
    p_warm = int(round(p_total * warmup / n_iter))
    t0, c0 = time.perf_counter(), time.process_time()
    port = MH_irt(Y, alpha_init.copy(), beta_init.copy(), theta_init.copy(),
                  iter=p_total - p_warm, warmup=p_warm, thin=thin, seed=seed, **TUTORIAL)
    port_s, port_cpu = time.perf_counter() - t0, time.process_time() - c0
    extrapolated = p_total < n_iter
    if extrapolated:
        port_s = port_s * n_iter / p_total
        port_cpu = port_cpu * n_iter / p_total

    t0, c0 = time.perf_counter(), time.process_time()
    post = privirt.mh_2pl(
        Y, n_iter=n_iter, warmup=warmup, thin=thin,
        proposal_sd=(TUTORIAL["MH_theta"], TUTORIAL["MH_beta"], TUTORIAL["MH_alpha"]),
        priors={"theta": (0.0, 1.0), "a": (TUTORIAL["b0"], TUTORIAL["B0"] ** 2),
                "b": (TUTORIAL["a0"], TUTORIAL["A0"] ** 2)},
        init={"theta": theta_init, "a": beta_init, "b": alpha_init},
        adapt=adapt, seed=seed, progress=False, device="cpu", ridge_moves=ridge,
    )
    ours_s, ours_cpu = time.perf_counter() - t0, time.process_time() - c0

    # agreement check: same model, so the posterior means must agree up to MC error
    theta_port = np.nanmean(port["theta"], axis=1)
    theta_ours = post.mean("theta").to_numpy()
    corr = float(np.corrcoef(theta_port, theta_ours)[0, 1]) if I > 2 else float("nan")
    return {
        "case": name, "iters": n_iter, "port_s": port_s, "extrapolated": extrapolated,
        "port_iters": p_total, "privirt_s": ours_s, "ratio": port_s / ours_s, "corr": corr,
        "port_cpu": port_cpu, "privirt_cpu": ours_cpu, "ratio_cpu": port_cpu / ours_cpu,
        "acc": post.acceptance_rates().iloc[0].to_dict(),
    }


def warm_allocator():
    """Put the C allocator in the state it reaches after any large temporary was freed.

    glibc serves blocks above its mmap threshold (128 KiB at start) with fresh pages from
    the kernel, and raises the threshold when such a block is freed.  The port allocates
    dozens of 100 × 700 temporaries per iteration; at the initial threshold each costs
    page faults, and case (b) of the port ran about 3.5× slower when it was timed before
    anything in the process had freed a block of a few MiB than after.  Freeing one
    16 MiB block first makes the timings independent of the order in which things run
    (and gives the port its faster state).  Elsewhere this is a harmless allocation.
    """
    block = np.ones(2**21)
    del block


def repeat(times, run):
    """``times`` runs of one case, then (for several) a row of per-column medians."""
    runs = [run() for _ in range(times)]
    if times == 1:
        return runs
    med = dict(runs[0], case=runs[0]["case"] + f" median of {times}")
    for key in ("port_s", "privirt_s", "ratio", "port_cpu", "privirt_cpu", "ratio_cpu", "corr"):
        med[key] = float(np.median([r[key] for r in runs]))
    return runs + [med]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="votes CSV for case (a) instead of simulated votes")
    ap.add_argument("--person-col", default=None, help="label column of --data")
    ap.add_argument("--transpose", action="store_true", help="--data has voters as columns")
    ap.add_argument("--port-iters", type=int, default=None,
                    help="time the port on this many iterations of case (b) and extrapolate")
    ap.add_argument("--adapt", action="store_true", help="run privirt with adaptation")
    ap.add_argument("--ridge", action="store_true", help="run privirt with ridge moves")
    ap.add_argument("--quick", action="store_true", help="short smoke run (1/10 iterations)")
    ap.add_argument("--only", choices=["a", "b"], help="run one case")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each case this many times (port and privirt alternating) and "
                         "add a row of medians (the VM may be shared)")
    args = ap.parse_args(argv)
    scale = 10 if args.quick else 1

    # import and first-call costs (lazy imports of privirt's modules) are not timed
    privirt.mh_2pl(np.array([[1.0, 0.0], [0.0, 1.0]]), n_iter=3, warmup=1, progress=False,
                   device="cpu").summary()
    warm_allocator()
    rows = []
    if args.only in (None, "a"):
        if args.data:
            resp = privirt.as_responses(args.data, person_col=args.person_col)
            frame = resp.to_frame()
            if args.transpose:
                frame = frame.T
            Y = frame.to_numpy(dtype=float)
            name = f"(a) data {Y.shape[0]}x{Y.shape[1]}"
        else:
            Y, theta, _, _ = simulate_2pl(9, 43, seed=args.seed)
            name = "(a) sim 9x43"
        rows += repeat(args.repeat, lambda: run_case(
            name, Y, 15000 // scale, 5000 // scale, 10, None, args.adapt, args.seed,
            (0, Y.shape[0] - 1), args.ridge))
    if args.only in (None, "b"):
        Y, theta, _, _ = simulate_2pl(100, 700, p_observed=0.8, seed=args.seed)
        lo, hi = int(np.argmin(theta)), int(np.argmax(theta))
        rows += repeat(args.repeat, lambda: run_case(
            "(b) sim 100x700, 20% missing", Y, 20000 // scale, 10000 // scale, 10,
            args.port_iters and args.port_iters // scale, args.adapt, args.seed, (lo, hi),
            args.ridge))

    print("wall-clock seconds (and CPU seconds of this process, less sensitive to other load)")
    print(f"{'case':45s} {'iters':>6s} {'port s':>9s} {'privirt s':>10s} {'ratio':>6s} "
          f"{'port cpu':>9s} {'privirt cpu':>11s} {'ratio':>6s} {'corr θ':>7s}")
    for r in rows:
        note = f"  (port timed on {r['port_iters']} iterations, extrapolated)" if r[
            "extrapolated"] else ""
        print(f"{r['case']:45s} {r['iters']:6d} {r['port_s']:9.2f} {r['privirt_s']:10.2f} "
              f"{r['ratio']:6.1f} {r['port_cpu']:9.2f} {r['privirt_cpu']:11.2f} "
              f"{r['ratio_cpu']:6.1f} {r['corr']:7.3f}{note}")
    print("tutorial's R code, case (a) on its author's machine: 28.5 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

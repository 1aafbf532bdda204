"""The noise-aware spectral bootstrap's refits linearised: one-step against full (BENCHMARKS.md,
"Session 29: the spectral bootstrap's refits linearised").

For each cell ``nxmxeps`` and each of ``--datasets`` data sets (``privirt.simulate_rasch``, fresh
seeds from 97 300 000 on), one Gaussian release (δ = 1e-5) and, on it, the noise-aware
intervals (``spectral_from_release(estimator="noise_aware")``, the same bootstrap seed) with the
replicates refitted in full and by one step (``intervals.BOOTSTRAP_REFITS`` patched).  Printed per
cell and refit: the coverage of the nominal 95 % intervals of the true (centred) difficulties
pooled over items and data sets ± its SE over the data sets, the ratio of se's item by item
(one-step / full: median, 5 % and 95 %), CPU seconds of the call (this process).

``--time-only nxm`` (ε = 1) times the default call with one-step refits and estimates the full
refits' call from its parts (a full refit, a one-step refit and a linearisation point, timed on
one replicate), when the full call takes too long to run.

    nice python benchmarks/bench_spectral_linboot.py --cells 1000x100x1,10000x300x0.3 --datasets 4
    nice python benchmarks/bench_spectral_linboot.py --time-only 10000x2000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import privirt  # noqa: E402
from privirt.private.counts import intervals as iv  # noqa: E402
from privirt.private.counts.noisy_likelihood import noise_variance  # noqa: E402

SEED = 97_300_000


def data(n: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rasch responses and the centred true difficulties (``simulate_rasch`` returns X, θ, β:
    unpacked by position, since at n = m the abilities have the difficulties' size too)."""
    X, _theta, beta = privirt.simulate_rasch(n, m, seed=seed)
    return X, beta - beta.mean()


def call(release, refits: str, seed: int, n_boot: int | None):
    """The intervals on ``release`` with ``refits``, and the call's CPU seconds."""
    iv.BOOTSTRAP_REFITS = refits
    c = time.process_time()
    fit = privirt.spectral_from_release(release, seed=seed, n_boot=n_boot, estimator="noise_aware")
    return fit, time.process_time() - c


def cell(n: int, m: int, eps: float, datasets: int, n_boot: int | None, k: int) -> None:
    cov: dict[str, list[float]] = {"full": [], "one_step": []}
    cpu: dict[str, float] = {"full": 0.0, "one_step": 0.0}
    ratios = []
    for d in range(datasets):
        s = SEED + 1000 * k + 10 * d
        X, beta = data(n, m, s)
        rel = privirt.release_counts(X, epsilon=eps, delta=1e-5, seed=s + 1)
        se = {}
        for refits in ("full", "one_step"):
            fit, t = call(rel, refits, s + 2, n_boot)
            ci = fit.ci.to_numpy()
            cov[refits].append(float(np.mean((ci[:, 0] <= beta) & (beta <= ci[:, 1]))))
            cpu[refits] += t
            se[refits] = fit.se.to_numpy()
        ratios.append(se["one_step"] / se["full"])
    r = np.concatenate(ratios)
    q = np.quantile(r, [0.05, 0.5, 0.95])
    for refits in ("full", "one_step"):
        c = np.array(cov[refits])
        sd = c.std(ddof=1) / np.sqrt(c.size) if c.size > 1 else float("nan")
        extra = f"| {q[1]:.3f} ({q[0]:.3f}–{q[2]:.3f})" if refits == "one_step" else "| —"
        print(f"| {n} × {m} | {eps} | {refits} | {c.mean():.3f} ± {sd:.3f} {extra} | "
              f"{cpu[refits] / datasets:.1f} |", flush=True)


def time_only(n: int, m: int) -> None:
    X, _ = data(n, m, SEED + 900_000 + m)
    rel = privirt.release_counts(X, epsilon=1.0, delta=1e-5, seed=SEED + 900_001 + m)
    fit, t1 = call(rel, "one_step", SEED + 900_002 + m, None)
    reps = int(fit.info["n_boot"]) + iv.CALIBRATION_STEPS * int(fit.info["calibration_replicates"])
    print(f"one-step call: {t1:.1f} CPU s ({fit.info['n_boot']} replicates + "
          f"{fit.info['calibration_steps']} calibration evaluations), median se {np.median(fit.se):.4f}", flush=True)
    # the parts (one BLAS thread, as in the bootstrap): a full refit and a one-step refit of one
    # noisy replicate of the release's law, and one linearisation point
    from privirt._threads import one_blas_thread
    from privirt.private.counts._design import graph_design
    from privirt.private.counts._linboot import linear_point, one_step_batch
    from privirt.private.counts.ability import _pair_means, fit_ability_normal
    from privirt.private.counts.noisy_likelihood import noise_aware_batch

    G, nu = rel.graph.to_numpy(), noise_variance(rel.privacy)
    truth = fit.beta.to_numpy()
    d, tol = graph_design(G), iv.boot_tol(n, m, nu)
    Yx = n * _pair_means(truth, *fit_ability_normal(rel.Y.to_numpy().astype(float), G, truth, n))
    rng = np.random.default_rng(SEED + 900_003 + m)
    Y = np.where(G, Yx + np.rint(rng.normal(0.0, np.sqrt(nu), Yx.shape)), 0.0)[None]

    @one_blas_thread
    def parts() -> tuple[float, float, float]:
        c0 = time.process_time()
        noise_aware_batch(Y, G, nu, tol=tol, design=d)
        c1 = time.process_time()
        point = linear_point(Yx, d, nu, tol=tol)
        c2 = time.process_time()
        one_step_batch(Y, point, d, nu, tol=tol)
        return c1 - c0, time.process_time() - c2, time.process_time() - c1

    full, one, lin = parts()
    lin -= one
    evals = int(fit.info["calibration_steps"]) + 1
    print(f"a full refit {full:.2f} CPU s, a one-step refit {one:.2f}, a linearisation point {lin:.2f}")
    est = t1 - evals * lin + reps * (full - one)
    print(f"full call estimated: {est:.0f} CPU s (the one-step call less {evals} points, "
          f"{reps} replicates refitted in full instead)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", default="1000x100x1,10000x100x1")
    ap.add_argument("--datasets", type=int, default=4)
    ap.add_argument("--n-boot", type=int, default=None, help="replicates (default: the call's default)")
    ap.add_argument("--time-only", default=None, help="nxm: time the default call (see above)")
    a = ap.parse_args()
    if a.time_only:
        n, m = (int(v) for v in a.time_only.split("x"))
        time_only(n, m)
        return
    print("| n × m | ε | refits | coverage ± SE | se ratio one-step/full: median (5–95 %) | CPU s a call |")
    print("|---|---|---|---|---|---|")
    for k, c in enumerate(a.cells.split(",")):
        n, m, eps = c.split("x")
        cell(int(n), int(m), float(eps), a.datasets, a.n_boot, k)


if __name__ == "__main__":
    main()

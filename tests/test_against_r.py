"""privirt against R where R is installed (skipped otherwise): the free-slope Gibbs sampler
against MCMCpack's ``MCMCirt1d`` (the same model and algorithm), and the Rasch fit statistics
with maximum likelihood abilities against eRm's ``itemfit``.  The full Senate comparison is
``benchmarks/bench_rollcall.py`` (BENCHMARKS.md)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import special

import privirt

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_rollcall", ROOT / "benchmarks" / "bench_rollcall.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _has_r_package(name: str) -> bool:
    if shutil.which("Rscript") is None:
        return False
    proc = subprocess.run(["Rscript", "-e", f"suppressMessages(library({name}))"],
                          capture_output=True, text=True)
    return proc.returncode == 0


def test_rollcall_loader_drops_labels_and_unanimous_votes(tmp_path):
    path = tmp_path / "votes.csv"
    pd.DataFrame({"id": [1, 2, 3], "party": [0, 1, 1], "member": ["A", "B", "C"],
                  "rc1": [1, 0, 1], "rc2": [1, 1, 1], "rc3": [0, np.nan, 1]}).to_csv(
        path, index=False)
    votes = _bench().load_votes(path)
    assert list(votes.columns) == ["rc1", "rc3"] and list(votes.index) == ["A", "B", "C"]
    assert _bench()._r_constraints({"A": "-", "B": 1}) == 'list(`A` = "-", `B` = 1.0)'


@pytest.mark.slow
@pytest.mark.skipif(not _has_r_package("MCMCpack"), reason="needs Rscript with MCMCpack")
def test_free_slopes_agree_with_mcmcirt1d():
    """Simulated roll calls with slopes of both signs, the same priors and constraints:
    posterior means of θ and of the slopes agree with MCMCirt1d's (β = a, α = b)."""
    rng = np.random.default_rng(11)
    n, k = 40, 120
    theta = rng.standard_normal(n)
    a = rng.uniform(0.7, 2.0, k) * rng.choice([-1.0, 1.0], k)
    b = rng.normal(0, 0.7, k)
    X = (rng.random((n, k)) < special.ndtr(np.outer(theta, a) - b)).astype(float)
    X[rng.random(X.shape) < 0.05] = np.nan
    names = [f"v{i}" for i in range(n)]
    votes = pd.DataFrame(X, index=names, columns=[f"rc{j}" for j in range(k)])
    p = votes.mean()
    votes = votes.loc[:, (p > 0) & (p < 1)]
    anchors = {names[int(np.argmin(theta))]: "-", names[int(np.argmax(theta))]: "+"}
    bench = _bench()
    ours = bench.run_privirt(votes, 500, 3000, seed=1, anchors=anchors)
    theirs = bench.run_mcmcirt1d(votes, 500, 3000, seed=1, anchors=anchors)
    cmp = bench.compare(ours, theirs)
    assert cmp["theta"][0] > 0.995, cmp
    assert cmp["a"][0] > 0.97, cmp
    assert cmp["b"][0] > 0.97, cmp


@pytest.mark.slow
@pytest.mark.skipif(not _has_r_package("eRm"), reason="needs Rscript with eRm")
def test_item_fit_with_mle_abilities_reproduces_erm(tmp_path):
    """docs/fit.md: item_fit at the MLE abilities and eRm's difficulties gives eRm's
    itemfit (mean squares and t); the default WLE abilities do not."""
    X, _, _ = privirt.simulate_rasch(500, 10, seed=3)[:3]
    frame = pd.DataFrame(X, columns=[f"i{j}" for j in range(X.shape[1])])
    frame.to_csv(tmp_path / "x.csv", index=False)
    script = tmp_path / "erm.R"
    script.write_text(
        'suppressMessages(library(eRm))\n'
        f'X <- as.matrix(read.csv("{tmp_path / "x.csv"}"))\n'
        'm <- RM(X); f <- itemfit(person.parameter(m))\n'
        'write.csv(data.frame(beta = -m$betapar, outfit = f$i.outfitMSQ, infit = f$i.infitMSQ,'
        ' outfit_z = f$i.outfitZ, infit_z = f$i.infitZ),'
        f' "{tmp_path / "erm.csv"}", row.names = FALSE)\n'
    )
    subprocess.run(["Rscript", str(script)], check=True, capture_output=True)
    erm = pd.read_csv(tmp_path / "erm.csv")
    beta = pd.Series(erm["beta"].to_numpy(), index=frame.columns)
    mle = privirt.estimate_abilities(frame, beta, method="mle")
    ours = privirt.item_fit(frame, beta, theta=mle)
    for col in ("outfit", "infit", "outfit_z", "infit_z"):
        np.testing.assert_allclose(ours[col].to_numpy(), erm[col].to_numpy(), atol=1e-3)
    wle = privirt.item_fit(frame, beta)
    assert np.abs(wle["outfit_z"].to_numpy() - erm["outfit_z"].to_numpy()).max() > 0.1

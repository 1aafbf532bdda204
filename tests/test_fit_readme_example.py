"""The README example of the model checks (section "Model fit, information and reliability")
runs and prints the values shown there."""

from __future__ import annotations

import contextlib
import io

import pytest

pytest.importorskip("matplotlib")

EXAMPLE = """\
import numpy as np
import pandas as pd
import privirt

# 1000 persons, 12 items; q5 discriminates poorly (slope 0.3), q9 sharply (slope 3)
rng = np.random.default_rng(1)
theta = rng.standard_normal(1000)
beta = np.linspace(-1.5, 1.5, 12)
slope = np.ones(12)
slope[5], slope[9] = 0.3, 3.0
prob = 1 / (1 + np.exp(-slope * (theta[:, None] - beta)))
X = pd.DataFrame((rng.random((1000, 12)) < prob).astype(int),
                 columns=[f"q{i}" for i in range(12)])

est = privirt.cmle_estimate(X)
fit = privirt.item_fit(X, est)              # θ: Warm's WLE; extreme scores left out
print(fit.loc[["q0", "q5", "q9"]].round(2))
rel = privirt.reliability(X, est)
print(f"person reliability {rel.person_reliability:.2f}, KR-20 {rel.kr20:.2f}")
lr = privirt.andersen_test(X)               # median raw-score split, CML in each half
print(f"Andersen LR = {lr.statistic:.1f}, df = {lr.df}, p = {lr.pvalue:.1e}")
print(privirt.test_information(est, [-2, 0, 2]).round(2).reset_index())

from privirt import plots                   # needs the plots extra (matplotlib)
plots.wright_map(est, privirt.estimate_abilities(X, est.beta), path="wright_map.png")
plots.test_information_curve(est, path="test_information.png")
"""

PRINTED = """\
    infit  outfit  infit_z  outfit_z    n
q0   0.94    0.94    -1.59     -0.83  978
q5   1.15    1.22     5.38      5.25  978
q9   0.76    0.60    -5.32     -5.39  978
person reliability 0.57, KR-20 0.67
Andersen LR = 63.5, df = 11, p = 2.1e-09
   theta  information    se
0   -2.0         1.43  0.84
1    0.0         2.42  0.64
2    2.0         1.41  0.84
"""


def test_readme_fit_example_prints_its_values(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(EXAMPLE, "README fit example", "exec"), {"__name__": "__readme__"})
    import matplotlib.pyplot as plt

    plt.close("all")
    assert out.getvalue() == PRINTED
    assert (tmp_path / "wright_map.png").stat().st_size > 0
    assert (tmp_path / "test_information.png").stat().st_size > 0

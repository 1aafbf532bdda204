"""Shared test data: 2PNO responses with a ~ LogNormal(0, 0.3), b ~ N(0, 1), θ ~ N(0, 1) (the
private 2PL's design, ``docs/private_2pl.md``; the benchmark's ``simulate`` draws the same)."""

from __future__ import annotations

import numpy as np
from scipy import special


def lognormal_2pno(n: int = 2000, m: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X int8 (n, m), a, b)."""
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(0.0, 0.3, m))
    b = rng.normal(0.0, 1.0, m)
    theta = rng.standard_normal(n)
    X = (rng.random((n, m)) < special.ndtr(theta[:, None] * a - b)).astype(np.int8)
    return X, a, b


def objective_residuals(rel):
    """The private 2PL fit's objective as residuals r(x), cost ½‖r‖² (``docs/private_2pl.md``
    §3), written out from the model for tests that check the fit against it independently."""
    from privirt.private.twopl import fit as F

    n, m = rel.n_persons, rel.totals.size
    t, d = rel.totals.to_numpy(float), rel.pairs.to_numpy(float)
    i, j = np.triu_indices(m, 1)
    p, q = t / n, d / n
    pc, qc = np.clip(p, 1 / n, 1 - 1 / n), np.clip(q, 1 / n, 1 - 1 / n)
    sd_t = np.sqrt(pc * (1 - pc) / n + (rel.sigma_totals / n) ** 2)
    sd_n = np.sqrt(qc * (1 - qc) / n + (rel.sigma_pairs / n) ** 2)
    bi = bj = np.zeros(i.size)
    if m == 2:  # the pair's residual given the two totals (its regression on them, a constant)
        from privirt.private.twopl._pairs import pair_regression

        bi, bj, sd_n = (x[0] for x in pair_regression(pc[None], qc[None], n, n, (rel.sigma_totals / n) ** 2,
                                                      (rel.sigma_pairs / n) ** 2, i, j))
        q = q - bi * p[i] - bj * p[j]

    def res(x: np.ndarray) -> np.ndarray:
        _, _, _, pt, pn = F._model(x[None], m, i, j)
        pn = pn - bi * pt[:, i] - bj * pt[:, j]
        return np.concatenate([(p - pt[0]) / sd_t, (q - pn[0]) / sd_n, (x[-1] - x[m:2 * m]) / F.LOG_A_PRIOR_SD,
                               [-x[-1] / F.MEAN_PRIOR_SD], -x[:m] / F.TAU_PRIOR_SD])

    return res


def reversed_anchor_case():
    """40 persons x 12 items (2PL slopes in [0.8, 2]), 15 % missing, anchored against the data's
    direction: the lowest true θ at +1, the highest at -1 (a reviewer's case).  Returns the frame
    (persons v0.., items r0..), the true θ, the two anchored rows and the anchors."""
    import pandas as pd

    rng = np.random.default_rng(93900060)
    n, m = 40, 12
    th = rng.standard_normal(n)
    a, b = rng.uniform(0.8, 2, m), rng.normal(0, 1, m)
    Y = (rng.random((n, m)) < special.expit(np.outer(th, a) - b)).astype(float)
    Y[rng.random((n, m)) < 0.15] = np.nan
    lo, hi = int(np.argmin(th)), int(np.argmax(th))
    frame = pd.DataFrame(Y, index=[f"v{i}" for i in range(n)], columns=[f"r{j}" for j in range(m)])
    return frame, th, lo, hi, {f"v{lo}": +1, f"v{hi}": -1}

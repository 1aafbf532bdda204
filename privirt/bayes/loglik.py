"""Pointwise log-likelihood of the samplers' posteriors, for ``arviz.loo`` / ``arviz.waic``.

For draw s and an observed cell (i, j) with η = a_j θ_i − b_j and s_ij = +1 (y = 1) or −1
(y = 0): log Φ(s_ij η) under the 2PNO model and log σ(s_ij η) = −log(1 + e^(−s_ij η))
under the 2PL model.  Missing cells have no term.  ``by="person"`` sums each person's cells
(the leave-one-person-out unit).
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["pointwise_log_likelihood", "MODELS", "MAX_CELL_TERMS"]

MODELS = ("2pno", "2pl")
#: ``to_arviz()`` keeps per-response terms up to this many values (1 GiB of float64)
MAX_CELL_TERMS = 2**27
_BY = ("cell", "person")


def _log_cdf(model: str, x: np.ndarray) -> np.ndarray:
    if model == "2pno":
        return special.log_ndtr(x)
    return -np.logaddexp(0.0, -x)


def pointwise_log_likelihood(
    model: str, draws: dict[str, np.ndarray], codes: np.ndarray, *, by: str = "cell"
) -> np.ndarray:
    """Log-likelihood of every observed cell (or person) under every draw.

    Parameters
    ----------
    model : {"2pno", "2pl"}
    draws : dict
        ``"theta"`` (chain, draw, n), ``"a"`` and ``"b"`` (chain, draw, k).
    codes : ndarray of int8, (n, k)
        1 correct, 0 incorrect, −1 missing.
    by : {"cell", "person"}
        One term per observed cell (row-major order) or per person.

    Returns
    -------
    ndarray
        (chain, draw, observed cells) or (chain, draw, n).
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if by not in _BY:
        raise ValueError(f"by must be 'cell' or 'person', got {by!r}")
    theta, a, b = draws["theta"], draws["a"], draws["b"]
    obs = codes >= 0
    sign = np.where(codes == 1, 1.0, -1.0)
    C, D, n = theta.shape
    out = np.empty((C, D, n if by == "person" else int(obs.sum())))
    for c in range(C):  # one chain at a time: (D, n, k) temporaries
        eta = theta[c][:, :, None] * a[c][:, None, :] - b[c][:, None, :]
        ll = _log_cdf(model, sign * eta)
        if by == "person":
            out[c] = np.where(obs, ll, 0.0).sum(axis=2)
        else:
            out[c] = ll[:, obs]
    return out

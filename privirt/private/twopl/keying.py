"""Items keyed the other way (true a < 0), seen from the private 2PNO release alone.

The 2PNO with every a_i > 0 makes every pair of items correlate positively, so each item's
covariance with the rest of the items (the sum of its pair covariances) is positive.  An item
whose noisy item–rest covariance lies far below 0, by more than :data:`NEGATIVE_KEY_SDS` of its
sampling and privacy noise, is keyed the other way (a reverse-worded item, a roll call): the fit
can only put its a at about 0 (``docs/private_2pl.md`` §5).  Computed from the release's counts,
public n and noise scales only: post-processing.
"""

from __future__ import annotations

import numpy as np

from .statistics import pair_index

__all__ = ["NEGATIVE_KEY_SDS", "item_rest_covariance", "negatively_keyed"]

#: An item is flagged where its noisy item–rest covariance is below −NEGATIVE_KEY_SDS of its SD
#: (a one-sided 4-SD test: under the model the covariance is ≥ 0).
NEGATIVE_KEY_SDS: float = 4.0


def item_rest_covariance(totals: np.ndarray, pairs: np.ndarray, n: float | tuple, sigma_totals: float | np.ndarray,
                         sigma_pairs: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(c, sd): each item's covariance with the rest, c_i = Σ_{j≠i} cov_ij with
    cov_ij = (p_i + p_j − q_ij)/2 − p_i p_j (p the proportions correct, q the disagreement
    proportions), and its SD by the delta method (sampling plus privacy noise, the errors taken
    as independent).

    Parameters
    ----------
    totals, pairs : ndarray
        The fit's inputs (:func:`~privirt.private.twopl.mcar.fit_inputs`): counts (m,) and (P,) on
        the scale of ``n``.
    n : float or tuple
        Persons, or (n per total, n per pair) under MCAR.
    sigma_totals, sigma_pairs : float or ndarray
        The noise SDs on the counts' scale.

    Returns
    -------
    c, sd : ndarray, shape (m,)
    """
    n_t, n_p = (np.asarray(n[0], float), np.asarray(n[1], float)) if isinstance(n, tuple) else (float(n), float(n))
    p = np.clip(np.asarray(totals, float) / n_t, 0.0, 1.0)
    q = np.clip(np.asarray(pairs, float) / n_p, 0.0, 1.0)
    v = p * (1.0 - p) / n_t + (np.asarray(sigma_totals, float) / n_t) ** 2
    w = q * (1.0 - q) / n_p + (np.asarray(sigma_pairs, float) / n_p) ** 2
    m = p.size
    i, j = pair_index(m)
    cov = (p[i] + p[j] - q) / 2.0 - p[i] * p[j]
    c = np.bincount(i, cov, m) + np.bincount(j, cov, m)
    w_sum = np.bincount(i, w * np.ones_like(cov), m) + np.bincount(j, w * np.ones_like(cov), m)
    v = v * np.ones(m)
    grad_own = (m - 1) / 2.0 - (p.sum() - p)  # ∂c_i/∂p_i = Σ_{j≠i} (½ − p_j)
    var = grad_own**2 * v + (0.5 - p) ** 2 * (v.sum() - v) + w_sum / 4.0
    return c, np.sqrt(var)


def negatively_keyed(totals: np.ndarray, pairs: np.ndarray, n: float | tuple, sigma_totals: float | np.ndarray,
                     sigma_pairs: float | np.ndarray) -> np.ndarray:
    """Mask (m,) of the items whose item–rest covariance (:func:`item_rest_covariance`) is below
    −:data:`NEGATIVE_KEY_SDS` of its SD: keyed the other way, which the model (a > 0) cannot fit."""
    c, sd = item_rest_covariance(totals, pairs, n, sigma_totals, sigma_pairs)
    return c < -NEGATIVE_KEY_SDS * sd

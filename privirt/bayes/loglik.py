"""Pointwise log-likelihood of the samplers' posteriors, for ``arviz.loo`` / ``arviz.waic``.

For draw s and an observed cell (i, j) with η = a_j θ_i − b_j and s_ij = +1 (y = 1) or −1
(y = 0): log Φ(s_ij η) under the 2PNO model and log σ(s_ij η) = −log(1 + e^(−s_ij η))
under the 2PL model.  Missing cells have no term.  ``by="person"`` sums each person's cells
(the leave-one-person-out unit).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from ..posterior import Posterior

__all__ = ["pointwise_log_likelihood", "SamplerPosterior", "MODELS"]

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


@dataclass(repr=False)
class SamplerPosterior(Posterior):
    """A :class:`~privirt.posterior.Posterior` that also knows its model and data, so
    :meth:`to_arviz` adds the pointwise ``log_likelihood`` group.

    Attributes
    ----------
    model : {"2pno", "2pl"}
        The likelihood the draws belong to.
    codes : ndarray of int8, (n, k), optional
        The responses the sampler read (1, 0, −1 for missing).
    """

    model: str = ""
    codes: np.ndarray | None = field(default=None, repr=False)

    def log_likelihood(self, by: str = "cell") -> np.ndarray:
        """Pointwise log-likelihood (chain, draw, obs); see :func:`pointwise_log_likelihood`."""
        if self.codes is None or self.model not in MODELS:
            raise ValueError("this posterior carries no data or model to evaluate")
        draws = {p: self.get_draws(p) for p in ("theta", "a", "b")}
        return pointwise_log_likelihood(self.model, draws, self.codes, by=by)

    def _obs_labels(self, by: str) -> list[str]:
        persons = list(map(str, self.labels["theta"]))
        if by == "person":
            return persons
        items = list(map(str, self.labels["a"]))
        rows, cols = np.nonzero(self.codes >= 0)
        return [f"{persons[i]}|{items[j]}" for i, j in zip(rows, cols)]

    def to_arviz(self, log_likelihood: str | None = "auto") -> Any:
        """An :class:`arviz.InferenceData` with the draws and the pointwise log-likelihood.

        Parameters
        ----------
        log_likelihood : {"auto", "cell", "person"} or None
            Group ``log_likelihood`` with variable ``y`` over dimension ``obs``: one term
            per observed response (``"cell"``, labels ``"person|item"``) or per person
            (``"person"``); ``"auto"`` is ``"cell"`` unless that array would exceed
            :data:`MAX_CELL_TERMS` values, then ``"person"`` (with a warning); None leaves
            the group out.
        """
        if log_likelihood not in ("auto", "cell", "person", None):
            raise ValueError(
                f"log_likelihood must be 'auto', 'cell', 'person' or None, got {log_likelihood!r}"
            )
        idata = super().to_arviz()
        if log_likelihood is None:
            return idata
        if log_likelihood == "auto":
            cells = self.n_chains * self.n_draws * int((self.codes >= 0).sum())
            log_likelihood = "cell" if cells <= MAX_CELL_TERMS else "person"
            if log_likelihood == "person":
                warnings.warn(
                    f"the per-response log-likelihood would hold {cells:,} values; the "
                    "log_likelihood group holds one term per person instead (pass "
                    'log_likelihood="cell" to force per-response terms)',
                    UserWarning, stacklevel=2,
                )
        ll = self.log_likelihood(log_likelihood)
        idata.add_groups(
            {"log_likelihood": {"y": ll}},
            coords={"obs": self._obs_labels(log_likelihood)}, dims={"y": ["obs"]},
        )
        return idata


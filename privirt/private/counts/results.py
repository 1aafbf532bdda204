"""Result objects of the private entry points: :class:`NoisyCounts` and
:class:`PrivateSpectralResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..._results import ItemEstimate
from ..statement import PrivacyStatement

__all__ = ["NoisyCounts", "PrivateSpectralResult"]


@dataclass(frozen=True, eq=False)
class NoisyCounts:
    """Noisy pairwise differential counts: the output of :func:`release_counts`.

    Attributes
    ----------
    Y : pandas.DataFrame of int64, items × items
        ``Y.loc[i, j]`` = noisy number of persons with ``i`` right and ``j`` wrong, for the
        directed pairs of the comparison graph; ``0`` on the diagonal and outside the graph
        (those cells are not released — consult ``graph``).  Noisy counts may be negative.
    graph : pandas.DataFrame of bool, items × items
        The (public) comparison graph; symmetric.
    privacy : PrivacyStatement
    """

    Y: pd.DataFrame
    graph: pd.DataFrame
    privacy: PrivacyStatement

    @property
    def items(self) -> pd.Index:
        return self.Y.index

    @property
    def n_edges(self) -> int:
        return int(np.count_nonzero(np.triu(self.graph.to_numpy(), 1)))

    def to_long(self) -> pd.DataFrame:
        """Released cells as a long table ``item_i, item_j, count``."""
        G = self.graph.to_numpy()
        r, c = np.nonzero(G)
        return pd.DataFrame(
            {"item_i": self.items[r], "item_j": self.items[c], "count": self.Y.to_numpy()[r, c]}
        )

    def clipped(self) -> np.ndarray:
        """Post-processed counts for estimation: clipped at zero (float64)."""
        Y = self.Y.to_numpy().astype(np.float64)
        np.clip(Y, 0.0, None, out=Y)
        Y[~self.graph.to_numpy()] = 0.0
        return Y


@dataclass(frozen=True, eq=False)
class PrivateSpectralResult(ItemEstimate):
    """Result of :func:`private_spectral_estimate`.

    Attributes
    ----------
    beta : pandas.Series
        Private item difficulties (centred; higher = harder).
    privacy : PrivacyStatement
    spectral : SpectralResult or NoiseAwareResult
        The fit on the private counts: the spectral fit on the clipped counts, or the
        noise-aware fit when ``info["estimator"]`` is ``"noise_aware"``.
    graph : pandas.DataFrame of bool
        The comparison graph.
    counts : NoisyCounts or None
        The noisy counts (Gaussian/Laplace) — publishable.
    beta_plain, beta_debiased : pandas.Series or None
        Randomized response only: the estimate from the randomized bits as they are
        (``beta_plain``) and from the unbiased estimate of Y (``beta_debiased``).  Both are
        post-processing of the same release; ``beta`` is the one chosen by ``rr_estimator``.
    se : pandas.Series or None
        Standard errors (sampling error and privacy noise; parametric bootstrap from the
        release, ``docs/intervals.md``); NaN with ``n_boot=0``; None for randomized
        response (no intervals); +inf (and ``ci`` unbounded, ``info["informative"]`` False)
        when the estimate does not respond to the difficulties (all noise, §3b there).
    ci : pandas.DataFrame or None
        Columns ``lo``, ``hi`` indexed by item: bias-corrected intervals at
        ``info["confidence"]``; NaN with ``n_boot=0``; None for randomized response.
    info : dict
        Public facts of the run (randomized response: keep probability, estimator; the
        bootstrap: replicates, confidence, fitted ability mean and spread, seed).

    ``items``, ``top_k`` and ``to_frame`` (columns ``beta``, ``se``, ``lo``, ``hi`` and, for
    randomized response, ``beta_plain`` and ``beta_debiased``) come from
    :class:`privirt._results.ItemEstimate`.
    """

    beta: pd.Series
    privacy: PrivacyStatement
    spectral: Any
    graph: pd.DataFrame
    counts: NoisyCounts | None = None
    beta_plain: pd.Series | None = None
    beta_debiased: pd.Series | None = None
    se: pd.Series | None = None
    ci: pd.DataFrame | None = None
    info: dict = field(default_factory=dict, repr=False)

    def _frame_columns(self) -> dict[str, Any]:
        cols: dict[str, Any] = {"beta": self.beta}
        if self.se is not None and self.ci is not None:
            cols.update(se=self.se, lo=self.ci["lo"], hi=self.ci["hi"])
        if self.beta_plain is not None:
            cols["beta_plain"] = self.beta_plain
        if self.beta_debiased is not None:
            cols["beta_debiased"] = self.beta_debiased
        return cols

"""The public comparison graph: Erdős–Rényi sampling (resampled until connected) and ``p0``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..._checks import brief
from ..._seeds import SeedLike, numpy_rng

__all__ = ["AUTO_P0_C", "auto_p0", "check_p0", "sample_comparison_graph", "graph_frame", "n_edges"]

#: ``p0="auto"`` uses p0 = (1 + AUTO_P0_C) · log(m) / m (capped at 1).
AUTO_P0_C: float = 0.5
_MAX_GRAPH_TRIES = 1_000


def check_p0(p0: Any, m: int) -> float:
    """``p0`` as an edge probability in (0, 1] (``"auto"``: :func:`auto_p0`)."""
    if isinstance(p0, str):
        if p0 != "auto":
            raise ValueError(f"p0 must be a number in (0, 1] or 'auto', got {brief(p0)}")
        return auto_p0(m)
    if isinstance(p0, bool) or not isinstance(p0, (int, float, np.integer, np.floating)):
        raise ValueError(f"p0 must be a number in (0, 1] or 'auto', got {brief(p0)}")
    v = float(p0)
    if math.isnan(v) or not (0.0 < v <= 1.0):
        raise ValueError(f"p0 must be in (0, 1] (edge probability of the comparison graph), got {p0!r}")
    return v


def auto_p0(n_items: int) -> float:
    """Default sparse edge probability (1 + c)·log(m)/m with c = :data:`AUTO_P0_C`, ≤ 1."""
    m = int(n_items)
    if m <= 2:
        return 1.0
    return float(min(1.0, (1.0 + AUTO_P0_C) * math.log(m) / m))


def sample_comparison_graph(n_items: int, p0: float | str = 1.0, *, seed: SeedLike = None) -> np.ndarray:
    """An Erdős–Rényi comparison graph G(m, p0), resampled until connected.

    The graph is drawn independently of the data (it costs no privacy), from the ``"graph"``
    child stream of ``seed`` (fresh OS entropy without one).  ``p0 = 1`` is the complete graph.

    Returns
    -------
    ndarray of bool, shape (m, m)
        Symmetric adjacency without self-loops.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    m = int(n_items)
    p = check_p0(p0, m)
    full = ~np.eye(m, dtype=bool)
    rng = numpy_rng(seed, "graph")  # validates seed even when the graph is complete
    if p >= 1.0 or m <= 2:
        return full
    iu = np.triu_indices(m, 1)
    for _ in range(_MAX_GRAPH_TRIES):
        A = np.zeros((m, m), dtype=bool)
        A[iu] = rng.random(iu[0].size) < p
        A |= A.T
        if connected_components(csr_matrix(A), directed=False)[0] == 1:
            return A
    raise ValueError(
        f"p0 = {p:g} is too small for {m} items: {_MAX_GRAPH_TRIES} Erdős–Rényi graphs were all "
        f"disconnected; use p0 >= {auto_p0(m):.3g} (p0='auto') or larger"
    )


def graph_frame(G: np.ndarray, items: pd.Index) -> pd.DataFrame:
    """The adjacency as a DataFrame labelled by item."""
    return pd.DataFrame(G, index=items.copy(), columns=items.copy())


def n_edges(G: np.ndarray) -> int:
    """Undirected edges of a symmetric adjacency."""
    return int(np.count_nonzero(np.triu(G, 1)))

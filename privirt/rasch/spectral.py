"""Spectral estimation of Rasch item difficulties (Nguyen & Zhang; Algorithm 1 of the
private spectral IRT paper).

From the pairwise differential counts ``Y`` (``Y[i, j]`` = persons who got item ``i`` right
and ``j`` wrong, see :mod:`privirt.stats.counts`) build a Markov chain on the items::

    M[i, j] = (Y[i, j] + λ·1{i~j}) / d_i          (i ≠ j)
    M[i, i] = 1 − Σ_{k≠i} M[i, k]

where ``i~j`` marks the pairs that are regularised (see ``regularization`` below) and ``d``
is a normaliser large enough that every row is a probability vector.  Under the Rasch model
``P(X=1) = logistic(θ − β)`` one has ``E Y[i, j] / E Y[j, i] = exp(β_j − β_i)``, so the
chain is reversible with stationary distribution ``π_i ∝ d_i exp(β_i)`` in expectation, and

    β = log(π / d),  centred to mean zero (higher = harder).

See ``docs/spectral.md`` for the derivation, the regularisation and the solvers.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np
import pandas as pd

from .._backend import get_xp, resolve_device, to_numpy
from .._checks import check_choice, check_positive_int, check_positive_number, real_float
from .._results import ItemEstimate
from .._threads import one_blas_thread
from ..exceptions import DisconnectedComparisonGraph, IdentifiabilityWarning, user_stacklevel
from ..data._labels import aligned_frame, item_labels, match_items
from ..data.responses import ResponsesLike, as_responses

__all__ = ["SpectralResult", "spectral_estimate", "spectral_from_counts", "DEFAULT_REGULARIZATION"]

#: Pseudo-count λ added by ``regularization="auto"`` (Nguyen & Zhang's default).
DEFAULT_REGULARIZATION: float = 1.0
#: ``solver="auto"`` solves directly up to this many items on the CPU (GPU: ``4 *``).
DIRECT_MAX_ITEMS: int = 2000

Solver = Literal["auto", "power", "direct"]
Normalizer = Literal["max", "row"]


@dataclass(frozen=True, eq=False)
class SpectralResult(ItemEstimate):
    """Result of :func:`spectral_estimate` / :func:`spectral_from_counts`.

    ``items``, ``top_k`` and ``to_frame`` (columns ``beta``, ``pi``, ``d``) come from
    :class:`privirt._results.ItemEstimate`.

    Attributes
    ----------
    beta : pandas.Series
        Item difficulties indexed by item label, centred to mean zero; higher = harder.
    pi : pandas.Series
        Stationary distribution of the item chain (sums to one).
    d : pandas.Series
        The normaliser ``d_i`` of each row of the chain.
    n_iter : int
        Power iterations used (0 for the direct solve).
    converged : bool
        Whether the stationary equations hold to ``tol`` (L1 residual of ``πM − π``).
    solver : {"power", "direct"}
        The solver that produced ``pi``.
    regularization : float
        The pseudo-count λ used.
    normalizer : {"max", "row"}
        How ``d`` was chosen.
    residual : float
        ``‖πM − π‖₁`` at the returned ``π``.
    """

    beta: pd.Series
    pi: pd.Series
    d: pd.Series
    n_iter: int
    converged: bool
    solver: str
    regularization: float
    normalizer: str = "max"
    residual: float = float("nan")
    info: dict = field(default_factory=dict, repr=False)

    def _frame_columns(self) -> dict[str, Any]:
        return {"beta": self.beta, "pi": self.pi, "d": self.d}


# ---------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------
def spectral_estimate(
    X: ResponsesLike,
    *,
    regularization: float | str = "auto",
    tol: float = 1e-10,
    max_iter: int = 100_000,
    solver: Solver = "auto",
    device: str = "auto",
    normalizer: Normalizer = "max",
    chunk_size: int | None = None,
) -> SpectralResult:
    """Spectral estimate of Rasch item difficulties from 0/1 responses.

    :func:`privirt.pairwise_counts` (only ``Y`` is needed) followed by
    :func:`spectral_from_counts`.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, NaN/None for missing.
    regularization, tol, max_iter, solver, device, normalizer
        See :func:`spectral_from_counts`.
    chunk_size : int, optional
        Persons per chunk for the counts.

    Returns
    -------
    SpectralResult

    Raises
    ------
    DisconnectedComparisonGraph
        Some items are never compared (directly or through other items) with the rest.

    Examples
    --------
    >>> import privirt
    >>> res = privirt.spectral_estimate(privirt.load_dataset("lsat6"), device="cpu")
    >>> res.top_k(1).tolist()
    ['item3']
    """
    from ..stats.counts import differential_counts, has_empty
    from ..data.responses import Responses

    # a validated Responses without empty rows/columns is used as is (the check is chunked,
    # so no n × m temporary); anything else goes through as_responses (drops empties)
    if isinstance(X, Responses) and not has_empty(X):
        resp = X
    else:
        resp = as_responses(X)
    Y = differential_counts(resp, device=device, chunk_size=chunk_size)
    return spectral_from_counts(
        Y,
        items=resp.items,
        regularization=regularization,
        tol=tol,
        max_iter=max_iter,
        solver=solver,
        device=device,
        normalizer=normalizer,
    )


def spectral_from_counts(
    Y: Any,
    *,
    items: Any = None,
    graph: Any = None,
    regularization: float | str = "auto",
    tol: float = 1e-10,
    max_iter: int = 100_000,
    solver: Solver = "auto",
    device: str = "auto",
    normalizer: Normalizer = "max",
) -> SpectralResult:
    """Spectral estimate from (possibly noisy, post-processed) pairwise differential counts.

    Parameters
    ----------
    Y : array-like or DataFrame, shape (m, m)
        Non-negative finite counts, ``Y[i, j]`` ≈ persons with ``i`` right and ``j`` wrong.
        Integers or floats (e.g. noisy counts clipped at zero); the diagonal is ignored.
        Nothing else about the data (such as ``B``) is assumed.
    items : sequence, optional
        Item labels of an array ``Y`` (default ``0 … m-1``).  For a DataFrame ``Y`` (labelled
        by its index) the order of the items: it must name exactly its items (matched as text),
        and ``Y`` is read by label, as ``Y.loc[items, items]``; default: the index's order.
    graph : array-like of bool, shape (m, m), optional
        Symmetric adjacency of the comparison graph.  ``None``: complete graph.  Counts of
        pairs outside the graph are ignored (no transition between them).  A DataFrame is
        read by item label when the counts carry labels (a DataFrame ``Y`` or ``items``): it
        must be labelled by exactly those items, in any order; otherwise by position.
    regularization : float ≥ 0 or "auto"
        Pseudo-count λ added to both directions of every regularised pair, so that a pair
        seen in one direction only still has a transition back (Nguyen & Zhang).  With
        ``graph=None`` the regularised pairs are those compared at least once
        (``Y[i, j] + Y[j, i] > 0``); with a ``graph`` they are all edges of the graph (the
        graph is the comparison design).  ``"auto"`` = 1.  ``0`` disables it; the chain then
        needs a strongly connected support.
    tol : float
        Convergence tolerance: power iteration stops when ``‖π_t − π_{t−1}‖₁ < tol``;
        ``converged`` requires the L1 residual ``‖πM − π‖₁ ≤ max(tol, 1e-9)``.
    max_iter : int
        Power-iteration cap.
    solver : {"auto", "power", "direct"}
        ``"direct"`` solves ``π(I − M) = 0, Σπ = 1`` with a dense LU solve (LAPACK on the
        CPU, CuPy's on the GPU), on a sparse graph too; ``"power"`` iterates ``π ← πM`` from the uniform vector as in
        Algorithm 1 (on a lazy chain ``(I + M)/2`` if ``M`` has no self-loops).
        ``"auto"``: direct up to 2000 items on the CPU (8000 on the GPU), power beyond.
    device : {"auto", "cpu", "gpu"}
        Where the solve runs.
    normalizer : {"max", "row"}
        ``"max"``: one ``d`` for all rows, the largest regularised row sum (Eq. 3 of the
        paper, ``d = max_i Σ_k M_ik``).  ``"row"``: ``d_i`` = row ``i``'s own sum.

    Returns
    -------
    SpectralResult

    Raises
    ------
    ValueError
        Negative, non-finite or non-square counts, or a malformed graph.
    DisconnectedComparisonGraph
        The (regularised) chain is not irreducible: names the separated items.
    """
    Ymat, labels = validate_counts(Y, items)
    m = Ymat.shape[0]
    lam = _validate_regularization(regularization)
    tol = check_positive_number("tol", tol)
    max_iter = check_positive_int("max_iter", max_iter)
    check_choice("solver", solver, ("auto", "power", "direct"))
    check_choice("normalizer", normalizer, ("max", "row"))
    dev = resolve_device(device)

    offdiag = ~np.eye(m, dtype=bool)
    if graph is None:
        G = offdiag
        reg_pairs = ((Ymat + Ymat.T) > 0) & offdiag
    else:
        labelled = isinstance(Y, pd.DataFrame) or items is not None
        G = validate_graph(graph, m, labels if labelled else None) & offdiag
        reg_pairs = G
    M = np.where(G, Ymat, 0.0)
    raw = M
    if lam > 0:
        M = M + lam * reg_pairs
    # advise λ > 0 only where it would link the parts: it adds to the pairs compared at least
    # once (or the graph's edges), so it cannot help when in use already or when they are unlinked
    _check_connected(M, labels, lambda: lam == 0 and _strong_components(M + reg_pairs)[0] == 1)
    if lam > 0 and graph is None:
        _warn_if_regularization_connects(raw, labels, lam)

    rowsum = M.sum(axis=1)
    if normalizer == "max":
        d = np.full(m, rowsum.max())
    else:
        d = rowsum.copy()
    P = M / d[:, None]
    np.fill_diagonal(P, np.clip(1.0 - P.sum(axis=1), 0.0, None))

    if solver == "auto":
        solver = "direct" if m <= (DIRECT_MAX_ITEMS * (4 if dev == "gpu" else 1)) else "power"
    pi, n_iter, used = None, 0, solver
    if solver == "direct":
        pi = _solve_direct(P, dev)
        if pi is None:  # numerically singular or not positive: fall back to iteration
            used = "power"
    if pi is None:
        pi, n_iter = _power_iteration(P, tol, int(max_iter), dev)
        used = "power"
    residual = float(np.abs(pi @ P - pi).sum())
    converged = bool(np.all(pi > 0) and residual <= max(tol, 1e-9))
    if not np.all(pi > 0):
        raise DisconnectedComparisonGraph(
            "the stationary distribution has zero entries (items "
            f"{list(labels[pi <= 0][:5])}); the comparison graph is not connected strongly enough"
        )
    beta = np.log(pi / d)
    beta -= beta.mean()
    return SpectralResult(
        beta=pd.Series(beta, index=labels.copy(), name="beta"),
        pi=pd.Series(pi, index=labels.copy(), name="pi"),
        d=pd.Series(d, index=labels.copy(), name="d"),
        n_iter=int(n_iter),
        converged=converged,
        solver=used,
        regularization=lam,
        normalizer=normalizer,
        residual=residual,
    )


# ---------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------
def validate_counts(Y: Any, items: Any, *, nonnegative: bool = True,
                    what: str = "the spectral estimator") -> tuple[np.ndarray, pd.Index]:
    """An m × m counts matrix (array or frame labelled by item) as floats with a zero
    diagonal, and its item labels; ``nonnegative=False`` accepts noisy (negative) counts.
    ``items`` labels an array; for a frame it selects and orders its items by label (matched as
    text, :func:`~privirt.data._labels.match_items`) and must name exactly the frame's items.
    Shared by the estimators that read pairwise counts."""
    labels = None
    if isinstance(Y, pd.DataFrame):
        labels = Y.index
        if not Y.columns.equals(labels):
            # Y[i, j] pairs row i with column j by item: align the columns to the rows
            same = len(Y.columns) == len(labels) and set(Y.columns) == set(labels)
            if labels.has_duplicates or not same:
                raise ValueError(
                    "the rows and columns of the counts frame Y must carry the same item "
                    f"labels; rows {list(labels[:5])}, columns {list(Y.columns[:5])}"
                )
            Y = Y.loc[:, labels]
        if items is not None:  # read by label: items= orders a labelled frame, never renames it
            labels, pos = _frame_items(items, labels)
            Y = Y.iloc[pos, pos]
        Y = Y.to_numpy()
    Y = to_numpy(Y) if not isinstance(Y, np.ndarray) else Y
    try:
        Ymat = np.array(Y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("counts Y must be a numeric m × m array") from None
    if Ymat.ndim != 2 or Ymat.shape[0] != Ymat.shape[1]:
        raise ValueError(f"counts Y must be a square m × m array, got shape {Ymat.shape}")
    m = Ymat.shape[0]
    if m < 2:
        raise ValueError(f"{what} needs at least 2 items, got {m}")
    np.fill_diagonal(Ymat, 0.0)
    if not np.all(np.isfinite(Ymat)):
        i, j = (int(t[0]) for t in np.nonzero(~np.isfinite(Ymat)))
        raise ValueError(f"counts Y must be finite; Y[{i}, {j}] = {Ymat[i, j]}")
    if nonnegative and (Ymat < 0).any():
        i, j = (int(t[0]) for t in np.nonzero(Ymat < 0))
        raise ValueError(
            f"counts Y must be non-negative; Y[{i}, {j}] = {Ymat[i, j]} "
            "(clip noisy counts at zero before estimating)"
        )
    if items is not None and not isinstance(labels, pd.Index):
        if isinstance(items, (str, bytes)) or not np.iterable(items):
            item_labels(items)  # refuses a string or a scalar in one line, as everywhere
        labels = pd.Index(items, tupleize_cols=False)
    if labels is None:
        labels = pd.RangeIndex(m)
    if len(labels) != m:
        raise ValueError(f"{len(labels)} item labels given for {m} items")
    if labels.has_duplicates:
        dup = list(labels[labels.duplicated()].unique()[:5])
        raise ValueError(f"item labels must be unique; repeated: {dup}")
    return Ymat, pd.Index(labels)


def _frame_items(items: Any, labels: pd.Index) -> tuple[pd.Index, np.ndarray]:
    """``items`` matched by label to a counts frame's items ``labels``: the labels as given and
    the position of each in the frame; a one-line ``ValueError`` unless they are the same items."""
    given, pos = match_items(items, labels, public=False)
    unknown = list(given[pos < 0])
    left = list(labels[~np.isin(np.arange(len(labels)), pos)])
    if unknown or left:
        what = (f"{unknown[:3]}{' …' if len(unknown) > 3 else ''} {'is' if len(unknown) == 1 else 'are'} "
                "not among its labels" if unknown else
                f"it leaves out {len(left)} ({left[:3]}{' …' if len(left) > 3 else ''})")
        raise ValueError(f"items must name the items of the counts frame Y (its index, "
                         f"{len(labels)} labels, e.g. {list(labels[:3])}), in any order; {what}; "
                         "leave out items to use Y's labels")
    return given, pos


#: The largest regularization accepted: λ is added to every pair count (at most n), so far below
#: this every difficulty is already tied at 0; 1e308 overflowed the chain's row sums to inf.
MAX_REGULARIZATION = 1e15


def _validate_regularization(value: Any) -> float:
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"regularization must be a number ≥ 0 or 'auto', got {value!r}")
        return DEFAULT_REGULARIZATION
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"regularization must be a number ≥ 0 or 'auto', got {value!r}")
    if not np.isfinite(real_float(value)) or value < 0:
        raise ValueError(f"regularization must be a finite number ≥ 0, got {value!r}")
    if value > MAX_REGULARIZATION:  # (the chain's row sums overflowed: NaN difficulties)
        raise ValueError(f"regularization must be at most {MAX_REGULARIZATION:g} (beyond, every difficulty "
                         f"is tied at 0 and the row sums overflow), got {value!r}")
    return float(value)


def validate_graph(graph: Any, m: int, labels: pd.Index | None = None) -> np.ndarray:
    """A symmetric boolean m × m comparison graph from an array, frame or sparse matrix.

    Parameters
    ----------
    graph : array-like, DataFrame or sparse matrix, shape (m, m)
        The adjacency matrix.
    m : int
        The number of items.
    labels : pandas.Index, optional
        The counts' item labels, when the counts carry labels (a DataFrame or ``items=``): a
        DataFrame ``graph`` is then read by label (reordered to ``labels``; labels matched as
        text, as ``items=`` is) and must carry exactly those items.  ``None``: read by position.

    Returns
    -------
    numpy.ndarray of bool, shape (m, m)

    Raises
    ------
    ValueError
        In one line: a labelled graph whose labels are not the items, a wrong shape, a graph
        that is not boolean (or 0/1) or not symmetric.
    """
    if labels is not None and isinstance(graph, pd.DataFrame):
        graph = aligned_frame(graph, labels, "graph", items_of="the counts",
                              hint="label the graph by the counts' items (or pass an array in "
                                   "their order)", as_text=True)
    try:
        from scipy import sparse

        if sparse.issparse(graph):
            graph = graph.toarray()
    except ImportError:  # pragma: no cover
        pass
    G = np.asarray(to_numpy(graph) if not isinstance(graph, np.ndarray) else graph)
    if G.shape != (m, m):
        raise ValueError(f"graph must be an m × m adjacency matrix ({m} × {m}), got shape {G.shape}")
    if G.dtype != bool:
        if not np.isin(G, (0, 1)).all():
            raise ValueError("graph must be boolean (or 0/1)")
        G = G.astype(bool)
    if not np.array_equal(G, G.T):
        raise ValueError("graph must be symmetric (an undirected comparison graph)")
    return G


def _strong_components(M: np.ndarray) -> tuple[int, np.ndarray]:
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    return connected_components(csr_matrix(M > 0), directed=True, connection="strong")


def _warn_if_regularization_connects(M: np.ndarray, labels: pd.Index, lam: float) -> None:
    """Warn when the data alone leave the chain reducible, so that the pseudo-count λ, not the
    responses, decides how the separated items compare (e.g. a single person's answers)."""
    n_comp, lab = _strong_components(M)
    if n_comp == 1:
        return
    sizes = np.bincount(lab)
    outside = labels[lab != int(np.argmax(sizes))]
    warnings.warn(
        f"the responses never compare item(s) {list(outside[:5])}{' …' if len(outside) > 5 else ''} "
        f"with the other items in both directions ({n_comp} separate parts): their difficulties "
        f"relative to the rest are set by the regularization λ = {lam:g}, not by the data; "
        "collect more responses, or pass regularization=0 (CLI: --regularization 0) to refuse",
        IdentifiabilityWarning,
        stacklevel=user_stacklevel(),
    )


def _check_connected(M: np.ndarray, labels: pd.Index,
                     regularization_links: Callable[[], bool]) -> None:
    n_comp, lab = _strong_components(M)
    if n_comp == 1:
        return
    sizes = np.bincount(lab)
    main = int(np.argmax(sizes))
    outside = labels[lab != main]
    raise DisconnectedComparisonGraph(
        f"the item comparison graph has {n_comp} separate parts: item(s) "
        f"{list(outside[:5])}{' …' if len(outside) > 5 else ''} are never compared (directly "
        "or through other items) with the other "
        f"{int(sizes[main])} items in both directions, so their difficulties are not identified; "
        + ("estimate the parts separately, collect responses linking them, or use "
           "regularization > 0 (CLI: --regularization 1)" if regularization_links() else
           "estimate the parts separately or collect responses linking them")
    )


# ---------------------------------------------------------------------------------------
# solvers
# ---------------------------------------------------------------------------------------
#: The direct solve runs on one BLAS thread from 64 up to this many items (on the CPU): on a
#: busy 2-core machine 2 threads took 4x longer at m = 400 (46 against 11 ms) and 3x at 600,
#: and on idle cores one thread was as fast at 400 (BENCHMARKS.md, Session 27); below 64 both
#: took as long, and the limit would only add its ~50 µs.
_ONE_THREAD_ITEMS: int = 512


@one_blas_thread(when=lambda P, dev: dev == "cpu" and 64 <= P.shape[0] <= _ONE_THREAD_ITEMS)
def _solve_direct(P: np.ndarray, dev: str) -> np.ndarray | None:
    """Solve ``π (I − P) = 0`` with ``Σ π = 1`` by replacing one equation by the sum."""
    xp = get_xp(dev)
    m = P.shape[0]
    A = xp.asarray(np.eye(m) - P).T.copy()
    A[-1, :] = 1.0
    b = xp.zeros(m)
    b[-1] = 1.0
    try:
        pi = to_numpy(xp.linalg.solve(A, b))
    except Exception:  # LinAlgError (singular) on either backend
        return None
    if not np.all(np.isfinite(pi)) or not np.all(pi > 0):
        return None
    return pi / pi.sum()


def _power_iteration(P: np.ndarray, tol: float, max_iter: int, dev: str) -> tuple[np.ndarray, int]:
    xp = get_xp(dev)
    m = P.shape[0]
    if np.diag(P).max() <= 1e-12:  # no self-loop anywhere: make it lazy (same π, aperiodic)
        P = 0.5 * (P + np.eye(m))
    density = np.count_nonzero(P) / P.size
    if dev == "cpu" and density < 0.1 and m > 200:
        from scipy import sparse

        Pm = sparse.csr_matrix(P).T.tocsr()  # π P computed as Pᵀ π
        step = lambda v: Pm @ v  # noqa: E731
    else:
        PT = xp.asarray(np.ascontiguousarray(P.T))
        step = lambda v: PT @ v  # noqa: E731
    pi = xp.full(m, 1.0 / m)
    it = 0
    for it in range(1, max_iter + 1):
        nxt = step(pi)
        nxt /= nxt.sum()
        delta = float(xp.abs(nxt - pi).sum())
        pi = nxt
        if delta < tol:
            break
    return to_numpy(pi), it

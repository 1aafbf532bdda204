"""The public comparison graph's part of the noise-aware fits, built once per graph.

:func:`~privirt.private.counts.noisy_likelihood.noise_aware_batch` needs, besides the
replicates' counts, arrays that depend only on the public graph: the pairs ``(I, J)``, the
signed and absolute pair incidence, and the row-effect design ``A = G + diag(deg)`` of the
weights with its Cholesky factor.  The parametric bootstrap of the intervals
(:mod:`privirt.private.counts.intervals`) fits one replicate a call at many items, and building
them per call cost ≈ 0.7 CPU s of each ≈ 5 s replicate at m = 2000 (``BENCHMARKS.md``, Session
22).  :func:`graph_design` builds them once; the fits use them with the same operations in the
same order, so their results are the same bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

__all__ = ["GraphDesign", "graph_design", "row_effect_factor", "solve_row_effects"]

#: Below this reciprocal condition number of the row-effect design (a bipartite graph makes it
#: singular) its least-squares solution is taken instead of the Cholesky solve.
ROW_EFFECT_RCOND: float = 1e-10


@dataclass(frozen=True, eq=False)
class GraphDesign:
    """What the noise-aware fits need from a comparison graph alone (read-only arrays).

    Attributes
    ----------
    graph : numpy.ndarray of bool (m, m)
        The symmetric adjacency matrix, diagonal cleared.
    I, J : numpy.ndarray of int (pairs,)
        The graph's pairs ``i < j`` in row-major order.
    inc_t : scipy.sparse.csr_matrix (m, pairs)
        Transposed signed incidence: ``−1`` at ``(i, p)``, ``+1`` at ``(j, p)``.
    abs_t : scipy.sparse.csr_matrix (m, pairs)
        Its absolute value (sums a pair quantity onto both items).
    row_design : numpy.ndarray (m, m)
        The row-effect normal equations' matrix ``G + diag(deg)``.
    row_factor : numpy.ndarray (m, m) or None
        Its lower Cholesky factor, or None where the design is singular or ill-conditioned
        (bipartite graphs), where :meth:`row_effects` takes the least-squares solution.
    """

    graph: np.ndarray
    I: np.ndarray
    J: np.ndarray
    inc_t: sparse.csr_matrix
    abs_t: sparse.csr_matrix
    row_design: np.ndarray
    row_factor: np.ndarray | None

    @property
    def m(self) -> int:
        """Number of items."""
        return int(self.graph.shape[0])

    def row_effects(self, rhs: np.ndarray) -> np.ndarray:
        """Solution ``u`` of ``row_design · u = rhs`` (see :func:`solve_row_effects`)."""
        return solve_row_effects(self.row_design, self.row_factor, rhs)


def row_effect_factor(A: np.ndarray) -> np.ndarray | None:
    """Lower Cholesky factor of the row-effect design ``A``, or None where it is not usable.

    ``A`` (adjacency + degrees) is symmetric positive semi-definite, and positive definite for
    a connected non-bipartite graph.  None where LAPACK ``potrf`` fails or the reciprocal
    condition number (``pocon``) is at most :data:`ROW_EFFECT_RCOND`.

    Parameters
    ----------
    A : numpy.ndarray (m, m)
        The symmetric row-effect design.

    Returns
    -------
    numpy.ndarray (m, m) or None
    """
    from scipy.linalg import lapack

    c, info = lapack.dpotrf(A, lower=True, clean=True)
    if info == 0:
        rcond, info = lapack.dpocon(c, float(np.abs(A).sum(axis=0).max()), uplo="L")
        if info == 0 and rcond > ROW_EFFECT_RCOND:
            return c
    return None


def solve_row_effects(A: np.ndarray, factor: np.ndarray | None, rhs: np.ndarray) -> np.ndarray:
    """Least-squares solution of ``A u = rhs``: a Cholesky solve with ``factor``
    (:func:`row_effect_factor`), else the minimum-norm :func:`numpy.linalg.lstsq` solution.

    Parameters
    ----------
    A : numpy.ndarray (m, m)
        The row-effect design.
    factor : numpy.ndarray (m, m) or None
        Its lower Cholesky factor, or None.
    rhs : numpy.ndarray (m,) or (m, R)
        One right-hand side per column.

    Returns
    -------
    numpy.ndarray
        ``u``, shaped like ``rhs``.
    """
    if factor is not None:
        from scipy.linalg import cho_solve

        return cho_solve((factor, True), rhs, check_finite=False)
    return np.linalg.lstsq(A, rhs, rcond=None)[0]


def graph_design(graph: np.ndarray) -> GraphDesign:
    """Build the :class:`GraphDesign` of a comparison graph (no validation: a symmetric
    boolean adjacency matrix; its diagonal is ignored).

    Parameters
    ----------
    graph : array-like of bool (m, m)

    Returns
    -------
    GraphDesign
    """
    G = np.asarray(graph, dtype=bool).copy()
    np.fill_diagonal(G, False)
    m = G.shape[0]
    I, J = np.nonzero(np.triu(G, 1))
    P = I.size
    # signed incidence (pairs × items): U = s @ inc; |inc| sums a pair quantity onto both items
    rows = np.repeat(np.arange(P), 2)
    cols = np.stack([I, J], axis=1).ravel()
    inc_t = sparse.csr_matrix((np.tile([-1.0, 1.0], P), (cols, rows)), shape=(m, P))
    abs_t = abs(inc_t)
    # the row-effect design of _smoothed_discordant (adjacency + degrees)
    A = G.astype(float) + np.diag(G.sum(axis=1).astype(float))
    c = row_effect_factor(A)
    for x in (G, I, J, A, c, inc_t.data, inc_t.indices, inc_t.indptr, abs_t.data, abs_t.indices,
              abs_t.indptr):
        if x is not None:
            x.setflags(write=False)
    return GraphDesign(graph=G, I=I, J=J, inc_t=inc_t, abs_t=abs_t, row_design=A, row_factor=c)

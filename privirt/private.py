"""Private release of the pairwise counts and the private spectral estimator (Algorithm 2).

Two entry points, both differentially private with respect to **replacing one person's row**
(the relation of Nguyen & Zhang's paper), both stating their cost on the result
(:class:`PrivacyStatement`, ``.privacy``) and optionally debiting a :class:`~privirt.Ledger`
*before* any noisy value is drawn:

* :func:`release_counts` — the data-release path: the pairwise differential counts
  Y (Y_ij = persons with item i right and item j wrong) on a public comparison graph, plus
  integer noise from the discrete Gaussian (ρ-zCDP) or discrete Laplace (pure ε-DP).  The
  noisy integer matrix may be published.
* :func:`private_spectral_estimate` — Algorithm 2: the spectral estimator run on the noisy
  counts (post-processing: clipped at zero and regularised so the Markov chain is valid), or
  on randomized-response data (each bit flipped with ε₀ per bit, optionally shuffled).

Nothing computed from the raw data is returned un-noised: only Y is used (never the
co-response counts B, which would leak the observed mask), the spectral normaliser is
computed from the noisy counts, and the item set and graph are public (items without any
observed response are kept, never dropped by a data-dependent rule).  ε must be finite:
there is no way to reach the non-private estimator through these functions.

See ``docs/privacy.md`` for the sensitivity proofs, the calibration and the accounting.
"""

from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np
import pandas as pd

from ._backend import resolve_device
from .accounting import (
    NEIGHBOURING_RELATION,
    PrivacyCost,
    calibrate_gaussian_sigma,
    calibrate_laplace_scale,
    calibrate_rr_epsilon0,
    check_delta,
    check_epsilon,
    zcdp_to_approx_dp,
)
from .responses import MISSING, Responses, ResponsesLike, as_responses
from .sensitivity import Sensitivity, pairwise_counts_sensitivity

__all__ = [
    "PrivacyStatement",
    "NoisyCounts",
    "PrivateSpectralResult",
    "release_counts",
    "private_spectral_estimate",
    "sample_comparison_graph",
    "auto_p0",
    "AUTO_P0_C",
]

#: ``p0="auto"`` uses p0 = (1 + AUTO_P0_C) · log(m) / m (capped at 1).
AUTO_P0_C: float = 0.5
_MAX_GRAPH_TRIES = 1_000

CountMechanism = Literal["gaussian", "laplace"]
Mechanism = Literal["gaussian", "laplace", "randomized_response"]
_MECH_NAMES = {
    "gaussian": "discrete Gaussian",
    "laplace": "discrete Laplace",
    "randomized_response": "randomized response",
}


# ---------------------------------------------------------------------------------------
# the statement attached to every private result
@dataclass(frozen=True)
class PrivacyStatement:
    """What a private call guarantees and what it cost.

    Attributes
    ----------
    mechanism : str
        ``"discrete Gaussian"``, ``"discrete Laplace"`` or ``"randomized response"``.
    relation : str
        The neighbouring relation: ``"replace one person's row"``.
    sensitivity : Sensitivity or None
        L1/L2 sensitivity of the released counts and which bound (``"tight"``, ``"paper"``,
        ``"sparse-maxcut"``, ``"sparse-spectral"``); ``None`` for randomized response.
    noise_parameter : str
        ``"sigma"`` (discrete Gaussian), ``"scale"`` (discrete Laplace) or ``"epsilon0"``
        (per-bit randomized response).
    noise_value : float
        Its value.
    rho : float or None
        zCDP parameter (Gaussian only).
    epsilon, delta : float
        The (ε, δ)-DP guarantee claimed (δ = 0 for pure DP).
    private : bool
        ``False`` when the caller passed ``seed=`` — the noise is reproducible and the
        guarantee does not hold against anyone who knows the seed.
    p0 : float
        Edge probability of the comparison graph (1 = complete).
    n_edges : int
        Undirected edges of the comparison graph.
    shuffle : bool
        Whether the randomized reports were shuffled and amplification was claimed.
    cost : PrivacyCost
        The (ρ, ε, δ) debited from a ledger (and to compose with other spends).
    ledger_spend_id : int or None
        The spend's id in the ledger, if one was given.
    notes : tuple of str
        Further statements (missing-data handling, TV terms, conversions used).
    """

    mechanism: str
    relation: str
    sensitivity: Sensitivity | None
    noise_parameter: str
    noise_value: float
    rho: float | None
    epsilon: float
    delta: float
    private: bool
    p0: float
    n_edges: int
    shuffle: bool
    cost: PrivacyCost
    ledger_spend_id: int | None = None
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = []
        if not self.private:
            lines.append("NOT PRIVATE: seeded noise (reproducible; no guarantee against anyone who knows the seed)")
        guarantee = (
            f"({self.epsilon:.6g}, {self.delta:.3g})-differential privacy"
            if self.delta > 0
            else f"{self.epsilon:.6g}-differential privacy (pure)"
        )
        lines.append(f"privacy: {guarantee}")
        lines.append(f"neighbouring relation: {self.relation}")
        lines.append(f"mechanism: {self.mechanism}, {self.noise_parameter} = {self.noise_value:.6g}")
        if self.rho is not None:
            lines.append(f"zCDP: rho = {self.rho:.6g}")
        if self.sensitivity is not None:
            lines.append(f"sensitivity: {self.sensitivity}")
        lines.append(f"comparison graph: p0 = {self.p0:.4g}, {self.n_edges} edges")
        if self.shuffle:
            lines.append("shuffled: yes (Feldman-McMillan-Talwar amplification)")
        lines.append(f"cost: {self.cost}")
        if self.ledger_spend_id is not None:
            lines.append(f"ledger spend id: {self.ledger_spend_id}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """A JSON-friendly dict."""
        sens = self.sensitivity
        return {
            "mechanism": self.mechanism,
            "relation": self.relation,
            "sensitivity_l1": None if sens is None else sens.l1,
            "sensitivity_l2": None if sens is None else sens.l2,
            "sensitivity_bound": None if sens is None else sens.bound,
            "noise_parameter": self.noise_parameter,
            "noise_value": self.noise_value,
            "rho": self.rho,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "private": self.private,
            "p0": self.p0,
            "n_edges": self.n_edges,
            "shuffle": self.shuffle,
            "cost": {"rho": self.cost.rho, "epsilon": self.cost.epsilon, "delta": self.cost.delta},
            "ledger_spend_id": self.ledger_spend_id,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class PrivateSpectralResult:
    """Result of :func:`private_spectral_estimate`.

    Attributes
    ----------
    beta : pandas.Series
        Private item difficulties (centred; higher = harder).
    privacy : PrivacyStatement
    spectral : SpectralResult
        The spectral fit on the post-processed private counts.
    graph : pandas.DataFrame of bool
        The comparison graph.
    counts : NoisyCounts or None
        The noisy counts (Gaussian/Laplace) — publishable.
    beta_plain, beta_debiased : pandas.Series or None
        Randomized response only: the estimate from the randomized bits as they are
        (``beta_plain``) and from the unbiased estimate of Y (``beta_debiased``).  Both are
        post-processing of the same release; ``beta`` is the one chosen by ``rr_estimator``.
    """

    beta: pd.Series
    privacy: PrivacyStatement
    spectral: Any
    graph: pd.DataFrame
    counts: NoisyCounts | None = None
    beta_plain: pd.Series | None = None
    beta_debiased: pd.Series | None = None
    info: dict = field(default_factory=dict, repr=False)

    @property
    def items(self) -> pd.Index:
        return self.beta.index

    def top_k(self, k: int, *, largest: bool = True) -> pd.Index:
        """Labels of the ``k`` hardest (or easiest) items by the private estimate."""
        from .spectral import _top_k

        return _top_k(self.beta, k, largest)


# ---------------------------------------------------------------------------------------
# validation
def _check_p0(p0: Any, m: int) -> float:
    if isinstance(p0, str):
        if p0 != "auto":
            raise ValueError(f"p0 must be a number in (0, 1] or 'auto', got {p0!r}")
        return auto_p0(m)
    if isinstance(p0, bool) or not isinstance(p0, (int, float, np.integer, np.floating)):
        raise ValueError(f"p0 must be a number in (0, 1] or 'auto', got {p0!r}")
    v = float(p0)
    if math.isnan(v) or not (0.0 < v <= 1.0):
        raise ValueError(f"p0 must be in (0, 1] (edge probability of the comparison graph), got {p0!r}")
    return v


def _check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    return int(seed)


def _check_calibrated(eps: float, calibrated: str, value: float, lo: float, hi: float) -> None:
    """Refuse, in terms of the ε the caller chose, a noise parameter outside the range the
    exact samplers support (before anything is debited)."""
    if not lo <= value <= hi:
        raise ValueError(
            f"epsilon={eps:g} calibrates to {calibrated}, outside the range the exact sampler "
            f"supports [{lo:g}, {hi:g}]; choose an epsilon in the usual range (say 0.01 to 100)"
        )


def _responses(X: ResponsesLike, items: Sequence[Any] | None = None) -> Responses:
    """Validated responses whose item set does not depend on the data.

    Never drops items (or persons) by a data-dependent rule.  With ``items`` (the public item
    set) the columns are exactly those, in that order: an item nobody answered becomes an
    all-missing column, and an item of the data that is not in the list is an error.
    """
    resp = as_responses(X, empty="keep")
    if isinstance(items, (str, bytes)):
        raise ValueError(f"items must be a sequence of item labels, not the string {items!r}")
    if items is None and resp.items_from_data:
        raise ValueError(
            "the item set of a long (person, item, response) table is read from its rows, so "
            "it depends on who is in the data (an item answered by one person comes and goes "
            "with that person); pass the public item list as items=[...] (CLI: --items)"
        )
    if items is not None:
        public = pd.Index(list(items))
        if public.has_duplicates:
            raise ValueError(f"items lists {public[public.duplicated()][0]!r} twice")
        extra = resp.items.difference(public)
        if len(extra):
            raise ValueError(
                f"the data have item(s) {list(extra[:5])} that are not in the public item set "
                "`items`; add them to `items` or remove them from the data"
            )
        pos = resp.items.get_indexer(public)
        codes = np.full((resp.n_persons, len(public)), MISSING, dtype=np.int8)
        present = pos >= 0
        codes[:, present] = resp.codes[:, pos[present]]
        resp = Responses(codes, resp.persons, public)
    if resp.n_items < 2:
        raise ValueError(f"private estimation needs at least 2 items, got {resp.n_items}")
    if resp.n_persons < 1:
        raise ValueError("the responses have no persons")
    return resp


def auto_p0(n_items: int) -> float:
    """Default sparse edge probability (1 + c)·log(m)/m with c = :data:`AUTO_P0_C`, ≤ 1."""
    m = int(n_items)
    if m <= 2:
        return 1.0
    return float(min(1.0, (1.0 + AUTO_P0_C) * math.log(m) / m))


def sample_comparison_graph(n_items: int, p0: float | str = 1.0, *, seed: int | None = None) -> np.ndarray:
    """An Erdős–Rényi comparison graph G(m, p0), resampled until connected.

    The graph is drawn independently of the data (it costs no privacy), from an ordinary
    RNG seeded by ``seed`` or by OS entropy.  ``p0 = 1`` is the complete graph.

    Returns
    -------
    ndarray of bool, shape (m, m)
        Symmetric adjacency without self-loops.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    m = int(n_items)
    p = _check_p0(p0, m)
    full = ~np.eye(m, dtype=bool)
    if p >= 1.0 or m <= 2:
        return full
    rng = np.random.default_rng(None if seed is None else [int(seed), 0x67726170])
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


# ---------------------------------------------------------------------------------------
# mechanisms (from the `mechanisms` package)
def _mechanisms():
    try:
        import mechanisms  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - the package ships with privirt
        raise ImportError(
            "privirt's private functions need the `mechanisms` package that ships with privirt "
            f"(exact discrete noise samplers): {exc}"
        ) from exc
    return mechanisms


def _tv(mech: Any) -> float:
    tv = float(getattr(mech, "tv_bound", 0.0) or 0.0)
    if not (tv >= 0 and math.isfinite(tv)):
        raise RuntimeError(f"the mechanism reported an invalid tv_bound {tv!r}")
    return tv


def _seeded_note(private: bool) -> tuple[str, ...]:
    return () if private else ("seed given: noise is reproducible, so this result is NOT private",)


def _graph_frame(G: np.ndarray, items: pd.Index) -> pd.DataFrame:
    return pd.DataFrame(G, index=items.copy(), columns=items.copy())


def _resolve_ledger(ledger: Any):
    """A :class:`~privirt.Ledger`, opened from a path if needed (it must exist)."""
    if ledger is None:
        return None
    from .ledger import Ledger

    if isinstance(ledger, Ledger):
        return ledger
    if isinstance(ledger, (str, os.PathLike)):
        return Ledger(ledger)
    raise ValueError(f"ledger must be a privirt.Ledger or the path of one, got {type(ledger).__name__}")


def _debit(ledger: Any, cost: PrivacyCost, mechanism: str, note: str) -> int | None:
    if ledger is None:
        return None
    return ledger.spend(cost, mechanism=mechanism, note=note)


# ---------------------------------------------------------------------------------------
# release of the counts
def release_counts(
    X: ResponsesLike,
    *,
    epsilon: float,
    delta: float = 1e-4,
    mechanism: CountMechanism = "gaussian",
    p0: float | str = 1.0,
    sensitivity: Literal["tight", "paper"] = "tight",
    ledger: Any = None,
    seed: int | None = None,
    device: str = "auto",
    note: str = "",
    items: Sequence[Any] | None = None,
) -> NoisyCounts:
    """Release the pairwise differential counts with discrete noise, (ε, δ)-DP.

    Y_ij = #persons who answered both i and j, i right and j wrong, for every directed pair
    of a comparison graph (complete for ``p0=1``, else Erdős–Rényi with edge probability
    ``p0``), plus independent integer noise calibrated to the target and the proven
    sensitivity (``docs/privacy.md``).  The result may be published.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, missing allowed.  One person = one row; the guarantee
        protects replacing any one row (responses *and* which items were answered).
    epsilon : float
        Target ε > 0 (finite).
    delta : float, default 1e-4
        Target δ in (0, 1).  The Gaussian spends it; the Laplace mechanism is pure ε-DP and
        leaves it unused (its δ is only the sampler's TV term, normally 0).
    mechanism : {"gaussian", "laplace"}
        Discrete Gaussian (σ calibrated by the tight zCDP → (ε, δ) conversion) or discrete
        Laplace (scale = Δ₁/ε).
    p0 : float in (0, 1] or "auto"
        Edge probability of the comparison graph; ``"auto"`` = (1 + c)·log m / m.  The graph
        is public and resampled until connected.
    sensitivity : {"tight", "paper"}
        ``"tight"`` (proven, default) or the paper's m(m−1) (one per released cell), kept for
        comparison.
    ledger : Ledger or path, optional
        Debited (one transaction) before any noise is drawn; raises
        :class:`~privirt.BudgetExceeded` — with nothing released and the ledger unchanged —
        when the composed total would pass the budget.
    seed : int, optional
        Reproducible noise **without privacy** (``privacy.private`` is False).
    device : {"auto", "cpu", "gpu"}
        Where the counts are computed (the noise is drawn on the host).
    note : str
        Stored with the ledger entry.
    items : sequence, optional
        The public item set.  The result covers exactly these items, in this order; an item
        nobody answered is an all-missing column (it is not dropped, which would reveal that
        nobody answered it), and a data item not in the list is an error.  Without it the
        item set is the columns of ``X`` (wide input, a public schema); a long table's items
        are read from its rows and so depend on who is in the data: long input without
        ``items`` is refused.

    Returns
    -------
    NoisyCounts
        ``.Y`` (noisy int64, items × items), ``.graph``, ``.privacy``.

    Raises
    ------
    ValueError
        ε ≤ 0, ε infinite or NaN, δ ∉ (0, 1), p0 ∉ (0, 1], an unknown mechanism.
    BudgetExceeded
        The ledger's budget would be exceeded.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if mechanism not in ("gaussian", "laplace"):
        raise ValueError(
            f"mechanism must be 'gaussian' or 'laplace' for released counts, got {mechanism!r} "
            "(randomized response is available in private_spectral_estimate)"
        )
    if sensitivity not in ("tight", "paper"):
        raise ValueError(f"sensitivity must be 'tight' or 'paper', got {sensitivity!r}")
    seed = _check_seed(seed)
    resolve_device(device)  # fail on a bad device before anything is computed or debited
    ledger = _resolve_ledger(ledger)
    resp = _responses(X, items)
    m = resp.n_items
    p = _check_p0(p0, m)
    G = sample_comparison_graph(m, p, seed=seed)
    sparse = not bool(G.sum() == m * (m - 1))
    sens = pairwise_counts_sensitivity(m, graph=G if sparse else None, bound=sensitivity)
    draws = sens.n_released
    mech_mod = _mechanisms()
    notes: list[str] = []

    if mechanism == "gaussian":

        static_tv = inspect.getattr_static(mech_mod.DiscreteGaussian, "tv_bound", None)
        if isinstance(static_tv, (int, float)):  # a constant per-draw bound (0 when exact)
            tv_of: Any = _tv(mech_mod.DiscreteGaussian)
        else:  # a bound that depends on σ: ask an instance

            def tv_of(sigma: float) -> float:
                return _tv(mech_mod.DiscreteGaussian(sigma))

        # aim a hair inside the target: the mechanism reports ρ rounded up to the next float
        sigma = calibrate_gaussian_sigma(sens.l2, eps * (1 - 1e-10), dlt, draws=draws, tv_bound=tv_of)
        _check_calibrated(eps, f"σ = {sigma:.4g}", sigma,
                          mech_mod.MIN_SCALE, mech_mod.MAX_SCALE)
        mech = mech_mod.DiscreteGaussian(sigma, seed=seed)
        rho_formula = sens.l2**2 / (2.0 * sigma**2)
        rho = float(mech.privacy(sens.l2, l1_sensitivity=sens.l1, dimension=draws))
        rho = max(rho, rho_formula)  # never claim less than the proven Δ₂²/(2σ²)
        tv_delta = draws * _tv(mech)
        claimed_eps = zcdp_to_approx_dp(rho, dlt - tv_delta)
        if claimed_eps > eps * (1 + 1e-12):  # pragma: no cover - mechanism/accounting mismatch
            raise RuntimeError(
                f"internal accounting mismatch: calibrated σ={sigma} gives ε={claimed_eps} > {eps}"
            )
        cost = PrivacyCost(rho=rho, delta=tv_delta)
        noise_parameter, noise_value, stated_delta = "sigma", sigma, dlt
        notes.append(
            "ρ-zCDP converted to (ε, δ) by the tight conversion of Canonne, Kamath & Steinke "
            "(2020)" + (f"; sampler TV bound × {draws} draws = {tv_delta:.3g} added to δ" if tv_delta else "")
        )
    else:
        scale = calibrate_laplace_scale(sens.l1, eps * (1 - 1e-10))  # ε is rounded up by the mechanism
        _check_calibrated(eps, f"a Laplace scale of {scale:.4g}", scale,
                          mech_mod.MIN_SCALE, mech_mod.MAX_SCALE)
        mech = mech_mod.DiscreteLaplace(scale, seed=seed)
        claimed_eps = float(mech.privacy(sens.l1))
        if claimed_eps > eps * (1 + 1e-12):  # pragma: no cover
            raise RuntimeError(f"internal accounting mismatch: scale={scale} gives ε={claimed_eps} > {eps}")
        tv_delta = draws * _tv(mech)
        if tv_delta >= dlt:
            raise ValueError(
                f"the Laplace sampler's TV term ({tv_delta:.3g}) is not below delta={dlt:g}"
            )
        rho = None
        cost = PrivacyCost(epsilon=claimed_eps, delta=tv_delta)
        noise_parameter, noise_value, stated_delta = "scale", scale, tv_delta
        notes.append(
            "pure ε-DP: δ is not used by the Laplace mechanism"
            + (f" (beyond the sampler's TV term {tv_delta:.3g})" if tv_delta else "")
        )
    if sensitivity == "paper":
        notes.append("sensitivity='paper': the paper's looser bound, more noise than needed")
    private = bool(getattr(mech, "private", seed is None)) and seed is None
    notes.extend(_seeded_note(private))

    # The raw counts are computed, the ledger debited (committed), and only then is noise drawn.
    from .counts import differential_counts

    Y = differential_counts(resp, device=device)
    spend_id = _debit(ledger, cost, _MECH_NAMES[mechanism] + " counts", note)
    r, c = np.nonzero(G)
    values = np.asarray(Y[r, c], dtype=np.int64)
    noisy_values = np.asarray(mech.apply(values), dtype=np.int64)
    if noisy_values.shape != values.shape:  # pragma: no cover
        raise RuntimeError("the mechanism returned a different number of values")
    del Y, values
    Ynoisy = np.zeros((m, m), dtype=np.int64)
    Ynoisy[r, c] = noisy_values

    statement = PrivacyStatement(
        mechanism=_MECH_NAMES[mechanism],
        relation=NEIGHBOURING_RELATION,
        sensitivity=sens,
        noise_parameter=noise_parameter,
        noise_value=float(noise_value),
        rho=rho,
        epsilon=float(claimed_eps),
        delta=float(stated_delta),
        private=private,
        p0=p,
        n_edges=int(np.count_nonzero(np.triu(G, 1))),
        shuffle=False,
        cost=cost,
        ledger_spend_id=spend_id,
        notes=tuple(notes),
    )
    items = resp.items
    return NoisyCounts(
        Y=pd.DataFrame(Ynoisy, index=items.copy(), columns=items.copy()),
        graph=_graph_frame(G, items),
        privacy=statement,
    )


# ---------------------------------------------------------------------------------------
# randomized response
def _uniform_bits(shape: tuple[int, ...], seed: int | None) -> np.ndarray:
    """Fair coin flips: OS CSPRNG unless a seed was given (then reproducible, not private)."""
    size = int(np.prod(shape))
    if seed is None:
        raw = np.frombuffer(os.urandom((size + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(raw)[:size]
    else:
        bits = np.random.default_rng([seed, 0x636F696E]).integers(0, 2, size=size, dtype=np.uint8)
    return bits.reshape(shape).astype(np.int8)


_RR_CHUNK_CELLS = 1 << 22


def _randomize(resp: Responses, mech: Any, seed: int | None) -> np.ndarray:
    """n × m int8 0/1 matrix: RR on observed bits, a fair coin on missing cells.

    Rows are processed in chunks of about 4 M cells so that the mechanism's int64 output
    never needs more than ~32 MiB at a time.
    """
    codes = resp.codes
    n, m = codes.shape
    out = np.empty((n, m), dtype=np.int8)
    rows = max(1, _RR_CHUNK_CELLS // max(1, m))
    has_missing = resp.has_missing
    coin_seed = None if seed is None else seed
    for k, start in enumerate(range(0, n, rows)):
        block = codes[start : start + rows]
        observed = block >= 0
        bits = np.where(observed, block, 0).astype(np.int8)
        flipped = np.asarray(mech.apply(bits)).reshape(bits.shape).astype(np.int8)
        if has_missing and not observed.all():
            coin = _uniform_bits(bits.shape, None if coin_seed is None else coin_seed + 7919 * k)
            flipped = np.where(observed, flipped, coin).astype(np.int8)
        out[start : start + rows] = flipped
    return out


def _shuffle_rows(Z: np.ndarray, seed: int | None) -> np.ndarray:
    """Rows in a uniformly random order (the shuffler of the shuffle model).

    The permutation comes from the secure ChaCha20 generator of :mod:`mechanisms` (keyed from
    the OS), or from its seeded variant when the caller gave a seed.  The counts computed
    afterwards do not depend on row order; the shuffle is kept so that the randomized
    reports really pass through a shuffler, as the amplification theorem assumes.
    """
    from mechanisms.rng import SecureRNG

    rng = SecureRNG() if seed is None else SecureRNG.seeded(f"shuffle:{seed}")
    keys = rng.random_uint64(Z.shape[0])
    return Z[np.argsort(keys, kind="stable")]


def _debiased_counts(Z: np.ndarray, q: float, Y_plain: np.ndarray) -> np.ndarray:
    """Unbiased estimate of Y from randomized bits Z (keep probability q).

    X̂ = (Z − (1 − q)) / (2q − 1) is unbiased for each bit and the cells of a row are
    randomized independently, so Ŷ_ij = Σ_l X̂_li (1 − X̂_lj) is unbiased for Y_ij (i ≠ j).
    With a = 1/(2q−1), b = −(1−q)/(2q−1), s = column sums of Z and ZᵀZ = s1ᵀ − Y_plain:
    Ŷ_ij = −a² (s_i − Y_plain_ij) + a(1 − b) s_i − a b s_j + n b (1 − b).
    """
    n = Z.shape[0]
    s = Z.sum(axis=0, dtype=np.int64).astype(np.float64)
    a = 1.0 / (2.0 * q - 1.0)
    b = -(1.0 - q) * a
    Yh = -(a * a) * (s[:, None] - Y_plain) + a * (1 - b) * s[:, None] - a * b * s[None, :] + n * b * (1 - b)
    np.fill_diagonal(Yh, 0.0)
    return Yh


# ---------------------------------------------------------------------------------------
# the private spectral estimator
def private_spectral_estimate(
    X: ResponsesLike,
    *,
    epsilon: float,
    delta: float = 1e-4,
    mechanism: Mechanism = "gaussian",
    p0: float | str = 1.0,
    shuffle: bool = False,
    ledger: Any = None,
    seed: int | None = None,
    device: str = "auto",
    sensitivity: Literal["tight", "paper"] = "tight",
    rr_estimator: Literal["debiased", "plain"] = "debiased",
    note: str = "",
    items: Sequence[Any] | None = None,
) -> PrivateSpectralResult:
    """Private Rasch item difficulties: the spectral estimator on private data (Algorithm 2).

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, missing allowed.
    epsilon, delta : float
        Target (ε, δ); ε > 0 finite, δ ∈ (0, 1).  δ is used by the Gaussian and by shuffled
        randomized response; Laplace and unshuffled randomized response are pure ε-DP.
    mechanism : {"gaussian", "laplace", "randomized_response"}
        ``"gaussian"``/``"laplace"``: noisy counts from :func:`release_counts`, clipped at zero,
        and the spectral estimator on the comparison graph with the default regularisation
        (λ = 1 on every graph edge), which keeps the chain irreducible.
        ``"randomized_response"``: every cell is randomized with ε₀ per bit (user-level
        ε = m·ε₀ by basic composition); **missing cells are replaced by a fair coin flip**, so
        which items a person answered is protected too and the guarantee holds on
        {0, 1, missing}^m (at the cost of shrinking estimates when data are missing).
    p0 : float in (0, 1] or "auto"
        Edge probability of the Erdős–Rényi comparison graph (1 = complete).
    shuffle : bool
        Randomized response only: shuffle the reports and claim the amplification of Feldman,
        McMillan & Talwar (2021), Thm III.1, where its condition holds (otherwise no
        amplification is claimed and a note says so).
    ledger, seed, device, sensitivity, note, items
        As in :func:`release_counts`.
    rr_estimator : {"debiased", "plain"}
        Randomized response: which estimate is ``beta`` (both are returned).

    Returns
    -------
    PrivateSpectralResult
        ``.beta``, ``.privacy`` and the fit.
    """
    from .spectral import spectral_from_counts

    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if mechanism not in ("gaussian", "laplace", "randomized_response"):
        raise ValueError(
            f"mechanism must be 'gaussian', 'laplace' or 'randomized_response', got {mechanism!r}"
        )
    if not isinstance(shuffle, (bool, np.bool_)):
        raise ValueError(f"shuffle must be True or False, got {shuffle!r}")
    if shuffle and mechanism != "randomized_response":
        raise ValueError("shuffle=True applies to mechanism='randomized_response' only")
    if rr_estimator not in ("debiased", "plain"):
        raise ValueError(f"rr_estimator must be 'debiased' or 'plain', got {rr_estimator!r}")
    seed = _check_seed(seed)

    if mechanism in ("gaussian", "laplace"):
        counts = release_counts(
            X, epsilon=eps, delta=dlt, mechanism=mechanism, p0=p0, sensitivity=sensitivity,
            ledger=ledger, seed=seed, device=device, note=note, items=items,
        )
        G = counts.graph.to_numpy()
        fit = spectral_from_counts(
            counts.clipped(), items=counts.items, graph=G, regularization="auto", device=device
        )
        return PrivateSpectralResult(
            beta=fit.beta, privacy=counts.privacy, spectral=fit, graph=counts.graph, counts=counts
        )

    # randomized response
    resolve_device(device)  # fail on a bad device before anything is debited
    ledger = _resolve_ledger(ledger)
    resp = _responses(X, items)
    n, m = resp.shape
    p = _check_p0(p0, m)
    G = sample_comparison_graph(m, p, seed=seed)
    # a hair inside the target: m·ε₀ is recomputed (and rounded up) by the mechanism
    eps0, claimed, amplified = calibrate_rr_epsilon0(
        eps * (1 - 1e-10), m, delta=dlt, n_persons=n, shuffle=bool(shuffle)
    )
    mech_mod = _mechanisms()
    _check_calibrated(eps, f"a per-response ε₀ = {eps0:.6g} (ε spread over {m} items)", eps0,
                      0.0, mech_mod.EPSILON_MAX)
    mech = mech_mod.RandomizedResponse(eps0, seed=seed)
    if not 2.0 * float(mech.keep_probability) - 1.0 > 0.0:  # checked before anything is debited
        raise ValueError(
            f"epsilon={eps:g} is too small for randomized response on {m} items: the per-bit "
            f"ε₀ = {eps0:.3g} makes the keep probability 1/2 in double precision, so the "
            "randomized bits cannot be debiased (and carry no usable signal); use a larger epsilon"
        )
    local_eps = float(mech.privacy(n_bits=m))
    notes = [
        "missing cells are replaced by fair coin flips before release, so the observed mask is "
        "protected too (the guarantee holds for rows in {0, 1, missing}^m)",
        f"per-bit ε₀ = {eps0:.6g}; user-level local ε = m·ε₀ = {local_eps:.6g} (basic composition)",
    ]
    if amplified:
        cost = PrivacyCost(epsilon=claimed, delta=dlt)
        stated_eps, stated_delta = claimed, dlt
        notes.append(
            f"shuffled: central ({claimed:.6g}, {dlt:.3g})-DP for n = {n} by Feldman, McMillan & "
            "Talwar (2021) Thm III.1"
        )
    else:
        if local_eps > eps * (1 + 1e-12):  # pragma: no cover
            raise RuntimeError("internal accounting mismatch in randomized response")
        cost = PrivacyCost(epsilon=local_eps)
        stated_eps, stated_delta = local_eps, 0.0
        if shuffle:
            notes.append(
                "shuffled, but the amplification theorem gives no gain here (its condition "
                "ε_L ≤ log(n/(16 log(2/δ))) fails or the bound is worse): pure local ε claimed"
            )
    private = bool(getattr(mech, "private", seed is None)) and seed is None
    notes.extend(_seeded_note(private))

    spend_id = _debit(ledger, cost, "randomized response", note)
    Z = _randomize(resp, mech, seed)
    if shuffle:
        Z = _shuffle_rows(Z, seed)
    from .counts import differential_counts

    Zresp = Responses(Z, pd.RangeIndex(n), resp.items)
    Y_plain = differential_counts(Zresp, device=device).astype(np.float64)
    q = float(mech.keep_probability)
    Y_deb = np.clip(_debiased_counts(Z, q, Y_plain), 0.0, None)
    Y_plain_g = np.where(G, Y_plain, 0.0)
    Y_deb_g = np.where(G, Y_deb, 0.0)
    fit_plain = spectral_from_counts(Y_plain_g, items=resp.items, graph=G, regularization="auto", device=device)
    fit_deb = spectral_from_counts(Y_deb_g, items=resp.items, graph=G, regularization="auto", device=device)
    chosen = fit_deb if rr_estimator == "debiased" else fit_plain

    statement = PrivacyStatement(
        mechanism=_MECH_NAMES[mechanism],
        relation=NEIGHBOURING_RELATION,
        sensitivity=None,
        noise_parameter="epsilon0",
        noise_value=float(eps0),
        rho=None,
        epsilon=float(stated_eps),
        delta=float(stated_delta),
        private=private,
        p0=p,
        n_edges=int(np.count_nonzero(np.triu(G, 1))),
        shuffle=bool(amplified),
        cost=cost,
        ledger_spend_id=spend_id,
        notes=tuple(notes),
    )
    return PrivateSpectralResult(
        beta=chosen.beta,
        privacy=statement,
        spectral=chosen,
        graph=_graph_frame(G, resp.items),
        counts=None,
        beta_plain=fit_plain.beta,
        beta_debiased=fit_deb.beta,
        info={"keep_probability": q, "rr_estimator": rr_estimator},
    )

"""The privacy statement attached to every private result (:class:`PrivacyStatement`)."""

from __future__ import annotations

from dataclasses import dataclass

from mechanisms.measures import ApproxDP, PureDP, ZCDP, format_up

from .accounting import PrivacyCost
from .sensitivity import Sensitivity

__all__ = ["PrivacyStatement", "NoisePart", "DOMAIN_ANY", "DOMAIN_COMPLETE", "HOLDER_ONLY"]

#: input domains of the releases: what a row may be for the guarantee to hold
DOMAIN_ANY = "rows in {0, 1, missing}^m (any answers, any cells missing)"
DOMAIN_COMPLETE = 'rows in {0, 1}^m (complete data, declared with missing="none")'
#: what a statement with a domain says about refusals and warnings
HOLDER_ONLY = ("for the data holder only, not part of the release (data outside the domain, "
               "or with more persons than the public n, are refused before anything is spent)")

#: Noise parameters that are privacy parameters (printed rounded up, never below the value).
PRIVACY_PARAMETERS: frozenset[str] = frozenset({"epsilon0"})

_NOT_PRIVATE = "NOT PRIVATE: seeded noise (reproducible; no guarantee against anyone who knows the seed)"


@dataclass(frozen=True)
class NoisePart:
    """One part of a release made of several noisy vectors, each with its own discrete Gaussian.

    Attributes
    ----------
    name : str
        What the part releases (``"item totals"``, ``"score histogram"``, ...).
    sigma : float
        The part's noise scale σ.
    sensitivity_l2 : float
        The part's own L2 sensitivity Δ₂ (replace one person's row), rounded up.
    rho : float
        The part's ρ-zCDP, Δ₂²/(2σ²) rounded up; the release's ρ is the sum over its parts.
    """

    name: str
    sigma: float
    sensitivity_l2: float
    rho: float


@dataclass(frozen=True)
class PrivacyStatement:
    """What a private call guarantees and what it cost.

    Attributes
    ----------
    mechanism : str
        ``"discrete Gaussian"``, ``"discrete Laplace"`` or ``"randomized response"``.
    relation : str
        The neighbouring relation: ``"replace one person's row"``.
    guarantee : PureDP or ApproxDP
        The guarantee claimed for the release, a typed value from :mod:`mechanisms.measures`
        (pure ε-DP for the Laplace mechanism and unshuffled randomized response, (ε, δ)-DP
        otherwise).  It holds only when ``private`` is True.
    native : PureDP, ZCDP or ApproxDP
        The guarantee in the measure the mechanism's privacy map is stated in (ρ-zCDP for the
        discrete Gaussian); ``guarantee`` is derived from it.
    sensitivity : Sensitivity or None
        L1/L2 sensitivity of the released counts and which bound (``"tight"``, ``"paper"``,
        ``"sparse-maxcut"``, ``"sparse-spectral"``); ``None`` for randomized response.
    noise_parameter : str
        ``"sigma"`` (discrete Gaussian), ``"scale"`` (discrete Laplace) or ``"epsilon0"``
        (per-bit randomized response).
    noise_value : float
        Its value (for a release of several parts, one part's σ: see ``parts``).
    private : bool
        ``False`` when the caller passed ``seed=``: the noise is reproducible and
        ``guarantee`` does not hold against anyone who knows the seed.
    p0 : float or None
        Edge probability of the comparison graph (1 = complete); ``None`` for a release
        without one (the totals mechanism).
    n_edges : int or None
        Undirected edges of the comparison graph (``None`` without one).
    shuffle : bool
        Whether the randomized reports were shuffled and amplification was claimed.
    cost : PrivacyCost
        The (ρ, ε, δ) debited from a ledger (and to compose with other spends).
    n_persons : int or None
        The public number of persons the release was calibrated and stated for.
    ledger_spend_id : int or None
        The spend's id in the ledger, if one was given.
    notes : tuple of str
        Further statements (missing-data handling, TV terms, conversions used).
    domain : str or None
        The input domain the guarantee is stated for: :data:`DOMAIN_ANY` (rows in
        {0, 1, missing}^m) or :data:`DOMAIN_COMPLETE` (rows in {0, 1}^m, the totals release
        with ``missing="none"``).  Whether the data lie in it is checked before anything is
        spent; that check's refusal, like every warning, goes to the data holder only and is
        not part of the release (``docs/privacy.md`` §1).
    parts : tuple of NoisePart
        For a release of several noisy vectors (the totals release, the private 2PL), each
        part's σ, L2 sensitivity and ρ (ρ is their sum); empty for a single-part release.

    ``epsilon``, ``delta`` and ``rho`` are read from ``guarantee`` and ``native``.
    """

    mechanism: str
    relation: str
    guarantee: PureDP | ApproxDP
    native: PureDP | ZCDP | ApproxDP
    sensitivity: Sensitivity | None
    noise_parameter: str
    noise_value: float
    private: bool
    p0: float | None
    n_edges: int | None
    shuffle: bool
    cost: PrivacyCost
    n_persons: int | None = None
    ledger_spend_id: int | None = None
    notes: tuple[str, ...] = ()
    domain: str | None = None
    parts: tuple[NoisePart, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.guarantee, (PureDP, ApproxDP)):
            raise TypeError(f"guarantee must be PureDP or ApproxDP, got {self.guarantee!r}")
        if not isinstance(self.native, (PureDP, ZCDP, ApproxDP)):
            raise TypeError(f"native must be PureDP, ZCDP or ApproxDP, got {self.native!r}")

    @property
    def epsilon(self) -> float:
        """ε of the claimed guarantee."""
        return self.guarantee.epsilon

    @property
    def delta(self) -> float:
        """δ of the claimed guarantee (0 for pure DP)."""
        return self.guarantee.delta if isinstance(self.guarantee, ApproxDP) else 0.0

    @property
    def rho(self) -> float | None:
        """ρ of the zCDP guarantee (discrete Gaussian), else ``None``."""
        return self.native.rho if isinstance(self.native, ZCDP) else None

    def _guarantee_text(self) -> str:
        if self.delta > 0:
            # rounded up at the printed precision: never displayed below the claim
            return f"({format_up(self.epsilon, 6)}, {format_up(self.delta, 3)})-differential privacy"
        return f"{format_up(self.epsilon, 6)}-differential privacy (pure)"

    def __str__(self) -> str:
        lines = []
        if self.private:
            lines.append(f"privacy: {self._guarantee_text()}")
        else:
            lines.append(_NOT_PRIVATE)
            lines.append(
                f"privacy: {self._guarantee_text()} does NOT apply to this result (seeded noise); "
                "it is what the same call without a seed guarantees"
            )
        lines.append(f"neighbouring relation: {self.relation}")
        if self.domain is not None:
            lines.append(f"input domain: {self.domain}")
            lines.append(f"refusals and warnings: {HOLDER_ONLY}")
        if self.parts:  # one sigma and sensitivity per part: each part's rho = L2²/(2 sigma²)
            lines.append(f"mechanism: {self.mechanism}, one {self.noise_parameter} per part")
            lines.extend(f"part: {q.name}, {self.noise_parameter} = {q.sigma:.6g}, sensitivity L2 = "
                         f"{format_up(q.sensitivity_l2, 6)}, rho = {format_up(q.rho, 6)}" for q in self.parts)
        else:
            # a noise scale may print to nearest; a privacy parameter (RR's ε₀) is rounded up
            value = (format_up(self.noise_value, 6) if self.noise_parameter in PRIVACY_PARAMETERS
                     else f"{self.noise_value:.6g}")
            lines.append(f"mechanism: {self.mechanism}, {self.noise_parameter} = {value}")
        if self.rho is not None:
            total = " (the sum of the parts' rho)" if self.parts else ""
            lines.append(f"zCDP: rho = {format_up(self.rho, 6)}{total}")
        if self.sensitivity is not None:
            lines.append(f"sensitivity{' of all parts together' if self.parts else ''}: {self.sensitivity}")
        if self.n_persons is not None:
            lines.append(f"persons (public): {self.n_persons}")
        if self.p0 is not None:
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
            "domain": self.domain,
            # (seeded: the guarantee is what the call without a seed gives; said so here too,
            # for a reader who takes this field alone, as the text and the CSV header say it)
            "guarantee": str(self.guarantee) if self.private
            else f"{self.guarantee} does NOT apply to this result (seeded noise)",
            "measure": type(self.native).__name__,
            "sensitivity_l1": None if sens is None else sens.l1,
            "sensitivity_l2": None if sens is None else sens.l2,
            "sensitivity_bound": None if sens is None else sens.bound,
            "noise_parameter": self.noise_parameter,
            "noise_value": self.noise_value,
            "rho": self.rho,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "private": self.private,
            "n_persons": self.n_persons,
            "p0": self.p0,
            "n_edges": self.n_edges,
            "shuffle": self.shuffle,
            "cost": {"rho": self.cost.rho, "epsilon": self.cost.epsilon, "delta": self.cost.delta},
            "ledger_spend_id": self.ledger_spend_id,
            "notes": list(self.notes),
            "parts": [{"name": q.name, "sigma": q.sigma, "sensitivity_l2": q.sensitivity_l2, "rho": q.rho}
                      for q in self.parts],
        }

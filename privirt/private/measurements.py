"""Measurements: one object per private mechanism, each carrying its privacy map.

A measurement is built by its ``calibrate(...)`` class method from the target (ε, δ) and the
public facts it needs (a sensitivity, the number of items and persons); it carries its privacy
map (``map(d_in)``: the guarantee at its noise for a given sensitivity), and knows its
noise parameter, its guarantee in the measure its privacy map is stated in (``native``:
ρ-zCDP for the discrete Gaussian, pure ε for the discrete Laplace and randomized response),
the guarantee claimed to the user (``guarantee``), and the ``cost`` debited from a ledger.
``apply(...)`` draws the noise (from the ``"noise"`` child stream of the seed, or from the
OS-keyed secure generator without one) and ``statement(...)`` writes the
:class:`~privirt.private.PrivacyStatement`.

Every calibration aims a hair inside the target, at ε·(1 − :data:`CALIBRATION_MARGIN`): the
mechanisms report their privacy parameters rounded up to the next float, and the margin keeps
that rounded value at or below the ε the caller chose.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
from typing import Any, ClassVar

import numpy as np

from mechanisms.measures import ApproxDP, PureDP, ZCDP, format_up, zcdp_to_approx_dp

from .._seeds import child, secure_rng, stream_key
from .accounting import (
    NEIGHBOURING_RELATION,
    PrivacyCost,
    calibrate_gaussian_sigma,
    calibrate_laplace_scale,
    calibrate_rr_epsilon0,
    check_target_epsilon,
    sum_up,
)
from ..data.responses import Responses
from .sensitivity import Sensitivity
from .rr import randomize, shuffle_rows
from .statement import DOMAIN_ANY, DOMAIN_COMPLETE, NoisePart, PrivacyStatement

__all__ = [
    "CALIBRATION_MARGIN",
    "Measurement",
    "CountsGaussian",
    "CountsLaplace",
    "ResponsesRR",
    "TotalsGaussian",
    "calibration_epsilon",
]

#: Relative margin between the ε a caller asks for and the ε a measurement is calibrated
#: to (``ε·(1 − CALIBRATION_MARGIN)``): the mechanisms round their privacy parameters up
#: to the next float, and the stated guarantee must never exceed the target.
CALIBRATION_MARGIN: float = 1e-10

SEEDED_NOTE = "seed given: noise is reproducible, so this result is NOT private"


def calibration_epsilon(epsilon: float) -> float:
    """The ε a measurement is calibrated to for a target ``epsilon`` (see the module doc)."""
    return epsilon * (1.0 - CALIBRATION_MARGIN)


def load_mechanisms():
    """The ``mechanisms`` package (exact discrete noise), with a clear error if missing."""
    try:
        import mechanisms  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - the package ships with privirt
        raise ImportError(
            "privirt's private functions need the `mechanisms` package that ships with privirt "
            f"(exact discrete noise samplers): {exc}"
        ) from exc
    return mechanisms


def noise_seed(seed: np.random.SeedSequence | None, name: str = "noise") -> bytes | None:
    """The key of the named reproducible noise stream (``None``: OS-keyed, private)."""
    return None if seed is None else stream_key(child(seed, name))


def check_supported(eps: float, calibrated: str, value: float, lo: float, hi: float) -> None:
    """Refuse, in terms of the ε the caller chose, a noise parameter outside the range the
    exact samplers support (before anything is debited)."""
    if not lo <= value <= hi:
        raise ValueError(
            f"epsilon={eps:g} calibrates to {calibrated}, outside the range the exact sampler "
            f"supports [{lo:g}, {hi:g}]; choose an epsilon in the usual range (say 0.01 to 100)"
        )


def _tv(mech: Any) -> float:
    tv = float(getattr(mech, "tv_bound", 0.0) or 0.0)
    if not (tv >= 0 and math.isfinite(tv)):
        raise RuntimeError(f"the mechanism reported an invalid tv_bound {tv!r}")
    return tv


class Measurement:
    """A calibrated private mechanism: privacy map, claimed guarantee, cost and statement.

    Subclasses set the class attributes and fill ``native``, ``guarantee``, ``cost``,
    ``noise_value``, ``sensitivity`` and ``notes`` in ``calibrate``.
    """

    #: Name used in statements.
    name: ClassVar[str]
    #: Label of the ledger entry.
    ledger_label: ClassVar[str]
    #: Name of the noise parameter (``"sigma"``, ``"scale"``, ``"epsilon0"``).
    noise_parameter: ClassVar[str]
    #: The measure the privacy map is stated in.
    measure: type

    native: PureDP | ZCDP | ApproxDP
    guarantee: PureDP | ApproxDP
    cost: PrivacyCost
    noise_value: float
    sensitivity: Sensitivity | None = None
    shuffled: bool = False
    notes: tuple[str, ...] = ()
    #: the input domain the guarantee holds on (stated in the statement)
    domain: str = DOMAIN_ANY

    def _check_claim(self, target: ApproxDP) -> None:
        if self.guarantee.epsilon > target.epsilon * (1 + 1e-12):  # pragma: no cover
            raise RuntimeError(
                f"internal accounting mismatch: {self.noise_parameter}={self.noise_value} gives "
                f"ε={self.guarantee.epsilon} > {target.epsilon}"
            )

    def statement(self, *, private: bool, p0: float, n_edges: int, n_persons: int,
                  spend_id: int | None, notes: tuple[str, ...] = ()) -> PrivacyStatement:
        """The statement of a release made with this measurement."""
        all_notes = self.notes + tuple(notes) + (() if private else (SEEDED_NOTE,))
        return PrivacyStatement(
            mechanism=self.name,
            relation=NEIGHBOURING_RELATION,
            guarantee=self.guarantee,
            native=self.native,
            sensitivity=self.sensitivity,
            noise_parameter=self.noise_parameter,
            noise_value=float(self.noise_value),
            private=bool(private),
            p0=float(p0),
            n_edges=int(n_edges),
            shuffle=bool(self.shuffled),
            cost=self.cost,
            n_persons=int(n_persons),
            ledger_spend_id=spend_id,
            notes=all_notes,
            domain=self.domain,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.noise_parameter}={self.noise_value!r}, {self.native})"


class CountsGaussian(Measurement):
    """Discrete Gaussian noise on released integer counts: ρ-zCDP with ρ = Δ₂²/(2σ²),
    stated as (ε, δ)-DP by the tight conversion of Canonne, Kamath & Steinke (2020)."""

    name = "discrete Gaussian"
    ledger_label = "discrete Gaussian counts"
    noise_parameter = "sigma"
    measure = ZCDP

    @classmethod
    def calibrate(cls, target: ApproxDP, sensitivity: Sensitivity) -> "CountsGaussian":
        """The smallest σ meeting ``target`` for this sensitivity."""
        check_target_epsilon(target.epsilon)  # the shared rule (accounting.MIN_EPSILON)
        mech_mod = load_mechanisms()
        draws = sensitivity.n_released
        static_tv = inspect.getattr_static(mech_mod.DiscreteGaussian, "tv_bound", None)
        if isinstance(static_tv, (int, float)):  # a constant per-draw bound (0 when exact)
            tv_of: Any = _tv(mech_mod.DiscreteGaussian)
        else:  # a bound that depends on σ: ask an instance

            def tv_of(sigma: float) -> float:
                return _tv(mech_mod.DiscreteGaussian(sigma))

        sigma = calibrate_gaussian_sigma(sensitivity.l2, calibration_epsilon(target.epsilon),
                                         target.delta, draws=draws, tv_bound=tv_of)
        check_supported(target.epsilon, f"σ = {sigma:.4g}", sigma, mech_mod.MIN_SCALE, mech_mod.MAX_SCALE)
        self = cls()
        self.sensitivity = sensitivity
        # The claim is made with the mechanism's own (rounded-up) ρ: a hair more noise until that
        # claim meets the target too (the same rule as TotalsGaussian), never an internal error.
        step = 1e-9
        for _ in range(200):
            self.noise_value = float(sigma)
            self.native = self.map(sensitivity)
            rho = self.native.rho
            tv_delta = draws * _tv(mech_mod.DiscreteGaussian(sigma))
            claimed = zcdp_to_approx_dp(rho, target.delta - tv_delta) if tv_delta < target.delta else math.inf
            if claimed <= target.epsilon:
                break
            sigma, step = sigma * (1.0 + step), step * 2.0
        check_supported(target.epsilon, f"σ = {sigma:.4g}", sigma, mech_mod.MIN_SCALE, mech_mod.MAX_SCALE)
        self.guarantee = ApproxDP(claimed, target.delta)
        self.cost = PrivacyCost(rho=rho, delta=tv_delta)
        self.notes = (
            "ρ-zCDP converted to (ε, δ) by the tight conversion of Canonne, Kamath & Steinke "
            "(2020)" + (f"; sampler TV bound × {draws} draws = {format_up(tv_delta, 3)} added to δ" if tv_delta else ""),
        )
        self._check_claim(target)
        return self

    def map(self, sensitivity: Sensitivity) -> ZCDP:
        """The privacy map: ρ-zCDP at this σ for a query of the given sensitivity (the
        mechanism's ρ, never below the proven Δ₂²/(2σ²))."""
        sigma = self.noise_value
        mech = load_mechanisms().DiscreteGaussian(sigma)
        rho = mech.privacy(sensitivity.l2, l1_sensitivity=sensitivity.l1,
                           dimension=sensitivity.n_released).rho
        return ZCDP(max(rho, sensitivity.l2**2 / (2.0 * sigma**2)))

    def apply(self, values: np.ndarray, *, seed: np.random.SeedSequence | None,
              progress: bool = False) -> np.ndarray:
        """``values`` + independent discrete Gaussian noise (int64); ``progress``: a bar on
        stderr when there are more than :data:`NOISE_CHUNK` values."""
        mech = load_mechanisms().DiscreteGaussian(self.noise_value, seed=noise_seed(seed))
        return apply_in_chunks(mech, values, progress)


class CountsLaplace(Measurement):
    """Discrete Laplace noise on released integer counts: pure ε-DP with ε = Δ₁/scale."""

    name = "discrete Laplace"
    ledger_label = "discrete Laplace counts"
    noise_parameter = "scale"
    measure = PureDP

    @classmethod
    def calibrate(cls, target: ApproxDP, sensitivity: Sensitivity) -> "CountsLaplace":
        """scale = Δ₁/ε (δ unused, beyond a sampler's TV term)."""
        check_target_epsilon(target.epsilon)
        mech_mod = load_mechanisms()
        scale = calibrate_laplace_scale(sensitivity.l1, calibration_epsilon(target.epsilon))
        check_supported(target.epsilon, f"a Laplace scale of {scale:.4g}", scale,
                        mech_mod.MIN_SCALE, mech_mod.MAX_SCALE)
        mech = mech_mod.DiscreteLaplace(scale)
        tv_delta = sensitivity.n_released * _tv(mech)
        if tv_delta >= target.delta:
            raise ValueError(f"the Laplace sampler's TV term ({tv_delta:.3g}) is not below delta={target.delta:g}")
        self = cls()
        self.sensitivity = sensitivity
        self.noise_value = float(scale)
        self.native = self.map(sensitivity)
        eps = self.native.epsilon
        self.guarantee = ApproxDP(eps, tv_delta) if tv_delta else PureDP(eps)
        self.cost = PrivacyCost(epsilon=eps, delta=tv_delta)
        self.notes = (
            "pure ε-DP: δ is not used by the Laplace mechanism"
            + (f" (beyond the sampler's TV term {format_up(tv_delta, 3)})" if tv_delta else ""),
        )
        self._check_claim(target)
        return self

    def map(self, sensitivity: Sensitivity) -> PureDP:
        """The privacy map: pure ε = Δ₁/scale (rounded up) for the given sensitivity."""
        return load_mechanisms().DiscreteLaplace(self.noise_value).privacy(sensitivity.l1)

    def apply(self, values: np.ndarray, *, seed: np.random.SeedSequence | None,
              progress: bool = False) -> np.ndarray:
        """``values`` + independent discrete Laplace noise (int64); ``progress`` as for the
        Gaussian."""
        mech = load_mechanisms().DiscreteLaplace(self.noise_value, seed=noise_seed(seed))
        return apply_in_chunks(mech, values, progress)


#: Above this many values the counts' noise is drawn a chunk at a time (a progress bar can then
#: follow it: 25 million exact discrete Gaussian draws at m = 5000 take ~10 s of CPU).
NOISE_CHUNK: int = 1 << 22


def apply_in_chunks(mech: Any, values: np.ndarray, progress: bool = False) -> np.ndarray:
    """``mech.apply`` on ``values`` (int64 out), :data:`NOISE_CHUNK` values at a time beyond
    that many.  The noise of every value is an independent draw of the same mechanism either
    way (chunks only split the calls; releases up to one chunk draw exactly as before)."""
    from .._progress import ticker

    values = np.asarray(values)
    if values.size <= NOISE_CHUNK:
        return np.asarray(mech.apply(values), dtype=np.int64)
    flat = values.reshape(-1)
    out = np.empty(flat.size, dtype=np.int64)
    tick = ticker(flat.size, "noise", unit="values", enabled=progress)
    for a in range(0, flat.size, NOISE_CHUNK):
        b = min(flat.size, a + NOISE_CHUNK)
        out[a:b] = np.asarray(mech.apply(flat[a:b]), dtype=np.int64)
        tick(b - a)
    return out.reshape(values.shape)


class ResponsesRR(Measurement):
    """Randomized response on every cell of the response matrix (missing cells become fair
    coin flips), ε₀ per bit: pure (m·ε₀)-DP locally, or (ε, δ)-DP centrally when the reports
    are shuffled and the amplification theorem applies."""

    name = "randomized response"
    ledger_label = "randomized response"
    noise_parameter = "epsilon0"
    measure = PureDP  # ApproxDP on an instance whose shuffle amplification was claimed

    #: e^ε₀ / (1 + e^ε₀), for the debiasing.
    keep_probability: float
    #: Whether ``apply`` shuffles the reports (asked for; ``shuffled``: amplification claimed).
    shuffle_requested: bool

    @classmethod
    def calibrate(cls, target: ApproxDP, *, n_items: int, n_persons: int,
                  shuffle: bool) -> "ResponsesRR":
        """The per-bit ε₀ for ``target`` (shuffle amplification claimed where it applies)."""
        check_target_epsilon(target.epsilon)
        mech_mod = load_mechanisms()
        eps, dlt, m = target.epsilon, target.delta, int(n_items)
        eps0, claimed, amplified = calibrate_rr_epsilon0(
            calibration_epsilon(eps), m, delta=dlt, n_persons=int(n_persons), shuffle=bool(shuffle)
        )
        check_supported(eps, f"a per-response ε₀ = {eps0:.6g} (ε spread over {m} items)", eps0,
                        0.0, mech_mod.EPSILON_MAX)
        keep = 1.0 / (1.0 + math.exp(-eps0))  # the mechanism's keep_probability
        if not 2.0 * keep - 1.0 > 0.0:
            raise ValueError(
                f"epsilon={eps:g} is too small for randomized response on {m} items: the per-bit "
                f"ε₀ = {eps0:.3g} makes the keep probability 1/2 in double precision, so the "
                "randomized bits cannot be debiased (and carry no usable signal); use a larger epsilon"
            )
        self = cls()
        self.noise_value = float(eps0)
        local = self.map(m)
        self.keep_probability = keep
        self.shuffled = bool(amplified)
        notes = [
            "missing cells are replaced by fair coin flips before release, so the observed mask is "
            "protected too (the guarantee holds for rows in {0, 1, missing}^m)",
            f"per-bit ε₀ = {format_up(eps0, 6)}; user-level local ε = m·ε₀ = {format_up(local.epsilon, 6)} "
            "(basic composition)",
        ]
        if amplified:
            self.measure = ApproxDP
            self.native = self.guarantee = ApproxDP(claimed, dlt)
            self.cost = PrivacyCost(epsilon=claimed, delta=dlt)
            notes.append(
                f"shuffled: the central guarantee is amplified from the local one for n = "
                f"{int(n_persons)} (public) by the numerical bound of Feldman, McMillan & Talwar "
                "(2021), §3 clone reduction (privirt.private.shuffling)"
            )
        else:
            self.native = self.guarantee = local
            self.cost = PrivacyCost(epsilon=local.epsilon)
            if shuffle:
                notes.append(
                    f"shuffled, but amplification gives no gain here for n = {int(n_persons)} "
                    "(public): pure local ε claimed"
                )
        self.shuffle_requested = bool(shuffle)
        self.notes = tuple(notes)
        self._check_claim(target)
        return self

    def map(self, n_bits: int) -> PureDP:
        """The (local) privacy map: pure (n_bits·ε₀)-DP for a person whose ``n_bits`` bits
        may all change (the shuffled statement is made by ``calibrate``)."""
        return load_mechanisms().RandomizedResponse(self.noise_value).privacy(n_bits=int(n_bits))

    def apply(self, resp: Responses, *, seed: np.random.SeedSequence | None) -> np.ndarray:
        """The randomized n × m 0/1 matrix (rows shuffled when shuffling was asked for)."""
        mech = load_mechanisms().RandomizedResponse(self.noise_value, seed=noise_seed(seed))
        Z = randomize(resp, mech, secure_rng(seed, "coins"))
        if self.shuffle_requested:
            Z = shuffle_rows(Z, secure_rng(seed, "shuffle"))
        return Z


class PartsGaussian(Measurement):
    """A release of several integer vectors (parts), each with discrete Gaussian noise of its
    own σ: the privacy map sums the parts' ρ, seeded noise comes from the streams
    ``(stream, part)`` of the seed.  Subclasses set ``sigmas``, ``parts``, ``_part_sens`` and
    :attr:`stream` (:class:`TotalsGaussian`; the private 2PL's ``PairsGaussian``)."""

    #: the first component of the seeded noise streams' names
    stream: str = ""
    sigmas: tuple[float, ...] = ()
    parts: tuple[str, ...] = ()
    #: what each part releases, in the order of ``parts`` (the statement's words)
    part_names: tuple[str, ...] = ()

    def map(self, part_sensitivities: list[tuple[float, int]] | None = None) -> ZCDP:
        """The privacy map: the sum over parts of each mechanism's ρ for (L2 sensitivity,
        dimension) of that part (default: the proven ones of the release)."""
        mech_mod = load_mechanisms()
        sens = self._part_sens if part_sensitivities is None else part_sensitivities
        # the parts' ρ add (zCDP composition); the sum is rounded up, never to nearest
        return ZCDP(sum_up(float(mech_mod.DiscreteGaussian(s).privacy(d, dimension=k))
                           for s, (d, k) in zip(self.sigmas, sens)))

    def apply(self, values: list[np.ndarray], *, seed: np.random.SeedSequence | None) -> list[np.ndarray]:
        """Each part + its discrete Gaussian noise (int64); seeded streams ``(stream, part)``."""
        mech_mod = load_mechanisms()
        out = []
        for s, part, v in zip(self.sigmas, self.parts, values):
            key = None if seed is None else stream_key(child(seed, self.stream, part))
            out.append(np.asarray(mech_mod.DiscreteGaussian(s, seed=key).apply(v), dtype=np.int64))
        return out

    def statement(self, *, private: bool, n_persons: int, spend_id: int | None,  # type: ignore[override]
                  notes: tuple[str, ...] = (), p0: Any = None, n_edges: Any = None) -> PrivacyStatement:
        """The statement of the release (no comparison graph)."""
        return PrivacyStatement(
            mechanism=self.name, relation=NEIGHBOURING_RELATION, sensitivity=self.sensitivity,
            guarantee=self.guarantee, native=self.native, noise_parameter=self.noise_parameter,
            noise_value=float(self.noise_value), private=bool(private), p0=None, n_edges=None,
            shuffle=False, cost=self.cost, n_persons=int(n_persons), ledger_spend_id=spend_id,
            notes=self.notes + tuple(notes) + (() if private else (SEEDED_NOTE,)),
            domain=self.domain, parts=self._noise_parts(),
        )

    def _noise_parts(self) -> tuple[NoisePart, ...]:
        """Each part's σ, L2 sensitivity and ρ (the terms :meth:`map` adds up); a name, σ or
        sensitivity missing for a part raises (``zip(strict=True)``) rather than drop the part."""
        mech_mod = load_mechanisms()
        return tuple(NoisePart(name, float(s), float(d),
                               float(mech_mod.DiscreteGaussian(s).privacy(d, dimension=k)))
                     for name, s, (d, k) in zip(self.part_names, self.sigmas, self._part_sens, strict=True))


class TotalsGaussian(PartsGaussian):
    """Discrete Gaussian noise on the parts of the totals release (``privirt.private.totals``):
    (item totals, score histogram), or with ``missing="mcar"`` (correct counts, answered counts,
    observed-score histogram); each part has its own σ and sensitivity (m, [m,] 2), the ρ-zCDP
    of the parts is composed and stated as (ε, δ)-DP by the tight conversion.

    The shares of ρ and the score bins are the design derived from the public n, m and ρ
    (``docs/totals.md`` §4, §7): ``split`` (the histogram's share f), ``answered_share`` (g),
    ``edges`` (score bins), ``k_edges`` (bins of the number answered, MCAR; one bin otherwise);
    ``sigmas`` holds one σ per part, ``parts`` their names.
    """

    name = "discrete Gaussian (item totals + score histogram)"
    ledger_label = name
    noise_parameter = "sigma"
    measure = ZCDP

    sigmas: tuple[float, ...]
    parts: tuple[str, ...]
    stream = "totals"
    split: float
    answered_share: float
    edges: np.ndarray
    k_edges: np.ndarray
    missing: str

    @classmethod
    def calibrate(cls, target: ApproxDP, *, n_persons: int, n_items: int,
                  missing: str = "none") -> "TotalsGaussian":
        """σ per part meeting ``target`` with the derived split (a hair more noise until the
        mechanisms' rounded-up ρ meets it).

        The calibration is a deterministic function of public values only (ε, δ, n, m, the
        declared domain), and its cost (the design and the samplers' tables) is most of a small
        release's time: it is computed once per process for each such tuple and a copy is
        returned (a caller that prices a request and then runs it calibrates once;
        :func:`_calibrated_totals` ``.cache_clear()`` empties the cache)."""
        key = (float(target.epsilon), float(target.delta), int(n_persons), int(n_items), str(missing))
        return copy.deepcopy(_calibrated_totals(cls, *key))

    @classmethod
    def _calibrate(cls, target: ApproxDP, *, n_persons: int, n_items: int,
                   missing: str = "none") -> "TotalsGaussian":
        """The calibration itself (uncached; see :meth:`calibrate`)."""
        from .totals import marginal, marginal_missing
        from .sensitivity import _sqrt_up

        check_target_epsilon(target.epsilon)
        mech_mod = load_mechanisms()
        eps, dlt = target.epsilon, target.delta
        n, m = int(n_persons), int(n_items)
        try:
            sigma1 = calibrate_gaussian_sigma(1.0, calibration_epsilon(eps), dlt)
        except (ValueError, ArithmeticError, OverflowError):
            sigma1 = math.inf
        rho = 0.5 / sigma1**2 if math.isfinite(sigma1) else 0.0
        if not rho > 0:
            raise ValueError(f"epsilon={eps:g} is too small to calibrate; choose an epsilon in the usual "
                             "range (say 0.01 to 100)")
        self = cls()
        self.missing = missing
        self.domain = DOMAIN_ANY if missing == "mcar" else DOMAIN_COMPLETE
        if missing == "mcar":
            f, g, edges, k_edges = marginal_missing.mcar_design(n, m, rho)
            sigmas = [math.sqrt(m / (2.0 * (1.0 - f) * (1.0 - g) * rho)),
                      math.sqrt(m / (2.0 * (1.0 - f) * g * rho)), math.sqrt(1.0 / (f * rho))]
            self.parts = ("s", "a", "h")
            self.part_names = ("correct counts per item", "answered counts per item", "observed-score histogram")
            self.name = "discrete Gaussian (item totals + answered counts + score histogram)"
            self.ledger_label = self.name
        else:
            f, edges = marginal.optimal_split(n, m, rho)
            g, k_edges = 0.0, np.array([0, m + 1])
            sigmas = [math.sqrt(m / (2.0 * (1.0 - f) * rho)), math.sqrt(1.0 / (f * rho))]
            self.parts = ("s", "h")
            self.part_names = ("item totals", "score histogram")
        for s in sigmas:
            check_supported(eps, f"a noise scale σ = {s:.4g}", s, mech_mod.MIN_SCALE, mech_mod.MAX_SCALE)
            if _tv(mech_mod.DiscreteGaussian(s)) != 0:  # the claim below assumes an exact sampler
                raise RuntimeError("the discrete Gaussian sampler reports a nonzero TV bound; the totals "
                                   "release has no δ term for it")
        B = (len(edges) - 1) * (len(k_edges) - 1)  # histogram cells
        l2 = [_sqrt_up(m)] * (len(self.parts) - 1) + [_sqrt_up(2)]  # each part's own L2 sensitivity
        self._part_sens = list(zip(l2, [m] * (len(self.parts) - 1) + [B]))
        while True:
            self.sigmas = tuple(sigmas)
            self.native = self.map()
            claimed = zcdp_to_approx_dp(self.native.rho, dlt)
            if claimed <= eps:
                break
            sigmas = [s * (1 + 1e-9) for s in sigmas]
        self.noise_value = float(self.sigmas[0])
        self.split, self.answered_share, self.edges = float(f), float(g), np.asarray(edges, dtype=np.int64)
        self.k_edges = np.asarray(k_edges, dtype=np.int64)
        # jointly: the parts' squared bounds add up (attained together, docs/totals.md §2, §7)
        joint = m * (len(self.parts) - 1) + 2
        self.sensitivity = Sensitivity(float(joint), _sqrt_up(joint), "tight", NEIGHBOURING_RELATION,
                                       m * (len(self.parts) - 1) + B)
        self.guarantee = ApproxDP(float(claimed), float(dlt))
        self.cost = PrivacyCost(rho=self.native.rho)
        self.notes = self._notes(m, B)
        self._check_claim(target)
        return self

    def _notes(self, m: int, B: int) -> tuple[str, ...]:
        f = self.split
        if self.missing == "mcar":
            sig_t, sig_a, sig_h = self.sigmas
            g = (m / (2 * sig_a**2)) / (m / (2 * sig_t**2) + m / (2 * sig_a**2))
            K = len(self.k_edges) - 1
            layout = (f"a {B}-bin observed-score histogram" if K == 1 else
                      f"a {K} × {B // K}-cell (number answered, observed score) histogram")
            return (
                "assumes cells are missing completely at random (MCAR: whether a cell is observed does "
                "not depend on the person's ability or answers); which cells are missing is protected",
                f"correct counts per item (L2² ≤ {m}, σ = {sig_t:.6g}), answered counts per item "
                f"(L2² ≤ {m}, σ = {sig_a:.6g}) and {layout} (L2² ≤ 2, "
                f"σ = {sig_h:.6g}); jointly L2² ≤ {2 * m + 2}; {f:.1%} of ρ on the histogram, {g:.1%} of "
                "the rest on the answered counts (derived split, docs/totals.md §7)",
                "ρ-zCDP of the three parts composed and converted to (ε, δ) by Canonne, Kamath & Steinke (2020)",
            )
        sig_t, sig_h = self.sigmas
        return (
            f"item totals (L2² ≤ {m}, σ = {sig_t:.6g}) and a {B}-bin raw-score histogram "
            f"(L2² ≤ 2, σ = {sig_h:.6g}); {f:.1%} of ρ on the histogram (derived split, docs/totals.md)",
            "ρ-zCDP of the two parts composed and converted to (ε, δ) by Canonne, Kamath & Steinke (2020)",
            "complete data only: which items a person answered is not part of the release",
        )


@functools.lru_cache(maxsize=256)
def _calibrated_totals(cls: type, epsilon: float, delta: float, n_persons: int, n_items: int,
                       missing: str) -> "TotalsGaussian":
    """:meth:`TotalsGaussian.calibrate`'s cache (public values in, a measurement out; never
    handed out itself, only deep copies of it)."""
    return cls._calibrate(ApproxDP(epsilon, delta), n_persons=n_persons, n_items=n_items, missing=missing)

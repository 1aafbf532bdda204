"""The measurement of the private 2PNO release: discrete Gaussian noise on the item totals and
on the pair disagreement counts, each part with its own σ, ρ-zCDP composed and stated as (ε, δ)."""

from __future__ import annotations

import math

from mechanisms.measures import ApproxDP, ZCDP, zcdp_to_approx_dp

from ..accounting import PrivacyCost, calibrate_gaussian_sigma
from ..measurements import PartsGaussian, _tv, calibration_epsilon, check_supported, load_mechanisms
from ..sensitivity import bound_text
from ..statement import DOMAIN_COMPLETE
from .statistics import pair_sensitivity

__all__ = ["PairsGaussian", "TOTALS_SHARE", "design"]

#: Share of ρ spent on the item totals (the rest on the disagreement counts): a constant (it
#: depends on no data and on none of n, m, ρ), chosen in ``docs/private_2pl.md`` §4.
TOTALS_SHARE: float = 0.3


def design(n_items: int, rho: float, totals_share: float = TOTALS_SHARE) -> tuple[float, float]:
    """(σ of the totals, σ of the disagreement counts) spending ``rho`` with the given share."""
    m = int(n_items)
    f = float(totals_share)
    sig_t = math.sqrt(m / (2.0 * f * rho))
    sig_n = math.sqrt(((m // 2) * ((m + 1) // 2)) / (2.0 * (1.0 - f) * rho))
    return sig_t, sig_n


class PairsGaussian(PartsGaussian):
    """Discrete Gaussian noise on (item totals, disagreement counts D_ij, i < j).

    Part sensitivities (replace one person): L2² = m and ⌊m/2⌋⌈m/2⌉; the ρ of the parts add
    up (zCDP composition; an upper bound, the two maxima are not attained by the same rows,
    ``docs/private_2pl.md`` §2); ``sigmas`` holds (σ_totals, σ_pairs).
    """

    name = "discrete Gaussian (item totals + pair disagreement counts)"
    ledger_label = name
    noise_parameter = "sigma"
    measure = ZCDP

    sigmas: tuple[float, float]
    parts: tuple[str, str] = ("totals", "pairs")
    part_names: tuple[str, str] = ("item totals", "disagreement counts")
    totals_share: float
    stream = "twopl"
    domain = DOMAIN_COMPLETE

    #: the part whose σ is reported as ``noise_value``
    noise_part: int = 1

    @classmethod
    def _scales(cls, m: int, rho: float, totals_share: float) -> tuple[float, ...]:
        """σ of each part spending ``rho`` (public m and share only)."""
        return design(m, rho, totals_share)

    @classmethod
    def _sensitivities(cls, m: int) -> list:
        """The proven sensitivity of each part, in the order of :attr:`parts`."""
        return [pair_sensitivity(m, p) for p in cls.parts]

    @classmethod
    def _joint_sensitivity(cls, m: int):
        return pair_sensitivity(m, "joint")

    def _describe(self, m: int, sens: list) -> tuple[str, ...]:
        """The statement's notes."""
        return (
            f"item totals (L2² ≤ {m}, σ = {self.sigmas[0]:.6g}) and disagreement counts "
            f"D_ij = #(x_i ≠ x_j), i < j (L2² ≤ {bound_text(sens[1].l1)}, σ = {self.sigmas[1]:.6g}); ρ of the parts added; "
            f"{self.totals_share:.0%} of ρ on the totals (docs/private_2pl.md)",
            "ρ-zCDP of the two parts composed and converted to (ε, δ) by Canonne, Kamath & Steinke (2020)",
            "complete data only: which items a person answered is not part of the release",
        )

    @classmethod
    def calibrate(cls, target: ApproxDP, *, n_items: int, totals_share: float = TOTALS_SHARE) -> "PairsGaussian":
        """σ per part meeting ``target`` (a hair more noise until the mechanisms' rounded-up ρ
        meets it).  Uses the public m only."""
        mech_mod = load_mechanisms()
        eps, dlt = target.epsilon, target.delta
        m = int(n_items)
        try:
            sigma1 = calibrate_gaussian_sigma(1.0, calibration_epsilon(eps), dlt)
        except (ValueError, ArithmeticError, OverflowError):
            sigma1 = math.inf
        rho = 0.5 / sigma1**2 if math.isfinite(sigma1) else 0.0
        if not rho > 0:
            raise ValueError(f"epsilon={eps:g} is too small to calibrate; choose an epsilon in the usual "
                             "range (say 0.01 to 100)")
        sigmas = list(cls._scales(m, rho, totals_share))
        for s in sigmas:
            check_supported(eps, f"a noise scale σ = {s:.4g}", s, mech_mod.MIN_SCALE, mech_mod.MAX_SCALE)
            if _tv(mech_mod.DiscreteGaussian(s)) != 0:  # the claim below assumes an exact sampler
                raise RuntimeError("the discrete Gaussian sampler reports a nonzero TV bound; the 2PL "
                                   "release has no δ term for it")
        self = cls()
        sens = cls._sensitivities(m)
        self._part_sens = [(s.l2, s.n_released) for s in sens]
        while True:
            self.sigmas = tuple(float(s) for s in sigmas)  # type: ignore[assignment]
            self.native = self.map()
            claimed = zcdp_to_approx_dp(self.native.rho, dlt)
            if claimed <= eps:
                break
            sigmas = [s * (1 + 1e-9) for s in sigmas]
        self.totals_share = float(totals_share)
        self.noise_value = float(self.sigmas[cls.noise_part])
        self.sensitivity = cls._joint_sensitivity(m)
        self.guarantee = ApproxDP(float(claimed), float(dlt))
        self.cost = PrivacyCost(rho=self.native.rho)
        self.notes = self._describe(m, sens)
        self._check_claim(target)
        return self


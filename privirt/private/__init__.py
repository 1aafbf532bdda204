"""Everything private: accounting, sensitivity, ledger, shuffling, measurements, statements,
the methods registry (:mod:`.methods`), Algorithm 2 (:mod:`.counts`) and the totals estimator
(:mod:`.totals`).  Imports every non-private layer (data, stats, rasch, fit, bayes) and the base.

Differentially private with respect to **replacing one person's row**; every result states
its guarantee (:class:`PrivacyStatement`, ``.privacy``) and a :class:`~privirt.Ledger` is
debited *before* any noise is drawn.

* :func:`release_counts` — noisy pairwise differential counts on a public comparison graph
  (discrete Gaussian, ρ-zCDP, or discrete Laplace, pure ε); publishable.
* :func:`private_spectral_estimate` — the spectral estimator on the noisy counts, or on
  randomized-response data (optionally shuffled), with bootstrap intervals (``intervals``);
  :func:`spectral_from_release` — the same estimate and intervals from released counts.
* :func:`noise_aware_estimate` — difficulties from released noisy counts by a likelihood that
  knows the noise (``estimator="noise_aware"``; ``"auto"`` picks it where measured better).
* ``twopl`` (subpackage) — private 2PNO discriminations and difficulties: noisy item totals and
  pair disagreement counts (:class:`~privirt.private.twopl.PairsGaussian`), a noise-aware
  one-factor fit with shrinkage and bootstrap intervals (``privirt.private_2pl_estimate``,
  ``release_2pl``, ``estimate_2pl_from_release``; ``docs/private_2pl.md``).

Layout: ``_inputs`` validates a call once (ε, δ, seed, ledger, device, the public item set
and number of persons); ``measurements`` holds one measurement object per mechanism
(:class:`CountsGaussian`, :class:`CountsLaplace`, :class:`ResponsesRR`, and
:class:`TotalsGaussian` for :mod:`.totals`), each with
``calibrate``, ``apply`` and ``statement`` and carrying its privacy map (``map``) and the
measure it is stated in (``measure``); ``counts.api`` and ``totals.api`` hold the
thin entry points (validate → choose the measurement → debit → apply → state); ``rr``,
``statement``, ``counts.graph`` and ``counts.results`` hold the rest.

Adding a mechanism: write a :class:`Measurement` subclass with a ``map`` (the privacy map)
and a ``calibrate`` class method that sets ``native`` (the map at the calibrated sensitivity,
a :mod:`mechanisms.measures` value),
``guarantee``, ``cost``, ``noise_value`` and ``notes`` from the validated target and the
public facts it needs, and whose ``apply`` draws noise from ``noise_seed(seed)`` (or another
named child stream); then write an entry point that calls :func:`validate_call`, calibrates,
debits, applies and returns a result whose ``privacy`` is ``meas.statement(...)``, and give
it one :func:`~privirt.private.methods.register` entry in :mod:`.methods`.  Prove the
sensitivity in ``docs/privacy.md`` and add the entry point to the neighbour test
(``tests/test_private_neighbours.py``).  See ``docs/privacy.md``.
"""

from __future__ import annotations

from ._inputs import PrivateCall, public_responses, validate_call
from .counts.api import COUNT_MEASUREMENTS, private_spectral_estimate, release_counts, spectral_from_release
from .counts.graph import AUTO_P0_C, auto_p0, sample_comparison_graph
from .counts.noisy_likelihood import NoiseAwareResult, noise_aware_estimate, noise_aware_se0
from .measurements import (
    CALIBRATION_MARGIN,
    CountsGaussian,
    CountsLaplace,
    Measurement,
    ResponsesRR,
    TotalsGaussian,
    calibration_epsilon,
    noise_seed,
)
from .counts.results import NoisyCounts, PrivateSpectralResult
from .statement import PrivacyStatement

__all__ = [
    "PrivacyStatement",
    "NoisyCounts",
    "PrivateSpectralResult",
    "release_counts",
    "private_spectral_estimate",
    "spectral_from_release",
    "noise_aware_estimate",
    "noise_aware_se0",
    "NoiseAwareResult",
    "sample_comparison_graph",
    "auto_p0",
    "AUTO_P0_C",
    "CALIBRATION_MARGIN",
    "Measurement",
    "CountsGaussian",
    "CountsLaplace",
    "ResponsesRR",
    "TotalsGaussian",
    "COUNT_MEASUREMENTS",
    "PrivateCall",
    "validate_call",
    "public_responses",
    "calibration_epsilon",
    "noise_seed",
]

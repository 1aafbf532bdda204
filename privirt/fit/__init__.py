"""Rasch model checks on any item estimate: item and person fit (infit/outfit mean squares),
item and test information, separation reliability and KR-20, Andersen's likelihood-ratio test.

``item_fit(X, beta)``, ``person_fit(X, beta)`` and ``reliability(X, beta)`` take the responses
and an item estimate (any object with a ``beta`` Series, such as the spectral, CML or private
results, or a Series or array of difficulties); ``item_information(beta, theta)`` and
``test_information(beta, theta)`` take an item estimate and abilities, no responses;
``andersen_test(X, split)`` takes the responses and a split of the persons, and fits CML per
group itself.  The formulas are in ``docs/fit.md``; the plots are in :mod:`privirt.plots`.
Imports only :mod:`privirt.rasch`, :mod:`privirt.stats`, :mod:`privirt.data` and the base modules.
"""

from __future__ import annotations

from .andersen import AndersenResult, andersen_test
from .information import item_information, test_information
from .meansquares import item_fit, person_fit
from .reliability import Reliability, reliability

__all__ = [
    "AndersenResult",
    "Reliability",
    "andersen_test",
    "item_fit",
    "item_information",
    "person_fit",
    "reliability",
    "test_information",
]

"""privirt: item response theory with differential privacy.

The public API is re-exported here lazily (modules load on first use, so ``import privirt``
stays fast and optional dependencies are only touched when needed).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module (relative to this package) that defines it
_EXPORTS: dict[str, str] = {
    # input
    "Responses": "responses",
    "as_responses": "responses",
    "load_dataset": "data",
    "list_datasets": "data",
    "load_movielens": "data",
    # errors
    "PrivirtError": "exceptions",
    "BudgetExceeded": "exceptions",
    "DisconnectedComparisonGraph": "exceptions",
    "EmptyResponsesWarning": "exceptions",
    # backend
    "gpu_available": "_backend",
    # simulation
    "simulate_rasch": "simulate",
    "simulate_2pno": "simulate",
    "simulate_2pl": "simulate",
    # pairwise counts and non-private estimators
    "pairwise_counts": "counts",
    "item_totals": "sufficient",
    "sufficient_statistics": "sufficient",
    "SufficientStatistics": "sufficient",
    "spectral_estimate": "spectral",
    "SpectralResult": "spectral",
    "cmle_estimate": "cmle",
    "CMLEResult": "cmle",
    "estimate_abilities": "abilities",
    # model checks (fit, information, reliability, Andersen's test)
    "item_fit": "fit",
    "person_fit": "fit",
    "item_information": "fit",
    "test_information": "fit",
    "reliability": "fit",
    "Reliability": "fit",
    "andersen_test": "fit",
    "AndersenResult": "fit",
    # privacy
    "Ledger": "ledger",
    "release_counts": "private",
    "private_spectral_estimate": "private",
    "spectral_from_release": "private",
    "noise_aware_estimate": "private",
    "PrivacyStatement": "private",
    "release_totals": "totals",
    "estimate_from_release": "totals",
    "private_totals_estimate": "totals",
    "TotalsRelease": "totals",
    "TotalsEstimate": "totals",
    "release_2pl": "private.twopl",
    "estimate_2pl_from_release": "private.twopl",
    "private_2pl_estimate": "private.twopl",
    "TwoPLRelease": "private.twopl",
    "TwoPLEstimate": "private.twopl",
    # Bayesian samplers
    "Posterior": "bayes",
    "gibbs_2pno": "bayes",
    "gibbs_2pno_replicate": "bayes",
    "mh_2pl": "bayes",
}

# submodules reachable as attributes: privirt.metrics, privirt.accounting, privirt.plots, ...
_SUBMODULES = {"bayes", "metrics", "accounting", "plots", "sensitivity", "sweeps", "fit"}
# old module names, still importable; they warn once (DeprecationWarning) and are not in __all__
_DEPRECATED_SUBMODULES = {"sweep", "report"}

__all__ = sorted(_EXPORTS) + sorted(_SUBMODULES) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
        value = getattr(module, name)
        globals()[name] = value
        return value
    if name in _SUBMODULES or name in _DEPRECATED_SUBMODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'privirt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__

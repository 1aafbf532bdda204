"""privirt: item response theory with differential privacy.

The public API is re-exported here lazily (modules load on first use, so ``import privirt``
stays fast and optional dependencies are only touched when needed).
"""

from __future__ import annotations

import importlib
import os as _os
import threading
from typing import Any

__version__ = "0.1.0"

# public name -> module (relative to this package) that defines it
_EXPORTS: dict[str, str] = {
    # input
    "Responses": "data.responses",
    "as_responses": "data.responses",
    "load_dataset": "data.datasets",
    "list_datasets": "data.datasets",
    "load_movielens": "data.datasets",
    # errors
    "PrivirtError": "exceptions",
    "BudgetExceeded": "exceptions",
    "LedgerError": "exceptions",
    "DisconnectedComparisonGraph": "exceptions",
    "EmptyResponsesWarning": "exceptions",
    # backend
    "gpu_available": "_backend",
    # simulation
    "simulate_rasch": "data.simulate",
    "simulate_2pno": "data.simulate",
    "simulate_2pl": "data.simulate",
    # pairwise counts and non-private estimators
    "pairwise_counts": "stats.api",
    "item_totals": "stats.api",
    "sufficient_statistics": "stats.api",
    "SufficientStatistics": "stats.sufficient",
    "spectral_estimate": "rasch.spectral",
    "spectral_from_counts": "rasch.spectral",
    "SpectralResult": "rasch.spectral",
    "cmle_estimate": "rasch.cmle",
    "CMLEResult": "rasch.cmle",
    "estimate_abilities": "rasch.abilities",
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
    "Ledger": "private.ledger",
    "release_counts": "private",
    "private_spectral_estimate": "private",
    "spectral_from_release": "private",
    "noise_aware_estimate": "private",
    "PrivacyStatement": "private",
    "release_totals": "private.totals.api",
    "estimate_from_release": "private.totals.api",
    "private_totals_estimate": "private.totals.api",
    "TotalsRelease": "private.totals.api",
    "TotalsEstimate": "private.totals.api",
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

# submodules reachable as attributes (name -> module): privirt.metrics, privirt.accounting, ...
_SUBMODULES: dict[str, str] = {
    "bayes": "bayes",
    "metrics": "metrics",
    "accounting": "private.accounting",
    "plots": "plots",
    "sensitivity": "private.sensitivity",
    "sweeps": "sweeps",
    "fit": "fit",
}

__all__ = sorted(_EXPORTS) + sorted(_SUBMODULES) + ["__version__"]


#: Serialises the lazy imports.  Added when privirt.private held an import cycle: two threads
#: importing its modules at once tripped importlib's deadlock detection, which handed one of them
#: a partly initialised module (ImportError; importlib's per-module locks do not cover a cycle).
#: There is no cycle now (``tests/test_architecture.py`` forbids them); the lock stays as a guard.
_IMPORT_LOCK = threading.RLock()


def _fresh_import_lock() -> None:
    global _IMPORT_LOCK
    _IMPORT_LOCK = threading.RLock()


if hasattr(_os, "register_at_fork"):  # the child gets a fresh lock: the parent's may be held by a
    # thread that does not exist there.  (Not acquired before the fork: a before-hook that waits
    # lets the importing thread register other modules' fork hooks mid-fork.)
    _os.register_at_fork(after_in_child=_fresh_import_lock)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        with _IMPORT_LOCK:
            module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
            value = getattr(module, name)
            globals()[name] = value
        return value
    if name in _SUBMODULES:
        with _IMPORT_LOCK:
            module = importlib.import_module(f".{_SUBMODULES[name]}", __name__)
            globals()[name] = module
        return module
    raise AttributeError(f"module 'privirt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__

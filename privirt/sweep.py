"""Deprecated: the sweeps moved to :mod:`privirt.sweeps` (this module re-exports its names)."""

from __future__ import annotations

import warnings

from .data.datasets import binarize_by_user_mean, complete_low_rank, movielens_ratings
from .sweeps import registry as _registry
from .sweeps.config import (
    DEFAULT_DELTA,
    DEFAULT_EPSILONS,
    DEFAULT_TRIALS,
    DatasetSpec,
    SweepConfig,
    load_config,
    parse_config,
)
from .sweeps.grid import Cell, cell_seed, data_seed, expand_grid
from .sweeps.results import (
    CONFIG_COPY,
    MANIFEST_FILE,
    PRIVACY_NOTE,
    RESULT_COLUMNS,
    RESULTS_FILE,
    read_results,
)
from .sweeps.runner import FolderLock as _FolderLock
from .sweeps.runner import SweepStats, run_sweep

warnings.warn("privirt.sweep is deprecated; use privirt.sweeps (and privirt.data for the "
              "MovieLens helpers)", DeprecationWarning, stacklevel=2)

#: mechanism name -> registry entry (:class:`privirt.sweeps.registry.Estimator`)
MECHANISMS = _registry.REGISTRY
NONPRIVATE_MECHANISMS = _registry.nonprivate_names()

__all__ = [
    "SweepConfig",
    "DatasetSpec",
    "Cell",
    "SweepStats",
    "MECHANISMS",
    "NONPRIVATE_MECHANISMS",
    "RESULT_COLUMNS",
    "DEFAULT_EPSILONS",
    "load_config",
    "parse_config",
    "expand_grid",
    "run_sweep",
    "read_results",
    "movielens_ratings",
    "complete_low_rank",
    "binarize_by_user_mean",
]

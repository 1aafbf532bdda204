"""The cells of a sweep and their seeds.

:func:`expand_grid` turns a :class:`~privirt.sweeps.config.SweepConfig` into cells, one per
(data set, mechanism, ε, trial), each with a key that identifies its result in the results
file.  :func:`cell_seed` (noise) and :func:`data_seed` (a trial's data) derive every seed
from the configuration's ``seed`` and the cell's coordinates; they are fixed for good, since
stored results and ``resume`` rely on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from .._seeds import _key_of
from . import registry
from .config import DatasetSpec, SweepConfig

__all__ = ["Cell", "expand_grid", "cell_seed", "data_seed", "mechanism_options"]


@dataclass(frozen=True)
class Cell:
    """One unit of work: a data set, a mechanism, a budget ε (None: non-private), a trial."""

    dataset: str
    mechanism: str
    epsilon: float | None
    trial: int
    key: str


def eps_text(eps: float | None) -> str:
    """ε as written in cell keys (``"nonprivate"`` for the baselines)."""
    return "nonprivate" if eps is None else f"{eps:.6g}"


def mechanism_options(config: SweepConfig, mechanism: str) -> dict[str, Any]:
    """The ``[mechanism_options.NAME]`` table of ``mechanism`` (empty when absent)."""
    return dict(config.mechanism_options.get(mechanism, {}))


def is_real(spec: DatasetSpec) -> bool:
    """Real data (no simulated truth): the non-private spectral estimate is the reference."""
    return spec.source != "synthetic"


def expand_grid(config: SweepConfig) -> list[Cell]:
    """All cells of a sweep, in a stable order (data set, trial, mechanism, ε).

    Non-private mechanisms get one cell per trial (``epsilon=None``).  On real data the
    non-private ``spectral`` estimate is the reference itself, so it gets no cells.
    """
    cells: list[Cell] = []
    for spec in config.datasets:
        for trial in range(spec.trials):
            for mech in spec.mechanisms:
                if mech == "spectral" and is_real(spec):
                    continue
                fp = spec.fingerprint(config.seed, config.delta, mechanism_options(config, mech))
                eps_list: Iterable[float | None] = (
                    spec.epsilons if registry.get(mech).private else [None]
                )
                for eps in eps_list:
                    key = f"{spec.name}|{mech}|{eps_text(eps)}|{trial}|{fp}"
                    cells.append(Cell(spec.name, mech, eps, trial, key))
    return cells


def _seed_of(*words: int) -> int:
    # The seed is the first 64-bit word of a SeedSequence whose entropy lists the cell's
    # coordinates (labels hashed to 32 bits as privirt._seeds does for named streams).
    ss = np.random.SeedSequence(list(words))
    return int(ss.generate_state(1, dtype=np.uint64)[0])


def cell_seed(root: int, dataset: str, mechanism: str, epsilon: float | None, trial: int) -> int:
    """Deterministic noise seed of a cell (a 64-bit int)."""
    return _seed_of(root, _key_of(dataset), _key_of(mechanism), _key_of(eps_text(epsilon)), trial)


def data_seed(root: int, dataset: str, trial: int) -> int:
    """Deterministic seed of a trial's data (shared by every mechanism and ε: paired runs)."""
    return _seed_of(root, _key_of(dataset), _key_of("data"), trial)

"""Validation of a private call, in one place: ε and δ once, the seed, the ledger, the device,
the public item set and the public number of persons."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from mechanisms.measures import ApproxDP

from .._backend import resolve_device
from .._checks import check_choice, check_note, check_positive_int
from .._constants import DEFAULT_DELTA
from .._seeds import seed_sequence
from .accounting import check_delta, check_target_epsilon
from ..data._labels import match_items
from ..data.responses import MISSING, Responses, ResponsesLike, private_responses
from ..stats.sufficient import is_dask_source
from .counts.graph import check_p0

__all__ = ["PrivateCall", "validate_call", "public_responses", "DEFAULT_DELTA"]



@dataclass(frozen=True)
class PrivateCall:
    """The validated, public frame of one private call.

    ``resp`` has exactly the public items (in order) and exactly the public number of persons
    (persons absent from the data are all-missing rows); ``target`` is the (ε, δ) asked for.
    ``data_persons`` is the number of persons in the data themselves, before those rows were
    added (None where it is not counted: the Dask engine).
    """

    resp: Responses
    target: ApproxDP
    seed: np.random.SeedSequence | None
    ledger: Any
    device: str
    p0: float
    note: str
    data_persons: int | None = None

    @property
    def private(self) -> bool:
        """Whether the noise is unseeded (the guarantee holds)."""
        return self.seed is None

    @property
    def n_persons(self) -> int:
        return self.resp.n_persons


def validate_call(
    X: ResponsesLike,
    *,
    epsilon: Any,
    delta: Any,
    seed: Any,
    ledger: Any,
    device: Any,
    items: Sequence[Any] | None,
    n_persons: Any,
    p0: Any,
    note: Any = "",
    engine: Any = "local",
    client: Any = None,
    spends_delta: bool = False,
) -> PrivateCall:
    """Check every argument shared by the private entry points, before anything is computed,
    debited or drawn.

    ``delta=None`` is, against a ledger, the ledger's :meth:`~privirt.Ledger.default_delta`
    (as the CLI): the ledger's δ, or for a call that spends δ itself (``spends_delta``:
    shuffled randomized response) a share of it — never all of it; without a ledger
    :data:`DEFAULT_DELTA`."""
    eps = check_target_epsilon(epsilon)
    note = check_note(note)
    check_choice("device", device, ("auto", "cpu", "gpu"), what="one of ('auto', 'cpu', 'gpu')")
    check_choice("engine", engine, ("local", "dask"), what="'local' or 'dask' (client= with 'dask')")
    if delta is not None:
        check_delta(delta)
    ss = seed_sequence(seed)
    if ss is not None and ledger is not None:
        raise ValueError(
            "seed= makes the noise reproducible, so the result is NOT private, and a ledger "
            "records private releases only; drop seed= to spend from the ledger, or drop ledger= "
            "for a reproducible non-private run (nothing was spent)"
        )
    if device == "gpu" and (engine == "dask" or type(X).__name__ == "DaskSource"):
        raise ValueError("engine='dask' counts on the workers' CPUs; got device='gpu': pass "
                         "device='auto' or 'cpu' (or engine='local' to count on the GPU)")
    resolved_device = resolve_device(device)
    ledger = _resolve_ledger(ledger)
    if delta is None:
        delta = ledger.default_delta(spends_delta) if ledger is not None else DEFAULT_DELTA
    dlt = check_delta(delta)
    if engine == "dask" or type(X).__name__ == "DaskSource":  # sums on a Dask cluster
        from ..stats.dask_engine import as_public_source

        resp = as_public_source(X, items=items, n_persons=n_persons, client=client)
        data_persons = None
    elif engine != "local" or client is not None:
        raise ValueError(f"engine must be 'local' or 'dask' (client= with 'dask'), got {engine!r}")
    elif is_dask_source(X):  # read in memory it would lose its column labels
        raise ValueError("a dask collection is counted with engine='dask'")
    else:
        resp, data_persons = _public_responses(X, items, n_persons)
    p = check_p0(p0, resp.n_items)
    return PrivateCall(resp=resp, target=ApproxDP(eps, dlt), seed=ss, ledger=ledger,
                       device=resolved_device, p0=p, note=note, data_persons=data_persons)


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


def public_responses(X: ResponsesLike, items: Sequence[Any] | None = None,
                     n_persons: Any = None) -> Responses:
    """Validated responses whose item set and number of persons do not depend on the data.

    Never drops items or persons by a data-dependent rule.  With ``items`` (the public item
    set) the columns are exactly those, in that order: an item nobody answered becomes an
    all-missing column, and an item of the data that is not in the list is an error.  With
    ``n_persons`` (the public number of persons) the rows are the data's persons followed by
    all-missing rows up to that number (a table without rows: all of them); more persons than
    that is an error.  A long table's items and persons are read from its rows, so both are
    required for it.

    Labels are matched **by text**: a long table's person and item labels are read as text
    (:func:`privirt.data.responses.private_responses`) and the public item ``5`` matches the data's ``5`` or
    ``"5"``.  Every item label of the result is the public one, as given (its type too), so
    no output label depends on how the data's column was typed.
    """
    return _public_responses(X, items, n_persons)[0]


def _public_responses(X: ResponsesLike, items: Sequence[Any] | None,
                      n_persons: Any) -> tuple[Responses, int]:
    """:func:`public_responses` and the number of persons in the data before the all-missing
    rows that ``n_persons`` adds."""
    resp = private_responses(X)
    # a set, a string, a missing or unhashable label, one listed twice, a data column outside
    # the list: refused (the Dask engine's rule too); 5 and "5" are one: matched as text
    public, pos = match_items(items, resp.items, public=True)
    if items is None and resp.items_from_data:
        raise ValueError(
            "the item set of a long (person, item, response) table is read from its rows, so "
            "it depends on who is in the data (an item answered by one person comes and goes "
            "with that person); pass the public item list as items=[...] (CLI: --items)"
        )
    if n_persons is None and resp.items_from_data:
        raise ValueError(
            "the number of persons of a long (person, item, response) table is read from its "
            "rows, so it depends on the data (a person with no answers has no rows); pass the "
            "public number of persons as n_persons=N (CLI: --n-persons)"
        )
    dropped = [what for what, flag, given in (("persons", resp.persons_dropped, n_persons),
                                              ("items", resp.items_dropped, items))
               if flag and given is None]
    if dropped:
        raise ValueError(
            f"these responses had {' and '.join(dropped)} with no response dropped (as_responses' "
            "default empty='drop'), so their "
            + " and ".join({"persons": "number of persons", "items": "item set"}[d] for d in dropped)
            + (" depend" if len(dropped) > 1 else " depends") + " on the data; pass the raw data, build them with empty='keep', or pass "
            + " and ".join({"persons": "n_persons=N", "items": "items=[...]"}[d] for d in dropped)
        )
    if items is not None:
        codes = np.full((resp.n_persons, len(public)), MISSING, dtype=np.int8)
        present = pos >= 0
        codes[:, present] = resp.codes[:, pos[present]]
        resp = Responses(codes, resp.persons, public)
    data_persons = resp.n_persons
    if n_persons is not None:
        n = check_positive_int("n_persons", n_persons)
        if resp.n_persons > n:
            raise ValueError(
                f"the data have more persons than the public n_persons={n}; pass the true "
                "public number of persons (CLI: --n-persons)"
            )
        if resp.n_persons < n:  # persons absent from the data: all-missing rows
            try:
                codes = np.full((n, resp.n_items), MISSING, dtype=np.int8)
            except (MemoryError, ValueError):  # (numpy: "Maximum allowed dimension exceeded")
                raise ValueError(
                    f"n_persons={n} is too large: its {n} × {resp.n_items} responses (one byte "
                    "each) do not fit in memory; pass the true public number of persons "
                    "(CLI: --n-persons)"
                ) from None
            codes[: resp.n_persons] = resp.codes
            resp = Responses(codes, pd.RangeIndex(n), resp.items)
    if resp.n_items < 2:
        raise ValueError(f"private estimation needs at least 2 items, got {resp.n_items}")
    if resp.n_persons < 1:
        raise ValueError("the responses have no persons")
    return resp, data_persons


def refuse_absent_persons(n_persons: int, data_persons: int | None) -> None:
    """Refuse, under ``missing="none"``, persons that the public ``n_persons`` counts but the
    data lack (all-missing rows) in words that say so, as the command line's ``--n-persons``
    refusal: the generic "the data have missing cells" was false for complete data."""
    if data_persons is not None and data_persons < n_persons:
        raise ValueError(f"n_persons={n_persons} counts persons absent from the data; they are "
                         'all-missing rows, but missing="none" declares complete data: if they are '
                         'missing completely at random declare missing="mcar" (CLI: --missing mcar), '
                         "or, if that number is wrong, pass the true public number of persons (nothing was spent)")

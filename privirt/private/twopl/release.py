"""The private 2PNO release: noisy item totals and pair disagreement counts (``docs/private_2pl.md``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ...exceptions import warn_if_noise_dominates
from ...data.responses import ResponsesLike
from ..._checks import brief
from ..._constants import MISSING_DOMAINS
from .._inputs import refuse_absent_persons, validate_call
from ..spends import reports_spends
from ..statement import PrivacyStatement
from ._pairs import _numba_kernels
from .mcar import McarPairsGaussian, mcar_statistics
from .measurement import TOTALS_SHARE, PairsGaussian
from .statistics import pair_index, pair_statistics

__all__ = ["TwoPLRelease", "release_2pl", "check_release", "MISSING_DOMAINS"]

_COMPLETE_ONLY = ('the data have missing cells but missing="none" declares complete data; if cells are '
                  'missing completely at random declare missing="mcar" (CLI: --missing mcar), or drop the '
                  "incomplete rows by a rule that does not look at the data (nothing was spent)")


@dataclass(frozen=True, eq=False)
class TwoPLRelease:
    """Noisy item totals and pair disagreement counts: the output of :func:`release_2pl` (publishable).

    Attributes
    ----------
    totals : pandas.Series of int64
        Noisy number of correct answers per item (indexed by item).
    pairs : pandas.Series of int64
        Noisy D_ij = #persons with exactly one of items i and j correct, i < j (two-level index
        ``item_i``, ``item_j``, in the order of ``numpy.triu_indices(m, 1)``).
    n_persons : int
        The public number of persons.
    sigma_totals, sigma_pairs : float
        Discrete Gaussian scales of the two parts.
    totals_share : float
        Share of ρ spent on the totals.
    privacy : PrivacyStatement
    missing : str
        The declared input domain (``"none"``: complete data; ``"mcar"``: cells missing
        completely at random, ``pairs`` then counts disagreements among the persons who
        answered both items).
    answered, co_answered : pandas.Series of int64 or None
        ``missing="mcar"`` only: noisy answered counts per item and noisy counts of persons who
        answered both items (indexed as ``totals`` and ``pairs``).
    sigma_answered, sigma_co_answered : float
        Their discrete Gaussian scales (NaN for complete data).
    """

    totals: pd.Series
    pairs: pd.Series
    n_persons: int
    sigma_totals: float
    sigma_pairs: float
    totals_share: float
    privacy: PrivacyStatement
    missing: str = "none"
    answered: pd.Series | None = None
    co_answered: pd.Series | None = None
    sigma_answered: float = math.nan
    sigma_co_answered: float = math.nan

    @property
    def items(self) -> pd.Index:
        return self.totals.index

    def to_dict(self) -> dict:
        """A JSON-friendly dict of everything released."""
        return {
            "items": [str(i) for i in self.items],
            "totals": [int(v) for v in self.totals],
            "pairs": [int(v) for v in self.pairs],
            "n_persons": self.n_persons,
            "sigma_totals": self.sigma_totals,
            "sigma_pairs": self.sigma_pairs,
            "totals_share": self.totals_share,
            "missing": self.missing,
            **({} if self.answered is None else {
                "answered": [int(v) for v in self.answered],
                "co_answered": [int(v) for v in self.co_answered],
                "sigma_answered": self.sigma_answered,
                "sigma_co_answered": self.sigma_co_answered}),
            "privacy": self.privacy.to_dict(),
        }


def _check_missing(missing: Any) -> str:
    if not isinstance(missing, str) or missing not in MISSING_DOMAINS:
        raise ValueError('missing must be "none" (complete data) or "mcar" (cells missing completely at '
                         f"random), got {brief(missing)} (nothing was spent)")
    return missing


def _check_part(values: Any, name: str, index: pd.Index, m: int, order: str) -> None:
    """One released part: a Series of finite numbers indexed exactly by ``index`` (one line if not)."""
    if not isinstance(values, pd.Series):
        raise ValueError(f"the release's {name} must be a pandas Series, got {type(values).__name__}")
    if len(values) != len(index):
        raise ValueError(f"the release's {name} has {len(values)} entries, a release of {m} items has {len(index)}")
    if not values.index.equals(index):
        k = next(k for k in range(len(index)) if values.index[k] != index[k])
        raise ValueError(f"the release's {name} must be indexed by {order}: entry {k} is "
                         f"{values.index[k]!r}, expected {index[k]!r}")
    try:
        v = values.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"the release's {name} must hold numbers") from None
    if not np.isfinite(v).all():
        raise ValueError(f"the release's {name} must be finite")


def _check_scale(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value) or value <= 0:
        raise ValueError(f"the release's {name} must be a finite number > 0, got {value!r}")


def check_release(release: Any) -> TwoPLRelease:
    """Check that a :class:`TwoPLRelease` is well formed before it is estimated.

    ``totals.index`` names the items (at least 2, unique); ``pairs`` (and ``co_answered``)
    must be indexed by their pairs ``(item_i, item_j)`` in the order of
    ``numpy.triu_indices(m, 1)``, ``answered`` by the items in the same order; the counts
    finite; ``n_persons`` an integer ≥ 1; the noise scales finite and > 0; ``missing`` one of
    :data:`MISSING_DOMAINS` with its fields present (``answered``, ``co_answered`` and their
    scales exactly for ``"mcar"``); ``privacy`` a :class:`PrivacyStatement`.  A release whose
    parts are in another order is refused, not realigned: its parts must be as
    :func:`release_2pl` made them.

    Parameters
    ----------
    release : TwoPLRelease

    Returns
    -------
    TwoPLRelease
        ``release`` itself.

    Raises
    ------
    ValueError
        In one line, naming the first thing that does not hold.
    """
    if not isinstance(release, TwoPLRelease):
        raise ValueError(f"release must be a TwoPLRelease (from release_2pl), got {type(release).__name__}")
    if not isinstance(release.totals, pd.Series):
        raise ValueError(f"the release's totals must be a pandas Series, got {type(release.totals).__name__}")
    items = release.totals.index
    m = len(items)
    if m < 2:
        raise ValueError(f"the release's totals hold {m} item(s); a 2PL release has at least 2")
    if items.has_duplicates:
        raise ValueError(f"the release's items (totals.index) must be unique; repeated: "
                         f"{list(items[items.duplicated()].unique()[:5])}")
    iu = pair_index(m)
    pairs = pd.MultiIndex.from_arrays([items[iu[0]], items[iu[1]]], names=["item_i", "item_j"])
    in_order = "the pairs (item_i, item_j), i < j, of the items of totals in their order"
    _check_part(release.totals, "totals", items, m, "the items")
    _check_part(release.pairs, "pairs", pairs, m, in_order)
    n = release.n_persons
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"the release's n_persons must be an integer ≥ 1, got {n!r}")
    _check_scale(release.sigma_totals, "sigma_totals")
    _check_scale(release.sigma_pairs, "sigma_pairs")
    missing = release.missing
    if not isinstance(missing, str) or missing not in MISSING_DOMAINS:
        raise ValueError(f"the release's missing must be one of {MISSING_DOMAINS}, got {missing!r}")
    if missing == "mcar":
        for name in ("answered", "co_answered"):
            if getattr(release, name) is None:
                raise ValueError(f'the release says missing="mcar" but has no {name} counts; '
                                 "pass the TwoPLRelease as release_2pl(missing=\"mcar\") made it")
        _check_part(release.answered, "answered", items, m, "the items of totals in their order")
        _check_part(release.co_answered, "co_answered", pairs, m, in_order)
        _check_scale(release.sigma_answered, "sigma_answered")
        _check_scale(release.sigma_co_answered, "sigma_co_answered")
    elif release.answered is not None or release.co_answered is not None:
        raise ValueError('the release has answered counts but says missing="none" (complete data); '
                         'a release with answered counts is estimated as missing="mcar"')
    if not isinstance(release.privacy, PrivacyStatement):
        raise ValueError(f"the release's privacy must be a PrivacyStatement (its guarantee), got "
                         f"{type(release.privacy).__name__}; pass the TwoPLRelease as release_2pl made it")
    return release


def check_local_engine(X: Any, engine: Any, client: Any) -> None:
    """Refuse the Dask engine (or a Dask source) for the 2PL in one line, before anything else."""
    if (isinstance(engine, str) and engine == "dask") or type(X).__name__ == "DaskSource":
        raise ValueError("the private 2PL runs on data in memory (engine='local'): the Dask engine sums "
                         "the Rasch methods' statistics only; load the responses into memory "
                         "(privirt.as_responses) or use private_totals_estimate(engine='dask') for the "
                         "difficulties (nothing was spent)")
    if not isinstance(engine, str) or engine != "local" or client is not None:
        raise ValueError(f"engine must be 'local' for the private 2PL (client= only with the Dask "
                         f"engine), got engine={brief(engine)}")


@reports_spends
def release_2pl(
    X: ResponsesLike,
    *,
    epsilon: float,
    delta: float | None = None,
    ledger: Any = None,
    seed: Any = None,
    items: Sequence[Any] | None = None,
    note: str = "",
    n_persons: int | None = None,
    missing: str = "none",
    engine: str = "local",
    client: Any = None,
) -> TwoPLRelease:
    """Release noisy item totals and pair disagreement counts, (ε, δ)-DP.

    Parameters
    ----------
    X : ResponsesLike
        Complete persons × items 0/1 responses (one row per person).
    epsilon, delta : float
        Target (ε, δ), ε > 0 finite, δ ∈ (0, 1).  ``delta=None`` (default) is the ledger's δ
        (:meth:`~privirt.Ledger.default_delta`) when ``ledger`` is given, else 1e-4.
    ledger : Ledger or path, optional
        Debited (one transaction) before any noise is drawn.
    seed : int or numpy.random.SeedSequence, optional
        Reproducible noise **without privacy** (``privacy.private`` is False).
    items : sequence, optional
        The public item list (required for long input).
    note : str
        Stored with the ledger entry.
    n_persons : int, optional
        The public number of persons (required for long input).
    missing : {"none", "mcar"}
        The declared input domain: ``"none"`` complete data (missing cells are refused);
        ``"mcar"`` cells missing completely at random (also for data that happen to be
        complete): answered and co-answered counts are released too (``docs/private_2pl.md`` §6).
    engine, client
        ``"local"`` only (``client`` None): the 2PL's statistics are computed in memory; the
        Dask engine sums the Rasch methods' statistics (a one-line refusal, nothing spent).

    Returns
    -------
    TwoPLRelease
    """
    return _release_2pl(X, epsilon=epsilon, delta=delta, ledger=ledger, seed=seed, items=items, note=note,
                        n_persons=n_persons, missing=missing, engine=engine, client=client, fit_follows=False)


def _release_2pl(X: ResponsesLike, *, epsilon: float, delta: float | None, ledger: Any, seed: Any,
                 items: Sequence[Any] | None, note: str, n_persons: int | None, missing: str, engine: str,
                 client: Any, fit_follows: bool) -> TwoPLRelease:
    """:func:`release_2pl`; with ``fit_follows`` (:func:`private_2pl_estimate`) an environment
    numba refuses is refused before the debit too, as the fit that follows imports numba."""
    missing = _check_missing(missing)
    check_local_engine(X, engine, client)
    call = validate_call(X, epsilon=epsilon, delta=delta, seed=seed, ledger=ledger, device="cpu",
                         items=items, n_persons=n_persons, p0=1.0, note=note)
    ss, ledger, resp = call.seed, call.ledger, call.resp
    if fit_follows:  # the fit imports numba from NUMBA_FROM_PAIRS pairs: an environment numba
        # refuses (NUMBA_NUM_THREADS=0) is a one-line error before the debit, not after it
        _numba_kernels(resp.n_items * (resp.n_items - 1) // 2)
    if missing == "mcar":
        return _release_mcar(call, note)
    if resp.has_missing:
        _refuse_missing(call)
    n, m = resp.shape
    meas = PairsGaussian.calibrate(call.target, n_items=m, totals_share=TOTALS_SHARE)
    warn_if_noise_dominates(meas.sigmas[1], n, "pair disagreement counts")  # public n and σ only
    totals, pairs = pair_statistics(resp.codes)
    # committed before any noise exists
    spend_id = None if ledger is None else ledger.spend(meas.cost, mechanism=meas.ledger_label, note=str(note),
                                                        asked=call.target)
    noisy = meas.apply([totals, pairs], seed=ss)
    del totals, pairs
    statement = meas.statement(private=call.private, n_persons=n, spend_id=spend_id)
    iu = pair_index(m)
    index = pd.MultiIndex.from_arrays([resp.items[iu[0]], resp.items[iu[1]]], names=["item_i", "item_j"])
    return TwoPLRelease(
        totals=pd.Series(noisy[0], index=resp.items.copy(), name="total"),
        pairs=pd.Series(noisy[1], index=index, name="disagree"),
        n_persons=int(n), sigma_totals=float(meas.sigmas[0]), sigma_pairs=float(meas.sigmas[1]),
        totals_share=meas.totals_share, privacy=statement, missing=missing,
    )


def _refuse_missing(call: Any) -> None:
    """Refuse, under ``missing="none"``, data whose public table has missing cells: first persons
    that ``n_persons`` counts but the data lack (as the CLI's ``--n-persons`` refusal), then
    missing cells of the data themselves."""
    refuse_absent_persons(call.n_persons, call.data_persons)
    raise ValueError(_COMPLETE_ONLY)


def _release_mcar(call: Any, note: str) -> TwoPLRelease:
    """The declared-MCAR release (``docs/private_2pl.md`` §6): (s, a, D, C), four parts."""
    ss, ledger, resp = call.seed, call.ledger, call.resp
    n, m = resp.shape
    meas = McarPairsGaussian.calibrate(call.target, n_items=m, totals_share=TOTALS_SHARE)
    warn_if_noise_dominates(meas.sigmas[2], n, "pair disagreement counts")  # public n and σ only
    stats = list(mcar_statistics(resp.codes))
    # committed before any noise exists
    spend_id = None if ledger is None else ledger.spend(meas.cost, mechanism=meas.ledger_label, note=str(note),
                                                        asked=call.target)
    noisy = meas.apply(stats, seed=ss)
    del stats
    statement = meas.statement(private=call.private, n_persons=n, spend_id=spend_id)
    iu = pair_index(m)
    index = pd.MultiIndex.from_arrays([resp.items[iu[0]], resp.items[iu[1]]], names=["item_i", "item_j"])
    sg = meas.sigmas
    return TwoPLRelease(
        totals=pd.Series(noisy[0], index=resp.items.copy(), name="total"),
        pairs=pd.Series(noisy[2], index=index, name="disagree"),
        n_persons=int(n), sigma_totals=float(sg[0]), sigma_pairs=float(sg[2]),
        totals_share=meas.totals_share, privacy=statement, missing="mcar",
        answered=pd.Series(noisy[1], index=resp.items.copy(), name="answered"),
        co_answered=pd.Series(noisy[3], index=index.copy(), name="co_answered"),
        sigma_answered=float(sg[1]), sigma_co_answered=float(sg[3]),
    )

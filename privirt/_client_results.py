"""Rebuilding the library's result objects from the JSON answers of ``privirt serve``:
:func:`result_from_json`, used by :mod:`privirt.client` (which re-exports it).

The objects are the library's own (:class:`~privirt.TotalsEstimate`,
:class:`~privirt.private.PrivateSpectralResult`, :class:`~privirt.TotalsRelease`,
:class:`~privirt.private.NoisyCounts`), each with its ``.privacy`` statement.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["result_from_json"]


def _statement(p: dict):
    from mechanisms.measures import ZCDP, ApproxDP, PureDP

    from .private.accounting import PrivacyCost
    from .private import PrivacyStatement
    from .private.statement import NoisePart
    from .private.sensitivity import Sensitivity

    guarantee = ApproxDP(p["epsilon"], p["delta"]) if p["delta"] > 0 else PureDP(p["epsilon"])
    nat = p["native"]
    if nat["measure"] == "ZCDP":
        native = ZCDP(nat["rho"])
    elif nat["measure"] == "PureDP":
        native = PureDP(nat["epsilon"])
    else:
        native = ApproxDP(nat["epsilon"], nat["delta"])
    sens = None
    if p.get("sensitivity_l1") is not None:
        sens = Sensitivity(p["sensitivity_l1"], p["sensitivity_l2"], p["sensitivity_bound"], p["relation"],
                           p["sensitivity_n_released"])
    c = p["cost"]
    return PrivacyStatement(
        mechanism=p["mechanism"], relation=p["relation"], guarantee=guarantee, native=native, sensitivity=sens,
        noise_parameter=p["noise_parameter"], noise_value=p["noise_value"], private=p["private"], p0=p["p0"],
        n_edges=p["n_edges"], shuffle=p["shuffle"], cost=PrivacyCost(c["rho"], c["epsilon"], c["delta"]),
        n_persons=p["n_persons"], ledger_spend_id=p["ledger_spend_id"], notes=tuple(p["notes"]),
        domain=p.get("domain"), parts=tuple(NoisePart(**q) for q in p.get("parts") or ()))


#: the service's strings for non-finite floats (``privirt._results.json_floats``); ``null`` (a
#: result stored by an older service, where it stood for any of them) is read as NaN
_NONFINITE = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}


def _f(values) -> np.ndarray:
    out = [np.nan if v is None else _NONFINITE[v] if isinstance(v, str) else v for v in values]
    return np.array(out, dtype=float)


_INT64_MAX = 2**63 - 1


def _integers(values, name: str) -> np.ndarray:
    """A JSON list of counts as int64, refusing what a cast would change (1.5, null, text)."""
    if not isinstance(values, list):
        raise ValueError(f"the service's answer has {name} {type(values).__name__}, not a list of integers; "
                         "fetch the result again")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v) \
                or abs(v) > _INT64_MAX:
            raise ValueError(f"the service's answer has {name} entry {v!r}, not an integer of 64 bits; the "
                             "release holds such counts: fetch the result again")
    return np.asarray(values, dtype=np.int64)


def _totals_release(r: dict, privacy):
    from .private.totals.api import TotalsRelease, check_release

    items = pd.Index(r["items"])
    totals = _integers(r["totals"], "totals")
    if len(totals) != len(items):
        raise ValueError(f"the service's answer has {len(totals)} totals for {len(items)} items; "
                         "fetch the result again")
    edges = _integers(r["edges"], "edges")
    labels = [f"{edges[b]}-{edges[b + 1] - 1}" for b in range(len(edges) - 1)]
    k_edges = None if r.get("k_edges") is None else _integers(r["k_edges"], "k_edges")
    if k_edges is not None and len(k_edges) > 2:
        hindex = pd.MultiIndex.from_product(
            [[f"{k_edges[c]}-{k_edges[c + 1] - 1}" for c in range(len(k_edges) - 1)], labels],
            names=["answered", "score"])
    else:
        hindex = pd.Index(labels, name="score")
    hist = _integers(r["histogram"], "histogram")  # a count that disagrees with the bins: check_release says so
    answered = None if r.get("answered") is None else _integers(r["answered"], "answered")
    if answered is not None and len(answered) != len(items):
        raise ValueError(f"the service's answer has {len(answered)} answered counts for {len(items)} items; "
                         "fetch the result again")
    sig_a = r.get("sigma_answered")
    return check_release(TotalsRelease(
        totals=pd.Series(totals, index=items, name="total"),
        histogram=pd.Series(hist, index=hindex if len(hindex) == len(hist) else None, name="persons"),
        edges=edges, n_persons=r["n_persons"], sigma_totals=r["sigma_totals"],
        sigma_histogram=r["sigma_histogram"], split=r["split"], privacy=privacy,
        missing=r["missing"], answered=None if answered is None else pd.Series(answered, index=items.copy(),
                                                                                name="answered"),
        sigma_answered=float("nan") if sig_a is None else sig_a, k_edges=k_edges))


def _noisy_counts(items: pd.Index, c: dict, privacy):
    from .private import NoisyCounts
    from .private.counts.results import check_noisy_counts

    Y = pd.DataFrame(np.asarray(c["Y"], dtype=np.int64), index=items.copy(), columns=items.copy())
    G = pd.DataFrame(np.asarray(c["graph"], dtype=bool), index=items.copy(), columns=items.copy())
    return check_noisy_counts(NoisyCounts(Y=Y, graph=G, privacy=privacy))


def result_from_json(body: dict):
    """The library result object of a service answer (``body["result"]["type"]`` says which).

    The object also gets ``request_id`` in its ``info`` (estimates) or as an attribute-free
    field of the answer; the answer's ``privacy_text`` equals ``str(obj.privacy)``.  A body of
    another result type, or one lacking a field of its type, is refused in one line.
    """
    r = body.get("result") if isinstance(body, dict) else None
    kind = r.get("type") if isinstance(r, dict) else None
    if kind not in _KINDS:
        raise ValueError(f"unknown result type {kind!r} (a newer service?); update privirt or read the JSON as it is")
    try:
        return _result(body, r, kind)
    except KeyError as e:
        raise ValueError(f"the service's answer lacks the field {e.args[0]!r} of a {kind}; fetch the result "
                         "again") from None


_KINDS = ("TotalsRelease", "NoisyCounts", "TotalsEstimate", "PrivateSpectralResult")


def _result(body: dict, r: dict, kind: str):
    """:func:`result_from_json` once the kind is known (a missing field raises KeyError)."""
    from .private import PrivateSpectralResult
    from .private.totals.api import TotalsEstimate

    privacy = _statement(body["privacy"])
    items = pd.Index(r["items"])
    if kind == "TotalsRelease":
        return _totals_release(r, privacy)
    if kind == "NoisyCounts":
        return _noisy_counts(items, r, privacy)
    info = {**r.get("info", {}), "request_id": body["request_id"]}
    se = pd.Series(_f(r["se"]), index=items.copy(), name="se")
    ci = pd.DataFrame({"lo": _f(r["lo"]), "hi": _f(r["hi"])}, index=items.copy())
    beta = pd.Series(_f(r["beta"]), index=items.copy(), name="beta")
    if kind == "TotalsEstimate":
        release = _totals_release(r["release"], privacy)
        return TotalsEstimate(beta=beta, se=se, ci=ci,
                              beta_unshrunk=pd.Series(_f(r["beta_unshrunk"]), index=items.copy(),
                                                      name="beta_unshrunk"),
                              privacy=privacy, release=release, info=info)
    if kind == "PrivateSpectralResult":
        counts = _noisy_counts(items, r["counts"], privacy)
        return PrivateSpectralResult(beta=beta, privacy=privacy, spectral=None, graph=counts.graph,
                                     counts=counts, se=se, ci=ci, info=info)

"""What the service does, without the web framework: register a data set (curator side) and
run a private request (analyst side) against a :class:`~privirt.serve.store.Store`.

Request path (``run_request``): public parameters → the cost, calibrated by the library's own
measurement classes from the public n, m and (ε, δ) → an advisory budget check → the library's
release or estimate is called with a ledger object whose ``spend`` is
:meth:`Store.debit` (allowance **and** data set, one transaction, committed) — the library
calls it after computing the exact statistics and **before** drawing any noise, and states the
very cost it debits → the result is stored → only then returned.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
from typing import Any

import numpy as np

from .._results import json_floats
from ..private.ledger import Ledger
from ._budget import MAX_DELTA, MIN_DELTA, check_delta_limit
from ._backends import NotDebited, unavailable
from ._limits import IDEMPOTENCY_KEY, OverQuota
from .store import DuplicateRequest, NoAccess, OverBudget, StateError, Store, new_request_id

_log = logging.getLogger("privirt.serve")

__all__ = ["register_dataset", "run_request", "RequestFailed", "DATASET_NAME", "check_dataset_name",
           "domain_text", "IDEMPOTENCY_KEY", "check_idempotency_key"]

#: Data set names: letters, digits, ``_ . -``; 1-64 characters, not starting with a dot or dash.
DATASET_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


def check_dataset_name(name: str, what: str = "data set") -> str:
    if not isinstance(name, str) or not DATASET_NAME.fullmatch(name):
        raise StateError(f"{what} name {name!r} is not allowed; use 1-64 letters, digits, '_', '.' "
                         "or '-', starting with a letter, digit or '_'")
    return name


def check_idempotency_key(key: str | None) -> str | None:
    """``key`` if it is absent or well formed, else :class:`RequestFailed` 422 (one line).

    Checked in its documented place, after the data set is found (see :func:`run_request`): a
    malformed key on any name that is not a data set of the analyst's gets the one 404.
    """
    if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
        raise RequestFailed(422, "Idempotency-Key: use 1-128 characters from A-Z a-z 0-9 . _ : -")
    return key


def domain_text(missing: str) -> str:
    return ("0/1 responses, complete (no missing cells)" if missing == "none"
            else "0/1 responses with cells missing completely at random (declared MCAR)")


# ---------------------------------------------------------------------------------------
# curator: registration
def register_dataset(store: Store, *, name: str, resp, epsilon: float, delta: float,
                     items: list | None, n_persons: int | None, missing: str, source: str) -> dict:
    """Validate a data set completely and store a validated copy in the state.

    Every data-dependent check happens here (shown to the curator only): the public item set
    and number of persons, the declared domain, and one seeded (not private, discarded) run of
    every release the service offers, so that nothing about the data can fail at request time.
    """
    from ..private.accounting import check_delta, check_epsilon
    from ..private import public_responses, release_counts
    from ..private.totals.api import MISSING_DOMAINS, release_totals

    check_dataset_name(name)
    eps = check_epsilon(epsilon, "--epsilon")
    dlt = check_delta_limit(check_delta(delta, "--delta"), "--delta")
    if missing not in MISSING_DOMAINS:
        raise ValueError(f"--missing must be 'none' or 'mcar', got {missing!r}")
    pub = public_responses(resp, items, n_persons)
    labels = [str(i) for i in pub.items]
    if len(set(labels)) != len(labels):
        raise ValueError("two item labels are the same as text; rename the items")
    if missing == "none" and pub.has_missing:
        padded = []  # (the curator's own data: the message may say where the missing cells come from)
        if n_persons is not None and int(n_persons) > resp.n_persons:
            padded.append(f"--n-persons {n_persons} counts persons absent from the file ({resp.n_persons} rows)")
        if items is not None and {str(i) for i in items} - {str(i) for i in resp.items}:
            padded.append("--items names items absent from the file")
        if padded and not resp.has_missing:
            raise ValueError(f"{'; '.join(padded)}: their cells would all be missing under --missing none "
                             "(complete data); correct the declaration, or declare --missing mcar")
        raise ValueError("the data have missing cells but --missing none declares complete data; "
                         "declare --missing mcar (missing completely at random) or complete the data")
    from ..data.responses import Responses
    import pandas as pd

    check = Responses(pub.codes, pd.RangeIndex(pub.n_persons), pd.Index(labels))
    # dry runs (seeded: NOT private; the results are discarded, never shown)
    import warnings

    from ..private.totals.marginal_missing import mcar_release_holds

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (an MCAR data set of more items than the totals release holds is served without it:
        # its totals requests are a 422 from public m, its counts requests run)
        if missing != "mcar" or mcar_release_holds(len(labels)):
            release_totals(check, epsilon=1.0, delta=1e-6, seed=0, missing=missing)
        release_counts(check, epsilon=1.0, delta=1e-6, seed=0, device="cpu")
    dataset_id = store.add_dataset(name=name, epsilon=eps, delta=dlt, n_persons=pub.n_persons,
                                   items=labels, missing=missing, codes=pub.codes, source=source)
    return {"id": dataset_id, "name": name, "n_persons": pub.n_persons, "items": labels,
            "missing": missing, "epsilon": eps, "delta": dlt}


# ---------------------------------------------------------------------------------------
# analyst: requests
class RequestFailed(Exception):
    """An error to show the analyst: HTTP ``status`` and a one-line ``detail`` (+ extra fields)."""

    def __init__(self, status: int, detail: str, headers: dict | None = None, **extra: Any):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers
        self.extra = extra

    def body(self) -> dict:
        return {"detail": self.detail, **self.extra}


NOT_FOUND = "not found for this key (no such data set or request, or you hold no allowance on it)"
#: the one answer (503, with Retry-After) while the state cannot be reached, before any debit
STATE_UNAVAILABLE = "the service's state is unavailable; nothing was spent; retry later"
#: Retry-After (seconds) of a 503
RETRY_AFTER_503 = 5


def state_unavailable() -> RequestFailed:
    """503 "the service's state is unavailable; nothing was spent", with ``Retry-After``."""
    return RequestFailed(503, STATE_UNAVAILABLE, headers={"Retry-After": str(RETRY_AFTER_503)})


class _ServiceDebit(Ledger):
    """A ledger the library debits through: :meth:`spend` is one :meth:`Store.debit`.

    Subclasses :class:`privirt.Ledger` so that the library's ``ledger=`` accepts it; only
    :meth:`spend` is used (the library calls it once, after computing the exact statistics and
    before drawing any noise).
    """

    def __init__(self, store: Store, request_id: str, **context: Any) -> None:  # noqa: D107
        self._store = store
        self._context = context
        self.planned_id = request_id  # chosen before the debit: a lost commit can be looked up
        self.request_id: str | None = None
        self.spend_id: int | None = None
        self.unconfirmed = False  # the debit's commit raised and the request was not found

    def spend(self, cost, *, mechanism: str, note: str = "", asked: Any = None) -> int:
        # ``asked`` (the (ε, δ) the call asked for) is the request's own ε, δ, stored with it
        if self.request_id is not None:  # pragma: no cover - the library debits once
            raise RuntimeError("a service request debits once")
        try:
            self.request_id, self.spend_id = self._store.debit(
                cost=cost, mechanism=mechanism, note=note, request_id=self.planned_id, **self._context)
        except (OverBudget, OverQuota, DuplicateRequest, NoAccess):
            raise  # decided inside the transaction: nothing was written
        except NotDebited:
            raise  # the state unavailable before the COMMIT was sent (a locked file): nothing was written
        except Exception as exc:
            # The commit's outcome is unknown (the connection dropped during COMMIT, an I/O error):
            # look the request up on a fresh connection.  Committed: the debit stands and the
            # library goes on to draw the noise.  Not found: it may still commit (PostgreSQL
            # finishes a commit whose client went away), so the answer says it may be spent.
            spend_id = _confirm(self._store, self.planned_id)
            if spend_id is None:
                _log.error("request %s: the state did not confirm its debit (%s)", self.planned_id,
                           type(exc).__name__)
                self.unconfirmed = True
                raise DebitUnconfirmed(self.planned_id) from exc
            _log.warning("request %s: the commit of its debit raised %s but it is committed",
                         self.planned_id, type(exc).__name__)
            self.request_id, self.spend_id = self.planned_id, spend_id
        return self.spend_id

    def __repr__(self) -> str:
        return "ServiceDebit()"


class DebitUnconfirmed(Exception):
    """The debit's commit raised and the request is not found afterwards: it may be spent."""

    def __init__(self, request_id: str):
        super().__init__(request_id)
        self.request_id = request_id


def _confirm(store: Store, request_id: str, tries: int = 3) -> int | None:
    """The spend id of ``request_id`` if its debit is committed (a few fresh reads), else None."""
    import time

    for k in range(tries):
        try:
            return store.spend_of(request_id)
        except Exception:  # the state is unreachable for now
            time.sleep(0.2 * (k + 1))
    return None


def _unconfirmed(request_id: str) -> "RequestFailed":
    return RequestFailed(
        503, "the state did not confirm this request's debit (its commit failed or its answer was lost): the "
             f"budget may have been spent. GET /v1/requests/{request_id} tells (404: nothing was spent), or "
             "retry with the same Idempotency-Key", headers={"Retry-After": str(RETRY_AFTER_503)},
        request_id=request_id)


_cache_lock = threading.Lock()
_cache: dict[tuple[str, int, str], Any] = {}


def _responses(store: Store, ds: dict):
    """The stored, validated responses of a data set (cached per process; data sets never change)."""
    import pandas as pd

    from ..data.responses import Responses

    key = (store.describe, ds["id"], ds["sha256"])
    with _cache_lock:
        hit = _cache.get(key)
    if hit is None:
        codes = store.load_codes(ds["id"], ds["sha256"])
        hit = Responses(codes, pd.RangeIndex(codes.shape[0]), pd.Index(ds["items"]))
        with _cache_lock:
            _cache[key] = hit
    return hit


def load_datasets(store: Store, *, keep: bool = True) -> None:
    """Load every stored data set now, before any request is served (into the cache, or only
    to check it with ``keep=False``).

    A state written before blobs were stored uncompressed holds compressed ``.npz`` blobs, whose
    decode time depends on the data; loading them at start-up keeps that time out of every answer.
    A stored copy that does not match its hash (a damaged state) is one line naming the data set.
    """
    for ds in store.stored_datasets():
        try:
            if keep:
                _responses(store, ds)
            else:
                store.load_codes(ds["id"], ds["sha256"])
        except RuntimeError:
            raise ValueError(f"the stored copy of data set {ds['name']!r} does not match its hash: the state "
                             "is damaged; restore it from a backup") from None


def request_cost(ds: dict, endpoint: str, params: dict):
    """The cost of the measurement the library will use (from public n, m, ε, δ only)."""
    totals = (params.get("method") or params.get("kind")) == "totals"
    if totals and ds["missing"] == "mcar":
        from ..private.totals.marginal_missing import MCAR_MAX_ITEMS, mcar_release_holds

        if not mcar_release_holds(len(ds["items"])):  # (public m: the library's message names its own API)
            other = '"method": "spectral"' if endpoint == "estimate" else '"kind": "counts"'
            raise RequestFailed(422, f"the totals estimator's release with missing cells is built for up to "
                                     f"{MCAR_MAX_ITEMS} items and this data set has {len(ds['items'])}: ask "
                                     f"for {other}, which takes missing cells as they are; nothing was spent")
    try:
        return _calibrated_cost(ds["n_persons"], len(ds["items"]), ds["missing"], totals,
                                params.get("mechanism"), params["epsilon"], params["delta"])
    except ValueError as exc:
        raise RequestFailed(422, " ".join(str(exc).split())) from None


@functools.lru_cache(maxsize=4096)
def _calibrated_cost(n: int, m: int, missing: str, totals: bool, mechanism: str | None, epsilon: float,
                     delta: float):
    """Calibration is a deterministic function of public values: cached (it takes 10-200 ms)."""
    from mechanisms.measures import ApproxDP

    from ..private import COUNT_MEASUREMENTS, TotalsGaussian
    from ..private.sensitivity import pairwise_counts_sensitivity

    target = ApproxDP(epsilon, delta)
    if totals:
        return TotalsGaussian.calibrate(target, n_persons=n, n_items=m, missing=missing).cost
    sens = pairwise_counts_sensitivity(m, graph=None, bound="tight")
    return COUNT_MEASUREMENTS[mechanism].calibrate(target, sens).cost


def run_request(store: Store, analyst, name: str, endpoint: str, params: dict,
                idem_key: str | None) -> tuple[dict, bool]:
    """Run one private request; returns ``(body, replayed)`` or raises :class:`RequestFailed`.

    ``params`` are validated (a model's ``model_dump()``).  Raised statuses: 404 (no such data set
    for this key), 402 (over budget, nothing spent), 409 (same Idempotency-Key still running or
    interrupted), 422 (Idempotency-Key malformed, or reused with other parameters), 401 (revoked meanwhile:
    :class:`~privirt.serve.auth.AuthError`, the same answer as every other 401),
    403 (the state's limit of releases per allowance reached, nothing spent),
    503 (the debit's commit was not confirmed: it may be spent; the request id finds out — or,
    before the debit's commit was sent, the state is unavailable: nothing was spent),
    500 (internal error: says whether the budget was spent).
    """
    ds = store.dataset_for(analyst.id, name)
    if ds is None:
        raise RequestFailed(404, NOT_FOUND)
    params = dict(params)
    if params.get("delta") is None:
        params["delta"] = ds["allowance_delta"]
        if not MIN_DELTA <= params["delta"] <= MAX_DELTA:  # an allowance made before the limit held
            raise RequestFailed(422, f"delta: your allowance's δ ({params['delta']:g}) is outside the limit "
                                     f"[{MIN_DELTA:g}, {MAX_DELTA:g}] of a request's δ; give delta explicitly")
    # a field that does not apply to the method was refused with the body (models._applies); those
    # left out take the spectral defaults, or (totals) are left out of the record, as they always were
    from .models import with_defaults  # (pydantic: the CLI's set-up commands do not need it)

    params = with_defaults(params)
    if check_idempotency_key(idem_key) is not None:
        found = store.find_request(analyst.id, idem_key=idem_key)
        if found is not None:
            return _replay(found, endpoint, params, ds["id"]), True
    cost = request_cost(ds, endpoint, params)
    try:
        store.check_fits(analyst.id, ds["id"], cost)
    except OverBudget as exc:
        raise _over_budget(exc, name) from None
    except OverQuota as exc:
        raise _over_quota(exc, name) from None
    except NoAccess:
        raise RequestFailed(404, NOT_FOUND) from None
    # the request's id exists before the debit (one transaction writes the request and its spend):
    # if the commit's answer is lost, the id (and the Idempotency-Key) find it afterwards
    debit = _ServiceDebit(store, new_request_id(), analyst_id=analyst.id, dataset_id=ds["id"],
                          endpoint=endpoint, params=params, idem_key=idem_key,
                          key_id=getattr(analyst, "key_id", None))  # a key replaced meanwhile: 401
    try:
        resp = _responses(store, ds)
        result = _call_library(resp, ds, endpoint, params, debit)
        body = _body(debit.request_id, name, endpoint, params, result)
    except OverBudget as exc:
        raise _over_budget(exc, name) from None
    except OverQuota as exc:
        raise _over_quota(exc, name) from None
    except DuplicateRequest as exc:
        found = store.find_request(analyst.id, request_id=exc.request_id)
        return _replay(found, endpoint, params, ds["id"]), True
    except NoAccess as exc:
        if exc.revoked:  # revoked since its authentication: the one 401 answer (WWW-Authenticate too)
            from .auth import UNAUTHORIZED, AuthError  # FastAPI: so that the CLI's set-up commands do not need it

            raise AuthError(401, UNAUTHORIZED) from None
        raise RequestFailed(404, NOT_FOUND) from None
    except DebitUnconfirmed as exc:
        raise _unconfirmed(exc.request_id) from None
    except Exception as exc:
        if debit.unconfirmed:  # whatever the library turned the unconfirmed debit into
            raise _unconfirmed(debit.planned_id) from exc
        if debit.request_id is None:
            if unavailable(exc):
                raise state_unavailable() from exc
            raise RequestFailed(500, "internal error before the budget was debited; nothing was spent") from exc
        message = ("internal error after the budget was debited: this request's cost was spent; "
                   f"request id {debit.request_id}")
        try:
            store.finish(debit.request_id, error=message)
        except Exception:  # pragma: no cover - the state went away too
            pass
        _log.exception("request %s failed after its debit", debit.request_id)
        raise RequestFailed(500, message, request_id=debit.request_id) from exc
    try:
        store.finish(debit.request_id, result=body)  # stored before it is returned
    except Exception as exc:
        try:  # the store's answer may be what was lost: is the result there?
            found = store.find_request(analyst.id, request_id=debit.request_id)
        except Exception:
            found = None
        if found is not None and found["status"] == "done":
            return found["result"], False
        raise RequestFailed(500, "internal error after the budget was debited: this request's cost was spent "
                                 f"but its result could not be stored; request id {debit.request_id}",
                            request_id=debit.request_id) from exc
    return body, False


def _over_quota(exc: OverQuota, name: str) -> RequestFailed:
    return RequestFailed(403, f"release limit reached: this service allows {exc.limit} releases per analyst "
                              f"and data set, and you have made them on {name!r}; nothing was spent")


def _over_budget(exc: OverBudget, name: str) -> RequestFailed:
    a, d = exc.remaining_allowance, exc.remaining_dataset
    which = "your allowance" if exc.which == "allowance" else "the data set's total budget"
    return RequestFailed(
        402,
        f"over budget: this request costs {exc.cost} and does not fit {which}; remaining ε (as pure ε): "
        f"your allowance on {name!r} {a:.6g}, the data set {d:.6g}; nothing was spent",
        cost={"rho": exc.cost.rho, "epsilon": exc.cost.epsilon, "delta": exc.cost.delta},
        remaining={"allowance_epsilon": a, "dataset_epsilon": d},
    )


def _replay(found: dict, endpoint: str, params: dict, dataset_id: int) -> dict:
    # the data set is part of what an Idempotency-Key stands for: the same key and body on
    # another data set is "other parameters" (422), never the first data set's stored result
    if (found["endpoint"] != endpoint or found["params"] != _jsonable(params)
            or found["dataset_id"] != dataset_id):
        raise RequestFailed(422, "this Idempotency-Key was already used with other parameters; "
                                 "use a new key for a new request")
    if found["status"] == "done":
        return found["result"]
    if found["status"] == "failed":
        raise RequestFailed(500, found["error"], request_id=found["id"])
    raise RequestFailed(409, "a request with this Idempotency-Key was debited and is still running (or was "
                             f"interrupted); fetch GET /v1/requests/{found['id']}", request_id=found["id"])


#: the service's offer, by the names of the one list of private methods
#: (:mod:`privirt.private.methods`): estimate methods, and release kinds -> the method whose
#: release it is.  The offer itself is the ``Literal`` of ``EstimateRequest.method`` and
#: ``ReleaseRequest.kind`` (:mod:`.models`); these restate it (``tests/test_methods.py`` keeps
#: them equal).  A method is offered once its cost can be calibrated from public values
#: (:func:`request_cost`) and its result serialised (:func:`_body`, ``privirt.client``).
SERVED_METHODS = ("totals", "spectral")
SERVED_RELEASES = {"totals": "totals", "counts": "spectral"}


def _call_library(resp, ds: dict, endpoint: str, params: dict, ledger: _ServiceDebit):
    # The library's warnings are not touched here: ``warnings.catch_warnings`` swaps the
    # process-wide filters and is not safe under concurrent requests (one request's exit could
    # restore another's "ignore" for good).  The app routes warnings to the curator's log once,
    # at start-up (``privirt.serve.app.route_warnings``); an analyst never sees them.
    from ..private import methods

    eps, dlt = params["epsilon"], params["delta"]
    if endpoint == "release":
        entry = methods.get(SERVED_RELEASES[params["kind"]])
        if entry.missing:
            return entry.release(resp, epsilon=eps, delta=dlt, ledger=ledger, missing=ds["missing"])
        return entry.release(resp, epsilon=eps, delta=dlt, ledger=ledger, mechanism=params["mechanism"],
                             device="cpu")
    entry = methods.get(params["method"])
    # n_boot left out: each method's own default (public: it depends on m only)
    boot = {} if params.get("n_boot") is None else {"n_boot": params["n_boot"]}
    if entry.missing:
        return entry.estimate(resp, epsilon=eps, delta=dlt, ledger=ledger, missing=ds["missing"],
                              confidence=params["confidence"], **boot)
    return entry.estimate(resp, epsilon=eps, delta=dlt, ledger=ledger,
                          mechanism=params["mechanism"], estimator=params["estimator"],
                          confidence=params["confidence"], device="cpu", **boot)


# ---------------------------------------------------------------------------------------
# serialisation (JSON: NaN becomes null, but in result vectors, see _series)
def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        v = float(x)
        return v if math.isfinite(v) else None
    if x is None or isinstance(x, str):
        return x
    return str(x)


def _series(s) -> list:
    """A float vector as JSON (:func:`privirt._results.json_floats`: ``inf``/``-inf``/``nan`` as
    those strings, so that an unbounded interval and a missing one stay apart; results stored
    before this have ``null`` for both, which the client reads as NaN)."""
    if s is None:
        return None
    return json_floats(s)


def _counts_dict(c) -> dict:
    return {"Y": _jsonable(c.Y.to_numpy()), "graph": _jsonable(c.graph.to_numpy())}


def _body(request_id: str, name: str, endpoint: str, params: dict, result) -> dict:
    from ..private import NoisyCounts
    from ..private.totals.api import TotalsEstimate, TotalsRelease

    st = result.privacy
    if isinstance(result, TotalsRelease):
        out = _jsonable({k: v for k, v in result.to_dict().items() if k != "privacy"})
        out["type"] = "TotalsRelease"
    elif isinstance(result, NoisyCounts):
        out = {"type": "NoisyCounts", "items": [str(i) for i in result.items], **_counts_dict(result)}
    elif isinstance(result, TotalsEstimate):
        rel = _jsonable({k: v for k, v in result.release.to_dict().items() if k != "privacy"})
        out = {"type": "TotalsEstimate", "items": [str(i) for i in result.items], "beta": _series(result.beta),
               "se": _series(result.se), "lo": _series(result.ci["lo"]), "hi": _series(result.ci["hi"]),
               "beta_unshrunk": _series(result.beta_unshrunk), "info": _jsonable(result.info), "release": rel}
    else:  # PrivateSpectralResult (Gaussian or Laplace counts)
        out = {"type": "PrivateSpectralResult", "items": [str(i) for i in result.items],
               "beta": _series(result.beta), "se": _series(result.se),
               "lo": _series(None if result.ci is None else result.ci["lo"]),
               "hi": _series(None if result.ci is None else result.ci["hi"]),
               "info": _jsonable(result.info), "counts": _counts_dict(result.counts)}
    return {"request_id": request_id, "dataset": name, "endpoint": endpoint, "params": _jsonable(params),
            "cost": {"rho": st.cost.rho, "epsilon": st.cost.epsilon, "delta": st.cost.delta},
            "privacy": _privacy_dict(st), "privacy_text": str(st), "result": out}


def _privacy_dict(st) -> dict:
    """The statement's ``to_dict()`` plus what the client needs to rebuild it exactly."""
    import dataclasses

    d = _jsonable(st.to_dict())
    d["native"] = {"measure": type(st.native).__name__, **_jsonable(dataclasses.asdict(st.native))}
    d["sensitivity_n_released"] = None if st.sensitivity is None else int(st.sensitivity.n_released)
    return d

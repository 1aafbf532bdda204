"""Pydantic models of every request and response body of the service.

Request models are strict (a string is not a number, ``true`` is not 1) and refuse unknown
fields (so there is no way to pass a ``seed`` or anything the library would use to make a
result reproducible, hence not private).  The limits below are public and documented in
``docs/serve.md``.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

#: the declared input domains a data set may be served under
from .._constants import MISSING_DOMAINS
#: δ of a request must lie in [MIN_DELTA, MAX_DELTA] (as must a data set's and an allowance's δ).
from ._budget import MAX_DELTA, MIN_DELTA
#: Smallest ε a request may ask for: the library's own floor, a body rule (422 whatever the name).
from ..private.accounting import MIN_EPSILON

__all__ = ["EstimateRequest", "ReleaseRequest", "DatasetInfo", "Budget", "Spend", "Event", "ResultBody",
           "ErrorBody", "SPECTRAL_DEFAULTS", "with_defaults", "MAX_REQUEST_EPSILON", "MIN_EPSILON", "MIN_DELTA",
           "MAX_DELTA", "MAX_N_BOOT"]

#: Largest ε a single request may ask for (a larger one is refused with 422, whatever the budget).
MAX_REQUEST_EPSILON = 100.0  # a request's ε (the library's own limit: privirt.accounting.MAX_EPSILON)
#: Largest number of bootstrap replicates (CPU time a request may ask for).
MAX_N_BOOT = 1000

_Strict = ConfigDict(strict=True, extra="forbid")

#: what a spectral request (estimate ``method="spectral"``, release ``kind="counts"``) uses for a
#: field left out; filled in by the service after the body is validated (:func:`with_defaults`)
SPECTRAL_DEFAULTS = {"mechanism": "gaussian", "estimator": "auto"}


def _applies(value: str | None, info: ValidationInfo, selector: str, only: str) -> str | None:
    """``value`` if it was left out or the request's ``selector`` is ``only``, else a body rule's 422.

    A field that does not apply is refused, never dropped: it was asked for, and the answer
    would not be what was asked (``selector`` is declared before the field, so it is validated first).
    """
    chosen = info.data.get(selector)
    if value is not None and chosen is not None and chosen != only:
        raise PydanticCustomError("inapplicable", f'applies to {selector} "{only}" only; nothing was spent')
    return value


def with_defaults(params: dict) -> dict:
    """A validated body's ``model_dump()`` as it is run and recorded: a spectral request's fields
    left out take :data:`SPECTRAL_DEFAULTS`, a totals request's (``None``: refused if given) are
    left out of the record."""
    out = dict(params)
    spectral = out.get("method", out.get("kind")) in ("spectral", "counts")
    for name, default in SPECTRAL_DEFAULTS.items():
        if name in out and out[name] is None:
            if spectral:
                out[name] = default
            else:
                del out[name]
    return out


class _Privacy(BaseModel):
    model_config = _Strict
    epsilon: float = Field(ge=MIN_EPSILON, le=MAX_REQUEST_EPSILON, allow_inf_nan=False,
                           description="target ε of this request (1e-6 ≤ ε ≤ 100)")
    delta: Optional[float] = Field(default=None, ge=MIN_DELTA, le=MAX_DELTA, allow_inf_nan=False,
                                   description="target δ (default: your allowance's δ)")


class EstimateRequest(_Privacy):
    """``POST /v1/datasets/{name}/estimate``."""

    method: Literal["totals", "spectral"] = "totals"
    mechanism: Optional[Literal["gaussian", "laplace"]] = Field(
        default=None, description='method "spectral" only (else a 422): the noise on the pairwise counts '
                                  f'(left out: "{SPECTRAL_DEFAULTS["mechanism"]}")')
    estimator: Optional[Literal["auto", "spectral", "noise_aware"]] = Field(
        default=None, description='method "spectral" only (else a 422): post-processing of the noisy counts '
                                  f'(left out: "{SPECTRAL_DEFAULTS["estimator"]}")')
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0, allow_inf_nan=False)
    n_boot: int | None = Field(default=None, ge=0, le=MAX_N_BOOT,
                               description="bootstrap replicates for the intervals (0: none, else ≥ 20; "
                                           "left out: the method's own default, fewer beyond 1000 items)")

    @field_validator("n_boot")
    @classmethod
    def _n_boot_none_or_enough(cls, v: int | None) -> int | None:
        # a body rule: checked with the rest of the body, before the data set is looked up
        if v is not None and 0 < v < 20:
            raise PydanticCustomError("n_boot", "give 0 (no intervals) or at least 20 replicates")
        return v

    @field_validator("mechanism", "estimator")
    @classmethod
    def _spectral_only(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _applies(v, info, "method", "spectral")


class ReleaseRequest(_Privacy):
    """``POST /v1/datasets/{name}/release``."""

    kind: Literal["totals", "counts"] = "totals"
    mechanism: Optional[Literal["gaussian", "laplace"]] = Field(
        default=None, description='kind "counts" only (else a 422): discrete Gaussian or discrete Laplace '
                                  f'(left out: "{SPECTRAL_DEFAULTS["mechanism"]}")')

    @field_validator("mechanism")
    @classmethod
    def _counts_only(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _applies(v, info, "kind", "counts")


class Budget(BaseModel):
    epsilon: float
    delta: float
    spent_epsilon: float
    remaining_epsilon: float


class DatasetInfo(BaseModel):
    """Public metadata of a data set, as an analyst sees it."""

    name: str
    n_persons: int
    items: list[str]
    missing: Literal[MISSING_DOMAINS]
    domain: str
    allowance: Budget
    budget: Budget
    remaining: float = Field(description="the ε you can still spend here: min of your allowance's "
                             "and the data set's remaining ε (as pure ε)")


class Spend(BaseModel):
    id: int
    request_id: str
    time: str
    analyst: str
    dataset: str
    endpoint: str
    mechanism: str
    rho: float
    epsilon: float
    delta: float
    status: str
    params: dict[str, Any]


class Event(BaseModel):
    """A curator action (``GET /v1/curator/events``): never a key or a key's hash."""

    id: int
    time: str
    action: str = Field(description="init, limits, dataset add, analyst add, analyst allow, analyst revoke, "
                                    "analyst new-key, curator-key (or upgrade: the state's schema)")
    name: str = Field(description="the data set's or analyst's name ('state', 'curator' otherwise)")
    params: dict[str, Any] = Field(description="the action's public parameters (ε, δ, the limit)")
    who: str = Field(description="'cli' or 'curator key #N (API)': the curator key's row id")


class ResultBody(BaseModel):
    """A private result: stored before it is returned, fetchable at ``/v1/requests/{id}``."""

    request_id: str
    dataset: str
    endpoint: Literal["estimate", "release"]
    params: dict[str, Any]
    cost: dict[str, float]
    privacy: dict[str, Any]
    privacy_text: str
    result: dict[str, Any]


class ErrorBody(BaseModel):
    detail: str

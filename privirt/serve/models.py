"""Pydantic models of every request and response body of the service.

Request models are strict (a string is not a number, ``true`` is not 1) and refuse unknown
fields (so there is no way to pass a ``seed`` or anything the library would use to make a
result reproducible, hence not private).  The limits below are public and documented in
``docs/serve.md``.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

#: the declared input domains a data set may be served under
from .._constants import MISSING_DOMAINS
#: δ of a request must lie in [MIN_DELTA, MAX_DELTA] (as must a data set's and an allowance's δ).
from ._budget import MAX_DELTA, MIN_DELTA
#: Smallest ε a request may ask for: the library's own floor, a body rule (422 whatever the name).
from ..private.accounting import MIN_EPSILON

__all__ = ["EstimateRequest", "ReleaseRequest", "DatasetInfo", "Budget", "Spend", "Event", "ResultBody",
           "ErrorBody", "MAX_REQUEST_EPSILON", "MIN_EPSILON", "MIN_DELTA", "MAX_DELTA", "MAX_N_BOOT"]

#: Largest ε a single request may ask for (a larger one is refused with 422, whatever the budget).
MAX_REQUEST_EPSILON = 100.0  # a request's ε (the library's own limit: privirt.accounting.MAX_EPSILON)
#: Largest number of bootstrap replicates (CPU time a request may ask for).
MAX_N_BOOT = 1000

_Strict = ConfigDict(strict=True, extra="forbid")


class _Privacy(BaseModel):
    model_config = _Strict
    epsilon: float = Field(ge=MIN_EPSILON, le=MAX_REQUEST_EPSILON, allow_inf_nan=False,
                           description="target ε of this request (1e-6 ≤ ε ≤ 100)")
    delta: Optional[float] = Field(default=None, ge=MIN_DELTA, le=MAX_DELTA, allow_inf_nan=False,
                                   description="target δ (default: your allowance's δ)")


class EstimateRequest(_Privacy):
    """``POST /v1/datasets/{name}/estimate``."""

    method: Literal["totals", "spectral"] = "totals"
    mechanism: Literal["gaussian", "laplace"] = Field(
        default="gaussian", description="spectral only: the noise on the pairwise counts")
    estimator: Literal["auto", "spectral", "noise_aware"] = Field(
        default="auto", description="spectral only: post-processing of the noisy counts")
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


class ReleaseRequest(_Privacy):
    """``POST /v1/datasets/{name}/release``."""

    kind: Literal["totals", "counts"] = "totals"
    mechanism: Literal["gaussian", "laplace"] = Field(
        default="gaussian", description="counts only: discrete Gaussian or discrete Laplace")


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

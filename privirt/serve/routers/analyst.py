"""Analyst endpoints (bearer analyst key): data sets, private estimates and releases, spends,
stored results.

Every handler is a plain ``def`` (run in the server's thread pool: the work is numpy).  The
order of checks is fixed and uses public things only: key → body (one-line 422) → the name's
form (404) → the analyst's requests in flight (429) → data set (the same 404 whether it exists or
not) → Idempotency-Key → budget (402) → debit → noise.
"""

from __future__ import annotations

import re
from typing import Iterable

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from .. import auth
from ..models import DatasetInfo, ErrorBody, EstimateRequest, ReleaseRequest, ResultBody, Spend
from ..service import NOT_FOUND, RequestFailed, check_dataset_name, domain_text, run_request
from ..store import Principal


def error_responses(*statuses: int) -> dict:
    """OpenAPI ``responses`` for error statuses, each the service's one-line body ``ErrorBody``.

    Parameters
    ----------
    *statuses : int
        The statuses a route (or a router's every route) may answer with.

    Returns
    -------
    dict
        ``{status: {"model": ErrorBody}}``; a route that declares 422 this way is not given
        FastAPI's list-shaped ``HTTPValidationError``, which the service never sends.
    """
    return {status: {"model": ErrorBody} for status in statuses}


#: the request bodies read by hand (:func:`_parse`), so FastAPI does not see them: their schemas
#: go into the description's components (``privirt.serve.app``) and each route refers to its own
REQUEST_MODELS = (EstimateRequest, ReleaseRequest)


def _request_body(model) -> dict:
    """``openapi_extra`` of a route whose JSON body is ``model`` (a reference to its schema)."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}


def request_schemas() -> dict:
    """The JSON schemas of :data:`REQUEST_MODELS` by name, for the OpenAPI components."""
    from pydantic.json_schema import models_json_schema

    _, top = models_json_schema([(m, "validation") for m in REQUEST_MODELS],
                                ref_template="#/components/schemas/{model}")
    return top["$defs"]


router = APIRouter(prefix="/v1", tags=["analyst"], responses=error_responses(401, 403, 413, 500, 503))


def one_line_validation(exc: ValidationError, fields: Iterable[str] = ()) -> str:
    """A pydantic error as one line: ``field: message``; nothing of the input is echoed.

    Parameters
    ----------
    exc : pydantic.ValidationError
        The error of validating a request body.
    fields : iterable of str, optional
        The model's field names.  When given, they are listed for an unknown field, and a part
        of an error's location that is not one of them reads ``?``.  An unknown field's name is
        the client's own text (it may hold newlines, or 16 KiB): it is never echoed.

    Returns
    -------
    str
        One line naming the field and the problem, and how many more problems there are.
    """
    errors = exc.errors()
    err, known = errors[0], list(fields)
    more = len(errors) - 1
    tail = f" (and {more} more)" if more else ""
    if err.get("type") == "extra_forbidden":
        allowed = f" (allowed: {', '.join(known)})" if known else ""
        return f"body: unknown field{allowed}" + tail
    loc = ".".join(str(p) if not known or isinstance(p, int) or p in known else "?"
                   for p in err.get("loc", ())) or "body"
    return f"{loc}: {err.get('msg', 'invalid')}" + tail


async def _parse(request: Request, model):
    raw = await request.body()
    if not raw.strip():
        raise RequestFailed(422, "the request needs a JSON body, e.g. {\"epsilon\": 0.5}")
    try:
        return model.model_validate_json(raw).model_dump()
    except ValidationError as exc:
        if any(e.get("type") == "json_invalid" for e in exc.errors()):
            raise RequestFailed(422, "the body is not valid JSON") from None
        raise RequestFailed(422, one_line_validation(exc, model.model_fields)) from None


def _name(name: str) -> str:
    try:
        return check_dataset_name(name)
    except ValueError:
        raise RequestFailed(404, NOT_FOUND) from None


@router.get("/datasets", response_model=list[DatasetInfo], responses=error_responses(429))
async def datasets(request: Request, who: Principal = Depends(auth.analyst)):
    """The data sets you may use: public metadata and what remains of your allowance and of the
    data set's budget (its computation counts as one of your requests in flight: 429 beyond)."""
    def work() -> list[dict]:
        return [{**d, "domain": domain_text(d["missing"]),
                 "remaining": min(d["allowance"]["remaining_epsilon"], d["budget"]["remaining_epsilon"])}
                for d in request.app.state.store.datasets_for(who.id)]

    return await _capped(request, who, work)


def _respond(body: dict, replayed: bool) -> JSONResponse:
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    return JSONResponse(body, headers=headers)


@router.post("/datasets/{name}/estimate", response_model=ResultBody,
             responses=error_responses(402, 404, 409, 413, 422, 429, 500),
             openapi_extra=_request_body(EstimateRequest))
async def estimate(name: str, request: Request, who: Principal = Depends(auth.analyst),
                   idempotency_key: str | None = Header(default=None)):
    """A private estimate of the item difficulties (method ``totals`` or ``spectral``) with
    intervals, at the stated (ε, δ)."""
    params = await _parse(request, EstimateRequest)
    # (the Idempotency-Key's form is checked in its place, after the data set: run_request)
    return await _run(request, who, _name(name), "estimate", params, idempotency_key)


@router.post("/datasets/{name}/release", response_model=ResultBody,
             responses=error_responses(402, 404, 409, 413, 422, 429, 500),
             openapi_extra=_request_body(ReleaseRequest))
async def release(name: str, request: Request, who: Principal = Depends(auth.analyst),
                  idempotency_key: str | None = Header(default=None)):
    """A publishable release (noisy ``totals`` and score histogram, or noisy pairwise ``counts``)."""
    params = await _parse(request, ReleaseRequest)
    return await _run(request, who, _name(name), "release", params, idempotency_key)


#: Retry-After (seconds) of a 429
RETRY_AFTER = 5


async def _run(request: Request, who: Principal, name: str, endpoint: str, params: dict, key):
    body, replayed = await _capped(
        request, who, lambda: run_request(request.app.state.store, who, name, endpoint, params, key))
    return _respond(body, replayed)


async def _capped(request: Request, who: Principal, fn):
    """``fn()`` in the server's thread pool, holding one of the analyst's in-flight slots
    (``app.state.in_flight``): none free is a 429 before any work (nothing read, nothing spent).
    The slot is given back by the worker thread when ``fn`` is done, even if the client has gone."""
    from starlette.concurrency import run_in_threadpool

    slots = request.app.state.in_flight
    if not slots.acquire(who.id):
        raise RequestFailed(429, f"you already have {slots.limit} requests running (the most one analyst may); "
                                 f"retry when one has finished; nothing was spent",
                            headers={"Retry-After": str(RETRY_AFTER)})

    started = []

    def work():
        started.append(True)
        try:
            return fn()
        finally:  # given back when the work is done, even if the client has gone
            slots.release(who.id)

    try:
        return await run_in_threadpool(work)
    except BaseException:
        if not started:  # cancelled before a thread took it
            slots.release(who.id)
        raise


@router.get("/spends", response_model=list[Spend])
def spends(request: Request, who: Principal = Depends(auth.analyst)):
    """Your own spends, oldest first."""
    return request.app.state.store.spends(who.id)


@router.get("/requests/{request_id}", responses=error_responses(404, 409, 422, 500))
def get_request(request_id: str, request: Request, who: Principal = Depends(auth.analyst)):
    """A stored result (the very body the request returned), or the request's state."""
    if not re.fullmatch(r"[0-9a-f]{32}", request_id):
        raise RequestFailed(404, NOT_FOUND)
    found = request.app.state.store.find_request(who.id, request_id=request_id)
    if found is None:
        raise RequestFailed(404, NOT_FOUND)
    if found["status"] == "done":
        return JSONResponse(found["result"])
    if found["status"] == "failed":
        raise RequestFailed(500, found["error"], request_id=found["id"])
    raise RequestFailed(409, "this request was debited but has no stored result yet (still running, or "
                             "interrupted: its cost was spent)", request_id=found["id"])


__all__ = ["router", "one_line_validation", "error_responses", "request_schemas"]

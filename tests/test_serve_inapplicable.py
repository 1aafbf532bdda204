"""``privirt serve``: a request field that does not apply to the chosen method or kind
(``mechanism``/``estimator`` with totals) is a 422 before anything is spent, never dropped."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from ._serve import asgi_call, call  # noqa: E402

#: (endpoint, body, the field refused, what it applies to)
INAPPLICABLE = [
    ("estimate", {"method": "totals", "epsilon": 1.0, "mechanism": "laplace"}, "mechanism", 'method "spectral"'),
    ("estimate", {"epsilon": 1.0, "mechanism": "gaussian"}, "mechanism", 'method "spectral"'),
    ("estimate", {"method": "totals", "epsilon": 0.5, "estimator": "noise_aware", "n_boot": 0}, "estimator",
     'method "spectral"'),
    ("release", {"kind": "totals", "epsilon": 0.5, "mechanism": "laplace"}, "mechanism", 'kind "counts"'),
    ("release", {"epsilon": 0.5, "mechanism": "gaussian"}, "mechanism", 'kind "counts"'),
]


def _state(tmp_path) -> tuple[str, dict]:
    """A state with data set ``dd`` (LSAT-6, ε = 10) and analyst alice allowed ε = 10 on it (the
    store's own API: the CLI's set-up takes seconds)."""
    import privirt
    from privirt.serve import service
    from privirt.serve.store import init_store

    state = str(tmp_path / "s.db")
    store = init_store(state)
    service.register_dataset(store, name="dd", resp=privirt.as_responses(privirt.load_dataset("lsat6")),
                             epsilon=10.0, delta=1e-6, items=None, n_persons=None, missing="none", source="t")
    return state, {"alice": store.add_analyst("alice", {"dd": (10.0, 1e-6)})}


def _check_refused(status: int, body: dict, field: str, applies: str) -> None:
    assert status == 422
    detail = body["detail"]
    assert "\n" not in detail
    assert detail.startswith(f"{field}: applies to {applies} only")
    assert detail.endswith("nothing was spent")


def test_an_inapplicable_field_is_422_and_spends_nothing_in_process(tmp_path):
    from privirt.serve import create_app
    from privirt.serve.store import open_store

    state, keys = _state(tmp_path)
    app = create_app(state)
    path = "/v1/datasets/dd"
    for endpoint, body, field, applies in INAPPLICABLE:
        status, answer, _ = asgi_call(app, "POST", f"{path}/{endpoint}", keys["alice"], body)
        _check_refused(status, answer, field, applies)
    assert open_store(state).counts()["spends"] == 0
    status, answer, _ = asgi_call(app, "GET", "/v1/datasets", keys["alice"])
    assert status == 200 and answer[0]["allowance"]["spent_epsilon"] == 0
    # where they apply they are taken, and recorded; left out, the spectral defaults are recorded
    status, answer, _ = asgi_call(app, "POST", f"{path}/release", keys["alice"],
                                  {"kind": "counts", "epsilon": 0.5, "mechanism": "laplace"})
    assert status == 200 and answer["params"]["mechanism"] == "laplace"
    status, answer, _ = asgi_call(app, "POST", f"{path}/estimate", keys["alice"],
                                  {"method": "spectral", "epsilon": 0.5, "n_boot": 0})
    assert status == 200
    assert (answer["params"]["mechanism"], answer["params"]["estimator"]) == ("gaussian", "auto")
    status, answer, _ = asgi_call(app, "POST", f"{path}/estimate", keys["alice"],
                                  {"method": "totals", "epsilon": 0.5, "n_boot": 0})
    assert status == 200 and "mechanism" not in answer["params"] and "estimator" not in answer["params"]


def test_the_openapi_schema_documents_the_spectral_defaults(tmp_path):
    from privirt.serve.models import EstimateRequest, ReleaseRequest

    schema = EstimateRequest.model_json_schema()["properties"]
    assert "gaussian" in schema["mechanism"]["description"] and "auto" in schema["estimator"]["description"]
    assert "gaussian" in ReleaseRequest.model_json_schema()["properties"]["mechanism"]["description"]


def test_an_inapplicable_field_is_422_and_spends_nothing_over_loopback(tmp_path):
    from privirt.client import Client, InvalidRequest
    from privirt.serve.store import open_store

    from ._serve import Server

    state, keys = _state(tmp_path)
    server = Server(state)
    try:
        url = f"{server.url}/v1/datasets/dd"
        for endpoint, body, field, applies in INAPPLICABLE[:1] + INAPPLICABLE[3:4]:
            status, answer, _ = call(f"{url}/{endpoint}", "POST", keys["alice"], body)
            _check_refused(status, answer, field, applies)
        client = Client(server.url, keys["alice"])
        with pytest.raises(InvalidRequest, match="estimator: applies to method \"spectral\" only"):
            client.estimate("dd", method="totals", epsilon=0.5, estimator="noise_aware", n_boot=0)
        assert client.datasets()[0]["allowance"]["spent_epsilon"] == 0
        assert len(client.spends()) == 0
    finally:
        server.stop()
    assert open_store(state).counts()["spends"] == 0

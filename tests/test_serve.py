"""``privirt serve`` over real HTTP: the analyst API, the client, idempotency and the security
cases of the service (a real uvicorn server in a subprocess on a loopback port)."""

from __future__ import annotations

import http.client
import json
import os
import re
import sqlite3

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from privirt.client import (  # noqa: E402
    BudgetExceeded,
    Client,
    Forbidden,
    InvalidRequest,
    NotFound,
    ServiceError,
    Unauthorized,
)

from ._serve import LSAT6, Server, call, cli, counts, setup_state  # noqa: E402


def _wide_lsat6(path, replace_first: bool = False):
    """LSAT6 as one row per person (1000 × 5); optionally person 0's row replaced by all ones."""
    pat = pd.read_csv(LSAT6)
    rows = pat.loc[pat.index.repeat(pat["frequency"])].drop(columns="frequency").reset_index(drop=True)
    if replace_first:
        rows.iloc[0] = 1 - rows.iloc[0] if rows.iloc[0].sum() else 1
    rows.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    state = str(d / "state.db")
    nb0, nb1 = _wide_lsat6(d / "nb0.csv"), _wide_lsat6(d / "nb1.csv", replace_first=True)
    assert not pd.read_csv(nb0).equals(pd.read_csv(nb1))
    keys = setup_state(
        state,
        {"lsat6": (LSAT6, 20.0, 1e-6, ["--weights-col", "frequency"]),
         "secret": (LSAT6, 5.0, 1e-6, ["--weights-col", "frequency"]),
         "nb0": (nb0, 5.0, 1e-6, []), "nb1": (nb1, 5.0, 1e-6, [])},
        {"alice": ["lsat6=6", "nb0=2", "nb1=2"], "bob": ["secret=1", "lsat6=0.5,1e-7"], "carol": ["lsat6=1"]},
    )
    server = Server(state)
    yield {"url": server.url, "state": state, "keys": keys}
    server.stop()


def _post(s, who, name, endpoint, body, **kw):
    return call(f"{s['url']}/v1/datasets/{name}/{endpoint}", "POST", s["keys"].get(who, who), body, **kw)


# ---------------------------------------------------------------------------------------
def test_keys_are_printed_last_and_stored_hashed(service):
    keys = service["keys"]
    assert keys["alice"].startswith("pva.") and keys["curator"].startswith("pvc.")
    raw = b"".join(open(p, "rb").read() for p in (service["state"], service["state"] + "-wal")
                   if os.path.exists(p))
    assert keys["alice"].split(".")[1].encode() in raw  # the public key id is there ...
    for who in ("alice", "bob", "curator"):
        secret = keys[who].split(".")[2]
        assert secret.encode() not in raw  # only the hash is stored


def test_datasets_show_public_metadata_only(service):
    c = Client(service["url"], service["keys"]["alice"])
    ds = {d["name"]: d for d in c.datasets()}
    assert set(ds) == {"lsat6", "nb0", "nb1"}  # not "secret": no allowance on it
    d = ds["lsat6"]
    assert d["n_persons"] == 1000 and d["items"] == ["item1", "item2", "item3", "item4", "item5"]
    assert d["allowance"]["epsilon"] == 6.0 and d["budget"]["epsilon"] == 20.0
    assert d["remaining"] <= d["allowance"]["remaining_epsilon"]
    assert set(d) == {"name", "n_persons", "items", "missing", "domain", "allowance", "budget", "remaining"}


def test_client_returns_library_objects_with_the_debited_statement(service):
    from privirt import TotalsEstimate, TotalsRelease
    from privirt.private import NoisyCounts, PrivateSpectralResult

    c = Client(service["url"], service["keys"]["alice"])
    before = len(c.spends())
    fit = c.estimate("lsat6", method="totals", epsilon=0.5, n_boot=20)
    assert isinstance(fit, TotalsEstimate)
    assert list(fit.beta.index) == ["item1", "item2", "item3", "item4", "item5"]
    assert list(fit.ci.columns) == ["lo", "hi"] and np.all(np.isfinite(fit.ci.to_numpy()))
    assert fit.privacy.private and fit.privacy.epsilon == pytest.approx(0.5, rel=1e-6)
    body = call(f"{service['url']}/v1/requests/{fit.info['request_id']}", key=service["keys"]["alice"])[1]
    assert str(fit.privacy) == body["privacy_text"]  # the library's statement, rebuilt exactly
    again = c.result(fit.info["request_id"])  # a lost response is fetched, not paid again
    assert again.beta.equals(fit.beta) and str(again.privacy) == str(fit.privacy)
    spec = c.estimate("lsat6", method="spectral", epsilon=0.5, n_boot=20)
    assert isinstance(spec, PrivateSpectralResult) and list(spec.to_frame().columns) == ["beta", "se", "lo", "hi"]
    rel = c.release("lsat6", kind="totals", epsilon=0.5)
    assert isinstance(rel, TotalsRelease) and rel.totals.dtype == np.int64 and rel.n_persons == 1000
    cnt = c.release("lsat6", kind="counts", epsilon=0.5, mechanism="laplace")
    assert isinstance(cnt, NoisyCounts) and cnt.privacy.delta == 0 and cnt.Y.shape == (5, 5)
    spends = c.spends()
    assert len(spends) == before + 4
    last = spends.iloc[-4:]
    # what was debited is exactly the statement's cost, for each
    for (_, row), res in zip(last.iterrows(), (fit, spec, rel, cnt)):
        assert (row["rho"], row["epsilon"], row["delta"]) == (res.privacy.cost.rho, res.privacy.cost.epsilon,
                                                              res.privacy.cost.delta)
        assert row["status"] == "done"


def test_idempotency_key_spends_once_and_result_is_fetchable(service):
    s, key = service, service["keys"]["alice"]
    n0 = counts(s["state"])
    body = {"kind": "counts", "epsilon": 0.2}
    st1, b1, h1 = _post(s, "alice", "lsat6", "release", body, headers={"Idempotency-Key": "retry-1"})
    st2, b2, h2 = _post(s, "alice", "lsat6", "release", body, headers={"Idempotency-Key": "retry-1"})
    assert st1 == st2 == 200 and b1 == b2 and h2.get("idempotent-replayed") == "true"
    assert counts(s["state"])["spends"] == n0["spends"] + 1
    st3, b3, _ = call(f"{s['url']}/v1/requests/{b1['request_id']}", key=key)
    assert st3 == 200 and b3 == b1
    st4, b4, _ = _post(s, "alice", "lsat6", "release", {**body, "epsilon": 0.3}, headers={"Idempotency-Key": "retry-1"})
    assert st4 == 422 and "Idempotency-Key" in b4["detail"]
    assert counts(s["state"])["spends"] == n0["spends"] + 1


UNAUTHORIZED = [None, "", "Bearer", "pva.0000000000000000.wrongsecret", "pva.x.y.z", "Basic abc", "x" * 5000]


@pytest.mark.parametrize("key", UNAUTHORIZED)
def test_no_wrong_or_malformed_key_is_401_and_spends_nothing(service, key):
    s = service
    n0 = counts(s["state"])
    headers = {} if key is None else {"Authorization": key}
    st, b, h = call(f"{s['url']}/v1/datasets/lsat6/estimate", "POST", body={"epsilon": 0.1}, headers=headers)
    assert st == 401 and h.get("www-authenticate") == "Bearer"
    st2, b2, _ = call(f"{s['url']}/v1/datasets", headers=headers)
    assert st2 == 401 and b2 == b
    assert counts(s["state"]) == n0


def test_wrong_secret_of_a_real_key_id_and_revoked_key_are_401(service):
    s = service
    n0 = counts(s["state"])
    prefix, kid, secret = s["keys"]["carol"].split(".")
    wrong = f"{prefix}.{kid}.{secret[:-2]}xx"
    st_wrong, b_wrong, _ = _post(s, wrong, "lsat6", "estimate", {"epsilon": 0.1})
    st_ok, _, _ = call(f"{s['url']}/v1/datasets", key=s["keys"]["carol"])
    assert st_wrong == 401 and st_ok == 200
    # the curator revokes carol through the API; her key stops working at once
    st, _, _ = call(f"{s['url']}/v1/curator/analysts/carol/revoke", "POST", s["keys"]["curator"])
    assert st == 200
    st_rev, b_rev, _ = _post(s, "carol", "lsat6", "estimate", {"epsilon": 0.1})
    assert st_rev == 401 and b_rev == b_wrong
    with pytest.raises(Unauthorized) as err:
        Client(s["url"], s["keys"]["carol"]).datasets()
    assert err.value.status == 401
    assert counts(s["state"]) == n0


def test_analyst_cannot_reach_another_analysts_data_requests_or_the_curator(service):
    s = service
    n0 = counts(s["state"])
    st_b, b_b, _ = _post(s, "bob", "secret", "release", {"kind": "counts", "epsilon": 0.1})
    assert st_b == 200
    n1 = counts(s["state"])
    st_sec, b_sec, _ = _post(s, "alice", "secret", "release", {"kind": "counts", "epsilon": 0.1})
    st_none, b_none, _ = _post(s, "alice", "no-such-set", "release", {"kind": "counts", "epsilon": 0.1})
    assert st_sec == st_none == 404 and b_sec == b_none  # the same whether it exists or not
    st_req, _, _ = call(f"{s['url']}/v1/requests/{b_b['request_id']}", key=s["keys"]["alice"])
    assert st_req == 404
    alice_spends = call(f"{s['url']}/v1/spends", key=s["keys"]["alice"])[1]
    assert all(x["analyst"] == "alice" for x in alice_spends)
    assert b_b["request_id"] not in {x["request_id"] for x in alice_spends}
    for path in ("/v1/curator/spends", "/v1/curator/allowances", "/v1/curator/datasets"):
        assert call(s["url"] + path, key=s["keys"]["alice"])[0] == 403
        assert call(s["url"] + path)[0] == 401
        assert call(s["url"] + path, key=s["keys"]["curator"])[0] == 200
    assert call(f"{s['url']}/v1/curator/analysts/bob/revoke", "POST", s["keys"]["alice"])[0] == 403
    assert call(f"{s['url']}/v1/datasets", key=s["keys"]["curator"])[0] == 403
    with pytest.raises(Forbidden) as forbidden:
        Client(s["url"], s["keys"]["curator"]).datasets()
    assert forbidden.value.status == 403
    with pytest.raises(NotFound) as err:
        Client(s["url"], s["keys"]["alice"]).estimate("secret", epsilon=0.1)
    assert err.value.status == 404
    assert counts(s["state"]) == n1 and n1["spends"] == n0["spends"] + 1


HOSTILE = ["../lsat6", "..%2Flsat6", "%2e%2e%2fstate.db", "lsat6%00", "lsat6'--", "lsat6%27%20OR%20%271%27%3D%271",
           "x%3B%20DROP%20TABLE%20spends%3B--", "%2Fetc%2Fpasswd", "LSAT6", "lsat6%20", "a" * 300]


@pytest.mark.parametrize("name", HOSTILE)
def test_path_and_sql_like_names_are_the_same_404(service, name):
    s = service
    n0 = counts(s["state"])
    st, b, _ = _post(s, "alice", name, "estimate", {"epsilon": 0.1})
    ref = _post(s, "alice", "no-such-set", "estimate", {"epsilon": 0.1})
    assert st == 404 and b == ref[1]
    assert counts(s["state"]) == n0
    with sqlite3.connect(s["state"]) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"spends", "requests", "datasets", "analysts"} <= tables


def test_bodies_over_the_limit_are_413(service):
    s = service
    n0 = counts(s["state"])
    big = {"epsilon": 0.1, "pad": "x" * 20000}
    st, b, _ = _post(s, "alice", "lsat6", "estimate", big)
    assert st == 413 and "larger than" in b["detail"]
    # the same without a Content-Length (chunked transfer)
    conn = http.client.HTTPConnection("127.0.0.1", int(s["url"].rsplit(":", 1)[1]), timeout=30)
    conn.putrequest("POST", "/v1/datasets/lsat6/estimate")
    conn.putheader("Authorization", f"Bearer {s['keys']['alice']}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    payload = json.dumps(big).encode()
    for i in range(0, len(payload), 4096):
        part = payload[i:i + 4096]
        try:
            conn.send(b"%x\r\n%s\r\n" % (len(part), part))
        except (BrokenPipeError, ConnectionResetError):
            break
    try:
        conn.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    resp = conn.getresponse()
    assert resp.status == 413
    conn.close()
    assert counts(s["state"]) == n0


INVALID = [
    {"epsilon": float("nan")}, {"epsilon": float("inf")}, {"epsilon": -1.0}, {"epsilon": 0}, {"epsilon": 1e308},
    {"epsilon": 101}, {"epsilon": "0.5"}, {"epsilon": True}, {"epsilon": None}, {},
    {"epsilon": 0.5, "delta": float("nan")}, {"epsilon": 0.5, "delta": -1e-6}, {"epsilon": 0.5, "delta": 0.5},
    {"epsilon": 0.5, "delta": "1e-6"}, {"epsilon": 0.5, "seed": 1}, {"epsilon": 0.5, "method": "cmle"},
    {"epsilon": 0.5, "n_boot": 5}, {"epsilon": 0.5, "n_boot": 10**9}, {"epsilon": 0.5, "confidence": 1.5},
    [0.5], "epsilon",
]


@pytest.mark.parametrize("body", INVALID, ids=[str(i) for i in range(len(INVALID))])
def test_invalid_parameters_are_one_line_422_and_spend_nothing(service, body):
    s = service
    n0 = counts(s["state"])
    raw = json.dumps(body).encode()  # NaN/Infinity as Python's json writes them
    st, b, _ = _post(s, "alice", "lsat6", "estimate", None, raw=raw)
    assert st == 422, b
    assert "\n" not in b["detail"] and 0 < len(b["detail"]) < 300
    assert counts(s["state"]) == n0
    with pytest.raises(InvalidRequest) as err:
        Client(s["url"], s["keys"]["alice"])._spend("/v1/datasets/lsat6/estimate", body if isinstance(body, dict)
                                                   else {"epsilon": body}, None)
    assert err.value.status == 422


def test_not_json_and_bad_idempotency_key_are_422(service):
    s = service
    n0 = counts(s["state"])
    assert _post(s, "alice", "lsat6", "estimate", None, raw=b"{epsilon: 1")[0] == 422
    st, b, _ = _post(s, "alice", "lsat6", "estimate", {"epsilon": 0.1}, headers={"Idempotency-Key": "a b/c"})
    assert st == 422 and "Idempotency-Key" in b["detail"]
    assert counts(s["state"]) == n0


def test_over_budget_is_402_with_what_remains_and_spends_nothing(service):
    s = service
    n0 = counts(s["state"])
    st, b, _ = _post(s, "bob", "lsat6", "release", {"kind": "totals", "epsilon": 50.0})
    assert st == 402
    assert set(b["remaining"]) == {"allowance_epsilon", "dataset_epsilon"}
    assert 0 < b["remaining"]["allowance_epsilon"] <= 0.5 and "nothing was spent" in b["detail"]
    with pytest.raises(BudgetExceeded) as err:
        Client(s["url"], s["keys"]["bob"]).release("lsat6", kind="totals", epsilon=50.0)
    import privirt

    assert err.value.status == 402 and isinstance(err.value, privirt.BudgetExceeded)
    assert isinstance(err.value, ServiceError) and err.value.remaining == b["remaining"]
    assert counts(s["state"]) == n0


def test_the_api_has_no_raw_data_or_seed_route():
    from privirt.serve.app import create_app
    from privirt.serve.routers import analyst, curator
    from privirt.serve.store import init_store

    import tempfile
    import os

    with tempfile.TemporaryDirectory() as d:
        app = create_app(init_store(os.path.join(d, "s.db")))
        routes = [*app.routes, *analyst.router.routes, *curator.router.routes]
        paths = {(sorted(r.methods)[0], r.path) for r in routes if getattr(r, "methods", None)}
    served = {p for p in paths if p[1].startswith(("/v1", "/curator"))}
    assert served == {
        ("GET", "/v1/datasets"), ("POST", "/v1/datasets/{name}/estimate"), ("POST", "/v1/datasets/{name}/release"),
        ("GET", "/v1/spends"), ("GET", "/v1/requests/{request_id}"), ("GET", "/v1/curator/spends"),
        ("GET", "/v1/curator/allowances"), ("GET", "/v1/curator/datasets"), ("GET", "/v1/curator/events"),
        ("POST", "/v1/curator/analysts/{name}/revoke"), ("GET", "/curator"), ("POST", "/curator/login"),
        ("POST", "/curator/logout"), ("GET", "/v1/health"),
        ("GET", "/curator/login"), ("GET", "/curator/logout"),  # redirects to /curator (a reloaded form address)
    }


# ---------------------------------------------------------------------------------------
# neighbours: one person's row replaced
_SPEND_LINE = re.compile(r"ledger spend id: \d+")


def _shape(x):
    """The structure of a noisy result: keys, lengths and kinds; every number is masked."""
    if isinstance(x, dict):
        return {k: _shape(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_shape(v) for v in x]
    if isinstance(x, (bool, int, float)) or x is None or x in ("inf", "-inf", "nan"):
        return "number"
    return x


def _public(body: dict) -> dict:
    b = dict(body)
    if "request_id" in b:
        b["request_id"] = "<id>"
    if "privacy" in b:
        b["privacy"] = {**b["privacy"], "ledger_spend_id": "<id>"}
        b["privacy_text"] = _SPEND_LINE.sub("ledger spend id: <id>", b["privacy_text"])
    if "result" in b:
        r = dict(b["result"])
        items = r.pop("items")
        b["result"] = {"items": items, "noisy": _shape(r)}
    return b


NEIGHBOUR_CALLS = [
    ("estimate", {"method": "totals", "epsilon": 0.3, "n_boot": 20}),
    ("estimate", {"method": "spectral", "epsilon": 0.3, "n_boot": 20}),
    ("estimate", {"method": "spectral", "epsilon": 0.3, "mechanism": "laplace", "n_boot": 0}),
    ("release", {"kind": "totals", "epsilon": 0.3}),
    ("release", {"kind": "counts", "epsilon": 0.3}),
    ("release", {"kind": "counts", "epsilon": 0.3, "mechanism": "laplace"}),
    ("release", {"kind": "counts", "epsilon": 99.0}),  # 402
    ("estimate", {"epsilon": float("nan")}),  # 422
    ("estimate", {"method": "spectral", "epsilon": 0.3, "n_boot": 7}),  # 422
]


def test_neighbouring_data_sets_give_identical_bodies_but_for_the_noise(service):
    s = service
    seen = set()
    for endpoint, body in NEIGHBOUR_CALLS:
        raw = json.dumps(body).encode()
        st0, b0, h0 = _post(s, "alice", "nb0", endpoint, None, raw=raw)
        st1, b1, h1 = _post(s, "alice", "nb1", endpoint, None, raw=raw)
        seen.add(st0)
        assert st0 == st1, (endpoint, body)
        assert h0.get("content-type") == h1.get("content-type")
        b0 = json.loads(json.dumps(b0).replace("nb0", "<name>"))  # the name is the one public difference
        b1 = json.loads(json.dumps(b1).replace("nb1", "<name>"))
        assert _public(b0) == _public(b1), (endpoint, body)
    assert seen == {200, 402, 422}
    # the rest of the analyst's surface, on each neighbour in turn: a stored result, a replay, an
    # Idempotency-Key reused with other parameters (422), the same key still running (409), a
    # body over the limit (413)
    from concurrent.futures import ThreadPoolExecutor

    def surface(name: str) -> list:
        out = []
        small = {"kind": "totals", "epsilon": 0.05}
        hdr = {"Idempotency-Key": f"nb-{name}"}
        st, first, _ = _post(s, "alice", name, "release", small, headers=hdr)
        st2, stored, _ = call(f"{s['url']}/v1/requests/{first['request_id']}", key=s["keys"]["alice"])
        assert stored == first
        out.append((st, st2, _public(stored)))
        st, again, h = _post(s, "alice", name, "release", small, headers=hdr)
        out.append((st, h.get("idempotent-replayed"), _public(again) == _public(first)))
        out.append(_post(s, "alice", name, "release", {**small, "epsilon": 0.06}, headers=hdr)[:2])
        slow = {"method": "totals", "epsilon": 0.05, "n_boot": 1000}
        with ThreadPoolExecutor(2) as pool:
            both = list(pool.map(lambda _: _post(s, "alice", name, "estimate", slow,
                                                 headers={"Idempotency-Key": f"slow-{name}"}), range(2)))
        both.sort(key=lambda r: r[0])
        assert [r[0] for r in both] == [200, 409], [r[0] for r in both]
        conflict = dict(both[1][1])
        assert conflict.pop("request_id") == both[0][1]["request_id"]
        out.append((409, conflict["detail"].replace(both[0][1]["request_id"], "<id>")))
        out.append(_post(s, "alice", name, "release", None, raw=b"{" + b" " * 20000 + b"}")[:2])
        return json.loads(json.dumps(out).replace(name, "<name>"))

    assert surface("nb0") == surface("nb1")
    # listings: identical but for the name
    ds = {d["name"]: d for d in call(f"{s['url']}/v1/datasets", key=s["keys"]["alice"])[1]}
    a, b = dict(ds["nb0"]), dict(ds["nb1"])
    a.pop("name"), b.pop("name")
    assert a == b
    sp = [x for x in call(f"{s['url']}/v1/spends", key=s["keys"]["alice"])[1] if x["dataset"] in ("nb0", "nb1")]
    strip = {d: [{k: v for k, v in x.items() if k not in ("id", "request_id", "time", "dataset")}
                 for x in sp if x["dataset"] == d] for d in ("nb0", "nb1")}
    assert strip["nb0"] == strip["nb1"] and len(strip["nb0"]) == 8


def test_cli_bad_input_is_one_line_and_writes_nothing(tmp_path):
    state = str(tmp_path / "s.db")
    proc = cli("serve", "init", state, subprocess_=True)  # once as a real process
    assert proc.returncode == 0 and "created state" in proc.stdout
    before = open(state, "rb").read()
    bad = [
        ("serve", "init", state),
        ("serve", "dataset", "add", state, "x", LSAT6, "--epsilon", "nan", "--delta", "1e-6"),
        ("serve", "dataset", "add", state, "../x", LSAT6, "--epsilon", "1", "--delta", "1e-6"),
        ("serve", "dataset", "add", state, "x", LSAT6, "--epsilon", "1", "--delta", "1e-6"),  # frequency column
        ("serve", "dataset", "add", state, "x", tmp_path / "missing.csv", "--epsilon", "1", "--delta", "1e-6"),
        ("serve", "analyst", "add", state, "a", "--allowance", "nope=1"),
        ("serve", "analyst", "add", state, "a", "--allowance", "x"),
        ("serve", "analyst", "revoke", state, "nobody"),
        ("serve", "list", str(tmp_path / "none.db")),
        ("serve", "run", str(tmp_path / "none.db")),
    ]
    for k, args in enumerate(bad):
        proc = cli(*args, check=False, subprocess_=k == len(bad) - 1)
        assert proc.returncode != 0, args
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("privirt: error:"), (args, proc.stderr)
    assert open(state, "rb").read() == before
    assert not (tmp_path / "none.db").exists()


def test_the_fast_budget_check_agrees_with_the_ledgers_rule():
    """``store._fits`` (closed-form upper bound first, on the spends' sums) decides exactly as
    ``total_epsilon``, and :class:`Spent` composes its sums as ``total_epsilon`` composes the list."""
    from privirt.private.accounting import PrivacyCost, total_epsilon
    from privirt.private._sums import surely_fits as _surely_fits
    from privirt.serve.store import Spent, _fits

    rng = np.random.default_rng(3)
    for _ in range(300):
        rows = [(float(rng.choice([0.0, rng.exponential(0.01)])), float(rng.choice([0.0, rng.exponential(0.05)])),
                 float(rng.choice([0.0, 1e-8]))) for _ in range(rng.integers(0, 6))]
        cost = PrivacyCost(rho=float(rng.choice([0.0, rng.exponential(0.01)])),
                           epsilon=float(rng.choice([0.0, 0.1])), delta=float(rng.choice([0.0, 0.0, 1e-7])))
        budget, delta = float(rng.uniform(0.05, 2.0)), float(rng.choice([1e-6, 1e-7]))
        costs = [PrivacyCost(*r) for r in rows] + [cost]
        spent = Spent.of(rows)
        assert _fits(spent, cost, budget, delta) == (total_epsilon(costs, delta) <= budget * (1 + 1e-12))
        exact = total_epsilon(costs, delta)
        assert spent.plus(cost).total(delta) == exact  # the Ledger's exact sums, not an approximation
        # the debit's fast check on the database's (rounded) sums never accepts what the rule refuses
        quick = (len(rows), sum(r[0] for r in rows), sum(r[1] for r in rows), sum(r[2] for r in rows))
        if _surely_fits(quick, cost, budget, delta):
            assert exact <= budget * (1 + 1e-12)


def test_the_debit_sums_the_spends_in_the_database(tmp_path):
    """The debit reads the spends as SQL sums inside its transaction, not row by row, and the
    sums equal the Python composition of the rows."""
    import privirt
    from privirt.private.accounting import PrivacyCost, total_epsilon
    from privirt.serve import service
    from privirt.serve.store import Spent, init_store

    store = init_store(str(tmp_path / "s.db"))
    resp = privirt.as_responses(privirt.load_dataset("lsat6"))
    service.register_dataset(store, name="d", resp=resp, epsilon=50.0, delta=1e-6, items=None, n_persons=None,
                             missing="none", source="test")
    who = store.authenticate(store.add_analyst("a", {"d": (50.0, 1e-6)}), "analyst")
    ds = store.dataset_for(who.id, "d")
    costs = [PrivacyCost(rho=0.01), PrivacyCost(epsilon=0.2), PrivacyCost(rho=0.002, delta=1e-9),
             PrivacyCost(epsilon=0.05)] * 5
    for c in costs:
        store.debit(analyst_id=who.id, dataset_id=ds["id"], cost=c, mechanism="m", endpoint="release",
                    params={}, idem_key=None)
    seen: list[str] = []
    con = store._b._conn()
    con.set_trace_callback(seen.append)
    try:
        store.debit(analyst_id=who.id, dataset_id=ds["id"], cost=PrivacyCost(rho=0.001), mechanism="m",
                    endpoint="release", params={}, idem_key=None)
    finally:
        con.set_trace_callback(None)
    reads = [q for q in seen if "FROM spends" in q]
    assert reads and all("SUM(" in q for q in reads), reads
    with store._b.read() as c2:
        spent = store._spent(c2, ds["id"])
    every = costs + [PrivacyCost(rho=0.001)]
    assert spent.n == len(every)
    assert spent == Spent.of(every)  # the exact sums, as the Ledger sums
    assert spent.total(1e-6) == total_epsilon(every, 1e-6)
    assert store.datasets()[0]["spent_epsilon"] == total_epsilon(every, 1e-6)


@pytest.mark.parametrize("budget, costs", [
    ((1.0, 1e-5), [(0.0, 0.1, 0.0)] * 10),  # exact Σε = 1 + 5.6e-17: the service said 0.9999999999999999
    ((1.0, 1e-5), [(0.0, 0.01, 1e-5 / 3)] * 3),  # exact Σδ > 1e-5 by 4e-22: the service took the third
    ((1.0, 1e-5), [(0.0, 1 / 3, 0.0)] * 3 + [(0.0, 1e-16, 0.0)]),
    ((0.5, 1e-6), [(0.01, 0.0, 0.0), (0.0, 0.1, 0.0), (0.002, 0.0, 1e-9)] * 6 + [(0.0, 0.06, 0.0)] * 3),
])
def test_the_service_composes_as_the_ledger_does(tmp_path, budget, costs):
    """The service and a Ledger with the same budget and the same spends, side by side: the same
    decision on every spend and the same totals (the exact sums, rounded up)."""
    from privirt.exceptions import BudgetExceeded
    from privirt.private.accounting import PrivacyCost
    from privirt.private.ledger import Ledger
    from privirt.serve.store import OverBudget, init_store

    eps, delta = budget
    store = init_store(str(tmp_path / "s.db"))
    did = store.add_dataset(name="d", epsilon=eps, delta=delta, n_persons=3, items=["a", "b"], missing="complete",
                            codes=np.zeros((3, 2), dtype=np.int8), source="test")
    aid = store.authenticate(store.add_analyst("a", {"d": (eps, delta)}), "analyst").id
    led = Ledger(tmp_path / "l.ledger", epsilon=eps, delta=delta)
    for c in map(lambda r: PrivacyCost(*r), costs):
        try:
            store.debit(analyst_id=aid, dataset_id=did, cost=c, mechanism="m", endpoint="e", params={},
                        idem_key=None)
            served = True
        except OverBudget:
            served = False
        try:
            led.spend(c, mechanism="m")
            kept = True
        except BudgetExceeded:
            kept = False
        assert served == kept, c
        b = store.datasets_for(aid)[0]["budget"]
        assert b["spent_epsilon"] == led.spent().epsilon
        assert b["remaining_epsilon"] <= led.remaining_epsilon()


def test_an_error_after_the_debit_says_the_budget_was_spent(tmp_path, monkeypatch):
    """In process: a failure after the debit answers 500 naming the request, the spend stays, and
    a failure before it spends nothing."""
    import privirt
    from privirt.serve import service
    from privirt.serve.store import init_store

    store = init_store(str(tmp_path / "s.db"))
    resp = privirt.as_responses(privirt.load_dataset("lsat6"))
    service.register_dataset(store, name="d", resp=resp, epsilon=5.0, delta=1e-6, items=None, n_persons=None,
                             missing="none", source="test")
    store.add_analyst("a", {"d": (2.0, 1e-6)})
    who = store.authenticate(store.add_analyst("b", {"d": (2.0, 1e-6)}), "analyst")
    params = {"kind": "counts", "epsilon": 0.3, "delta": None, "mechanism": "gaussian"}

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(service, "_body", broken)  # after the library returned: the debit is done
    with pytest.raises(service.RequestFailed) as err:
        service.run_request(store, who, "d", "release", params, None)
    assert err.value.status == 500 and "spent" in err.value.detail
    rid = err.value.extra["request_id"]
    assert store.find_request(who.id, request_id=rid)["status"] == "failed"
    assert store.counts() == {"requests": 1, "spends": 1}
    monkeypatch.setattr(service, "_responses", broken)  # before the debit: nothing spent
    with pytest.raises(service.RequestFailed) as err:
        service.run_request(store, who, "d", "release", params, None)
    assert err.value.status == 500 and "nothing was spent" in err.value.detail
    assert store.counts() == {"requests": 1, "spends": 1}


    def gone(*args, **kwargs):
        from privirt.serve._backends import StateUnavailable

        raise StateUnavailable("cannot connect to the state")

    monkeypatch.setattr(service, "_responses", gone)  # the state unavailable before the debit: 503
    with pytest.raises(service.RequestFailed) as err:
        service.run_request(store, who, "d", "release", params, None)
    assert err.value.status == 503 and err.value.detail == service.STATE_UNAVAILABLE
    assert err.value.headers["Retry-After"] == "5" and "request_id" not in err.value.extra
    assert store.counts() == {"requests": 1, "spends": 1}

    def broken_state(*args, **kwargs):  # an error a retry cannot fix is not "retry later"
        raise service.StateError("the state has an unknown schema version")

    monkeypatch.setattr(service, "_responses", broken_state)
    with pytest.raises(service.RequestFailed) as err:
        service.run_request(store, who, "d", "release", params, None)
    assert err.value.status == 500 and "Retry-After" not in (err.value.headers or {})
    assert store.counts() == {"requests": 1, "spends": 1}


def test_an_idempotency_key_stands_for_its_data_set(service):
    """The same key and body on another data set is 422, not the first data set's result, and
    nothing is spent on the second (real server over loopback)."""
    c = Client(service["url"], service["keys"]["alice"])
    before = len(c.spends())
    body = {"kind": "totals", "epsilon": 0.1}
    key = {"Idempotency-Key": "across-datasets-1"}
    st1, b1, _ = _post(service, "alice", "lsat6", "release", body, headers=key)
    assert st1 == 200 and b1["dataset"] == "lsat6"
    st2, b2, _ = _post(service, "alice", "nb0", "release", body, headers=key)
    assert st2 == 422 and "Idempotency-Key" in b2["detail"]
    assert len(c.spends()) == before + 1


def test_an_estimate_without_n_boot_gets_the_methods_own_default(monkeypatch):
    """A request that leaves ``n_boot`` out passes none to the library, so each method uses its
    own default (the spectral one falls beyond 1000 items); a given ``n_boot`` is passed as is."""
    from privirt.private import methods
    from privirt.serve import service
    from privirt.serve.models import EstimateRequest

    assert EstimateRequest(epsilon=0.5).n_boot is None
    seen = []

    class _Entry:
        missing = False

        def estimate(self, resp, **kw):
            seen.append(kw)

    monkeypatch.setattr(methods, "get", lambda name: _Entry())
    base = {"epsilon": 0.5, "delta": 1e-6, "mechanism": "gaussian", "estimator": "auto", "confidence": 0.95}
    for params in ({**base, "method": "spectral", "n_boot": None}, {**base, "method": "spectral", "n_boot": 40}):
        service._call_library(None, {"missing": "none"}, "estimate", params, ledger=None)
    assert "n_boot" not in seen[0] and seen[1]["n_boot"] == 40


def test_an_estimate_without_n_boot_over_loopback_has_intervals(service):
    """The same through the real server: no ``n_boot`` in the body, intervals from the method's
    own default number of replicates."""
    c = Client(service["url"], service["keys"]["alice"])
    fit = c.estimate("lsat6", method="totals", epsilon=0.1)
    assert list(fit.ci.columns) == ["lo", "hi"] and np.all(np.isfinite(fit.ci.to_numpy()))


def test_backup_of_a_running_state_keeps_every_spend(tmp_path):
    """A plain copy of the running state's file missed the spends still in its write-ahead log
    (a state restored from it gave their budget back); `serve backup` copies them all."""
    from privirt.serve.store import open_store

    state = str(tmp_path / "state.db")
    keys = setup_state(state, {"lsat6": (LSAT6, 5.0, 1e-6, ["--weights-col", "frequency"])},
                       {"dana": ["lsat6=1"]})
    server = Server(state)
    try:
        s = {"url": server.url, "keys": keys}
        for eps in (0.05, 0.1):
            assert _post(s, "dana", "lsat6", "release", {"kind": "totals", "epsilon": eps})[0] == 200
        copy = tmp_path / "copy.db"
        proc = cli("serve", "backup", state, copy)  # the service still running
    finally:
        server.stop()
    live, backed = open_store(state).spends(), open_store(copy).spends()
    assert backed == live and len(live) == 2
    assert "(2 spends)" in proc.stdout
    again = cli("serve", "backup", state, copy, check=False)  # never over an existing file
    assert again.returncode == 2 and "already exists" in again.stderr


def test_dataset_add_names_a_padding_declaration_as_the_cause_of_missing_cells(tmp_path):
    state = str(tmp_path / "s.db")
    cli("serve", "init", state)
    wide = tmp_path / "wide.csv"
    pd.DataFrame(np.eye(6, dtype=int)[np.arange(200) % 6], columns=[f"q{i}" for i in range(6)]).to_csv(wide, index=False)
    for extra, words in ((["--n-persons", "201"], "--n-persons 201 counts persons absent from the file"),
                         (["--items", "q0,q1,q2,q3,q4,q5,extra"], "--items names items absent from the file")):
        proc = cli("serve", "dataset", "add", state, "d", wide, "--epsilon", "5", "--delta", "1e-5", *extra,
                   check=False)
        assert proc.returncode == 2 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    from privirt.serve.store import open_store

    assert open_store(state).datasets() == []


@pytest.mark.parametrize("name", ["lsat6", "nosuch", "secret"])
def test_an_invalid_n_boot_is_422_at_the_body_stage_whatever_the_name(service, name):
    """n_boot in 1..19 is a body rule: 422 before the data set is looked up (it was 404 on a data
    set the key cannot see and 422 on its own)."""
    s = service
    n0 = counts(s["state"])
    for n_boot in (5, 19):
        st, b, _ = _post(s, "alice", name, "estimate", {"epsilon": 0.1, "n_boot": n_boot})
        assert st == 422 and b["detail"] == "n_boot: give 0 (no intervals) or at least 20 replicates", b
    assert counts(s["state"]) == n0


UNKNOWN_FIELDS = ['a\nTraceback (most recent call last):\n  File "x"', "x\ny", "seed", "Z" * 16000]


@pytest.mark.parametrize("name", ["lsat6", "nosuch", "secret"])
def test_an_unknown_field_is_one_line_422_that_does_not_echo_its_name(service, name):
    """The name of an unknown field is the client's text: it was echoed in full (newlines, 16 KiB)."""
    s = service
    n0 = counts(s["state"])
    want = ("body: unknown field (allowed: epsilon, delta, method, mechanism, estimator, confidence, "
            "n_boot)")
    for field in UNKNOWN_FIELDS:
        raw = json.dumps({"epsilon": 0.5, field: 1}).encode()
        st, b, _ = _post(s, "alice", name, "estimate", None, raw=raw)
        assert st == 422 and b == {"detail": want}, (field[:20], b)
    st, b, _ = _post(s, "alice", name, "release", None, raw=json.dumps({"epsilon": 0.5, "x\ny": 1}).encode())
    assert st == 422 and b == {"detail": "body: unknown field (allowed: epsilon, delta, kind, mechanism)"}
    assert counts(s["state"]) == n0


@pytest.mark.parametrize("name", ["lsat6", "nosuch", "secret"])
def test_an_epsilon_below_the_librarys_floor_is_422_at_the_body_stage_whatever_the_name(service, name):
    """ε < 1e-6 (privirt.accounting.MIN_EPSILON) is a body rule: it was checked with the calibration,
    after the data set (422 on a held data set, 404 on any other name)."""
    s = service
    n0 = counts(s["state"])
    for endpoint in ("estimate", "release"):
        for eps in (1e-7, 9.99e-7, 5e-324):
            st, b, _ = _post(s, "alice", name, endpoint, {"epsilon": eps})
            assert st == 422 and b["detail"].startswith("epsilon: ") and "\n" not in b["detail"], b
    st, _, _ = _post(s, "alice", name, "release", {"epsilon": 1e-6, "kind": "counts"})
    assert st == (200 if name == "lsat6" else 404)
    from privirt.private.accounting import MIN_EPSILON
    from privirt.serve.models import EstimateRequest, ReleaseRequest

    for model in (EstimateRequest, ReleaseRequest):
        assert model.model_json_schema()["properties"]["epsilon"]["minimum"] == MIN_EPSILON
    assert counts(s["state"])["spends"] == n0["spends"] + (name == "lsat6")


@pytest.mark.parametrize("name", ["lsat6'--", "..%2Fetc", "nosuch", "secret"])
def test_a_malformed_idempotency_key_is_checked_after_the_data_set(service, name):
    """The documented order (… the name's form → data set → Idempotency-Key): a malformed key on a
    name that is not one of the analyst's data sets gets the one 404 (it got a 422 about the key)."""
    s = service
    n0 = counts(s["state"])
    ref = _post(s, "alice", "no-such-set", "release", {"epsilon": 0.01})
    for bad in ("bad key!", "x" * 129, "a/b"):
        st, b, _ = _post(s, "alice", name, "release", {"epsilon": 0.01}, headers={"Idempotency-Key": bad})
        assert (st, b) == ref[:2], (bad, st, b)
        st, b, _ = _post(s, "alice", "lsat6", "release", {"epsilon": 0.01}, headers={"Idempotency-Key": bad})
        assert st == 422 and b["detail"].startswith("Idempotency-Key: "), b
    assert counts(s["state"]) == n0

"""Every private entry point, on replace-one-person neighbours: the statements and all output
that is not a noisy value are identical (wide and long input, with and without missing cells).

A new private entry point is added to ``ENTRY_POINTS`` with one line.
"""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import privirt
from privirt.cli import main
from privirt.private import PrivacyStatement

pytest.importorskip("mechanisms")

#: name -> callable(X, *, epsilon, delta, seed, items, n_persons); one line per entry point
ENTRY_POINTS = {
    "release_counts/gaussian": partial(privirt.release_counts, mechanism="gaussian"),
    "release_counts/laplace/sparse": partial(privirt.release_counts, mechanism="laplace", p0="auto"),
    "private_spectral/gaussian/sparse": partial(privirt.private_spectral_estimate, mechanism="gaussian", p0="auto"),
    "private_spectral/laplace": partial(privirt.private_spectral_estimate, mechanism="laplace"),
    "private_spectral/rr": partial(privirt.private_spectral_estimate, mechanism="randomized_response"),
    "private_spectral/rr/shuffled": partial(privirt.private_spectral_estimate, mechanism="randomized_response", shuffle=True),
    "release_totals": partial(privirt.release_totals),
    "private_totals_estimate": partial(privirt.private_totals_estimate, n_boot=20),
    "release_totals/mcar": partial(privirt.release_totals, missing="mcar"),
    "private_totals_estimate/mcar": partial(privirt.private_totals_estimate, n_boot=20, missing="mcar"),
    "release_2pl": partial(privirt.release_2pl),
    "private_2pl_estimate": partial(privirt.private_2pl_estimate, n_boot=20),
}
#: entry points defined on complete data only (they refuse missing cells)
COMPLETE_DATA_ONLY = {"release_totals", "private_totals_estimate", "release_2pl", "private_2pl_estimate"}


def public_view(obj, depth: int = 0):
    """Everything in a private result except its noisy values: the statement, labels,
    shapes, dtypes, the (public) comparison graph and the keys of ``info``.

    Fits computed from the noisy values (objects without a ``privacy`` statement) are
    post-processing of noise and left out.
    """
    if isinstance(obj, PrivacyStatement):
        return obj.to_dict()
    if isinstance(obj, pd.DataFrame):
        frame = (list(obj.index), list(obj.columns), [str(t) for t in obj.dtypes])
        is_graph = all(t == bool for t in obj.dtypes)  # the comparison graph: public
        return frame + ((obj.to_numpy().tolist(),) if is_graph else ())
    if isinstance(obj, pd.Series):
        return (list(obj.index), str(obj.dtype), obj.name)
    if isinstance(obj, dict):
        return sorted((str(k), v if isinstance(v, str) else type(v).__name__) for k, v in obj.items())
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if depth < 2 and hasattr(obj, "privacy") and hasattr(obj, "__dict__"):
        return {k: public_view(v, depth + 1) for k, v in sorted(vars(obj).items())}
    return type(obj).__name__


# ---------------------------------------------------------------------------------------
def _long(codes: np.ndarray, items: list[str]) -> pd.DataFrame:
    """Long (person, item, response) rows of the observed cells: a person with no
    observed cell has no rows."""
    p, j = np.nonzero(codes >= 0)
    return pd.DataFrame({"person": [f"p{k}" for k in p], "item": [items[k] for k in j],
                         "response": codes[p, j].astype(int)})


def _wide(codes: np.ndarray, items: list[str]) -> pd.DataFrame:
    return pd.DataFrame(np.where(codes >= 0, codes, np.nan), columns=items,
                        index=[f"p{k}" for k in range(codes.shape[0])])


def _run_all(codes: np.ndarray, layout: str, seed: int, epsilon: float = 1.0, delta: float = 1e-5,
             complete: bool = True):
    n, m = codes.shape
    items = [f"q{j}" for j in range(m)]
    X = _long(codes, items) if layout == "long" else _wide(codes, items)
    kw = {"items": items, "n_persons": n} if layout == "long" else {}
    return {name: public_view(fn(X, epsilon=epsilon, delta=delta, seed=seed, **kw))
            for name, fn in ENTRY_POINTS.items() if complete or name not in COMPLETE_DATA_ONLY}


@st.composite
def neighbours(draw):
    n = draw(st.integers(2, 5))
    m = draw(st.integers(2, 4))
    missing = draw(st.booleans())
    cells = st.sampled_from([0, 1, -1] if missing else [0, 1])
    rows = draw(st.lists(st.lists(cells, min_size=m, max_size=m), min_size=n, max_size=n))
    k = draw(st.integers(0, n - 1))
    other = draw(st.lists(cells, min_size=m, max_size=m))
    a = np.array(rows, dtype=np.int8)
    b = a.copy()
    b[k] = other
    return a, b, draw(st.sampled_from(["wide", "long"])), draw(st.integers(0, 2**32 - 1))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neighbours())
def test_neighbours_get_identical_statements_and_non_noisy_output(case):
    a, b, layout, seed = case
    complete = bool((a >= 0).all() and (b >= 0).all())  # both in the complete-data domain
    assert _run_all(a, layout, seed, complete=complete) == _run_all(b, layout, seed, complete=complete)


# ---------------------------------------------------------------------------------------
# issue 13.1: long input, a person with no rows
def _long_pair(n: int = 2000, m: int = 3):
    X, _, _ = privirt.simulate_rasch(n, m, seed=11)
    codes = np.asarray(X, dtype=np.int8)
    items = [f"q{j}" for j in range(m)]
    with_rows = _long(codes, items)
    without = with_rows[with_rows["person"] != "p7"]  # p7's row replaced by all-missing
    return with_rows, without, items


def test_long_input_with_a_person_without_rows_gives_identical_statements():
    a, b, items = _long_pair()
    assert a["person"].nunique() == 2000 and b["person"].nunique() == 1999
    for name, fn in ENTRY_POINTS.items():
        if name in COMPLETE_DATA_ONLY:
            # complete data only: a person without rows is an all-missing row, which these
            # refuse (input validation, before anything is computed or spent)
            assert fn(a, epsilon=2.0, delta=1e-5, seed=5, items=items, n_persons=2000).privacy.n_persons == 2000
            with pytest.raises(ValueError, match="complete data"):
                fn(b, epsilon=2.0, delta=1e-5, seed=5, items=items, n_persons=2000)
            continue
        ra = fn(a, epsilon=2.0, delta=1e-5, seed=5, items=items, n_persons=2000)
        rb = fn(b, epsilon=2.0, delta=1e-5, seed=5, items=items, n_persons=2000)
        assert public_view(ra) == public_view(rb), name
        assert ra.privacy.n_persons == 2000
    shuffled = ENTRY_POINTS["private_spectral/rr/shuffled"](b, epsilon=2.0, delta=1e-5, seed=5,
                                                           items=items, n_persons=2000).privacy
    assert shuffled.shuffle and any("n = 2000" in note for note in shuffled.notes)


def test_long_input_needs_the_public_number_of_persons(tmp_path):
    a, _, items = _long_pair(n=30)
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    for fn in ENTRY_POINTS.values():
        with pytest.raises(ValueError, match="n_persons="):
            fn(a, epsilon=1.0, items=items, ledger=ledger)
        with pytest.raises(ValueError, match="more persons than the public n_persons=29"):
            fn(a, epsilon=1.0, items=items, n_persons=29, ledger=ledger)
    assert len(ledger.spends()) == 0
    res = privirt.private_spectral_estimate(a, epsilon=1.0, items=items, n_persons=40, seed=1)
    assert res.privacy.n_persons == 40  # ten persons absent from the data: all-missing rows


def _cli(path, capsys, *extra):
    rc = main(["estimate", str(path), "--epsilon", "2", "--delta", "1e-5", "--items", "q0,q1,q2",
               "--device", "cpu", *extra])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.mark.parametrize("mechanism", ["gaussian", "randomized_response"])
def test_cli_long_input_uses_the_public_number_of_persons(tmp_path, capsys, mechanism):
    a, b, _ = _long_pair()
    paths = []
    for name, frame in (("a", a), ("b", b)):
        paths.append(tmp_path / f"{name}.csv")
        frame.to_csv(paths[-1], index=False)
    rc, _, err = _cli(paths[0], capsys, "--mechanism", mechanism)
    assert rc == 2 and "--n-persons" in err and err.count("\n") == 1
    rc, _, err = _cli(paths[0], capsys, "--mechanism", mechanism, "--n-persons", "1999", "--seed", "1")
    assert rc == 2 and "more persons" in err
    assert main(["estimate", str(paths[0]), "--n-persons", "2000"]) == 2  # a private-only option
    assert "--n-persons needs --epsilon" in capsys.readouterr().err
    outputs, payloads = [], []
    extra = ["--mechanism", mechanism, "--n-persons", "2000", "--seed", "4"]
    if mechanism == "randomized_response":
        extra.append("--shuffle")
    for k, path in enumerate(paths):
        out_json = tmp_path / f"out{k}.json"
        rc, out, _ = _cli(path, capsys, *extra, "--out", str(out_json))
        assert rc == 0
        outputs.append([line for line in out.splitlines() if not line.startswith("q")])  # beta rows
        payload = json.loads(out_json.read_text())
        payload["items"] = [r["item"] for r in payload["items"]]
        payloads.append(payload)
    assert outputs[0] == outputs[1] and payloads[0] == payloads[1]
    assert "2000 persons" in outputs[0][0] and payloads[0]["n_persons"] == 2000

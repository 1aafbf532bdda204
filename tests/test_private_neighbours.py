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
    "release_2pl/mcar": partial(privirt.release_2pl, missing="mcar"),
    "private_2pl_estimate/mcar": partial(privirt.private_2pl_estimate, n_boot=20, missing="mcar"),
}
#: entry points defined on complete data only (they refuse missing cells)
COMPLETE_DATA_ONLY = {"release_totals", "private_totals_estimate", "release_2pl", "private_2pl_estimate"}


#: ``info`` entries whose (string) value is chosen from the noisy release, post-processing like
#: the fits: the private 2PL's interval route, picked from how much of log a's precision the
#: noisy fit owes to the release, the matrix its Laplace intervals come from (Newton, or
#: Gauss–Newton where the noisy fit's Newton matrix is indefinite) and how its bootstrap refits
#: (by m only where the release holds the discriminations) (``docs/private_2pl.md`` §3).  Their
#: keys are still compared.
CHOSEN_FROM_NOISE = {"intervals", "laplace_curvature", "bootstrap_refits"}


def public_view(obj, depth: int = 0):
    """Everything in a private result except its noisy values: the statement, labels,
    shapes, dtypes, the (public) comparison graph and the keys of ``info``.

    Fits computed from the noisy values (objects without a ``privacy`` statement) are
    post-processing of noise and left out.
    """
    if isinstance(obj, PrivacyStatement):
        return obj.to_dict()
    if isinstance(obj, pd.DataFrame):
        frame = (_labels(obj.index), _labels(obj.columns), [str(t) for t in obj.dtypes])
        is_graph = all(t == bool for t in obj.dtypes)  # the comparison graph: public
        return frame + ((obj.to_numpy().tolist(),) if is_graph else ())
    if isinstance(obj, pd.Series):
        return (_labels(obj.index), str(obj.dtype), obj.name)
    if isinstance(obj, dict):
        return sorted((str(k), v if isinstance(v, str) and k not in CHOSEN_FROM_NOISE else type(v).__name__)
                      for k, v in obj.items())
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if depth < 2 and hasattr(obj, "privacy") and hasattr(obj, "__dict__"):
        return {k: public_view(v, depth + 1) for k, v in sorted(vars(obj).items())}
    return type(obj).__name__


def _labels(index: pd.Index) -> tuple:
    """Labels with their types (``5`` and ``"5"`` differ, as they do in a JSON file)."""
    return (str(index.dtype), [(type(x).__name__, str(x)) for x in index])


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


# ---------------------------------------------------------------------------------------
# issue 21.1: labels of mixed types.  A long table's item column is read from its rows, so a
# reader that infers types gives 5 or "5" depending on who is in the data.  The private paths
# read person and item labels as text, match the public list by text and take every output
# label from the public list: neighbours get the same labels (and types) and the same refusals.
LABEL_SETS = {
    "numeric": [1, 2, 3, 4],
    "numeric-text": ["1", "2", "3", "4"],
    "mixed-text": ["1", "2", "3", "x"],
    "mixed": [1, 2, 3, "x"],
}
#: person labels: numbers, numeric-looking text ("01" is not "1") and text
PERSONS = ["x0", 1, "01", 2, 3, 4, 5, 6]


def _label_pair(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Neighbours (8 persons × 4 items) that differ in person 0 ("x0"), who in "dropped" and
    "removed" is the only one to answer the last item: "changed" flips person 0's answers
    (complete data), "dropped" removes that one answer, "removed" all of person 0's rows."""
    rng = np.random.default_rng(3)
    a = (rng.random((8, 4)) < 0.5).astype(np.int8)
    a[:, 0], a[:4, 1] = [1, 0, 1, 0, 1, 1, 0, 0], [1, 0, 0, 1]  # every item has both answers
    b = a.copy()
    if kind == "changed":
        b[0] = 1 - a[0]
        return a, b
    a[1:, 3] = -1
    b[:, 3] = -1
    if kind == "removed":
        b[0] = -1
    return a, b


def _long_labelled(codes: np.ndarray, labels: list) -> pd.DataFrame:
    """The long table a user would build: pandas infers each column's dtype from its rows."""
    p, j = np.nonzero(codes >= 0)
    return pd.DataFrame({"person": [PERSONS[k] for k in p], "item": [labels[k] for k in j],
                         "response": codes[p, j].astype(int)})


def _as_input(frame: pd.DataFrame, channel: str, path) -> object:
    if channel == "frame":
        return frame
    frame.to_csv(path.with_suffix(".csv"), index=False)
    if channel == "csv":
        return path.with_suffix(".csv")
    # a Parquet file written from the CSV as read by pandas: the item column's type inferred
    # from the rows (persons kept as text: "01" and 1 would be one person)
    pd.read_csv(path.with_suffix(".csv"), dtype={"person": str}).to_parquet(path.with_suffix(".parquet"))
    return path.with_suffix(".parquet")


def _item_index(res) -> pd.Index:
    for name in ("beta", "totals", "Y"):
        if isinstance(getattr(res, name, None), (pd.Series, pd.DataFrame)):
            return getattr(res, name).index
    raise AssertionError(f"no item labels on {type(res).__name__}")


def _outcome(fn, X, public):
    """The public view of a release, or ``"refused"`` (a refusal reaches the data holder only,
    but it too must not tell neighbours apart when both are in the declared domain)."""
    try:
        res = fn(X, epsilon=2.0, delta=1e-5, seed=5, items=public, n_persons=len(PERSONS))
    except ValueError:
        return "refused"
    assert _labels(_item_index(res)) == _labels(pd.Index(public))  # the public list, as given
    return public_view(res)


#: the entry points without bootstrap intervals (their labels are the point estimate's)
FAST = {name: partial(fn, n_boot=0) if name.startswith(("private_spectral/gaussian", "private_spectral/laplace",
                                                        "private_totals")) else fn
        for name, fn in ENTRY_POINTS.items()}


def _check_label_neighbours(tmp_path, channel: str, public: list, entry_points: dict) -> None:
    if channel == "parquet":
        pytest.importorskip("pyarrow")
    for kind in ("changed", "dropped", "removed"):
        a, b = _label_pair(kind)
        Xa = _as_input(_long_labelled(a, public), channel, tmp_path / f"{kind}-a")
        Xb = _as_input(_long_labelled(b, public), channel, tmp_path / f"{kind}-b")
        for name, fn in entry_points.items():
            got_a, got_b = _outcome(fn, Xa, public), _outcome(fn, Xb, public)
            assert got_a == got_b, (kind, name)
            # in the declared domain, both neighbours are released
            in_domain = kind == "changed" or name not in COMPLETE_DATA_ONLY
            assert (got_a != "refused") == in_domain, (kind, name)


@pytest.mark.slow
@pytest.mark.parametrize("channel, label_set", [("frame", "mixed"), ("csv", "mixed-text"),
                                                ("parquet", "mixed")])
def test_every_entry_point_gives_neighbours_identical_labels_and_refusals(tmp_path, channel, label_set):
    _check_label_neighbours(tmp_path, channel, LABEL_SETS[label_set], FAST)


@pytest.mark.parametrize("channel", ["frame", "csv", "parquet"])
@pytest.mark.parametrize("label_set", list(LABEL_SETS))
def test_labels_of_mixed_types_are_read_as_text(tmp_path, channel, label_set):
    cheap = ("release_counts/laplace/sparse", "private_spectral/rr", "release_totals")
    _check_label_neighbours(tmp_path, channel, LABEL_SETS[label_set], {k: FAST[k] for k in cheap})


def test_public_items_match_the_data_by_text_and_label_the_output():
    """A public item list of numbers matches a text column and the other way round; the
    output carries the public labels with their types.  Labels are text: "01" is not "1"."""
    a, _ = _label_pair("changed")
    text = _long_labelled(a, ["1", "2", "3", "4"])
    for public in ([1, 2, 3, 4], ["1", "2", "3", "4"], [4, "3", 2, "1"]):
        res = privirt.release_counts(text, epsilon=1.0, items=public, n_persons=8, seed=1)
        assert _labels(res.Y.index) == _labels(pd.Index(public))
        assert _labels(res.Y.columns) == _labels(pd.Index(public))
    with pytest.raises(ValueError, match="not in the public item set"):
        privirt.release_counts(text, epsilon=1.0, items=["01", "2", "3", "4"], n_persons=8, seed=1)
    with pytest.raises(ValueError, match="twice"):  # 1 and "1" are the same label as text
        privirt.release_counts(text, epsilon=1.0, items=[1, "1", "2", "3", "4"], n_persons=8, seed=1)


def test_tuple_item_labels_as_the_public_item_set():
    """Tuple labels in ``items=`` are labels, not the levels of a MultiIndex (pandas' reading
    of a list of tuples, which crashed with NotImplementedError in every entry point); the
    release is over exactly those items, in that order, and the non-private counts agree."""
    labels = [("math", 1), ("math", 2), ("read", 1)]
    X = pd.DataFrame([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]],
                     columns=pd.Index(labels, tupleize_cols=False))
    public = labels[::-1]
    for name, f in {"release_counts": privirt.release_counts,
                    "private_spectral_estimate": privirt.private_spectral_estimate,
                    "release_totals": privirt.release_totals,
                    "private_totals_estimate": privirt.private_totals_estimate,
                    "release_2pl": privirt.release_2pl,
                    "private_2pl_estimate": privirt.private_2pl_estimate}.items():
        res = f(X, epsilon=1.0, seed=1, items=public)
        assert not isinstance(res.items, pd.MultiIndex), name
        assert list(res.items) == public, name
    res = privirt.release_counts(X, epsilon=1.0, seed=1, items=public + [("read", 2)])
    assert list(res.Y.index) == list(res.Y.columns) == public + [("read", 2)]
    totals = privirt.sufficient_statistics(X, pairwise=False, items=public).totals
    assert not isinstance(totals.index, pd.MultiIndex) and list(totals.index) == public
    assert totals.tolist() == [2, 2, 2]
    with pytest.raises(ValueError, match="not in the public item set"):
        privirt.release_counts(X, epsilon=1.0, seed=1, items=labels[:2])


def test_long_csv_reads_person_labels_as_text(tmp_path):
    """Persons "1" and "01" are two persons (a type-inferring reader makes both 1 and refuses
    a repeated answer), and a label "NA" is text, not a missing label."""
    path = tmp_path / "p.csv"
    path.write_text("person,item,response\n1,a,1\n01,a,0\n1,NA,0\n01,NA,1\nNA,a,1\n")
    res = privirt.release_counts(path, epsilon=1.0, items=["a", "NA"], n_persons=3, seed=1)
    assert list(res.Y.index) == ["a", "NA"]
    path.write_text("person,item,response\n1,a,1\n,a,0\n")
    with pytest.raises(ValueError, match="missing person or item label"):
        privirt.release_counts(path, epsilon=1.0, items=["a", "b"], n_persons=3, seed=1)


#: CLI runs: method options, and whether the method is defined on complete data only
CLI_METHODS = {
    "totals": (["--method", "totals"], True),
    "totals/mcar": (["--method", "totals", "--missing", "mcar"], False),
    "spectral/gaussian": (["--method", "spectral"], False),
    "spectral/laplace": (["--mechanism", "laplace"], False),
    "spectral/rr": (["--mechanism", "randomized_response"], False),
    "spectral/rr/shuffled": (["--mechanism", "randomized_response", "--shuffle"], False),
}


def _cli_view(tmp_path, path, extra: list, out_file) -> tuple:
    """Everything a CLI run shows except its noisy values: the exit code, stdout with each
    table row cut to its label, and the ``--out`` file (JSON: all but the numbers of the
    rows; CSV: the statement lines and the item column, as text)."""
    import contextlib
    import csv
    import io

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = main(["estimate", str(path), "--epsilon", "2", "--delta", "1e-5", "--items", "1,2,3,x",
                   "--n-persons", str(len(PERSONS)), "--seed", "4", "--device", "cpu", *extra,
                   "--out", str(out_file)])
    if rc != 0:
        assert stderr.getvalue().count("\n") == 1 and not out_file.exists()
        return ("refused", rc)
    lines = stdout.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if " estimate" in line) + 2
    shown = lines[:start] + [line.split()[0] for line in lines[start:start + 4]] + lines[start + 4:]
    assert shown[start:start + 4] == ["1", "2", "3", "x"]
    if out_file.suffix == ".json":
        payload = json.loads(out_file.read_text())
        rows = payload.pop("items")
        assert [r["item"] for r in rows] == ["1", "2", "3", "x"]  # the public labels, as text
        written = (payload, [sorted(r) for r in rows], [r["item"] for r in rows])
    else:
        text = out_file.read_text().splitlines()
        comments = [line for line in text if line.startswith("#")]
        table = list(csv.reader(line for line in text if not line.startswith("#")))
        assert [row[0] for row in table] == ["item", "1", "2", "3", "x"]
        written = (comments, table[0], [row[0] for row in table])
    out_file.unlink()
    return rc, shown, written


@pytest.mark.slow
@pytest.mark.parametrize("channel, out", [("csv", ".json"), ("parquet", ".csv")])
def test_cli_neighbours_with_mixed_labels_show_and_write_the_same(tmp_path, channel, out):
    """The same for every output of ``privirt estimate``: stdout (table labels and the
    statement), the ``--out`` file (JSON or CSV) and refusals (exit code, one line)."""
    if channel == "parquet":
        pytest.importorskip("pyarrow")
    public = ["1", "2", "3", "x"]
    for kind in ("changed", "removed"):
        a, b = _label_pair(kind)
        Xa = _as_input(_long_labelled(a, public), channel, tmp_path / f"{kind}-a")
        Xb = _as_input(_long_labelled(b, public), channel, tmp_path / f"{kind}-b")
        for name, (extra, complete_only) in CLI_METHODS.items():
            got_a = _cli_view(tmp_path, Xa, extra, tmp_path / f"out{out}")
            got_b = _cli_view(tmp_path, Xb, extra, tmp_path / f"out{out}")
            assert got_a == got_b, (kind, name)
            assert (got_a[0] == 0) == (kind == "changed" or not complete_only), (kind, name)


# ---------------------------------------------------------------------------------------
# issue 21.2: every statement names the input domain of its guarantee
def test_every_statement_names_the_input_domain_and_who_sees_refusals():
    from privirt.private.statement import DOMAIN_ANY, DOMAIN_COMPLETE

    a, _ = _label_pair("changed")
    for name, fn in FAST.items():
        st = fn(_wide(a, ["q0", "q1", "q2", "q3"]), epsilon=2.0, delta=1e-5, seed=1).privacy
        want = DOMAIN_COMPLETE if name in COMPLETE_DATA_ONLY else DOMAIN_ANY
        assert st.domain == want and st.to_dict()["domain"] == want, name
        text = str(st)
        assert f"input domain: {want}" in text and "for the data holder only, not part of the release" in text
    assert "{0, 1}^m" in DOMAIN_COMPLETE and "{0, 1, missing}^m" in DOMAIN_ANY


def test_privacy_doc_section_1_names_the_domains_and_corrects_add_remove():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "privacy.md").read_text(encoding="utf-8")
    section = doc[doc.index("## 1."):doc.index("## 2.")]
    for phrase in ("{0, 1, missing}^m", "`{0, 1}^m`", "Refusals and warnings go to the data holder only",
                   "**m + 1**", "**2m + 1**", "does **not**"):
        assert phrase in section, phrase
    assert "every sensitivity\nbelow halves" not in doc


def test_neighbours_whose_noisy_fits_pick_different_interval_routes():
    """The example hypothesis found (s10): the private 2PL's route (Laplace or bootstrap) is
    chosen from the noisy fit, so neighbours may differ in it; that is post-processing."""
    a = np.array([[1, 0, 0, 0], [1, 0, 0, 1]], dtype=np.int8)
    b = np.array([[0, 1, 0, 1], [1, 0, 0, 1]], dtype=np.int8)
    assert _run_all(a, "wide", 1613619390) == _run_all(b, "wide", 1613619390)

"""The response data layer: formats, round trips with labels, validation messages, empty policy."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.exceptions import EmptyResponsesWarning
from privirt.data.responses import Responses, as_responses, private_responses
from tests._memory import traced_peak


@pytest.fixture
def wide():
    return pd.DataFrame(
        {"q1": [1, 0, np.nan], "q2": [0, 1, 1], "q3": [np.nan, 1, 0]},
        index=pd.Index(["ann", "bob", "cy"], name="person"),
    )


def test_array_codes_and_properties():
    X = as_responses(np.array([[1, 0, np.nan], [0, 1, 1]]))
    assert X.codes.dtype == np.int8
    np.testing.assert_array_equal(X.codes, [[1, 0, -1], [0, 1, 1]])
    assert X.n_persons == 2 and X.n_items == 3 and X.has_missing
    assert X.n_observed == 5
    np.testing.assert_array_equal(X.correct(), [[1, 0, 0], [0, 1, 1]])
    np.testing.assert_array_equal(X.observed, [[True, True, False], [True, True, True]])
    f = X.to_float()
    assert np.isnan(f[0, 2]) and f[1, 2] == 1.0
    assert list(X.persons) == [0, 1] and list(X.items) == [0, 1, 2]


def test_bool_and_int_arrays():
    assert as_responses(np.array([[True, False]])).codes.tolist() == [[1, 0]]
    assert as_responses(np.array([[1, 0]], dtype=np.int64)).codes.tolist() == [[1, 0]]


def test_wide_frame_keeps_labels(wide):
    X = as_responses(wide)
    assert list(X.persons) == ["ann", "bob", "cy"] and list(X.items) == ["q1", "q2", "q3"]
    back = X.to_frame()
    pd.testing.assert_frame_equal(back, wide.astype(float), check_names=False)


def test_long_round_trip(wide):
    X = as_responses(wide)
    long = X.to_long()
    assert list(long.columns) == ["person", "item", "response"] and len(long) == 7
    Y = as_responses(long)
    assert set(Y.persons) == set(X.persons) and set(Y.items) == set(X.items)
    pd.testing.assert_frame_equal(
        Y.to_frame().loc[X.persons, X.items], X.to_frame(), check_names=False
    )


def test_csv_round_trips_wide_and_long(tmp_path, wide):
    path = tmp_path / "wide.csv"
    wide.to_csv(path)
    X = as_responses(path)
    assert list(X.persons) == ["ann", "bob", "cy"] and list(X.items) == ["q1", "q2", "q3"]
    np.testing.assert_array_equal(X.codes, as_responses(wide).codes)
    lpath = tmp_path / "long.csv"
    as_responses(wide).to_long().to_csv(lpath, index=False)
    L = as_responses(lpath, format="long")
    assert L.n_observed == 7
    assert L.to_frame().loc["cy", "q2"] == 1.0


def test_parquet_round_trip(tmp_path, wide):
    pytest.importorskip("pyarrow")
    path = tmp_path / "wide.parquet"
    wide.reset_index().to_parquet(path)
    X = as_responses(path)
    assert list(X.persons) == ["ann", "bob", "cy"]
    np.testing.assert_array_equal(X.codes, as_responses(wide).codes)


def test_parquet_keeps_labels_stored_as_its_index(tmp_path, wide):
    # DataFrame.to_parquet stores a labelled index; reading it back replaced the labels
    # by 0 … n-1
    pytest.importorskip("pyarrow")
    for name in ("person", "voter", None):
        path = tmp_path / f"idx_{name}.parquet"
        wide.rename_axis(name).to_parquet(path)
        X = as_responses(path)
        assert list(X.persons) == ["ann", "bob", "cy"]
        np.testing.assert_array_equal(X.codes, as_responses(wide).codes)


def test_person_col_names_the_index_a_parquet_file_restored(tmp_path, wide):
    # a table written with its labels in a named index comes back with them as the index:
    # person_col="member" was refused as "not a column of the table" (rollcall review)
    pytest.importorskip("pyarrow")
    path = tmp_path / "members.parquet"
    wide.rename_axis("member").to_parquet(path)
    X = as_responses(path, person_col="member")
    assert list(X.persons) == ["ann", "bob", "cy"] and list(X.items) == ["q1", "q2", "q3"]
    np.testing.assert_array_equal(X.codes, as_responses(wide).codes)
    with pytest.raises(ValueError, match="person_col 'voter' is not a column"):
        as_responses(path, person_col="voter")


def test_invalid_value_names_value_person_and_item(wide):
    bad = wide.copy()
    bad.loc["bob", "q3"] = 2
    with pytest.raises(ValueError) as exc:
        as_responses(bad)
    msg = str(exc.value)
    assert "2" in msg and "'bob'" in msg and "'q3'" in msg and "row 1" in msg and "column 2" in msg


def test_invalid_text_value(wide):
    bad = wide.astype(object)
    bad.loc["ann", "q2"] = "yes"
    with pytest.raises(ValueError, match="'yes'.*'ann'.*'q2'"):
        as_responses(bad)


def test_text_in_a_csv_column_names_the_text_not_a_number(tmp_path):
    # one word makes pandas read the whole column as text: the message must name the word
    # and its row, not the first (numeric-looking) cell of the column
    path = tmp_path / "r.csv"
    path.write_text("person,q1,q2\nann,1,0\nbob,0,yes\ncy,1,1\n")
    with pytest.raises(ValueError, match="'yes' for person 'bob' .row 1.*'q2'"):
        as_responses(path)


def test_text_in_a_long_response_column_names_person_item_and_row(tmp_path):
    long = pd.DataFrame({"person": ["a", "b", "c"], "item": ["x", "y", "x"],
                         "response": [1, "yes", 0]})
    with pytest.raises(ValueError, match="'yes' for person 'b', item 'y' .row 1 of the long"):
        as_responses(long)
    path = tmp_path / "long.csv"
    path.write_text("person,item,response\na,x,1\nb,y,no\nc,x,0\n")
    with pytest.raises(ValueError, match="'no' for person 'b', item 'y' .row 1 of the long"):
        as_responses(path)


def test_a_text_label_column_among_the_items_is_named_as_one_not_as_answers(tmp_path):
    """A roll-call file's 'state' column (ALABAMA, ...) got "convert text such as 'yes'/'no' to
    0/1 first": wrong advice for a label column; text answers (yes/no) keep that advice."""
    path = tmp_path / "votes.csv"
    states = ["ALABAMA", "ALASKA", "ARIZONA", "ALABAMA", "OHIO", "IOWA"]
    for column, values in (("state", states), ("party", ["D", "R"] * 3)):  # many texts; no answer word
        path.write_text(f"member,{column},v1,v2\n" + "".join(
            f"m{i},{v},{i % 2},{1 - i % 2}\n" for i, v in enumerate(values)))
        with pytest.raises(ValueError) as got:
            as_responses(path, person_col="member")
        msg = str(got.value)
        assert f"item {column!r} (column 0)" in msg and "'yes'/'no'" not in msg, msg
        assert "person_col" not in msg, msg  # the person column is named: no hint to name another
        assert msg.endswith(f"column {column!r} looks like a label column, not answers: remove it "
                            f"before the table is read with drop_cols=[{column!r}] (CLI: --drop-cols "
                            f"{column})"), msg
        got = as_responses(path, person_col="member", drop_cols=[column])  # as the hint says
        assert got.items.tolist() == ["v1", "v2"] and got.persons.tolist() == [f"m{i}" for i in range(6)]
    path.write_text("justice,v1\nRehnquist,1\nStevens,0\nRehnquist,1\n")  # labels, one repeated
    with pytest.raises(ValueError) as got:
        as_responses(path)
    assert str(got.value).endswith("name it with person_col='justice' (CLI: --person-col justice); "
                                   "otherwise column 'justice' looks like a label column, not "
                                   "answers: remove it before the table is read with "
                                   "drop_cols=['justice'] (CLI: --drop-cols justice)"), got.value
    path.write_text("member,q,v1\n" + "".join(f"m{i},{a},{i % 2}\n"
                                               for i, a in enumerate(["yes", "no", "Yes", "1", "0", "no"])))
    with pytest.raises(ValueError, match=r"invalid response 'yes' .*; convert text such as 'yes'/'no' to 0/1 first$"):
        as_responses(path, person_col="member")


def test_drop_cols_removes_columns_before_reading_and_refuses_unknown_or_person_columns(tmp_path):
    """drop_cols (CLI: --drop-cols) removes label columns beside the person column; a name that
    is not a column is refused listing the columns, the person column and non-tables too."""
    frame = pd.DataFrame({"who": ["a", "b", "c"], "party": ["D", "R", "D"], "q1": [1, 0, 1],
                          "q2": [0, 1, np.nan]})
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    for data in (frame, path):
        for fn in (as_responses, private_responses):
            got = fn(data, person_col="who", drop_cols=["party"])
            assert got.items.tolist() == ["q1", "q2"] and got.persons.tolist() == ["a", "b", "c"]
        with pytest.raises(ValueError, match=r"^drop_cols names 'state', not a column of the table; "
                                             r"name one of its columns: who, party, q1, q2$"):
            as_responses(data, person_col="who", drop_cols=["party", "state"])
        with pytest.raises(ValueError, match="^drop_cols names the person column 'who': leave it out"):
            as_responses(data, person_col="who", drop_cols=["who"])
    with pytest.raises(ValueError, match="^drop_cols names columns of a table"):
        as_responses(np.ones((2, 2)), drop_cols=["x"])


def test_a_numeric_id_first_column_gets_the_person_col_hint_as_a_text_one_does(tmp_path):
    """Numeric person ids (1, 2, 3) read as an item got only 'invalid response 2.0'; text ids got the hint."""
    hint = "if column 'id' holds person labels, name it with person_col='id' (CLI: --person-col id)"
    for ids in ("1,2,3", "s1,s2,s3"):
        path = tmp_path / "r.csv"
        path.write_text("id,q1,q2\n" + "".join(f"{p},{a}\n" for p, a in zip(ids.split(","), ("1,0", "0,1", "1,1"))))
        with pytest.raises(ValueError, match="item 'id' .column 0.") as exc:
            as_responses(path)
        assert hint in str(exc.value), (ids, str(exc.value))
    # a first column of repeated values, and a later column, are answers with a wrong value: no hint
    for text in ("q0,q1\n1,0\n2,1\n2,0\n", "q0,q1\n1,0\n0,2\n1,3\n"):
        path.write_text(text)
        with pytest.raises(ValueError, match=r"responses must be 0, 1 or missing \(NaN\)$"):
            as_responses(path)
    from privirt.cli._words import cli_text

    assert cli_text(hint) == "if column 'id' holds person labels, name it with --person-col id"


def test_duplicate_item_columns_in_a_csv_header_are_rejected(tmp_path):
    # pandas would silently rename the second column to 'q1.1'
    path = tmp_path / "r.csv"
    path.write_text("person,q1,q1,q2\nann,1,0,1\nbob,0,1,1\n")
    with pytest.raises(ValueError, match="duplicate column .q1."):
        as_responses(path)


def test_invalid_object_array_value_names_row_and_column():
    X = np.array([[1, 0], [None, "yes"]], dtype=object)
    with pytest.raises(ValueError, match=r"'yes' for person 1 \(row 1\), item 1 \(column 1\)"):
        as_responses(X)


def test_invalid_long_rows():
    long = pd.DataFrame({"person": ["a", "a"], "item": ["x", "y"], "response": [1, 5]})
    with pytest.raises(ValueError, match="invalid response 5 for person 'a', item 'y' .row 1"):
        as_responses(long)
    dup = pd.DataFrame({"person": ["a", "a"], "item": ["x", "x"], "response": [1, 0]})
    with pytest.raises(ValueError, match="more than once"):
        as_responses(dup)


@pytest.mark.parametrize("flag", ["no", "yes", 1, 0, 1.5, [True]])
def test_labels_as_text_must_be_true_false_or_none(flag):
    # any truthy object was taken: labels_as_text="no" turned item labels 10, 20 into text
    long = pd.DataFrame({"person": [1, 1, 2, 2], "item": [10, 20, 10, 20],
                         "response": [1, 0, 0, 1]})
    with pytest.raises(ValueError, match=r"^labels_as_text must be True or False, got "):
        as_responses(long, labels_as_text=flag)
    assert list(as_responses(long, labels_as_text=np.bool_(False)).items) == [10, 20]
    assert list(as_responses(long, labels_as_text=None).items) == [10, 20]


@pytest.mark.parametrize(
    "data",
    [
        pd.DataFrame([[1j, 1], [1 + 5j, 0], [2j, 1]]),
        pd.DataFrame({"person": ["a", "a", "b"], "item": ["x", "y", "x"],
                      "response": [1j, 1 + 0j, 1 + 2j]}),
    ],
    ids=["wide", "long"],
)
def test_complex_responses_in_a_table_are_refused_as_in_an_array(data):
    # pandas counts complex as numeric and the float cast dropped the imaginary part
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning: refused before any cast
        with pytest.raises(ValueError, match="must be numeric 0/1 .* got dtype complex128"):
            as_responses(data)


@pytest.mark.parametrize(
    "data, match",
    [
        (np.array([1, 0, 1]), "2-D"),
        (np.zeros((0, 3)), "empty"),
        (np.array([[0.5, 1]]), "invalid response 0.5"),
        (pd.Series([1, 0]), "one-dimensional"),
    ],
)
def test_shape_and_value_errors(data, match):
    with pytest.raises(ValueError, match=match):
        as_responses(data)


def test_text_array_error_names_value_person_and_item():
    # a numpy string array was refused by its dtype alone, naming no value or cell
    X = np.array([["1", "0"], ["yes", "1"]])
    with pytest.raises(ValueError, match=r"'yes' for person 1 \(row 1\), item 0 \(column 0\)"):
        as_responses(X)
    with pytest.raises(ValueError, match=r"invalid response '1' for person 0 \(row 0\)"):
        as_responses(np.array([["1", "0"]]))


def test_missing_file_and_bad_suffix(tmp_path):
    with pytest.raises(FileNotFoundError):
        as_responses(tmp_path / "nope.csv")
    path = tmp_path / "x.xlsx"
    path.write_text("a")
    with pytest.raises(ValueError, match="suffix"):
        as_responses(path)


def test_duplicate_labels_rejected_naming_where_and_the_remedy():
    """The refusal said only "duplicate person label 'a'": no rows, nothing to do."""
    frame = pd.DataFrame([[1, 0], [0, 1], [1, 1]], index=["a", "b", "a"], columns=["x", "y"])
    with pytest.raises(ValueError) as got:
        as_responses(frame)
    assert str(got.value) == ("duplicate person label 'a' (rows 0 and 2): make the person labels "
                              "unique or merge the rows")
    with pytest.raises(ValueError) as got:
        as_responses(pd.DataFrame([[1, 0, 1]], columns=["x", "y", "x"]))
    assert str(got.value) == ("duplicate item label 'x' (columns 0 and 2): make the item labels "
                              "unique: rename or drop one of the columns")


def test_missing_person_label_in_a_wide_table_is_rejected(tmp_path):
    # the long layout refused a missing label; the wide one kept a person labelled NaN
    path = tmp_path / "r.csv"
    path.write_text("person,q1,q2\nann,1,0\n,0,1\n")
    with pytest.raises(ValueError, match="missing person label .row 1"):
        as_responses(path)
    frame = pd.DataFrame([[1, 0], [0, 1]], index=["a", None], columns=["x", np.nan])
    with pytest.raises(ValueError, match="missing person label .row 1"):
        as_responses(frame)
    with pytest.raises(ValueError, match="missing item label .column 1"):
        as_responses(frame.set_axis(["a", "b"], axis=0))


def test_empty_policy_drop_error_keep():
    X = np.array([[1, np.nan, 0], [np.nan, np.nan, np.nan], [0, np.nan, 1]])
    with pytest.warns(EmptyResponsesWarning, match="1 person.*1 item"):
        d = as_responses(X, empty="drop")
    assert d.shape == (2, 2) and list(d.persons) == [0, 2] and list(d.items) == [0, 2]
    with pytest.raises(ValueError, match="no response"):
        as_responses(X, empty="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = as_responses(X, empty="keep")
    assert k.shape == (3, 3)
    with pytest.raises(ValueError, match="empty must be"):
        as_responses(X, empty="ignore")


def test_responses_passthrough_and_subset(wide):
    X = as_responses(wide)
    assert as_responses(X) is X
    sub = X.subset(persons=[0, 2], items=[1, 2])
    assert isinstance(sub, Responses)
    assert list(sub.persons) == ["ann", "cy"] and list(sub.items) == ["q2", "q3"]
    np.testing.assert_array_equal(sub.codes, X.codes[[0, 2]][:, [1, 2]])


def test_constructor_checks_the_codes():
    # the docstring says the constructor checks the codes: a 5 was accepted and then
    # counted as "answered" but neither right nor wrong
    with pytest.raises(ValueError, match="codes"):
        Responses(np.array([[1, 5], [0, 1]], dtype=np.int8), pd.RangeIndex(2), pd.RangeIndex(2))
    with pytest.raises(ValueError, match="codes"):
        Responses(np.array([[1, -2]], dtype=np.int8), pd.RangeIndex(1), pd.RangeIndex(2))
    ok = Responses(np.array([[1, -1], [0, 1]], dtype=np.int8), pd.RangeIndex(2), pd.RangeIndex(2))
    assert ok.n_observed == 3


def test_package_exports():
    assert privirt.as_responses is as_responses
    assert privirt.pairwise_counts.__module__ == "privirt.stats.api"


def test_csv_without_a_header_row_is_refused(tmp_path):
    """A headerless file would lose its first person to the item labels: refused, saying so."""
    path = tmp_path / "noheader.csv"
    path.write_text("1,0,1\n0,0,1\n1,1,\n")
    with pytest.raises(ValueError, match="looks like responses, not item labels"):
        as_responses(path)
    path.write_text("1,0\n0,1\n1,1\n")  # two distinct 'labels': no duplicate to catch it
    with pytest.raises(ValueError, match="header row"):
        as_responses(path)
    path.write_text("q1,q2\n0,1\n1,1\n")
    assert list(as_responses(path).items) == ["q1", "q2"]


def test_parquet_with_numeric_text_reads_like_the_same_csv(tmp_path):
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"a": ["0", "1", "1", ""], "b": ["1", "0", "1", "1.0"]})
    frame.to_parquet(tmp_path / "t.parquet")
    frame.to_csv(tmp_path / "t.csv", index=False)
    from_parquet = as_responses(tmp_path / "t.parquet")
    from_csv = as_responses(tmp_path / "t.csv")
    np.testing.assert_array_equal(from_parquet.codes, from_csv.codes)
    with pytest.raises(ValueError, match="invalid response 'yes'"):
        as_responses(pd.DataFrame({"a": ["0", "yes"], "b": ["1", "0"]}))


def test_long_table_with_other_response_column_name(tmp_path):
    path = tmp_path / "long.csv"
    pd.DataFrame({"person": [1, 1, 2, 2], "item": ["a", "b", "a", "b"], "answer": [0, 1, 1, 0]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"looks long.*rename 'answer' to 'response'.*format='long'"):
        as_responses(path)
    resp = as_responses(path, format="long")
    assert list(resp.items) == ["a", "b"] and resp.codes.tolist() == [[0, 1], [1, 0]]


def test_pattern_table_weights_expand_to_persons():
    from privirt.data.datasets import dataset_path

    path = dataset_path("lsat6")
    resp = as_responses(path, weights="frequency")
    expected = privirt.load_dataset("lsat6")
    assert resp.shape == (1000, 5) and list(resp.items) == list(expected.columns)
    np.testing.assert_array_equal(resp.codes, expected.to_numpy())
    assert resp.persons[0] == "p0001"
    with pytest.raises(ValueError, match=r"weights='frequency' \(CLI: --weights-col frequency\)"):
        as_responses(path)
    # weights as one integer per row, on an array
    X = np.array([[1, 0], [0, 1], [1, 1]])
    r = as_responses(X, weights=[2, 0, 1])
    assert r.codes.tolist() == [[1, 0], [1, 0], [1, 1]]


@pytest.mark.parametrize("weights,match", [([1, -1], "non-negative whole"), ([1.5, 1], "non-negative whole"),
                                           ([1], "one per row"), ([0, 0], "zero persons"),
                                           ("freq", "names a column")])
def test_bad_weights_are_one_line_errors(weights, match):
    with pytest.raises(ValueError, match=match):
        as_responses(np.array([[1, 0], [0, 1]]), weights=weights)


def test_weights_column_must_exist_and_table_must_be_wide():
    frame = pd.DataFrame({"a": [1, 0], "b": [0, 1], "n": [3, 4]})
    assert as_responses(frame, weights="n").n_persons == 7
    with pytest.raises(ValueError, match="not a column"):
        as_responses(frame, weights="count")
    with pytest.raises(ValueError, match="wide pattern tables"):
        as_responses(frame, weights="n", format="long")


def test_an_empty_item_label_in_a_csv_header_is_rejected(tmp_path):
    # pandas would name it 'Unnamed: 1'; an empty first cell is the person-label column
    path = tmp_path / "r.csv"
    path.write_text("a,,b\n1,0,1\n0,1,1\n")
    with pytest.raises(ValueError, match=r"column 2 of the header of .*r\.csv is empty"):
        as_responses(path)
    path.write_text(",a,b\np0,1,0\np1,0,1\n")
    r = as_responses(path)
    assert list(r.items) == ["a", "b"] and list(r.persons) == ["p0", "p1"]


def test_labels_equal_as_text_are_rejected():
    # labels are compared as text downstream (files, --items, the service)
    frame = pd.DataFrame([[1, 0, 1], [0, 1, 1]], columns=[5, "5", "x"])
    with pytest.raises(ValueError, match="item labels 5 and '5' are the same as text"):
        as_responses(frame)
    assert list(as_responses(frame.set_axis([5, 6, "x"], axis=1)).items) == [5, 6, "x"]


def test_trailing_separators_on_data_rows_do_not_shift_the_items(tmp_path):
    """A trailing comma on every data row (not on the header) made pandas take the first column
    for row labels: each item got its right-hand neighbour's answers. Empty trailing fields are
    ignored now; a row with a non-empty extra field is refused by line."""
    clean, trailing = tmp_path / "clean.csv", tmp_path / "trailing.csv"
    clean.write_text("q1,q2,q3\n1,0,1\n0,0,1\n1,1,0\n0,1,1\n")
    trailing.write_text("q1,q2,q3\n1,0,1,\n0,0,1,\n1,1,0,\n0,1,1,\n")
    a, b = as_responses(clean), as_responses(trailing)
    assert list(b.items) == ["q1", "q2", "q3"] and np.array_equal(a.codes, b.codes)
    extra = tmp_path / "extra.csv"
    extra.write_text("q1,q2,q3\n1,0,1\n0,0,1,1\n1,1,0\n")
    with pytest.raises(ValueError, match=r"line 3 has 4 fields where the first rows have 3"):
        as_responses(extra)
    extra.write_text("q1,q2,q3\n1,0,1,1\n0,0,1,\n1,1,0,\n")  # (pandas would drop the 1 with a warning)
    with pytest.raises(ValueError, match=r"line 2 has 4 fields where the header has 3"):
        as_responses(extra)


def _trailing_tables(tmp_path):
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("q1,q2,q3\n" + "0,1,1,\n" * 40)
    bad.write_text("q1,q2,q3\n" + "1,0,1,\n" * 20 + "1,0,1,7\n" + "1,0,1,\n" * 19)
    return good, bad


def test_a_warning_from_elsewhere_during_a_read_does_not_decide_it(tmp_path, monkeypatch):
    """Whether pandas dropped a field was read from the ParserWarnings recorded (process-wide)
    while the table was read: another thread's warning refused a valid table. Now the rows are
    checked, and a bad row is refused by its own line."""
    good, bad = _trailing_tables(tmp_path)
    read_csv = pd.read_csv

    def noisy(*args, **kwargs):  # another thread's read, warning at the same time
        warnings.warn("a field of another table was dropped", pd.errors.ParserWarning)
        return read_csv(*args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", noisy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.ParserWarning)
        assert as_responses(good).n_persons == 40
        with pytest.raises(ValueError, match=r"line 22 has 4 fields where the header has 3"):
            as_responses(bad)


def test_csv_reads_in_two_threads_answer_as_alone_and_leave_the_warnings_state(tmp_path):
    """Two threads reading tables whose rows end in a separator: the answers were mixed up
    (catch_warnings(record=True) is process-wide) and a leftover recorder swallowed every later
    warning of the process."""
    import threading

    good, bad = _trailing_tables(tmp_path)
    filters, show = list(warnings.filters), getattr(warnings, "_showwarnmsg_impl", None)
    wrong = []

    def read(path, valid):
        for _ in range(150):
            try:
                as_responses(path)
                ok = True
            except ValueError:
                ok = False
            if ok != valid:
                wrong.append(path.name)

    threads = [threading.Thread(target=read, args=(good, True)),
               threading.Thread(target=read, args=(bad, False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert warnings.filters == filters and getattr(warnings, "_showwarnmsg_impl", None) is show


def test_a_short_row_in_a_zip_archive_is_refused_as_in_a_plain_csv(tmp_path):
    import zipfile

    plain = tmp_path / "short.csv"
    plain.write_text("q1,q2,q3\n1,0,1\n0,1\n1,1,0\n")
    archive = tmp_path / "short.csv.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(plain, "short.csv")
    for path in (plain, archive):
        with pytest.raises(ValueError, match="line 3 has 2 fields where the header has 3"):
            as_responses(path)


def test_labels_that_differ_only_in_spaces_or_type_are_refused(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("q1, q1\n1,0\n0,1\n")  # pandas reads 'q1' and ' q1', which print alike
    with pytest.raises(ValueError, match="duplicate column 'q1'"):
        as_responses(path)
    long = pd.DataFrame({"person": [5, "5", 6], "item": ["a", "a", "b"], "response": [1, 0, 1]})
    with pytest.raises(ValueError, match="person labels 5 and '5' are the same as text"):
        as_responses(long, format="long")


def test_pattern_weights_are_matched_by_label_and_bounded():
    X = pd.DataFrame({"q1": [1, 0], "q2": [0, 1]}, index=["a", "b"])
    r = as_responses(X, weights=pd.Series({"b": 5, "a": 1}))  # by label, not by position
    assert r.codes[:, 0].tolist() == [1, 0, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="only partly the rows' labels"):
        as_responses(X, weights=pd.Series({"c": 5, "a": 1}))
    # a weight column of another frame, or rows without labels: row order, as before
    pat = pd.DataFrame({"id": ["a", "b", "c"], "q1": [1, 0, 1], "q2": [0, 0, 1], "n": [3, 4, 5]})
    assert as_responses(pat.drop(columns="n"), person_col="id", weights=pat["n"]).n_persons == 12
    sub = pat[pat.n > 3]
    assert as_responses(sub[["q1", "q2"]].reset_index(drop=True), weights=sub["n"]).n_persons == 9
    for huge in (2**53 + 1, 1e20, 2**63, 3_000_000_000):  # a traceback, numpy's words, or minutes
        with pytest.raises(ValueError, match="more than a pattern table is expanded to"):
            as_responses(X, weights=[huge, 1])


def test_a_parquet_column_of_lists_is_a_one_line_error(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "m.parquet"
    pd.DataFrame({"q1": [[1], [0]], "q2": [1, 0]}).to_parquet(path)
    with pytest.raises(ValueError, match="invalid response"):
        as_responses(path)


def test_row_names_in_the_r_layout_and_trailing_separators_everywhere_still_read(tmp_path):
    """R's write.table puts row names before each row with a header one field shorter: the first
    field is the person's label. A spreadsheet export ends the header and every row with a
    separator: the empty last column is dropped. (Both regressed with the trailing-comma fix.)"""
    r = tmp_path / "r.csv"
    r.write_text('"q1","q2","q3"\n"p1",1,0,1\n"p2",0,0,1\n"p3",1,1,NA\n')
    got = as_responses(r)
    assert list(got.persons) == ["p1", "p2", "p3"] and list(got.items) == ["q1", "q2", "q3"]
    assert got.codes.tolist() == [[1, 0, 1], [0, 0, 1], [1, 1, -1]]
    excel = tmp_path / "excel.csv"
    excel.write_text("q1,q2,q3,\n1,0,1,\n0,0,1,\n1,1,0,\n")
    got = as_responses(excel)
    assert list(got.items) == ["q1", "q2", "q3"] and got.codes.tolist() == [[1, 0, 1], [0, 0, 1], [1, 1, 0]]
    ids = tmp_path / "ids.csv"  # ids 0, 1, 2 read as a default index: still not taken for labels
    ids.write_text("id,q1,q2,q3\n0,1,0,1,\n1,0,0,1,\n2,1,1,0,\n")
    with pytest.raises(ValueError, match="invalid response 2"):
        as_responses(ids)  # 'id' is read as an item (use person_col), not shifted
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b,\n1,0,1\n0,1,1\n")  # an empty last label over a column with answers
    with pytest.raises(ValueError, match="column 3 of the header of .*bad.csv is empty"):
        as_responses(bad)


def test_a_files_labels_are_read_as_written(tmp_path):
    """A CSV has no types: its person and item labels are text.  Inferred from the rows,
    items ``01`` and ``1`` were one item (a long table was refused as answering it twice),
    persons ``001``, ``01`` and ``1`` one person, and ``007`` came back as 7."""
    long = tmp_path / "long.csv"
    long.write_text("person,item,response\np1,01,1\np1,1,0\np2,01,0\np2,1,1\np3,01,1\np3,1,1\n")
    r = privirt.as_responses(long)
    assert list(r.items) == ["01", "1"] and list(r.persons) == ["p1", "p2", "p3"]
    assert r.to_frame().loc["p1"].tolist() == [1, 0]
    wide = tmp_path / "wide.csv"
    wide.write_text("person,a,b\n001,1,0\n01,0,1\n1,1,1\n007,NA,0\n")
    r = privirt.as_responses(wide)
    assert list(r.persons) == ["001", "01", "1", "007"]
    assert np.isnan(r.to_frame().loc["007", "a"])  # NA is still a missing answer
    rlayout = tmp_path / "r.csv"  # R's write.table: row names, the header one field shorter
    rlayout.write_text('"a","b"\n"001",1,0\n"002",0,1\n"1",NA,1\n"01",1,1\n')
    r = privirt.as_responses(rlayout)
    assert list(r.persons) == ["001", "002", "1", "01"] and list(r.items) == ["a", "b"]
    assert np.isnan(r.to_frame().loc["1", "a"]) and r.to_frame().loc["01"].tolist() == [1, 1]
    rlayout.write_text('"a","b"\n"0",1,0\n"01",0,1\n"2",1,1\n')  # pandas made these a RangeIndex
    assert list(privirt.as_responses(rlayout).persons) == ["0", "01", "2"]
    unnamed = tmp_path / "unnamed.csv"
    unnamed.write_text(",a,b\n007,1,0\n008,0,1\n")
    assert list(privirt.as_responses(unnamed).persons) == ["007", "008"]
    # data in memory keep their types; a file read as before on request
    frame = pd.DataFrame({"a": [1, 0], "b": [0, 1]}, index=[7, 8])
    assert list(privirt.as_responses(frame).persons) == [7, 8]
    assert list(privirt.as_responses(unnamed, labels_as_text=False).persons) == [7, 8]


def test_the_command_line_reads_a_files_labels_as_written(tmp_path, capsys):
    from privirt.cli import main

    long = tmp_path / "long.csv"
    long.write_text("person,item,response\np1,01,1\np1,1,0\np2,01,0\np2,1,1\np3,01,1\np3,1,1\n")
    out = tmp_path / "out.json"
    assert main(["estimate", str(long), "--out", str(out)]) == 0
    import json
    assert [row["item"] for row in json.loads(out.read_text())["items"]] == ["01", "1"]


def test_a_sparse_matrix_a_dict_and_a_scalar_get_one_line_saying_what_to_pass():
    # "invalid response <Compressed Sparse Row sparse matrix ...>\n\twith 2 stored elements ...
    # at position ()": two lines, and the wrong problem
    import scipy.sparse

    with pytest.raises(ValueError, match=r"scipy.sparse matrix stores its absent cells as 0: pass a dense") as exc:
        privirt.as_responses(scipy.sparse.csr_matrix(np.eye(3)))
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match=r"a dict is not a responses table"):
        privirt.as_responses({"a": [1, 0], "b": [0, 1]})
    with pytest.raises(ValueError, match=r"persons × items matrix .* got int"):
        privirt.as_responses(1)


def test_sufficient_statistics_refuse_an_item_listed_twice():
    # the in-memory engine paired the item with itself (B[a, a] in an off-diagonal cell);
    # the Dask engine refused
    from privirt.stats.api import sufficient_statistics

    X = pd.DataFrame([[1, 0], [1, 1], [0, 1]], columns=["a", "b"])
    with pytest.raises(ValueError, match="items lists 'a' twice"):
        sufficient_statistics(X, items=["a", "a", "b"])


@pytest.mark.parametrize("items, said", [
    ("ab", "not the string 'ab'"),
    ([5, "5", "b"], "items lists '5' twice (item labels are compared as text); give each item once"),
    (["a", ["b"]], r"unhashable label \(a list\) at position 1"),
    (["a", None], r"missing label \(None or NaN\) at position 1"),
])
def test_every_reader_of_an_item_list_parses_it_alike(items, said):
    """Four copies of the item-list parsing differed: only the private one compared labels as
    text or refused a missing label; a list label was a TypeError (traceback) in the
    statistics and the Dask engine, and the Dask engine read 5 and "5" as two items."""
    import re

    import dask.array as da

    from privirt.data._labels import item_labels
    from privirt.private._inputs import public_responses
    from privirt.stats import dask_engine
    from privirt.stats.api import sufficient_statistics

    X = pd.DataFrame([[1, 0, 1], [1, 1, 0], [0, 1, 1]], columns=["5", "a", "b"])
    callers = {
        "helper": lambda: item_labels(items),
        "statistics": lambda: sufficient_statistics(X, items=items),
        "private": lambda: public_responses(X, items),
        "dask columns": lambda: dask_engine._match_items(items, ["5", "a", "b"], public=True),
        "dask array": lambda: dask_engine._array_tasks(da.zeros((4, len(items)), chunks=2), items,
                                                       True, False, 2),
    }
    for name, call in callers.items():
        with pytest.raises(ValueError, match=re.escape(said) if "twice" in said else said) as exc:
            call()
        assert "\n" not in str(exc.value), name


def test_a_valid_item_list_keeps_its_labels_and_order():
    from privirt.data._labels import item_labels

    labels = item_labels([("x", 1), 3, "b"])  # a tuple stays one label
    assert list(labels) == [("x", 1), 3, "b"] and isinstance(labels, pd.Index)
    assert list(item_labels(np.array(["c", "a"]))) == ["c", "a"]


def test_the_weights_column_is_found_in_any_case_as_the_long_layouts_columns_are(tmp_path):
    path = tmp_path / "patterns.csv"
    path.write_text("a,b,Frequency\n1,0,3\n0,1,2\n")
    r = privirt.as_responses(path, weights="frequency")
    assert r.n_persons == 5 and list(r.items) == ["a", "b"]
    with pytest.raises(ValueError, match="weights column 'count' is not a column"):
        privirt.as_responses(path, weights="count")


def test_masked_cells_of_a_numpy_masked_array_are_missing():
    """np.asarray dropped the mask: a masked cell was read as an answer (its hidden value), and
    release_totals(missing="none") accepted such data as complete."""
    data = [[1, 0, 1], [0, 1, 7], [1, 1, 0], [0, 1, 1]]  # 7: hidden under the mask, never read
    mask = [[0, 1, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]]
    nan = np.where(np.array(mask, bool), np.nan, np.array(data, float))
    for dtype in (np.int64, float, object):
        X = np.ma.masked_array(np.array(data, dtype=dtype), mask=mask)
        assert privirt.as_responses(X).codes.tolist() == privirt.as_responses(nan).codes.tolist()
        assert privirt.item_totals(X).tolist() == [2, 3, 2]
    X = np.ma.masked_array(data, mask=mask)
    assert privirt.as_responses(np.ma.masked_array([[1, 0], [0, 1]])).codes.tolist() == [[1, 0], [0, 1]]
    with pytest.raises(ValueError, match='missing="none"'):
        privirt.release_totals(X, epsilon=1.0, seed=3)
    a = privirt.private_spectral_estimate(X, epsilon=1.0, seed=3, n_boot=20)
    b = privirt.private_spectral_estimate(nan, epsilon=1.0, seed=3, n_boot=20)
    assert np.array_equal(a.beta, b.beta) and np.array_equal(a.se, b.se)


def test_the_person_col_hint_is_for_tables_and_can_be_followed_with_int_column_labels():
    """The hint to name a first column of ids with person_col was given for a Dask array (which
    has no person_col), and following it for an int column label crashed ('int' has no .lower)."""
    frame = pd.DataFrame({5: [11, 12, 13], 6: [0, 1, 1], 7: [1, 0, 1]})
    with pytest.raises(ValueError, match=r"name it with person_col=5 \(CLI: --person-col 5\)"):
        as_responses(frame)
    resp = as_responses(frame, person_col=5)
    assert list(resp.persons) == [11, 12, 13] and list(resp.items) == [6, 7]
    with pytest.raises(ValueError) as info:  # a plain array: no person column to name
        as_responses(np.array([[5.0, 0.0], [6.0, 1.0], [7.0, 1.0]]))
    assert "person_col" not in str(info.value)
    da = pytest.importorskip("dask.array")
    from privirt.stats.dask_engine import dask_statistics

    arr = da.from_array(np.array([[5.0, 0.0, 1.0], [6.0, 1.0, 0.0]]), chunks=(1, 3))
    with pytest.raises(ValueError) as info:
        dask_statistics(arr)
    assert "invalid response" in str(info.value) and "person_col" not in str(info.value)


def test_an_array_is_converted_in_row_blocks_with_bounded_temporaries(monkeypatch):
    """A float array was converted in one piece (NaN mask, three more full-size masks and a float64
    np.where copy: 11 bytes a cell over the codes on float64, so the counts' memory bound of
    docs/spectral.md did not hold). It is now converted a row block at a time: the codes are the
    same bit for bit and the first bad cell in row-major order is named, in whichever block."""

    from privirt.data import _codes

    rng = np.random.default_rng(4_700_010)
    n, m = 20_000, 50
    X = (rng.random((n, m)) < 0.6).astype(np.float64)
    X[rng.random((n, m)) < 0.1] = np.nan
    whole = np.where(np.isnan(X), -1, X).astype(np.int8)
    monkeypatch.setattr(_codes, "BLOCK_CELLS", 4096)  # 81 rows a block: many blocks
    for arr in (X, X.astype(np.float32), np.asfortranarray(X), X[::-1][::-1]):
        assert np.array_equal(as_responses(arr).codes, whole.astype(np.int8))
    ints = np.nan_to_num(X).astype(np.int64)
    assert np.array_equal(as_responses(ints).codes, ints.astype(np.int8))
    resp, peak = traced_peak(as_responses, X)
    codes = resp.codes
    assert codes.nbytes == n * m and peak < n * m + 2**20, peak  # before: about 11 n m bytes
    for bad_cells, named in ((((5_000, 7),), "row 5000), item 7 (column 7)"),
                             (((9_000, 3), (700, 40), (700, 41)), "row 700), item 40 (column 40)")):
        Y = X.copy()
        for i, j in bad_cells:
            Y[i, j] = 2.0
        for arr in (Y, np.where(np.isnan(Y), 0, Y).astype(np.int16)):
            with pytest.raises(ValueError) as info:
                as_responses(arr)
            assert str(info.value).startswith("invalid response 2") and named in str(info.value)


def test_the_empty_check_works_in_row_blocks_with_the_same_decisions(monkeypatch):
    """The empty-person/item check of ``empty="drop"``/``"error"`` built a full n·m ``codes >= 0``
    mask (half of as_responses' peak on a float64 input, BENCHMARKS.md). It now works a row block
    at a time: the same persons and items kept, the same warning and error messages."""

    from privirt.data import _codes

    rng = np.random.default_rng(5_300_001)
    n, m = 3_000, 40
    X = (rng.random((n, m)) < 0.6).astype(np.float64)
    X[rng.random((n, m)) < 0.2] = np.nan
    X[[5, 700, 701, 2_999]] = np.nan  # empty persons, one in the last block
    X[:, [0, 17]] = np.nan  # empty items
    codes = np.where(np.isnan(X), -1, X).astype(np.int8)
    row_ok, col_ok = (codes >= 0).any(axis=1), (codes >= 0).any(axis=0)
    monkeypatch.setattr(_codes, "BLOCK_CELLS", 1_000)  # 25 rows a block: many blocks
    with pytest.warns(EmptyResponsesWarning) as rec:
        out = as_responses(X)
    assert str(rec[0].message) == ("dropped 4 person(s) with no response (e.g. [5, 700, 701, 2999]) "
                                   "and 2 item(s) with no response (e.g. [0, 17])")
    assert np.array_equal(out.codes, codes[row_ok][:, col_ok])
    assert list(out.persons) == list(np.flatnonzero(row_ok))
    assert list(out.items) == list(np.flatnonzero(col_ok))
    with pytest.raises(ValueError, match=r"^4 person\(s\) with no response \(e\.g\. \[5, 700, 701, "
                       r"2999\]\) and 2 item\(s\) .*; remove them or pass empty='drop'$"):
        as_responses(X, empty="error")
    assert np.array_equal(as_responses(X, empty="keep").codes, codes)
    full = np.nan_to_num(X[row_ok][:, col_ok])
    for empty in ("drop", "error", "keep"):  # nothing empty: nothing dropped, nothing said
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.array_equal(as_responses(full, empty=empty).codes, full.astype(np.int8))
    only_rows = np.where(np.arange(n)[:, None] == 5, np.nan, np.nan_to_num(X[:, col_ok]))
    with pytest.raises(ValueError, match=r"^1 person\(s\) with no response \(e\.g\. \[5\]\); remove"):
        as_responses(only_rows, empty="error")
    # peak traced memory on a float64 input: the codes and a few blocks' temporaries, not 2 n m
    n, m = 40_000, 100
    Y = (rng.random((n, m)) < 0.6).astype(np.float64)
    Y[rng.random((n, m)) < 0.1] = np.nan
    monkeypatch.setattr(_codes, "BLOCK_CELLS", 4096)
    for empty in ("drop", "error"):
        resp, peak = traced_peak(as_responses, Y, empty=empty)
        got = resp.codes
        assert got.nbytes == n * m and peak < 1.1 * n * m + 2**20, (empty, peak)  # before: 2 n m


def test_multiindex_labels_are_tuples_in_a_flat_index_as_documented():
    """README and as_responses: a MultiIndex of columns or rows is flattened to tuple labels
    without the level names, in every result (beta[("s", 1)]; from_tuples rebuilds one)."""
    import warnings

    X, _, _ = privirt.simulate_rasch(300, 4, seed=39000190)
    cols = pd.MultiIndex.from_tuples([("s", 1), ("s", 2), ("t", 1), ("t", 2)], names=["section", "number"])
    rows = pd.MultiIndex.from_tuples([("g", i) for i in range(300)], names=["group", "id"])
    df = pd.DataFrame(X.astype(int), columns=cols, index=rows)
    resp = privirt.as_responses(df)
    for labels, given in ((resp.items, cols), (resp.persons, rows)):
        assert not isinstance(labels, pd.MultiIndex) and labels.names == [None]
        assert labels.tolist() == given.tolist() and all(isinstance(x, tuple) for x in labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [privirt.cmle_estimate(df, progress=False), privirt.spectral_estimate(df),
                   privirt.private_spectral_estimate(df, epsilon=1.0, seed=1)]
    for res in results:
        assert not isinstance(res.items, pd.MultiIndex) and res.items.tolist() == cols.tolist()
        assert res.to_frame().index.names == [None]
        assert res.beta[("s", 1)] == res.beta.loc[[("s", 1)]].item() == res.beta.iloc[0]
        rebuilt = pd.MultiIndex.from_tuples(res.items, names=cols.names)
        assert rebuilt.equals(cols) and rebuilt.names == cols.names
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "pd.MultiIndex.from_tuples(res.items" in readme and "MultiIndex" in as_responses.__doc__


@pytest.mark.parametrize("kw, name", [
    (dict(item_col=None), "item_col"), (dict(response_col=0), "response_col"),
    (dict(item_col=1, format="long"), "item_col"), (dict(person_col=[]), "person_col"),
    (dict(person_col=True), "person_col"),
])
def test_column_name_options_of_the_wrong_type_are_refused_in_one_line(kw, name):
    # AttributeError ('NoneType' object has no attribute 'lower') or TypeError (unhashable)
    X = pd.DataFrame((np.random.default_rng(62_000_003).random((6, 3)) < .5).astype(int),
                     columns=["a", "b", "c"])
    with pytest.raises(ValueError, match=rf"^{name} must be a column name \(a string\)"):
        as_responses(X, **kw)


def test_a_non_string_person_col_naming_a_column_still_works():
    df = pd.DataFrame({0: ["x", "y", "z"], 1: [0, 1, 1], 2: [1, 0, 1]})
    assert as_responses(df, person_col=0).shape == (3, 2)


def test_a_duplicate_numeric_label_is_shown_as_a_plain_number():
    # before: "duplicate person label np.int64(5)" (numpy's repr of the index's scalar)
    from privirt.stats._dask_labels import _refuse

    cases = ((pd.DataFrame(np.eye(3), index=[5, 5, 6]), "person"),
             (pd.DataFrame(np.eye(3), columns=[7, 7, 8]), "item"))
    for frame, what in cases:
        with pytest.raises(ValueError, match=rf"duplicate {what} label {frame.axes[what == 'item'][0]}\b") as exc:
            as_responses(frame)
        assert "np." not in str(exc.value)
    with pytest.raises(ValueError, match=r"duplicate person label 5\b") as exc:
        _refuse(pd.Index([5, 5, 6]), "part-0")
    assert "np." not in str(exc.value)


def test_weights_given_as_a_generator_are_read_like_a_list():
    # before: "weights has 1 entries for 3 rows" (numpy took the generator for one object)
    X = np.array([[1, 0], [0, 1], [1, 1]])
    want = as_responses(X, weights=[1, 2, 3])
    for weights in (iter([1, 2, 3]), (w for w in (1, 2, 3)), map(int, "123")):
        got = as_responses(X, weights=weights)
        assert got.shape == (6, 2) and np.array_equal(got.codes, want.codes)
    with pytest.raises(ValueError, match="weights has 2 entries for 3 rows"):
        as_responses(X, weights=iter([1, 2]))


def test_rows_of_different_lengths_are_named_in_one_line(tmp_path):
    # before: numpy's "setting an array element with a sequence ... inhomogeneous shape ..."
    import privirt

    with pytest.raises(ValueError, match=r"^rows have different lengths \(row 1 has 2 values, row 0 has 3\): "
                                         "give every person one value per item$"):
        as_responses([[1, 0, 1], [0, 1]])
    with pytest.raises(ValueError, match=r"\(row 2 has 1 value, row 0 has 2\)"):
        as_responses([[1, 0], [0, 1], [1]])
    with pytest.raises(ValueError, match="a row holds a sequence where a value belongs"):
        as_responses([[1, [0, 1]], [0, 1]])
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-3)
    with pytest.raises(ValueError, match=r"^rows have different lengths"):
        privirt.release_totals([[1, 0, 1], [0, 1]], epsilon=1.0, delta=1e-6, ledger=ledger,
                               n_persons=2, items=[0, 1, 2])
    assert ledger.spends().empty


@pytest.mark.parametrize("bad", [5, b"x", {"x": 1}, 2.5])
def test_drop_cols_that_is_not_a_name_or_a_list_of_names_is_one_line(bad):
    # an int gave the raw "TypeError: 'int' object is not iterable"
    df = pd.DataFrame({"person": ["a", "b", "c"], "q1": [1, 0, 1], "q2": [0, 1, 1], "x": [5, 6, 7]})
    with pytest.raises(ValueError, match="^drop_cols must be a column name or a list of column names, got "):
        privirt.as_responses(df, drop_cols=bad)


def test_drop_cols_none_without_a_person_column_is_an_unknown_column_not_the_person_column():
    # None == person_col (None, not given) blamed "the person column None"
    df = pd.DataFrame({"q1": [1, 0, 1], "q2": [0, 1, 1], "x": [5, 6, 7]})
    with pytest.raises(ValueError, match="^drop_cols names None, not a column of the table"):
        privirt.as_responses(df, drop_cols=[None])

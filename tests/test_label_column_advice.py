"""The advice for a roll-call table read as it is: numeric label columns (ids, codes) are named
as label columns, items scored 1-5 keep the 0/1 advice, and a text column of distinct names
anywhere in the table is offered as the person column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privirt.cli import main
from privirt.data.responses import as_responses


def _rollcalls(n: int = 12) -> pd.DataFrame:
    """A small frame shaped like a roll-call file: id, statecode, state, party, member, votes."""
    rng = np.random.default_rng(3)
    votes = rng.integers(0, 2, size=(n, 4)).astype(float)
    votes[1, 2] = np.nan  # an absence
    frame = pd.DataFrame({
        "id": 49700 + 13 * np.arange(n),
        "statecode": [41 + i // 2 for i in range(n)],
        "state": [f"STATE{i // 2}" for i in range(n)],
        "party": [i % 2 for i in range(n)],
        "member": [f"SENATOR{i}" for i in range(n)],
    })
    for k in range(votes.shape[1]):
        frame[f"rc{k + 1}"] = votes[:, k]
    return frame


def _error(data, **kw) -> str:
    with pytest.raises(ValueError) as got:
        as_responses(data, **kw)
    return str(got.value)


def _drop_hint(column: str) -> str:
    return (f"column {column!r} looks like a label column, not answers: remove it before the table "
            f"is read with drop_cols=[{column!r}] (CLI: --drop-cols {column})")


def _person_hint(column: str) -> str:
    return (f"if column {column!r} holds person labels, name it with person_col={column!r} "
            f"(CLI: --person-col {column})")


@pytest.mark.parametrize("column", ["id", "statecode"])
def test_a_numeric_label_column_is_named_as_one(column, tmp_path):
    """statecode (41, ...) and id (49700, ...) got 'responses must be 0, 1 or missing (NaN)' and
    nothing to do; a text label column already got the --drop-cols hint."""
    frame = _rollcalls()
    others = [c for c in ("id", "statecode", "state", "party") if c != column]
    path = tmp_path / "votes.csv"
    frame.to_csv(path, index=False)
    for data in (frame, path):
        msg = _error(data, person_col="member", drop_cols=others)
        first = frame[column].iloc[0]
        assert msg.startswith(f"invalid response {float(first)!r} for person 'SENATOR0' (row 0), "
                              f"item {column!r} (column 0)"), msg
        assert msg.endswith(f"; {_drop_hint(column)}"), msg
        assert "person_col" not in msg, msg  # the person column is named
        got = as_responses(data, person_col="member", drop_cols=others + [column])  # as it says
        assert got.items.tolist() == ["rc1", "rc2", "rc3", "rc4"]


def test_a_numeric_id_first_column_gets_both_hints_when_no_person_column_is_named():
    frame = _rollcalls().drop(columns=["state", "member"])
    msg = _error(frame)
    assert msg.endswith(f"; {_person_hint('id')}; otherwise {_drop_hint('id')}"), msg


@pytest.mark.parametrize("values", [
    [1, 5, 3, 2, 4, 5, 1, 2, 3, 4, 2, 2],  # a Likert item scored 1-5
    [0, 10, 7, 3, 8, 9, 2, 6, 4, 5, 1, 10],  # scored 0-10: as many distinct values as the scale
    [0.25, 0.5, 0.75, 0.5, 0.25, 1, 0, 0.5, 0.75, 0.25, 0.5, 0.5],  # fractions within 0..1
    [0.59, 0.12, 0.33, 0.81, 0.47, 0.95, 0.06, 0.28, 0.74, 0.66, 0.21, 0.88],  # 12 distinct proportions
])
def test_items_scored_on_a_small_scale_keep_the_0_1_advice(values):
    """The rule must not read scored items as labels: a column whose values stay within 0..10
    (and hold no more distinct values than that scale) is answers, told to be 0 or 1."""
    frame = _rollcalls().drop(columns=["id", "statecode", "state", "party"])
    frame.insert(1, "score", values)
    msg = _error(frame, person_col="member")
    assert "item 'score' (column 0)" in msg, msg
    assert msg.endswith("responses must be 0, 1 or missing (NaN)"), msg


def test_many_distinct_numbers_or_a_year_are_labels():
    frame = _rollcalls().drop(columns=["id", "statecode", "state", "party"])
    for values in ([-i for i in range(12)], [1999 + i % 3 for i in range(12)]):
        frame["code"] = values
        msg = _error(frame, person_col="member")
        assert msg.endswith(f"; {_drop_hint('code')}"), msg
    frame["code"] = [0, 1] * 5 + [7, 2000]  # mostly answers with two wrong cells: no label hint
    assert "label column" not in _error(frame, person_col="member")


def test_a_text_column_of_distinct_names_is_offered_as_the_person_column(tmp_path):
    """With state and party dropped, 'member' (column 2, all names distinct) was only told to
    be dropped: the person-column hint was given for column 0 alone."""
    frame = _rollcalls()
    path = tmp_path / "votes.csv"
    frame.to_csv(path, index=False)
    for data in (frame, path):
        msg = _error(data, drop_cols=["state", "party"])
        assert "item 'member' (column 2)" in msg, msg
        assert msg.endswith(f"; {_person_hint('member')}; otherwise {_drop_hint('member')}"), msg
        # a text label column with repeats (state) is not offered as the person column
        assert _error(data).endswith(f"; {_drop_hint('state')}")
        # named: no hint to name another
        msg = _error(data, person_col="id", drop_cols=["statecode", "state", "party"])
        assert msg.endswith(f"; {_drop_hint('member')}"), msg
        # the full line the hints lead to reads the votes
        got = as_responses(data, person_col="member", drop_cols=["id", "statecode", "state", "party"])
        assert got.persons.tolist() == frame["member"].tolist()
        assert got.items.tolist() == ["rc1", "rc2", "rc3", "rc4"]
    frame.loc[3, "member"] = np.nan  # a name missing: not a column of person labels
    assert _error(frame, drop_cols=["state", "party"]).endswith(f"; {_drop_hint('member')}")


def test_the_cli_leads_step_by_step_to_the_reading_line(tmp_path, capsys):
    """Each refusal is one line naming what to do; following them ends in a table that reads."""
    path = tmp_path / "votes.csv"
    _rollcalls().to_csv(path, index=False)
    steps = [
        ([], "--drop-cols state"),
        (["--drop-cols", "state,party"], "--person-col member; otherwise"),
        (["--drop-cols", "state,party", "--person-col", "member"], "--drop-cols id"),
        (["--drop-cols", "state,party,id", "--person-col", "member"], "--drop-cols statecode"),
    ]
    for args, advice in steps:
        assert main(["estimate", str(path), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "Traceback" not in err, err
        assert advice in err, (args, err)
    assert main(["estimate", str(path), "--person-col", "member",
                 "--drop-cols", "id,statecode,state,party"]) == 0
    assert "12 persons × 4 items" in capsys.readouterr().out

"""Column names typed in another Unicode normalisation (a header saved on macOS is NFD, a name
typed on Linux NFC) name the column; item labels stay exact, and a mismatch in normalisation
is said; a stray control byte in an answer cell is named, not taken for a label column."""

from __future__ import annotations

import unicodedata

import pandas as pd
import pytest

from privirt.cli import main
from privirt.data._labels import match_items
from privirt.data.responses import as_responses


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


ROWS = [("p1", 0, 1, 1), ("p2", 1, 0, 1), ("p3", 1, 1, 0), ("p4", 0, 0, 1), ("p5", 1, 0, 0)]


def _wide(path, header, rows=ROWS, tail=""):
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows) + tail,
                    encoding="utf-8")
    return path


def _ledger(tmp_path, capsys):
    ledger = tmp_path / "l.db"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-6"]) == 0
    capsys.readouterr()
    return ledger


def _refused(argv, capsys) -> str:
    """Run ``argv``: it must exit != 0 with one ``privirt: error:`` line, returned."""
    rc = main(argv)
    assert rc not in (0, None)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privirt: error: "), err
    return err[0]


def test_column_names_match_across_normalisation_and_case(tmp_path):
    # the header in NFD, the names as typed in NFC: "not a column of the table; name one of its
    # columns: élève, ..." and "need columns 'élève', ...; got ['élève', ...]" before
    wide = _wide(tmp_path / "w.csv", [nfd("élève"), "q1", nfd("qüestion"), nfd("nöte")],
                 [(p, a, b, "x") for p, a, b, _ in ROWS])
    r = as_responses(wide, person_col=nfc("élève"), drop_cols=[nfc("NÖTE")])
    assert r.persons.tolist() == [p for p, *_ in ROWS]
    assert r.items.tolist() == ["q1", nfd("qüestion")]  # the item labels as written
    long = tmp_path / "l.csv"
    long.write_text(f"{nfd('élève')},{nfd('qüestion')},{nfd('réponse')}\n"
                    + "".join(f"{p},q{j},{v}\n" for p, *vals in ROWS for j, v in enumerate(vals)),
                    encoding="utf-8")
    for fmt in ("auto", "long"):
        r = as_responses(long, format=fmt, person_col=nfc("élève"), item_col=nfc("QÜESTION"),
                         response_col=nfc("réponse"))
        assert r.items.tolist() == ["q0", "q1", "q2"] and len(r.persons) == len(ROWS)
    frame = pd.DataFrame({nfd("élève"): ["a", "b"], "q1": [0, 1], "q2": [1, 1], nfd("fréq"): [3, 2]})
    r = as_responses(frame, person_col=nfc("élève"), weights=nfc("fréq"))
    assert r.items.tolist() == ["q1", "q2"]


def test_the_command_line_finds_an_nfd_column_typed_in_nfc(tmp_path, capsys):
    wide = _wide(tmp_path / "w.csv", [nfd("élève"), "q1", "q2", nfd("nöte")],
                 [(p, a, b, "x") for p, a, b, _ in ROWS])
    rc = main(["estimate", str(wide), "--person-col", nfc("élève"), "--drop-cols", nfc("nöte"),
               "--no-progress", "--device", "cpu"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "q1" in out.out and "nöte" not in out.out


@pytest.mark.parametrize("option", ["--drop-cols", "--person-col"])
def test_two_columns_alike_but_for_normalisation_are_refused_naming_both(tmp_path, capsys, option):
    wide = _wide(tmp_path / "w.csv", ["person", nfc("é"), nfd("é"), "q3"])
    ledger = _ledger(tmp_path, capsys)
    before = ledger.read_bytes()
    err = _refused(["estimate", str(wide), "--epsilon", "1", "--ledger", str(ledger), option, nfc("é")],
                   capsys)
    assert ascii(nfc("é")) in err and ascii(nfd("é")) in err and "names two columns" in err
    assert ledger.read_bytes() == before
    with pytest.raises(ValueError, match=r"drop_cols 'É' names two columns"):
        as_responses(wide, drop_cols=["É"])


def test_an_item_set_in_another_normalisation_is_said_not_silently_matched(tmp_path, capsys):
    # item labels are compared exactly (the public item set is a declaration), and NFC and
    # NFD print alike: the refusal said only "the data have item(s) ['é1'] that are not in ..."
    with pytest.raises(ValueError, match="differ only in Unicode normalisation") as info:
        match_items([nfc("é1"), "q2"], [nfd("é1"), "q2"], public=True)
    assert ascii(nfc("é1")) in str(info.value) and ascii(nfd("é1")) in str(info.value)
    wide = _wide(tmp_path / "w.csv", ["person", nfd("é1"), "q2", "q3"])
    ledger = _ledger(tmp_path, capsys)
    before = ledger.read_bytes()
    err = _refused(["estimate", str(wide), "--epsilon", "1", "--ledger", str(ledger),
                    "--items", f"{nfc('é1')},q2,q3"], capsys)
    assert "differ only in Unicode normalisation" in err and "--items" in err
    assert ascii(nfc("é1")) in err and ascii(nfd("é1")) in err
    assert ledger.read_bytes() == before


@pytest.mark.parametrize("cell, code", [("0\x1a", "0x1a, a DOS end-of-file mark"),
                                        ("\x001", "0x00, a NUL byte")])
def test_a_control_byte_in_one_cell_is_named_not_taken_for_a_label_column(tmp_path, capsys, cell, code):
    # "... column 'q3' looks like a label column, not answers: remove it ... --drop-cols q3",
    # while every other cell of q3 was an answer
    rows = [*ROWS[:-1], (*ROWS[-1][:3], cell)]
    wide = _wide(tmp_path / "w.csv", ["person", "q1", "q2", "q3"], rows)
    with pytest.raises(ValueError, match=f"holds a control character \\({code}") as info:
        as_responses(wide)
    assert "label column" not in str(info.value)
    ledger = _ledger(tmp_path, capsys)
    before = ledger.read_bytes()
    err = _refused(["estimate", str(wide), "--epsilon", "1", "--ledger", str(ledger)], capsys)
    assert f"control character ({code}" in err and "--drop-cols" not in err
    assert ledger.read_bytes() == before
    long = tmp_path / "l.csv"
    long.write_text("person,item,response\np1,q1,1\np1,q2,0\np2,q1," + cell + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"control character \\({code}"):
        as_responses(long)


def test_one_stray_text_among_answers_is_no_label_column_but_labels_are():
    frame = pd.DataFrame({"person": ["a", "b", "c", "d"], "q1": ["0", "1", "x", "1"],
                          "q2": ["ann", "bob", "cy", "1"]})
    with pytest.raises(ValueError, match="most cells of column 'q1' are answers") as info:
        as_responses(frame[["person", "q1"]])
    assert "label column" not in str(info.value)
    with pytest.raises(ValueError, match="column 'q2' looks like a label column"):
        as_responses(frame[["person", "q2"]])


def test_a_dos_end_of_file_mark_on_its_own_line_is_named(tmp_path, capsys):
    # Ctrl-Z after the last CRLF (the DOS form) was "line 5 has 1 fields where the header has 4":
    # a line that looks empty in an editor
    path = tmp_path / "dos.csv"
    path.write_bytes(b"person,q1,q2,q3\r\n" + b"".join(",".join(map(str, r)).encode() + b"\r\n" for r in ROWS)
                     + b"\x1a")
    with pytest.raises(ValueError, match=r"line 7 has 1 fields.*\(0x1a, a DOS end-of-file mark"):
        as_responses(path)
    ledger = _ledger(tmp_path, capsys)
    before = ledger.read_bytes()
    err = _refused(["estimate", str(path), "--epsilon", "1", "--ledger", str(ledger)], capsys)
    assert "DOS end-of-file mark" in err and ledger.read_bytes() == before


def test_a_column_that_only_case_folds_to_the_person_column_may_be_dropped():
    # after names were matched in any case, drop_cols=['Person'] beside the person column
    # 'person' (and 'ID' beside 'id') was refused as "the person column"; it is another column
    frame = pd.DataFrame({"Person": ["a", "b", "c"], "person": ["x", "y", "z"], "q1": [0, 1, 1],
                          "q2": [1, 0, 1]})
    for kw in ({"person_col": "person"}, {}):
        got = as_responses(frame, drop_cols=["Person"], **kw)
        assert list(got.items) == ["q1", "q2"] and list(got.persons) == ["x", "y", "z"]
    ids = pd.DataFrame({"id": ["a", "b", "c"], "ID": [0, 1, 0], "q1": [0, 1, 1]})
    assert list(as_responses(ids, person_col="id", drop_cols=["ID"]).items) == ["q1"]
    with pytest.raises(ValueError, match="drop_cols names the person column 'id'"):
        as_responses(ids, person_col="id", drop_cols=["id"])

"""Column names typed in another Unicode normalisation (a header saved on macOS is NFD, a name
typed on Linux NFC) name the column; item labels stay exact, and a mismatch in normalisation
is said."""

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

"""How files are read (privirt/data/_files.py, the label rules of _labels.py): the fixes of the
readers' review (labels with spaces around them, Parquet text cells, long tables with an extra
column, trailing separators, R's row names, empty tables, decimal columns)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privirt.cli import main
from privirt.data._labels import match_items
from privirt.data.responses import as_responses, private_responses


def test_labels_are_read_with_the_spaces_around_them_stripped(tmp_path, capsys):
    """One rule: a CSV header's, a long table's and a Parquet file's labels lose their
    surrounding spaces, as --items does, so a hand-written header matches --items."""
    wide = tmp_path / "wide.csv"
    wide.write_text("person, q1, q2, q3\np1, 0, 1, 1\np2, 1, 0, 1\np3, 1, 1, 0\np4, 0, 0, 1\n")
    assert as_responses(wide).items.tolist() == ["q1", "q2", "q3"]
    assert private_responses(wide).items.tolist() == ["q1", "q2", "q3"]
    for items in ("q1,q2,q3", " q1, q2, q3"):
        rc = main(["estimate", str(wide), "--epsilon", "1", "--seed", "58000001", "--items", items,
                   "--no-progress", "--device", "cpu"])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        assert "' q1'" not in captured.out
    long = tmp_path / "long.csv"  # ' q1' is item q1: the conflicting second answer is caught
    long.write_text("person,item,response\np1,q1,1\np1, q1,0\np2,q1,0\np2,q2,1\n")
    with pytest.raises(ValueError, match="person 'p1' answered item 'q1' more than once"):
        as_responses(long)
    long.write_text("person,item,response\np1 , q1,1\np1,q2,0\np2,q1 ,0\n")
    r = private_responses(long)
    assert r.items.tolist() == ["q1", "q2"] and r.persons.tolist() == ["p1", "p2"]
    frame = pd.DataFrame({"person": ["p1", "p2", "p3"], "q1": [0, 1, 1], " q1": [1, 0, 1],
                          "q2": [1, 1, 0]})
    frame.to_parquet(tmp_path / "two.parquet")
    with pytest.raises(ValueError, match="duplicate column 'q1'"):
        as_responses(tmp_path / "two.parquet")
    frame.drop(columns="q1").to_parquet(tmp_path / "one.parquet")
    assert as_responses(tmp_path / "one.parquet").items.tolist() == ["q1", "q2"]
    # the numeric-looking labels stay as written
    text = tmp_path / "text.csv"
    text.write_text("person,item,response\n01 ,NA,1\n1, 1e3 ,0\n")
    r = as_responses(text, empty="keep")
    assert r.persons.tolist() == ["01", "1"] and r.items.tolist() == ["NA", "1e3"]
    # a public item set is matched the same way (the library's items= is not stripped)
    labels, pos = match_items([" q1", "q2 "], ["q1", "q2"], public=True)
    assert labels.tolist() == [" q1", "q2 "] and pos.tolist() == [0, 1]
    with pytest.raises(ValueError, match="items lists 'q1' twice"):
        match_items(["q1", " q1"], ["q1"], public=True)


@pytest.mark.parametrize("column", [["1", "0", "NA", "1"], ["1", "0", "NULL", "1"], ["1", "0", "N/A", "1"],
                                    ["TRUE", "FALSE", "TRUE", "FALSE"], ["true", "False", "", "True"]])
def test_parquet_text_cells_read_as_the_same_csv_reads_them(tmp_path, column):
    """README: text columns (a Parquet file's) read as the same CSV would: pandas' missing-value
    words are missing, its true/false words 1/0."""
    frame = pd.DataFrame({"person": ["p1", "p2", "p3", "p4"], "q1": column,
                          "q2": ["0", "1", "1", "0"], "q3": ["1", "1", "0", "0"]})
    frame.to_csv(tmp_path / "r.csv", index=False)
    frame.to_parquet(tmp_path / "r.parquet")
    csv, parquet = as_responses(tmp_path / "r.csv"), as_responses(tmp_path / "r.parquet")
    np.testing.assert_array_equal(csv.codes, parquet.codes)
    assert csv.items.equals(parquet.items) and csv.persons.equals(parquet.persons)
    expected = [{"1": 1, "0": 0, "TRUE": 1, "true": 1, "True": 1}.get(v, 0 if "alse" in v or "FALSE" in v else -1)
                for v in column]
    assert parquet.codes[:, 0].tolist() == expected


def test_the_missing_and_true_false_words_are_pandas_own():
    """The lists in _files (pandas exports neither) are what read_csv reads as missing and bool."""
    import io

    from privirt.data import _files

    for word in _files._CSV_NA_STRINGS:  # each one is missing to read_csv
        assert pd.read_csv(io.StringIO(f"a,b\n{word},1\n"), keep_default_na=True).a.isna().all()
    try:  # and none is left out (pandas' list is private: checked where it is found)
        from pandas._libs.parsers import STR_NA_VALUES
    except ImportError:  # pragma: no cover - another pandas layout
        STR_NA_VALUES = set(_files._CSV_NA_STRINGS)
    assert set(_files._CSV_NA_STRINGS) == set(STR_NA_VALUES)
    for word in _files._CSV_TRUE + _files._CSV_FALSE:
        read = pd.read_csv(io.StringIO(f"a\n{word}\n")).a
        assert read.dtype == bool and read.item() == (word.lower() == "true")


def test_a_long_table_with_an_extra_column_is_named_long_not_read_as_wide(tmp_path, capsys):
    """A weights column or another extra column on a long table: one line naming the layout
    (before: 'invalid response 'q1' ... item 'item'', the table re-read as wide)."""
    path = tmp_path / "w.csv"
    path.write_text("person,item,response,frequency\np1,q1,1,2\np1,q2,0,2\np2,q1,0,1\np2,q2,1,1\n")
    for fmt in ("auto", "long"):
        with pytest.raises(ValueError, match="^weights apply to wide pattern tables"):
            as_responses(path, weights="frequency", format=fmt)
    assert main(["estimate", str(path), "--weights-col", "frequency", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "looks long" in err and "--weights-col" in err and "invalid response" not in err
    path.write_text("person,item,response,time\np1,q1,1,3\np1,q2,0,3\np2,q1,0,3\np2,q2,1,3\n")
    with pytest.raises(ValueError, match=r"looks long .*format='long'"):
        as_responses(path)
    assert main(["estimate", str(path), "--device", "cpu"]) == 2
    assert "--format long" in capsys.readouterr().err
    assert as_responses(path, format="long").codes.tolist() == [[1, 0], [0, 1]]
    # a wide table whose items are called item and response still reads as wide
    wide = pd.DataFrame({"person": ["a", "b"], "item": [0, 1], "response": [1, 0], "q": [1, 1]})
    assert as_responses(wide).items.tolist() == ["item", "response", "q"]


@pytest.mark.parametrize("rows", ["p1,0,1,1\np2,1,0,1\np3,1,1,0\n", "p1,0,1,1\np2,,0,1\np3,1,1,0\n",
                                  "p1,0,1,1\np2,1,0,\np3,1,1,0\n"])
def test_a_header_ending_in_a_separator_reads_alike_whichever_cell_is_missing(tmp_path, rows):
    """'person,q1,q2,q3,' over rows of four fields: before, a missing q3 cell got 'line 2 has 4
    fields where the header has 5' (blaming a complete line) where a missing q1 cell read."""
    path = tmp_path / "r.csv"
    path.write_text("person,q1,q2,q3,\n" + rows)
    plain = tmp_path / "plain.csv"
    plain.write_text("person,q1,q2,q3\n" + rows)
    got = as_responses(path, empty="keep")
    assert got.items.tolist() == ["q1", "q2", "q3"]
    np.testing.assert_array_equal(got.codes, as_responses(plain, empty="keep").codes)
    path.write_text("person,q1,q2,q3,\np1,0,1,1\np2,1,0\np3,1,1,0\n")  # a short row: still refused
    with pytest.raises(ValueError, match="line 3 has 3 fields where the header has 4"):
        as_responses(path)


def test_r_row_names_are_read_as_written_as_a_person_column_is(tmp_path):
    """README: a CSV's person column (or R's row names) is read as written, as text: the row
    name "NA" is a label (before: 'missing person label (row 3)'); an NA cell stays missing."""
    r_layout = tmp_path / "r.csv"
    r_layout.write_text('"q1","q2","q3"\n"001",0,1,1\n"002",1,0,NA\n"1",1,1,0\n"NA",0,1,N/A\n')
    column = tmp_path / "c.csv"
    column.write_text("person,q1,q2,q3\n001,0,1,1\n002,1,0,NA\n1,1,1,0\nNA,0,1,N/A\n")
    got, want = as_responses(r_layout), as_responses(column)
    assert got.persons.tolist() == want.persons.tolist() == ["001", "002", "1", "NA"]
    np.testing.assert_array_equal(got.codes, want.codes)
    assert got.codes[1, 2] == got.codes[3, 2] == -1


def test_a_table_without_rows_names_the_file_and_what_to_add(tmp_path, capsys):
    """Before: 'the responses table is empty (shape (0, 4))', no file, the person column counted
    as an item.  A private path still reads it (every public person absent)."""
    path = tmp_path / "header.csv"
    path.write_text("person,q1,q2,q3\n")
    pd.DataFrame({"person": pd.Series([], dtype=str), "q1": pd.Series([], dtype=float),
                  "q2": pd.Series([], dtype=float)}).to_parquet(tmp_path / "none.parquet")
    for file, m in ((path, 3), (tmp_path / "none.parquet", 2)):
        for command in ("estimate", "fit"):
            assert main([command, str(file)]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and str(file) in err and "no data rows" in err, err
            assert f"add one row per person, with an answer (0, 1 or empty) under each of the {m} item" in err
    long = tmp_path / "long.csv"
    long.write_text("person,item,response\n")
    with pytest.raises(ValueError, match="long.csv has a header but no data rows; add one row per answer"):
        as_responses(long)
    assert private_responses(path).shape == (0, 3)


def test_rows_ending_in_a_separator_give_no_false_loss_of_data_warning(tmp_path, capsys):
    """Every extra field is empty (checked first): before, pandas' 'This leads to a loss of data
    with index_col=False' was printed as a privirt warning."""
    import warnings

    path = tmp_path / "r.csv"
    path.write_text("person,q1,q2,q3\np1,0,1,1,\np2,1,0,1,\np3,1,1,,\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = as_responses(path, empty="keep")
    assert got.persons.tolist() == ["p1", "p2", "p3"] and got.codes[2].tolist() == [1, 1, -1]
    path.write_text("person,q1,q2,q3\np1,0,1,1,\np2,1,0,1,\np3,1,1,0,\n")
    assert main(["estimate", str(path), "--no-progress", "--device", "cpu"]) == 0
    assert "loss of data" not in capsys.readouterr().err
    # a non-empty extra field after a person column of labels and answers: refused by its line
    # (f3154af read it the R way, persons "0" and "1" and p1's answers shifted one column left,
    # the labels p1, p2 dropped; with three persons: "duplicate person label '1'")
    path.write_text("person,q1,q2,q3\np1,0,1,1,\np2,1,0,1,1\n")
    with pytest.raises(ValueError, match="line 3 has 5 fields where the header has 4"):
        as_responses(path)
    path.write_text("person,q1,q2,q3\np1,0,1,1,\np2,1,0,1,\np3,1,1,0,1\n")
    with pytest.raises(ValueError, match="line 4 has 5 fields where the header has 4"):
        as_responses(path)


def test_parquet_decimal_columns_of_0_1_read_as_numbers(tmp_path):
    """Before: "invalid response Decimal('0') ... convert text such as 'yes'/'no' to 0/1 first"
    (in-memory reader), "has type decimal128(1, 0)" (Dask engine).  Now both read them as the
    same float columns."""
    import decimal

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = np.random.default_rng(58_000_010)
    X = (rng.random((40, 3)) < 0.5).astype(float)
    X[rng.random((40, 3)) < 0.1] = np.nan
    names = ["person", "q1", "q2", "q3"]
    persons = pa.array([f"p{i}" for i in range(40)])
    dec = [pa.array([None if np.isnan(v) else decimal.Decimal(int(v)) for v in X[:, j]],
                    type=pa.decimal128(1, 0)) for j in range(3)]
    pq.write_table(pa.table([persons, *dec], names=names), tmp_path / "dec.parquet")
    pq.write_table(pa.table([persons, *[pa.array(X[:, j]) for j in range(3)]], names=names),
                   tmp_path / "float.parquet")
    got, want = as_responses(tmp_path / "dec.parquet"), as_responses(tmp_path / "float.parquet")
    np.testing.assert_array_equal(got.codes, want.codes)
    assert got.items.tolist() == ["q1", "q2", "q3"]
    pytest.importorskip("distributed")
    from privirt.stats.dask_engine import _column_codes

    table = pq.read_table(tmp_path / "dec.parquet")
    for j in range(3):
        np.testing.assert_array_equal(_column_codes(table.column(j + 1), f"q{j + 1}", "dec", 0),
                                      want.codes[:, j])
    bad = pa.array([decimal.Decimal("0.5"), decimal.Decimal(1)], type=pa.decimal128(2, 1))
    with pytest.raises(ValueError, match="0.5"):
        _column_codes(bad, "q1", "dec", 0)
    frame = pd.DataFrame({"q1": [decimal.Decimal("0.5"), decimal.Decimal(1)], "q2": [0, 1]})
    with pytest.raises(ValueError, match=r"invalid response 0.5 for person 0 \(row 0\), item 'q1'"):
        as_responses(frame)


def test_the_dask_engine_reads_text_cells_as_the_in_memory_reader_does():
    """The missing-value and true/false words of a Parquet text column (see the test above for
    the in-memory reader): before, the Dask engine refused 'NA' and 'TRUE'."""
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("distributed")
    from privirt.stats.dask_engine import _column_codes

    col = pa.array(["1", " 0", "NA", "NULL", "N/A", "", None, "TRUE", "false", " True "])
    assert _column_codes(col, "q1", "t", 0).tolist() == [1, 0, -1, -1, -1, -1, -1, 1, 0, 1]
    frame = pd.DataFrame({"q1": col.to_pylist(), "q2": ["1"] * 10})
    assert as_responses(frame).codes[:, 0].tolist() == [1, 0, -1, -1, -1, -1, -1, 1, 0, 1]
    with pytest.raises(ValueError, match="invalid response 'yes' for item 'q1' at row 1"):
        _column_codes(pa.array(["1", "yes"]), "q1", "t", 0)


def test_r_write_table_layout_with_a_skipped_last_item_is_read_like_its_neighbour(tmp_path):
    # R's write.table(sep=",", na="") writes row names with no header field for them and a
    # missing cell as an empty field: one person who skipped the last item made the whole file
    # read as "rows ending in a separator" and refused ("line 3 has 4 fields where the header
    # has 3"), while the neighbour without the skip was read
    rows = ["q1,q2,q3", "p1,1,0,1", "p2,0,1,1", "p3,1,1,0", "p4,0,0,1"]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("\n".join(rows) + "\n")
    b.write_text("\n".join([rows[0], "p1,1,0,", *rows[2:]]) + "\n")
    ra, rb = as_responses(a, empty="keep"), as_responses(b, empty="keep")
    assert ra.persons.tolist() == rb.persons.tolist() == ["p1", "p2", "p3", "p4"]
    assert ra.items.tolist() == rb.items.tolist() == ["q1", "q2", "q3"]
    assert rb.codes[0].tolist() == [1, 0, -1] and np.array_equal(ra.codes[1:], rb.codes[1:])
    # rows of answers that end in a separator keep their reading (a non-empty extra field refused)
    c = tmp_path / "c.csv"
    c.write_text("q1,q2,q3\n1,0,1,\n0,1,1,7\n")
    with pytest.raises(ValueError, match="line 3 has 4 fields where the header has 3"):
        as_responses(c)


def test_r_write_table_layout_with_a_person_column_and_a_skipped_last_item_is_read(tmp_path):
    # write.table(df, sep=",", na="") of a frame with a person column: row names, then the
    # person column; the header names the person column first, which sent the file to the
    # trailing-separator reading, refused ("line 2 has 5 fields where the header has 4") as soon
    # as one person skipped the last item, while the same file without the skip was read
    from privirt.data.responses import private_responses

    rows = ['"person","i1","i2","i3"', '"1","p1",1,0,1', '"2","p2",0,1,1', '"3","p3",1,0,0']
    full, skip = tmp_path / "full.csv", tmp_path / "skip.csv"
    full.write_text("\n".join(rows) + "\n")
    skip.write_text("\n".join([rows[0], rows[1], '"2","p2",0,1,', rows[3]]) + "\n")
    for read in (lambda f: as_responses(f, empty="keep"), private_responses):
        a, b = read(full), read(skip)
        assert a.persons.tolist() == b.persons.tolist() == ["p1", "p2", "p3"]
        assert a.items.tolist() == b.items.tolist() == ["i1", "i2", "i3"]
        assert b.codes[1].tolist() == [0, 1, -1] and np.array_equal(np.delete(a.codes, 1, 0), np.delete(b.codes, 1, 0))


def test_a_stray_field_on_the_first_row_is_refused_not_read_as_row_names(tmp_path, capsys):
    # one extra field on the first data row made pandas take every row's first field for a row
    # name: s01..s05 answered items 'id', q1, q2, q3, each answer one column left and a made-up
    # missing cell (exit 0, private paths too); with a person column, "duplicate person label '1'"
    import privirt

    stray = tmp_path / "stray.csv"
    stray.write_text("id,q1,q2,q3\ns01,1,0,1,1\ns02,0,1,1\ns03,1,1,0\ns04,0,0,1\ns05,1,0,0\n")
    two = tmp_path / "two.csv"
    two.write_text("person,q1,q2\np1,1,0,1\np2,0,1\n")
    for path, fields, header in ((stray, 5, 4), (two, 4, 3)):
        want = rf"{path.name} is not a rectangular table: line 2 has {fields} fields where the header has {header};"
        for read in (as_responses, private_responses):
            with pytest.raises(ValueError, match=want):
                read(path)
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-3)
    with pytest.raises(ValueError, match="line 2 has 5 fields"):
        privirt.release_totals(stray, epsilon=1.0, delta=1e-6, ledger=ledger, n_persons=5,
                               items=["q1", "q2", "q3"])
    assert ledger.spends().empty
    assert main(["estimate", str(stray), "--epsilon", "1", "--ledger", str(tmp_path / "l.db"),
                 "--n-persons", "5", "--items", "q1,q2,q3", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 2 has 5 fields where the header has 4" in err, err
    assert ledger.spends().empty
    # R's layout (a row name first on every row) with one truncated row: named, not padded
    short = tmp_path / "short.csv"
    short.write_text("q1,q2,q3\np1,1,0,1\np2,0,1\np3,1,1,0\np4,0,0,1\n")
    for read in (as_responses, private_responses):
        with pytest.raises(ValueError, match="line 3 has 3 fields where the header has 3 and the other rows 4"):
            read(short)


def test_two_or_more_stray_fields_on_the_first_row_are_refused_by_line(tmp_path, capsys):
    # two extra fields on the first data row made pandas take the first two fields of every row
    # for row labels (a MultiIndex): persons ('x', 'y'), ('p2', '1'), ... each answer shifted, or,
    # with labels read as text, "Could not construct index ..." naming no line
    import privirt

    cases = {"two.csv": ("a,b\nx,y,1,0\np2,1,0\np3,0,1\np4,1,1\n", 4, 2),
             "every.csv": ("a,b\nx,y,1,0\nz,w,0,1\nu,v,1,1\n", 4, 2),
             "three.csv": ("person,a,b\np1,x,y,1,0\np2,1,0\np3,0,1\n", 5, 3),
             "ends.csv": ("a,b\n1,0,,\n0,1,,\n1,1,,\n", 4, 2)}
    for file, (text, fields, header) in cases.items():
        path = tmp_path / file
        path.write_text(text)
        want = rf"{file} is not a rectangular table: line 2 has {fields} fields where the header has {header}"
        for read in (as_responses, private_responses, lambda p: as_responses(p, labels_as_text=False)):
            with pytest.raises(ValueError, match=want):
                read(path)
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-3)
    assert main(["estimate", str(tmp_path / "two.csv"), "--epsilon", "1", "--ledger",
                 str(tmp_path / "l.db"), "--n-persons", "4", "--items", "a,b", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 2 has 4 fields where the header has 2" in err, err
    assert ledger.spends().empty


def test_answers_where_r_layout_has_its_row_names_name_the_short_header(tmp_path, capsys):
    # every row one field longer than the header, its first field 0/1: read as R's write.table
    # layout, the answers became row names, refused as "duplicate person label '1'" -- which
    # sent the user hunting for a repeated person, not for the header's missing label
    import privirt

    short = tmp_path / "short.csv"
    short.write_text("a,b,c\n1,0,1,1\n0,1,0,0\n1,1,1,0\n0,0,1,1\n")
    want = r"short.csv: every row has 4 fields and the header 3,.*header is likely one field short"
    for read in (as_responses, private_responses, lambda p: as_responses(p, labels_as_text=False)):
        with pytest.raises(ValueError, match=want):
            read(short)
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-3)
    assert main(["estimate", str(short), "--epsilon", "1", "--ledger", str(tmp_path / "l.db"),
                 "--n-persons", "4", "--items", "a,b,c", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "add the missing" in err and "duplicate" not in err, err
    assert ledger.spends().empty
    # repeated row names that are labels keep their message; a person column replaces them
    named = tmp_path / "named.csv"
    named.write_text('"a","b"\n"p1",1,0\n"p1",0,1\n')
    with pytest.raises(ValueError, match="duplicate person label 'p1'"):
        as_responses(named)
    person = tmp_path / "person.csv"
    person.write_text('"person","a","b"\n"1","p1",1,0\n"1","p2",0,1\n')
    assert as_responses(person).persons.tolist() == ["p1", "p2"]

"""Bad input on the command line (review r24_11): each is refused in one line naming the
problem and what to do, exit != 0, nothing spent and nothing written."""

from __future__ import annotations

import pytest

import privirt
from privirt.cli import main


@pytest.fixture
def wide(tmp_path):
    X, _, _ = privirt.simulate_rasch(60, 5, seed=63_000_001)
    path = tmp_path / "wide.csv"
    path.write_text("\n".join([",".join(f"i{j}" for j in range(5))]
                              + [",".join(str(int(v)) for v in row) for row in X]) + "\n")
    return path


def _refused(argv, capsys) -> str:
    """Run ``argv``; it must exit != 0 with one ``privirt: error:`` line, which is returned."""
    try:
        rc = main(argv)  # a ValueError: its line, and the exit status returned
    except SystemExit as exc:  # a usage error: argparse exits
        rc = exc.code
    assert rc not in (0, None)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privirt: error: "), err
    return err[0]


_SAMPLING = ["--iter", "40", "--warmup", "20", "--seed", "63000002", "--no-progress"]


@pytest.mark.parametrize("argv", [
    ["gibbs", "FILE", *_SAMPLING, "--plots", ""],
    ["gibbs", "FILE", *_SAMPLING, "--out", ""],
    ["mh", "FILE", *_SAMPLING, "--plots", ""],
    ["mh", "FILE", *_SAMPLING, "--out", ""],
    ["fit", "FILE", "--no-progress", "--plots", ""],
    ["fit", "FILE", "--no-progress", "--out", ""],
    ["estimate", "FILE", "--out", ""],
    ["estimate", "FILE", "--epsilon", "1", "--ledger", ""],
], ids=lambda argv: f"{argv[0]}{argv[-2]}")
def test_an_empty_output_or_ledger_path_is_refused_in_one_line(wide, tmp_path, monkeypatch, capsys, argv):
    # Path("") is the current folder: gibbs and fit wrote their plots there, mh ignored --plots ""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    err = _refused([str(wide) if a == "FILE" else a for a in argv], capsys)
    assert f"argument {argv[-2]}: expected a path, got an empty string" in err
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["estimate", "FILE", "--epsilon", "1", "--ledger", "LEDGER"],
    ["budget", "show", "LEDGER"],
])
def test_a_missing_ledger_is_advised_in_command_line_words(wide, tmp_path, capsys, argv):
    # the library's advice also named the Python constructor Ledger(path, epsilon=..., delta=...)
    ledger = tmp_path / "nonexist.db"
    err = _refused([{"FILE": str(wide), "LEDGER": str(ledger)}.get(a, a) for a in argv], capsys)
    assert err == (f"privirt: error: no ledger at {ledger}; create one with "
                   "`privirt budget init PATH --epsilon E --delta D`")
    assert not ledger.exists()


@pytest.mark.parametrize("mechanism", [[], ["--mechanism", "laplace"], ["--mechanism", "gaussian"]])
def test_shuffle_without_randomized_response_is_refused_in_command_line_words(wide, tmp_path, capsys,
                                                                             mechanism):
    # the library's words came through: "shuffle=True applies to mechanism='randomized_response' only"
    ledger = tmp_path / "l.db"
    main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-6"])
    capsys.readouterr()
    before = ledger.read_bytes()
    err = _refused(["estimate", str(wide), "--epsilon", "1", "--ledger", str(ledger), "--shuffle",
                    *mechanism], capsys)
    assert err == ("privirt: error: --shuffle applies to --mechanism randomized_response only; "
                   "add it or drop --shuffle (nothing was spent)")
    assert ledger.read_bytes() == before


@pytest.mark.parametrize("command", ["estimate", "fit"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "-1", "abc"])
def test_a_regularization_that_is_not_a_finite_number_at_least_0_names_the_flag(wide, capsys, command,
                                                                                 value):
    # nan and inf passed the flag's type and the library's "regularization must be ..." came through;
    # the refusal names auto too, the stated default ('abc' said only "expected a number")
    err = _refused([command, str(wide), "--method", "spectral", f"--regularization={value}"], capsys)
    assert f"argument --regularization: must be auto or a finite number >= 0, got {value!r} (see" in err


@pytest.mark.parametrize("command", [["estimate"], ["fit", "--no-progress"], ["gibbs", *_SAMPLING],
                                     ["mh", *_SAMPLING]], ids=lambda c: c[0])
@pytest.mark.parametrize("encoding, byte", [("latin-1", "0xe9"), ("utf-16", "0xff")])
def test_a_data_file_that_is_not_utf8_is_refused_with_the_remedy(tmp_path, capsys, command, encoding, byte):
    # the codec's own words came through ("'utf-8' codec can't decode byte 0xe9 in position 3"),
    # naming no remedy and a position counted from pandas' chunk, not the file
    path = tmp_path / "enc.csv"
    path.write_text("person,q0,q1\nJosé,0,1\np2,1,0\np3,1,1\n", encoding=encoding)
    err = _refused([command[0], str(path), *command[1:]], capsys)
    assert err == f"privirt: error: {path} is not UTF-8 text (byte {byte} cannot be decoded); save it as UTF-8"


@pytest.mark.parametrize("spec, message", [
    ("@", "--items @ needs a file name: @FILE, a file with one item label a line"),
    ("@FOLDER", "--items @FOLDER is a folder; give a file with one item label a line"),
    ("@FOLDER/none.txt", "--items @FOLDER/none.txt: no such file FOLDER/none.txt"),
    ("@/dev/null", "--items @/dev/null is not a regular file; give a file with one item label a line"),
])
def test_items_at_a_folder_or_at_no_name_is_worded_apart_from_a_missing_file(wide, tmp_path, capsys,
                                                                            spec, message):
    # both were "no such file": "--items @adir: no such file adir" of a folder that exists, and
    # "no such file ." for "@"
    folder = tmp_path / "adir"
    folder.mkdir()
    spec, message = (t.replace("FOLDER", str(folder)) for t in (spec, message))
    err = _refused(["estimate", str(wide), "--epsilon", "1", "--seed", "63000003", "--items", spec], capsys)
    assert err == f"privirt: error: {message}"


@pytest.mark.parametrize("argv, message", [
    (["estimate", ""], "argument FILE: expected a file name, got an empty string"),
    (["fit", ""], "argument FILE: expected a file name, got an empty string"),
    (["fit", "--andersen", ""], "argument --andersen: the split is median or mean, got ''"),
    (["gibbs", "", *_SAMPLING], "argument FILE: expected a file name, got an empty string"),
    (["mh", "", *_SAMPLING], "argument FILE: expected a file name, got an empty string"),
    (["budget", "init", "", "--epsilon", "1", "--delta", "1e-6"], "argument PATH: expected a path, got an empty string"),
    (["budget", "show", ""], "argument PATH: expected a path, got an empty string"),
    (["sweep", "", "--out", "out"], "argument CONFIG: expected a path, got an empty string"),
], ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else None)
def test_an_empty_file_argument_is_named_as_empty_not_as_the_current_folder(tmp_path, monkeypatch, capsys,
                                                                            argv, message):
    # Path("") is ".": "estimate ''" said ". is a directory", "budget init ''" ". already exists"
    monkeypatch.chdir(tmp_path)
    err = _refused(argv, capsys)
    assert err.startswith(f"privirt: error: {message} (see `privirt ")
    assert list(tmp_path.iterdir()) == []


def test_drop_cols_with_the_dask_engine_is_refused_not_ignored(tmp_path, capsys):
    """--drop-cols is applied by the in-memory reader; the Dask engine would read the columns
    anyway, so the pair is refused in one line before the data are read."""
    path = tmp_path / "t.parquet"
    path.write_bytes(b"not read")
    assert main(["estimate", str(path), "--engine", "dask", "--drop-cols", "state"]) == 2
    err = capsys.readouterr().err
    assert err == "privirt: error: --drop-cols is applied by the in-memory reader; use --engine local\n"

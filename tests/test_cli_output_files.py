"""CLI: output paths refused up front, in one line, before any work or spend."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import privirt
from privirt.cli import main


@pytest.fixture
def lsat_csv(tmp_path):
    path = tmp_path / "lsat6.csv"
    privirt.load_dataset("lsat6").to_csv(path)
    return path


def _one_error_line(err: str) -> str:
    assert err.startswith("privirt: error: ") and err.count("\n") == 1, err
    return err


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def test_out_name_too_long_for_the_temporary_file_is_refused_before_spending(lsat_csv, tmp_path, capsys):
    """A legal name within 14 bytes of NAME_MAX passed the check, the ledger was debited, then
    atomic_write's temporary ``.NAME.XXXXXXXX.tmp`` was too long: budget spent, nothing written."""
    from privirt._files import TEMPORARY_EXTRA_BYTES, temporary_path

    assert len(temporary_path(Path("x.csv")).name) == len("x.csv") + TEMPORARY_EXTRA_BYTES
    folder = tmp_path / "o"
    folder.mkdir()
    longest = _name_max(folder) - TEMPORARY_EXTRA_BYTES
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-4"]) == 0
    capsys.readouterr()
    out = folder / ("a" * (longest + 1 - 4) + ".csv")
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--ledger", str(ledger), "--n-boot", "0",
                 "--out", str(out)]) == 2
    err = _one_error_line(capsys.readouterr().err)
    assert f"file name is too long ({longest + 1} bytes; at most {longest} here)" in err
    assert list(folder.iterdir()) == []
    assert main(["budget", "show", str(ledger)]) == 0
    assert "(0 spend(s)" in capsys.readouterr().out
    out = folder / ("a" * (longest - 4) + ".csv")  # the longest name that can be written
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--ledger", str(ledger), "--n-boot", "0",
                 "--out", str(out)]) == 0
    assert list(folder.iterdir()) == [out]


def _folder_of_length(base: Path, length: int) -> Path:
    """A new folder under ``base`` whose absolute path is ``length`` bytes long."""
    path = os.fsencode(os.path.realpath(base))
    while len(path) < length:
        path += b"/" + b"d" * min(200, length - len(path) - 1)
        if len(path) == length - 1:  # (no room for "/" and a name of one byte)
            path = path[:-1]
    os.makedirs(path)
    return Path(os.fsdecode(path))


def test_out_whose_path_is_too_long_is_not_called_a_name_too_long(lsat_csv, tmp_path, capsys):
    """A short name in a folder whose path is near PATH_MAX was refused with "the file name is too
    long (7 bytes; at most 241 here)": the whole path (with the temporary file's name) was too long."""
    from privirt._files import TEMPORARY_EXTRA_BYTES
    from privirt.cli._paths import check_output_file

    try:
        path_max = os.pathconf(tmp_path, "PC_PATH_MAX")
    except (OSError, ValueError):
        pytest.skip("no PATH_MAX here")
    longest = path_max - 1 - TEMPORARY_EXTRA_BYTES
    folder = _folder_of_length(tmp_path, longest - len("/res.csv"))
    assert check_output_file(folder / "res.csv", "--out", (".csv",)) == folder / "res.csv"  # the longest path
    out = folder / "res1.csv"
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--n-boot", "0", "--out", str(out)]) == 2
    err = _one_error_line(capsys.readouterr().err)
    assert f": the path is too long ({longest + 1} bytes as an absolute path; at most {longest} here); " \
           "give a file in a folder with a shorter path" in err and "name" not in err.replace(str(out), "")
    assert list(folder.iterdir()) == []


@pytest.mark.skipif(not os.path.isdir("/proc") or not os.access("/proc", os.W_OK),
                    reason="needs a /proc that os.access calls writable (Linux, as root)")
def test_out_in_a_folder_that_refuses_new_files_is_refused_before_work(lsat_csv, capsys):
    """os.access calls /proc writable for root, but no file can be created there."""
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--n-boot", "0", "--out", "/proc/x.csv"]) == 2
    assert "cannot create files in the folder /proc" in _one_error_line(capsys.readouterr().err)


def test_out_check_leaves_no_temporary_file(tmp_path):
    from privirt.cli._paths import check_output_file

    assert check_output_file(tmp_path / "new.csv", "--out", (".csv",)) == tmp_path / "new.csv"
    assert list(tmp_path.iterdir()) == []


def test_out_through_a_dangling_link_names_the_missing_folder(lsat_csv, tmp_path, capsys):
    """The check tested the link target's folder but the message named the link's (which exists)."""
    link = tmp_path / "dangling.csv"
    link.symlink_to(tmp_path / "nowhere" / "x.csv")
    assert main(["estimate", str(lsat_csv), "--out", str(link)]) == 2
    err = _one_error_line(capsys.readouterr().err)
    assert f"the folder {(tmp_path / 'nowhere').resolve()} does not exist" in err
    assert f"a link to {(tmp_path / 'nowhere' / 'x.csv').resolve()}" in err


@pytest.mark.parametrize("command", ["fit", "gibbs", "mh"])
def test_out_and_plots_on_the_same_path_are_refused_before_work(command, lsat_csv, tmp_path, capsys,
                                                                 monkeypatch):
    """fit did the whole fit, made a folder named like the --out file, then failed on the file;
    gibbs wrote the summary, then failed on the folder (a raw errno line, rc 2)."""
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    assert main([command, str(lsat_csv), "--out", "same.csv", "--plots", "same.csv"]) == 2
    err = _one_error_line(capsys.readouterr().err)
    assert "--plots same.csv is the --out file; give another folder" in err
    assert main([command, str(lsat_csv), "--out", "same.csv", "--plots", "same.csv/figs"]) == 2
    assert "--plots same.csv/figs is inside the --out file same.csv" in _one_error_line(capsys.readouterr().err)
    assert sorted(tmp_path.iterdir()) == before


def test_out_inside_the_plots_folder_is_still_allowed(tmp_path):
    from privirt.cli._paths import check_out_and_plots

    (tmp_path / "figs").mkdir()
    check_out_and_plots(tmp_path / "figs" / "summary.csv", tmp_path / "figs")
    check_out_and_plots(None, tmp_path / "figs")


def test_an_out_path_over_path_max_as_given_is_one_line(tmp_path, capsys):
    # 'x/../' repeated past PATH_MAX: Path.is_dir() and resolve() raised ENAMETOOLONG themselves,
    # before the creation check, and the CLI printed '[Errno 36] File name too long: ...' (4 KB)
    import pandas as pd

    from privirt.cli import main

    data = tmp_path / "d.csv"
    pd.DataFrame([[1, 0], [0, 1], [1, 1]], columns=["a", "b"]).to_csv(data, index=False)
    out = str(tmp_path) + "/" + "x/../" * 900 + "out.csv"
    assert main(["estimate", str(data), "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Errno" not in err and len(err) < 300, err
    assert "--out: the path is too long (" in err and "give a file in a folder with a shorter path" in err
    assert list(tmp_path.iterdir()) == [data]


def test_a_long_name_is_called_a_long_name_and_a_file_is_not_a_missing_folder(tmp_path, capsys):
    # a 300-byte name failed in Path.is_dir() and was called 'the path is too long ... give a file
    # in a folder with a shorter path'; 'd1.csv/o.csv' with d1.csv a file said the folder d1.csv
    # 'does not exist'
    import pandas as pd

    from privirt.cli import main

    data = tmp_path / "d.csv"
    pd.DataFrame([[1, 0], [0, 1], [1, 1]], columns=["a", "b"]).to_csv(data, index=False)
    assert main(["estimate", str(data), "--out", str(tmp_path / ("x" * 300 + ".csv"))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out: a name in the path is too long (304 bytes); give a shorter name" in err
    assert main(["estimate", str(data), "--out", str(data / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{data} is a file, not a folder" in err
    assert list(tmp_path.iterdir()) == [data]


@pytest.fixture
def seven_items_csv(tmp_path):
    import pandas as pd

    X, *_ = privirt.simulate_2pno(40, 7, seed=3)
    path = tmp_path / "r.csv"
    pd.DataFrame(X, index=[f"p{i}" for i in range(40)],
                 columns=[f"i{j}" for j in range(7)]).to_csv(path)
    return path


_FAST = ["--iter", "6", "--warmup", "2", "--seed", "1", "--device", "cpu", "--no-progress"]


@pytest.mark.parametrize("command, plot, extra", [
    ("fit", "wright_map.png", []),
    ("fit", "andersen.png", ["--andersen"]),
    ("gibbs", "item_response_curves.png", _FAST),
    ("gibbs", "theta_density.png", _FAST),
    ("mh", "ideal_points.png", _FAST),
    ("mh", "trace_b.png", _FAST),
])
def test_a_plot_file_name_that_is_a_folder_is_refused_before_work(command, plot, extra,
                                                                    seven_items_csv, tmp_path,
                                                                    capsys, monkeypatch):
    """fit did all its work and wrote --out, gibbs sampled and wrote the other plots, then each
    ended on a raw '[Errno 21] Is a directory: ...'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f1" / plot).mkdir(parents=True)
    assert main([command, str(seven_items_csv), "--plots", "f1", "--out", "f1o.csv", *extra]) == 2
    err = _one_error_line(capsys.readouterr().err)
    assert f"--plots f1: {Path('f1', plot)} is a folder; remove it or give another folder" in err
    assert not (tmp_path / "f1o.csv").exists()
    assert [p.name for p in (tmp_path / "f1").iterdir()] == [plot]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_plot_file_name_that_is_a_fifo_is_refused_before_work(seven_items_csv, tmp_path, capsys):
    folder = tmp_path / "f1"
    folder.mkdir()
    os.mkfifo(folder / "test_information.png")
    assert main(["fit", str(seven_items_csv), "--plots", str(folder)]) == 2
    err = _one_error_line(capsys.readouterr().err)
    assert f"{folder / 'test_information.png'} is not a regular file" in err
    assert [p.name for p in folder.iterdir()] == ["test_information.png"]


@pytest.mark.parametrize("command, extra", [("fit", []), ("mh", _FAST), ("gibbs", _FAST)])
def test_a_plot_that_cannot_be_written_is_one_line_naming_it(command, extra, seven_items_csv,
                                                             tmp_path, capsys, monkeypatch):
    """The backstop: an OSError while saving a figure (a full disk, say) gave the raw errno."""
    import errno

    pytest.importorskip("matplotlib")
    from privirt import plots

    def full_disk(fig, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(plots, "_save", full_disk)
    assert main([command, str(seven_items_csv), "--plots", str(tmp_path / "f"), *extra]) == 2
    err = capsys.readouterr().err  # (after the run's own lines: a convergence warning)
    last = err.splitlines()[-1]
    assert last.startswith(f"privirt: error: could not write {tmp_path / 'f'}{os.sep}"), err
    assert last.endswith(".png (No space left on device); give another --plots folder"), err
    assert "Errno" not in err

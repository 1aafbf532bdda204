"""CLI: ``privirt fit``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def data_csv(tmp_path):
    X, _, _ = privirt.simulate_rasch(600, 8, seed=40)
    frame = pd.DataFrame(X, columns=[f"q{i}" for i in range(8)])
    frame.index.name = "person"
    path = tmp_path / "responses.csv"
    frame.to_csv(path)
    return path, frame


def _table(out: str) -> pd.DataFrame:
    lines = out.splitlines()
    header = lines[1].split()
    rows = [ln.split() for ln in lines[2:] if ln.startswith("q")]
    return pd.DataFrame([[float(v) for v in r[1:]] for r in rows], index=[r[0] for r in rows],
                        columns=header)


def test_fit_prints_item_table_and_reliability(data_csv, capsys):
    path, frame = data_csv
    assert main(["fit", str(path)]) == 0
    out = capsys.readouterr().out
    table = _table(out)
    assert list(table.columns) == ["beta", "se", "infit", "outfit", "infit_z", "outfit_z", "n"]
    est = privirt.cmle_estimate(frame)
    fit = privirt.item_fit(frame, est)
    np.testing.assert_allclose(table["infit"], fit["infit"], atol=6e-4)
    np.testing.assert_allclose(table["outfit_z"], fit["outfit_z"], atol=6e-4)
    np.testing.assert_allclose(table["beta"], est.beta, atol=6e-4)
    rel = privirt.reliability(frame, est)
    assert f"person separation reliability {rel.person_reliability:.3f}" in out
    assert "KR-20" in out


def test_fit_spectral_andersen_out_and_plots(data_csv, tmp_path, capsys):
    path, frame = data_csv
    folder = tmp_path / "plots"
    out_csv = tmp_path / "fit.csv"
    assert main(["fit", str(path), "--method", "spectral", "--andersen", "--out", str(out_csv),
                 "--plots", str(folder)]) == 0
    captured = capsys.readouterr()
    assert "spectral estimate: 600 persons × 8 items" in captured.out
    res = privirt.andersen_test(frame)
    assert f"LR = {res.statistic:.3f}, df = 7" in captured.out
    assert sorted(p.name for p in folder.iterdir()) == [
        "andersen.png", "item_information.png", "test_information.png", "wright_map.png"]
    written = pd.read_csv(out_csv, index_col="item")
    assert list(written.columns) == ["beta", "infit", "outfit", "infit_z", "outfit_z", "n"]
    np.testing.assert_allclose(written["beta"], privirt.spectral_estimate(frame).beta)


def test_fit_errors_are_one_line_and_write_nothing(data_csv, tmp_path, capsys):
    path, _ = data_csv
    cases = [
        (["--plots", str(tmp_path / "missing" / "dir")], "does not exist"),
        (["--plots", str(path)], "is not a folder"),
        (["--out", str(tmp_path / "x.json")], "must end in .csv"),
        (["--out", str(path)], "is the input file"),  # would overwrite the data
        (["--plots", str(tmp_path / "dangling")], "is a link to nothing"),  # said "the folder . does not exist"
    ]
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    before = path.read_bytes()
    for extra, message in cases:
        assert main(["fit", str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("privirt: error:") and message in err
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "missing").exists() and not (tmp_path / "x.json").exists()
    assert path.read_bytes() == before
    assert main(["fit", str(tmp_path / "nope.csv")]) == 2
    assert "privirt: error:" in capsys.readouterr().err
    # a failing Andersen test (LSAT-7: median split leaves only perfect scores above) stops
    # before any plot is written
    lsat = tmp_path / "lsat7.csv"
    privirt.load_dataset("lsat7").to_csv(lsat)
    folder = tmp_path / "plots"
    assert main(["fit", str(lsat), "--andersen", "--plots", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "non-extreme" in err
    # in flags: the library's "split='mean' or a covariate" has no command-line spelling; the
    # advice names the other split, not the median that just failed
    assert err.strip().endswith("split differently (--andersen mean)") and "split=" not in err, err
    assert "--andersen median" not in err
    assert not folder.exists()
    assert main(["fit", str(lsat), "--andersen", "mean"]) == 0  # the advice works
    capsys.readouterr()


def test_fit_module_does_not_import_pandas_or_scipy():
    code = ("import sys, argparse; import privirt.cli.fit as f; "
            "f.register(argparse.ArgumentParser().add_subparsers()); "
            "print(sorted(m for m in ('pandas', 'scipy', 'matplotlib', 'numpy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_fit_package_is_shipped():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = meta["tool"]["setuptools"]["packages"]
    subpackages = {f"privirt.{p.parent.name}" for p in (ROOT / "privirt").glob("*/__init__.py")}
    assert "privirt.fit" in subpackages
    assert subpackages <= set(packages), subpackages - set(packages)


def test_fit_reads_a_pattern_table(capsys):
    from privirt.data.datasets import dataset_path

    assert main(["fit", str(dataset_path("lsat7")), "--weights-col", "frequency",
                 "--andersen", "mean"]) == 0
    out = capsys.readouterr().out
    assert "1000 persons × 5 items" in out
    res = privirt.andersen_test(privirt.load_dataset("lsat7"), "mean")
    assert f"LR = {res.statistic:.3f}, df = 4" in out


def test_fit_takes_the_regularization_its_spectral_advice_names(tmp_path, capsys):
    X, _, _ = privirt.simulate_rasch(300, 6, seed=41)
    frame = pd.DataFrame(X, columns=[f"q{i}" for i in range(6)])
    frame["q0"] = 1.0  # never wrong: only λ compares it with the rest
    frame.index.name = "person"
    path = tmp_path / "allright.csv"
    frame.to_csv(path)
    assert main(["fit", str(path), "--method", "spectral"]) == 0
    err = capsys.readouterr().err
    assert "pass --regularization 0 to refuse" in err, err
    # the warning's advice is a flag of privirt fit, and refuses the data in one line ...
    assert main(["fit", str(path), "--method", "spectral", "--regularization", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("privirt: error: the item comparison graph has 2 separate parts")
    assert len(err.strip().splitlines()) == 1 and "or use --regularization 1" in err, err
    # ... whose own advice ends the error, and λ sets the estimate
    assert main(["fit", str(path), "--method", "spectral", "--regularization", "1"]) == 0
    beta1 = _table(capsys.readouterr().out)["beta"]
    assert main(["fit", str(path), "--method", "spectral", "--regularization", "4"]) == 0
    beta4 = _table(capsys.readouterr().out)["beta"]
    assert beta4["q0"] > beta1["q0"] + 0.1  # a larger pseudo-count pulls q0 towards the rest
    # CML has no λ: refused in one line before any work
    assert main(["fit", str(path), "--regularization", "1"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "privirt: error: --regularization applies to --method spectral only"
    # items nobody answered with the others: λ cannot link them, so it is not advised
    split = frame.drop(columns="q0")
    split.iloc[:150, 3:] = np.nan
    split.iloc[150:, :3] = np.nan
    split.to_csv(path)
    for extra in ([], ["--regularization", "0"]):
        assert main(["fit", str(path), "--method", "spectral", *extra]) == 2
        err = capsys.readouterr().err
        assert "separate parts" in err and "regularization" not in err, err


@pytest.mark.parametrize("split", ["median", "mean"])
def test_andersen_on_two_items_names_no_score_split(split, tmp_path, capsys):
    # --andersen median advised "--andersen mean" and that advised "--andersen median": with two
    # items every non-extreme score is 1 and no score split can work
    path = tmp_path / "two.csv"
    pd.DataFrame([[0, 0], [1, 0], [0, 1], [1, 1]] * 20, columns=["a", "b"]).to_csv(path, index=False)
    assert main(["fit", str(path), "--andersen", split]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--andersen" not in err, err
    assert "split by a covariate (privirt.andersen_test's split= in Python) or add items" in err


def test_andersen_with_too_few_items_names_the_groups_and_a_remedy(tmp_path, capsys):
    # mean 1.8: 'low' cannot estimate c (nobody right), 'high' cannot estimate a (all right)
    path = tmp_path / "five.csv"
    path.write_text("a,b,c\n1,0,0\n1,1,0\n0,1,0\n1,0,1\n1,1,1\n")
    assert main(["fit", str(path), "--andersen", "mean"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("privirt: warning:"), err  # items dropped
    assert "group(s) 'low', 'high'" in err[1], err[1]
    assert err[1].endswith("split by a covariate (privirt.andersen_test's split= in Python) or add "
                           "items"), err[1]

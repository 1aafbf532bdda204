"""The experiment scripts in experiments/ (the sweep configurations are in test_sweep.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ideal_points():
    spec = importlib.util.spec_from_file_location(
        "ideal_points", ROOT / "experiments" / "ideal_points.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("extra, message", [
    ([], "no such file"),
    (["--drop-cols", "party"], "--drop-cols: no column(s) ['party']"),
    (["--anchor", "zz=+1"], "unknown anchor label 'zz'"),
    (["--iter", "0"], "n_iter must be at least 1"),
])
def test_ideal_points_bad_input_is_one_line(tmp_path, capsys, extra, message):
    # bad input ended in a Python traceback
    votes = tmp_path / "votes.csv"
    votes.write_text("voter,v1,v2,v3\na,1,0,1\nb,0,1,0\nc,1,1,0\n", encoding="utf-8")
    path = str(tmp_path / "nope.csv") if not extra else str(votes)
    code = _ideal_points().main([path, "--quiet", "--out", str(tmp_path / "out"), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("ideal_points.py: error:") and message in err[-1]
    assert not any(line.startswith("Traceback") for line in err)


@pytest.fixture
def votes_with_labels(tmp_path):
    """A small simulated votes table with two label columns beside the voter column."""
    import pandas as pd

    import privirt

    X, *_ = privirt.simulate_2pno(30, 6, seed=4)
    frame = pd.DataFrame(X, columns=[f"v{j}" for j in range(6)])
    frame.insert(0, "voter", [f"p{i}" for i in range(30)])
    frame.insert(1, "party", ["D", "R"] * 15)
    frame.insert(2, "state", ["XX"] * 30)
    path = tmp_path / "votes.csv"
    frame.to_csv(path, index=False)
    return path


def _short_run(module, path, out, monkeypatch, *extra) -> int:
    """The script on ``path`` with 40 iterations and its figures stubbed (matplotlib takes
    seconds a figure; what is drawn is not checked here)."""
    from privirt import plots

    for name in ("ideal_point_plot", "trace_plot"):
        monkeypatch.setattr(plots, name, lambda *a, **k: None)
    return module.main([str(path), "--person-col", "voter", "--iter", "40", "--warmup", "20",
                        "--chains", "2", "--seed", "1", "--quiet", "--out", str(out), *extra])


def test_ideal_points_warns_when_the_chains_have_not_converged(votes_with_labels, tmp_path,
                                                               capsys, monkeypatch):
    # printed "max R-hat: 2.310" and exited 0 without a word; privirt mh warns
    code = _short_run(_ideal_points(), votes_with_labels, tmp_path / "out", monkeypatch,
                      "--drop-cols", "party", "state")
    printed = capsys.readouterr()
    assert code == 0
    warning = [line for line in printed.err.splitlines() if "warning" in line]
    assert len(warning) == 1, printed.err
    assert warning[0].startswith("ideal_points.py: warning: the chains have not converged: ")
    assert "R-hat <= 1.01 and bulk ESS >= 400" in warning[0] and "(--iter, --warmup)" in warning[0]
    assert "warning" not in printed.out


@pytest.mark.parametrize("drop", [["party,state"], ["party", "state"], ["party,", "state"],
                                  ["party, state"]])
def test_ideal_points_drop_cols_takes_commas_or_spaces(drop, votes_with_labels, tmp_path,
                                                       capsys, monkeypatch):
    # --drop-cols party,state (as every privirt command takes it) was "no column(s)
    # ['party,state']"
    import pandas as pd

    out = tmp_path / "out"
    assert _short_run(_ideal_points(), votes_with_labels, out, monkeypatch,
                      "--drop-cols", *drop) == 0
    summary = pd.read_csv(out / "summary.csv", index_col=[0, 1])
    assert sorted(summary.loc["a"].index) == [f"v{j}" for j in range(6)]


def test_ideal_points_unknown_drop_cols_says_what_to_do(votes_with_labels, tmp_path, capsys):
    code = _ideal_points().main([str(votes_with_labels), "--person-col", "voter", "--quiet",
                                 "--out", str(tmp_path / "out"), "--drop-cols", "party,nope"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "no column(s) ['nope']" in err[0] and "separated by spaces or commas" in err[0]
    assert not (tmp_path / "out").exists()

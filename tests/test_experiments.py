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

"""CLI: ``privirt estimate --model 2pl --epsilon E``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.cli import main

pytest.importorskip("mechanisms")


@pytest.fixture
def lsat7_csv(tmp_path):
    path = tmp_path / "lsat7.csv"
    privirt.load_dataset("lsat7").to_csv(path, index=False)
    return path


def test_model_2pl_prints_a_b_intervals_and_statement(lsat7_csv, tmp_path, capsys):
    out = tmp_path / "fit.json"
    assert main(["estimate", str(lsat7_csv), "--model", "2pl", "--epsilon", "2", "--seed", "3",
                 "--top-k", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2PL estimate (seeded noise: NOT private): 1000 persons × 5 items" in text and "NOT PRIVATE" in text
    assert "disagreement" in text and "top 2 most discriminating" in text
    payload = json.loads(out.read_text())
    assert payload["model"] == "2pl" and payload["privacy"]["n_persons"] == 1000
    row = payload["items"][0]
    assert set(row) == {"item", "a", "a_lo", "a_hi", "b", "b_lo", "b_hi"} and row["a_lo"] < row["a_hi"]
    # the same seed in Python gives the same numbers
    fit = privirt.private_2pl_estimate(pd.read_csv(lsat7_csv), epsilon=2, seed=3)
    assert np.allclose([r["a"] for r in payload["items"]], fit.a.to_numpy())


@pytest.mark.parametrize("extra, word", [
    ([], "--epsilon"),
    (["--epsilon", "1", "--method", "cmle"], "Rasch model only"),
    (["--epsilon", "1", "--mechanism", "laplace"], "Rasch model only"),
    (["--epsilon", "1", "--seed", "1", "--ledger", "x.ledger"], "NOT private"),
    (["--epsilon", "0"], "epsilon"),
])
def test_model_2pl_bad_options_are_one_line_errors(lsat7_csv, capsys, extra, word):
    assert main(["estimate", str(lsat7_csv), "--model", "2pl", *extra]) == 2
    err = capsys.readouterr().err
    assert word in err and err.count("\n") == 1 and "Traceback" not in err


def test_model_2pl_refuses_missing_cells_and_spends_nothing(tmp_path, capsys):
    X = privirt.load_dataset("lsat7").astype(float)
    X.iloc[0, 0] = np.nan
    path = tmp_path / "m.csv"
    X.to_csv(path, index=False)
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-4"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(path), "--model", "2pl", "--epsilon", "1", "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert "complete data" in err and "--missing mcar" in err and err.count("\n") == 1
    assert len(privirt.Ledger(ledger).spends()) == 0


def test_model_2pl_missing_mcar_estimates_from_incomplete_data(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = privirt.load_dataset("lsat7").astype(float)
    X = X.mask(rng.random(X.shape) < 0.2)
    path = tmp_path / "m.csv"
    X.to_csv(path, index=False)
    ledger = tmp_path / "b.ledger"
    out = tmp_path / "fit.json"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-4"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(path), "--model", "2pl", "--missing", "mcar", "--epsilon", "2",
                 "--ledger", str(ledger), "--n-boot", "40", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2PL estimate (private): 1000 persons × 5 items" in text and "MCAR" in text
    assert "input domain: rows in {0, 1, missing}^m" in text
    payload = json.loads(out.read_text())
    assert payload["missing"] == "mcar" and len(payload["items"]) == 5
    assert all(r["a_lo"] < r["a"] < r["a_hi"] for r in payload["items"])
    assert len(privirt.Ledger(ledger).spends()) == 1

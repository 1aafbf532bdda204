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
    (["--epsilon", "1", "--n-boot", "5"], "--n-boot must be 0"),
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


def test_model_2pl_n_boot_reaches_the_estimate(lsat7_csv, tmp_path, capsys):
    """--n-boot was once dropped for --model 2pl (every run took the default 200 replicates):
    0 gives the point estimate without interval columns, 40 the API's intervals with 40."""
    data = pd.read_csv(lsat7_csv)
    point = tmp_path / "point.json"
    assert main(["estimate", str(lsat7_csv), "--model", "2pl", "--epsilon", "2", "--seed", "3",
                 "--n-boot", "0", "--out", str(point)]) == 0
    assert "a_lo" not in capsys.readouterr().out
    rows = json.loads(point.read_text())["items"]
    assert set(rows[0]) == {"item", "a", "b"}
    assert np.allclose([r["a"] for r in rows], privirt.private_2pl_estimate(data, epsilon=2, seed=3, n_boot=0).a)
    forty = tmp_path / "forty.json"
    assert main(["estimate", str(lsat7_csv), "--model", "2pl", "--epsilon", "2", "--seed", "3",
                 "--n-boot", "40", "--out", str(forty)]) == 0
    lo = [r["a_lo"] for r in json.loads(forty.read_text())["items"]]
    assert np.allclose(lo, privirt.private_2pl_estimate(data, epsilon=2, seed=3, n_boot=40).ci["a"]["lo"])
    assert not np.allclose(lo, privirt.private_2pl_estimate(data, epsilon=2, seed=3).ci["a"]["lo"])


@pytest.mark.parametrize("model", [[], ["--model", "2pl"]])
def test_out_that_is_the_input_file_is_refused_before_anything_is_spent(lsat7_csv, tmp_path, capsys, model):
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-4"]) == 0
    before = lsat7_csv.read_bytes()
    assert main(["estimate", str(lsat7_csv), *model, "--epsilon", "1", "--ledger", str(ledger),
                 "--out", str(lsat7_csv)]) == 2
    err = capsys.readouterr().err
    assert "is the input file" in err and err.count("\n") == 1
    assert lsat7_csv.read_bytes() == before
    assert main(["budget", "show", str(ledger)]) == 0
    assert "(0 spend(s)" in capsys.readouterr().out


@pytest.mark.parametrize("model", [[], ["--model", "2pl"]])
def test_private_long_table_asks_for_the_item_list_before_checking_top_k(tmp_path, capsys, model):
    """A long table's own labels are data: --top-k is not compared with their number before the
    public --items is given."""
    long = privirt.load_dataset("lsat7").reset_index(names="person").melt(id_vars="person", var_name="item",
                                                                         value_name="response")
    path = tmp_path / "long.csv"
    long.to_csv(path, index=False)
    assert main(["estimate", str(path), *model, "--epsilon", "1", "--top-k", "100"]) == 2
    err = capsys.readouterr().err
    assert "--items" in err and "--top-k" not in err


@pytest.mark.parametrize("extra, reason", [
    (["--items", "item1,item2,item3,item4,item5,extra"],
     "--items names item(s) that nobody answered in lsat7.csv; their cells are all missing: "),
    (["--n-persons", "1001"],
     "--n-persons 1001 counts persons absent from lsat7.csv; they are all-missing rows: "),
])
def test_model_2pl_gives_the_rasch_paths_reason_for_an_all_missing_item_or_person(
        lsat7_csv, tmp_path, capsys, extra, reason):
    """A complete file: --model 2pl said 'the data have missing cells ... drop the incomplete
    rows' for an --items label nobody answered, which names the wrong problem."""
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-4"]) == 0
    capsys.readouterr()
    errs = {}
    for model in (["--method", "totals"], ["--model", "2pl"]):
        assert main(["estimate", str(lsat7_csv), *model, "--epsilon", "1", "--ledger", str(ledger),
                     "--n-boot", "0", *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("privirt: error: " + reason), err
        assert "declare --missing mcar" in err and "(nothing was spent)" in err
        errs[model[1]] = err
    assert "--method spectral" not in errs["2pl"]  # not a 2PL method
    assert len(privirt.Ledger(ledger).spends()) == 0


@pytest.mark.parametrize("model", [["--method", "totals"], ["--model", "2pl"]])
def test_a_long_tables_item_outside_items_is_named_not_called_missing_cells(tmp_path, capsys, model):
    """A long table with one row's item 'Q1' for 'q1' (outside --items) under --missing none was
    told it 'has missing cells ... declare --missing mcar', whose run then failed on 'Q1'; the
    item outside the public set is named first, as the library and `serve dataset add` do."""
    X, _, _ = privirt.simulate_rasch(120, 4, seed=94_700_901)
    wide = pd.DataFrame(X, columns=["q0", "q1", "q2", "q3"]).rename_axis("person").reset_index()
    long = wide.melt(id_vars="person", var_name="item", value_name="response")
    long.loc[long.index[long["item"] == "q1"][0], "item"] = "Q1"
    path = tmp_path / "long.csv"
    long.to_csv(path, index=False)
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-4"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(path), *model, "--epsilon", "1", "--ledger", str(ledger), "--n-boot", "0",
                 "--items", "q0,q1,q2,q3", "--n-persons", "120"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "['Q1']" in err and "not in the public item set" in err, err
    assert "missing mcar" not in err and len(privirt.Ledger(ledger).spends()) == 0

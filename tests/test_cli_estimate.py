"""CLI: ``privirt estimate`` and ``privirt demo``."""

from __future__ import annotations

import json
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
def lsat_csv(tmp_path):
    path = tmp_path / "lsat6.csv"
    privirt.load_dataset("lsat6").to_csv(path)
    return path


def test_estimate_prints_table(lsat_csv, capsys):
    assert main(["estimate", str(lsat_csv), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "1000 persons × 5 items" in out
    lines = [ln.split() for ln in out.splitlines() if ln.startswith("item")]
    table = {name: float(v) for name, v in lines}
    ref = privirt.spectral_estimate(privirt.load_dataset("lsat6"), device="cpu").beta
    for item, value in ref.items():
        assert table[item] == pytest.approx(value, abs=1e-4)


def test_estimate_cmle_with_se_and_top_k(lsat_csv, capsys):
    assert main(["estimate", str(lsat_csv), "--method", "cmle", "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "se" in out.splitlines()[1]
    assert "top 2 hardest: item3, item2" in out  # lowest proportions correct: .553, .709


def test_estimate_writes_csv_and_json(lsat_csv, tmp_path, capsys):
    csv_out = tmp_path / "beta.csv"
    assert main(["estimate", str(lsat_csv), "--method", "cmle", "--out", str(csv_out)]) == 0
    frame = pd.read_csv(csv_out, index_col="item")
    assert list(frame.columns) == ["beta", "se"] and len(frame) == 5
    assert frame["beta"].sum() == pytest.approx(0.0, abs=1e-9)
    json_out = tmp_path / "beta.json"
    assert main(["estimate", str(lsat_csv), "--out", str(json_out)]) == 0
    payload = json.loads(json_out.read_text())
    assert payload["method"] == "spectral" and payload["n_items"] == 5
    assert [r["item"] for r in payload["items"]] == [f"item{i}" for i in range(1, 6)]


def test_estimate_long_format(tmp_path, capsys):
    long = pd.DataFrame(
        {"person": ["a", "a", "b", "b", "c", "c", "d"],
         "item": ["x", "y", "x", "y", "x", "y", "x"],
         "response": [1, 0, 0, 1, 1, 0, 1]}
    )
    path = tmp_path / "long.csv"
    long.to_csv(path, index=False)
    assert main(["estimate", str(path), "--format", "long", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "4 persons × 2 items" in out
    # x is right-and-y-wrong twice, y-right-x-wrong once: x easier
    rows = {ln.split()[0]: float(ln.split()[1]) for ln in out.splitlines() if ln[:1] in "xy"}
    assert rows["x"] < rows["y"]


@pytest.mark.parametrize(
    "content, suffix, match",
    [
        (None, ".csv", "no such file"),
        ("person,q1,q2\na,1,0\nb,2,1\n", ".csv", "invalid response 2"),
        ("", ".csv", "empty"),
        ("a,b\n1,0\n", ".xlsx", "suffix"),
    ],
)
def test_bad_input_exit_2_one_line(tmp_path, capsys, content, suffix, match):
    path = tmp_path / f"data{suffix}"
    if content is not None:
        path.write_text(content)
    assert main(["estimate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("privirt: error:") and match in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_out_suffix_and_top_k(lsat_csv, tmp_path, capsys):
    assert main(["estimate", str(lsat_csv), "--out", str(tmp_path / "x.txt")]) == 2
    assert "--out must end in .csv or .json" in capsys.readouterr().err
    assert main(["estimate", str(lsat_csv), "--top-k", "9"]) == 2
    assert "exceeds the number of items" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["estimate", str(lsat_csv), "--top-k", "0"])
    assert exc.value.code == 2


def test_disconnected_data_is_a_one_line_error(tmp_path, capsys):
    X = pd.DataFrame({"a": [1, 0, np.nan, np.nan], "b": [0, 1, np.nan, np.nan],
                      "c": [np.nan, np.nan, 1, 0], "d": [np.nan, np.nan, 0, 1]})
    path = tmp_path / "split.csv"
    X.to_csv(path, index=False)
    assert main(["estimate", str(path), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "separate parts" in err and err.count("\n") == 1


def _demo_table(out: str, title: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(title))
    rows = []
    for ln in lines[start + 1:]:
        if not ln.strip() or (rows and not ln.startswith("item")):
            break
        rows.append(ln.split())
    return rows


def test_demo_side_by_side(capsys):
    assert main(["demo", "--no-private"]) == 0
    out = capsys.readouterr().out
    rows = _demo_table(out, "Not private")
    assert rows[0] == ["p_correct", "spectral", "cmle", "cmle_se", "spectral-cmle"]
    assert len(rows) == 6 and all(r[0].startswith("item") for r in rows[1:])
    for row in rows[1:]:
        spectral, cmle, diff = float(row[2]), float(row[3]), float(row[5])
        assert abs(spectral - cmle) < 0.05 and abs(spectral - cmle - diff) < 2e-4
    assert "Private" not in out and "2PNO" not in out  # --no-private: only the Rasch table


def test_demo_private_columns_state_their_guarantee_and_the_table_is_not_private(capsys):
    assert main(["demo", "--epsilon", "2"]) == 0
    out = capsys.readouterr().out
    cmle = {r[0]: float(r[3]) for r in _demo_table(out, "Not private")[1:]}
    rows = _demo_table(out, "Private (each column set (2, 1e-4)-DP on its own")
    assert rows[0] == ["totals", "totals_lo", "totals_hi", "alg2", "alg2_lo", "alg2_hi"]
    for r in rows[1:]:
        totals, lo, hi, alg2, alg2_lo, alg2_hi = map(float, r[1:])
        assert lo <= totals <= hi and alg2_lo < alg2_hi
        assert abs(totals - cmle[r[0]]) < 0.6 and abs(alg2 - cmle[r[0]]) < 0.6  # n = 1000, ε = 2
    assert abs(sum(float(r[4]) for r in rows[1:])) < 5e-4  # Algorithm 2 is centred
    assert "95 % interval that includes the privacy noise" in out
    # each part's own sigma (one sigma for two parts did not give the stated rho)
    import re
    assert re.search(r"sigma = \S+ on the item totals and \S+ on the score histogram\)", out), out
    assert re.search(r"sigma = \S+ on the item totals and \S+ on the disagreement counts\)", out), out
    assert "δ = 1e-4" in out and "replace one person's row" in out
    assert "NOT a private release" in out and "(6, 3e-4)-DP" in out
    rows = _demo_table(out, "2PNO discriminations")
    assert rows[0] == ["gibbs_a", "a", "a_lo", "a_hi", "gibbs_b", "b", "b_lo", "b_hi"] and len(rows) == 6
    for r in rows[1:]:
        gibbs_a, a, a_lo, a_hi = map(float, r[1:5])
        assert 0 < a_lo < a_hi and gibbs_a > 0 and a > 0
    # the line under the table: the plain largest difference of the (uncentred) discriminations
    largest = max(abs(float(r[1]) - float(r[2])) for r in rows[1:])
    said = float(re.search(r"max \|a − gibbs_a\| = ([0-9.]+)", out).group(1))
    assert abs(said - largest) < 1.5e-3  # the table's 4 decimals against the line's 3
    assert main(["demo", "--epsilon", "0"]) == 2


def test_subprocess_estimate(lsat_csv):
    proc = subprocess.run(
        [sys.executable, "-m", "privirt", "estimate", str(lsat_csv), "--device", "cpu"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "item3" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "privirt", "estimate", str(lsat_csv) + ".missing"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_person_col_names_the_label_column(tmp_path, capsys):
    """A wide file whose label column is not called 'person': without --person-col the
    error points at the option; with it, the labels come through to the JSON output."""
    X, _, _ = privirt.simulate_rasch(80, 4, seed=3)
    frame = pd.DataFrame(X, columns=[f"q{j}" for j in range(4)])
    frame.insert(0, "voter", [f"v{i:03d}" for i in range(80)])
    path = tmp_path / "votes.csv"
    frame.to_csv(path, index=False)
    assert main(["estimate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--person-col voter" in err
    out = tmp_path / "est.json"
    assert main(["estimate", str(path), "--person-col", "voter", "--out", str(out)]) == 0
    items = [r["item"] for r in json.loads(out.read_text())["items"]]
    assert items == ["q0", "q1", "q2", "q3"]
    assert main(["estimate", str(path), "--person-col", "nobody"]) == 2
    assert "nobody" in capsys.readouterr().err


def test_private_long_table_needs_the_public_item_set(tmp_path, capsys):
    """A long file's item set comes from its rows: a private run asks for --items; with it
    (a list, or @FILE) the result covers exactly those items, one nobody answered too."""
    X, _, _ = privirt.simulate_rasch(300, 4, seed=5)
    long = (pd.DataFrame(X, columns=[1, 2, 3, 4]).rename_axis("person").reset_index()
            .melt(id_vars="person", var_name="item", value_name="response"))
    path = tmp_path / "long.csv"
    long.to_csv(path, index=False)
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-5"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(path), "--epsilon", "1", "--ledger", str(ledger)]) == 2
    assert "--items" in capsys.readouterr().err
    assert main(["budget", "show", str(ledger)]) == 0
    assert "spent" in capsys.readouterr().out  # nothing debited (checked below)
    out = tmp_path / "est.json"
    assert main(["estimate", str(path), "--epsilon", "1", "--items", "1,2,3,4,5",
                 "--ledger", str(ledger), "--out", str(out)]) == 2  # and the number of persons
    assert "--n-persons" in capsys.readouterr().err
    # item 5 was answered by nobody: its cells are missing, which the totals method must be
    # told (one line naming the command to run; nothing spent)
    assert main(["estimate", str(path), "--epsilon", "1", "--items", "1,2,3,4,5", "--n-persons", "300",
                 "--method", "totals", "--ledger", str(ledger), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--missing mcar" in err and "nobody answered" in err and len(err.strip().splitlines()) == 1
    assert privirt.Ledger(ledger).spent().epsilon == 0
    assert main(["estimate", str(path), "--epsilon", "1", "--items", "1,2,3,4,5", "--n-persons", "300",
                 "--ledger", str(ledger), "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert [r["item"] for r in payload["items"]] == ["1", "2", "3", "4", "5"]  # --items, as text
    assert payload["n_items"] == 5 and payload["privacy"]["private"] is True
    spent = privirt.Ledger(ledger).spent().epsilon
    assert 0 < spent <= 1.0 + 1e-12  # one release only: the refused run debited nothing
    (tmp_path / "items.txt").write_text("1\n2\n\n3\n4\n")
    assert main(["estimate", str(path), "--epsilon", "1", "--items", f"@{tmp_path / 'items.txt'}",
                 "--n-persons", "300", "--seed", "1"]) == 0
    assert main(["estimate", str(path), "--items", "1,2"]) == 2  # private-only option
    assert "--items needs --epsilon" in capsys.readouterr().err
    assert main(["estimate", str(path), "--epsilon", "1", "--items", "1,,2", "--seed", "1"]) == 2


def test_items_file_not_utf8_is_named_in_one_line(lsat_csv, tmp_path, capsys):
    """A non-UTF-8 ``--items @FILE`` gave a bare "'utf-8' codec can't decode byte 0xff"."""
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-5"]) == 0
    capsys.readouterr()
    bad = tmp_path / "items_bad.txt"
    bad.write_bytes(b"item1\nitem2\n\xff\xfe\n")
    out = tmp_path / "beta.csv"
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--items", f"@{bad}", "--n-persons", "1000",
                 "--ledger", str(ledger), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"privirt: error: --items @{bad} is not UTF-8 text; save it as UTF-8\n"
    assert len(privirt.Ledger(ledger).spends()) == 0 and not out.exists()

def test_items_file_with_a_utf8_bom_reads_its_first_label_without_it(lsat_csv, tmp_path, capsys):
    """A UTF-8 ``--items @FILE`` with a BOM (Notepad's and Excel's "UTF-8") made the first label
    "\ufeffitem1": the run was refused, saying the data have an item not in --items."""
    items = tmp_path / "items_bom.txt"
    items.write_text("".join(f"item{i}\n" for i in range(1, 6)), encoding="utf-8-sig")
    assert items.read_bytes().startswith(b"\xef\xbb\xbf")
    out = tmp_path / "beta.json"
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--items", f"@{items}", "--n-persons", "1000",
                 "--seed", "1", "--out", str(out)]) == 0
    assert [r["item"] for r in json.loads(out.read_text())["items"]] == [f"item{i}" for i in range(1, 6)]


@pytest.mark.parametrize("eps", ["1e-300", "1e-200"])
def test_vanishing_epsilon_is_refused_in_one_line(lsat_csv, tmp_path, capsys, eps):
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "1", "--delta", "1e-5"]) == 0
    capsys.readouterr()
    # every method and mechanism: one line naming the ε and the smallest one supported, nothing spent
    for extra in ([], ["--mechanism", "laplace"], ["--method", "totals"]):
        assert main(["estimate", str(lsat_csv), "--epsilon", eps, "--ledger", str(ledger),
                     "--device", "cpu", *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"privirt: error: --epsilon {float(eps):g} is below") and err.count("\n") == 1
        assert "choose --epsilon >= 1e-06" in err
    assert len(privirt.Ledger(ledger).spends()) == 0


def test_seed_with_ledger_is_refused_in_one_line_and_nothing_is_written(lsat_csv, tmp_path, capsys):
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-5"]) == 0
    before = ledger.read_bytes()
    capsys.readouterr()
    out = tmp_path / "est.csv"
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--seed", "3", "--ledger", str(ledger),
                 "--out", str(out), "--device", "cpu"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("privirt: error:") and captured.err.count("\n") == 1
    assert "--seed" in captured.err and "--ledger" in captured.err
    assert "beta" not in captured.out and not out.exists() and ledger.read_bytes() == before


def test_seeded_run_never_prints_a_guarantee_without_saying_it_does_not_apply(lsat_csv, capsys):
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--seed", "3", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "NOT PRIVATE" in out
    for line in out.splitlines():
        if "differential privacy" in line or "-DP" in line:
            assert "does NOT apply" in line, line


def test_seeded_json_output_never_states_a_guarantee_without_saying_it_does_not_apply(lsat_csv, tmp_path, capsys):
    # (its "guarantee" field said "(1, 1e-05)-DP" alone, for a reader who takes that field only)
    out = tmp_path / "est.json"
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--seed", "3", "--device", "cpu",
                 "--out", str(out)]) == 0
    privacy = json.loads(out.read_text())["privacy"]
    assert privacy["private"] is False and "-DP" in privacy["guarantee"]
    assert privacy["guarantee"].endswith("does NOT apply to this result (seeded noise)")
    capsys.readouterr()


def test_regularization_option_and_one_person_warning(tmp_path, capsys):
    from privirt.cli import main

    path = tmp_path / "one.csv"
    path.write_text("a,b,c\n1,0,1\n")
    assert main(["estimate", str(path), "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "privirt: warning:" in err and "regularization" in err
    assert main(["estimate", str(path), "--device", "cpu", "--regularization", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--regularization 1" in err
    with pytest.raises(SystemExit):  # argparse: usage error, status 2
        main(["estimate", str(path), "--regularization", "-1"])
    assert ">= 0" in capsys.readouterr().err
    assert main(["estimate", str(path), "--method", "cmle", "--regularization", "1"]) == 2
    assert "spectral only" in capsys.readouterr().err


def test_private_spectral_run_of_one_person_warns_in_one_line(tmp_path, capsys):
    """One person: the spectral intervals are unbounded and the run says why, in one line (they
    were finite, excluded the estimate, and nothing was said)."""
    path = tmp_path / "one.csv"
    path.write_text("person,q1,q2\np1,1,0\n")
    assert main(["estimate", str(path), "--epsilon", "100", "--seed", "83000603", "--method", "spectral",
                 "--n-boot", "20", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if "one person" in line]
    assert len(lines) == 1 and lines[0].startswith("privirt: warning:") and "unbounded" in lines[0]
    assert "Traceback" not in err and " inf" in out


def test_bundled_pattern_table_with_weights_col(capsys):
    from privirt.cli import main
    from privirt.data.datasets import dataset_path

    path = str(dataset_path("lsat6"))
    assert main(["estimate", path, "--device", "cpu"]) == 2
    assert "--weights-col frequency" in capsys.readouterr().err
    assert main(["estimate", path, "--weights-col", "frequency", "--method", "cmle"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cmle estimate: 1000 persons × 5 items")


def test_private_method_default_is_chosen_from_public_quantities_only():
    from privirt.private.choose import default_private_method

    assert default_private_method(200, 10, 0.3, 1e-4) == "spectral"   # m <= 10 and n < 500
    assert default_private_method(800, 10, 0.3, 1e-4) == "totals"   # issue 26: n·ε < 250 no longer decides
    assert default_private_method(1000, 10, 0.3, 1e-4) == "totals"
    assert default_private_method(200, 50, 1.0, 1e-4) == "totals"
    # declared-MCAR data: the same
    assert default_private_method(500, 10, 0.3, 1e-4, missing="mcar") == "totals"
    assert default_private_method(500, 10, 1.0, 1e-4, missing="mcar") == "totals"
    assert default_private_method(500, 10, 1.0, 1e-4) == "totals"
    assert default_private_method(1000, 10, 0.3, 1e-4, missing="mcar") == "totals"
    assert default_private_method(200, 20, 0.3, 1e-4, missing="mcar") == "totals"
    with pytest.raises(ValueError, match="missing must be"):
        default_private_method(1000, 10, 0.3, 1e-4, missing="MNAR")


def test_estimate_method_totals_prints_intervals_and_its_statement(capsys):
    from privirt.data.datasets import dataset_path

    path = str(dataset_path("lsat6"))
    args = ["estimate", path, "--weights-col", "frequency", "--epsilon", "2", "--seed", "3"]
    assert main(args) == 0  # n = 1000 > 500: totals by default
    out = capsys.readouterr().out
    assert out.startswith("totals estimate (seeded noise: NOT private): 1000 persons × 5 items")
    header = out.splitlines()[1].split()
    assert header == ["beta", "se", "lo", "hi"]
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("item")]
    assert len(rows) == 5 and all(float(r[3]) <= float(r[1]) <= float(r[4]) for r in rows)
    assert "item totals + score histogram" in out and "NOT PRIVATE" in out
    assert main([*args, "--method", "spectral"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("spectral estimate (seeded noise: NOT private)")
    assert out.splitlines()[1].split() == ["beta", "se", "lo", "hi"]  # Algorithm 2's intervals
    assert main([*args, "--method", "totals", "--shuffle"]) == 2
    assert "--shuffle applies to --method spectral" in capsys.readouterr().err
    assert main(["estimate", path, "--weights-col", "frequency", "--method", "totals"]) == 2
    assert "give --epsilon" in capsys.readouterr().err
    assert main([*args, "--method", "cmle"]) == 2
    assert "no private version" in capsys.readouterr().err


def test_estimate_estimator_option_reaches_algorithm_2(capsys):
    from privirt.data.datasets import dataset_path

    path = str(dataset_path("lsat6"))
    base = ["estimate", path, "--weights-col", "frequency", "--epsilon", "2", "--seed", "3"]
    tables = {}
    for est in ("spectral", "noise_aware"):
        assert main([*base, "--estimator", est]) == 0  # asks for Algorithm 2
        out = capsys.readouterr().out
        assert out.startswith("spectral estimate (seeded noise: NOT private)")
        tables[est] = [ln.split()[1] for ln in out.splitlines() if ln.startswith("item")]
    assert len(tables["spectral"]) == 5 and tables["spectral"] != tables["noise_aware"]
    assert main([*base, "--estimator", "noise_aware", "--method", "totals"]) == 2
    assert "--estimator applies to --method spectral" in capsys.readouterr().err
    assert main(["estimate", path, "--weights-col", "frequency", "--estimator", "spectral"]) == 2
    assert "--estimator needs --epsilon" in capsys.readouterr().err


def test_estimate_missing_declares_the_domain(tmp_path, capsys):
    from privirt.private.choose import default_private_method

    X, _, _ = privirt.simulate_rasch(1200, 6, seed=2)
    X = X.astype(float)
    X[np.random.default_rng(0).random(X.shape) < 0.15] = np.nan
    path = tmp_path / "holes.csv"
    pd.DataFrame(X, columns=[f"q{j}" for j in range(6)]).to_csv(path, index=False)
    base = ["estimate", str(path), "--epsilon", "2", "--seed", "1"]
    assert main([*base, "--method", "totals"]) == 2  # declared complete, data are not
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--missing mcar" in err and "--method spectral" in err
    assert main([*base, "--method", "totals", "--missing", "mcar"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("totals estimate (seeded noise: NOT private): 1200 persons × 6 items")
    assert out.splitlines()[1].split() == ["beta", "se", "lo", "hi"]
    assert "answered counts" in out and "missing completely at random" in out and "NOT PRIVATE" in out
    # the default method for declared-MCAR data follows the public rule
    assert main([*base, "--missing", "mcar"]) == 0
    want = default_private_method(1200, 6, 2.0, 1e-4, missing="mcar")
    assert capsys.readouterr().out.startswith(f"{want} estimate (seeded noise: NOT private)")
    assert main(["estimate", str(path), "--missing", "mcar"]) == 2  # a private-only option
    assert "--missing needs --epsilon" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse: usage error, status 2
        main([*base, "--missing", "maybe"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_small_short_test_gets_the_totals_estimator_when_its_domain_is_declared(tmp_path, capsys):
    # issue 26, third round: at m <= 10 and n < 500 the default is Algorithm 2 only for a call that
    # does not declare its input domain (its missing cells, if any, are then taken as they are); a
    # declared domain is public and gets the totals estimator — whether cells are missing is not
    from privirt.private.choose import default_private_method

    X, _, _ = privirt.simulate_rasch(300, 8, seed=5)
    path = tmp_path / "small.csv"
    pd.DataFrame(X, columns=[f"q{j}" for j in range(8)]).to_csv(path, index=False)
    base = ["estimate", str(path), "--epsilon", "1", "--seed", "1", "--n-boot", "20"]
    for extra, want in (([], "spectral"), (["--missing", "none"], "totals"), (["--missing", "mcar"], "totals")):
        assert main([*base, *extra]) == 0
        assert capsys.readouterr().out.startswith(f"{want} estimate (seeded noise: NOT private)"), extra
        declared = extra[1] if extra else None
        assert default_private_method(300, 8, 1.0, 1e-4, missing=declared) == want
    holes = tmp_path / "holes.csv"
    Xh = X.astype(float)
    Xh[0, 0] = np.nan
    pd.DataFrame(Xh, columns=[f"q{j}" for j in range(8)]).to_csv(holes, index=False)
    assert main(["estimate", str(holes), *base[2:]]) == 0  # undeclared: Algorithm 2 takes the hole
    assert capsys.readouterr().out.startswith("spectral estimate")
    assert main(["estimate", str(holes), *base[2:], "--missing", "none"]) == 2  # declared complete: refused
    assert "declare --missing mcar" in capsys.readouterr().err


@pytest.mark.parametrize("steer", [["--mechanism", "laplace"], ["--p0", "0.5"], ["--estimator", "spectral"]])
def test_missing_none_is_not_dropped_when_another_option_asks_for_algorithm_2(steer, tmp_path, capsys):
    # an option only Algorithm 2 takes chose it, and --missing none was then dropped unsaid: the
    # run took the data's missing cell as it was and exited 0 (with --method spectral: refused)
    X, _, _ = privirt.simulate_rasch(300, 4, seed=6)
    Xh = X.astype(float)
    Xh[0, 0] = np.nan
    path = tmp_path / "onena.csv"
    pd.DataFrame(Xh, columns=[f"q{j}" for j in range(4)]).to_csv(path, index=False)
    ledger = tmp_path / "l.db"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-3"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(path), "--epsilon", "1", "--missing", "none", *steer,
                 "--ledger", str(ledger), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "--missing applies to --method totals" in captured.err and "nothing was spent" in captured.err
    assert len(privirt.Ledger(ledger).spends()) == 0


def test_missing_option_is_refused_where_it_has_no_effect(tmp_path, capsys):
    X, _, _ = privirt.simulate_rasch(600, 6, seed=4)
    path = tmp_path / "w.csv"
    pd.DataFrame(X, columns=[f"q{j}" for j in range(6)]).to_csv(path, index=False)
    base = ["estimate", str(path), "--epsilon", "1", "--seed", "2"]
    assert main([*base, "--method", "spectral", "--missing", "mcar"]) == 2
    # (every owner named: --missing is the 2PL model's too, not the totals method's alone)
    assert "--missing applies to --method totals or --model 2pl;" in capsys.readouterr().err
    # more public persons than rows: the absent ones are missing rows, refused for complete data
    assert main([*base, "--method", "totals", "--n-persons", "700"]) == 2
    err = capsys.readouterr().err
    assert "declare --missing mcar" in err and "600" not in err and err.count("\n") == 1
    assert main([*base, "--method", "totals", "--n-persons", "700", "--missing", "mcar"]) == 0
    capsys.readouterr()


def test_private_totals_notes_intervals_that_rest_on_the_prior_for_the_spread(tmp_path, capsys):
    # session 13: where the release says little about the ability spread (φ < ½, docs/totals.md
    # §5.4) the run says that its intervals are calibrated over the prior on the spread
    def run(n, m, eps):
        X, _, _ = privirt.simulate_rasch(n, m, seed=1)
        path = tmp_path / f"r{n}.csv"
        pd.DataFrame(X).to_csv(path, index=False)
        assert main(["estimate", str(path), "--epsilon", str(eps), "--method", "totals", "--seed", "0",
                     "--n-boot", "20", "--no-progress"]) == 0
        api = privirt.private_totals_estimate(X, epsilon=eps, seed=0, n_boot=20)
        return capsys.readouterr().err, api.info["histogram_share"]

    err, share = run(200, 10, 0.3)
    assert share < 0.5
    assert f"histogram share {share:.2f} < 0.5" in err and "under-cover" in err
    err, share = run(2000, 20, 1.0)
    assert share > 0.5 and "histogram share" not in err


def test_json_out_writes_unbounded_endpoints_as_the_services_strings(tmp_path, capsys):
    """JSON has no Infinity: an unbounded interval (one person here) is "-inf"/"inf", as the
    service sends it (it was null, which a missing value is too, and the docstring said the
    service did the same); the client's reader gives the floats back."""
    path = tmp_path / "one.csv"
    pd.DataFrame([[1, 0, 1]], columns=["a", "b", "c"]).to_csv(path, index=False)
    out = tmp_path / "r.json"
    assert main(["estimate", str(path), "--epsilon", "1", "--seed", "1", "--method", "totals", "--n-boot", "20",
                 "--out", str(out)]) == 0
    text = out.read_text()
    assert "Infinity" not in text and "NaN" not in text
    rows = json.loads(text)["items"]
    assert rows[0]["lo"] == "-inf" and rows[0]["hi"] == "inf" and isinstance(rows[0]["beta"], float)
    from privirt.client import _f

    np.testing.assert_array_equal(_f([r["hi"] for r in rows]), np.full(len(rows), np.inf))
    from privirt.cli._table import write_table
    from privirt.serve.service import _series

    column = [1.5, np.nan, -np.inf, np.inf]
    write_table(pd.DataFrame({"se": column}, index=pd.Index(list("abcd"), name="item")), out)
    assert [r["se"] for r in json.loads(out.read_text())["items"]] == _series(column) == [1.5, "nan", "-inf", "inf"]


def test_out_that_exists_and_is_not_writable_is_refused_before_spending(lsat_csv, tmp_path, capsys):
    import os

    out = tmp_path / "ro.csv"
    out.write_text("x\n")
    out.chmod(0o444)
    if os.access(out, os.W_OK):
        pytest.skip("running as a user who can write any file (root): the check cannot be seen")
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-4"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(lsat_csv), "--epsilon", "1", "--ledger", str(ledger), "--out", str(out)]) == 2
    assert "is not writable" in capsys.readouterr().err
    assert main(["budget", "show", str(ledger)]) == 0
    assert "(0 spend(s)" in capsys.readouterr().out


def test_out_check_asks_whether_an_existing_file_is_writable(tmp_path, monkeypatch):
    """The rule itself, where the test runs as root (who may write any file): an existing --out
    the user cannot write is refused, a new one in a writable folder is not."""
    import os

    from privirt.cli import _paths

    out = tmp_path / "ro.csv"
    out.write_text("x\n")
    real = os.access
    monkeypatch.setattr(_paths.os, "access", lambda p, mode: False if Path(p) == out else real(p, mode))
    with pytest.raises(ValueError, match="exists and is not writable"):
        _paths.check_output_file(out, "--out", (".csv",))
    assert _paths.check_output_file(tmp_path / "new.csv", "--out", (".csv",)) == tmp_path / "new.csv"


def test_bad_pattern_weight_is_printed_as_a_plain_number(tmp_path, capsys):
    """The weight error showed numpy's repr: ``weight np.float64(-2.0) of row 0 ...``."""
    path = tmp_path / "wneg.csv"
    path.write_text("person,a,b,w\n1,0,1,-2\n2,1,0,3\n3,1,1,1.5\n")
    assert main(["estimate", str(path), "--weights-col", "w"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("privirt: error: weight -2.0 of row 0 is not a non-negative whole number")
    assert err.count("\n") == 1 and "np." not in err
    frame = pd.DataFrame({"a": [0, 1], "b": [1, 0]})
    for weights, shown in ((np.array([3.0, 1.5]), "weight 1.5 of row 1"),
                           (pd.Series([np.float32(2), np.nan]), "weight nan of row 1")):
        with pytest.raises(ValueError, match=f"^{shown} is not") as info:
            privirt.as_responses(frame, weights=weights)
        assert "np." not in str(info.value)


def test_items_leaving_out_many_data_items_says_how_many(tmp_path, capsys):
    """--items leaving out 6 data items listed the first five as if they were all of them."""
    path = tmp_path / "wide.csv"
    X, *_ = privirt.simulate_rasch(50, 8, seed=1)
    pd.DataFrame(X, columns=[f"i{j}" for j in range(8)]).to_csv(path, index=False)
    assert main(["estimate", str(path), "--epsilon", "1", "--items", "i0,i1", "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "the data have 6 items (the first 5: ['i2', 'i3', 'i4', 'i5', 'i6']) that are not in the " \
           "public item set --items" in err
    frame = pd.DataFrame(X[:, :3], columns=["a", "b", "c"])  # five or fewer: all of them, as before
    with pytest.raises(ValueError, match=r"the data have item\(s\) \['c'\] that are not"):
        privirt.release_counts(frame, epsilon=1.0, items=["a", "b"], seed=1)



def _readme_read_back() -> dict:
    """The keywords of the ``pd.read_csv(path, ...)`` call README.md gives for an ``--out`` CSV."""
    import re

    calls = re.findall(r"`pd\.read_csv\(path, ([^`]*)\)`", (ROOT / "README.md").read_text())
    assert len(calls) == 1, calls
    return eval(f"dict({calls[0]})", {"dict": dict, "str": str})  # noqa: S307 (the README's own text)


@pytest.mark.parametrize("method, epsilon", [("totals", "1"), ("spectral", "0.01")])  # 0.01: ±inf
def test_out_csv_reads_back_with_the_documented_call(tmp_path, capsys, method, epsilon):
    """Labels were written unquoted: ``pd.read_csv(path, comment="#")`` dropped the ``#lead`` row,
    cut ``q#1`` to ``q`` with NaN values, and read ``NA`` as missing and ``01`` as 1."""
    import csv

    labels = ["q#1", "#lead", "NA", "01", "plain", "null", "inf", 'a,"b"']
    X, _, _ = privirt.simulate_rasch(400, len(labels), seed=39000001)
    path = tmp_path / "in.csv"
    pd.DataFrame(X.astype(int), columns=labels).to_csv(path, index_label="person")
    out = tmp_path / "r.csv"
    assert main(["estimate", str(path), "--epsilon", epsilon, "--method", method, "--seed", "3",
                 "--n-boot", "20", "--out", str(out)]) == 0
    rows = list(csv.reader(ln for ln in out.read_text().splitlines(keepends=True) if not ln.startswith("#")))
    assert rows[0] == ["item", "beta", "se", "lo", "hi"] and [r[0] for r in rows[1:]] == labels
    expected = pd.DataFrame([[float(v) if v else np.nan for v in r[1:]] for r in rows[1:]],
                            columns=rows[0][1:], index=pd.Index(labels, name="item"))
    got = pd.read_csv(out, **_readme_read_back()).set_index("item")
    assert got.index.tolist() == labels
    pd.testing.assert_frame_equal(got, expected, check_index_type=False)
    assert got["beta"].notna().all() and (np.isinf(got["hi"]).any() == (method == "spectral"))


def test_regularization_auto_is_the_stated_default(tmp_path, capsys):
    # the help said "default: auto, λ = 1", but "auto" was refused: "expected a number, got 'auto'"
    X, _, _ = privirt.simulate_rasch(300, 5, seed=7)
    path = tmp_path / "r.csv"
    pd.DataFrame(X, columns=[f"q{j}" for j in range(5)]).to_csv(path, index=False)
    outs = []
    for extra in ([], ["--regularization", "auto"], ["--regularization", "AUTO"], ["--regularization", "1"]):
        assert main(["estimate", str(path), *extra]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] == outs[2] == outs[3]
    assert main(["fit", str(path), "--method", "spectral", "--regularization", "auto"]) == 0


def test_help_states_which_options_select_algorithm_2_and_the_chooser_constants(capsys):
    # --mechanism gaussian, --p0 1 and --estimator auto (their stated defaults) select Algorithm 2,
    # which the help did not say; --missing mcar over MCAR_MAX_ITEMS items gets spectral
    from privirt.private import choose
    from privirt.private.totals.marginal_missing import MCAR_MAX_ITEMS

    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("--mechanism, --p0, --estimator and --shuffle are Algorithm 2's options: giving any of them "
            "(its default values too) selects --method spectral") in text
    assert f"spectral for mcar over {MCAR_MAX_ITEMS} items" in text
    assert f"with at most {choose._SMALL_M} items and fewer than {choose._SMALL_N} persons" in text
    assert "none (complete data; default)" not in text

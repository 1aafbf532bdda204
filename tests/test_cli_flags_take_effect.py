"""Every flag a command accepts either takes effect or is refused in one line before anything is
read or spent (a review found flags accepted and then ignored: --device gpu on CPU-only methods,
--item-col under --engine dask, --estimator with randomized response, --epsilon with demo
--no-private, and mh's stage line under --no-progress)."""

from __future__ import annotations

import pytest

import privirt
from privirt.cli import main


@pytest.fixture
def lsat_csv(tmp_path):
    path = tmp_path / "lsat6.csv"
    privirt.load_dataset("lsat6").to_csv(path)
    return path


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("privirt: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("extra, words", [
    (["--method", "cmle", "--device", "gpu"], "--method cmle runs on the CPU only"),
    (["--epsilon", "1", "--method", "totals", "--device", "gpu"], "--method totals runs on the CPU only"),
    (["--epsilon", "1", "--model", "2pl", "--device", "gpu"], "--model 2pl runs on the CPU only"),
    (["--epsilon", "4", "--method", "spectral", "--mechanism", "randomized_response", "--estimator", "spectral"],
     "randomized response has its own estimator"),
    (["--epsilon", "4", "--method", "spectral", "--mechanism", "randomized_response", "--estimator",
      "noise_aware"], "randomized response has its own estimator"),
])
def test_flags_that_would_be_ignored_are_refused_and_nothing_is_spent(lsat_csv, tmp_path, capsys, extra, words):
    ledger = tmp_path / "b.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "20", "--delta", "1e-4"]) == 0
    capsys.readouterr()
    ledger_flag = ["--ledger", str(ledger)] if "--epsilon" in extra else []
    assert main(["estimate", str(lsat_csv), *extra, *ledger_flag]) == 2
    assert words in _one_line(capsys)
    assert main(["budget", "show", str(ledger)]) == 0
    assert "(0 spend(s)" in capsys.readouterr().out


def test_randomized_response_estimator_is_refused_by_the_library_too():
    X = privirt.load_dataset("lsat6")
    with pytest.raises(ValueError, match="rr_estimator='debiased'"):
        privirt.private_spectral_estimate(X, epsilon=4, mechanism="randomized_response", estimator="spectral",
                                          seed=1)
    fit = privirt.private_spectral_estimate(X, epsilon=4, mechanism="randomized_response", seed=1)
    assert fit.beta.notna().all()


@pytest.mark.parametrize("extra, words", [
    (["--item-col", "question"], "--item-col names a long table's columns"),
    (["--item-col", "question", "--response-col", "answer"], "--item-col and --response-col name"),
])
def test_dask_engine_refuses_long_table_columns(tmp_path, capsys, extra, words):
    assert main(["estimate", str(tmp_path / "x.parquet"), "--engine", "dask", *extra]) == 2
    assert words in _one_line(capsys)


def test_demo_refuses_epsilon_with_no_private_and_words_its_epsilon_errors(capsys):
    assert main(["demo", "--no-private", "--epsilon", "2"]) == 2
    assert "which --no-private leaves out" in _one_line(capsys)
    assert main(["demo", "--epsilon", "-3"]) == 2
    line = _one_line(capsys)
    assert "--epsilon must be a finite number > 0" in line and "leave out --epsilon" not in line


def test_mh_no_progress_prints_no_stage_line(lsat_csv, capsys):
    assert main(["mh", str(lsat_csv), "--iter", "20", "--warmup", "10", "--seed", "1", "--device", "cpu",
                 "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "privirt mh: Responses" not in err
    assert main(["mh", str(lsat_csv), "--iter", "20", "--warmup", "10", "--seed", "1", "--device", "cpu"]) == 0
    assert "privirt mh: Responses" in capsys.readouterr().err


def test_out_may_not_name_the_ledger_or_the_items_file(tmp_path, capsys):
    # --out ledger.json with --ledger ledger.json: the run spent, then wrote its table over the
    # ledger (the spend and the budget were lost: "not a privirt ledger")
    import pandas as pd

    from privirt.private.ledger import Ledger

    data = tmp_path / "x.csv"
    pd.DataFrame([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]] * 20, columns=list("abc")).to_csv(data, index=False)
    ledger = tmp_path / "ledger.json"
    Ledger(ledger, epsilon=5.0, delta=1e-3)
    assert main(["estimate", str(data), "--epsilon", "1", "--ledger", str(ledger), "--out", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert "is the ledger" in err and err.count("\n") == 1
    assert len(Ledger(ledger).spends()) == 0
    items = tmp_path / "items.csv"
    items.write_text("a\nb\nc\n")
    assert main(["estimate", str(data), "--epsilon", "1", "--items", f"@{items}", "--n-persons", "80",
                 "--out", str(items)]) == 2
    assert "is the --items file" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["fit"], ["estimate", "--method", "cmle"]])
def test_cml_draws_its_bar_on_a_terminal_and_no_progress_silences_it(lsat_csv, monkeypatch, command):
    """CML ran for minutes at 1000 × 2000 without a word on the terminal; `privirt fit` had no
    --no-progress and `privirt estimate --method cmle` ignored it."""
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    monkeypatch.setattr(sys, "stderr", shown)
    assert main([command[0], str(lsat_csv), *command[1:]]) == 0
    assert "\rCML estimate statistics [" in shown.getvalue()
    assert "102/102 steps 100%" in shown.getvalue() and shown.getvalue().count("\n") >= 1
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert main([command[0], str(lsat_csv), *command[1:], "--no-progress"]) == 0
    assert "CML estimate" not in quiet.getvalue()


def test_callers_without_progress_keep_cml_silent_on_a_terminal(monkeypatch):
    """Andersen's test, the sweeps' "cmle" and the demo call cmle_estimate without a progress
    option of their own: its new bar (auto on a terminal) must not appear there, unasked and
    beyond --no-progress."""
    import io
    import sys

    from privirt.sweeps.registry import REGISTRY

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    monkeypatch.setattr(sys, "stderr", shown)
    X, _, _ = privirt.simulate_rasch(400, 6, seed=2_000_021)
    privirt.andersen_test(X)
    REGISTRY["cmle"](X)
    assert main(["demo", "--no-private"]) == 0
    assert "CML estimate" not in shown.getvalue()


@pytest.mark.skipif(privirt.gpu_available(), reason="checks the refusal where no GPU is visible")
@pytest.mark.parametrize("extra", [["--device", "gpu"], ["--chains", "0"]])
def test_mh_refuses_a_device_or_chains_in_one_line_before_its_stage_message(lsat_csv, capsys,
                                                                             extra):
    """A stage message ("privirt mh: Responses(...)") came before the error: two lines."""
    assert main(["mh", str(lsat_csv), "--iter", "20", "--warmup", "10", *extra]) == 2
    _one_line(capsys)

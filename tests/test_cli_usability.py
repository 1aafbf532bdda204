"""Issue 21, items 13-15: the command line as a newcomer meets it.

One-line usage errors with a ``--help`` hint, command-line words instead of Python names,
input files as users have them (``.csv.gz``, ``-`` for stdin, a semicolon CSV, a ragged CSV,
long tables with other column names), and ``privirt gibbs``: ``--weights-col``, the safe
prior on a by default, a convergence warning, items only on the terminal, the worst-mixing items plotted.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("privirt: error: ")
    return err[0]


@pytest.fixture
def wide(tmp_path):
    X, *_ = privirt.simulate_rasch(200, 5, p_observed=0.95, seed=3)
    frame = pd.DataFrame(X, index=pd.Index([f"s{i}" for i in range(200)], name="person"),
                         columns=[f"q{j}" for j in range(5)])
    path = tmp_path / "r.csv"
    frame.to_csv(path)
    return path, frame


# -- argparse errors: one line and a --help hint ------------------------------------------
@pytest.mark.parametrize("argv, command", [
    (["estimate", "FILE", "--bogus"], "privirt estimate"),
    (["estimate", "FILE", "--method", "nope"], "privirt estimate"),
    (["estimate"], "privirt estimate"),
    (["gibbs", "FILE", "--iter", "many"], "privirt gibbs"),
    (["nope"], "privirt"),
])
def test_usage_errors_are_one_line_with_a_help_hint(argv, command, wide, capsys):
    argv = [str(wide[0]) if a == "FILE" else a for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    line = _err_line(capsys)
    assert "usage:" not in line
    assert line.endswith(f"(see `{command} --help`)")


# -- Python names in errors -----------------------------------------------------------------
def test_errors_use_command_line_words_not_python_names(wide, capsys):
    path, _ = wide
    # (the file has missing cells: declared MCAR so that the default method gets to the ε check)
    assert main(["estimate", str(path), "--epsilon", "inf", "--missing", "mcar"]) == 2
    line = _err_line(capsys)
    assert "totals_estimate" not in line and "leave out --epsilon" in line
    assert main(["estimate", str(path), "--epsilon", "inf", "--method", "spectral"]) == 2
    line = _err_line(capsys)
    assert "spectral_estimate" not in line and "leave out --epsilon" in line
    assert main(["estimate", str(path), "--epsilon", "1", "--missing", "mcar",
                 "--items", "q0,q1,q2"]) == 2
    line = _err_line(capsys)
    assert "`items`" not in line and "--items" in line


@pytest.mark.parametrize("extra", [["--method", "totals"], ["--model", "2pl"]])
def test_private_only_estimates_are_not_told_to_leave_out_epsilon(wide, capsys, extra):
    # --method totals and --model 2pl have no non-private path: leaving out --epsilon is refused
    # ("... is a private estimator: give --epsilon"), so a bad ε must not advise it
    path, _ = wide
    assert main(["estimate", str(path), "--epsilon", "0", "--missing", "mcar", *extra]) == 2
    line = _err_line(capsys)
    assert line.startswith("privirt: error: --epsilon must be a finite number > 0")
    assert "leave out --epsilon" not in line and "spectral_estimate" not in line


def test_cli_words_keep_the_flag_and_drop_the_keyword():
    from privirt.cli._words import cli_text

    assert cli_text("pass the public item list as items=[...] (CLI: --items)") == \
        "pass the public item list as --items"
    assert cli_text("pass weights='frequency' (CLI: --weights-col frequency)") == \
        "pass --weights-col frequency"
    assert cli_text("the public n_persons=20; pass it (CLI: --n-persons)") == \
        "the public --n-persons 20; pass it (--n-persons)"
    # the samplers' advice on priors (privirt gibbs / mh)
    assert cli_text('drop them or pass priors={"b": (0.0, 4.0)}') == "drop them or pass --prior-b 0.0 4.0"
    assert cli_text('the GPU path needs cupy: ..., or pass device="cpu"') == "the GPU path needs cupy: ..., or pass --device cpu"
    assert cli_text("infinite; use spectral_estimate (regularised)") == "infinite; use --method spectral (regularised)"


def test_the_library_refusals_the_dask_path_passes_on_are_in_command_line_words():
    # the Dask path prints the library's own refusals (the local path words its own)
    from privirt.cli._words import cli_text
    from privirt.private.totals.api import _COMPLETE_ONLY

    assert cli_text(_COMPLETE_ONLY) == (
        "the totals method was run with --missing none (complete data) but the data have missing cells; "
        "declare --missing mcar (missing completely at random) or use --method spectral (nothing was spent)")
    assert cli_text("randomized response needs every response in memory; use engine='local' or "
                    "mechanism='gaussian' or 'laplace'") == (
        "randomized response needs every response in memory; use --engine local or --mechanism gaussian "
        "or laplace")


def test_the_randomized_response_and_long_column_refusals_use_command_line_words(tmp_path, capsys):
    # they said "pass n_boot=0 or use mechanism='gaussian'" and "name yours with --person-col ,
    # --item-col , --person-col, --item-col, --response-col"
    import numpy as np
    import pandas as pd

    path = tmp_path / "x.csv"
    pd.DataFrame((np.random.default_rng(310_060).random((60, 4)) < 0.5).astype(int),
                 columns=list("abcd")).to_csv(path, index=False)
    assert main(["estimate", str(path), "--epsilon", "1", "--method", "spectral",
                 "--mechanism", "randomized_response", "--n-boot", "50"]) == 2
    line = _err_line(capsys)
    assert line.endswith("pass --n-boot 0 or use --mechanism gaussian")
    long = tmp_path / "long.csv"
    long.write_text("id,q,a\np1,i1,1\np1,i2,0\n")
    assert main(["estimate", str(long), "--format", "long"]) == 2
    line = _err_line(capsys)
    assert line.endswith("name yours with --person-col, --item-col, --response-col") and "_col=" not in line


def test_demo_help_shows_a_plain_percent_sign(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    assert "95 %" in " ".join(out.split()) and "%%" not in out


def test_estimate_help_states_one_default_method(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    # the privacy group once said "With --epsilon the spectral estimate is computed privately"
    assert "With --epsilon the spectral estimate is computed privately" not in out
    assert "default: spectral; with --epsilon" in out


# -- input files ----------------------------------------------------------------------------
def test_semicolon_csv_gets_wrong_delimiter(wide, tmp_path, capsys):
    _, frame = wide
    path = tmp_path / "semi.csv"
    frame.to_csv(path, sep=";")
    assert main(["estimate", str(path)]) == 2
    line = _err_line(capsys)
    assert "wrong delimiter?" in line and "semi.csv" in line and "';'" in line


@pytest.mark.parametrize("sep", [",", ";"])
def test_a_spreadsheets_separator_line_is_named(wide, tmp_path, capsys, sep):
    # Excel's "sep=," first line was taken for a header of two columns ("line 2 has 4 fields where
    # the header has 2"), and "sep=;" for a semicolon file's single column
    _, frame = wide
    path = tmp_path / "excel.csv"
    path.write_text(f"sep={sep}\n" + frame.to_csv(sep=sep), encoding="utf-8")
    ledger = tmp_path / "L.db"
    assert main(["budget", "init", str(ledger), "--epsilon", "1", "--delta", "1e-6"]) == 0
    capsys.readouterr()
    assert main(["estimate", str(path), "--epsilon", "0.5", "--ledger", str(ledger)]) == 2
    line = _err_line(capsys)
    assert "excel.csv" in line and f"'sep={sep}'" in line and "delete that line" in line
    assert main(["budget", "show", str(ledger)]) == 0
    assert "(0 spend(s)" in capsys.readouterr().out


def test_gzipped_csv_and_stdin_read_as_the_plain_file(wide, tmp_path, capsys):
    path, frame = wide
    gz = tmp_path / "r.csv.gz"
    frame.to_csv(gz)
    assert main(["estimate", str(path)]) == 0
    plain = capsys.readouterr().out
    assert main(["estimate", str(gz)]) == 0
    assert capsys.readouterr().out == plain
    proc = subprocess.run([sys.executable, "-m", "privirt", "estimate", "-"],
                          input=path.read_bytes(), capture_output=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == plain


def test_stdin_in_process(wide, monkeypatch, capsys):
    path, _ = wide
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    assert main(["fit", "-"]) == 0
    assert "200 persons × 5 items" in capsys.readouterr().out


def test_ragged_csv_names_the_file_and_the_line(tmp_path, capsys):
    path = tmp_path / "ragged.csv"
    path.write_text("person,q1,q2\na,1,0\nb,1,1\nc,1,0,1\n")
    assert main(["estimate", str(path)]) == 2
    line = _err_line(capsys)
    assert "ragged.csv" in line and "line 4" in line and "Error tokenizing" not in line


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_short_csv_row_is_refused_not_read_as_missing(tmp_path, capsys, suffix):
    import gzip

    text = "person,q1,q2,q3\na,1,0,1\nb,1,1,\nc,1,0\n"
    path = tmp_path / f"short{suffix}"
    if suffix.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    assert main(["fit", str(path)]) == 2
    line = _err_line(capsys)
    assert path.name in line and "line 4" in line and "3 fields" in line


def test_empty_trailing_field_is_a_missing_cell_not_a_short_row(tmp_path, capsys):
    path = tmp_path / "ok.csv"
    path.write_text("person,q1,q2\na,1,0\nb,1,\nc,0,1\n")
    resp = privirt.as_responses(path)
    assert resp.shape == (3, 2) and resp.has_missing


def test_missing_sweep_config_names_the_file(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "o")]) == 2
    line = _err_line(capsys)
    assert "nope.toml" in line and "Errno" not in line
    assert not (tmp_path / "o").exists()


def test_dask_engine_on_a_csv_names_the_file(wide, capsys):
    path, _ = wide
    assert main(["estimate", str(path), "--engine", "dask"]) == 2
    line = _err_line(capsys)
    assert "r.csv" in line and "Parquet" in line and "magic bytes" not in line


def test_long_table_with_other_column_names(wide, tmp_path, capsys):
    path, frame = wide
    long = frame.stack().reset_index()
    long.columns = ["who", "what", "ans"]
    lpath = tmp_path / "long.csv"
    long.to_csv(lpath, index=False)
    assert main(["estimate", str(path)]) == 0
    wide_out = capsys.readouterr().out
    assert main(["estimate", str(lpath), "--person-col", "who", "--item-col", "what",
                 "--response-col", "ans"]) == 0
    assert capsys.readouterr().out == wide_out
    assert main(["fit", str(lpath), "--person-col", "who", "--item-col", "what",
                 "--response-col", "ans"]) == 0
    assert "200 persons × 5 items" in capsys.readouterr().out


# -- privirt fit --andersen -----------------------------------------------------------------
def test_fit_andersen_before_the_file_is_not_read_as_the_split(wide, capsys):
    path, _ = wide
    assert main(["fit", "--andersen", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Andersen LR test (raw score > median" in out
    assert main(["fit", "--andersen", "mean", str(path)]) == 0
    assert "Andersen LR test (raw score > mean" in capsys.readouterr().out
    assert main(["fit", str(path), "--andersen", "mean"]) == 0
    assert "raw score > mean" in capsys.readouterr().out


def test_fit_andersen_bad_split_is_one_line(wide, capsys):
    path, _ = wide
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(path), "--andersen", "mode"])
    assert exc.value.code == 2
    line = _err_line(capsys)
    assert "median or mean" in line and "mode" in line


# -- seeded header --------------------------------------------------------------------------
def test_seeded_run_header_says_not_private(tmp_path, capsys):
    X, *_ = privirt.simulate_rasch(300, 5, seed=2)
    path = tmp_path / "c.csv"
    pd.DataFrame(X, columns=[f"q{j}" for j in range(5)]).to_csv(path, index=False)
    assert main(["estimate", str(path), "--epsilon", "1", "--seed", "1"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "NOT private" in header and not header.startswith("private")
    assert main(["estimate", str(path), "--epsilon", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("private ")


# -- report --metric ------------------------------------------------------------------------
def test_report_metric_changes_the_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from privirt.sweeps import report

    drawn = []
    real = report.plot_dataset

    def spy(results, dataset, **kw):
        drawn.append(tuple(kw.get("metrics", ())))
        return real(results, dataset, **kw)

    cfg = tmp_path / "t.toml"
    cfg.write_text('seed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                   '[[datasets]]\nsource = "synthetic"\nn = 200\nm = 5\n')
    out = tmp_path / "o"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 0
    import unittest.mock as mock

    with mock.patch.object(report, "plot_dataset", spy):
        assert main(["report", str(out), "--metric", "kendall_tau"]) == 0
        assert main(["report", str(out), "--metric", "linf_error"]) == 0
    assert drawn[0][0] == "kendall_tau" and drawn[1][0] == "linf_error"


# -- gibbs / mh -----------------------------------------------------------------------------
@pytest.fixture
def lsat_patterns():
    return ROOT / "datasets" / "lsat6.csv"


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_samplers_accept_weights_col(command, lsat_patterns, tmp_path, capsys):
    out = tmp_path / "s.csv"
    extra = ["--engine", "numpy"] if command == "gibbs" else []
    assert main([command, str(lsat_patterns), "--weights-col", "frequency", "--iter", "30",
                 "--warmup", "10", "--seed", "1", "--device", "cpu", "--no-progress",
                 "--out", str(out), *extra]) == 0
    table = pd.read_csv(out, index_col=[0, 1])
    assert len(table.loc["theta"]) == 1000 and list(table.loc["a"].index)[0] == "item1"


@pytest.fixture
def ten_items(tmp_path):
    X, *_ = privirt.simulate_2pno(80, 10, seed=1)
    path = tmp_path / "g.csv"
    pd.DataFrame(X, index=[f"p{i}" for i in range(80)],
                 columns=[f"i{j}" for j in range(10)]).to_csv(path)
    return path


def _gibbs(path, *extra):
    return main(["gibbs", str(path), "--iter", "40", "--warmup", "20", "--seed", "1",
                 "--device", "cpu", "--engine", "numpy", "--no-progress", *extra])


def test_gibbs_warns_about_convergence_in_one_line(ten_items, capsys):
    assert _gibbs(ten_items) == 0
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if line.startswith("privirt: warning:")]
    assert len(warning) == 1, err
    assert "not converged" in warning[0] and "of 100 parameters" in warning[0]
    assert "--iter" in warning[0] and "--chains" in warning[0]


def test_convergence_warning_thresholds():
    import warnings

    from privirt.cli._sampler_args import ConvergenceWarning, warn_convergence

    good = pd.DataFrame({"rhat": [1.0, 1.009], "ess": [400.0, 5000.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_convergence(good)
    for rhat, ess in ((1.011, 1000.0), (1.0, 399.0), (np.nan, 1000.0)):
        with pytest.warns(ConvergenceWarning, match="1 of 2 parameters"):
            warn_convergence(pd.DataFrame({"rhat": [1.0, rhat], "ess": [1000.0, ess]}))
    # a θ fixed by an anchor (R-hat NaN: constant by construction) is left out, and only it
    table = pd.DataFrame({"rhat": [1.0, np.nan, np.nan], "ess": [1000.0, 2000.0, 2000.0]},
                         index=pd.MultiIndex.from_tuples([("a", "i1"), ("theta", "p1"),
                                                          ("theta", "p2")]))
    with pytest.warns(ConvergenceWarning, match="1 of 2 parameters .* 1 without an R-hat"):
        warn_convergence(table, fixed=[("theta", "p1")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_convergence(table, fixed=[("theta", "p1"), ("theta", "p2")])


def test_convergence_warning_prints_the_max_r_hat_above_the_threshold():
    # a max R-hat that rounds to the threshold at 3 significant digits printed "(max 1.01)"
    from privirt.cli._sampler_args import RHAT_MAX, ConvergenceWarning, warn_convergence

    for rhat, shown in ((1.0132, "1.013"), (1.0104, "1.0104"), (1.0100004, "1.0100004")):
        assert rhat > RHAT_MAX
        with pytest.warns(ConvergenceWarning) as caught:
            warn_convergence(pd.DataFrame({"rhat": [1.0, rhat], "ess": [1000.0, 1000.0]}))
        assert f"1 with R-hat > {RHAT_MAX} (max {shown})" in str(caught[0].message)


def test_gibbs_default_prior_on_a_is_the_safe_one(ten_items, monkeypatch):
    import privirt.bayes as bayes

    seen = []
    real = bayes.gibbs_2pno

    def spy(*args, **kwargs):
        seen.append(kwargs.get("priors"))
        return real(*args, **kwargs)

    monkeypatch.setattr(bayes, "gibbs_2pno", spy)
    assert _gibbs(ten_items) == 0
    assert seen[-1]["a"] == (1.0, 1.0)
    assert _gibbs(ten_items, "--prior-a-flat") == 0
    assert "a" not in (seen[-1] or {})
    assert _gibbs(ten_items, "--prior-a", "0.5", "2") == 0
    assert seen[-1]["a"] == (0.5, 2.0)
    # the Python API keeps the paper's flat prior (docs/gibbs.md: kept for reproduction)
    import inspect

    assert inspect.signature(real).parameters["priors"].default is None


def test_gibbs_prints_items_only_unless_persons(ten_items, capsys):
    assert _gibbs(ten_items) == 0
    out = capsys.readouterr().out
    assert "theta" not in out and len(out.strip().splitlines()) == 2 + 20
    assert _gibbs(ten_items, "--persons") == 0
    out = capsys.readouterr().out
    assert "theta" in out and len(out.strip().splitlines()) == 2 + 20 + 80


def test_gibbs_plots_the_worst_mixing_items_as_mh_does(ten_items, tmp_path, capsys, monkeypatch):
    """gibbs --plots drew every item (6 a page, 20 curves a page): on a 672-vote roll call 258
    PNGs and nine minutes.  Now the traces of the 6 items whose a (and whose b) has the largest
    R-hat, as privirt mh, and those items' curves: one page each, whatever the item count."""
    pytest.importorskip("matplotlib")
    from privirt import plots

    traced: dict[str, list] = {}
    curves: list = []

    def drawn(path):  # a figure's file without drawing it (matplotlib takes seconds a page)
        Path(path).write_bytes(b"png")

    def trace_spy(post, param, labels=None, path=None, **kw):
        traced.setdefault(param, []).extend(labels)
        drawn(path)

    def curves_spy(post, items=None, path=None, **kw):
        curves.extend(items)
        drawn(path)

    monkeypatch.setattr(plots, "trace_plot", trace_spy)
    monkeypatch.setattr(plots, "item_response_curves", curves_spy)
    monkeypatch.setattr(plots, "theta_density", lambda post, path=None, **kw: drawn(path))
    figs, out = tmp_path / "figs", tmp_path / "s.csv"
    assert _gibbs(ten_items, "--chains", "2", "--out", str(out), "--plots", str(figs)) == 0
    assert sorted(p.name for p in figs.iterdir()) == sorted(
        ["trace_a.png", "trace_b.png", "item_response_curves.png", "theta_density.png"])
    rhat = pd.read_csv(out, index_col=[0, 1])["rhat"]
    for block in ("a", "b"):
        r = rhat.loc[block]
        assert len(traced[block]) == 6 and len(r) == 10
        # the 6 largest R-hats (ties at the cut aside): none left out is above one plotted
        assert min(r[traced[block]]) >= max(r.drop(traced[block]))
    assert set(curves) == set(traced["a"]) | set(traced["b"])
    assert "a and b: the 6 items with the largest R-hat" in capsys.readouterr().err


# -- item 12: the refusal offers the exact command ------------------------------------------
def test_totals_on_missing_cells_offers_the_command_to_run(wide, capsys, monkeypatch):
    path, _ = wide
    monkeypatch.chdir(path.parent)
    argv = ["estimate", "r.csv", "--epsilon", "1", "--method", "totals", "--missing", "none"]
    assert main(argv) == 2
    line = _err_line(capsys)
    want = "privirt estimate r.csv --epsilon 1 --method totals --missing mcar"
    assert f"`{want}`" in line and "nothing was spent" in line
    assert main(want.split()[1:] + ["--seed", "1"]) == 0  # the offered command runs


def test_readme_skips_a_block_only_for_a_missing_extra(monkeypatch):
    import importlib.util

    from tests import test_readme

    plot_block = {"code": "privirt fit r.csv --plots figs/\n", "expected": None}
    plain = {"code": "privirt estimate r.csv\n", "expected": None}
    assert test_readme._missing_extra(plot_block) is None  # matplotlib is installed here
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert "plots extra" in test_readme._missing_extra(plot_block)
    assert test_readme._missing_extra(plain) is None


def test_demo_and_p0_errors_in_command_line_words(capsys, tmp_path):
    assert main(["demo", "--epsilon", "inf"]) == 2
    line = _err_line(capsys)
    assert "--no-private" in line and "spectral_estimate" not in line
    X, *_ = privirt.simulate_rasch(100, 4, seed=1)
    path = tmp_path / "c.csv"
    pd.DataFrame(X, columns=list("abcd")).to_csv(path, index=False)
    assert main(["estimate", str(path), "--epsilon", "1", "--p0", "5"]) == 2
    assert _err_line(capsys).startswith("privirt: error: --p0 must")


def test_top_k_help_says_what_it_lists_for_the_2pl(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the K hardest items (with --model 2pl: the K most discriminating)" in text


@pytest.mark.parametrize("command, extra", [("gibbs", ["--iter", "1000000000000"]),
                                            ("gibbs", ["--iter", "100000000000000000000"]),
                                            ("mh", ["--iter", "1000000000000"]),
                                            ("mh", ["--iter", "40", "--chains", "100000000000"]),
                                            # built 10²³ starting points for minutes, then failed
                                            ("gibbs", ["--iter", "40", "--chains", "99999999999999999999999"]),
                                            ("mh", ["--iter", "40", "--chains", "99999999999999999999999"])])
def test_a_sampler_run_too_large_for_memory_is_one_line(tmp_path, capsys, command, extra):
    # a 28-line traceback (numpy's _ArrayMemoryError) or "Maximum allowed dimension exceeded"
    import numpy as np
    import pandas as pd

    import privirt

    path = tmp_path / "x.csv"
    X = privirt.simulate_2pno(200, 6, seed=310_070)[0]
    pd.DataFrame(np.asarray(X), columns=list("abcdef")).to_csv(path, index=False)
    out = tmp_path / "o.csv"
    assert main([command, str(path), "--warmup", "20", "--no-progress", "--seed", "1", *extra,
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privirt: error: ")
    assert ("do not fit in memory; keep fewer draws" in err[0]) or ("not enough memory" in err[0])
    assert not out.exists()


def test_the_samplers_refuse_a_bool_where_a_number_is_asked():
    # True was taken for 1.0: b ~ N(1, 1), and proposal SDs of 1
    import privirt

    X = privirt.simulate_2pno(100, 4, seed=310_071)[0]
    with pytest.raises(ValueError, match=r"priors\['b'\] must be a \(mean, variance\) pair of numbers"):
        privirt.gibbs_2pno(X, priors={"b": (True, 1)}, n_iter=30, warmup=10)
    with pytest.raises(ValueError, match=r"priors\['b'\] must be a \(mean, variance\) pair of numbers"):
        privirt.mh_2pl(X, priors={"b": (True, 1)}, n_iter=30, warmup=10)
    with pytest.raises(ValueError, match="proposal_sd for theta must be a number"):
        privirt.mh_2pl(X, proposal_sd=True, n_iter=30, warmup=10)


def test_the_memory_check_counts_a_streamed_runs_summaries():
    # keep_draws=False was counted as 4 doubles a chain and parameter; its summaries hold ~1000
    import os

    from privirt.bayes import driver

    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    chains = int(have / (8 * 100 * 1053)) + 1  # just over memory at 1053 doubles, far under at 4
    with pytest.raises(MemoryError, match="running summaries .* run fewer chains"):  # not "kept draws"
        driver.check_memory(chains, 5000, {"a": 50, "b": 50}, keep_draws=False)
    driver.check_memory(4, 5000, {"a": 50, "b": 50}, keep_draws=False)


@pytest.mark.parametrize("argv, expected", [
    (["gibbs", "--chains", "0"], "--chains must be at least 1, got 0"),
    (["mh", "--iter", "0"], "--iter must be at least 1, got 0"),
    (["gibbs", "--iter", "10", "--warmup", "10"],
     "--warmup (10) must be smaller than --iter (10); --iter counts all iterations including the "
     "warmup (e.g. --iter 10000 --warmup 5000)"),
    (["gibbs", "--thin", "100"],
     "--thin 100 is larger than the 20 post-warmup iterations; lower --thin or raise --iter"),
    (["gibbs", "--prior-a", "1", "0"], "--prior-a needs a finite mean and a finite positive variance"),
    (["gibbs", "--prior-b", "1e200", "1"], "the mean of --prior-b is 1e+200, too large"),
    (["gibbs", "--engine", "numpy", "--prior-b", "1", "1e-310"],
     "the variance of --prior-b is 1e-310, too small"),
    (["gibbs", "--prior-a", "1", "1e-300"], "the variance of --prior-a is 1e-300, too small"),
    (["mh", "--prior-theta", "0", "1e-13"], "the variance of --prior-theta is 1e-13, too small"),
    (["mh", "--prior-theta", "0", "0"], "--prior-theta (0.0, 0.0): the mean must be finite"),
    (["mh", "--proposal-sd", "0", "0.4", "0.4"], "--proposal-sd THETA must be finite and positive"),
    (["gibbs", "--seed", "-1"], "--seed must be a non-negative integer, got -1"),
    (["estimate", "--person-col", "nope"], "--person-col 'nope' is not a column of the table"),
    (["estimate", "--epsilon", "1", "--n-boot", "19"], "--n-boot must be 0 (no intervals) or an integer >= 20"),
    (["estimate", "--epsilon", "1e-320"], "choose --epsilon >= 1e-06 (nothing was spent)"),
    (["estimate", "--method", "spectral", "--epsilon", "1", "--p0", "1e-320"],
     "use --p0 >= 0.483 (--p0 auto) or larger"),
])
def test_sampler_and_estimate_refusals_name_the_flags(argv, expected, tmp_path, capsys):
    """The library's Python names (n_chains, n_iter, warmup, thin, priors['a'], proposal_sd,
    seed, person_col, n_boot, epsilon=, p0 =) read as the flags on the command line."""
    X, *_ = privirt.simulate_2pno(40, 5, seed=1)
    path = tmp_path / "d.csv"
    pd.DataFrame(X, columns=[f"i{j}" for j in range(5)]).to_csv(path, index=False)
    command, *rest = argv
    extra = ["--iter", "30", "--warmup", "10"] if command in ("gibbs", "mh") else []
    assert main([command, str(path), "--no-progress", *extra, *rest]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not line.startswith("privirt: warning: ")]
    assert len(err) == 1 and err[0].startswith("privirt: error: "), err
    assert expected in err[0]
    for name in ("n_chains", "n_iter", "thin=", "priors[", "proposal_sd", "SeedSequence",
                 "person_col", "n_boot", "epsilon=", "p0 =", "p0='auto'"):
        assert name not in err[0]


@pytest.mark.parametrize("engine", ["numpy", "fused"])
def test_a_tiny_prior_variance_is_refused_before_sampling(engine, tmp_path, capsys):
    """--prior-b 1 1e-310 printed "math domain error" (numpy) or sampled the whole run and then
    gave unrelated advice (fused): now one line naming --prior-b, and nothing is written."""
    X, *_ = privirt.simulate_2pno(40, 5, seed=1)
    path, out = tmp_path / "d.csv", tmp_path / "out.csv"
    pd.DataFrame(X, columns=[f"i{j}" for j in range(5)]).to_csv(path, index=False)
    assert main(["gibbs", str(path), "--no-progress", "--iter", "30", "--warmup", "10", "--engine",
                 engine, "--prior-b", "1", "1e-310", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("privirt: error: the variance of --prior-b is 1e-310, too small")
    assert err.count("\n") == 1 and "sampling" not in err and "priors[" not in err
    assert not out.exists()


def test_a_locked_ledger_is_worded_for_the_command_line(tmp_path, capsys):
    """The library's advice to open the ledger 'with a longer timeout=' named an option the CLI
    does not have; the CLI says to retry once the other run has finished."""
    import sqlite3

    from privirt.cli import main
    from privirt.cli._words import cli_text
    from privirt.private.ledger import Ledger

    ledger = tmp_path / "l.ledger"
    Ledger(ledger, epsilon=5.0, delta=1e-6, timeout=0.2)
    data = tmp_path / "x.csv"
    data.write_text("a,b,c\n" + "1,0,1\n0,1,1\n1,1,0\n0,0,1\n" * 10, encoding="utf-8")
    holder = sqlite3.connect(ledger, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        import privirt.private.ledger as led_mod

        real = led_mod.Ledger.__init__

        def short(self, *a, **kw):  # the CLI's ledger, waiting 0.2 s instead of 60 s
            kw["timeout"] = 0.2
            real(self, *a, **kw)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(led_mod.Ledger, "__init__", short)
            rc = main(["estimate", str(data), "--epsilon", "1", "--ledger", str(ledger),
                       "--method", "spectral"])
    finally:
        holder.rollback()
        holder.close()
    err = capsys.readouterr().err
    assert rc != 0 and err.count("\n") == 1 and "timeout=" not in err, err
    assert "retry once the other run has finished" in err
    assert "timeout=" not in cli_text("nothing was spent — retry, or open the ledger with a "
                                      "longer timeout=")

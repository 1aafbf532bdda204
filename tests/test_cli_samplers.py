"""``privirt gibbs`` / ``privirt mh``: output paths checked before any work, one spelling of
the warmup and prior flags (old spellings warn), the summary stage and total time shown."""

from __future__ import annotations

import re
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import special

import privirt
from privirt.cli import main


@pytest.fixture
def data_csv(tmp_path):
    X, *_ = privirt.simulate_2pno(60, 5, seed=1)
    path = tmp_path / "data.csv"
    pd.DataFrame(X, index=[f"p{i}" for i in range(60)],
                 columns=[f"i{j}" for j in range(5)]).to_csv(path)
    return path


def _run(command, path, *extra):
    # progress stays on: a run that started sampling would print its bar
    return main([command, str(path), "--iter", "40", "--warmup", "20", "--seed", "1",
                 "--device", "cpu", *extra])


def _bad_outputs(tmp_path):
    existing = tmp_path / "file.txt"
    existing.write_text("x")
    return [
        (["--plots", str(existing)], "--plots .* not a folder"),
        (["--plots", str(tmp_path / "no" / "figs")], "--plots .* does not exist"),
        (["--out", str(tmp_path / "s.xlsx")], r"--out must end in \.csv"),
        (["--out", str(tmp_path / "missing" / "s.csv")], "--out .* does not exist"),
        (["--out", str(tmp_path)], "--out .* is a folder"),
        (["--out", str(tmp_path / "data.csv")], "--out .* is the input file"),  # the data itself
    ]


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_bad_output_paths_are_refused_before_sampling(command, data_csv, tmp_path, capsys):
    for extra, message in _bad_outputs(tmp_path):
        assert _run(command, data_csv, *extra) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("privirt: error:") and len(err.strip().splitlines()) == 1, err
        assert re.search(message, err), (extra, err)
        assert "/40 it" not in err and "%" not in err  # no progress bar: nothing was sampled
    assert not (tmp_path / "missing").exists() and not (tmp_path / "no").exists()
    assert not (tmp_path / "s.xlsx").exists()
    assert pd.read_csv(data_csv, index_col=0).shape == (60, 5)  # the input was not overwritten


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_bad_output_paths_are_refused_before_reading_the_data(command, tmp_path, capsys):
    """The path check comes first: a missing data file is not even opened."""
    assert _run(command, tmp_path / "absent.csv", "--out", str(tmp_path / "s.xlsx")) == 2
    assert "--out must end in .csv" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_new_plots_folder_is_created_but_not_its_parents(command, data_csv, tmp_path):
    pytest.importorskip("matplotlib")
    figs = tmp_path / "figs"
    assert _run(command, data_csv, "--no-progress", "--plots", str(figs)) == 0
    assert figs.is_dir() and any(figs.iterdir())


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_wrote_notes_go_to_stderr_not_into_the_table(command, data_csv, tmp_path, capsys):
    """gibbs printed its "wrote ..." notes (--out, --plots) on stdout, into the result table."""
    pytest.importorskip("matplotlib")
    out, figs = tmp_path / "s.csv", tmp_path / "figs"
    assert _run(command, data_csv, "--no-progress", "--out", str(out), "--plots", str(figs)) == 0
    captured = capsys.readouterr()
    assert "wrote" not in captured.out
    assert str(out) in captured.err and str(figs) in captured.err


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_summary_stage_and_total_time_are_shown(command, data_csv, tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert _run(command, data_csv, "--out", str(out)) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "summarising" in captured.err
    assert captured.err.index("summarising") > captured.err.index("40/40")
    assert "sampling" in text and "total" in text
    # --no-progress silences the stage line but still reports the time
    assert _run(command, data_csv, "--out", str(out), "--no-progress") == 0
    captured = capsys.readouterr()
    assert "summarising" not in captured.err
    assert "total" in captured.out + captured.err


@pytest.mark.parametrize("command", ["gibbs", "mh"])
@pytest.mark.parametrize("old", [["--burn-in", "20"], ["--b-prior", "0", "4"], ["--a-prior", "1", "1"]])
def test_old_flag_spellings_are_gone(command, old, data_csv, capsys):
    """The hidden 0.1 aliases were removed (CHANGELOG.md): one usage line, exit 2, no run."""
    with pytest.raises(SystemExit) as exc:
        main([command, str(data_csv), "--iter", "40", "--seed", "2", "--device", "cpu",
              "--no-progress", *old])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {' '.join(old)}" in err and "Traceback" not in err


def test_gibbs_prior_flag_reaches_the_sampler(data_csv, tmp_path):
    """--prior-a 0.5 1e-6 pins every slope at 0.5 (the flag is not ignored)."""
    out = tmp_path / "s.csv"
    assert main(["gibbs", str(data_csv), "--iter", "40", "--warmup", "20", "--seed", "2",
                 "--device", "cpu", "--no-progress", "--prior-a", "0.5", "1e-6",
                 "--out", str(out)]) == 0
    table = pd.read_csv(out, index_col=[0, 1])
    np.testing.assert_allclose(table.loc["a", "mean"], 0.5, atol=0.01)


@pytest.mark.parametrize("engine", ["numpy", "fused"])
def test_gibbs_engine_flag_reaches_the_sampler(engine, data_csv, tmp_path, capsys):
    from privirt.bayes import twopno_fused

    if engine == "fused" and not twopno_fused.numba_available():
        pytest.skip("needs numba")
    out = tmp_path / "s.csv"
    assert main(["gibbs", str(data_csv), "--iter", "40", "--warmup", "20", "--seed", "2",
                 "--device", "cpu", "--no-progress", "--engine", engine,
                 "--out", str(out)]) == 0
    assert f"on cpu ({engine} engine)" in capsys.readouterr().err  # the "wrote" note
    with pytest.raises(SystemExit):
        main(["gibbs", str(data_csv), "--engine", "cuda"])


@pytest.fixture
def votes_csv(tmp_path):
    """Simulated roll calls: 80 voters × 15 votes, every third slope negative."""
    rng = np.random.default_rng(3)
    theta = rng.standard_normal(80)
    a = np.where(np.arange(15) % 3 == 0, -1.5, 1.5)
    X = (rng.random((80, 15)) < special.ndtr(np.outer(theta, a))).astype(float)
    order = np.argsort(theta)
    voters = [f"v{i}" for i in range(80)]
    path = tmp_path / "votes.csv"
    pd.DataFrame(X, index=pd.Index(voters, name="voter"),
                 columns=[f"rc{j}" for j in range(15)]).to_csv(path)
    return path, voters[order[0]], voters[order[-1]], a


def test_gibbs_slopes_free_with_anchors(votes_csv, tmp_path, capsys):
    """--slopes free --anchor L=- --anchor R=+: negative slopes estimated negative, the
    anchored voters on their sides; the default warns in one line naming the option."""
    path, left, right, a = votes_csv
    out = tmp_path / "s.csv"
    args = ["gibbs", str(path), "--person-col", "voter", "--iter", "300", "--warmup", "100",
            "--seed", "2", "--device", "cpu", "--no-progress", "--out", str(out)]
    assert main(args + ["--slopes", "free", "--anchor", f"{left}=-", "--anchor",
                        f"{right}=+", "--prior-a", "0", "4"]) == 0
    # short chains may warn about convergence, never about the slopes' signs
    assert "correlate negatively" not in capsys.readouterr().err
    table = pd.read_csv(out, index_col=[0, 1])
    assert np.all(np.sign(table.loc["a", "mean"].to_numpy()) == np.sign(a))
    assert table.loc[("theta", left), "q97.5"] < 0 < table.loc[("theta", right), "q2.5"]
    assert main(args) == 0
    err = capsys.readouterr().err
    warn = [line for line in err.splitlines() if "correlate negatively" in line]
    assert len(warn) == 1 and "--slopes free" in warn[0] and "rc0, rc3" in warn[0]


def test_gibbs_fixed_anchor_has_no_rhat_and_is_not_counted_as_not_converged(votes_csv, tmp_path,
                                                                            capsys):
    """A θ fixed by --anchor NAME=VALUE never changes: R-hat and ESS NaN (ESS was the number
    of draws), like a stuck parameter, but the convergence warning leaves exactly the fixed
    persons out (a NaN ESS is not counted as ESS < 400 for them)."""
    path, left, right, _ = votes_csv
    out = tmp_path / "s.csv"
    assert main(["gibbs", str(path), "--person-col", "voter", "--iter", "60", "--warmup", "20",
                 "--chains", "2", "--seed", "57000001", "--device", "cpu", "--no-progress",
                 "--out", str(out), "--slopes", "free", "--anchor", f"{left}=-1.5",
                 "--anchor", f"{right}=+"]) == 0
    err = capsys.readouterr().err
    table = pd.read_csv(out, index_col=[0, 1])
    assert table.loc[("theta", left), "sd"] == 0 and np.isnan(table.loc[("theta", left), "rhat"])
    assert np.isnan(table.loc[("theta", left), "ess"])  # was the number of draws
    assert np.isfinite(table.loc[("theta", right), "rhat"])  # a sign anchor still moves
    warn = [line for line in err.splitlines() if "have not converged" in line]
    assert len(warn) == 1 and f"of {len(table) - 1} parameters" in warn[0], err


@pytest.mark.parametrize("bad, message", [
    (["--anchor", "v1"], "--anchor expects NAME=VALUE"),
    (["--anchor", "v1=left"], "must be \\+ or - .* or a number"),
    (["--anchor", "nobody=+", "--slopes", "free"], "unknown anchor label 'nobody'"),
    (["--anchor", "v1=+", "--anchor", "v1=-"], "more than one --anchor"),
    (["--slopes", "signed"], "invalid choice"),
])
def test_gibbs_bad_anchor_or_slopes_is_one_line(bad, message, votes_csv, capsys):
    path = votes_csv[0]
    code = None
    try:
        code = main(["gibbs", str(path), "--person-col", "voter", "--iter", "40", "--warmup",
                     "20", "--device", "cpu", *bad])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert "Traceback" not in err and "/40 it" not in err


def test_mh_transpose_names_dropped_persons_as_persons(tmp_path, capsys):
    """With --transpose the file's columns are persons: an empty one was dropped before the
    transpose and reported as an item."""
    X, *_ = privirt.simulate_2pno(30, 6, seed=4)
    frame = pd.DataFrame(X, index=[f"p{i}" for i in range(30)], columns=[f"v{j}" for j in range(6)]).astype(float)
    frame.loc["p3"] = np.nan  # a person with no vote: an empty column of the transposed file
    path = tmp_path / "votes.csv"
    frame.T.rename_axis("vote").to_csv(path)
    assert main(["mh", str(path), "--transpose", "--person-col", "vote", "--iter", "20", "--warmup", "10",
                 "--seed", "1", "--device", "cpu", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "1 person(s) with no response" in err and "item(s) with no response" not in err, err


@pytest.mark.parametrize("command, sampler", [("gibbs", "gibbs_2pno"), ("mh", "mh_2pl")])
def test_non_finite_posterior_means_are_refused_not_printed(command, sampler, data_csv, tmp_path,
                                                            monkeypatch, capsys):
    """Diverged chains (all-NaN draws) printed a NaN table with exit 0: now one line, exit 2,
    no --out written."""
    import privirt.bayes as bayes

    real = getattr(bayes, sampler)

    def diverged(*args, **kwargs):
        post = real(*args, **kwargs)
        post.draws["b"][..., 1] = np.nan
        return post

    monkeypatch.setattr(bayes, sampler, diverged)
    out = tmp_path / "s.csv"
    assert _run(command, data_csv, "--no-progress", "--out", str(out)) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not line.startswith("privirt: warning: ")]  # (the data's item i0 warns under gibbs)
    assert len(err) == 1 and err[0].startswith("privirt: error: the posterior means of 1 of ")
    assert "(b i1, ...) are not finite" in err[0] and not out.exists()


@pytest.mark.parametrize("extra, message", [
    (["--prior-theta", "0", "0"], r"--prior-theta \(0\.0, 0\.0\)"),
    (["--prior-b", "nan", "1"], r"--prior-b \(nan, 1\.0\)"),
    (["--proposal-sd", "0", "1", "1"], "--proposal-sd THETA must be finite and positive"),
    (["--proposal-sd", "nan", "1", "1"], "--proposal-sd THETA must be finite and positive"),
    (["--anchor", "p0=0"], "anchor value for 'p0' must be a non-zero finite number"),
    (["--anchor", "p0=nan"], "anchor value for 'p0' must be a non-zero finite number"),
    (["--anchor", "nobody=1"], "unknown anchor label 'nobody'"),
])
def test_mh_bad_priors_proposals_anchors_print_one_line(data_csv, capsys, extra, message):
    """``privirt mh`` printed its stage message (``privirt mh: Responses(...)``) and then the
    error for bad --prior-*/--proposal-sd/--anchor values: now the one error line only."""
    assert _run("mh", data_csv, *extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("privirt: error: "), err
    assert re.search(message, err)


@pytest.fixture
def empty_row_csv(tmp_path):
    """60 persons × 5 items, one of them with no response (reading it warns that it is
    dropped)."""
    X, *_ = privirt.simulate_2pno(60, 5, seed=57_000_010)
    frame = pd.DataFrame(X, index=[f"p{i}" for i in range(60)],
                         columns=[f"i{j}" for j in range(5)]).astype(float)
    frame.loc["p3"] = np.nan
    path = tmp_path / "empty_row.csv"
    frame.rename_axis("p").to_csv(path)
    return path


@pytest.mark.parametrize("command", ["gibbs", "mh"])
@pytest.mark.parametrize("extra, message", [
    (["--prior-a", "0", "-1"], "--prior-a"),
    (["--prior-b", "nan", "1"], "--prior-b"),
    (["--iter", "10"], "--warmup \\(20\\) must be smaller than --iter \\(10\\)"),
    (["--thin", "100"], "--thin"),
    (["--chains", "0"], "--chains"),
    (["--iter", "0"], "--iter"),
    (["--anchor", "p0=BAD"], "anchor"),
])
def test_bad_priors_schedule_anchor_values_are_one_line_before_the_data(
        command, extra, message, empty_row_csv, capsys):
    """``privirt gibbs`` read the data (warning "dropped 1 person(s)") before it checked the
    priors, schedule and anchor values: two lines; now the one error line, as ``privirt mh``."""
    if extra[0] == "--anchor":  # θ fixed at 1e9 (gibbs); a zero, which has no sign (mh)
        extra = ["--anchor", "p0=1e9" if command == "gibbs" else "p0=0"]
    assert _run(command, empty_row_csv, "--person-col", "p", *extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("privirt: error: "), err
    assert re.search(message, err), err


def test_mh_refuses_weights_col_with_transpose_before_reading(tmp_path, capsys):
    """--weights-col expands rows into persons; with --transpose the rows are items, so the
    pattern rows became duplicated items (exit 0).  Now one line, before the file is read
    (a missing file is not even opened), nothing written."""
    out = tmp_path / "s.csv"
    assert _run("mh", tmp_path / "missing.csv", "--weights-col", "frequency", "--transpose",
                "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("privirt: error: --weights-col "), err
    assert "--transpose" in err and not out.exists()


def test_mh_checks_prior_values_before_reading_the_data(tmp_path, capsys):
    """The values are checked before the data are read: a bad prior is named even when the
    file is missing."""
    assert _run("mh", tmp_path / "missing.csv", "--prior-a", "0", "-1") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--prior-a (0.0, -1.0)" in err


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_out_labels_are_quoted_as_in_the_estimate_csv(command, tmp_path):
    """The summary CSV wrote labels unquoted (unlike estimate's --out since its labels are quoted):
    the README's ``comment="#"`` reader dropped a ``#x`` item's rows there."""
    X, *_ = privirt.simulate_2pno(60, 4, seed=1)
    path = tmp_path / "data.csv"
    labels = ["#x", "NA", "01", "q#4"]
    pd.DataFrame(X, index=[f"p{i}" for i in range(60)], columns=labels).to_csv(path)
    out = tmp_path / "s.csv"
    assert _run(command, path, "--no-progress", "--out", str(out)) == 0
    assert '"b","#x",' in out.read_text()
    table = pd.read_csv(out, comment="#", dtype={"label": str}, keep_default_na=False, na_values=[""])
    assert table.loc[table["parameter"] == "b", "label"].tolist() == labels


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_duplicate_person_label_is_one_line_with_its_rows_and_the_remedy(command, tmp_path, capsys):
    """A person listed twice was refused as "duplicate person label 'p1'": no rows, no remedy."""
    X, *_ = privirt.simulate_2pno(30, 4, seed=2)
    frame = pd.DataFrame(X, columns=[f"i{j}" for j in range(4)])
    frame.insert(0, "who", [f"p{i}" for i in range(30)])
    frame.loc[7, "who"] = "p1"
    path, out = tmp_path / "dup.csv", tmp_path / "s.csv"
    frame.to_csv(path, index=False)
    assert _run(command, path, "--person-col", "who", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["privirt: error: duplicate person label 'p1' (rows 1 and 7): make the "
                                "person labels unique or merge the rows"], err
    assert not out.exists()


@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_drop_cols_removes_label_columns_and_refuses_unknown_names_in_one_line(command, tmp_path, capsys):
    """A roll-call file with text label columns (state) beside --person-col was refused with
    "convert text such as 'yes'/'no'"; the hint now names --drop-cols, which removes them."""
    X, *_ = privirt.simulate_2pno(30, 4, seed=3)
    frame = pd.DataFrame(X, columns=[f"i{j}" for j in range(4)])
    frame.insert(0, "state", [f"S{i % 7}" for i in range(30)])
    frame.insert(0, "who", [f"p{i}" for i in range(30)])
    path, out = tmp_path / "votes.csv", tmp_path / "s.csv"
    frame.to_csv(path, index=False)
    assert _run(command, path, "--person-col", "who", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith(
        "column 'state' looks like a label column, not answers: remove it before the table is read "
        "with --drop-cols state"), err
    for drop, message in (("state,stat", "--drop-cols names 'stat', not a column of the table; name one "
                                         "of its columns: who, state, i0, i1, i2, i3"),
                          ("who", "--drop-cols names the person column 'who': leave it out")):
        assert _run(command, path, "--person-col", "who", "--drop-cols", drop, "--out", str(out)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"privirt: error: {message}"), err
    assert not out.exists()
    assert _run(command, path, "--person-col", "who", "--drop-cols", "state", "--no-progress",
                "--out", str(out)) == 0
    table = pd.read_csv(out)
    assert set(table.loc[table["parameter"] == "b", "label"]) == {"i0", "i1", "i2", "i3"}


@pytest.mark.filterwarnings("ignore:item\\(s\\) i0 correlate negatively")
@pytest.mark.parametrize("command", ["gibbs", "mh"])
def test_the_samplers_bar_shows_on_a_terminal_only(command, data_csv, capsys, monkeypatch):
    """The samplers drew their bar into logs and pipes by default (progress=True), where every
    other call of the library draws it only on a terminal (the command line keeps its stage
    lines and bar unless --no-progress, as documented)."""
    import privirt

    sampler = {"gibbs": privirt.gibbs_2pno, "mh": privirt.mh_2pl}[command]
    X = pd.read_csv(data_csv, index_col=0)
    sampler(X, n_iter=40, warmup=20, seed=1)
    assert "/40 it" not in capsys.readouterr().err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    sampler(X, n_iter=40, warmup=20, seed=1)
    assert "/40 it" in capsys.readouterr().err


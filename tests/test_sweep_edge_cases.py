"""Sweeps on unusual input: data-set names, ε out of range, refused runs that write nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from privirt import sweeps as sw
from privirt.sweeps.results import has_rows
from tests._env import child_env


def _write(tmp_path: Path, text: str, name: str = "cfg.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


HASH_NAME = """
seed = 1
trials = 1
epsilons = [1.0, 2.0, 4.0]
mechanisms = ["gaussian"]
[[datasets]]
source = "synthetic"
name = "#cohort"
n = 50
m = 5
"""


def test_rows_of_a_data_set_named_with_a_leading_hash_are_finished_cells(tmp_path):
    # has_rows skipped every line starting with "#", not only the privacy note: a second run
    # overwrote the results without --resume, and --resume recomputed (and truncated) them all
    cfg = _write(tmp_path, HASH_NAME)
    out = tmp_path / "out"
    first = sw.run_sweep(cfg, out, jobs=1, progress=False)
    assert first.computed == first.total == 3
    results = out / "results.csv"
    assert has_rows(results)
    kept = results.read_bytes()
    with pytest.raises(ValueError, match="already holds sweep results"):
        sw.run_sweep(cfg, out, jobs=1, progress=False)
    assert results.read_bytes() == kept
    lines = kept.decode("utf-8").splitlines(keepends=True)
    results.write_text("".join(lines[:-1]), encoding="utf-8")  # an interrupted run: one row less
    resumed = sw.run_sweep(cfg, out, jobs=1, progress=False, resume=True)
    assert (resumed.skipped, resumed.computed) == (2, 1)
    assert len(sw.read_results(out)) == 3


@pytest.mark.parametrize("epsilons", ["[1e-300]", "[1e-7, 1.0]", "{start = 1e-8, stop = 1.0, num = 3}"])
def test_an_epsilon_below_the_smallest_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, epsilons):
    # only ε > MAX_EPSILON was refused: ε = 1e-300 ran, every private cell failed, and the run exited 0
    from privirt.cli import main

    cfg = _write(tmp_path, HASH_NAME.replace("[1.0, 2.0, 4.0]", epsilons))
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privirt: error: epsilons: every ε must be at least 1e-06") and "\n" not in err
    assert not out.exists()


def test_the_smallest_epsilon_itself_is_accepted(tmp_path):
    from privirt.sweeps.config import load_config

    assert load_config(_write(tmp_path, HASH_NAME.replace("[1.0, 2.0, 4.0]", "[1e-6]"))).datasets[0].epsilons == (1e-6,)


def test_a_data_set_name_with_dollar_signs_is_drawn_as_written(tmp_path, capsys):
    # "cost $a^$" stopped `privirt report` with a mathtext ParseSyntaxException after the first
    # data set's plot was written
    pytest.importorskip("matplotlib")
    from matplotlib.text import Text

    from privirt.cli import main
    from privirt.sweeps import report as rep

    name = "cost $a^$"
    cfg = _write(tmp_path, HASH_NAME.replace('"#cohort"', f'"{name}"'))
    out = tmp_path / "out"
    sw.run_sweep(cfg, out, jobs=1, progress=False)
    fig = rep.plot_dataset(sw.read_results(out), name)
    fig.canvas.draw()
    # (the log axes' tick labels are matplotlib's own mathtext)
    shown = [t._preprocess_math(t.get_text()) for t in fig.findobj(Text)
             if "mathdefault" not in t.get_text()]
    assert not any(math for _, math in shown)
    assert any(text.startswith(f"{name}  (n = 50") for text, _ in shown)
    assert main(["report", str(out)]) == 0
    capsys.readouterr()


def test_every_table_of_a_report_prints_an_epsilon_alike(tmp_path):
    # the per-data-set tables labelled their own ε only: A's ε = 1.0001 read "ε = 1" in A's
    # table (as B's real ε = 1 in B's) but "1.0001" in the smallest-ε table
    pytest.importorskip("matplotlib")
    from privirt.sweeps import report as rep

    text = ('seed = 1\ntrials = 1\nmechanisms = ["gaussian"]\n[report]\nmetric = "top_k_accuracy"\n'
            'target = 0.0\n[[datasets]]\nsource = "synthetic"\nname = "A"\nn = 50\nm = 5\n'
            'epsilons = [1.0001, 2.0]\n[[datasets]]\nsource = "synthetic"\nname = "B"\nn = 50\n'
            'm = 5\nepsilons = [1.0, 2.0]\n')
    out = tmp_path / "out"
    sw.run_sweep(_write(tmp_path, text), out, jobs=1, progress=False)
    md = rep.build_report(out, metric="top_k_accuracy", target=0.0).markdown.read_text(encoding="utf-8")
    assert "| A | 1.0001 |" in md and "| B | 1 |" in md
    a_table = md.split("## A ", 1)[1].split("## B ", 1)[0]
    b_table = md.split("## B ", 1)[1]
    assert "| mechanism | ε = 1.0001 | ε = 2 |" in a_table
    assert "| mechanism | ε = 1 | ε = 2 |" in b_table


_TINY = ('seed = 1\ntrials = 1\nepsilons = [0.5, 2.0]\nmechanisms = ["gaussian"]\n'
         '[[datasets]]\nsource = "synthetic"\nn = 100\nm = 5\n')


def _env() -> dict:
    return child_env()


@pytest.mark.parametrize("guarded", [False, True])
def test_spawned_workers_refuse_an_unguarded_module_run_with_dash_m(tmp_path, guarded):
    # the check was skipped for `python -m pkg.script`, but multiprocessing re-runs such a module
    # in every spawned worker: three tracebacks and a "worker died ... --resume" error
    import subprocess
    import sys

    (tmp_path / "tiny.toml").write_text(_TINY)
    pkg = tmp_path / "spawnpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    call = 'sweeps.run_sweep("tiny.toml", "a", jobs=2, progress=False)\n'
    (pkg / "script.py").write_text(
        'open("runs.log", "a").write("ran\\n")\n'
        "from privirt import sweeps\n"
        "from privirt.sweeps import runner\n"
        'runner._start_method = lambda: "spawn"\n'
        + ('if __name__ == "__main__":\n    ' + call if guarded else call))
    proc = subprocess.run([sys.executable, "-m", "spawnpkg.script"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=240)
    if guarded:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(sw.read_results(tmp_path / "a")) == 2
        return
    assert proc.returncode == 1 and proc.stderr.count("Traceback") == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert 'if __name__ == "__main__":' in last and "script.py" in last and "jobs=1" in last
    assert (tmp_path / "runs.log").read_text() == "ran\n"  # no worker ran it again


def test_a_data_set_that_cannot_be_read_leaves_the_folder_as_it_was(tmp_path, capsys):
    # the data set was read by the first cell, after the folder, its lock file, sweep.json and
    # config.toml were written: a refused run left them behind (and a phantom run in sweep.json)
    from privirt.cli import main

    (tmp_path / "bad.csv").write_text("x,y,z\n1,2,0\n0,1,1\n1,0,1\n", encoding="utf-8")
    cfg = _write(tmp_path, 'trials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                           '[[datasets]]\nsource = "csv"\npath = "bad.csv"\n')
    out = tmp_path / "new" / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privirt: error: data set 'bad': invalid response 2") and "\n" not in err
    assert not (tmp_path / "new").exists()  # the parent it created is removed too
    old = tmp_path / "old"
    old.mkdir()
    (old / "notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(ValueError, match="invalid response 2"):
        sw.run_sweep(cfg, old, jobs=2, progress=False)
    assert [p.name for p in old.iterdir()] == ["notes.txt"]


def test_a_refused_unguarded_script_writes_nothing(tmp_path):
    import subprocess
    import sys

    (tmp_path / "tiny.toml").write_text(_TINY)
    (tmp_path / "script.py").write_text(
        "from privirt import sweeps\n"
        "from privirt.sweeps import runner\n"
        'runner._start_method = lambda: "spawn"\n'
        'sweeps.run_sweep("tiny.toml", "new/out", jobs=2, progress=False)\n')
    proc = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "RuntimeError" in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "new").exists()


def test_a_sweep_error_keeps_the_configuration_s_names_not_command_line_flags(tmp_path, capsys):
    # the sweep's configuration spells p0 as the library does; there is no --p0 on `privirt sweep`
    from privirt.cli import main

    cfg = _write(tmp_path, HASH_NAME.replace('"#cohort"', '"s"') + "[mechanism_options.gaussian]\np0 = 1e-320\n")
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "p0 = " in err and "use p0 >= " in err and "--p0" not in err


def test_an_undocumented_report_metrics_key_is_refused_in_one_line(tmp_path):
    # [report] accepted a `metrics` key with any value and never used it (and listed it as
    # allowed in the unknown-key error)
    cfg = _write(tmp_path, 'seed = 2800001\n[report]\nmetrics = "whatever"\n'
                           '[[datasets]]\nsource = "synthetic"\nn = 50\nm = 4\n')
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['metrics'\] in the \[report\] table") as err:
        sw.load_config(cfg)
    assert "\n" not in str(err.value)
    assert str(err.value).endswith("allowed: ['metric', 'target']")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("below", [False, True])
def test_an_output_folder_that_is_a_file_is_refused_in_one_line_naming_it(tmp_path, capsys, below):
    # `--out` naming an existing file printed "[Errno 17] File exists: ..." with no remedy
    from privirt.cli import main

    cfg = _write(tmp_path, 'seed = 2800002\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                           '[[datasets]]\nsource = "synthetic"\nn = 50\nm = 4\n')
    afile = tmp_path / "afile"
    afile.write_text("keep", encoding="utf-8")
    out = afile / "sub" if below else afile
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privirt: error: "), err
    assert f"{afile} is a file" in err[0] and "choose another output folder" in err[0]
    assert "Errno" not in err[0]
    assert afile.read_text(encoding="utf-8") == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "cfg.toml"]


def test_a_configuration_that_is_not_utf8_is_refused_in_one_line_naming_it(tmp_path, capsys):
    # a non-UTF-8 configuration printed "'utf-8' codec can't decode byte 0xff ..." without the
    # file's name or what to do
    from privirt.cli import main

    cfg = tmp_path / "bin.toml"
    cfg.write_bytes(b"seed = 1\n\xff\xfe\n")
    with pytest.raises(ValueError, match="save the configuration as UTF-8") as exc:
        sw.load_config(cfg)
    assert str(cfg) in str(exc.value) and "codec" not in str(exc.value)
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cfg) in err[0] and "UTF-8" in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("where", ["top", "table"])
def test_a_top_k_not_below_m_is_refused_when_the_configuration_is_read(tmp_path, where):
    # top_k = 50 with m = 4 was silently replaced by 3 (the CSV showed top_k = 3)
    top = "top_k = 50\n" if where == "top" else ""
    inner = "top_k = 4\n" if where == "table" else ""
    cfg = _write(tmp_path, f'seed = 2800003\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                           f'{top}[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n{inner}')
    key = "top_k = 50" if where == "top" else "datasets[0].top_k = 4"
    with pytest.raises(ValueError, match=rf"^{re.escape(key)} must be less than m = 4") as exc:
        sw.load_config(cfg)
    assert "\n" not in str(exc.value) and "at most 3" in str(exc.value)
    ok = _write(tmp_path, f'seed = 2800003\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                          'top_k = 3\n[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n', "ok.toml")
    sw.run_sweep(ok, tmp_path / "ok", jobs=1, progress=False)
    assert set(sw.read_results(tmp_path / "ok")["top_k"]) == {3}


def test_a_top_k_not_below_a_csv_data_set_s_m_is_refused_before_anything_is_written(tmp_path):
    # m of CSV (and bundled) data is known once the data are read: refused there, before the run
    # writes anything, instead of clipping it to m - 1
    import pandas as pd

    import privirt

    X, _, _ = privirt.simulate_rasch(80, 4, seed=2800004)
    pd.DataFrame(X, columns=list("abcd")).to_csv(tmp_path / "resp.csv", index=False)
    cfg = _write(tmp_path, 'seed = 2800004\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
                           'top_k = 5\n[[datasets]]\nsource = "csv"\npath = "resp.csv"\nname = "r"\n')
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"^top_k = 5 must be less than m = 4, .*'r'"):
        sw.run_sweep(cfg, out, jobs=1, progress=False)
    assert not out.exists()


def test_an_interrupted_run_s_time_is_kept_and_the_report_says_it_was_interrupted(tmp_path, monkeypatch):
    # an interrupted run kept neither its seconds nor a mark: the report counted its time as 0
    # ("2 run(s), 7.3 s of sweep time") and did not say that a run was interrupted
    import json
    import time

    pytest.importorskip("matplotlib")
    from privirt.sweeps import report as rep
    from privirt.sweeps import runner

    cfg = _write(tmp_path, 'seed = 2800007\ntrials = 3\nepsilons = [1.0, 2.0]\nmechanisms = ["gaussian"]\n'
                           '[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n')
    out = tmp_path / "out"
    real, calls = runner.worker, []

    def stopping(*args):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(1)
        time.sleep(0.2)
        return real(*args)

    monkeypatch.setattr(runner, "worker", stopping)
    with pytest.raises(KeyboardInterrupt):
        sw.run_sweep(cfg, out, jobs=1, progress=False)
    monkeypatch.setattr(runner, "worker", real)
    first = json.loads((out / "sweep.json").read_text(encoding="utf-8"))["runs"]
    assert len(first) == 1 and first[0]["interrupted"] is True and "finished" not in first[0]
    assert first[0]["cells_computed"] == 3 and first[0]["seconds"] >= 0.6
    stats = sw.run_sweep(cfg, out, jobs=1, resume=True, progress=False)
    assert stats.computed == 3
    runs = json.loads((out / "sweep.json").read_text(encoding="utf-8"))["runs"]
    assert runs[0] == first[0] and "interrupted" not in runs[1] and "finished" in runs[1]
    total = runs[0]["seconds"] + runs[1]["seconds"]
    md = rep.build_report(out).markdown.read_text(encoding="utf-8")
    assert f"2 run(s) (1 interrupted), {total:.1f} s of sweep time" in md


def test_every_run_keeps_its_own_configuration_and_machine_in_the_manifest(tmp_path, monkeypatch):
    # sweep.json kept one top-level config and machine, which a --resume replaced: nothing
    # recorded the first run's configuration (the docs say it records those of every run)
    import json
    import platform

    text = ('name = "{}"\nseed = 2800008\ntrials = {}\nepsilons = {}\nmechanisms = ["gaussian"]\n'
            '[[datasets]]\nsource = "synthetic"\nn = 60\nm = 4\n')
    out = tmp_path / "out"
    sw.run_sweep(_write(tmp_path, text.format("first", 1, "[1.0]"), "c1.toml"), out, jobs=1,
                 progress=False)
    monkeypatch.setattr(platform, "platform", lambda *a, **k: "elsewhere-1.0")
    sw.run_sweep(_write(tmp_path, text.format("second", 2, "[1.0, 4.0]"), "c2.toml"), out, jobs=1,
                 resume=True, progress=False)
    manifest = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    runs = manifest["runs"]
    assert [r["config"]["name"] for r in runs] == ["first", "second"]
    assert [r["config"]["datasets"][0]["trials"] for r in runs] == [1, 2]
    assert [r["config"]["datasets"][0]["epsilons"] for r in runs] == [[1.0], [1.0, 4.0]]
    assert runs[0]["machine"]["platform"] != "elsewhere-1.0"
    assert runs[1]["machine"]["platform"] == "elsewhere-1.0"
    assert all(set(r["machine"]) == {"platform", "processor", "cpu_count"} for r in runs)
    # the top-level fields (read by the report) stay: the latest run's
    assert manifest["config"]["name"] == "second" and manifest["machine"] == runs[1]["machine"]


def test_a_trial_whose_reference_fails_records_it_in_its_cells_and_the_sweep_goes_on(
        tmp_path, monkeypatch):
    # the reference (non-private spectral) of one MovieLens item subset was computed outside
    # the cell's error handling: its error aborted the whole sweep, and --resume with it
    import dataclasses

    import privirt
    from privirt.sweeps import registry
    from tests.test_data import _write_u_data

    _write_u_data(tmp_path / "u.data", seed=56_000_001)
    cfg = _write(tmp_path, 'seed = 56000002\ntrials = 3\nepsilons = [1.0, 2.0]\n'
                           'mechanisms = ["gaussian"]\ndevice = "cpu"\n[[datasets]]\n'
                           'source = "movielens"\npath = "u.data"\nm = 6\nrank = 2\n'
                           'min_item_ratings = 5\n')
    bad = {tuple(privirt.load_movielens(tmp_path / "u.data", m=6, rank=2, min_item_ratings=5,
                                        seed=sw.data_seed(56_000_002, "movielens_m6", t)).columns)
           for t in (0, 2)}  # the first trial too: the run is not refused for it
    real = registry.REGISTRY["spectral"]

    def reference(X, **kwargs):
        if tuple(X.columns) in bad:
            raise ValueError("the item comparison graph has 2 separate parts")
        return real.function(X, **kwargs)

    monkeypatch.setitem(registry.REGISTRY, "spectral",
                        dataclasses.replace(real, function=reference))
    stats = sw.run_sweep(cfg, tmp_path / "out", jobs=1, progress=False)
    assert (stats.computed, stats.failed) == (6, 4)
    frame = sw.read_results(tmp_path / "out").sort_values(["trial", "epsilon"])
    assert list(frame["trial"]) == [0, 0, 1, 1, 2, 2]
    failed = frame[frame["trial"] != 1]
    assert failed["status"].str.contains(
        "data set 'movielens_m6': the reference .non-private spectral. cannot be computed: "
        "the item comparison graph has 2 separate parts").all()
    assert failed["l2_error"].isna().all() and list(failed["m"]) == [6] * 4
    assert (frame.loc[frame["trial"] == 1, "status"] == "ok").all()


def test_a_configuration_that_defines_no_cells_is_refused_in_one_line(tmp_path, capsys):
    # spectral is the reference on real data and gets no cells there: the run said "0 cells",
    # exited 0 and left .sweep.lock, config.toml and sweep.json (but no results.csv) behind
    from privirt.cli import main

    cfg = _write(tmp_path, 'seed = 56000003\ntrials = 2\nmechanisms = ["spectral"]\n'
                           '[[datasets]]\nsource = "bundled"\ndataset = "lsat6"\n')
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privirt: error: the configuration defines no cells: on real data "
                          "(lsat6)") and "add another mechanism" in err and "\n" not in err
    assert not out.exists()
    # a synthetic data set (spectral measured against the simulated truth) still has cells
    sw.load_config(_write(tmp_path, cfg.read_text().split("[[datasets]]")[0]
                          + '[[datasets]]\nsource = "synthetic"\nn = 50\nm = 5\n'))


@pytest.mark.parametrize("content", [b'# note\nfoo,bar\n1,2\n3,"4\n', b"\xbd\xff\x00abc\n1,2\n3,4\n"])
def test_a_results_file_that_is_not_a_sweep_s_is_refused_in_one_line_naming_it(tmp_path, capsys,
                                                                                content):
    # the parser's own error came out ("Error tokenizing data. C error: EOF inside string",
    # "'utf-8' codec can't decode byte 0xbd"), naming neither the file nor what to do
    from privirt.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_bytes(content)
    cfg = _write(tmp_path, 'seed = 56000004\ntrials = 1\nepsilons = [1.0]\n'
                           'mechanisms = ["gaussian"]\n[[datasets]]\nsource = "synthetic"\n'
                           'n = 50\nm = 5\n')
    for argv in (["report", str(out)],
                 ["sweep", str(cfg), "--out", str(out), "--resume", "--no-progress"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"privirt: error: {out / 'results.csv'} is not a privirt sweep "
                              "results file (") and "move it away" in err and "\n" not in err
    assert [p.name for p in out.iterdir()] == ["results.csv"]
    assert (out / "results.csv").read_bytes() == content


@pytest.mark.parametrize("argv", [["sweep", "CFG", "--out", "", "--no-progress"], ["report", ""]])
def test_an_empty_output_folder_is_refused_in_one_line(tmp_path, capsys, monkeypatch, argv):
    # Path("") is the current folder: --out "" wrote results.csv, sweep.json, config.toml and
    # .sweep.lock there, and `privirt report ""` its report
    from privirt.cli import main

    cfg = _write(tmp_path, 'seed = 56000005\ntrials = 1\nepsilons = [1.0]\n'
                           'mechanisms = ["gaussian"]\n[[datasets]]\nsource = "synthetic"\n'
                           'n = 50\nm = 5\n')
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(SystemExit) as exc:
        main([str(cfg) if a == "CFG" else a for a in argv])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("privirt: error: argument ") and "expected a path, got an empty " \
        "string" in err and "\n" not in err
    assert list(work.iterdir()) == []


def test_a_data_set_name_too_long_for_its_plot_file_is_refused_when_read(tmp_path, capsys):
    # a 260-character name ran the sweep; the report then failed on "[Errno 36] File name too
    # long: '.../plots/ddd….png'"
    from privirt.cli import main

    text = ('seed = 56000006\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
            '[[datasets]]\nsource = "synthetic"\nn = 50\nm = 5\nname = "NAME"\n')
    cfg = _write(tmp_path, text.replace("NAME", "d" * 201))
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privirt: error: datasets[0]: data set name 'dddddddddddddddddddd'... "
                          "is 201 bytes long (UTF-8); give it a 'name' of at most 200 bytes")
    assert "\n" not in err and not out.exists()
    with pytest.raises(ValueError, match="is 201 bytes long"):  # (bytes, not characters)
        sw.load_config(_write(tmp_path, text.replace("NAME", "é" * 100 + "d")))
    sw.load_config(_write(tmp_path, text.replace("NAME", "é" * 100)))  # 200 bytes: accepted


def test_a_data_set_name_edited_into_the_results_file_is_refused_by_the_report(tmp_path, capsys):
    # `privirt report` trusted the names read back from results.csv: "../../escaped/evil" wrote
    # its plot (and made folders) outside DIR
    from privirt.cli import main

    text = ('seed = 56000007\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
            '[[datasets]]\nsource = "synthetic"\nn = 50\nm = 5\nname = "plain"\n')
    out = tmp_path / "out"
    assert main(["sweep", str(_write(tmp_path, text)), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    results = out / "results.csv"
    results.write_text(results.read_text(encoding="utf-8").replace("plain", "../../escaped/evil"),
                       encoding="utf-8")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"privirt: error: {results}: data set name '../../escaped/evil' must be "
                          "non-empty and free of path or separator characters") and "\n" not in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


SPAWN_PROBE = '''
import os, signal, time
from pathlib import Path
from privirt.sweeps.execute import init_worker

def recording_init(bases, pooled=False):
    # SIGINT as the worker got it, before init_worker ignores it
    handler = signal.getsignal(signal.SIGINT)
    Path(os.environ["PRIVIRT_PROBE_DIR"], str(os.getpid())).write_text(
        "ignored" if handler is signal.SIG_IGN else repr(handler))
    init_worker(bases, pooled)

def slow_cell(k):
    time.sleep(0.3)  # no worker frees up before the next submit: each submit starts one
    return k
'''


def test_every_spawned_worker_starts_with_sigint_ignored(tmp_path, monkeypatch):
    # spawned workers start one per submit; only the first submit ran with SIGINT ignored, so
    # the second and third started with Python's handler and Ctrl-C during their start-up
    # printed a worker's KeyboardInterrupt traceback
    import signal

    from privirt.sweeps import runner

    (tmp_path / "spawn_probe.py").write_text(SPAWN_PROBE, encoding="utf-8")
    probes = tmp_path / "probes"
    probes.mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PRIVIRT_PROBE_DIR", str(probes))
    import spawn_probe

    monkeypatch.setattr(runner, "init_worker", spawn_probe.recording_init)
    monkeypatch.setattr(runner, "worker", spawn_probe.slow_cell)
    handler = signal.getsignal(signal.SIGINT)
    rows = runner._pool_rows([(k,) for k in range(6)], {}, jobs=3, method="spawn")
    first = next(rows)
    assert signal.getsignal(signal.SIGINT) is handler  # the parent handles Ctrl-C again
    assert sorted([first, *rows]) == list(range(6))
    seen = {p.name: p.read_text() for p in probes.iterdir()}
    assert len(seen) == 3 and set(seen.values()) == {"ignored"}, seen

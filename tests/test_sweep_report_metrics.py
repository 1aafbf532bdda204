"""Report computations on hand-made results: values left out of a mean, the reach rule on the
configured grid, ties with the target."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privirt import sweeps as sw
from privirt.sweeps.results import ResultsWriter


def _row(mech: str, eps: float | str, trial: int, value: float, status: str = "ok") -> dict:
    v = "" if status != "ok" else value
    return dict(dataset="d", source="synthetic", n=100, m=10, mechanism=mech, epsilon=eps,
                delta=1e-4, trial=trial, l2_error=v, linf_error=v, relative_l2_error=v,
                top_k=5, top_k_accuracy=v, kendall_tau=v, runtime_s=0.1, rho="",
                private=False, status=status, seed=1, cell_key=f"{mech}-{eps}-{trial}")


def _write(out: Path, rows: list[dict], epsilons: list[float] | None = None,
           trials: int = 3) -> Path:
    out.mkdir()
    with ResultsWriter(out / "results.csv") as w:
        for r in rows:
            w.write(r)
    if epsilons is not None:
        mechs = list(dict.fromkeys(r["mechanism"] for r in rows))
        cfg = {"name": "hand", "seed": 1, "report": {},
               "datasets": [{"name": "d", "epsilons": epsilons, "trials": trials,
                             "mechanisms": mechs}]}
        (out / "sweep.json").write_text(json.dumps({"config": cfg, "runs": []}))
    return out


def test_undefined_values_of_ok_cells_are_counted_and_shown(tmp_path):
    # NaN metrics of ok cells were skipped by mean() and count(): 'trials' shrank, 'failed'
    # stayed 0 and the report said nothing
    rows = [_row("gaussian", 1.0, t, v) for t, v in enumerate([0.5, math.nan, math.nan])]
    rows += [_row("gaussian", 10.0, t, 0.1) for t in range(2)]
    rows += [_row("gaussian", 10.0, 2, 0.0, status="ValueError: boom")]
    out = _write(tmp_path / "out", rows)
    summ = sw.summarize(sw.read_results(out), "relative_l2_error").set_index("epsilon")
    assert summ.loc[1.0, ["trials", "failed", "undefined"]].tolist() == [1, 0, 2]
    assert summ.loc[10.0, ["trials", "failed", "undefined"]].tolist() == [2, 1, 0]
    assert summ.loc[1.0, "mean"] == pytest.approx(0.5)
    sw.build_report(out, metric="relative_l2_error", target=0.25)
    md = (out / "report.md").read_text(encoding="utf-8")
    line = next(li for li in md.splitlines() if li.startswith("| gaussian"))
    assert line.split("|")[2].strip() == "0.5 (2 undefined)"
    assert "(1 failed)" in line.split("|")[3]
    assert '"(k undefined)": k ok cells whose value is undefined' in md


def test_a_mean_equal_to_the_target_but_for_round_off_meets_it(tmp_path):
    # mean(0.6, 0.8, 1.0) is stored as 0.7999999999999999: 'at least 0.8' was judged not met
    rows = [_row("gaussian", 1.0, t, v) for t, v in enumerate([0.6, 0.8, 1.0])]
    rows += [_row("gaussian", 10.0, t, 1.0) for t in range(3)]
    out = _write(tmp_path / "out", rows)
    summ = sw.summarize(sw.read_results(out), "top_k_accuracy")
    assert summ["mean"].iloc[0] < 0.8  # (the round-off this is about)
    reach = sw.smallest_epsilon(summ, 0.8, "top_k_accuracy")
    assert reach["epsilon"].iloc[0] == 1.0
    # errors: at most the target, tolerance relative to a large target
    err = summ.assign(mean=[2e6 * (1 + 5e-10), 1e6])
    assert sw.smallest_epsilon(err, 2e6, "l2_error")["epsilon"].iloc[0] == 1.0
    # but a real miss is still a miss
    assert sw.smallest_epsilon(summ, 0.8 + 1e-6, "top_k_accuracy")["epsilon"].iloc[0] == 10.0
    assert sw.smallest_epsilon(err, 2e6 * (1 - 1e-8), "l2_error")["epsilon"].iloc[0] == 10.0


def test_the_reach_table_checks_the_configured_grid(tmp_path):
    # an interrupted sweep: laplace has one trial at eps = 0.1 and nothing above; the reach
    # table said 'met from 0.1 on', though the rule asks for every larger eps of the grid
    grid_rows = [_row("gaussian", e, t, v) for t in range(3)
                 for e, v in ((0.1, 0.9), (1.0, 0.4), (10.0, 0.2))]
    out = _write(tmp_path / "out", grid_rows + [_row("laplace", 0.1, 0, 0.2)],
                 epsilons=[0.1, 1.0, 10.0])
    sw.build_report(out, target=0.25)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| d | 10 | — (incomplete) |" in md
    assert "(incomplete): the search stopped at an ε of the grid" in md
    summ = sw.summarize(sw.read_results(out))
    reach = sw.smallest_epsilon(summ, 0.25).set_index("mechanism")  # (no grid: the results')
    assert np.isnan(reach.loc["laplace", "epsilon"]) and reach.loc["laplace", "incomplete"]
    assert reach.loc["gaussian", "epsilon"] == 10.0 and not reach.loc["gaussian", "incomplete"]
    # a grid point no mechanism reached counts, from the configuration
    done = [r for r in grid_rows if r["epsilon"] != 10.0]
    grid = {"d": ([0.1, 1.0, 10.0], 3)}
    summ = sw.summarize(pd.DataFrame(done))
    assert sw.smallest_epsilon(summ, 0.5)["epsilon"].tolist() == [1.0]  # (results only)
    reach = sw.smallest_epsilon(summ, 0.5, grid=grid)
    assert np.isnan(reach["epsilon"].iloc[0]) and reach["incomplete"].iloc[0]
    # some trials missing at a grid point: not met there, the larger ones still count
    part = [r for r in grid_rows if not (r["epsilon"] == 1.0 and r["trial"] == 2)]
    reach = sw.smallest_epsilon(sw.summarize(pd.DataFrame(part)), 0.5, grid=grid)
    assert reach["epsilon"].iloc[0] == 10.0 and reach["incomplete"].iloc[0]
    # complete, with every cell of the largest eps failed: not met, not incomplete
    failed = [r for r in grid_rows if r["epsilon"] != 10.0]
    failed += [_row("gaussian", 10.0, t, 0.0, status="RuntimeError: x") for t in range(3)]
    reach = sw.smallest_epsilon(sw.summarize(pd.DataFrame(failed)), 0.5, grid=grid)
    assert np.isnan(reach["epsilon"].iloc[0]) and not reach["incomplete"].iloc[0]
    # complete: as before
    reach = sw.smallest_epsilon(sw.summarize(pd.DataFrame(grid_rows)), 0.5, grid=grid)
    assert reach["epsilon"].iloc[0] == 1.0 and not reach["incomplete"].iloc[0]


def test_a_configured_mechanism_without_a_cell_is_an_incomplete_row_of_the_reach_table(tmp_path):
    # an interrupted sweep whose laplace cells had not begun: the reach table had no row and no
    # column for it, and said nothing of the missing mechanism
    rows = [_row("gaussian", e, t, v) for t in range(3) for e, v in ((0.1, 0.9), (1.0, 0.2))]
    out = _write(tmp_path / "out", rows, epsilons=[0.1, 1.0])
    manifest = json.loads((out / "sweep.json").read_text())
    manifest["config"]["datasets"][0]["mechanisms"] = ["gaussian", "laplace", "spectral"]
    (out / "sweep.json").write_text(json.dumps(manifest))
    from privirt.sweeps.reach import configured_mechanisms

    assert configured_mechanisms(manifest) == {"d": ["gaussian", "laplace"]}  # (spectral is not private)
    sw.build_report(out, target=0.25)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| data set | gaussian | laplace |" in md and "| d | 1 | — (incomplete) |" in md
    reach = sw.smallest_epsilon(sw.summarize(sw.read_results(out)), 0.25,
                                mechanisms={"d": ["gaussian", "laplace"]}).set_index("mechanism")
    assert np.isnan(reach.loc["laplace", "epsilon"]) and reach.loc["laplace", "incomplete"]
    assert reach.loc["gaussian", "epsilon"] == 1.0 and not reach.loc["gaussian", "incomplete"]


def test_a_private_cell_with_fewer_trials_than_configured_says_so(tmp_path):
    # the results tables showed laplace's one trial of three at eps = 0.1 as a plain "0.2"
    rows = [_row("gaussian", e, t, v) for t in range(3) for e, v in ((0.1, 0.9), (1.0, 0.4))]
    out = _write(tmp_path / "out", rows + [_row("laplace", 0.1, 0, 0.2)], epsilons=[0.1, 1.0])
    sw.build_report(out, target=0.25)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| laplace | 0.2 (1 of 3 trials) |" in md
    assert "(3 of 3 trials)" not in md and "| gaussian | 0.9" in md


def test_a_configured_data_set_without_a_cell_has_a_reach_row_and_is_named(tmp_path):
    # an interrupted sweep that had not begun data set "e": the report said "over 1 data
    # set(s)" and its reach table had no row for "e"
    rows = [_row("gaussian", e, t, v) for t in range(3) for e, v in ((0.1, 0.9), (1.0, 0.2))]
    out = _write(tmp_path / "out", rows, epsilons=[0.1, 1.0])
    manifest = json.loads((out / "sweep.json").read_text())
    d = manifest["config"]["datasets"][0]
    d["mechanisms"] = ["spectral", "gaussian"]
    manifest["config"]["datasets"].append({**d, "name": "e", "mechanisms": ["gaussian", "laplace"]})
    (out / "sweep.json").write_text(json.dumps(manifest))
    sw.build_report(out, target=0.25)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| data set | gaussian | laplace |" in md
    assert "| d | 1 |  |" in md and "| e | — (incomplete) | — (incomplete) |" in md
    assert "Configured but not started yet: data set(s) e (no cells;" in md
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Configured but not started yet: data set(s) e" in html
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["d.png"]


def test_a_real_data_set_with_only_the_non_private_reference_is_not_called_waiting(tmp_path):
    # a results folder made before such a data set was refused (real data, mechanisms
    # ["spectral"]: no cell by design) was reported as "not started yet" with "--resume runs them",
    # which the configuration check now refuses
    rows = [_row("gaussian", e, t, v) for t in range(3) for e, v in ((0.1, 0.9), (1.0, 0.2))]
    out = _write(tmp_path / "out", rows, epsilons=[0.1, 1.0])
    manifest = json.loads((out / "sweep.json").read_text())
    d = manifest["config"]["datasets"][0]
    manifest["config"]["datasets"].append({**d, "name": "real", "source": "bundled", "dataset": "lsat6",
                                           "mechanisms": ["spectral"]})
    manifest["config"]["datasets"].append({**d, "name": "e", "mechanisms": ["gaussian"]})
    (out / "sweep.json").write_text(json.dumps(manifest))
    sw.build_report(out, target=0.25)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "Configured but not started yet: data set(s) e (no cells;" in md
    assert "| real |" not in md and "real (no cells" not in md


def test_the_figure_s_legend_keeps_a_mechanism_without_values_and_reads_every_panel(tmp_path):
    # laplace's cells all failed: the figure dropped it silently while the table said
    # "— (2 failed)"; rr's relative errors are undefined (values in the other panels only): the
    # legend, read from the first panel alone, left it out too
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from privirt.sweeps.report import _plot_metrics, plot_dataset

    rows = [_row("gaussian", e, t, v) for t in range(2) for e, v in ((0.1, 0.9), (1.0, 0.2))]
    rows += [_row("laplace", e, t, 0.0, status="ValueError: boom") for t in range(2)
             for e in (0.1, 1.0)]
    rows += [{**_row("rr", e, t, 0.5), "relative_l2_error": ""} for t in range(2)
             for e in (0.1, 1.0)]
    out = _write(tmp_path / "out", rows)
    fig = plot_dataset(sw.read_results(out), "d", metrics=_plot_metrics("relative_l2_error"))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    plt.close(fig)
    assert labels == ["gaussian", "rr", "laplace (no results: 4 failed)"]



@pytest.mark.parametrize("fails", ["report.md", "d.png"])
def test_a_report_file_that_cannot_be_written_is_named(tmp_path, monkeypatch, capsys, fails):
    # a full disk gave `privirt report` a bare "[Errno 28] No space left on device"
    import errno
    import os
    import types

    from matplotlib.figure import Figure

    import privirt._files
    from privirt.cli import main

    out = _write(tmp_path / "out", [_row("gaussian", 1.0, t, 0.5) for t in range(2)])

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if fails == "report.md":  # the disk fills up when report.md is written
        disk = types.SimpleNamespace(**{name: getattr(os, name) for name in dir(os) if not name.startswith("__")})
        disk.fsync = full
        monkeypatch.setattr(privirt._files, "os", disk)
    else:
        monkeypatch.setattr(Figure, "savefig", full)
    assert main(["report", str(out)]) != 0
    err = capsys.readouterr().err.strip()
    path = out / "plots" / "d.png" if fails == "d.png" else out / "report.md"
    assert err.startswith(f"privirt: error: could not write {path} ({os.strerror(errno.ENOSPC)}); free some space")
    assert "\n" not in err and not path.exists()

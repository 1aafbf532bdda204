"""Sweeps too large to run: a data set beyond memory, a grid of too many cells, and a run
that fails before its first cell, each leaving the output folder as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from privirt import sweeps as sw
from privirt.sweeps import config as sweep_config


def _write(tmp_path: Path, text: str, name: str = "cfg.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


BIG = ('seed = 95100006\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
       '[[datasets]]\nsource = "synthetic"\nn = 1000000\nm = 1000000\n')


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_synthetic_data_set_beyond_memory_is_refused_before_anything_is_written(tmp_path, capsys,
                                                                                  jobs):
    # its first cell's simulation failed with MemoryError after the lock file, sweep.json
    # (the run marked interrupted) and config.toml were written: they stayed, with no cell run
    from privirt.cli import main

    cfg = _write(tmp_path, BIG)
    out = tmp_path / "newdir" / "a" / "b"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", jobs, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("privirt: error: data set 'synthetic_n1000000_m1000000'")
    assert "lower n or m" in err
    assert not (tmp_path / "newdir").exists()


def test_the_memory_check_compares_the_response_matrix_with_the_memory_available(tmp_path,
                                                                                  monkeypatch):
    from privirt import _checks

    cfg = _write(tmp_path, BIG.replace("1000000", "100"))  # 100 x 100: 80 000 bytes
    monkeypatch.setattr(_checks, "available_memory", lambda: 79_999.0)
    with pytest.raises(ValueError, match=r"100 × 100 .* lower n or m"):
        sw.run_sweep(cfg, tmp_path / "out", jobs=1, progress=False)
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr(_checks, "available_memory", lambda: 80_000.0)
    assert sw.run_sweep(cfg, tmp_path / "out", jobs=1, progress=False).computed == 1


SMALL = ('seed = 95100007\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["gaussian"]\n'
         '[[datasets]]\nsource = "synthetic"\nn = 40\nm = 4\n')


@pytest.mark.parametrize("raised", [MemoryError, KeyboardInterrupt])
def test_a_fresh_run_that_fails_before_its_first_row_leaves_the_folder_as_it_was(tmp_path, monkeypatch,
                                                                                raised):
    from privirt.sweeps import runner

    def failing(*args):
        raise raised("no cell today")

    monkeypatch.setattr(runner, "worker", failing)
    cfg = _write(tmp_path, SMALL)
    out = tmp_path / "new" / "out"
    with pytest.raises(raised):
        sw.run_sweep(cfg, out, jobs=1, progress=False)
    assert not (tmp_path / "new").exists()
    mine = tmp_path / "mine"  # a folder that existed keeps what it held, and nothing else
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(raised):
        sw.run_sweep(cfg, mine, jobs=1, progress=False)
    assert _files(mine) == {"notes.txt": b"mine\n"}


def test_a_resumed_run_that_fails_before_its_first_row_keeps_the_earlier_rows(tmp_path, monkeypatch):
    from privirt.sweeps import runner

    out = tmp_path / "out"
    sw.run_sweep(_write(tmp_path, SMALL), out, jobs=1, progress=False)
    before = _files(out)
    assert "results.csv" in before and "sweep.json" in before

    def failing(*args):
        raise MemoryError("no cell today")

    monkeypatch.setattr(runner, "worker", failing)
    more = _write(tmp_path, SMALL.replace("trials = 1", "trials = 3"), name="more.toml")
    with pytest.raises(MemoryError):
        sw.run_sweep(more, out, jobs=1, resume=True, progress=False)
    assert _files(out) == before


def test_a_run_that_fails_after_a_row_keeps_it(tmp_path, monkeypatch):
    from privirt.sweeps import runner

    real, calls = runner.worker, []

    def second_fails(*args):
        calls.append(1)
        if len(calls) == 2:
            raise MemoryError("no second cell")
        return real(*args)

    monkeypatch.setattr(runner, "worker", second_fails)
    out = tmp_path / "out"
    with pytest.raises(MemoryError):
        sw.run_sweep(_write(tmp_path, SMALL.replace("trials = 1", "trials = 2")), out, jobs=1,
                     progress=False)
    assert has_one_row(out / "results.csv")
    assert '"interrupted": true' in (out / "sweep.json").read_text(encoding="utf-8")


def has_one_row(path: Path) -> bool:
    return len(sw.read_results(path.parent)) == 1


@pytest.mark.parametrize("grid", [
    "trials = 1000000000000\nepsilons = [1.0]\nmechanisms = [\"gaussian\"]\n",
    # (each factor allowed, their product not)
    "trials = 1000\nepsilons = {start = 0.1, stop = 10.0, num = 1001}\nmechanisms = [\"gaussian\"]\n",
])
def test_a_grid_of_too_many_cells_is_refused_in_one_line_before_the_folder_is_made(tmp_path, capsys,
                                                                                  grid):
    # trials had no upper bound: the run made its folder and lock file, then built the cell
    # list in memory for minutes without a word
    from privirt.cli import main

    cfg = _write(tmp_path, "seed = 1\n" + grid + '[[datasets]]\nsource = "synthetic"\nn = 20\nm = 4\n')
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("privirt: error: the grid has ")
    assert f"more than the {sweep_config.MAX_CELLS:,}" in err and "lower trials" in err
    assert not out.exists()


def test_a_grid_at_the_bound_is_accepted_and_its_cells_are_counted_as_the_grid_makes_them(monkeypatch):
    from privirt.sweeps.grid import expand_grid

    raw = {"seed": 1, "trials": 3, "epsilons": [1.0, 2.0], "mechanisms": ["spectral", "gaussian"],
           "datasets": [{"source": "synthetic", "n": 20, "m": 4},
                        {"source": "bundled", "dataset": "lsat6", "trials": 2}]}
    cells = len(expand_grid(sweep_config.parse_config(raw)))  # 3 x (1 + 2) + 2 x 2 (no spectral)
    monkeypatch.setattr(sweep_config, "MAX_CELLS", cells)
    sweep_config.parse_config(raw)
    monkeypatch.setattr(sweep_config, "MAX_CELLS", cells - 1)
    with pytest.raises(ValueError, match=f"the grid has {cells} cells"):
        sweep_config.parse_config(raw)

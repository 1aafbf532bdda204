"""Sweep configurations whose grid would lose entries: repeated mechanisms or ε, and real-data
sets left with no cells; each is refused in one line before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from privirt import sweeps as sw

_SYNTH = '[[datasets]]\nsource = "synthetic"\nn = 50\nm = 5\n'
_LSAT = '[[datasets]]\nsource = "bundled"\ndataset = "lsat6"\n'


def _run(tmp_path: Path, text: str, capsys) -> str:
    """Run ``privirt sweep`` on ``text``; assert it is refused, and return its one line."""
    from privirt.cli import main

    cfg = tmp_path / "cfg.toml"
    cfg.write_text("seed = 1\ntrials = 1\n" + text, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--jobs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert not out.exists()
    return err


@pytest.mark.parametrize("where", ["top", "dataset"])
def test_a_repeated_mechanism_is_refused_in_one_line(tmp_path, capsys, where):
    # mechanisms = ["gaussian", "gaussian"] ran one set of cells and exited 0
    line = 'mechanisms = ["gaussian", "laplace", "gaussian"]\n'
    text = ("epsilons = [1.0]\n" + line + _SYNTH) if where == "top" else \
        ("epsilons = [1.0]\n" + _SYNTH + line)
    err = _run(tmp_path, text, capsys)
    assert "mechanism 'gaussian' is listed twice" in err and "name each mechanism once" in err
    assert err.startswith("privirt: error: " + ("mechanisms" if where == "top" else
                                                "datasets[0].mechanisms"))


@pytest.mark.parametrize("eps, pair", [("[1.0, 2.0, 1.0]", "1.0 and 1.0"),
                                       ("[1, 1.0000001, 3.0]", "1.0 and 1.0000001")])
def test_epsilons_that_coincide_at_the_keys_rounding_are_refused_naming_both(
        tmp_path, capsys, eps, pair):
    # eps = [1.0, 1.0, 1.0000001]: rounded to 6 significant digits, three entries made one cell
    err = _run(tmp_path, f'mechanisms = ["gaussian"]\nepsilons = {eps}\n' + _SYNTH, capsys)
    assert f"ε = {pair} coincide at 6 significant digits" in err and "(both 1)" in err
    # values distinct at 6 digits are still one cell each
    cfg = sw.parse_config({"epsilons": [1.0, 1.00001, 2.0], "mechanisms": ["gaussian"],
                           "datasets": [{"source": "synthetic", "n": 50, "m": 5}]})
    assert cfg.datasets[0].epsilons == (1.0, 1.00001, 2.0)


def test_a_range_of_epsilons_that_collapses_is_refused_and_a_usual_one_is_not(tmp_path, capsys):
    err = _run(tmp_path, 'mechanisms = ["gaussian"]\nepsilons = {start = 1.0, stop = 1.000001, '
                         'num = 4}\n' + _SYNTH, capsys)
    assert err.startswith("privirt: error: epsilons = {start = 1.0, stop = 1.000001, num = 4} "
                          "gives ε that coincide at 6 significant digits") and "lower num" in err
    cfg = sw.parse_config({"epsilons": {"start": 0.01, "stop": 10.0, "num": 40},
                           "datasets": [{"source": "synthetic", "n": 50, "m": 5}]})
    assert len(cfg.datasets[0].epsilons) == 40


def test_a_real_data_set_with_only_spectral_is_refused_beside_others(tmp_path, capsys):
    # it got no cells (spectral is the reference on real data) and was dropped from the sweep
    # without a word, because the synthetic data set had cells
    err = _run(tmp_path, 'mechanisms = ["spectral"]\nepsilons = [1.0]\n' + _SYNTH + _LSAT,
               capsys)
    assert err.startswith("privirt: error: data set(s) 'lsat6' define no cells: on real data "
                          "(lsat6) the non-private 'spectral' estimate is the reference")
    assert "add another mechanism" in err and "synthetic_n50_m5" not in err
    # with its own mechanisms it has cells
    sw.parse_config({"mechanisms": ["spectral"], "datasets": [
        {"source": "synthetic", "n": 50, "m": 5},
        {"source": "bundled", "dataset": "lsat6", "mechanisms": ["spectral", "gaussian"]}]})

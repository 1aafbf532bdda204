"""``privirt estimate``: ``--method``, ``--model`` and ``--n-boot`` agree with the registry of
private methods (:mod:`privirt.private.methods`) and with the methods' own defaults."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import types
import warnings

import pytest

import privirt
from privirt.cli import build_parser, main
from privirt.exceptions import NoiseDominatesWarning
from privirt.private import methods


@pytest.fixture
def lsat_csv(tmp_path):
    path = tmp_path / "lsat6.csv"
    privirt.load_dataset("lsat6").to_csv(path)
    return str(path)


def _estimate_action(dest: str) -> argparse.Action:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in sub.choices["estimate"]._actions if a.dest == dest)


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    return lines[0]


def test_the_n_boot_help_states_each_methods_own_default():
    # it said "default 200": spectral's default falls beyond 1000 items, randomized response has none
    from privirt.private.counts.intervals import default_n_boot

    text = " ".join(_estimate_action("n_boot").help.split())
    found = re.search(r"default: the method's own — (\d+) for totals and --model 2pl, for spectral (\d+) up to "
                      r"(\d+) items, then fewer \(at least (\d+)\), none under randomized response", text)
    assert found, text
    both, spectral, up_to, least = map(int, found.groups())
    for name in ("totals", "twopl"):
        assert inspect.signature(methods.get(name).estimate).parameters["n_boot"].default == both
    assert default_n_boot(1) == default_n_boot(up_to) == spectral > default_n_boot(up_to + 1)
    assert default_n_boot(10**6) == least
    X = privirt.load_dataset("lsat6").to_numpy()[:200]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)  # (a small data set: the noise dominates)
        rr = methods.get("spectral").estimate(X, epsilon=1.0, mechanism="randomized_response", seed=1)
    assert rr.info["n_boot"] == 0 and rr.se is None


def test_method_twopl_points_to_model_2pl_in_one_line(lsat_csv, capsys):
    with pytest.raises(SystemExit) as exit_:  # a usage error: argparse's one line, exit 2
        main(["estimate", lsat_csv, "--epsilon", "1", "--method", "twopl"])
    assert exit_.value.code == 2
    line = _one_error_line(capsys)
    assert "--method" in line and "give --model 2pl" in line and "invalid choice" not in line


def test_no_private_version_names_the_2pl_too(lsat_csv, capsys):
    assert main(["estimate", lsat_csv, "--epsilon", "1", "--method", "cmle"]) == 2
    line = _one_error_line(capsys)
    assert "no private version" in line and "--model 2pl" in line


def test_model_choices_come_from_the_registry(monkeypatch, lsat_csv, capsys):
    # (checked when the command line is parsed: building the parser imports no numpy, pandas or scipy)
    check = _estimate_action("model").type
    assert [check("rasch"), check("2pl")] == ["rasch", "2pl"]
    with pytest.raises(argparse.ArgumentTypeError, match=r"invalid choice: '3pl' \(choose from 'rasch', '2pl'\)"):
        check("3pl")
    fake = dataclasses.replace(methods.get("twopl"), name="threepl", model="3pl")
    monkeypatch.setitem(methods.METHODS, "threepl", fake)
    assert check("3pl") == "3pl"
    monkeypatch.delitem(methods.METHODS, "threepl")
    with pytest.raises(SystemExit) as exit_:  # a usage error: argparse's one line, exit 2
        main(["estimate", lsat_csv, "--model", "3pl", "--epsilon", "1"])
    assert exit_.value.code == 2 and "argument --model: invalid choice: '3pl'" in _one_error_line(capsys)


def test_model_2pl_runs_the_registrys_method(lsat_csv, capsys, monkeypatch):
    # it imported private_2pl_estimate itself: a method registered in its place was not used
    seen = {}

    def estimate(resp, **kw):
        seen.update(kw)
        raise ValueError("the registry's 2PL method was called")

    module = types.SimpleNamespace(private_2pl_estimate=estimate)
    monkeypatch.setitem(methods.METHODS, "twopl", dataclasses.replace(methods.get("twopl"), load=lambda: module))
    args = ["estimate", lsat_csv, "--model", "2pl", "--epsilon", "1", "--seed", "3",
            "--n-boot", "0"]
    assert main(args) == 2
    assert "the registry's 2PL method was called" in _one_error_line(capsys)
    assert seen["epsilon"] == 1.0 and seen["seed"] == 3 and seen["n_boot"] == 0

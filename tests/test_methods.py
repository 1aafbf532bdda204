"""The one list of private methods (privirt.private.methods) and who reads it."""

from __future__ import annotations

import inspect
import typing

import pytest

from privirt.cli import main
from privirt.private import choose, methods
from privirt.sweeps import registry


def test_the_registered_methods():
    assert methods.names() == ("spectral", "totals")
    assert choose.PRIVATE_METHODS == methods.names()
    with pytest.raises(ValueError, match="unknown private method 'nope'; known: spectral, totals"):
        methods.get("nope")


@pytest.mark.parametrize("name", methods.names(None))  # every model's methods (the 2PL's lacked engine=)
def test_an_entry_describes_its_callables(name):
    """Options, domain and device agree with the signatures they describe (no drift)."""
    entry = methods.get(name)
    params = inspect.signature(entry.estimate).parameters
    for option in entry.options | methods.COMMON_OPTIONS:
        assert option in params, (name, option)
    assert ("missing" in params) == bool(entry.missing)
    assert ("device" in params) == entry.takes_device
    assert callable(entry.release) and callable(entry.from_release)
    if "mechanism" in params:
        choices = typing.get_args(getattr(entry.load(), params["mechanism"].annotation))
        assert set(choices) == set(entry.mechanisms), (choices, entry.mechanisms)


def test_the_sweeps_run_every_method_under_its_names():
    for entry in methods.METHODS.values():
        for variant in entry.sweeps:
            sweep = registry.get(variant.name)
            assert sweep.private and sweep.function is entry.estimate
            assert dict(sweep.fixed) == dict(variant.fixed)
            own = entry.sweep_options if variant.options is None else variant.options
            assert sweep.option_keys == frozenset(own)


@pytest.mark.parametrize("name", ["rr", "rr_shuffle", "rr_debiased", "rr_shuffle_debiased"])
def test_a_sweep_refuses_a_sensitivity_for_randomized_response(name):
    # [mechanism_options.rr] sensitivity = "paper" was accepted (it changed the cells' keys)
    # and changed nothing: randomized response has no sensitivity to choose
    from privirt.sweeps.config import parse_config

    def config(mech, **opts):
        return parse_config({"mechanisms": [mech], "epsilons": [1.0], "trials": 1,
                             "mechanism_options": {mech: opts},
                             "datasets": [{"source": "synthetic", "n": 50, "m": 5}]})

    with pytest.raises(ValueError, match=rf"unknown key\(s\) \['sensitivity'\] in "
                                         rf"mechanism_options\.{name}; allowed: \['p0'\]"):
        config(name, sensitivity="paper")
    assert config(name, p0=0.5).mechanism_options == {name: {"p0": 0.5}}
    config("gaussian", sensitivity="paper")  # (the Gaussian and Laplace names keep it)


def test_the_default_chooser_returns_registered_methods():
    for n in (100, 5000):
        for m in (5, 50):
            for missing in methods.DOMAINS:
                assert choose.default_private_method(n, m, 1.0, 1e-5, missing) in methods.METHODS


def test_register_refuses_bad_entries(monkeypatch):
    monkeypatch.setattr(methods, "METHODS", dict(methods.METHODS))
    with pytest.raises(ValueError, match="already registered"):
        methods.register("totals", methods._totals, estimate="private_totals_estimate")
    with pytest.raises(ValueError, match="common to every method"):
        methods.register("x", methods._totals, estimate="e", options=("epsilon",))
    with pytest.raises(ValueError, match="unknown input domain"):
        methods.register("x", methods._totals, estimate="e", missing=("mnar",))
    with pytest.raises(ValueError, match="identifier"):
        methods.register("x y", methods._totals, estimate="e")


def test_a_model_other_than_rasch_takes_one_method(monkeypatch):
    # a second 2PL method was taken, and `--model 2pl` then failed with 'too many values to unpack'
    monkeypatch.setattr(methods, "METHODS", dict(methods.METHODS))
    with pytest.raises(ValueError, match="the 2pl model has its private method already, 'twopl'"):
        methods.register("twopl_alt", methods._totals, estimate="private_2pl_estimate", model="2pl")
    assert "twopl_alt" not in methods.METHODS
    methods.register("another_rasch", methods._totals, estimate="private_totals_estimate")  # Rasch: several
    methods.register("threepl", methods._totals, estimate="e", model="3pl")  # a new model: its first


def test_one_entry_adds_a_method_to_the_command_line(monkeypatch, tmp_path, capsys):
    """A new entry is a --method choice and runs through the generic private path."""
    from privirt.data.datasets import dataset_path

    monkeypatch.setattr(methods, "METHODS", dict(methods.METHODS))
    methods.register("toy", methods._totals, estimate="private_totals_estimate",
                     options=("n_boot",), missing=("none", "mcar"), intervals=True)
    path = str(dataset_path("lsat6"))
    args = ["estimate", path, "--weights-col", "frequency", "--epsilon", "2", "--seed", "1"]
    assert main([*args, "--method", "toy"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("toy estimate (seeded noise: NOT private)") and "NOT private" in out
    assert main([*args, "--method", "toy", "--mechanism", "laplace"]) == 2
    assert "--mechanism applies to --method spectral" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*args, "--method", "nope"])
    assert exc.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_the_service_offers_registered_methods_only():
    """The service's methods and release kinds are names of the one list (its models agree)."""
    import typing

    pytest.importorskip("fastapi")
    from privirt.private import methods
    from privirt.serve import models, service

    assert set(service.SERVED_METHODS) <= set(methods.names())
    assert set(service.SERVED_RELEASES.values()) <= set(methods.names())
    for name in service.SERVED_RELEASES.values():
        assert methods.get(name).release is not None
    offered = typing.get_args(models.EstimateRequest.model_fields["method"].annotation)
    kinds = typing.get_args(models.ReleaseRequest.model_fields["kind"].annotation)
    assert set(offered) == set(service.SERVED_METHODS) and set(kinds) == set(service.SERVED_RELEASES)


def test_the_private_2pl_refuses_the_dask_engine_in_one_line(tmp_path):
    """A DaskSource reached release_2pl's Responses-only code: AttributeError 'has_missing'."""
    import numpy as np

    import privirt
    from privirt.private.ledger import Ledger

    X = (np.random.default_rng(310_050).random((50, 4)) < 0.5).astype(float)
    ledger = Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-3)
    for call in (privirt.release_2pl, privirt.private_2pl_estimate):
        with pytest.raises(ValueError, match=r"runs on data in memory \(engine='local'\).*nothing was spent"):
            call(X, epsilon=1.0, ledger=ledger, engine="dask")
        with pytest.raises(ValueError, match="engine must be 'local'"):
            call(X, epsilon=1.0, ledger=ledger, client=object())
    fake = type("DaskSource", (), {})()
    with pytest.raises(ValueError, match="runs on data in memory"):
        privirt.release_2pl(fake, epsilon=1.0, ledger=ledger)
    assert len(ledger.spends()) == 0
    fit = methods.get("twopl").estimate(X, epsilon=1.0, seed=310_051, engine="local", n_boot=0)
    assert len(fit.a) == 4


def test_a_sweep_runs_totals_and_twopl_on_data_with_missing_cells(tmp_path):
    # their estimators ask for missing="mcar" on such data, which [mechanism_options] refused
    # ("unknown key(s) ['missing'] ... allowed: ['n_boot']"): they could not run there at all
    from privirt import sweeps as sw
    from privirt.sweeps.config import parse_config

    def config(**opts):
        return parse_config({"seed": 56_000_007, "mechanisms": ["totals", "twopl"],
                             "epsilons": [4.0], "trials": 1, "device": "cpu",
                             "mechanism_options": {"totals": opts, "twopl": opts},
                             "datasets": [{"source": "synthetic", "n": 300, "m": 5,
                                           "p_observed": 0.8}]})

    stats = sw.run_sweep(config(missing="mcar"), tmp_path / "mcar", jobs=1, progress=False)
    assert (stats.computed, stats.failed) == (2, 0)
    stats = sw.run_sweep(config(), tmp_path / "none", jobs=1, progress=False)
    assert stats.failed == 2 and all('missing="mcar"' in text for text, _ in stats.errors)

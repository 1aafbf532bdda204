"""``privirt estimate``: ``--method``, ``--model`` and ``--n-boot`` agree with the registry of
private methods (:mod:`privirt.private.methods`) and with the methods' own defaults."""

from __future__ import annotations

import argparse
import inspect
import re
import warnings

import privirt
from privirt.cli import build_parser
from privirt.exceptions import NoiseDominatesWarning
from privirt.private import methods


def _estimate_action(dest: str) -> argparse.Action:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in sub.choices["estimate"]._actions if a.dest == dest)


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

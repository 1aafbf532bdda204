"""A statement prints its privacy parameters rounded up, never below the values claimed:
randomized response's per-bit ε₀ (the ``mechanism:`` line) and its user-level local ε = m·ε₀
(a note) were printed to nearest with ``:.6g`` (0.6421960104 as 0.642196), and so were the
samplers' TV terms added to δ."""

from __future__ import annotations

import re

import mechanisms
import numpy as np
import pytest
from mechanisms.measures import ApproxDP

import privirt
from privirt.private.measurements import ResponsesRR


@pytest.mark.parametrize("n", [2000, 3000, 10000])  # each printed a value below the true one
def test_rr_epsilon0_and_local_epsilon_are_printed_rounded_up(n):
    meas = ResponsesRR.calibrate(ApproxDP(4.0, 1e-4), n_items=8, n_persons=n, shuffle=True)
    text = str(meas.statement(private=True, p0=1.0, n_edges=28, n_persons=n, spend_id=None))
    eps0, local = meas.noise_value, meas.map(8).epsilon
    shown_e0 = float(re.search(r"^mechanism: randomized response, epsilon0 = (\S+)$", text, re.M).group(1))
    note = re.search(r"per-bit ε₀ = (\S+); user-level local ε = m·ε₀ = (\S+) ", text)
    assert shown_e0 >= eps0 and float(note.group(1)) >= eps0 and float(note.group(2)) >= local
    assert shown_e0 == float(note.group(1)) == pytest.approx(eps0, rel=1e-5)  # one value, one text
    assert float(note.group(2)) == pytest.approx(local, rel=1e-5)


@pytest.mark.parametrize("mech", ["DiscreteGaussian", "DiscreteLaplace"])
def test_sampler_tv_term_in_the_notes_is_rounded_up(monkeypatch, mech):
    X = (np.random.default_rng(23_000_001).random((100, 5)) < 0.5).astype(int)
    monkeypatch.setattr(getattr(mechanisms, mech), "tv_bound", 1.0001e-8, raising=False)
    kind = "gaussian" if mech == "DiscreteGaussian" else "laplace"
    st = privirt.release_counts(X, epsilon=1.0, delta=1e-5, mechanism=kind, seed=0).privacy
    shown = re.search(r"(?:= (\S+) added to δ|TV term (\S+)\))", "\n".join(st.notes))
    assert st.cost.delta > 0 and float(shown.group(1) or shown.group(2)) >= st.cost.delta

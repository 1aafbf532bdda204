"""A release of several noisy parts (totals, private 2PL) states each part's σ, L2 sensitivity and
ρ = Δ₂²/(2σ²), which add up to the stated ρ; its headline printed one part's σ and the joint L2,
which did not give the stated ρ."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

import privirt

_PART = re.compile(r"^part: (.+), sigma = (\S+), sensitivity L2 = (\S+), rho = (\S+)$", re.M)


@pytest.mark.parametrize("release, n_parts", [
    (lambda X: privirt.release_totals(X, epsilon=0.5, delta=1e-6, seed=2_600_001), 2),
    (lambda X: privirt.release_totals(X, epsilon=0.5, delta=1e-6, missing="mcar", seed=2_600_002), 3),
    (lambda X: privirt.release_2pl(X, epsilon=0.5, delta=1e-6, seed=2_600_003), 2),
])
def test_each_parts_sigma_and_sensitivity_give_its_rho_and_the_rhos_add_up(release, n_parts):
    st = release(privirt.load_dataset("lsat6")).privacy
    assert len(st.parts) == n_parts
    for q in st.parts:
        exact = Fraction(q.sensitivity_l2) ** 2 / (2 * Fraction(q.sigma) ** 2)
        assert Fraction(q.rho) >= exact  # rounded up, never below
        assert q.rho == pytest.approx(q.sensitivity_l2**2 / (2 * q.sigma**2), rel=1e-9)
    assert sum(q.rho for q in st.parts) == pytest.approx(st.rho, rel=1e-12)
    text = str(st)
    shown = _PART.findall(text)
    assert [s[0] for s in shown] == [q.name for q in st.parts]
    for _, sigma, l2, rho in shown:  # what a reader checks from the printed numbers
        assert float(rho) == pytest.approx(float(l2) ** 2 / (2 * float(sigma) ** 2), rel=1e-4)
    total = float(re.search(r"^zCDP: rho = (\S+) \(the sum of the parts' rho\)$", text, re.M).group(1))
    assert total >= st.rho and total == pytest.approx(sum(float(s[3]) for s in shown), rel=1e-5)
    # no single headline sigma; the joint L2 is labelled as such
    assert not re.search(r"^mechanism: .*, sigma = ", text, re.M)
    assert "\nsensitivity of all parts together: L1 = " in text
    d = st.to_dict()
    assert [p["sigma"] for p in d["parts"]] == [q.sigma for q in st.parts]
    assert [p["rho"] for p in d["parts"]] == [q.rho for q in st.parts]


def test_a_single_part_statement_is_unchanged():
    st = privirt.release_counts(privirt.load_dataset("lsat6"), epsilon=0.5, delta=1e-6, seed=2_600_004).privacy
    assert st.parts == () and st.to_dict()["parts"] == []
    text = str(st)
    assert f"\nmechanism: discrete Gaussian, sigma = {st.noise_value:.6g}\n" in text
    assert "\nsensitivity: L1 = " in text and "part:" not in text and "sum of the parts" not in text


def test_the_client_rebuilds_the_parts_from_the_services_answer():
    import dataclasses

    from privirt.client import _statement

    st = privirt.release_totals(privirt.load_dataset("lsat6"), epsilon=0.5, delta=1e-6, seed=2_600_005).privacy
    d = st.to_dict()
    d["native"] = {"measure": "ZCDP", **dataclasses.asdict(st.native)}
    d["sensitivity_n_released"] = st.sensitivity.n_released
    assert str(_statement(d)) == str(st) and _statement(d).parts == st.parts

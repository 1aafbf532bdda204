"""A release of several noisy parts (totals, private 2PL) states each part's σ, L2 sensitivity and
ρ = Δ₂²/(2σ²), which add up to the stated ρ; its headline printed one part's σ and the joint L2,
which did not give the stated ρ."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

import privirt

_PART = re.compile(r"^part: (.+), sigma = (\S+), sensitivity L2 = (\S+), rho = (\S+)$", re.M)


def _mcar_2pl(X):
    return privirt.release_2pl(X, epsilon=0.5, delta=1e-6, missing="mcar", seed=2_600_006)


@pytest.mark.parametrize("release, n_parts", [
    (lambda X: privirt.release_totals(X, epsilon=0.5, delta=1e-6, seed=2_600_001), 2),
    (lambda X: privirt.release_totals(X, epsilon=0.5, delta=1e-6, missing="mcar", seed=2_600_002), 3),
    (lambda X: privirt.release_2pl(X, epsilon=0.5, delta=1e-6, seed=2_600_003), 2),
    (_mcar_2pl, 4),
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
    for (_, sigma, l2, rho), q in zip(shown, st.parts):  # what a reader checks from the printed numbers
        assert float(rho) == pytest.approx(float(l2) ** 2 / (2 * float(sigma) ** 2), rel=1e-4)
        # the printed sensitivity is never below the proven one (√7 printed 2.64575 < 2.6457513)
        assert Fraction(l2) >= Fraction(q.sensitivity_l2)
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


def test_the_mcar_2pl_statement_names_its_four_parts_with_their_own_sigma_and_sensitivity(tmp_path, capsys):
    """The MCAR 2PL release inherited the complete-data release's two part names, and the
    statement zipped them with its four parts: it listed two parts (the second, labelled
    'disagreement counts', with the answered counts' σ) whose ρ did not add up to the stated ρ."""
    from privirt.cli import main

    X = privirt.load_dataset("lsat6")
    rel = _mcar_2pl(X)
    st, m = rel.privacy, X.shape[1]
    # the release's own σ and the proven sensitivities (m, m, ⌊m²/3⌋, m(m − 1)/2), in order
    sigmas = [rel.sigma_totals, rel.sigma_answered, rel.sigma_pairs, rel.sigma_co_answered]
    l2sq = [m, m, m * m // 3, m * (m - 1) // 2]
    names = ["item totals", "answered counts", "disagreements among the co-answered D_ij", "co-answered counts C_ij"]
    assert [q.name for q in st.parts] == names
    assert [q.sigma for q in st.parts] == sigmas
    assert [q.sensitivity_l2**2 for q in st.parts] == pytest.approx(l2sq, rel=1e-12)
    assert sum(q.rho for q in st.parts) == pytest.approx(st.rho, rel=1e-12)
    d = st.to_dict()
    assert [p["name"] for p in d["parts"]] == names
    assert sum(p["rho"] for p in d["parts"]) == pytest.approx(d["rho"], rel=1e-12)
    # the CLI's text and the # header of its --out CSV
    path, out = tmp_path / "x.csv", tmp_path / "fit.csv"
    X.to_csv(path, index=False)
    assert main(["estimate", str(path), "--model", "2pl", "--missing", "mcar", "--epsilon", "0.5",
                 "--delta", "1e-6", "--seed", "2600006", "--n-boot", "0", "--out", str(out)]) == 0
    header = "\n".join(line[2:] for line in out.read_text().splitlines() if line.startswith("# "))
    for text in (capsys.readouterr().out, header):
        shown = _PART.findall(text)
        assert [s[0] for s in shown] == names
        assert [float(s[1]) for s in shown] == pytest.approx(sigmas, rel=1e-5)
        total = float(re.search(r"^zCDP: rho = (\S+) \(the sum of the parts' rho\)$", text, re.M).group(1))
        assert total == pytest.approx(sum(float(s[3]) for s in shown), rel=1e-5)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_multi_part_measurement_names_each_of_its_parts():
    """Every release of several noisy parts names each part (a missing name once dropped parts
    from the statement silently), and a mismatch raises instead of shortening the statement."""
    from mechanisms.measures import ApproxDP

    from privirt.private.measurements import PartsGaussian, TotalsGaussian
    from privirt.private.twopl.mcar import McarPairsGaussian
    from privirt.private.twopl.measurement import PairsGaussian

    target = ApproxDP(1.0, 1e-6)
    made = {
        TotalsGaussian: [TotalsGaussian.calibrate(target, n_persons=500, n_items=6, missing=mi)
                         for mi in ("none", "mcar")],
        PairsGaussian: [PairsGaussian.calibrate(target, n_items=m) for m in (2, 6)],
        McarPairsGaussian: [McarPairsGaussian.calibrate(target, n_items=m) for m in (2, 6)],
    }
    assert set(_subclasses(PartsGaussian)) == set(made)  # a new kind of release: add it here
    for meas in (x for ms in made.values() for x in ms):
        k = len(meas.parts)
        assert k >= 2 and len(meas.part_names) == k and len(meas.sigmas) == k and len(meas._part_sens) == k
        assert len(set(meas.part_names)) == k
        assert len(meas._noise_parts()) == k
    broken = made[McarPairsGaussian][1]
    broken.part_names = broken.part_names[:2]
    with pytest.raises(ValueError):
        broken._noise_parts()

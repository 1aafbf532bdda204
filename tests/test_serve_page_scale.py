"""The curator page at many spends: its plots compose a bounded number of points (each a zCDP
→ (ε, δ) conversion), and on a small state it shows the same figures as before (computed here
from the spends with the library's composition rule)."""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pytest

H, T, B = 190, 10, 38  # the plot's height and margins (privirt/serve/page.py: _plot)


def _conversions(monkeypatch) -> list[int]:
    """Count the zCDP → (ε, δ) conversions of the composed totals from now on."""
    from privirt.private import _sums

    calls = [0]
    convert = _sums.zcdp_to_approx_dp

    def counted(*args, **kwargs):
        calls[0] += 1
        return convert(*args, **kwargs)

    monkeypatch.setattr(_sums, "zcdp_to_approx_dp", counted)
    return calls


def _eps_of_points(html: str, ymax: float, k: int = 0) -> list[float]:
    """The ε of every vertex of the ``k``-th curve of the page (inverting the plot's y axis)."""
    points = re.findall(r'<polyline points="([^"]+)"', html)[k].split()
    return [(1 - (float(p.split(",")[1]) - T) / (H - T - B)) * ymax for p in points]


def test_the_plots_compose_a_bounded_number_of_points(monkeypatch):
    """Every curve composed a total at each of its latest 400 spends (~1 ms each): 3 allowances
    of 1000 spends took 1203 conversions per page load, and a state of 3·10⁴ spends 28 CPU s.
    Now each curve is thinned to at most a fixed number of points (one per few pixels)."""
    from privirt.private.accounting import PrivacyCost, total_epsilon
    from privirt.serve.page import render_page

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    names, n = ("d0", "d1", "d2"), 1000
    spends = [{"id": k + 1, "request_id": f"{k:032x}", "time": (t0 + dt.timedelta(seconds=k)).isoformat(),
               "analyst": "alice", "dataset": names[k % 3], "endpoint": "release", "mechanism": "gaussian",
               "rho": 1e-5 * (1 + k % 7), "epsilon": 0.0, "delta": 0.0, "status": "done",
               "params": {"kind": "counts"}} for k in range(3 * n)]
    totals = {d: total_epsilon([PrivacyCost(s["rho"], 0.0, 0.0) for s in spends if s["dataset"] == d], 1e-6)
              for d in names}
    allowances = [{"analyst": "alice", "revoked": None, "dataset": d, "epsilon": 1.0, "delta": 1e-6,
                   "n_spends": n, "spent_epsilon": totals[d], "remaining_epsilon": 0.0} for d in names]
    calls = _conversions(monkeypatch)
    html = render_page([], allowances, spends, [{"name": "alice", "created": "", "revoked": None}])
    assert 0 < calls[0] <= len(names) * 100, calls[0]  # was 3 × 401
    for k, d in enumerate(names):
        eps = _eps_of_points(html, max(1.0, *totals.values()) * 1.08, k)
        assert eps[-1] == pytest.approx(totals[d], abs=2e-3)  # still ends at the composed total
        assert eps == sorted(eps)  # a step curve of cumulative ε
        assert len(eps) <= 2 * 100 + 2


def _costs(rows) -> list:
    from privirt.private.accounting import PrivacyCost

    return [PrivacyCost(rho, eps, dl) for rho, eps, dl in rows]


def _remaining(rows, epsilon: float, delta: float) -> float:
    """The largest pure-ε spend that still fits (ε, δ) with ``rows``: bisection on the rule."""
    from privirt.private.accounting import total_epsilon

    lo, hi = 0.0, epsilon
    for _ in range(70):
        mid = 0.5 * (lo + hi)
        if total_epsilon(_costs(rows + [(0.0, mid, 0.0)]), delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


def test_the_page_of_a_small_state_shows_the_figures_of_its_spends(tmp_path):
    """The page as ``GET /curator`` builds it (the spends' costs and only the newest spends in
    full) shows every allowance's and data set's spent and remaining ε, the audit rows and the
    curves as composed from the spends, and is the page of the full record."""
    from mechanisms.measures import format_down, format_up
    from privirt.private.accounting import PrivacyCost, total_epsilon
    from privirt.serve.page import AUDIT_ROWS, render_page
    from privirt.serve.store import init_store

    store = init_store(tmp_path / "state.db")
    budgets = {"d": (5.0, 1e-6), "e": (3.0, 1e-5)}
    for name, (eps, dl) in budgets.items():
        store.add_dataset(name=name, epsilon=eps, delta=dl, n_persons=2, items=["q"], missing="none",
                          codes=np.zeros((2, 1), dtype=np.int8), source="test")
    allow = {("alice", "d"): (2.0, 1e-6), ("alice", "e"): (1.0, 1e-6), ("bob", "d"): (1.5, 1e-7)}
    store.add_analyst("alice", {"d": allow["alice", "d"], "e": allow["alice", "e"]})
    store.add_analyst("bob", {"d": allow["bob", "d"]})
    ids = {"alice": 1, "bob": 2}, {"d": 1, "e": 2}
    plan = [("alice", "d", (0.0, 0.1, 0.0)), ("bob", "d", (0.002, 0.0, 0.0)), ("alice", "e", (0.0, 0.05, 1e-8)),
            ("alice", "d", (0.004, 0.0, 0.0)), ("alice", "d", (0.0, 0.2, 0.0)), ("bob", "d", (0.0, 0.3, 0.0))]
    for who, ds, (rho, eps, dl) in plan:
        store.debit(analyst_id=ids[0][who], dataset_id=ids[1][ds], cost=PrivacyCost(rho, eps, dl), mechanism="m",
                    endpoint="release", params={"kind": "counts", "epsilon": eps}, idem_key=None)

    newest, count = store.newest_spends(4)
    assert count == len(plan) and newest == store.spends()[-4:]
    html = render_page(store.datasets(), store.allowances(), store.spend_costs(), store.analysts(),
                       store.events(), audit=store.newest_spends(AUDIT_ROWS))
    assert html == render_page(store.datasets(), store.allowances(), store.spends(), store.analysts(),
                               store.events())
    for (who, ds), (eps, dl) in allow.items():
        rows = [c for w, d, c in plan if (w, d) == (who, ds)]
        spent = total_epsilon(_costs(rows), dl)
        row = (f"<td>{who}</td><td>active</td><td>{ds}</td><td class='num'>{eps:.4g}</td><td class='num'>{dl:.3g}</td>"
               f"<td class='num'>{format_up(spent, 4)}</td><td class='num'>{format_down(_remaining(rows, eps, dl), 4)}"
               "</td>")
        assert row in html, row
        plotted = _eps_of_points(html, max(max(a for (w, _), (a, _) in allow.items() if w == who), spent) * 1.08,
                                 sorted(d for w, d in allow if w == who).index(ds) + (2 if who == "bob" else 0))
        # the vertices: (start, 0), then per spend (t, ε before it), (t, ε after it), then (end, total)
        want, before = [0.0], 0.0
        for k in range(1, len(rows) + 1):
            after = total_epsilon(_costs(rows[:k]), dl)
            want, before = want + [before, after], after
        assert plotted == pytest.approx(want + [before], abs=0.01 * max(want + [eps]))
    for ds, (eps, dl) in budgets.items():
        rows = [c for _, d, c in plan if d == ds]
        spent = total_epsilon(_costs(rows), dl)
        assert (f"<td class='num'>{format_up(spent, 4)}</td><td class='num'>"
                f"{format_down(_remaining(rows, eps, dl), 4)}</td>") in html
    log = html[html.index("<h2>Audit log"):html.index("<h3>Curator actions")]
    shown = re.findall(r"<tr><td class='num'>(\d+)</td><td>20\d\d-", log)
    assert shown == [str(k) for k in range(len(plan), 0, -1)]  # every spend, newest first
    assert f"Audit log ({len(plan)} spends, newest first)" in html


def test_a_thinned_curve_keeps_exact_points_and_never_lies_below_the_true_one():
    """Thinned to 3 columns, 9 spends keep one point per column: the composed total after the
    column's last spend (exactly), drawn from the column's first spend (so the step is never
    below the true curve)."""
    from privirt.private.accounting import PrivacyCost, total_epsilon
    from privirt.serve.page import _curve

    times = [0.0, 1.0, 2.0, 10.0, 11.0, 12.0, 20.0, 21.0, 30.0]
    spends = [{"rho": 0.001 * (k + 1), "epsilon": 0.01 * (k % 2), "delta": 0.0} for k in range(len(times))]
    true = [total_epsilon([PrivacyCost(s["rho"], s["epsilon"], s["delta"]) for s in spends[:k + 1]], 1e-6)
            for k in range(len(spends))]
    a = {"dataset": "d", "epsilon": 5.0, "delta": 1e-6, "n_spends": None, "spent_epsilon": None}
    _, xs, ys, _, before = _curve(a, spends, times, (0.0, 30.0), 3)
    assert before == 0.0 and xs == [0.0, 10.0, 20.0]  # columns [0, 10), [10, 20), [20, 30]
    assert ys == [true[2], true[5], true[8]]  # exact at each column's last spend
    for t, e in zip(times, true):  # the drawn step at each spend's time is at least the true ε there
        assert max(y for x, y in zip(xs, ys) if x <= t) >= e
    _, xs, ys, _, _ = _curve(a, spends, times, (0.0, 30.0), 100)  # no thinning: the true curve
    assert xs == times and ys == true

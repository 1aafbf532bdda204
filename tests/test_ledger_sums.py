"""The Ledger's sums: a spend far from the limit is decided by the database's sums (no row is made a
PrivacyCost again, none read into Python), the readers sum the raw rows, and the totals and the
decisions are those of the per-row PrivacyCost composition, bit for bit, right at the limit too."""

from __future__ import annotations

import random
import sqlite3

import pytest

from privirt.exceptions import BudgetExceeded
from privirt.private import accounting
from privirt.private._sums import LEDGER_TOLERANCE, SpendSums, sum_up
from privirt.private.accounting import PrivacyCost, total_epsilon
from privirt.private.ledger import Ledger


def _rows(rng: random.Random, k: int) -> list[tuple[float, float, float]]:
    """Mixed spends: Laplace ε, Gaussian ρ, approximate (ε, δ)."""
    kinds = [lambda: (0.0, rng.uniform(1e-4, 0.05), 0.0), lambda: (rng.uniform(1e-6, 1e-3), 0.0, 0.0),
             lambda: (0.0, rng.uniform(1e-4, 0.05), rng.uniform(1e-12, 1e-9))]
    return [rng.choice(kinds)() for _ in range(k)]


def _ledger(path, rows, epsilon: float, delta: float) -> Ledger:
    led = Ledger(path, epsilon=epsilon, delta=delta)
    con = sqlite3.connect(led.path)
    with con:
        con.executemany("INSERT INTO spends (time, mechanism, rho, epsilon, delta) VALUES ('t', 'x', ?, ?, ?)", rows)
    con.close()
    return led


def _costs(rows) -> list[PrivacyCost]:
    return [PrivacyCost(rho=r, epsilon=e, delta=d) for r, e, d in rows]


@pytest.mark.parametrize("seed", range(6))
def test_the_totals_are_those_of_the_per_row_costs(tmp_path, seed):
    rng = random.Random(29_700 + seed)
    rows = _rows(rng, rng.randrange(1, 60))
    delta = rng.choice([1e-5, 1e-6, 1e-3])
    led = _ledger(tmp_path / "l.ledger", rows, epsilon=rng.choice([0.5, 2.0, 50.0]), delta=delta)
    costs = _costs(rows)
    assert led.spent().epsilon == min(total_epsilon(costs, delta), 1e300)
    assert led.delta_spent() == min(1.0, sum_up(c.delta for c in costs))
    assert led.remaining_epsilon() == SpendSums.of(costs).largest_pure_fit(led.epsilon, delta)
    assert led.remaining_gaussian_epsilon() == led._remaining_gaussian(SpendSums.of(costs))
    account = led.account()
    assert (account["spent"].epsilon, account["remaining_epsilon"]) == (led.spent().epsilon,
                                                                        led.remaining_epsilon())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("over", [0.0, 2 * LEDGER_TOLERANCE])
def test_a_spend_right_at_the_limit_is_decided_as_by_the_per_row_costs(tmp_path, seed, over):
    """A budget equal to the composed total with the new spend (it fits) and one 2e-12 below it,
    beyond the 1e-12 tolerance (refused)."""
    rng = random.Random(29_800 + seed)
    rows = _rows(rng, 40)
    new = _costs(_rows(rng, 1))[0]
    delta = 1e-5
    needed = total_epsilon(_costs(rows) + [new], delta)
    budget = needed / (1.0 + over)
    led = _ledger(tmp_path / "l.ledger", rows, epsilon=budget, delta=delta)
    fits = total_epsilon(_costs(rows) + [new], delta) <= budget * (1.0 + LEDGER_TOLERANCE)
    assert fits == (over == 0.0)
    if fits:
        assert not led.would_exceed(new)
        led.spend(new, mechanism="x")
        assert led.spent().epsilon == total_epsilon(_costs(rows) + [new], delta)
    else:
        assert led.would_exceed(new)
        with pytest.raises(BudgetExceeded):
            led.spend(new, mechanism="x")
        assert len(led.spends()) == len(rows)


def test_one_spend_on_a_long_ledger_makes_no_cost_per_spend(tmp_path, monkeypatch):
    """Every spend, far from the limit or near it, and every reader made a PrivacyCost of each of
    the ledger's rows (2.6 s a spend at 10⁵ spends, under the write lock); now none is made, and far
    from the limit no row is summed in Python (the database's sums decide, as in the service)."""
    rng = random.Random(29_900)
    rows = _rows(rng, 2000)
    led = _ledger(tmp_path / "long.ledger", rows, epsilon=1e4, delta=1e-5)
    made = []
    post_init = PrivacyCost.__post_init__
    monkeypatch.setattr(accounting.PrivacyCost, "__post_init__", lambda self: made.append(1) or post_init(self))
    summed = []
    of = SpendSums.of.__func__
    monkeypatch.setattr(SpendSums, "of", classmethod(lambda cls, c: (lambda c: summed.append(len(c)) or of(cls, c))(
        list(c))))
    cost = PrivacyCost(epsilon=1e-3)
    made.clear()
    led.spend(cost, mechanism="laplace")
    assert len(made) <= 2 and max(summed, default=0) <= 1  # far from the limit: no row summed in Python
    led.spent(), led.remaining_epsilon(), led.delta_spent(), led.remaining_gaussian_epsilon(), led.would_exceed(cost)
    assert len(made) <= 100  # (the Gaussian bisection's 80 extra costs; none per row)
    near = _ledger(tmp_path / "near.ledger", rows, epsilon=total_epsilon(_costs(rows) + [cost], 1e-5), delta=1e-5)
    made.clear(), summed.clear()
    near.spend(cost, mechanism="laplace")  # right at the limit: the rows summed exactly, once
    assert len(made) <= 2 and summed.count(2000) == 1


@pytest.mark.parametrize("value", ["-1.0", "'abc'", "9e999"])
def test_a_damaged_row_is_still_refused_not_summed_as_zero(tmp_path, value):
    """A row that is not a finite number >= 0 (written around the table's checks) must not pass the
    database's sums as 0 or a negative amount: the ledger refuses it and nothing is spent."""
    led = _ledger(tmp_path / "d.ledger", [(0.0, 0.5, 0.0)], epsilon=1.0, delta=1e-5)
    con = sqlite3.connect(led.path)
    with con:
        con.execute("PRAGMA ignore_check_constraints = ON")
        con.execute(f"INSERT INTO spends (time, mechanism, rho, epsilon, delta) VALUES ('t', 'x', 0, {value}, 0)")
    con.close()
    for call in (lambda: led.spend(PrivacyCost(epsilon=0.1), mechanism="x"), led.remaining_epsilon,
                 lambda: led.would_exceed(PrivacyCost(epsilon=0.1))):
        with pytest.raises(ValueError):
            call()
    con = sqlite3.connect(led.path)
    assert con.execute("SELECT COUNT(*) FROM spends").fetchone()[0] == 2
    con.close()


def test_budget_show_lists_the_newest_spends_with_their_count(tmp_path):
    """`privirt budget show` laid out every spend (30 s and 350 MB at 10⁵); it lists the newest
    ones and says how many there are and where all of them are."""
    rows = [(0.0, 1e-6 * (i + 1), 0.0) for i in range(1000)]
    led = _ledger(tmp_path / "s.ledger", rows, epsilon=10.0, delta=1e-5)
    text = led.summary()
    head = [line for line in text.splitlines() if line.startswith("the newest ")]
    assert len(head) == 1 and f"of {len(rows)} spends" in head[0] and "--json" in head[0]
    shown = int(head[0].split()[2])
    listed = [line for line in text.splitlines() if " x " in line or line.rstrip().endswith(" x")]
    assert 0 < shown == len(listed) < len(rows)
    assert "ε=0.001" in listed[-1]  # the newest (the last spend's ε = 1e-3) is listed
    assert len(led.spends()) == len(rows)

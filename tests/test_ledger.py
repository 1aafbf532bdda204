"""The budget ledger: accounting, refusals, crash safety and races between real processes."""

from __future__ import annotations

import math
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import privirt
from privirt.private.accounting import PrivacyCost, total_epsilon, zcdp_to_approx_dp
from privirt.private.ledger import Ledger
from tests._env import child_env

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict:
    return child_env()


def _python(code: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=str(ROOT), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw,
    )


# -- basic behaviour --------------------------------------------------------------------
def test_create_open_and_budget_is_immutable(tmp_path):
    path = tmp_path / "sub" / "data.ledger"
    path.parent.mkdir()
    led = Ledger(path, epsilon=2.0, delta=1e-6)
    assert path.exists() and led.epsilon == 2.0 and led.delta == 1e-6
    again = Ledger(path)
    assert (again.epsilon, again.delta) == (2.0, 1e-6)
    assert Ledger(path, epsilon=2.0, delta=1e-6).epsilon == 2.0  # same budget: fine
    with pytest.raises(ValueError, match="cannot be changed"):
        Ledger(path, epsilon=3.0, delta=1e-6)
    with pytest.raises(FileNotFoundError, match="budget init"):
        Ledger(tmp_path / "missing.ledger")
    with pytest.raises(ValueError):
        Ledger(tmp_path / "x.ledger", epsilon=1.0)  # δ missing
    with pytest.raises(ValueError):
        Ledger(":memory:", epsilon=1.0, delta=1e-5)
    junk = tmp_path / "junk.ledger"
    junk.write_text("not a database at all, just text" * 10)
    with pytest.raises(ValueError, match="not a privirt ledger"):
        Ledger(junk)


def test_creating_over_a_file_that_is_not_a_ledger_is_refused(tmp_path):
    # with a budget given, an existing non-ledger file must be refused (ValueError), not turned
    # into a ledger (another SQLite database) or answered with sqlite3's own exception
    import sqlite3

    junk = tmp_path / "junk.ledger"
    junk.write_text("not a database at all, just text" * 10)
    with pytest.raises(ValueError, match="not a privirt ledger"):
        Ledger(junk, epsilon=1.0, delta=1e-5)
    other = tmp_path / "results.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE results (x REAL)")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match="not a privirt ledger"):
        Ledger(other, epsilon=1.0, delta=1e-5)
    con = sqlite3.connect(other)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    assert tables == {"results"}  # untouched
    # an empty file is a truncated ledger as far as anyone can tell (a new ledger appears at its
    # path only complete: created beside it, then linked): refused, never given a fresh budget
    empty = tmp_path / "empty.ledger"
    empty.touch()
    with pytest.raises(ValueError, match="an empty file"):
        Ledger(empty, epsilon=1.0, delta=1e-5)
    assert empty.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.ledger", "junk.ledger", "results.sqlite"]


@pytest.mark.parametrize("eps,delta", [(0, 1e-5), (-1, 1e-5), (math.inf, 1e-5), (math.nan, 1e-5), (1, 0), (1, 1), (1, math.nan)])
def test_bad_budget(tmp_path, eps, delta):
    with pytest.raises(ValueError):
        Ledger(tmp_path / "b.ledger", epsilon=eps, delta=delta)
    assert not (tmp_path / "b.ledger").exists() or Ledger  # no half-created budget row
    if (tmp_path / "b.ledger").exists():
        with pytest.raises(ValueError):
            Ledger(tmp_path / "b.ledger")


def test_spends_compose_and_refusal_leaves_ledger_unchanged(tmp_path):
    led = Ledger(tmp_path / "l.ledger", epsilon=1.0, delta=1e-5)
    led.spend(PrivacyCost(epsilon=0.3), mechanism="discrete Laplace", note="first")
    led.spend(PrivacyCost(rho=0.01, delta=1e-8), mechanism="discrete Gaussian")
    df = led.spends()
    assert list(df["mechanism"]) == ["discrete Laplace", "discrete Gaussian"]
    assert df.loc[1, "note"] == "first"
    expected = min(
        0.3 + zcdp_to_approx_dp(0.01, 1e-5 - 1e-8),
        zcdp_to_approx_dp(0.01 + 0.3**2 / 2, 1e-5 - 1e-8),
    )
    assert led.spent().epsilon == pytest.approx(expected, rel=1e-9)
    before = path_bytes = (tmp_path / "l.ledger").read_bytes()
    with pytest.raises(privirt.BudgetExceeded, match="remaining"):
        led.spend(PrivacyCost(epsilon=0.5), mechanism="discrete Laplace")
    assert len(led.spends()) == 2
    assert (tmp_path / "l.ledger").read_bytes() == before == path_bytes
    # what remains is exactly spendable, and a hair more is not
    rem = led.remaining_epsilon()
    assert 0 < rem < 0.7
    assert led.would_exceed(PrivacyCost(epsilon=rem * 1.001))
    led.spend(PrivacyCost(epsilon=rem), mechanism="x")
    assert led.spent().epsilon <= 1.0 * (1 + 1e-12)
    assert led.remaining_epsilon() == pytest.approx(0.0, abs=1e-9)


def test_exact_budget_fits(tmp_path):
    led = Ledger(tmp_path / "l.ledger", epsilon=1.0, delta=1e-5)
    for _ in range(10):
        led.spend(PrivacyCost(epsilon=0.1), mechanism="laplace")  # 0.1 × 10 rounds above 1.0
    with pytest.raises(privirt.BudgetExceeded):
        led.spend(PrivacyCost(epsilon=1e-6), mechanism="laplace")


def test_summary_mentions_relation_and_totals(tmp_path):
    led = Ledger(tmp_path / "l.ledger", epsilon=1.0, delta=1e-5)
    led.spend(PrivacyCost(epsilon=0.25), mechanism="laplace", note="n1")
    text = led.summary()
    assert "replace one person's row" in text and "0.25" in text and "n1" in text
    assert total_epsilon([PrivacyCost(epsilon=0.25)], 1e-5) == pytest.approx(0.25)


# -- crash safety -------------------------------------------------------------------------
def test_killed_mid_loop_never_shows_less_than_released(tmp_path):
    """A process debits then 'releases' (prints) in a loop and is SIGKILLed at a random
    moment: the ledger always holds at least every spend whose release was seen."""
    path = tmp_path / "crash.ledger"
    Ledger(path, epsilon=1e6, delta=1e-5)
    for delay in (0.05, 0.3, 0.7):
        proc = _python(
            f"""
            import sys
            from privirt.private.ledger import Ledger
            from privirt.private.accounting import PrivacyCost
            led = Ledger({str(path)!r})
            print("ready", flush=True)
            while True:
                i = led.spend(PrivacyCost(epsilon=1.0), mechanism="loop")
                print(i, flush=True)   # the 'release' happens only after the debit
            """
        )
        assert proc.stdout.readline().strip() == "ready"
        first = int(proc.stdout.readline())  # at least one release has happened
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        released = [first] + [int(x) for x in out.split()]
        con = sqlite3.connect(str(path))
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.close()
        ids = set(Ledger(path).spends().index)
        assert released, "the child released nothing before being killed"
        assert set(released) <= ids  # never less than was released


def test_private_call_killed_after_debit_keeps_the_spend(tmp_path):
    """release_counts is SIGKILLed while drawing noise: the debit is already durable."""
    pytest.importorskip("mechanisms")
    path = tmp_path / "kill.ledger"
    marker = tmp_path / "in_noise"
    Ledger(path, epsilon=5.0, delta=1e-5)
    proc = _python(
        f"""
        import time, numpy as np
        import mechanisms, privirt
        def stuck(self, values):            # test-only hook: hang where noise is drawn
            open({str(marker)!r}, "w").write("x")
            for _ in range(1200):  # short sleeps: a SIGINT taken by another thread (BLAS) wakes no long sleep
                time.sleep(0.1)
        mechanisms.DiscreteGaussian.apply = stuck
        X = np.array([[1, 0, 1], [0, 1, np.nan], [1, 1, 0]])
        privirt.release_counts(X, epsilon=1.0, delta=1e-5, ledger=privirt.Ledger({str(path)!r}))
        """
    )
    deadline = time.time() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    df = Ledger(path).spends()
    assert len(df) == 1
    assert df.iloc[0]["rho"] > 0
    # the stored cost is what a 1.0-ε call costs at this δ
    assert zcdp_to_approx_dp(df.iloc[0]["rho"], 1e-5 - df.iloc[0]["delta"]) <= 1.0 + 1e-9


def test_every_debit_commits_with_synchronous_extra(tmp_path, monkeypatch):
    """A debit is durable on return only with ``synchronous=EXTRA`` (3): in SQLite's default
    DELETE journal mode deleting the journal is the commit, and ``FULL`` (2) never fsyncs the
    folder after that, so a power cut could bring the journal back and undo the debit.  The
    setting is read on the very connections that write: the Ledger's (creation and spend) and
    the curator service's SQLite state (a debit)."""
    import numpy as np

    import privirt.private.ledger as ledger_module
    import privirt.serve._backends as backends_module
    from privirt.serve.store import init_store

    seen: list[int] = []

    def spy(real):
        def recording(con):
            seen.append(con.execute("PRAGMA synchronous").fetchone()[0])
            return real(con)
        return recording

    monkeypatch.setattr(ledger_module, "immediate_transaction", spy(ledger_module.immediate_transaction))
    monkeypatch.setattr(backends_module, "immediate_transaction", spy(backends_module.immediate_transaction))
    led = Ledger(tmp_path / "d.ledger", epsilon=1.0, delta=1e-6)
    led.spend(PrivacyCost(epsilon=0.1), mechanism="laplace")
    assert len(seen) >= 2 and set(seen) == {3}, seen  # the creation and the spend

    store = init_store(str(tmp_path / "s.db"))
    did = store.add_dataset(name="d", epsilon=1.0, delta=1e-6, n_persons=3, items=["a", "b"],
                            missing="complete", codes=np.zeros((3, 2), dtype=np.int8), source="test")
    aid = store.authenticate(store.add_analyst("a", {"d": (1.0, 1e-6)}), "analyst").id
    seen.clear()
    store.debit(analyst_id=aid, dataset_id=did, cost=PrivacyCost(epsilon=0.1), mechanism="m", endpoint="e",
                params={}, idem_key=None)
    assert seen and set(seen) == {3}, seen


# -- races ----------------------------------------------------------------------------------
def _race(path: Path, go: Path, cost_code: str, n: int) -> list[int]:
    procs = [
        _python(
            f"""
            import os, sys, time
            from privirt.private.ledger import Ledger
            from privirt.private.accounting import PrivacyCost
            from privirt.exceptions import BudgetExceeded
            led = Ledger({str(path)!r})
            print("ready", flush=True)
            while not os.path.exists({str(go)!r}):
                time.sleep(0.001)
            try:
                led.spend({cost_code}, mechanism="race")
            except BudgetExceeded:
                sys.exit(3)
            sys.exit(0)
            """
        )
        for _ in range(n)
    ]
    for p in procs:  # wait until every process has reached the barrier
        assert p.stdout.readline().strip() == "ready"
    go.write_text("go")
    codes = []
    for p in procs:
        p.communicate(timeout=120)
        codes.append(p.returncode)
    return codes


def test_racing_processes_cannot_overspend_pure(tmp_path):
    path = tmp_path / "race.ledger"
    Ledger(path, epsilon=1.0, delta=1e-5)
    codes = _race(path, tmp_path / "go", "PrivacyCost(epsilon=0.4)", 5)
    assert sorted(codes) == [0, 0, 3, 3, 3]  # exactly two 0.4's fit in 1.0
    assert len(Ledger(path).spends()) == 2


def test_racing_processes_cannot_overspend_zcdp(tmp_path):
    path = tmp_path / "race2.ledger"
    Ledger(path, epsilon=1.0, delta=1e-5)
    # each spend alone is more than half of the budget's ρ: only one may succeed
    rho_total = 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):  # the ρ whose conversion is exactly ε = 1 at δ = 1e-5
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if zcdp_to_approx_dp(mid, 1e-5) <= 1.0 else (lo, mid)
    rho_total = lo
    codes = _race(path, tmp_path / "go", f"PrivacyCost(rho={0.6 * rho_total!r})", 4)
    assert sorted(codes) == [0, 3, 3, 3]
    assert Ledger(path).spent().epsilon <= 1.0


def test_a_ledger_locked_past_the_timeout_is_a_clear_error_and_spends_nothing(tmp_path):
    from privirt.exceptions import PrivirtError

    path = tmp_path / "l.ledger"
    Ledger(path, epsilon=1.0, delta=1e-5)
    holder = sqlite3.connect(str(path), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        led = Ledger(path, timeout=0.05)
        with pytest.raises(PrivirtError, match="locked .* nothing was spent"):
            led.spend(PrivacyCost(epsilon=0.1), mechanism="test")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert Ledger(path).spent().epsilon == 0


def _make_read_only(path) -> bool:
    """Make ``path`` unwritable for real: ``chattr +i`` (works for root on ext4) or, for a
    non-root user, mode 0444.  False when neither is possible here."""
    import os
    import shutil
    import subprocess

    if hasattr(os, "geteuid") and os.geteuid() != 0:
        os.chmod(path, 0o444)
        return True
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0:
        return True
    return False


def _undo_read_only(path) -> None:
    import os
    import shutil
    import subprocess

    if shutil.which("chattr"):
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    os.chmod(path, 0o644)


def test_read_only_ledger_is_one_line_error_and_nothing_is_released(tmp_path):
    import subprocess
    import sys

    import numpy as np

    import privirt
    from privirt.exceptions import PrivirtError

    path = tmp_path / "ro.ledger"
    Ledger(path, epsilon=5.0, delta=1e-5)
    X, _, _ = privirt.simulate_rasch(100, 4, seed=1)
    csv = tmp_path / "x.csv"
    np.savetxt(csv, X, fmt="%d", delimiter=",", header="a,b,c,d", comments="")
    if not _make_read_only(path):
        pytest.skip("cannot make a file read-only here (root without chattr)")
    try:
        with pytest.raises(PrivirtError, match="cannot be written.*nothing was spent"):
            privirt.release_counts(X, epsilon=1.0, ledger=Ledger(path))
        out = subprocess.run([sys.executable, "-m", "privirt", "estimate", str(csv), "--epsilon", "1",
                              "--ledger", str(path), "--out", str(tmp_path / "est.csv")],
                             capture_output=True, text=True)
        assert out.returncode != 0
        assert "Traceback" not in out.stderr
        assert out.stderr.strip().count("\n") == 0 and "cannot be written" in out.stderr
        assert not (tmp_path / "est.csv").exists()
    finally:
        _undo_read_only(path)
    assert Ledger(path).spends().empty


def test_a_refusal_on_a_long_ledger_is_fast_and_built_after_the_lock_is_released(tmp_path, monkeypatch):
    """On 2500 spends summary() and a refused spend took ~6 s each (each bisection step summed
    every spend exactly again) and the refusal message was built while the write lock was held:
    the sums are now computed once and the message is built after the rollback."""
    import random
    import sqlite3

    from privirt.exceptions import BudgetExceeded
    from privirt.private.accounting import PrivacyCost
    from privirt.private.ledger import Ledger

    rng = random.Random(14_500_003)
    rows = [(rng.uniform(1e-6, 1e-3), 0.0, 0.0) if rng.random() < 0.5 else (0.0, rng.uniform(1e-4, 1e-2), 0.0)
            for _ in range(2500)]
    led = Ledger(tmp_path / "big.ledger", epsilon=9.0, delta=1e-5)
    with sqlite3.connect(led.path) as con:
        con.executemany("INSERT INTO spends (time, mechanism, rho, epsilon, delta) VALUES ('t', 'x', ?, ?, ?)", rows)
    con.close()
    from privirt.private import _sums

    summed = []  # the spends are summed once for the total and both bisections (not per step)
    real_of = _sums.SpendSums.of.__func__
    monkeypatch.setattr(_sums.SpendSums, "of", classmethod(
        lambda cls, costs: (lambda c: summed.append(len(c)) or real_of(cls, c))(list(costs))))
    led.summary()
    assert sum(1 for k in summed if k >= 2500) == 1  # (~0.3 s now, ~6 s before; no timing in tests)

    refusal = Ledger._refusal
    locked = []

    def check_lock(self, *args):
        other = sqlite3.connect(self.path, timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")  # fails while another connection holds the write lock
            other.execute("ROLLBACK")
            locked.append(False)
        except sqlite3.OperationalError:
            locked.append(True)
        finally:
            other.close()
        return refusal(self, *args)

    monkeypatch.setattr(Ledger, "_refusal", check_lock)
    summed.clear()
    with pytest.raises(BudgetExceeded):
        led.spend(PrivacyCost(epsilon=100.0), mechanism="x")
    assert sum(1 for k in summed if k >= 2500) == 1  # the decision's, which the message reuses (not one per step)
    assert locked == [False]

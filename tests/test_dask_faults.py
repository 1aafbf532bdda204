"""The Dask engine when things go wrong around it: a closed stdout, a lost scheduler, person
labels on the non-private path."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import privirt
from tests._env import child_env

#: the remedy that ends the refusal of a person label seen twice (in memory and by Dask)
UNIQUE = "make the person labels unique or merge the rows"

pytest.importorskip("dask")
pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROOT = Path(__file__).resolve().parent.parent


def _folder(path: Path, n=300, m=4, files=2, seed=0) -> Path:
    """Wide Parquet files of 0/1 responses (columns i0 …), with a ``person`` column."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n, m)) < 0.5).astype(np.int8)
    path.mkdir(parents=True, exist_ok=True)
    for f, rows in enumerate(np.array_split(np.arange(n), files)):
        cols = {"person": pa.array([f"p{i}" for i in rows])}
        cols.update({f"i{j}": pa.array(X[rows, j]) for j in range(m)})
        pq.write_table(pa.table(cols), path / f"part-{f}.parquet")
    return path


def _cli(argv: list[str]) -> subprocess.Popen:
    env = child_env()
    code = f"import sys\nfrom privirt.cli import main\nsys.exit(main({argv!r}))\n"
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


# -- stdout closed ---------------------------------------------------------------------------
@pytest.mark.parametrize("private", [False, True])
def test_closed_stdout_on_dask_ends_as_on_the_local_engine(tmp_path, private):
    """`privirt estimate DIR --engine dask | head`: the BrokenPipeError was wrapped as an error
    of the input ("DIR: [Errno 32] Broken pipe", exit 2); it ends as on the local engine: quietly
    (141), or with a ledger after the debit saying that the budget WAS spent."""
    folder = _folder(tmp_path / "d")
    led = tmp_path / "l.ledger"
    argv = ["estimate", str(folder), "--engine", "dask"]
    if private:
        privirt.Ledger(led, epsilon=50.0, delta=1e-5)
        argv += ["--epsilon", "5", "--n-persons", "300", "--method", "spectral", "--ledger", str(led)]
    proc = _cli(argv)
    proc.stdout.close()  # the reader is gone before privirt writes
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 141, err
    assert "Broken pipe" not in err and "Traceback" not in err and str(folder) not in err, err
    if private:
        line = err.strip().splitlines()[-1]
        assert line.startswith("privirt: stdout closed; the privacy budget WAS spent (asked ε=5"), err
        assert len(privirt.Ledger(led).spends()) == 1
    else:
        assert err.strip() == "", err


# -- person labels on the non-private path ---------------------------------------------------
@pytest.fixture(scope="module")
def client():
    import distributed

    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0", protocol="tcp") as cluster, \
            distributed.Client(cluster) as cl:
        yield cl


def test_non_private_dask_statistics_refuse_a_duplicate_person_label_as_in_memory(tmp_path, capsys,
                                                                                client):
    """Only the private path checked the person labels: item_totals / sufficient_statistics /
    pairwise_counts (engine='dask') and `privirt estimate DIR --engine dask` counted a person
    twice where the in-memory reader refuses the same rows."""
    import dask.dataframe as dd
    import pandas as pd

    from privirt.cli import main

    folder = _folder(tmp_path / "d")
    table = pq.read_table(folder / "part-1.parquet")
    labels = table.column("person").to_pylist()
    labels[7] = "p3"  # p3 is also in part-0
    pq.write_table(table.set_column(0, "person", pa.array(labels)), folder / "part-1.parquet")
    whole = tmp_path / "all.parquet"
    pq.write_table(pa.concat_tables([pq.read_table(p) for p in sorted(folder.glob("*.parquet"))]), whole)
    with pytest.raises(ValueError, match=r"duplicate person label 'p3' \(rows \d+ and \d+\): " + UNIQUE + "$"):
        privirt.item_totals(whole)
    for call in (privirt.item_totals, privirt.sufficient_statistics, privirt.pairwise_counts):
        with pytest.raises(ValueError, match="duplicate person label 'p3': " + UNIQUE + "$"):
            call(folder, engine="dask", client=client)
    frame = pd.read_parquet(whole).set_index("person")
    with pytest.raises(ValueError, match="duplicate person label 'p3': " + UNIQUE + "$"):
        privirt.item_totals(dd.from_pandas(frame, npartitions=2), engine="dask", client=client)
    capsys.readouterr()
    assert main(["estimate", str(folder), "--engine", "dask", "--scheduler",
                 client.scheduler.address]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == [
        "privirt: error: duplicate person label 'p3': " + UNIQUE], err
    # distinct labels still give the in-memory result
    ok = _folder(tmp_path / "ok")
    okall = tmp_path / "ok.parquet"
    pq.write_table(pa.concat_tables([pq.read_table(p) for p in sorted(ok.glob("*.parquet"))]), okall)
    np.testing.assert_array_equal(privirt.item_totals(ok, engine="dask", client=client),
                                  privirt.item_totals(okall))


# -- a lost scheduler ------------------------------------------------------------------------
_STARTED, _RELEASE = threading.Event(), threading.Event()


def _held_block(block):
    """A partition that waits (on the worker) until the test has closed the scheduler."""
    _STARTED.set()
    _RELEASE.wait(60)
    return block


@contextlib.contextmanager
def _scheduler_closed_mid_computation():
    """A cluster (this process, real TCP) whose scheduler is closed while a partition runs;
    yields its address."""
    import dask
    import distributed

    _STARTED.clear()
    _RELEASE.clear()
    # (a short connect timeout: closing the cluster without its scheduler waits for it)
    with dask.config.set({"distributed.comm.timeouts.connect": "3s"}), distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0", protocol="tcp") as cluster:
        def close_scheduler():
            if _STARTED.wait(60):
                cluster.sync(cluster.scheduler.close)
            _RELEASE.set()

        closer = threading.Thread(target=close_scheduler)
        closer.start()
        client_log, records = logging.getLogger("distributed.client"), _Records()
        client_log.addHandler(records)
        try:
            yield cluster.scheduler_address
            # closing the client cancelled its reconnection, which Dask logged with a traceback
            assert records.seen == [], records.seen
        finally:
            client_log.removeHandler(records)
            _RELEASE.set()
            closer.join()


class _Records(logging.Handler):
    """The messages logged to a logger (pytest's capture does not see ``distributed``'s)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen = []

    def emit(self, record):
        if record.levelno >= logging.WARNING:
            self.seen.append(record.getMessage())


def test_a_lost_scheduler_is_one_valueerror_naming_it_before_any_debit(tmp_path, capfd):
    """A scheduler lost mid-computation let Dask's FutureCancelledError through (the CLI printed
    an 84-line traceback, nothing about the budget): it is one ValueError naming the scheduler,
    raised before the debit, and closing the client logs nothing."""
    import dask.array as da

    X = da.from_array((np.random.default_rng(1).random((400, 3)) < 0.5).astype(float),
                      chunks=(100, 3)).map_blocks(_held_block, dtype=float, meta=np.empty((0, 0)))
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    capfd.readouterr()
    with _scheduler_closed_mid_computation() as address:
        with pytest.raises(ValueError) as info:
            privirt.release_counts(X, engine="dask", client=address, epsilon=1.0, n_persons=400,
                                   ledger=ledger)
    text = str(info.value)
    assert text.startswith(f"lost the Dask scheduler at {address} during the computation"), text
    assert "\n" not in text and text.endswith("(nothing was spent)"), text
    assert len(ledger.spends()) == 0
    err = capfd.readouterr().err
    assert "Traceback" not in err and "distributed.client" not in err, err


def test_cli_a_lost_scheduler_is_one_line_and_nothing_spent(tmp_path, capfd, monkeypatch):
    from privirt.cli import main
    from privirt.stats import dask_engine

    folder = _folder(tmp_path / "d")
    led = tmp_path / "l.ledger"
    privirt.Ledger(led, epsilon=5.0, delta=1e-5)
    part = dask_engine._parquet_part
    monkeypatch.setattr(dask_engine, "_parquet_part", lambda *a: _held_block(part(*a)))
    capfd.readouterr()
    with _scheduler_closed_mid_computation() as address:
        status = main(["estimate", str(folder), "--engine", "dask", "--scheduler", address,
                       "--epsilon", "1", "--n-persons", "300", "--method", "spectral",
                       "--ledger", str(led)])
    out, err = capfd.readouterr()
    assert status == 2 and out == "", err
    # (the test cluster's own scheduler and worker log here too, being in this process)
    assert "Traceback" not in err and "distributed.client" not in err, err
    assert [line for line in err.splitlines() if not line.startswith("20")] == [
        f"privirt: error: lost the Dask scheduler at {address} during the computation "
        "(scheduler-connection-lost); check that the scheduler is running and reachable, and "
        "run again (nothing was spent)"], err
    assert len(privirt.Ledger(led).spends()) == 0


class _Failed:
    """A future whose result raises ``exc`` (and which records a cancel)."""

    def __init__(self, exc):
        self.exc, self.cancelled = exc, False

    def result(self):
        raise self.exc

    def cancel(self):
        self.cancelled = True


def test_workers_lost_and_closed_comms_are_one_line_other_errors_pass_through():
    from types import SimpleNamespace

    from distributed.comm import CommClosedError
    from distributed.scheduler import KilledWorker

    from privirt.stats._dask_cluster import computed

    killed = KilledWorker("part-1", SimpleNamespace(address="tcp://w:1"), 3)
    for exc, start in ((killed, "the Dask cluster at tcp://s:8786 lost its workers"),
                       (CommClosedError("in <TCP>: Stream is closed"),
                        "lost the Dask scheduler at tcp://s:8786 during the computation (CommClosedError)")):
        future = _Failed(exc)
        with pytest.raises(ValueError) as info:
            computed(future, "tcp://s:8786", private=False)
        text = str(info.value)
        assert text.startswith(start) and "\n" not in text and "spent" not in text, text
        assert not future.cancelled  # already failed (a cancel would wait for the lost scheduler)
    future = _Failed(ValueError("invalid response 3"))
    with pytest.raises(ValueError, match="^invalid response 3$"):
        computed(future, "tcp://s:8786", private=True)
    assert future.cancelled  # a failed partition: the rest of the computation is stopped

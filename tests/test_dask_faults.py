"""The Dask engine when things go wrong around it: a closed stdout, a lost scheduler, person
labels on the non-private path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import privirt

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
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
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
    with pytest.raises(ValueError, match="duplicate person label 'p3'"):
        privirt.item_totals(whole)
    for call in (privirt.item_totals, privirt.sufficient_statistics, privirt.pairwise_counts):
        with pytest.raises(ValueError, match="duplicate person label 'p3'"):
            call(folder, engine="dask", client=client)
    frame = pd.read_parquet(whole).set_index("person")
    with pytest.raises(ValueError, match="duplicate person label 'p3'"):
        privirt.item_totals(dd.from_pandas(frame, npartitions=2), engine="dask", client=client)
    capsys.readouterr()
    assert main(["estimate", str(folder), "--engine", "dask", "--scheduler",
                 client.scheduler.address]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == ["privirt: error: duplicate person label 'p3'"], err
    # distinct labels still give the in-memory result
    ok = _folder(tmp_path / "ok")
    okall = tmp_path / "ok.parquet"
    pq.write_table(pa.concat_tables([pq.read_table(p) for p in sorted(ok.glob("*.parquet"))]), okall)
    np.testing.assert_array_equal(privirt.item_totals(ok, engine="dask", client=client),
                                  privirt.item_totals(okall))

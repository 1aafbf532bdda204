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

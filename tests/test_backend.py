"""The device switch."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt import _backend
from tests._env import child_env


def test_cpu_is_numpy():
    assert _backend.get_xp("cpu") is np
    assert _backend.resolve_device("cpu") == "cpu"


def test_invalid_device_names_the_choices():
    with pytest.raises(ValueError, match="auto"):
        _backend.resolve_device("tpu")


def test_auto_falls_back_to_cpu_without_gpu():
    expected = "gpu" if _backend.gpu_available() else "cpu"
    assert _backend.resolve_device("auto") == expected


def test_gpu_without_cupy_gives_install_hint():
    if _backend.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ImportError, match=r"privirt\[gpu\]"):
        _backend.resolve_device("gpu")


def test_to_numpy_passthrough():
    a = np.arange(3)
    assert _backend.to_numpy(a) is a
    assert _backend.to_numpy([1, 2]).tolist() == [1, 2]


def test_to_numpy_of_objects_with_a_get_method():
    # duck-typing on .get() (cupy's device-to-host copy) called DataFrame.get / dict.get
    frame = pd.DataFrame([[0, 1], [1, 0]])
    np.testing.assert_array_equal(_backend.to_numpy(frame), [[0, 1], [1, 0]])
    np.testing.assert_array_equal(_backend.to_numpy(pd.Series([1.0, 2.0])), [1.0, 2.0])


def test_graph_frame_and_beta_dict_are_accepted_or_refused_clearly():
    from privirt.stats.counts import pairwise_counts_frame
    from privirt.rasch.spectral import spectral_from_counts

    X = privirt.load_dataset("lsat6")
    Y, _ = pairwise_counts_frame(X)
    G = pd.DataFrame(~np.eye(5, dtype=bool), index=Y.index, columns=Y.columns)
    res = spectral_from_counts(Y, graph=G, device="cpu")
    np.testing.assert_allclose(res.beta, spectral_from_counts(Y, graph=G.to_numpy()).beta)
    with pytest.raises(ValueError, match="beta"):
        privirt.estimate_abilities(X, {"item1": 0.0}, device="cpu")


@pytest.mark.gpu
def test_to_numpy_from_cupy():
    import cupy

    a = cupy.arange(4)
    out = _backend.to_numpy(a)
    assert isinstance(out, np.ndarray) and out.tolist() == [0, 1, 2, 3]


NUMBA_KERNELS = ("privirt.bayes.moves_numba", "privirt.bayes.twopno_numba", "privirt.rasch._esf_numba",
                 "privirt.private.twopl._pairs_numba")


def _with_numba_threads(value: str, *argv: str):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = child_env(NUMBA_NUM_THREADS=value)
    return subprocess.run([sys.executable, *argv], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)


def _gibbs_with_numba_threads(value: str, out):
    """``privirt gibbs`` (a short run on LSAT6, on the CPU: the numba kernel is the CPU's) under
    ``NUMBA_NUM_THREADS=value``."""
    return _with_numba_threads(value, "-m", "privirt", "gibbs", "datasets/lsat6.csv", "--weights-col",
                               "frequency", "--iter", "4", "--warmup", "2", "--seed", "7", "--no-progress",
                               "--device", "cpu", "--out", str(out))


@pytest.mark.skipif(not _backend.numba_available(), reason="numba (the fast extra) is not installed")
def test_a_numba_thread_count_numba_refuses_is_named_with_its_remedy(tmp_path):
    # numba's own words ("Number of threads specified must be > 0.") named neither the variable
    # nor what to do
    out = tmp_path / "g.csv"
    cli = _gibbs_with_numba_threads("0", out)
    assert cli.returncode == 2 and not out.exists()
    assert cli.stderr.count("\n") == 1 and "Traceback" not in cli.stderr
    assert cli.stderr.startswith("privirt: error: the environment variable NUMBA_NUM_THREADS='0' ")
    assert "unset NUMBA_NUM_THREADS or set it to a positive integer" in cli.stderr
    assert "--engine numpy" in cli.stderr
    # every kernel module, whichever path imports it first, says the same in Python's names
    code = ("import importlib\n"
            f"for name in {NUMBA_KERNELS!r}:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ValueError as exc:\n"
            "        print(exc)\n")
    lib = _with_numba_threads("-3", "-c", code)
    lines = lib.stdout.splitlines()
    assert len(lines) == len(NUMBA_KERNELS), lib.stderr
    assert all(line.startswith("the environment variable NUMBA_NUM_THREADS='-3' is refused by numba")
               and 'engine="numpy"' not in line for line in lines)  # (only the sampler has that engine)


@pytest.mark.skipif(not _backend.numba_available(), reason="numba (the fast extra) is not installed")
def test_a_numba_setting_numba_cannot_read_is_one_warning_line_naming_it(tmp_path):
    # numba ignores NUMBA_NUM_THREADS=abc with a warning holding the parse error's traceback text
    out = tmp_path / "g.csv"
    cli = _gibbs_with_numba_threads("abc", out)
    assert cli.returncode == 0 and out.exists(), cli.stderr
    assert "Traceback" not in cli.stderr and "could not be parsed" not in cli.stderr
    said = [line for line in cli.stderr.splitlines() if "NUMBA_NUM_THREADS" in line]
    assert said == ["privirt: warning: the environment variable NUMBA_NUM_THREADS='abc' is not a value numba "
                    "can read; numba ignores it and uses its default: unset NUMBA_NUM_THREADS or correct it"]


@pytest.mark.skipif(not _backend.numba_available(), reason="numba (the fast extra) is not installed")
def test_a_numba_setting_numba_refuses_is_refused_before_the_2pl_debit(tmp_path):
    # the private 2PL imported numba in its fit, after the debit: 'the privacy budget WAS spent',
    # nothing released; and fit / estimate were advised a --engine numpy they do not have
    import numpy as np
    import pandas as pd

    import privirt

    rng = np.random.default_rng(65_300_003)
    data = tmp_path / "big.csv"
    pd.DataFrame((rng.random((300, 201)) < 0.5).astype(int), columns=[f"q{j}" for j in range(201)]).to_csv(
        data, index=False)
    ledger = tmp_path / "l.db"
    privirt.Ledger(ledger, epsilon=5.0, delta=1e-3)
    cli = _with_numba_threads("0", "-m", "privirt", "estimate", str(data), "--model", "2pl", "--epsilon", "1",
                              "--n-boot", "0", "--ledger", str(ledger), "--no-progress")
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1, cli.stderr
    assert "NUMBA_NUM_THREADS='0' is refused by numba" in cli.stderr and "WAS spent" not in cli.stderr
    assert "--engine" not in cli.stderr
    assert len(privirt.Ledger(ledger).spends()) == 0
    # the release alone needs no numba: it is made, and spent, under the same environment
    code = ("import pandas as pd, privirt\n"
            f"rel = privirt.release_2pl(pd.read_csv({str(data)!r}), epsilon=1.0, ledger={str(ledger)!r})\n"
            "print(len(rel.totals))\n")
    lib = _with_numba_threads("0", "-c", code)
    assert lib.returncode == 0 and lib.stdout.split() == ["201"], lib.stderr
    assert len(privirt.Ledger(ledger).spends()) == 1

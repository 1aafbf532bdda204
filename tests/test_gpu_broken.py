"""A cupy install whose GPU fails in use (broken driver, missing NVRTC): the device probe
calls it no usable GPU, and a GPU that fails later is one line naming the CPU device.

The cupy packages written here stand in for a broken third-party install, the condition
tested; privirt itself runs unchanged (in a subprocess for the command line).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import privirt
from privirt import _backend
from privirt.cli import main
from tests._env import child_env

ROOT = Path(__file__).resolve().parents[1]
LSAT = ROOT / "datasets" / "lsat6.csv"

#: a cupy that imports and sees one device, then fails on first use (as with a broken driver)
BROKEN = """
class CUDARuntimeError(RuntimeError): pass
class _RT:
    @staticmethod
    def getDeviceCount(): return 1
class cuda: runtime = _RT()
def __getattr__(name): raise CUDARuntimeError(f"cudaErrorInsufficientDriver (cupy.{name})")
"""

#: the part of a cupy the probe's arrays need: one device, numpy arrays (no braces: .format-safe)
_ARRAYS = """
import numpy
class _RT:
    @staticmethod
    def getDeviceCount(): return 1
class _Dev:
    def synchronize(self): pass
class cuda:
    runtime = _RT()
    Device = _Dev
int64 = numpy.int64
def arange(n, dtype=None): return numpy.arange(n, dtype=dtype)
"""

#: a cupy whose arrays work but whose kernels cannot be compiled (NVRTC missing)
NO_NVRTC = _ARRAYS + """
class CompileException(RuntimeError): pass
class RawKernel:
    def __init__(self, code, name):
        raise CompileException("cannot load " + {lib!r})
"""

#: a cupy that passes the probe, then fails at the first real computation
LATE = _ARRAYS + """
class CUDARuntimeError(RuntimeError): pass
class RawKernel:
    def __init__(self, code, name): pass
    def __call__(self, grid, block, args): args[0][:] += 1
def __getattr__(name): raise CUDARuntimeError(f"cudaErrorLaunchFailure (cupy.{name})")
"""


def _stub(tmp_path: Path, source: str) -> Path:
    folder = tmp_path / "stub"
    (folder / "cupy").mkdir(parents=True)
    (folder / "cupy" / "__init__.py").write_text(textwrap.dedent(source))
    return folder


@pytest.fixture
def probe_with(monkeypatch):
    """``probe_with(folder)``: the backend's cached probe, re-run with ``folder``'s cupy."""
    def use(folder: Path) -> None:
        monkeypatch.syspath_prepend(str(folder))
        monkeypatch.delitem(sys.modules, "cupy", raising=False)
        _backend._gpu_probe.cache_clear()

    yield use
    sys.modules.pop("cupy", None)
    _backend._gpu_probe.cache_clear()  # the next test probes the real install again


def _run(stub: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = child_env(stub)
    return subprocess.run([sys.executable, "-m", "privirt", *args], cwd=str(cwd or ROOT), env=env,
                          capture_output=True, text=True, timeout=120)


def _one_line(err: str) -> str:
    """The one error line (last; a sampler's line naming its data may come before it)."""
    lines = [line for line in err.strip().splitlines() if line]
    errors = [line for line in lines if line.startswith("privirt: error")]
    assert errors == lines[-1:] and "Traceback" not in err, err
    return errors[0]


def test_probe_calls_a_failing_gpu_unusable(tmp_path, probe_with):
    """Allocation fails: auto is the CPU, gpu is refused in one line with the probe's error."""
    probe_with(_stub(tmp_path, BROKEN))
    assert not privirt.gpu_available()
    assert _backend.resolve_device("auto") == "cpu"
    with pytest.raises(ImportError) as info:
        _backend.resolve_device("gpu")
    text = str(info.value)
    assert "\n" not in text and "cudaErrorInsufficientDriver" in text and 'device="cpu"' in text


def test_probe_compiles_a_kernel_and_hides_paths(tmp_path, probe_with):
    """Arrays work but NVRTC does not: no usable GPU; the library's folder is not said."""
    lib = tmp_path / "cuda" / "lib64" / "libnvrtc.so.12"
    probe_with(_stub(tmp_path, NO_NVRTC.format(lib=str(lib))))
    assert not privirt.gpu_available()
    with pytest.raises(ImportError) as info:
        _backend.resolve_device("gpu")
    text = str(info.value)
    assert "CompileException" in text and "libnvrtc.so.12" in text and str(tmp_path) not in text


def test_probe_not_run_at_import(tmp_path):
    """Importing privirt (and its command line) does not import cupy, let alone probe it."""
    env = child_env(_stub(tmp_path, BROKEN))
    code = "import sys, privirt, privirt.cli, privirt.sweeps.execute; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_falls_back_or_refuses_with_a_broken_gpu(tmp_path, probe_with, capsys):
    probe_with(_stub(tmp_path, BROKEN))
    status, out, err = _cli(capsys, "estimate", str(LSAT), "--weights-col", "frequency")
    assert status == 0 and "item1" in out and "Traceback" not in err, err
    status, _, err = _cli(capsys, "mh", str(LSAT), "--weights-col", "frequency", "--device", "gpu",
                          "--iter", "40", "--warmup", "20")
    assert status != 0
    line = _one_line(err)
    assert "cudaErrorInsufficientDriver" in line and "--device cpu" in line


def test_cli_gpu_failing_after_the_probe_is_one_line(tmp_path, probe_with, capsys):
    """The safety net: a cupy error is one line naming --device cpu, and what was spent."""
    probe_with(_stub(tmp_path, LATE))
    ledger = tmp_path / "b.ledger"
    privirt.Ledger(ledger, epsilon=5.0, delta=1e-5)
    for args in (["estimate", str(LSAT), "--weights-col", "frequency"],
                 ["estimate", str(LSAT), "--weights-col", "frequency", "--epsilon", "1",
                  "--ledger", str(ledger), "--method", "spectral"],
                 ["gibbs", str(LSAT), "--weights-col", "frequency", "--iter", "40", "--warmup", "20"],
                 ["mh", str(LSAT), "--weights-col", "frequency", "--iter", "40", "--warmup", "20"]):
        status, _, err = _cli(capsys, *args)
        assert status != 0
        line = _one_line(err)
        assert "cudaErrorLaunchFailure" in line and "--device cpu" in line, line
        if "--ledger" in args:
            spent = len(privirt.Ledger(ledger).spends())
            assert ("WAS spent" in line) == (spent > 0) and ("nothing was spent" in line) == (spent == 0)


def test_sweep_cell_with_a_failing_gpu(tmp_path, probe_with, capsys):
    probe_with(_stub(tmp_path, LATE))
    config = tmp_path / "s.toml"
    config.write_text('name = "g"\nseed = 1\ntrials = 1\nepsilons = [1.0]\nmechanisms = ["spectral"]\n'
                      'device = "auto"\n\n[[datasets]]\nsource = "synthetic"\nname = "s"\nn = 100\nm = 4\n')
    status, out, err = _cli(capsys, "sweep", str(config), "--out", str(tmp_path / "out"), "--jobs", "1",
                            "--no-progress")
    assert status != 0 and "Traceback" not in err, err
    assert "cell failed: the GPU failed (CUDARuntimeError: cudaErrorLaunchFailure" in out
    assert 'device = "cpu"' in out

"""Packaging rules: `datasets/` ships as data, never as an importable top-level package."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

import privirt
from tests._env import child_env

ROOT = Path(__file__).resolve().parent.parent


def test_datasets_folder_is_not_a_package():
    assert not (ROOT / "datasets" / "__init__.py").exists()
    spec = importlib.util.find_spec("datasets")
    if spec is not None:  # Hugging Face's datasets may be installed; it must not be ours
        assert spec.origin is None or not Path(spec.origin).is_relative_to(ROOT)


def test_pyproject_declares_packages_and_extras():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = meta["tool"]["setuptools"]["packages"]
    assert "privirt" in packages and "mechanisms" in packages
    assert "datasets" not in packages
    assert meta["tool"]["setuptools"]["package-dir"]["privirt._data"] == "datasets"
    extras = meta["project"]["optional-dependencies"]
    assert {"gpu", "test", "data"} <= set(extras)
    assert any(dep.startswith("cupy") for dep in extras["gpu"])
    core = " ".join(meta["project"]["dependencies"])
    for dep in ("numpy", "scipy", "pandas", "opendp"):
        assert dep in core
    assert meta["project"]["scripts"]["privirt"] == "privirt.cli:main"


def test_every_bundled_csv_is_listed_and_loadable():
    names = privirt.list_datasets()
    assert set(names) == {p.stem for p in (ROOT / "datasets").glob("*.csv")}
    for name in names:
        frame = privirt.load_dataset(name)
        assert frame.shape[0] > 0 and set(frame.stack().unique()) <= {0, 1}


def test_public_names_resolve():
    missing = []
    for name in privirt.__all__:
        try:
            getattr(privirt, name)
        except (AttributeError, ImportError) as exc:
            missing.append(f"{name}: {exc}")
    assert not missing, missing


def test_spectral_from_counts_is_public_as_the_readme_presents_it():
    """The README offers ``spectral_from_counts(Y, graph=...)`` for noisy counts; ``privirt`` lacked it."""
    from privirt.rasch.spectral import spectral_from_counts

    assert "spectral_from_counts" in privirt.__all__
    assert privirt.spectral_from_counts is spectral_from_counts


_CONCURRENT_FIRST_USE = """
import threading, privirt
errors, start = [], threading.Barrier(2)
def take(name):
    start.wait()
    try:
        getattr(privirt, name)
    except Exception as exc:
        errors.append(f"{name}: {type(exc).__name__}: {exc}")
threads = [threading.Thread(target=take, args=(n,)) for n in ("Ledger", "release_counts")]
[t.start() for t in threads]; [t.join() for t in threads]
print(errors)
"""


def test_first_use_of_the_lazy_api_from_two_threads_resolves_both_names():
    """Two threads taking names of privirt.private from a fresh ``import privirt``: the import
    cycle there handed one a partly initialised module (ImportError, most fresh runs). Four
    fresh interpreters at once; each must resolve both names."""
    import subprocess
    import sys

    env = child_env()
    runs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT_FIRST_USE], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    results = [run.communicate(timeout=120) + (run.returncode,) for run in runs]
    assert all(out.strip() == "[]" and code == 0 for out, _, code in results), results


_FORK_WHILE_IMPORTING = """
import os, signal, threading, privirt
import privirt.data.simulate  # imported; the name privirt.simulate_rasch not cached yet
held, done = threading.Event(), threading.Event()
def hold():
    with privirt._IMPORT_LOCK:  # a lazy import in flight in another thread
        held.set(); done.wait()
t = threading.Thread(target=hold); t.start(); held.wait()
pid = os.fork()
if pid == 0:
    signal.alarm(20)  # a hang kills the child
    privirt.simulate_rasch
    os._exit(0)
done.set(); t.join()
_, status = os.waitpid(pid, 0)
print("ok" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else f"child status {status}")
"""


def test_a_fork_while_another_thread_holds_the_lazy_import_lock_does_not_hang_the_child():
    """The child inherited the lock held by a thread that does not exist there: its first
    ``privirt.<name>`` not yet cached blocked for ever."""
    import os
    import subprocess
    import sys

    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    env = child_env()
    run = subprocess.run([sys.executable, "-c", _FORK_WHILE_IMPORTING], env=env, text=True,
                         capture_output=True, timeout=120)
    assert run.stdout.strip() == "ok", (run.stdout, run.stderr)


def test_cuda_sources_are_package_data():
    """Every ``.cu`` file of a package is declared package data, and the kernels load
    through importlib.resources (as the installed package reads them)."""
    from importlib import resources

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = meta["tool"]["setuptools"]["packages"]
    data = meta["tool"]["setuptools"]["package-data"]
    for cu in (ROOT / "privirt").rglob("*.cu"):
        package = ".".join(cu.parent.relative_to(ROOT).parts)
        assert package in packages, package
        assert "*.cu" in data.get(package, []), (package, data)
    src = resources.files("privirt.bayes").joinpath("gibbs_2pno.cu").read_text()
    assert 'extern "C" __global__ void privirt_gibbs_z(' in src
    from privirt.bayes import twopno_gpu

    assert tuple(twopno_gpu.kernel_specs()) == twopno_gpu.KERNEL_NAMES


def test_bundled_data_found_in_an_installed_wheel(monkeypatch, tmp_path):
    """Installed, ``privirt._data`` is a namespace package: importlib.resources gives a
    MultiplexedPath (whose str() is no path); the data folder is still found there."""
    from importlib import resources
    from importlib.resources.readers import MultiplexedPath

    from privirt.data import datasets

    installed = tmp_path / "site" / "privirt" / "_data"
    installed.mkdir(parents=True)
    for csv in (ROOT / "datasets").glob("*.csv"):
        (installed / csv.name).write_bytes(csv.read_bytes())
    monkeypatch.setattr(resources, "files", lambda name: MultiplexedPath(installed))
    monkeypatch.setattr(datasets, "__file__", str(tmp_path / "site" / "privirt" / "data" / "datasets.py"))
    assert datasets._data_dir() == installed
    assert datasets.load_dataset("lsat6").shape == (1000, 5)

"""The GPU checklist script's CPU-side logic (its device work needs a GPU and is run there)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import privirt

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gc():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_test_files_are_those_with_gpu_marked_tests(gc):
    files = gc.gpu_test_files()
    assert "tests/test_gibbs.py" in files and "tests/test_counts.py" in files
    # the static checks run in their own step; files without the marker are not collected
    # (on a GPU machine that lacks e.g. the service's packages they would fail to import)
    assert "tests/test_gpu_static.py" not in files
    assert "tests/test_serve.py" not in files
    for f in files:
        assert "pytest.mark.gpu" in (ROOT / f).read_text(encoding="utf-8")


def test_pytest_summary_is_the_count_line_whatever_follows(gc):
    """On the GPU machine pytest-benchmark printed a warning after pytest's summary, and the
    table showed the warning in place of the counts."""
    lines = ["F..", "==== 1 failed, 18 passed in 17.69s ====",
             "  warner(PytestBenchmarkWarning(text))"]
    assert gc.pytest_summary(lines) == "1 failed, 18 passed in 17.69s"
    assert gc.pytest_summary(["66 passed in 23.86s"]) == "66 passed in 23.86s"
    assert gc.pytest_summary(["boom"]) == "boom" and gc.pytest_summary([]) == "(no output)"


def test_worker_result_round_trip(gc, capsys):
    gc._emit({"a": 1.5, "b": [1, 2]})
    out = "noise\n" + capsys.readouterr().out + "RESULTS are not this line\n"
    assert gc._parse_result(out) == {"a": 1.5, "b": [1, 2]}
    assert gc._parse_result("nothing here") is None


def test_rows_from_worker_results(gc):
    counts = {"n": 10_000_000, "m": 1000, "exact_int8": True, "exact_host": True,
              "exact_f16_missing": False, "gpu_int8_device_s": 0.05, "cpu_full_est_s": 20.0,
              "cpu_n": 1_000_000, "stage_convert_s": 0.01, "convert_gbps": 3000.0,
              "stage_validate_cupy_s": 0.07, "stage_convert_cupy_s": 0.05,
              "stage_gemm_s": 0.03, "gemm_tflops": 600.0, "chunk": 65536,
              "gpu_host_full_est_s": 1.0, "gpu_f16_missing_device_s": 0.1}
    rows = gc._counts_rows(counts)
    assert "50 ms" in rows[0]["figure"] and "×400" in rows[0]["figure"]
    assert rows[0]["ok"] is False  # one exactness check failed
    gibbs = {"cases": [
        {"label": "L", "n_iter": 10_000, "target_s": 1.0, "gpu_full_s": 0.8, "gpu_iter": 10_000,
         "corr_b": 0.99, "cpu_full_s": 8.0, "cpu_iter": 100, "cpu_engine": "fused",
         "profile": {"kernel_z_ms": 0.01, "loop_ms": 0.05, "loop_with_summary_ms": 0.1}},
        {"label": "M", "n_iter": 10, "target_s": 1.0, "error": "RuntimeError: x"},
    ]}
    rows = gc._gibbs_rows(gibbs)
    assert rows[0]["ok"] and "×10.0" in rows[0]["figure"] and "z 10 µs" in rows[0]["figure"]
    assert not rows[1]["ok"] and "RuntimeError" in rows[1]["figure"]
    priv = {"n": 10**6, "m": 100, "gpu_point_s": 1.0, "cpu_point_s": 3.0, "max_beta_diff": 1e-12,
            "gpu_with_bootstrap_s": 9.0}
    assert gc._private_rows(priv)[0]["ok"]
    json.dumps(rows)


@pytest.mark.skipif(privirt.gpu_available(), reason="checks the no-GPU exit")
def test_no_gpu_exits_2_before_any_step(gc, capsys):
    assert gc.main(["--steps", "tests"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().out


def test_worker_options_are_options_of_the_parser(gc):
    text = Path(gc.__file__).read_text(encoding="utf-8")
    for opt in gc.WORKER_OPTIONS:
        assert f'"--{opt.replace("_", "-")}"' in text

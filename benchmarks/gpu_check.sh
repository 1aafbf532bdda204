#!/usr/bin/env bash
# GPU checklist in one command (90 s on one H200; every step has its own time limit):
#   bash benchmarks/gpu_check.sh
# Installs cupy when it is missing (the wheel for CUDA 12, with the CUDA libraries it
# loads), then runs benchmarks/gpu_check.py: the GPU tests, the counts of 10^7 x 1000, the
# Gibbs cases and the private estimate, each beside the CPU path, and prints a table.
# Extra arguments go to gpu_check.py (e.g. --steps tests,counts).
set -u
cd "$(dirname "$0")/.."
# python3 where there is no `python` (the GPU machines have python3 only)
PY="${PYTHON:-$(command -v python || command -v python3)}"
if ! "$PY" -c "from cupy.cuda import cublas" >/dev/null 2>&1; then
    echo "# cupy (with cuBLAS) not importable: installing cupy-cuda12x" >&2
    "$PY" -m pip install -q "cupy-cuda12x[ctk]" || "$PY" -m pip install -q cupy-cuda12x || {
        echo "# could not install cupy-cuda12x; GPU checks cannot run" >&2
        exit 2
    }
fi
"$PY" -c "import cupy; print('# cupy', cupy.__version__, 'devices:', cupy.cuda.runtime.getDeviceCount())" || true
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
exec "$PY" benchmarks/gpu_check.py "$@"

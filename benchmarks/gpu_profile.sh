#!/usr/bin/env bash
# The benchmarks' GPU rows and a hardware-counter look at the Gibbs kernels, after
# benchmarks/gpu_check.sh (about 4 minutes on one H200; each part has its own time limit):
#   bash benchmarks/gpu_profile.sh
# 1. bench_gibbs.py's GPU rows: the paper's grid, CBASE size and 100 replications, with
#    the vectorised numpy peer;
# 2. Nsight Compute's speed-of-light section (clocks left as they are) for one iteration of
#    the four Gibbs kernels at CBASE size and in the 100-replication batch, when ncu is there;
# 3. bench_spectral.py's GPU row: counts + spectral estimate of 10^7 × 1000 from host int8
#    codes, and the counts of the same data in GPU memory (float16, NaN = missing).
set -u
cd "$(dirname "$0")/.."
PY="${PYTHON:-$(command -v python || command -v python3)}"
echo "## bench_gibbs GPU rows"
timeout -k 5 150 "$PY" benchmarks/bench_gibbs.py --grid paper --device gpu --iter 1000 \
    --peer-iter 10 --cbase --reps 100 --reps-iter 500
if command -v ncu >/dev/null 2>&1; then
    for case in "3356, 180, 1" "2000, 50, 100"; do
        echo "## ncu: Gibbs kernels, (n, k, R) = ($case)"
        timeout -k 5 90 ncu --clock-control none --section SpeedOfLight -k regex:privirt_gibbs \
            --launch-skip 40 --launch-count 4 "$PY" -c "
import privirt
n, k, R = $case
X = [privirt.simulate_2pno(n, k, seed=r)[0] for r in range(R)]
privirt.gibbs_2pno_replicate(X, n_iter=20, warmup=10, device='gpu', progress=False)
" 2>&1 | grep -E "privirt_gibbs|Duration|Throughput|Busy|Elapsed Cycles|ERR|rror" | head -60
    done
else
    echo "## ncu not found: no hardware counters"
fi
# last: a time limit ends bench_spectral.py but not its worker process
echo "## bench_spectral 1e7x1000 GPU"
timeout -k 5 200 "$PY" benchmarks/bench_spectral.py --sizes 1e7x1000 --device gpu --no-baseline

"""``privirt serve``: latency and throughput over HTTP beside the same call in process.

Peers, side by side in one run, on the same data and parameters:

* **in process** (``library``) — the library call with a file :class:`privirt.Ledger` (so it
  debits too), and (``no ledger``) the same call without any ledger (the floor: no debit);
* **HTTP** — the same request through :class:`privirt.client.Client` (urllib, JSON, the result
  object rebuilt) to ``privirt serve run`` (uvicorn, 1 worker, SQLite state) on 127.0.0.1.

* **service in process** — :func:`privirt.serve.service.run_request` on the same state, without
  HTTP (the service's bookkeeping: authentication aside, the budget check, the debit, storing
  the result).

Requests: ``release totals``, ``estimate totals`` with ``n_boot=0`` (the estimate without
its bootstrap, so that the service's own cost is visible) and with its default intervals
(``n_boot=200``), ε = 0.5, δ = 1e-6, on LSAT6 (1000 × 5) and on a simulated 10⁵ × 50 data set.  Sequential requests, the three peers
interleaved (so that they see the same load), give the latency percentiles (p50, p90, p99, ms)
and the added median = median of the paired differences to the library call; then
``--concurrency`` client threads give requests per second.  Nothing is asserted here (target:
≤ 10 ms added at the median on LSAT6).

    python benchmarks/bench_serve.py              # full run (200 requests per cell on LSAT6)
    python benchmarks/bench_serve.py --quick      # fewer requests
    python benchmarks/bench_serve.py --data lsat6 # LSAT6 only
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import privirt  # noqa: E402
from privirt.client import Client  # noqa: E402
from privirt.serve.service import register_dataset, run_request  # noqa: E402
from privirt.serve.store import init_store  # noqa: E402

EPS, DELTA = 0.5, 1e-6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentiles(ms: list[float]) -> str:
    a = np.asarray(ms)
    return f"p50 {np.percentile(a, 50):7.2f}  p90 {np.percentile(a, 90):7.2f}  p99 {np.percentile(a, 99):7.2f}"


def _time(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(1000 * (time.perf_counter() - t))
    return out


def _rate(fn, n: int, threads: int) -> float:
    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _: fn(), range(n)))
    return n / (time.perf_counter() - t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--data", choices=("lsat6", "big", "both"), default="both",
                    help="which data set(s) to measure (default both)")
    args = ap.parse_args(argv)
    n_small = 30 if args.quick else 100
    n_large = 5 if args.quick else 15

    with tempfile.TemporaryDirectory() as tmp:
        state = os.path.join(tmp, "state.db")
        store = init_store(state)
        lsat6 = privirt.as_responses(privirt.load_dataset("lsat6"))
        sets = [("lsat6", lsat6)]
        if args.data != "lsat6":
            X, _, _ = privirt.simulate_rasch(100_000, 50, seed=1)
            sets.append(("big", privirt.as_responses(X)))
            if args.data == "big":
                sets = sets[1:]
        for name, resp in sets:
            register_dataset(store, name=name, resp=resp, epsilon=1e6, delta=DELTA, items=None, n_persons=None,
                             missing="none", source="bench")
        key = store.add_analyst("bench", {name: (1e6, DELTA) for name, _ in sets})
        who = store.authenticate(key, "analyst")
        port = _free_port()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        # one analyst key drives --concurrency threads: allow that many of its requests in flight
        server = subprocess.Popen([sys.executable, "-m", "privirt", "serve", "run", state, "--port", str(port),
                                   "--log-level", "warning", "--max-in-flight", str(max(2, args.concurrency))],
                                  env=env, stdout=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    urllib.request.urlopen(url + "/v1/health", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            client = Client(url, key)
            ledger = privirt.Ledger(os.path.join(tmp, "local.ledger"), epsilon=1e6, delta=DELTA)
            load = os.getloadavg()
            print(f"bench_serve: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
            print("latency in ms (sequential, the peers interleaved); added = median paired difference to library")
            for name, resp in sets:
                n = n_small if name == "lsat6" else n_large
                shape = f"{resp.n_persons}×{resp.n_items}"
                cells = {
                    "release totals": (
                        lambda r=resp, lg=ledger: privirt.release_totals(r, epsilon=EPS, delta=DELTA, ledger=lg),
                        lambda d=name: client.release(d, kind="totals", epsilon=EPS, delta=DELTA)),
                    "estimate totals (n_boot=0)": (
                        lambda r=resp, lg=ledger: privirt.private_totals_estimate(r, epsilon=EPS, delta=DELTA,
                                                                                  ledger=lg, n_boot=0),
                        lambda d=name: client.estimate(d, method="totals", epsilon=EPS, delta=DELTA, n_boot=0)),
                    "estimate totals (default intervals, n_boot=200)": (
                        lambda r=resp, lg=ledger: privirt.private_totals_estimate(r, epsilon=EPS, delta=DELTA,
                                                                                  ledger=lg),
                        lambda d=name: client.estimate(d, method="totals", epsilon=EPS, delta=DELTA)),
                }
                for label, (with_ledger, remote) in cells.items():
                    local = with_ledger
                    params = ({"kind": "totals"} if label.startswith("release") else
                              {"method": "totals", "confidence": 0.95, "n_boot": 0 if "n_boot=0" in label else 200})
                    endpoint = "release" if label.startswith("release") else "estimate"

                    def service(d=name, p=params, e=endpoint):
                        run_request(store, who, d, e, {**p, "epsilon": EPS, "delta": DELTA}, None)

                    def bare(f=with_ledger):  # the same call without a ledger (no debit at all)
                        f(lg=None)

                    peers = {"library": local, "no ledger": bare, "service": service, "HTTP": remote}
                    for fn in peers.values():  # warm up (imports, caches)
                        fn()
                    times = {k: [] for k in peers}
                    for _ in range(n):
                        for k, fn in peers.items():
                            times[k].extend(_time(fn, 1))
                    base = np.asarray(times["library"])
                    print(f"{name} {shape}, {label}:")
                    for k in peers:
                        extra = "" if k == "library" else \
                            f"   added p50 {np.median(np.asarray(times[k]) - base):7.2f}"
                        if k == "HTTP":  # the transport alone: HTTP against the service in process
                            extra += f"   (vs service {np.median(np.asarray(times[k]) - times['service']):6.2f})"
                        print(f"    {k:9s} {_percentiles(times[k])}{extra}")
                    rates = {k: _rate(peers[k], n, args.concurrency) for k in ("library", "HTTP")}
                    print(f"    requests/s with {args.concurrency} threads: library {rates['library']:.1f}, "
                          f"HTTP {rates['HTTP']:.1f}")
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())

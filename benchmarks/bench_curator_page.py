"""The curator page (``GET /curator``) on a large state: CPU seconds of its store reads and of
:func:`privirt.serve.page.render_page`.

The state is built with the package's own functions, as a reviewer built it: ``init_store``,
50 data sets (``Store.add_dataset``), 500 analysts with 3 allowances each (``add_analyst``)
and ``--spends`` debits (``Store.debit``, alternating pure-ε and ρ costs, round-robin over the
allowances).  Building it takes minutes, so it is kept at ``--state`` and reused.  Then
``render_page`` is timed on the first ``n`` spends (CPU seconds, ``time.process_time``) for each
``--n``, and ``Store.allowances()`` / ``Store.spends()`` / ``Store.datasets()`` once each.
Nothing is asserted here.

    python benchmarks/bench_curator_page.py --state STATE.db            # n = 3000, 10 000, 30 000
    python benchmarks/bench_curator_page.py --state STATE.db --n 3000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from privirt.private.accounting import PrivacyCost  # noqa: E402
from privirt.serve import page  # noqa: E402
from privirt.serve.store import init_store, open_store  # noqa: E402


def build(state: Path, spends: int, datasets: int = 50, analysts: int = 500) -> None:
    """The reviewer's state: ``datasets`` data sets, ``analysts`` analysts with 3 allowances each,
    ``spends`` debits."""
    store = init_store(state)
    codes = np.zeros((20, 4), dtype=np.int8)
    for d in range(datasets):
        store.add_dataset(name=f"d{d:02d}", epsilon=1e6, delta=1e-5, n_persons=20,
                          items=[f"i{k}" for k in range(4)], missing="none", codes=codes, source="bench")
    for a in range(analysts):
        store.add_analyst(f"a{a:03d}", {f"d{(a + k) % datasets:02d}": (1e4, 1e-6) for k in range(3)})
    pairs = [(a + 1, (a + k) % datasets + 1) for a in range(analysts) for k in range(3)]
    for s in range(spends):
        aid, did = pairs[s % len(pairs)]
        cost = PrivacyCost(0.0, 0.01, 0.0) if s % 2 else PrivacyCost(1e-4, 0.0, 0.0)
        store.debit(analyst_id=aid, dataset_id=did, cost=cost, mechanism="laplace", endpoint="release",
                    params={"kind": "counts", "epsilon": 0.01, "delta": 0.0}, idem_key=None)


def _cpu(fn):
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--state", type=Path, required=True, help="the state (built there if absent)")
    p.add_argument("--spends", type=int, default=30000, help="debits of a state built anew")
    p.add_argument("--n", type=int, nargs="+", default=[3000, 10000, 30000])
    args = p.parse_args(argv)
    if not args.state.exists():
        _, s = _cpu(lambda: build(args.state, args.spends))
        print(f"built {args.state} ({args.spends} spends) in {s:.1f} CPU s")
    store = open_store(args.state)
    ds, t_ds = _cpu(store.datasets)
    al, t_al = _cpu(store.allowances)
    sp, t_sp = _cpu(store.spends)
    an, ev = store.analysts(), store.events()
    print(f"datasets() {t_ds:.2f} s   allowances() {t_al:.2f} s ({len(al)})   spends() {t_sp:.2f} s ({len(sp)})")
    if hasattr(store, "newest_spends"):
        (_, n_all), t_new = _cpu(lambda: store.newest_spends(page.AUDIT_ROWS))
        print(f"newest_spends({page.AUDIT_ROWS}) {t_new:.2f} s (of {n_all})")
    for n in args.n:
        html, t = _cpu(lambda: page.render_page(ds, al, sp[:n], an, ev))
        print(f"render_page, {n:6d} spends: {t:6.2f} CPU s  ({len(html) / 1e6:.1f} MB of HTML)")
    _, t = _cpu(lambda: _whole_page(store))
    print(f"GET /curator's work (its store reads and render_page): {t:.2f} CPU s")
    return 0


def _whole_page(store) -> str:
    """What ``GET /curator`` computes (``privirt/serve/routers/curator.py``; before session 29 it
    read every spend in full)."""
    if not hasattr(store, "spend_costs"):
        return page.render_page(store.datasets(), store.allowances(), store.spends(), store.analysts(),
                                store.events())
    return page.render_page(store.datasets(), store.allowances(), store.spend_costs(), store.analysts(),
                            store.events(), audit=store.newest_spends(page.AUDIT_ROWS))


if __name__ == "__main__":
    raise SystemExit(main())

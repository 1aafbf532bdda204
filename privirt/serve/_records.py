"""The record's reads of :class:`privirt.serve.store.Store`: the spends (all, the newest few, or
only their costs) and the allowances with the exact sums of what was spent on each.

The curator page reads the costs of every spend (its plots compose them) but shows only the
newest :data:`privirt.serve.page.AUDIT_ROWS` spends in full, so it reads those
(:func:`newest_spends`) and the light :func:`spend_costs` of the rest, not every spend's request
(its JSON parameters) as :func:`spends` does.
"""

from __future__ import annotations

import json
from typing import Any

from ._budget import Spent, spent_rows

__all__ = ["spends", "newest_spends", "spend_costs", "allowance_sums"]

_SPENDS = ("SELECT s.id, s.request_id, s.time, an.name, d.name, r.endpoint, s.mechanism, s.rho,"
           " s.epsilon, s.delta, r.status, r.params FROM spends s JOIN analysts an ON an.id = s.analyst_id"
           " JOIN datasets d ON d.id = s.dataset_id JOIN requests r ON r.id = s.request_id")


def _spend(r) -> dict:
    return {"id": int(r[0]), "request_id": r[1], "time": r[2], "analyst": r[3], "dataset": r[4],
            "endpoint": r[5], "mechanism": r[6], "rho": float(r[7]), "epsilon": float(r[8]),
            "delta": float(r[9]), "status": r[10], "params": json.loads(r[11])}


def spends(b: Any, analyst_id: int | None = None) -> list[dict]:
    """Every spend (of one analyst, or of all), oldest first."""
    sql, args = _SPENDS, ()
    if analyst_id is not None:
        sql, args = sql + " WHERE s.analyst_id = ?", (analyst_id,)
    with b.read() as con:
        rows = con.execute(b.q(sql + " ORDER BY s.id"), args).fetchall()
    spent_rows(b.describe, [r[7:10] for r in rows])  # (a hand-edited cost: one line, not float('abc'))
    return [_spend(r) for r in rows]


def newest_spends(b: Any, limit: int) -> tuple[list[dict], int]:
    """The newest ``limit`` spends (oldest of them first, as :func:`spends`) and the number of
    all spends, read in one transaction."""
    with b.read() as con:
        n = int(con.execute("SELECT COUNT(*) FROM spends").fetchone()[0])
        rows = con.execute(b.q(_SPENDS + " ORDER BY s.id DESC LIMIT ?"), (int(limit),)).fetchall()
    spent_rows(b.describe, [r[7:10] for r in rows])
    return [_spend(r) for r in reversed(rows)], n


def spend_costs(b: Any) -> list[dict]:
    """Every spend's ``time``, ``analyst``, ``dataset``, ``rho``, ``epsilon`` and ``delta``,
    oldest first (what the curator page's plots compose)."""
    with b.read() as con:
        rows = con.execute("SELECT s.time, an.name, d.name, s.rho, s.epsilon, s.delta FROM spends s"
                           " JOIN analysts an ON an.id = s.analyst_id JOIN datasets d ON d.id = s.dataset_id"
                           " ORDER BY s.id").fetchall()
    spent_rows(b.describe, [r[3:6] for r in rows])
    return [{"time": r[0], "analyst": r[1], "dataset": r[2], "rho": float(r[3]), "epsilon": float(r[4]),
             "delta": float(r[5])} for r in rows]


def allowance_sums(b: Any) -> list[tuple[tuple, Spent]]:
    """Every allowance's row (analyst id, name, revoked; data set id, name; ε, δ) with the exact
    sums of its spends, ordered by analyst and data set.

    The spends' (ρ, ε, δ) are read once and summed exactly per allowance (:class:`Spent`, as
    the debit's exact check sums them); the database's ``SUM`` would not do here: a composed
    total stated from it could lie below the exact one (the debit's fast path only decides
    that a cost *surely* fits, from widened sums, and states no total)."""
    with b.read() as con:
        rows = con.execute(
            "SELECT an.id, an.name, an.revoked, d.id, d.name, a.epsilon, a.delta FROM allowances a"
            " JOIN analysts an ON an.id = a.analyst_id JOIN datasets d ON d.id = a.dataset_id"
            " ORDER BY an.name, d.name").fetchall()
        costs: dict[tuple[int, int], list] = {}
        for r in con.execute("SELECT analyst_id, dataset_id, rho, epsilon, delta FROM spends"):
            costs.setdefault((int(r[0]), int(r[1])), []).append(r[2:])
    return [(r, spent_rows(b.describe, costs.get((int(r[0]), int(r[3])), []))) for r in rows]

"""``privirt estimate --model 2pl --epsilon E``: private 2PNO discriminations and difficulties
(:func:`privirt.private_2pl_estimate`), with 95 % intervals and the privacy statement."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: options of ``privirt estimate`` that have no meaning for the 2PL model
_RASCH_ONLY = ("method", "mechanism", "p0", "estimator", "shuffle", "regularization")


def check(args: argparse.Namespace) -> None:
    """Refuse, before anything is read or spent, options that do not apply to ``--model 2pl``."""
    if args.epsilon is None:
        raise ValueError("--model 2pl is private here: give --epsilon (and --delta); for the "
                         "non-private 2PNO use `privirt gibbs FILE`")
    given = [f"--{o.replace('_', '-')}" for o in _RASCH_ONLY if getattr(args, o, None) is not None]
    if given:
        raise ValueError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to the Rasch "
                         "model only; drop it for --model 2pl")
    if getattr(args, "engine", "local") != "local" or getattr(args, "scheduler", None):
        raise ValueError("--model 2pl runs on a local file only (no --engine dask / --scheduler)")
    if args.missing == "mcar":
        raise ValueError("--model 2pl is defined on complete data only (--missing none); use the Rasch "
                         "totals estimator (--method totals --missing mcar) for data with missing cells")


def run(args: argparse.Namespace) -> int:
    """Validate, estimate privately, print the table and the statement, write ``--out``."""
    import pandas as pd

    from ..ledger import Ledger
    from ..private.twopl import private_2pl_estimate
    from ..responses import as_responses
    from .estimate import _check_out, _check_top_k, format_table, public_items, write_table

    check(args)
    _check_out(args.out)
    if args.seed is not None and args.ledger is not None:
        raise ValueError(
            "--seed makes the noise reproducible, so the result is NOT private, and --ledger "
            "records private releases only; drop --seed to spend from the ledger, or --ledger for "
            "a reproducible non-private run (nothing was spent)"
        )
    resp = as_responses(args.file, format=args.format or "auto", empty="keep", person_col=args.person_col,
                        weights=args.weights_col)
    items = None if args.items is None else public_items(args.items, resp.items)
    _check_top_k(args.top_k, resp.n_items if items is None else len(items))
    if getattr(resp, "items_from_data", False) and (args.n_persons is None or items is None):
        raise ValueError("a private run on a long (person, item, response) table needs the public "
                         "item list and number of persons: --items LIST|@FILE and --n-persons N")
    if resp.has_missing or (args.n_persons is not None and args.n_persons > resp.n_persons):
        raise ValueError(f"{Path(args.file).name} has missing cells (or --n-persons counts absent persons) "
                         "but --model 2pl is defined on complete data only; use the Rasch totals "
                         "estimator with --missing mcar (nothing was spent)")
    ledger = Ledger(args.ledger) if args.ledger is not None else None
    delta = args.delta if args.delta is not None else (ledger.delta if ledger is not None else 1e-4)
    res = private_2pl_estimate(resp, epsilon=args.epsilon, delta=delta, ledger=ledger, seed=args.seed,
                               items=items, n_persons=args.n_persons,
                               note=f"privirt estimate --model 2pl {Path(args.file).name}")
    table = res.to_frame()
    table.index.name = "item"
    statement = res.privacy
    print(f"private 2PL estimate: {statement.n_persons} persons × {len(table)} items "
          "(2PNO: P = Φ(a θ − b), θ ~ N(0, 1); ×1.702 for the logistic scale)")
    print(format_table(table))
    if args.top_k is not None:
        top = table["a"].sort_values(ascending=False, kind="stable").index[: args.top_k]
        print(f"top {args.top_k} most discriminating: " + ", ".join(str(t) for t in top))
    print(str(statement))
    if args.out is not None:
        meta = {"method": "2pl", "model": "2pl", "n_persons": statement.n_persons, "n_items": len(table),
                "privacy": statement.to_dict()}
        write_table(pd.DataFrame(table), args.out, meta, str(statement))
        print(f"wrote {args.out}", file=sys.stderr)
    return 0

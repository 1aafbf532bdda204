"""``privirt budget``: create and inspect a privacy budget ledger.

``privirt budget init PATH --epsilon E --delta D`` creates the SQLite ledger of one data
set's total budget; ``privirt budget show PATH`` prints the budget, the spends (the newest 200), the total
spent (composed as in :mod:`privirt.private.ledger`) and what remains.  Spending happens through the
private commands and functions (``privirt estimate FILE --epsilon E --ledger PATH``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ._types import Once, nonempty_path, number


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "budget",
        help="create or show a privacy budget ledger",
        description="Create or inspect the privacy budget ledger (an SQLite file) of a data "
        "set.  Neighbouring relation: replace one person's row.",
    )
    sub = parser.add_subparsers(dest="budget_command", metavar="ACTION")
    init = sub.add_parser("init", help="create a ledger with a total (ε, δ) budget")
    init.add_argument("path", metavar="PATH", type=nonempty_path, help="ledger file to create")
    init.add_argument("--epsilon", action=Once, type=number, required=True, metavar="E", help="total ε (> 0)")
    init.add_argument("--delta", action=Once, type=number, required=True, metavar="D", help="total δ in (0, 1)")
    init.set_defaults(func=run_init)
    show = sub.add_parser("show", help="print the budget, the spends (the newest 200; --json: all) and what remains")
    show.add_argument("path", metavar="PATH", type=nonempty_path, help="ledger file")
    show.add_argument("--json", action="store_true", help="print a JSON document instead")
    show.set_defaults(func=run_show)
    parser.set_defaults(func=_help(parser))


def _help(parser: argparse.ArgumentParser):
    def run(args: argparse.Namespace) -> int:
        raise ValueError("give an action: `privirt budget init PATH ...` or `privirt budget show PATH`")

    return run


def run_init(args: argparse.Namespace) -> int:
    from ..private.accounting import check_delta, check_epsilon
    from mechanisms.measures import format_exact
    from ..private.ledger import Ledger, check_not_folder

    import math
    import os

    if not (math.isfinite(args.epsilon) and args.epsilon > 0):
        raise ValueError(f"a ledger's total budget --epsilon must be a finite number > 0, got {args.epsilon:g}")
    eps = check_epsilon(args.epsilon)
    dlt = check_delta(args.delta)
    exists = ValueError(
        f"{args.path} already exists; a ledger's budget cannot be reset — use `privirt "
        "budget show` to inspect it, or choose a new path"
    )
    check_not_folder(Path(args.path), Path(args.path))  # (before: a folder is no ledger that "already exists")
    if os.path.exists(args.path):  # (never raises: a name too long is refused by Ledger below)
        raise exists
    try:
        led = Ledger(args.path, epsilon=eps, delta=dlt)
    except ValueError:
        if os.path.exists(args.path):  # another process created it, with another budget, after the check
            raise exists from None
        raise
    if not led.created:  # another process created it after the check above: this call did not
        raise exists
    print(f"created ledger {led.path}: budget ε = {format_exact(led.epsilon)}, δ = {format_exact(led.delta)} "
          f"(neighbouring relation: {led.relation})")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from ..private.ledger import Ledger

    led = Ledger(args.path)  # a missing, damaged or foreign file: one line naming it (LedgerError)
    if args.json:
        account = led.account()  # one read: a spend landing meanwhile is in every number or none
        spends = account["spends"].reset_index()
        spends = spends.astype(object).where(spends.notna(), None)  # JSON has no NaN: null
        spent = account["spent"]
        doc = {
            "path": str(led.path),
            "relation": led.relation,
            "budget": {"epsilon": led.epsilon, "delta": led.delta},
            "spent": {"epsilon": spent.epsilon, "delta": spent.delta},
            "remaining_epsilon": account["remaining_epsilon"],
            "remaining_gaussian_epsilon": account["remaining_gaussian_epsilon"],
            "delta_spent": account["delta_spent"],
            "spends": spends.to_dict(orient="records"),
        }
        print(json.dumps(doc, indent=2))
    else:
        print(led.summary())
    return 0

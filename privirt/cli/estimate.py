"""``privirt estimate FILE``: item difficulties from a responses file.

Options live in :func:`add_arguments` (one place, so that more estimators and privacy options
can be added there); :func:`run` dispatches on ``--method``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

import pandas as pd

#: ``--method`` name -> function(responses, args) -> DataFrame indexed by item
METHODS: dict[str, Callable[..., pd.DataFrame]] = {}


def _method(name: str):
    def wrap(fn):
        METHODS[name] = fn
        return fn

    return wrap


@_method("spectral")
def _spectral(resp, args: argparse.Namespace) -> pd.DataFrame:
    from ..spectral import spectral_estimate

    res = spectral_estimate(resp, device=args.device)
    return pd.DataFrame({"beta": res.beta})


@_method("cmle")
def _cmle(resp, args: argparse.Namespace) -> pd.DataFrame:
    from ..cmle import cmle_estimate

    res = cmle_estimate(resp)
    return pd.DataFrame({"beta": res.beta, "se": res.se})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """All options of ``privirt estimate`` (add new ones here)."""
    parser.add_argument("file", metavar="FILE", help="responses as .csv, .tsv or .parquet")
    parser.add_argument(
        "--format",
        choices=("wide", "long"),
        default=None,
        help="table layout: wide (rows persons, columns items) or long (person,item,response); "
        "default: guessed from the columns",
    )
    parser.add_argument(
        "--method", choices=sorted(METHODS), default="spectral", help="estimator (default: spectral)"
    )
    parser.add_argument(
        "--top-k", type=_positive_int, default=None, metavar="K",
        help="also list the K hardest items",
    )
    parser.add_argument(
        "--out", type=Path, default=None, metavar="PATH",
        help="write the table to PATH (.csv or .json, by suffix)",
    )
    parser.add_argument(
        "--device", choices=("auto", "cpu", "gpu"), default="auto",
        help="where array computations run (default: auto)",
    )


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "estimate",
        help="estimate Rasch item difficulties from a responses file",
        description="Estimate Rasch item difficulties (centred, higher = harder) from a file "
        "of 0/1 responses and print them as a table.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _check_out(path: Path | None) -> None:
    if path is not None and path.suffix.lower() not in (".csv", ".json"):
        raise ValueError(f"--out must end in .csv or .json, got {path.name!r}")


def load(args: argparse.Namespace):
    """The validated responses named on the command line."""
    from ..responses import as_responses

    return as_responses(args.file, format=args.format or "auto")


def write_table(table: pd.DataFrame, path: Path, meta: dict | None = None) -> None:
    """Write ``table`` (indexed by item) as CSV or JSON according to the suffix."""
    if path.suffix.lower() == ".csv":
        table.to_csv(path, index_label="item")
    else:
        records = [
            {"item": _jsonable(item), **{k: float(v) for k, v in row.items()}}
            for item, row in table.iterrows()
        ]
        payload = {**(meta or {}), "items": records}
        path.write_text(json.dumps(payload, indent=2) + "\n")


def _jsonable(value):
    return value.item() if hasattr(value, "item") else value


def format_table(table: pd.DataFrame) -> str:
    return table.to_string(float_format=lambda v: f"{v: .4f}", index_names=False)


def run(args: argparse.Namespace) -> int:
    _check_out(args.out)
    if args.top_k is not None and args.top_k < 1:
        raise ValueError("--top-k must be a positive integer")
    resp = load(args)
    table = METHODS[args.method](resp, args)
    table.index.name = "item"
    if args.top_k is not None and args.top_k > len(table):
        raise ValueError(f"--top-k {args.top_k} exceeds the number of items ({len(table)})")
    print(f"{args.method} estimate: {resp.n_persons} persons × {resp.n_items} items "
          f"(beta centred, higher = harder)")
    print(format_table(table))
    if args.top_k is not None:
        top = table["beta"].sort_values(ascending=False, kind="stable").index[: args.top_k]
        print(f"top {args.top_k} hardest: " + ", ".join(str(t) for t in top))
    if args.out is not None:
        write_table(table, args.out, {"method": args.method, "n_persons": resp.n_persons,
                                      "n_items": resp.n_items})
        print(f"wrote {args.out}", file=sys.stderr)
    return 0

"""``privirt estimate FILE``: item difficulties from a responses file.

Options live in :func:`add_arguments` (one place, so that more estimators and privacy options
can be added there); :func:`run` dispatches on ``--method``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pandas loads when a command runs, not when the parser is built
    import pandas as pd

from ._paths import check_output_file
from ._types import number, positive_int

#: ``--method`` name -> function(responses, args) -> DataFrame indexed by item
METHODS: dict[str, Callable[..., pd.DataFrame]] = {}


def _method(name: str):
    def wrap(fn):
        METHODS[name] = fn
        return fn

    return wrap


@_method("spectral")
def _spectral(resp, args: argparse.Namespace) -> pd.DataFrame:
    import pandas as pd

    from ..spectral import spectral_estimate

    reg = "auto" if args.regularization is None else args.regularization
    res = spectral_estimate(resp, device=args.device, regularization=reg)
    return pd.DataFrame({"beta": res.beta})


@_method("cmle")
def _cmle(resp, args: argparse.Namespace) -> pd.DataFrame:
    import pandas as pd

    from ..cmle import cmle_estimate

    res = cmle_estimate(resp)
    return pd.DataFrame({"beta": res.beta, "se": res.se})


def _regularization(text: str) -> float:
    value = number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


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
        "--person-col", default=None, metavar="COL",
        help="wide tables: the column with the person labels (default: a column named "
        "'person', or an unnamed first column)",
    )
    parser.add_argument(
        "--weights-col", default=None, metavar="COL",
        help="a pattern table: COL holds how many persons gave each row's answers (e.g. "
        "'frequency' in the bundled LSAT files); rows are expanded into persons",
    )
    parser.add_argument(
        "--method", choices=sorted({*METHODS, "totals"}), default=None,
        help="estimator (default: spectral; with --epsilon, the private one measured most "
        "accurate for the public n, m and ε: totals, or spectral = Algorithm 2)"
    )
    parser.add_argument(
        "--model", choices=("rasch", "2pl"), default="rasch",
        help="rasch (difficulties; default) or 2pl (discriminations a and difficulties b of the "
        "2PNO, private only: needs --epsilon)",
    )
    parser.add_argument(
        "--regularization", type=_regularization, default=None, metavar="L",
        help="spectral: pseudo-count λ ≥ 0 added to compared pairs (default: auto, λ = 1); "
        "0 refuses data whose comparison graph is disconnected",
    )
    parser.add_argument(
        "--top-k", type=positive_int, default=None, metavar="K",
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
    add_privacy_arguments(parser)
    from ._dask import add_engine_arguments

    add_engine_arguments(parser)  # --engine dask, --scheduler


# -- private estimation (the accounting issue) ----------------------------------------------
#: private options that only make sense together with --epsilon
_PRIVATE_ONLY = ("delta", "mechanism", "p0", "estimator", "ledger", "seed", "shuffle", "items", "n_persons",
                 "missing")


def _p0(text: str):
    return text if text == "auto" else number(text)


def add_privacy_arguments(parser: argparse.ArgumentParser) -> None:
    """``--epsilon`` and friends: differentially private estimation (spectral only)."""
    group = parser.add_argument_group(
        "differential privacy",
        "With --epsilon the spectral estimate is computed privately (Algorithm 2; neighbouring "
        "relation: replace one person's row) and its privacy statement is printed.",
    )
    group.add_argument("--epsilon", type=number, default=None, metavar="E",
                       help="privacy ε > 0: estimate privately")
    group.add_argument("--delta", type=number, default=None, metavar="D",
                       help="privacy δ in (0, 1) (default: the ledger's δ, else 1e-4)")
    group.add_argument("--mechanism", choices=("gaussian", "laplace", "randomized_response"),
                       default=None, help="noise mechanism (default: gaussian)")
    group.add_argument("--p0", type=_p0, default=None, metavar="P",
                       help="edge probability of the comparison graph in (0, 1], or 'auto' "
                       "(default 1: complete graph)")
    group.add_argument("--estimator", choices=("auto", "spectral", "noise_aware"), default=None,
                       help="Algorithm 2's post-processing of the noisy counts: spectral (as "
                       "published), noise_aware (a likelihood that knows the noise), or auto "
                       "(default: noise_aware where measured better, from public n, m, ε, δ)")
    group.add_argument("--shuffle", action="store_true", default=None,
                       help="randomized response: shuffle reports and claim amplification")
    group.add_argument("--ledger", type=Path, default=None, metavar="PATH",
                       help="budget ledger to debit (created with `privirt budget init`)")
    group.add_argument("--seed", type=int, default=None, metavar="N",
                       help="reproducible noise — the result is then NOT private (refused "
                       "together with --ledger)")
    group.add_argument("--items", default=None, metavar="LIST",
                       help="the public item set, comma-separated or @FILE (one label a line); "
                       "required for a long table, whose items are otherwise read from the data")
    group.add_argument("--n-persons", type=positive_int, default=None, metavar="N",
                       help="the public number of persons; required for a long table, which lists "
                       "only persons with answers (absent persons count as all-missing rows)")
    group.add_argument("--missing", choices=("none", "mcar"), default=None,
                       help="the declared input domain: none (complete data; default) or mcar "
                       "(cells missing completely at random: the totals method also releases "
                       "answered counts); chooses the default method and is passed to totals")


def public_items(spec: str, data_items: pd.Index) -> list:
    """The labels of ``--items`` (``a,b,c`` or ``@FILE``), matched to the data's labels by
    their text (a long table's item column may be read as numbers)."""
    if spec.startswith("@"):
        path = Path(spec[1:])
        if not path.is_file():
            raise ValueError(f"--items {spec}: no such file {path}")
        names = [line.strip() for line in path.read_text().splitlines()]
        names = [n for n in names if n]
    else:
        names = [n.strip() for n in spec.split(",")]
        if any(not n for n in names):
            raise ValueError(f"--items {spec!r}: empty label (use a,b,c or @FILE)")
    if len(names) < 2:
        raise ValueError(f"--items needs at least 2 item labels, got {names}")
    by_text = {str(label): label for label in data_items}
    return [by_text.get(n, n) for n in names]


def _private_method(args: argparse.Namespace, n_persons: int, n_items: int, delta: float) -> str:
    """The private estimator: ``--method`` if given, else the default for the public n, m, ε, δ."""
    from ..private.choose import PRIVATE_METHODS, default_private_method

    if args.method is None:
        if any(getattr(args, o) is not None for o in ("mechanism", "p0", "shuffle", "estimator")):
            return "spectral"  # options of Algorithm 2 ask for it
        return default_private_method(n_persons, n_items, args.epsilon, delta,
                                      missing=args.missing or "none")
    if args.method not in PRIVATE_METHODS:
        raise ValueError(f"--method {args.method} has no private version; with --epsilon use "
                         f"{' or '.join(PRIVATE_METHODS)}")
    return args.method


def _private_table(resp, args: argparse.Namespace, items: list | None):
    import pandas as pd

    from ..ledger import Ledger

    ledger = None
    if args.ledger is not None:
        ledger = Ledger(args.ledger)  # must exist: a typo must not create a fresh budget
    delta = args.delta
    if delta is None:  # default: the ledger's δ (the δ its total is stated at), else 1e-4
        delta = ledger.delta if ledger is not None else 1e-4
    if getattr(resp, "items_from_data", False) and (args.n_persons is None or items is None):
        # a long table's persons and items are read from its rows: only the public values may
        # choose the method (validate_call refuses the same call, in the API's words)
        raise ValueError("a private run on a long (person, item, response) table needs the public "
                         "item list and number of persons: --items LIST|@FILE and --n-persons N")
    n_public = args.n_persons if args.n_persons is not None else resp.n_persons
    n_items = len(items) if items is not None else resp.n_items
    method = _private_method(args, n_public, n_items, delta)
    if args.method == "spectral" and args.missing is not None:
        raise ValueError("--missing applies to --method totals; Algorithm 2 (--method spectral) handles "
                         "missing cells as they are")
    note = f"privirt estimate {Path(args.file).name}"
    if method == "totals":
        from ..totals import private_totals_estimate

        spectral_only = [f"--{o}" for o in ("mechanism", "p0", "shuffle", "estimator") if getattr(args, o) is not None]
        if spectral_only:
            raise ValueError(f"{', '.join(spectral_only)} {'applies' if len(spectral_only) == 1 else 'apply'} "
                             "to --method spectral (Algorithm 2) only; the totals estimator uses the "
                             "discrete Gaussian")
        missing = args.missing or "none"
        if missing == "none" and getattr(resp, "has_missing", False):
            raise ValueError(f"{Path(args.file).name} has missing cells but the totals method was run "
                             "for complete data: declare --missing mcar (missing completely at "
                             "random) or use --method spectral (nothing was spent)")
        if missing == "none" and args.n_persons is not None and args.n_persons > resp.n_persons:
            raise ValueError(f"--n-persons {args.n_persons} counts persons absent from "
                             f"{Path(args.file).name}; they are all-missing rows, so declare "
                             "--missing mcar or use --method spectral (nothing was spent)")
        res = private_totals_estimate(resp, epsilon=args.epsilon, delta=delta, ledger=ledger,
                                      seed=args.seed, items=items, note=note,
                                      n_persons=args.n_persons, missing=missing)
        table = pd.DataFrame({"beta": res.beta, "se": res.se, "lo": res.ci["lo"], "hi": res.ci["hi"]})
        return method, table, res.privacy

    from ..private import private_spectral_estimate

    res = private_spectral_estimate(
        resp,
        epsilon=args.epsilon,
        delta=delta,
        mechanism=args.mechanism or "gaussian",
        p0=1.0 if args.p0 is None else args.p0,
        shuffle=bool(args.shuffle),
        ledger=ledger,
        seed=args.seed,
        device=args.device,
        note=note,
        items=items,
        n_persons=args.n_persons,
        estimator=args.estimator or "auto",
    )
    table = pd.DataFrame({"beta": res.beta})
    if res.se is not None:  # Gaussian/Laplace counts: bootstrap intervals (docs/intervals.md)
        table = table.assign(se=res.se, lo=res.ci["lo"], hi=res.ci["hi"])
    return method, table, res.privacy


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "estimate",
        help="estimate Rasch item difficulties from a responses file",
        description="Estimate Rasch item difficulties (centred, higher = harder) from a file "
        "of 0/1 responses and print them as a table.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def _check_out(path: Path | None) -> None:
    # checked before any estimate (and before a private one spends budget)
    if path is not None:
        check_output_file(path, "--out", (".csv", ".json"))


def _check_top_k(top_k: int | None, n_items: int) -> None:
    if top_k is not None and top_k > n_items:
        raise ValueError(f"--top-k {top_k} exceeds the number of items ({n_items})")


def load(args: argparse.Namespace):
    """The validated responses named on the command line."""
    from ..responses import as_responses

    return as_responses(args.file, format=args.format or "auto", person_col=args.person_col,
                        weights=args.weights_col)


def write_table(table: pd.DataFrame, path: Path, meta: dict | None = None,
                statement: str | None = None) -> None:
    """Write ``table`` (indexed by item) as CSV or JSON according to the suffix.

    ``statement`` (a private run's privacy statement) leads a CSV file as ``#`` comment lines
    (read it back with ``pandas.read_csv(path, comment="#")``); JSON carries it in ``meta``.
    """
    if path.suffix.lower() == ".csv":
        with path.open("w", encoding="utf-8", newline="") as fh:
            for line in (statement or "").splitlines():
                fh.write(f"# {line}\n")
            table.to_csv(fh, index_label="item")
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
    if getattr(args, "model", "rasch") == "2pl":
        from .estimate_2pl import run as run_2pl

        return run_2pl(args)
    _check_out(args.out)
    if args.top_k is not None and args.top_k < 1:
        raise ValueError("--top-k must be a positive integer")
    private = getattr(args, "epsilon", None) is not None
    if not private:
        given = [f"--{name.replace('_', '-')}" for name in _PRIVATE_ONLY
                 if getattr(args, name, None) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} --epsilon "
                             "(private estimation)")
    if getattr(args, "engine", "local") != "local" or getattr(args, "scheduler", None):
        from ._dask import run_dask

        return run_dask(args)
    statement = None
    if private and args.seed is not None and args.ledger is not None:
        raise ValueError(
            "--seed makes the noise reproducible, so the result is NOT private, and --ledger "
            "records private releases only; drop --seed to spend from the ledger, or --ledger for "
            "a reproducible non-private run (nothing was spent)"
        )
    if private:
        # The item and person sets are public: never drop "empty" ones by a data-dependent
        # rule (whether an item is empty can hinge on one person).
        from ..responses import as_responses

        if args.regularization is not None:
            raise ValueError("--regularization applies to the non-private spectral estimate only")
        resp = as_responses(args.file, format=args.format or "auto", empty="keep",
                            person_col=args.person_col, weights=args.weights_col)
        items = None if args.items is None else public_items(args.items, resp.items)
        _check_top_k(args.top_k, resp.n_items if items is None else len(items))  # public
        method, table, statement = _private_table(resp, args, items)
        n_persons = statement.n_persons  # public: never the data's count
    else:
        method = args.method or "spectral"
        if method == "totals":
            raise ValueError("--method totals is a private estimator: give --epsilon (and --delta)")
        resp = load(args)
        _check_top_k(args.top_k, resp.n_items)
        if args.regularization is not None and method != "spectral":
            raise ValueError("--regularization applies to --method spectral only")
        table = METHODS[method](resp, args)
        n_persons = resp.n_persons
    return show_result(table, args, method=method, n_persons=n_persons, statement=statement)


def show_result(table: pd.DataFrame, args: argparse.Namespace, *, method: str, n_persons: int,
                statement=None, engine: str | None = None) -> int:
    """Print the estimate table (and the privacy statement of a private run); write ``--out``."""
    table.index.name = "item"
    label = f"private {method}" if statement is not None else method
    where = f" ({engine})" if engine else ""
    print(f"{label} estimate{where}: {n_persons} persons × {len(table)} items "
          f"(beta centred, higher = harder)")
    print(format_table(table))
    if args.top_k is not None:
        top = table["beta"].sort_values(ascending=False, kind="stable").index[: args.top_k]
        print(f"top {args.top_k} hardest: " + ", ".join(str(t) for t in top))
    if statement is not None:
        print(str(statement))
    if args.out is not None:
        meta = {"method": method, **({"engine": engine} if engine else {}),
                "n_persons": n_persons, "n_items": len(table)}
        if statement is not None:
            meta["privacy"] = statement.to_dict()
        write_table(table, args.out, meta, None if statement is None else str(statement))
        print(f"wrote {args.out}", file=sys.stderr)
    return 0

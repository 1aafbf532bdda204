"""``privirt estimate FILE``: item difficulties from a responses file.

Options live in :func:`add_arguments` (one place, so that more estimators and privacy options
can be added there); :func:`run` dispatches on ``--method``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pandas loads when a command runs, not when the parser is built
    import pandas as pd

from .._checks import check_n_boot
from .._constants import DEFAULT_DELTA, DEFAULT_DELTA_TEXT, MECHANISMS, MISSING_DOMAINS
from ._input import public_items
from ._missing import check_complete
from ._paths import check_output_file, out_not_written
from ._stdout import flush_or_fail, not_printed, silence_stdout, stdout_closed
from ._table import format_table, write_table
from ._types import (REGULARIZATION_HELP, Once, nonempty_file, nonempty_path, nonnegative_int, number,
                     positive_int, regularization)

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

    from ..rasch.spectral import spectral_estimate

    reg = "auto" if args.regularization is None else args.regularization
    res = spectral_estimate(resp, device=args.device, regularization=reg)
    return pd.DataFrame({"beta": res.beta})


@_method("cmle")
def _cmle(resp, args: argparse.Namespace) -> pd.DataFrame:
    import pandas as pd

    from ..rasch.cmle import cmle_estimate

    # (--device gpu was refused before the data were read, in run()); progress None: only on a terminal
    res = cmle_estimate(resp, progress=False if args.no_progress else None)
    return pd.DataFrame({"beta": res.beta, "se": res.se})


def _method_name(text: str) -> str:
    """``--method``: a non-private estimator or a registered private method (checked when the
    command line is parsed, so that building the parser stays free of numpy)."""
    from ..private import methods

    known = sorted({*METHODS, *methods.names()})
    if text in methods.names(None) and text not in known:  # a registered method of another model
        model = methods.get(text).model
        raise argparse.ArgumentTypeError(
            f"{text} is the private method of the {model.upper()} model: give --model {model} instead "
            "(--method chooses among the Rasch model's estimators)")
    if text not in known:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {text!r} (choose from {', '.join(map(repr, known))})")
    return text


def _models() -> tuple[str, ...]:
    """``--model`` choices: ``rasch`` and the model of every registered private method."""
    from ..private import methods

    return tuple(dict.fromkeys(["rasch", *(methods.get(n).model for n in methods.names(None))]))


def _model_name(text: str) -> str:
    """``--model``: one of :func:`_models`, checked when parsed (as ``--method``: no numpy at build)."""
    if text not in (known := _models()):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(map(repr, known))})")
    return text


def _other_models() -> str:
    """``--model M`` for each model but the Rasch model's (its private methods are no ``--method``)."""
    return " or ".join(f"--model {m} for the {m.upper()}" for m in _models() if m != "rasch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """All options of ``privirt estimate`` (add new ones here)."""
    from ._input import FILE_HELP, add_long_columns

    parser.add_argument("file", metavar="FILE", type=nonempty_file, help=FILE_HELP)
    parser.add_argument(
        "--format",
        choices=("wide", "long"),
        default=None,
        help="table layout: wide (rows persons, columns items) or long (person,item,response); "
        "default: guessed from the columns",
    )
    parser.add_argument(
        "--person-col", default=None, metavar="COL",
        help="the column with the person labels (wide default: a column named 'person', or an "
        "unnamed first column; long default: person)",
    )
    add_long_columns(parser)
    parser.add_argument(
        "--weights-col", default=None, metavar="COL",
        help="a pattern table: COL holds how many persons gave each row's answers (e.g. "
        "'frequency' in the bundled LSAT files); rows are expanded into persons",
    )
    parser.add_argument(
        "--method", type=_method_name, default=None, metavar="NAME",
        help="estimator: spectral or cmle (default: spectral; with --epsilon, the private method "
        "measured most accurate for the public n, m and ε: totals, or spectral = Algorithm 2)"
    )
    parser.add_argument(
        "--model", type=_model_name, default="rasch", metavar="MODEL",
        help="rasch (difficulties; default) or 2pl (discriminations a and difficulties b of the "
        "2PNO, private only: needs --epsilon)",
    )
    parser.add_argument(
        "--regularization", type=regularization, default=None, metavar="L", help=REGULARIZATION_HELP,
    )
    parser.add_argument(
        "--top-k", type=positive_int, default=None, metavar="K",
        help="also list the K hardest items (with --model 2pl: the K most discriminating)",
    )
    parser.add_argument(
        "--out", type=nonempty_path, default=None, metavar="PATH",
        help="write the table to PATH (.csv or .json, by suffix)",
    )
    parser.add_argument(
        "--device", choices=("auto", "cpu", "gpu"), default="auto",
        help="where array computations run (default: auto)",
    )
    parser.add_argument("--no-progress", action="store_true", default=False,
                        help="no progress bar on stderr (it is drawn only on a terminal anyway)")
    add_privacy_arguments(parser)
    from ._dask import add_engine_arguments

    add_engine_arguments(parser)  # --engine dask, --scheduler


# -- private estimation (the accounting issue) ----------------------------------------------
#: private options that only make sense together with --epsilon
_PRIVATE_ONLY = ("delta", "mechanism", "p0", "estimator", "ledger", "seed", "shuffle", "items", "n_persons",
                 "missing", "n_boot")


def _p0(text: str):
    return text if text == "auto" else number(text)


def add_privacy_arguments(parser: argparse.ArgumentParser) -> None:
    """``--epsilon`` and friends: differentially private estimation (spectral only)."""
    group = parser.add_argument_group(
        "differential privacy",
        "With --epsilon the estimate is computed privately (--method totals or spectral = "
        "Algorithm 2; by default the one measured most accurate for the public n, m and ε; "
        "neighbouring relation: replace one person's row) and its privacy statement is printed. "
        "--mechanism, --p0, --estimator and --shuffle are Algorithm 2's options: giving any of "
        "them (its default values too) selects --method spectral.",
    )
    group.add_argument("--epsilon", action=Once, type=number, default=None, metavar="E",
                       help="privacy ε > 0: estimate privately")
    group.add_argument("--delta", action=Once, type=number, default=None, metavar="D",
                       help="privacy δ in (0, 1) (default: the ledger's δ — a tenth of it for "
                       f"--shuffle, which spends δ itself — else {DEFAULT_DELTA_TEXT})")
    group.add_argument("--mechanism", choices=MECHANISMS,
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
    group.add_argument("--ledger", action=Once, type=nonempty_path, default=None, metavar="PATH",
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
    group.add_argument("--missing", choices=MISSING_DOMAINS, default=None,
                       help="the declared input domain: none (complete data) or mcar "
                       "(cells missing completely at random: the totals method and --model 2pl also "
                       "release answered counts); chooses the default method (declared: totals, but "
                       "spectral for mcar over 300 items; undeclared: as none, except spectral, which "
                       "takes missing cells as they are, with at most 10 items and fewer than 500 "
                       "persons) and is passed to totals and to --model 2pl")
    group.add_argument("--n-boot", type=nonnegative_int, default=None, metavar="N",
                       help="bootstrap replicates for the standard errors and intervals (≥ 20), or 0 "
                       "for the point estimate only (much faster; the same spend); default: the "
                       "method's own — 200 for totals and --model 2pl, for spectral 200 up to 1000 "
                       "items, then fewer (at least 50), none under randomized response")


#: command-line flags that set a private method's own options (see PrivateMethod.options)
_METHOD_FLAGS = ("mechanism", "p0", "shuffle", "estimator", "missing")


def _private_method(args: argparse.Namespace, n_persons: int, n_items: int, delta: float) -> str:
    """The private estimator: ``--method`` if given, else the default for the public n, m, ε, δ
    (or the first registered method whose options the given flags are)."""
    from ..private import methods
    from ..private.choose import default_private_method

    if args.method is None:
        # (--missing is a declaration the default itself takes into account, not a method's option)
        given = {o for o in _METHOD_FLAGS if o != "missing" and getattr(args, o) is not None}
        default = default_private_method(n_persons, n_items, args.epsilon, delta,
                                          missing=args.missing)  # None: not declared
        if given and not given <= methods.get(default).options:
            fits = [n for n in methods.names() if given <= methods.get(n).options]
            if fits:
                return fits[0]  # options of one method ask for it
        return default
    if args.method not in methods.names():
        raise ValueError(f"--method {args.method} has no private version; with --epsilon use "
                         f"{' or '.join(methods.names())} (or {_other_models()})")
    return args.method


def _private_table(resp, args: argparse.Namespace, items: list | None):
    import inspect

    import pandas as pd

    from ..private import methods
    from ..private.choose import default_private_method
    from ..private.ledger import Ledger

    ledger = None
    if args.ledger is not None:
        ledger = Ledger(args.ledger)  # must exist: a typo must not create a fresh budget
    delta = args.delta
    if delta is None:  # default: the ledger's δ (the δ its total is stated at), else DEFAULT_DELTA
        # shuffled randomized response spends δ itself: a stated share of the ledger's, never all
        delta = ledger.default_delta(spends_delta=bool(args.shuffle)) if ledger is not None else DEFAULT_DELTA
    n_public = args.n_persons if args.n_persons is not None else resp.n_persons
    n_items = len(items) if items is not None else resp.n_items
    method = _private_method(args, n_public, n_items, delta)
    entry = methods.get(method)
    # --missing is exempt where the default chose the method with it, not where another option
    # asked for a method that takes no declaration (--missing none was then dropped unsaid)
    by_default = args.method is None and method == default_private_method(
        n_public, n_items, args.epsilon, delta, missing=args.missing)
    foreign = [o for o in _METHOD_FLAGS if getattr(args, o) is not None and o not in entry.options
               and not (o == "missing" and by_default)]  # a declaration that chose it
    if foreign:
        flags = ", ".join(f"--{o}" for o in foreign)
        owners = [f"--method {n}" if methods.get(n).model == "rasch" else f"--model {methods.get(n).model}"
                  for n in methods.names(None) if set(foreign) <= methods.get(n).options]
        where = " or ".join(dict.fromkeys(owners)) or "no single method"
        if foreign == ["missing"]:
            why = f"--method {method} handles missing cells as they are"
        else:
            why = f"--method {method} does not take {'it' if len(foreign) == 1 else 'them'}"
        raise ValueError(f"{flags} {'applies' if len(foreign) == 1 else 'apply'} to {where}; "
                         f"{why} (nothing was spent)")
    if args.shuffle and args.mechanism != "randomized_response":  # (the library's words: shuffle=True)
        raise ValueError("--shuffle applies to --mechanism randomized_response only; add it or drop "
                         "--shuffle (nothing was spent)")
    if entry.missing:
        check_complete(resp, args, items, method=method, what=f"the {method} method", n_items=n_items)
    options = {o: getattr(args, o) for o in _METHOD_FLAGS
               if o in entry.options and getattr(args, o) is not None}
    if entry.missing:
        options["missing"] = args.missing or "none"
    if entry.takes_device:
        options["device"] = args.device
    elif args.device == "gpu":
        raise ValueError(f"--device gpu: --method {method} runs on the CPU only (the GPU serves the "
                         "spectral method); leave out --device (nothing was spent)")
    if args.n_boot is not None:
        if "n_boot" not in entry.options:
            raise ValueError(f"--n-boot applies to methods with intervals; --method {method} has none "
                             "(nothing was spent)")
        options["n_boot"] = check_n_boot(args.n_boot)  # its bound, before anything is spent
    if "progress" in inspect.signature(entry.estimate).parameters:
        options["progress"] = False if args.no_progress else None  # None: only on a terminal
    res = entry.estimate(resp, epsilon=args.epsilon, delta=delta, ledger=ledger, seed=args.seed,
                         items=items, note=f"privirt estimate {Path(args.file).name}",
                         n_persons=args.n_persons, **options)
    _note_intervals(res)
    table = pd.DataFrame({"beta": res.beta})
    if getattr(res, "se", None) is not None and (getattr(res, "info", None) or {}).get("n_boot", 1):  # intervals (docs/intervals.md, docs/totals.md)
        table = table.assign(se=res.se, lo=res.ci["lo"], hi=res.ci["hi"])
    return method, table, res.privacy


def _note_intervals(res) -> None:
    """A note on stderr where the totals estimator's intervals rest on the prior for the ability
    spread (``info["histogram_share"]`` below ½, ``docs/totals.md`` §5.4): public, from the release."""
    from ..private.totals.intervals import LOW_HISTOGRAM_SHARE

    info = getattr(res, "info", None) or {}
    share = info.get("histogram_share")
    if share is None or not info.get("n_boot") or share >= LOW_HISTOGRAM_SHARE:
        return
    print(f"note: the release says little about how spread out the abilities are (histogram share "
          f"{share:.2f} < {LOW_HISTOGRAM_SHARE:g}); the intervals are calibrated on average over the prior on "
          "that spread and can under-cover if the abilities are far more spread out than a standard normal "
          "(docs/totals.md §5.4)", file=sys.stderr)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "estimate",
        help="estimate Rasch item difficulties from a responses file",
        description="Estimate Rasch item difficulties (centred, higher = harder) from a file "
        "of 0/1 responses and print them as a table.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def _check_out(path: Path | None, source: str | Path | None = None, args: argparse.Namespace | None = None) -> None:
    # checked before any estimate (and before a private one spends budget): never over the data,
    # the ledger it debits (the spend and the budget were lost) or the --items file
    if path is not None:
        items = getattr(args, "items", None)
        others = [("the ledger", getattr(args, "ledger", None)),
                  ("the --items file", items[1:] if isinstance(items, str) and items.startswith("@") else None)]
        check_output_file(path, "--out", (".csv", ".json"), inputs=(source, *others))


def _check_public_items(resp, args: argparse.Namespace, items: list | None) -> None:
    """A private run: a long table's persons and items are read from its rows, so the public
    --items and --n-persons must be given (validate_call refuses the same call, in the API's
    words) before anything is compared with its labels; then --top-k against the public item set."""
    if getattr(resp, "items_from_data", False) and (args.n_persons is None or items is None):
        raise ValueError("a private run on a long (person, item, response) table needs the public "
                         "item list and number of persons: --items LIST|@FILE and --n-persons N")
    _check_top_k(args.top_k, resp.n_items if items is None else len(items))


def _check_top_k(top_k: int | None, n_items: int) -> None:
    if top_k is not None and top_k > n_items:
        raise ValueError(f"--top-k {top_k} exceeds the number of items ({n_items})")


def load(args: argparse.Namespace):
    """The validated responses named on the command line."""
    from ._input import read_responses

    return read_responses(args)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "model", "rasch") != "rasch":  # (the 2PL: the registry's one other model)
        return _run_2pl(args)
    _check_out(args.out, getattr(args, "file", None), args)
    if args.top_k is not None and args.top_k < 1:
        raise ValueError("--top-k must be a positive integer")
    private = getattr(args, "epsilon", None) is not None
    if not private:
        given = [f"--{name.replace('_', '-')}" for name in _PRIVATE_ONLY
                 if getattr(args, name, None) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} --epsilon "
                             "(private estimation)")
    if private and args.seed is not None and args.ledger is not None:  # (both engines)
        raise ValueError(
            "--seed makes the noise reproducible, so the result is NOT private, and --ledger "
            "records private releases only; drop --seed to spend from the ledger, or --ledger for "
            "a reproducible non-private run (nothing was spent)"
        )
    if getattr(args, "engine", "local") != "local" or getattr(args, "scheduler", None):
        return run_dask(args)
    statement = None
    if private and args.mechanism == "randomized_response" and args.estimator not in (None, "auto"):
        raise ValueError(f"--estimator {args.estimator} post-processes additive noise on the counts (--mechanism "
                         "gaussian or laplace); randomized response has its own estimator: leave out --estimator")
    if private:
        # The item and person sets are public: never drop "empty" ones by a data-dependent
        # rule (whether an item is empty can hinge on one person).
        from ._input import read_responses

        if args.regularization is not None:
            raise ValueError("--regularization applies to the non-private spectral estimate only")
        # a long table's labels are read as text; the output's labels are --items
        resp = read_responses(args, private=True)
        items = None if args.items is None else public_items(args.items)
        _check_public_items(resp, args, items)
        method, table, statement = _private_table(resp, args, items)
        n_persons = statement.n_persons  # public: never the data's count
    else:
        method = args.method or "spectral"
        if method not in METHODS:
            raise ValueError(f"--method {method} is a private estimator: give --epsilon (and --delta)")
        if method == "cmle" and args.device == "gpu":
            raise ValueError("--device gpu: --method cmle runs on the CPU only (the GPU serves the spectral "
                             "method); leave out --device")
        resp = load(args)
        _check_top_k(args.top_k, resp.n_items)
        if args.regularization is not None and method != "spectral":
            raise ValueError("--regularization applies to --method spectral only")
        table = METHODS[method](resp, args)
        n_persons = resp.n_persons
    return show_result(table, args, method=method, n_persons=n_persons, statement=statement)


def show_result(table: pd.DataFrame, args: argparse.Namespace, *, method: str, n_persons: int,
                statement=None, engine: str | None = None) -> int:
    """Write ``--out``, then print the estimate table (and the privacy statement of a private
    run)."""
    table.index.name = "item"
    label, where = method, f" ({engine})" if engine else ""
    if statement is not None:  # a seeded run is reproducible and therefore NOT private
        if statement.private:
            label = f"private {method}"
        else:
            where += " (seeded noise: NOT private)"
    meta = {"method": method, **({"engine": engine} if engine else {}),
            "n_persons": n_persons, "n_items": len(table)}
    if statement is not None:
        meta["privacy"] = statement.to_dict()
    _write_then_print(table, args, meta, statement, f"{label} estimate{where}: {n_persons} persons × "
                      f"{len(table)} items (beta centred, higher = harder)", _top(table, "beta", args.top_k, "hardest"))
    return 0


def _top(table: pd.DataFrame, column: str, k: int | None, what: str) -> list[str]:
    """The ``--top-k`` line: the ``k`` items with the largest ``column`` (none without ``k``)."""
    if k is None:
        return []
    top = table[column].sort_values(ascending=False, kind="stable").index[:k]
    return [f"top {k} {what}: " + ", ".join(str(t) for t in top)]


def _write_then_print(table: pd.DataFrame, args: argparse.Namespace, meta: dict, statement,
                      header: str, lines: list[str]) -> None:
    """Write ``--out`` (atomically, with ``meta`` and the privacy statement, if any), then print
    ``header``, the table, ``lines`` and the statement: the file first, so that a closed stdout
    (`| head`) does not lose a paid result, and all of it printed when the file cannot be
    written (a full disk), before the error that says so."""
    failed = None
    if args.out is not None:
        try:
            write_table(table, args.out, meta, None if statement is None else str(statement))
        except OSError as exc:  # (the result is paid for: printed all the same)
            failed = exc
        else:
            print(f"wrote {args.out}", file=sys.stderr)
    if stdout_closed() and args.out is not None and failed is None:
        return  # (>&-: the result is in --out, as asked)
    try:
        for line in [header, format_table(table), *lines, *([] if statement is None else [str(statement)])]:
            print(line)
        flush_or_fail()
    except BrokenPipeError:
        raise
    except OSError as exc:  # (a full disk: one line saying where the result is, if anywhere)
        silence_stdout()
        raise not_printed(exc, args.out, failed) from None
    if failed is not None:
        raise out_not_written(args.out, failed)


def run_dask(args: argparse.Namespace) -> int:
    """``privirt estimate`` with ``--engine dask`` (private with ``--epsilon``); errors that do
    not name the input (pyarrow's, Dask's, the file system's) are prefixed with it."""
    try:
        return _run_dask(args)
    except BrokenPipeError:  # the reader of stdout went away (`| head`): main() ends quietly
        raise
    except (ValueError, OSError) as exc:
        foreign = type(exc).__module__.split(".")[0] in ("pyarrow", "dask", "distributed", "fsspec")
        if not (foreign or isinstance(exc, OSError)) or str(args.file) in str(exc):
            raise
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"{args.file}: {text}") from None


def _run_dask(args: argparse.Namespace) -> int:
    import warnings

    import numpy as np
    import pandas as pd

    from ..stats.dask_engine import dask_statistics, public_source
    from ..exceptions import EmptyResponsesWarning
    from ..rasch.spectral import spectral_from_counts
    from ._dask import check_engine_args

    check_engine_args(args)
    _check_out(args.out, getattr(args, "file", None), args)
    statement = None
    if args.epsilon is not None:
        if getattr(args, "regularization", None) is not None:
            raise ValueError("--regularization applies to the non-private spectral estimate only")
        if args.n_persons is None:
            raise ValueError("--epsilon with --engine dask needs --n-persons (the public number "
                             "of persons)")
        # one call, with the public item list where given (files may then differ in columns)
        items = None if args.items is None else public_items(args.items)
        source = public_source(args.file, items=items, n_persons=args.n_persons,
                               client=args.scheduler, person_col=args.person_col)
        _check_top_k(args.top_k, source.n_items)
        method, table, statement = _private_table(source, args, items)
        n_rows = source.n_persons
    else:
        st = dask_statistics(args.file, client=args.scheduler, person_col=args.person_col)
        Y, items = st.counts[0], st.items
        empty = st.answered.to_numpy() == 0
        if empty.any():  # as in memory: items nobody answered are dropped, with a warning
            warnings.warn(f"dropped {int(empty.sum())} item(s) without any observed response: "
                          f"{list(items[empty][:10])}", EmptyResponsesWarning, stacklevel=2)
            Y, items = Y[np.ix_(~empty, ~empty)], items[~empty]
        _check_top_k(args.top_k, len(items))
        reg = "auto" if getattr(args, "regularization", None) is None else args.regularization
        fit = spectral_from_counts(Y, items=items, regularization=reg, device="cpu")
        table = pd.DataFrame({"beta": fit.beta})
        n_rows = st.n_rows - int(st.score_hist[0].sum())  # as in memory: persons without answers dropped
        method = args.method
    return show_result(table, args, method=method, n_persons=n_rows, statement=statement,
                       engine="dask")


#: options of ``privirt estimate`` that have no meaning for the 2PL model
_RASCH_ONLY = ("method", "mechanism", "p0", "estimator", "shuffle", "regularization")


def _check_2pl(args: argparse.Namespace) -> None:
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
    if getattr(args, "device", "auto") == "gpu":
        raise ValueError("--model 2pl runs on the CPU only; leave out --device gpu")


def _run_2pl(args: argparse.Namespace) -> int:
    """``--model 2pl``: validate, estimate privately, print the table and the statement, write ``--out``."""
    import pandas as pd

    from ..private import methods
    from ..private.ledger import Ledger
    from ._input import read_responses

    _check_2pl(args)
    _check_out(args.out, getattr(args, "file", None), args)
    if args.seed is not None and args.ledger is not None:
        raise ValueError(
            "--seed makes the noise reproducible, so the result is NOT private, and --ledger "
            "records private releases only; drop --seed to spend from the ledger, or --ledger for "
            "a reproducible non-private run (nothing was spent)"
        )
    # a long table's labels are read as text; the output's labels are --items
    n_boot = None if args.n_boot is None else check_n_boot(args.n_boot)
    resp = read_responses(args, private=True)
    items = None if args.items is None else public_items(args.items)
    _check_public_items(resp, args, items)
    missing = args.missing or "none"
    check_complete(resp, args, items, method="2pl", what="--model 2pl",
                   n_items=len(items) if items is not None else resp.n_items)
    ledger = Ledger(args.ledger) if args.ledger is not None else None
    delta = args.delta if args.delta is not None else (ledger.delta if ledger is not None else DEFAULT_DELTA)
    (name,) = methods.names(args.model)  # the registry's private method of the model ("twopl")
    res = methods.get(name).estimate(resp, epsilon=args.epsilon, delta=delta, ledger=ledger, seed=args.seed,
                                     items=items, n_persons=args.n_persons, missing=missing,
                                     **({} if n_boot is None else {"n_boot": n_boot}),
                                     note=f"privirt estimate --model {args.model} {Path(args.file).name}",
                                     progress=False if args.no_progress else None)  # None: only on a terminal
    table = res.to_frame()
    if n_boot == 0:  # the point estimate only: no interval columns
        table = table[["a", "b"]]
    table.index.name = "item"
    statement = res.privacy
    kind = "private" if statement.private else "seeded noise: NOT private"
    meta = {"method": "2pl", "model": "2pl", "missing": missing, "n_persons": statement.n_persons,
            "n_items": len(table), "privacy": statement.to_dict()}
    _write_then_print(pd.DataFrame(table), args, meta, statement,
                      f"2PL estimate ({kind}): {statement.n_persons} persons × {len(table)} items "
                      "(2PNO: P = Φ(a θ − b), θ ~ N(0, 1); ×1.702 for the logistic scale)",
                      _top(table, "a", args.top_k, "most discriminating"))
    return 0

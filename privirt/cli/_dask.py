"""``privirt estimate DIR/ --engine dask``: the counts of a wide Parquet data set on Dask.

Options are added by :func:`add_engine_arguments`; :func:`run_dask` is what ``estimate`` runs
with ``--engine dask`` (the data are never loaded into this process: only sums come back).
"""

from __future__ import annotations

import argparse
import warnings

from ._types import positive_int


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "scale-out",
        "With --engine dask, FILE is a wide Parquet folder, glob or file (one column per item, "
        "nulls for missing) counted per partition on a Dask cluster; only sums come back.",
    )
    group.add_argument("--engine", choices=("local", "dask"), default="local",
                       help="local: in memory (default); dask: on a Dask cluster")
    group.add_argument("--scheduler", default=None, metavar="ADDR",
                       help="Dask scheduler address such as tcp://host:8786 (default: start a "
                       "local cluster sized to this machine and close it afterwards)")
    if "--n-persons" not in parser._option_string_actions:
        group.add_argument("--n-persons", type=positive_int, default=None, metavar="N",
                           help="the public number of persons (required with --epsilon and "
                           "--engine dask)")


def _check(args: argparse.Namespace) -> None:
    if args.scheduler is not None and args.engine != "dask":
        raise ValueError("--scheduler needs --engine dask")
    if args.engine != "dask":
        return
    if getattr(args, "weights_col", None) is not None:
        raise ValueError("--weights-col (pattern tables) is read in memory; use --engine local")
    if args.format == "long":
        raise ValueError("--engine dask reads wide Parquet (one column per item); "
                         "convert the long table or use --engine local")
    if args.method is None:
        args.method = "spectral"  # the estimator that runs on Dask sums (counts)
    if args.method != "spectral":
        raise ValueError("--engine dask supports --method spectral (Algorithm 2 when private)")
    if getattr(args, "missing", None) is not None:
        raise ValueError("--missing applies to --method totals, which --engine dask does not run from the "
                         "command line (use privirt.private_totals_estimate(..., engine='dask') in Python)")
    if args.device == "gpu":
        raise ValueError("--engine dask counts on the workers' CPUs; leave out --device gpu")


def run_dask(args: argparse.Namespace) -> int:
    """``privirt estimate`` with ``--engine dask`` (private with ``--epsilon``)."""
    import numpy as np
    import pandas as pd

    from ..stats.dask_engine import dask_statistics, public_source
    from ..exceptions import EmptyResponsesWarning
    from ..rasch.spectral import spectral_from_counts
    from .estimate import _check_out, _check_top_k, _private_table, public_items, show_result

    _check(args)
    _check_out(args.out)
    statement = None
    if args.epsilon is not None:
        if getattr(args, "regularization", None) is not None:
            raise ValueError("--regularization applies to the non-private spectral estimate only")
        if args.n_persons is None:
            raise ValueError("--epsilon with --engine dask needs --n-persons (the public number "
                             "of persons)")
        source = public_source(args.file, items=None, n_persons=args.n_persons,
                               client=args.scheduler, person_col=args.person_col)
        items = None
        if args.items is not None:
            items = public_items(args.items, source.items)
            source = public_source(args.file, items=items, n_persons=args.n_persons,
                                   client=args.scheduler, person_col=args.person_col)
        _check_top_k(args.top_k, source.n_items)
        _, table, statement = _private_table(source, args, items)
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
        n_rows = st.n_rows
    return show_result(table, args, method=args.method, n_persons=n_rows, statement=statement,
                       engine="dask")

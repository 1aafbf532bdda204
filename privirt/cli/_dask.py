"""``privirt estimate DIR/ --engine dask``: the counts of a wide Parquet data set on Dask.

Options are added by :func:`add_engine_arguments` and checked by :func:`check_engine_args`;
``estimate``'s ``run_dask`` runs with ``--engine dask`` (the data are never loaded into this
process: only sums come back).
"""

from __future__ import annotations

import argparse

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


def check_engine_args(args: argparse.Namespace) -> None:
    """Refuse options that ``--engine dask`` cannot honour (one line each)."""
    if args.scheduler is not None and args.engine != "dask":
        raise ValueError("--scheduler needs --engine dask")
    if args.engine != "dask":
        return
    from pathlib import Path

    from ..data._files import table_suffix

    if args.file == "-" or table_suffix(Path(args.file)) in (".csv", ".tsv", ".txt"):
        raise ValueError(f"--engine dask reads wide Parquet (a folder, glob or .parquet file), and "
                         f"{args.file} is {'standard input' if args.file == '-' else 'a CSV file'}: "
                         "use --engine local, or convert it to Parquet first")
    if getattr(args, "weights_col", None) is not None:
        raise ValueError("--weights-col (pattern tables) is read in memory; use --engine local")
    if getattr(args, "drop_cols", None):
        raise ValueError("--drop-cols is applied by the in-memory reader; use --engine local")
    long_cols = [f"--{c.replace('_', '-')}" for c, default in (("item_col", "item"), ("response_col", "response"))
                 if getattr(args, c, default) != default]  # (named: the table is read as long, _input.read_responses)
    if args.format == "long" or long_cols:
        verb = "names" if len(long_cols) == 1 else "name"
        named = f" ({' and '.join(long_cols)} {verb} a long table's columns)" if long_cols else ""
        raise ValueError(f"--engine dask reads wide Parquet (one column per item){named}; "
                         "convert the long table or use --engine local")
    private = getattr(args, "epsilon", None) is not None
    if private:  # the private methods run on Dask sums; the default is chosen as in memory
        if args.method not in (None, "spectral", "totals"):
            raise ValueError(f"--engine dask runs --method spectral (Algorithm 2) or totals with --epsilon, "
                             f"not {args.method}")
    else:
        if args.method is None:
            args.method = "spectral"  # the non-private estimator that runs on Dask sums (counts)
        if args.method != "spectral":
            raise ValueError("--engine dask supports --method spectral without --epsilon (with --epsilon "
                             "also totals)")
    if args.device == "gpu":
        raise ValueError("--engine dask counts on the workers' CPUs; leave out --device gpu")
    if args.scheduler is None:
        # the embedded cluster's close, on a loaded machine, can leave a future holding a Timeout
        # that asyncio logs when it is collected at exit ("Future exception was never retrieved",
        # three lines on stderr after the command's own one-line answer); this process ends with
        # the command, and its own errors are raised, not logged
        import logging

        logging.getLogger("asyncio").setLevel(logging.CRITICAL)

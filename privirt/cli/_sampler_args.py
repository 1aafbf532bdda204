"""Command-line options shared by the Bayesian samplers (``privirt gibbs``, ``privirt mh``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def add_data_arguments(p: argparse.ArgumentParser, what: str = "responses") -> None:
    """FILE, --format and --person-col: how the responses are read."""
    p.add_argument("file", metavar="FILE", help=f"{what}: CSV or Parquet, wide or long")
    p.add_argument("--format", choices=["auto", "wide", "long"], default="auto",
                   help="table layout (default: auto)")
    p.add_argument("--person-col", default=None,
                   help="wide tables: the column with the person labels")


def add_chain_arguments(
    p: argparse.ArgumentParser, *, warmup_flag: str, warmup_help: str, plots_help: str
) -> None:
    """Iterations, warmup (``--burn-in`` or ``--warmup``), thinning, chains, seed, device,
    progress, ``--out`` and ``--plots``."""
    p.add_argument("--iter", type=int, default=10000, dest="n_iter",
                   help="total iterations per chain, including the warmup (default 10000)")
    p.add_argument(warmup_flag, type=int, default=5000, help=f"{warmup_help} (default 5000)")
    p.add_argument("--thin", type=int, default=1, help="keep every THIN-th draw (default 1)")
    p.add_argument("--chains", type=int, default=1, help="number of chains (default 1)")
    p.add_argument("--seed", type=int, default=None, help="random seed (reproducible runs)")
    p.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto",
                   help="where to run (default: the GPU when one is available)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--out", default=None, help="write the posterior summary as CSV here")
    p.add_argument("--plots", default=None, metavar="DIR", help=plots_help)


def check_plotting(args: argparse.Namespace) -> None:
    """Fail before sampling, not after, when --plots is asked for without matplotlib."""
    if args.plots is not None:
        from ..plots import _plt

        _plt()


def write_summary(table: pd.DataFrame, out: str | Path) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path)
    return path

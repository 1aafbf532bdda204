"""Command-line options shared by the Bayesian samplers (``privirt gibbs``, ``privirt mh``).

One spelling per option: ``--warmup`` and ``--prior-BLOCK MEAN VAR``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas loads when a command runs, not when the parser is built
    import pandas as pd

from ._paths import check_output_dir, check_output_file

#: suffixes ``--out`` accepts for a posterior summary
SUMMARY_SUFFIXES = (".csv",)


def add_data_arguments(p: argparse.ArgumentParser, what: str = "responses") -> None:
    """FILE, --format and --person-col: how the responses are read."""
    p.add_argument("file", metavar="FILE", help=f"{what}: CSV or Parquet, wide or long")
    p.add_argument("--format", choices=["auto", "wide", "long"], default="auto",
                   help="table layout (default: auto)")
    p.add_argument("--person-col", default=None,
                   help="wide tables: the column with the person labels")


def add_chain_arguments(p: argparse.ArgumentParser, *, warmup_help: str, plots_help: str) -> None:
    """Iterations, ``--warmup``, thinning, chains, seed, device, progress, ``--out`` and
    ``--plots``."""
    p.add_argument("--iter", type=int, default=10000, dest="n_iter",
                   help="total iterations per chain, including the warmup (default 10000)")
    p.add_argument("--warmup", type=int, default=5000, help=f"{warmup_help} (default 5000)")
    p.add_argument("--thin", type=int, default=1,
                   help="keep the first post-warmup draw and every THIN-th after it (default 1)")
    p.add_argument("--chains", type=int, default=1, help="number of chains (default 1)")
    p.add_argument("--seed", type=int, default=None, help="random seed (reproducible runs)")
    p.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto",
                   help="where to run (default: the GPU when one is available)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar or stage messages on stderr")
    p.add_argument("--out", default=None, metavar="PATH",
                   help="write the posterior summary here (.csv); the folder must exist")
    p.add_argument("--plots", default=None, metavar="DIR", help=plots_help)


def add_prior_arguments(p: argparse.ArgumentParser, helps: dict[str, str]) -> None:
    """``--prior-BLOCK MEAN VAR`` for each block in ``helps``."""
    for block, text in helps.items():
        dest = f"prior_{block}"
        p.add_argument(f"--prior-{block}", type=float, nargs=2, metavar=("MEAN", "VAR"),
                       default=None, dest=dest, help=text)


def priors_from_args(args: argparse.Namespace, blocks: tuple[str, ...]) -> dict:
    return {
        block: tuple(value)
        for block in blocks
        if (value := getattr(args, f"prior_{block}", None)) is not None
    }


def check_outputs(args: argparse.Namespace) -> None:
    """Before any work: ``--out`` and ``--plots`` are writable paths of the right kind, and
    matplotlib is there when plots are asked for."""
    if args.out is not None:
        check_output_file(args.out, "--out", SUMMARY_SUFFIXES)
    if args.plots is not None:
        check_output_dir(args.plots, "--plots")
        from ..plots import _plt

        _plt()


def summarise(post: Any, args: argparse.Namespace, started: float) -> tuple[pd.DataFrame, str]:
    """The posterior summary, with its stage announced on stderr; returns the table and a
    timing note (sampling, summary and total seconds)."""
    n_params = sum(len(post.labels[p]) for p in post.params)
    if not args.no_progress:
        print(f"summarising {n_params} parameters (R-hat, ESS, MCSE)...", file=sys.stderr,
              flush=True)
    t0 = time.perf_counter()
    table = post.summary()
    summary_s = time.perf_counter() - t0
    total = time.perf_counter() - started
    note = (f"sampling {post.info['seconds']:.1f} s, summary {summary_s:.1f} s, "
            f"total {total:.1f} s on {post.info['device']}"
            + (f" ({post.info['engine']} engine)" if post.info.get("engine") else ""))
    return table, note


def write_summary(table: pd.DataFrame, out: str) -> str:
    """Write the summary to ``out`` (checked beforehand by :func:`check_outputs`)."""
    table.to_csv(out)
    return out


def make_plot_dir(path: str) -> Path:
    """The ``--plots`` folder (checked beforehand), created if new; its parents never are."""
    folder = Path(path)
    folder.mkdir(exist_ok=True)
    return folder

"""Command-line options shared by the Bayesian samplers (``privirt gibbs``, ``privirt mh``).

One spelling per option: ``--warmup`` and ``--prior-BLOCK MEAN VAR``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:  # pandas loads when a command runs, not when the parser is built
    import pandas as pd

from ._paths import check_out_and_plots, check_output_dir, check_output_file, out_not_written
from ._types import nonempty_file, nonempty_path

#: suffixes ``--out`` accepts for a posterior summary
SUMMARY_SUFFIXES = (".csv",)


def add_data_arguments(p: argparse.ArgumentParser, what: str = "responses") -> None:
    """FILE, --format, --person-col, --item-col, --response-col and --weights-col: how the
    responses are read (as by the other commands)."""
    from ._input import FILE_HELP, add_long_columns

    p.add_argument("file", metavar="FILE", type=nonempty_file, help=FILE_HELP.replace("responses", what, 1))
    p.add_argument("--format", choices=["auto", "wide", "long"], default="auto",
                   help="table layout (default: auto)")
    p.add_argument("--person-col", default=None, metavar="COL",
                   help="the column with the person labels")
    add_long_columns(p)
    p.add_argument("--weights-col", default=None, metavar="COL",
                   help="a pattern table: COL holds how many persons gave each row's answers "
                   "(e.g. 'frequency' in the bundled LSAT files); rows are expanded into persons")


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
    p.add_argument("--out", type=nonempty_path, default=None, metavar="PATH",
                   help="write the posterior summary here (.csv); the folder must exist")
    p.add_argument("--plots", type=nonempty_path, default=None, metavar="DIR", help=plots_help)


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


def check_outputs(args: argparse.Namespace, plot_names: Sequence[str] = ()) -> None:
    """Before any work: ``--out`` and ``--plots`` are writable paths of the right kind (none of
    ``plot_names`` in the folder something other than a file), and matplotlib is there when
    plots are asked for."""
    check_out_and_plots(args.out, args.plots)
    if args.out is not None:
        check_output_file(args.out, "--out", SUMMARY_SUFFIXES, inputs=(getattr(args, "file", None),))
    if args.plots is not None:
        check_output_dir(args.plots, "--plots", plot_names)
        from .._plot_base import _plt

        _plt()


def check_schedule(args: argparse.Namespace) -> None:
    """Before the data are read (one error line, no data warning or stage message before it):
    ``--iter``, ``--warmup``, ``--thin`` and ``--chains`` make a valid schedule."""
    from ..bayes.schedule import Schedule, resolve_warmup

    Schedule(args.n_iter, resolve_warmup(args.warmup), args.thin, args.chains)


class ConvergenceWarning(UserWarning):
    """Some parameter's chains fail the R-hat / ESS thresholds."""


#: convergence thresholds of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021)
RHAT_MAX = 1.01
ESS_MIN = 400


def fixed_by_anchors(post: Any) -> list[tuple[str, str]]:
    """The ``("theta", label)`` rows of the persons whose θ an anchor fixes at a number
    (``privirt gibbs --anchor NAME=1.5``): constant by construction, so their R-hat is NaN.
    Sign anchors (``+`` / ``-``, and every ``privirt mh`` anchor) fix nothing."""
    if post.sampler != "gibbs_2pno":
        return []
    return [("theta", str(label)) for label, value in post.info.get("anchors", {}).items()
            if not isinstance(value, str)]


def _above(value: float, threshold: float) -> str:
    """``value`` (above ``threshold``) with 3 decimals, or as many more as it takes to print
    above the threshold (an R-hat of 1.0104 is "1.0104", not "1.010")."""
    for digits in range(3, 17):
        text = f"{value:.{digits}f}"
        if float(text) > threshold:
            return text
    return repr(float(value))


def convergence_problem(table: pd.DataFrame, fixed: Iterable[tuple[str, str]] = ()) -> str | None:
    """What :func:`warn_convergence` says when some parameter has R-hat > 1.01 or bulk ESS < 400
    (Vehtari et al. 2021): how many and what to do; None when every parameter passes.

    Parameters
    ----------
    table : pandas.DataFrame
        The posterior summary, indexed by (parameter, label).
    fixed : iterable of (str, str)
        (parameter, label) rows that are constant by construction (:func:`fixed_by_anchors`):
        not counted.  Any other parameter whose draws never changed has R-hat NaN and counts
        as not converged.
    """
    import numpy as np

    exempt = {(p, str(label)) for p, label in fixed}
    if exempt:
        table = table[[(p, str(label)) not in exempt for p, label in table.index]]
    rhat = table["rhat"].to_numpy(dtype=float)
    ess = table["ess"].to_numpy(dtype=float)
    bad_rhat = ~(rhat <= RHAT_MAX)  # NaN (draws that never changed) counts as not converged
    bad_ess = ~(ess >= ESS_MIN)
    bad = bad_rhat | bad_ess
    if not bad.any():
        return None
    worst = []
    over, no_rhat = rhat > RHAT_MAX, np.isnan(rhat)
    if over.any():
        worst.append(f"{int(over.sum())} with R-hat > {RHAT_MAX} (max {_above(np.nanmax(rhat), RHAT_MAX)})")
    if no_rhat.any():  # too few draws, or draws that never changed (a stuck chain)
        worst.append(f"{int(no_rhat.sum())} without an R-hat")
    if bad_ess.any():
        worst.append(f"{int(bad_ess.sum())} with bulk ESS < {ESS_MIN} (min {np.nanmin(ess):.3g})"
                     if np.isfinite(ess).any() else f"{int(bad_ess.sum())} without an ESS")
    return (
        f"the chains have not converged: {int(bad.sum())} of {len(table)} parameters fail "
        f"R-hat <= {RHAT_MAX} and bulk ESS >= {ESS_MIN} (Vehtari et al. 2021): "
        f"{', '.join(worst)}; do not use these estimates yet: run more iterations (--iter, "
        "--warmup) or more chains (--chains)"
    )


def warn_convergence(table: pd.DataFrame, fixed: Iterable[tuple[str, str]] = ()) -> None:
    """One ``privirt: warning`` line (a :class:`ConvergenceWarning`) with
    :func:`convergence_problem`'s words when the chains have not converged; nothing otherwise.
    Parameters as :func:`convergence_problem`'s."""
    problem = convergence_problem(table, fixed)
    if problem is not None:
        warnings.warn(problem, ConvergenceWarning, stacklevel=2)


def check_finite_means(table: pd.DataFrame) -> None:
    """Refuse, before anything is printed or written, a summary whose posterior means are not
    all finite (diverged chains): such a table is no result, and exit 0 would say it is."""
    import numpy as np

    bad = ~np.isfinite(table["mean"].to_numpy(dtype=float))
    if bad.any():
        first = ", ".join(" ".join(map(str, np.atleast_1d(i))) for i in table.index[bad][:3])
        raise ValueError(
            f"the posterior means of {int(bad.sum())} of {len(table)} parameters ({first}, ...) are "
            "not finite: the chains diverged and no summary was written; give proper priors near 0 "
            "(e.g. --prior-b 0 4) or drop items answered all one way"
        )


def summarise(post: Any, args: argparse.Namespace, started: float) -> tuple[pd.DataFrame, str]:
    """The posterior summary, with its stage announced on stderr; returns the table and a
    timing note (sampling, summary and total seconds)."""
    n_params = sum(len(post.labels[p]) for p in post.params)
    if not args.no_progress:
        print(f"summarising {n_params} parameters (R-hat, ESS, MCSE)...", file=sys.stderr,
              flush=True)
    t0 = time.perf_counter()
    table = post.summary()
    check_finite_means(table)
    summary_s = time.perf_counter() - t0
    total = time.perf_counter() - started
    note = (f"sampling {post.info['seconds']:.1f} s, summary {summary_s:.1f} s, "
            f"total {total:.1f} s on {post.info['device']}"
            + (f" ({post.info['engine']} engine)" if post.info.get("engine") else ""))
    return table, note


def write_summary(table: pd.DataFrame, out: Path) -> Path:
    """Write the summary to ``out`` (checked beforehand by :func:`check_outputs`), whole or not
    at all; text (parameter names, labels, the header) quoted and numbers not, as the estimate's
    ``--out`` CSV (:func:`privirt.cli._table.write_table`).  When it cannot be written (a full
    disk) the whole summary is printed on stdout instead, then a ValueError says so."""
    import csv

    from .._files import atomic_write

    try:
        with atomic_write(out, newline="") as fh:
            table.to_csv(fh, quoting=csv.QUOTE_NONNUMERIC)
    except OSError as exc:
        from ._stdout import StdoutFailed, not_printed, write_or_fail

        try:  # (a stdout that fails too: one line naming both, not the bare stdout's)
            write_or_fail(table.to_string() + "\n")
        except StdoutFailed as lost:
            raise not_printed(lost, out, exc) from None
        raise out_not_written(out, exc) from None
    return out


def make_plot_dir(path: Path) -> Path:
    """The ``--plots`` folder (checked beforehand), created if new; its parents never are."""
    folder = Path(path)
    folder.mkdir(exist_ok=True)
    return folder

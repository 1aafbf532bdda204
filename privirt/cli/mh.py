"""``privirt mh``: the Bayesian 2PL model by Metropolis–Hastings (ideal points).

Example::

    privirt mh votes.csv --transpose --iter 15000 --warmup 5000 --thin 10 \\
        --anchor Ginsburg=-1 --anchor Scalia=+1 --out summary.csv --plots figs/
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ._sampler_args import (
    add_chain_arguments,
    add_data_arguments,
    add_prior_arguments,
    check_outputs,
    check_schedule,
    make_plot_dir,
    priors_from_args,
    summarise,
    warn_convergence,
    write_summary,
)
from ._paths import OutNotWritten, plots_then_raise, write_plot
from ._plot_items import PLOTTED_RULE, TRACE_ITEMS, plotted_items, worst_mixing
from ._types import positive_int

__all__ = ["register", "run", "parse_anchor", "worst_mixing"]

#: the files ``--plots`` writes
PLOT_FILES = ("ideal_points.png", "trace_theta.png", "trace_a.png", "trace_b.png")


def parse_anchor(text: str) -> tuple[str, float]:
    """``NAME=VALUE`` -> (name, value); the value's sign is the constraint."""
    name, sep, value = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"--anchor expects NAME=VALUE such as Scalia=+1 or Ginsburg=-1, got {text!r}"
        )
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--anchor {text!r}: the value after '=' must be a number such as -1 or +1"
        ) from None
    return name, v


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "mh",
        help="2PL Metropolis-Hastings sampler (ideal points)",
        description=(
            "Sample the Bayesian 2PL model P(y=1) = logistic(a_j theta_i - b_j) by blockwise "
            "random-walk Metropolis-Hastings; missing responses drop out of the likelihood. "
            "Rows are persons/voters and columns items/votes (use --transpose otherwise)."
        ),
    )
    add_data_arguments(p, what="responses / votes")
    p.add_argument("--transpose", action="store_true",
                   help="the file has voters as columns (e.g. cases x justices); not with "
                   "--weights-col")
    add_chain_arguments(
        p, warmup_help="warmup iterations (proposal adaptation)",
        plots_help="write the ideal-point plot (every person up to 500, else the --top lowest and "
                   "highest) and trace plots (PNG: the 3 lowest and 3 highest θ; "
                   f"a of the {TRACE_ITEMS} items whose a has the largest R-hat, b likewise) into DIR (needs matplotlib)",
    )
    p.add_argument("--anchor", action="append", type=parse_anchor, default=[],
                   metavar="NAME=VALUE",
                   help="constrain person NAME's ideal point to the sign of VALUE and start "
                   "it there (repeatable), e.g. --anchor Scalia=+1")
    p.add_argument("--proposal-sd", type=float, nargs=3, metavar=("THETA", "A", "B"),
                   default=None, help="starting proposal sds (default 0.4 0.4 0.4)")
    add_prior_arguments(p, {
        block: f"normal prior of {block} (default {default})"
        for block, default in (("theta", "0 1"), ("a", "0 100"), ("b", "1 100"))
    })
    p.add_argument("--no-adapt", action="store_true",
                   help="keep the proposal sds fixed (plain Metropolis)")
    p.add_argument("--no-ridge-moves", action="store_true",
                   help="skip the scale/shift moves (the tutorial's algorithm exactly)")
    p.add_argument("--top", type=positive_int, default=20,
                   help="print this many persons of the ranking at each end (default 20)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from .._backend import resolve_device
    from ..bayes import mh_2pl, twopl_setup
    from ._input import read_responses

    started = time.perf_counter()
    check_outputs(args, PLOT_FILES)
    if args.transpose and args.weights_col is not None:  # rows expanded into persons, then items
        raise ValueError(
            "--weights-col counts the persons who gave each row's answers, but with --transpose "
            "the rows are items; give the pattern table with persons as rows, without --transpose"
        )
    # the priors, proposal sds and anchor values before the data are read (one error line, no
    # stage message before it); the anchors' labels once the persons are known, below
    priors = priors_from_args(args, ("theta", "a", "b"))
    twopl_setup.check_priors(priors or None)
    if args.proposal_sd is not None:
        twopl_setup.check_proposal_sd(tuple(args.proposal_sd))
    anchors = dict(args.anchor)
    if len(anchors) != len(args.anchor):
        raise ValueError("a person is given more than one --anchor")
    twopl_setup.check_anchors(anchors, pd.Index(list(anchors)))  # values only: labels match themselves
    resolve_device(args.device)  # --device gpu without cupy
    check_schedule(args)  # --chains 0, --warmup >= --iter, ...
    # transposed: the file's empty rows are items and its empty columns persons, so nothing is
    # dropped (nor named) until the table is the right way round
    resp = read_responses(args, **({"empty": "keep"} if args.transpose else {}))
    if args.transpose:
        from ..data.responses import as_responses

        resp = as_responses(resp.to_frame().T)
    twopl_setup.check_anchors(anchors, resp.persons)  # an unknown label: before the stage message
    kwargs: dict[str, Any] = {}
    if args.proposal_sd is not None:
        kwargs["proposal_sd"] = tuple(args.proposal_sd)
    if priors:
        kwargs["priors"] = priors
    if not args.no_progress:  # a stage message (--no-progress: none)
        print(f"privirt mh: {resp}", file=sys.stderr)
    post = mh_2pl(
        resp, n_iter=args.n_iter, warmup=args.warmup, thin=args.thin, n_chains=args.chains,
        seed=args.seed, anchors=anchors or None, adapt=not args.no_adapt,
        ridge_moves=not args.no_ridge_moves,
        progress=not args.no_progress, device=args.device, **kwargs,
    )
    summary, timing = summarise(post, args, started)
    failed = None
    if args.out is not None:
        try:
            print(f"wrote {write_summary(summary, args.out)}", file=sys.stderr)
        except OutNotWritten as exc:  # (a full disk: the summary is printed; warnings and plots follow)
            failed = exc
    print(timing, file=sys.stderr)
    rates = post.acceptance_rates()
    print("acceptance rate (mean over parameters) per chain:")
    print(rates.round(3).to_string())
    theta = summary.loc["theta"].sort_values("mean")  # the table already computed
    k = args.top
    shown = theta if len(theta) <= 2 * k else theta.iloc[list(range(k)) + list(range(-k, 0))]
    print(f"\nideal points (theta), lowest to highest ({len(theta)} persons"
          + ("" if len(theta) <= 2 * k else f", {k} at each end") + "):")
    print(shown[["mean", "q2.5", "q50", "q97.5", "rhat", "ess"]].round(3).to_string())
    warn_convergence(summary)
    plots_then_raise(failed, args.plots, lambda: _write_plots(post, summary, theta, args.plots, args.top))
    return 0


def _write_plots(post: Any, summary: Any, theta: Any, path: Any, top: int = 20) -> None:
    """The ideal points, the traces of the 3 lowest and 3 highest θ, and of the worst-mixing a, b."""
    from ..plots import IDEAL_POINT_ROWS, ideal_point_plot, trace_plot

    d = make_plot_dir(path)
    # every person while the figure stays readable; beyond, the ends the table shows (at most
    # IDEAL_POINT_ROWS rows: --top 300 of 600 persons draws the 250 at each end)
    k = min(top, IDEAL_POINT_ROWS // 2) if len(theta) > IDEAL_POINT_ROWS else None
    shown = None if k is None else list(dict.fromkeys(list(theta.index[:k]) + list(theta.index[-k:])))
    write_plot(d, "ideal_points.png", lambda p: ideal_point_plot(post, labels=shown, path=p))
    ends = list(dict.fromkeys(list(theta.index[:3]) + list(theta.index[-3:])))
    write_plot(d, "trace_theta.png", lambda p: trace_plot(post, "theta", labels=ends, path=p))
    written = ["ideal_points.png" + ("" if k is None else f" (the {k} lowest and {k} highest of "
                                                            f"{len(theta)} persons, as the table)"),
               "trace_theta.png"]
    for block, labels in plotted_items(summary).items():  # the traces worth a look
        write_plot(d, f"trace_{block}.png",
                   lambda p, b=block, c=labels: trace_plot(post, b, labels=c, path=p))
        written.append(f"trace_{block}.png")
    print(f"wrote {', '.join(written)} to {d} ({PLOTTED_RULE})", file=sys.stderr)

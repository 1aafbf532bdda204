"""``privirt report DIR``: plots and a Markdown/HTML summary of a sweep (see :mod:`privirt.sweeps.report`)."""

from __future__ import annotations

import argparse

from ._types import nonempty_path


def register(subparsers) -> None:
    # the metric names are checked when the command runs (privirt.sweeps.results.METRICS)
    parser = subparsers.add_parser(
        "report",
        help="turn a sweep's results.csv into plots and a Markdown/HTML summary",
        description="Read DIR/results.csv (written by `privirt sweep`) and write "
        "DIR/plots/<dataset>.png (error against ε, one line per mechanism, 95 % confidence "
        "bands, log axes), DIR/report.md and DIR/report.html (results tables and, for a target "
        "accuracy, the smallest ε that reaches it per mechanism).",
    )
    parser.add_argument("directory", metavar="DIR", type=nonempty_path,
                        help="the sweep's output folder")
    parser.add_argument("--metric", default=None,
                        help="metric of the tables and the target: l2_error, linf_error, "
                        "relative_l2_error, top_k_accuracy or kendall_tau (default: the "
                        "config's [report] metric, else relative_l2_error)")
    parser.add_argument("--target", type=float, default=None,
                        help="target value of the metric: an upper bound for errors, a lower "
                        "bound for accuracies (default: the config's [report] target, else 0.25)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..sweeps.report import _check_metric, build_report

    if args.metric is not None:
        _check_metric(args.metric)  # before reading anything
    files = build_report(args.directory, metric=args.metric, target=args.target)
    print(f"wrote {files.markdown}, {files.html} and {len(files.plots)} plot(s) in "
          f"{files.plots[0].parent if files.plots else args.directory}")
    return 0

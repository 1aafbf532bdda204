"""``privirt sweep CONFIG.toml --out DIR``: run an ε-sweep experiment (see :mod:`privirt.sweeps`)."""

from __future__ import annotations

import argparse

from ._types import nonempty_path, positive_int


#: how many distinct errors of failed cells the summary prints
_ERRORS_SHOWN = 3


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run an accuracy-vs-privacy sweep from a TOML configuration",
        description="Run every cell (data set × mechanism × ε × trial) of the sweep described "
        "by CONFIG and append one row per finished cell to DIR/results.csv. Cells are seeded "
        "for reproducibility, so the runs are not private: they measure accuracy only. "
        "Then `privirt report DIR` draws the plots and the summary. The configuration "
        "format (data sources, mechanism names, options) is described in docs/sweeps.md.",
    )
    parser.add_argument("config", metavar="CONFIG", type=nonempty_path, help="sweep configuration (.toml)")
    parser.add_argument("--out", required=True, type=nonempty_path, metavar="DIR",
                        help="output folder (created, with its missing parents, as mkdir -p); "
                             "receives results.csv and sweep.json")
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="worker processes (default: the number of CPUs)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the sweep in DIR, skipping cells already in results.csv")
    parser.add_argument("--report", action="store_true",
                        help="build the report (plots, report.md, report.html) afterwards")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..sweeps.config import load_config
    from ..sweeps.runner import run_sweep

    if not args.config.is_file():
        what = "is a folder" if args.config.is_dir() else "does not exist"
        raise ValueError(f"sweep configuration {args.config} {what}; give a .toml file such as "
                         "experiments/quick.toml (format: docs/sweeps.md)")
    config = load_config(args.config)
    if args.report:  # the report draws plots: a missing extra is named before any cell runs
        from .._plot_base import _plt

        try:
            _plt()
        except ImportError as exc:
            raise ImportError(f"{exc} (or leave out --report and run `privirt report` later)") from None
    stats = run_sweep(config, args.out, jobs=args.jobs, resume=args.resume,
                      progress=not args.no_progress, discard_failed=True)
    where = "no results kept" if stats.discarded else f"-> {stats.results}"
    print(f"{stats.total} cells: {stats.computed} computed ({stats.failed} failed), "
          f"{stats.skipped} already done; {stats.seconds:.1f} s {where}")
    for text, count in stats.errors[:_ERRORS_SHOWN]:
        print(f"  {count} cell{'s' if count > 1 else ''} failed: {text}")
    if len(stats.errors) > _ERRORS_SHOWN:
        where = "not kept" if stats.discarded else f"in the status column of {stats.results}"
        print(f"  ... {len(stats.errors) - _ERRORS_SHOWN} more distinct errors ({where})")
    if stats.computed and stats.failed == stats.computed:
        # every cell failed (a [mechanism_options] value the estimator refuses fails them all):
        # a fresh run's rows were removed (run_sweep's discard_failed, under the folder's lock), so
        # that the same command works once the cause is fixed (a changed option changes the
        # cells' keys, which --resume would refuse)
        first = stats.errors[0][0]
        if stats.discarded:
            raise ValueError(f"every cell failed ({first}); no results kept: fix the configuration "
                             "and run the same command again")
        raise ValueError(f"every cell of this run failed ({first}); their rows are in "
                         f"{stats.results}, which --resume skips")
    if args.report:
        from ..sweeps.report import build_report

        files = build_report(args.out)
        print(f"report: {files.markdown} and {files.html} ({len(files.plots)} plot(s))")
    return 0

"""``privirt sweep CONFIG.toml --out DIR``: run an ε-sweep experiment (see :mod:`privirt.sweeps`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._types import positive_int


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
    parser.add_argument("config", metavar="CONFIG", type=Path, help="sweep configuration (.toml)")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="output folder (created); receives results.csv and sweep.json")
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
    stats = run_sweep(config, args.out, jobs=args.jobs, resume=args.resume,
                      progress=not args.no_progress)
    print(f"{stats.total} cells: {stats.computed} computed ({stats.failed} failed), "
          f"{stats.skipped} already done; {stats.seconds:.1f} s -> {stats.results}")
    if args.report:
        from ..sweeps.report import build_report

        files = build_report(args.out)
        print(f"report: {files.markdown} and {files.html} ({len(files.plots)} plot(s))")
    return 0

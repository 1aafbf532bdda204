"""``privirt fit FILE``: Rasch item fit, reliability and (optionally) Andersen's test and plots.

Only :mod:`argparse` and :mod:`pathlib` are imported here; numpy, pandas, scipy and
matplotlib load inside :func:`run`, so that building the command-line parser stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._paths import (check_out_and_plots, check_output_dir, check_output_file, out_not_written,
                     plots_then_raise, write_plot)
from ._types import REGULARIZATION_HELP, nonempty_file, nonempty_path, regularization

#: plot file name -> what it shows (written by ``--plots DIR``)
PLOTS = {
    "wright_map.png": "Wright map",
    "item_information.png": "item information curves",
    "test_information.png": "test information and standard error",
}


SPLITS = ("median", "mean")


class _AndersenAction(argparse.Action):
    """``--andersen [median|mean]``.  ``--andersen FILE`` (the flag before the file) must not
    take the file for the split: a value that is not a split is handed back as FILE."""

    def __call__(self, parser, namespace, values, option_string=None):
        if values in SPLITS:
            namespace.andersen = values
            return
        namespace.andersen = "median"
        if values in (None, self.const):
            return
        if values == "-" or values and (Path(values).exists() or "." in Path(values).name):  # ("": '.')
            namespace.andersen_file = values  # FILE itself is filled in by run()
            return
        parser.error(f"argument --andersen: the split is median or mean, got {values!r}")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fit",
        help="Rasch item fit (infit/outfit), reliability, Andersen's test and plots",
        description="Estimate Rasch item difficulties, then print each item's infit and outfit "
        "mean squares with their standardized z values, and the person and item separation "
        "reliability.  Person abilities are Warm's weighted likelihood estimates; persons with "
        "an extreme score are left out of the fit statistics (see docs/fit.md).",
    )
    from ._input import FILE_HELP, add_long_columns

    # FILE is optional to argparse only so that `--andersen FILE` can hand it back (below)
    p.add_argument("file", metavar="FILE", nargs="?", default=None, type=nonempty_file, help=FILE_HELP)
    p.add_argument("--format", choices=("auto", "wide", "long"), default="auto",
                   help="table layout (default: auto)")
    p.add_argument("--person-col", default=None, metavar="COL",
                   help="the column with the person labels")
    add_long_columns(p)
    p.add_argument("--weights-col", default=None, metavar="COL",
                   help="a pattern table: COL holds how many persons gave each row's answers "
                   "(e.g. 'frequency' in the bundled LSAT files); rows are expanded into persons")
    p.add_argument("--method", choices=("cmle", "spectral"), default="cmle",
                   help="item estimator (default: cmle)")
    p.add_argument("--regularization", type=regularization, default=None, metavar="L",
                   help=REGULARIZATION_HELP + " (--method spectral only)")
    p.add_argument("--andersen", nargs="?", const="median", default=None, metavar="SPLIT",
                   action=_AndersenAction,
                   help="also run Andersen's likelihood-ratio test by CML, persons split at the "
                   "median (default) or mean raw score")
    p.add_argument("--out", type=nonempty_path, default=None, metavar="PATH",
                   help="write the item table to PATH (.csv)")
    p.add_argument("--plots", type=nonempty_path, default=None, metavar="DIR",
                   help="write " + ", ".join(PLOTS) + " (and andersen.png with --andersen) "
                   "into DIR (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true", default=False,
                   help="no progress bar on stderr for --method cmle (it is drawn only on a "
                   "terminal anyway)")
    p.set_defaults(func=run)


def _check_folder(path: Path | None, andersen: bool) -> None:
    if path is not None:
        check_output_dir(path, "--plots", [*PLOTS, *(["andersen.png"] if andersen else [])])


def _check_out(path: Path | None, source: str | None) -> None:
    if path is not None:
        check_output_file(path, "--out", (".csv",), inputs=(source,))


def run(args: argparse.Namespace) -> int:
    handed_back = getattr(args, "andersen_file", None)
    if args.file is not None and handed_back is not None:
        raise ValueError(f"--andersen takes median or mean, got {handed_back!r} (FILE is "
                         f"{args.file})")
    args.file = args.file if args.file is not None else handed_back
    if args.file is None:
        raise ValueError("give the responses FILE (see `privirt fit --help`)")
    # every check that can fail on the arguments comes before any work or output
    if args.regularization is not None and args.method != "spectral":
        raise ValueError("--regularization applies to --method spectral only")
    check_out_and_plots(args.out, args.plots)
    _check_folder(args.plots, bool(args.andersen))
    _check_out(args.out, args.file)
    if args.plots is not None:
        from .._plot_base import _plt

        _plt()  # fails with the install hint when matplotlib is missing
    import pandas as pd

    from ..rasch.abilities import estimate_abilities
    from ..fit import andersen_test, item_fit, reliability
    from ._input import read_responses

    resp = read_responses(args)
    if args.method == "cmle":
        from ..rasch.cmle import cmle_estimate

        est = cmle_estimate(resp, progress=False if args.no_progress else None)  # None: a terminal's
        table = pd.DataFrame({"beta": est.beta, "se": est.se})
    else:
        from ..rasch.spectral import spectral_estimate

        est = spectral_estimate(resp, regularization="auto" if args.regularization is None
                                else args.regularization)
        table = pd.DataFrame({"beta": est.beta})
    abilities = estimate_abilities(resp, est.beta, method="wle")
    fit = item_fit(resp, est, abilities)
    rel = reliability(resp, est, abilities)
    andersen = andersen_test(resp, args.andersen) if args.andersen else None
    table = table.join(fit)
    table.index.name = "item"
    if args.plots is not None:
        args.plots.mkdir(exist_ok=True)  # (before any file is written: a folder that cannot be made fails first)
    failed = None
    if args.out is not None:
        from ._table import write_table

        try:
            write_table(table, args.out)
        except OSError as exc:  # (a full disk: the result is printed all the same, then the error)
            failed = exc
        else:
            print(f"wrote {args.out}", file=sys.stderr)
    print(f"{args.method} estimate: {resp.n_persons} persons × {resp.n_items} items; fit with "
          f"WLE abilities, persons with an extreme score left out")
    print(table.to_string(float_format=lambda v: f"{v: .3f}", index_names=False))
    print("infit/outfit: mean squares, 1 as the model expects (> 1 noise, < 1 redundancy); "
          "*_z: standardized, |z| > 2 flags misfit; n: responses used")
    print(f"reliability: {rel}")
    if andersen is not None:
        print(str(andersen))
    plots_then_raise(None if failed is None else out_not_written(args.out, failed), args.plots,
                     lambda: _write_plots(args.plots, est, abilities, andersen))
    return 0


def _write_plots(folder: Path, est, abilities, andersen) -> None:
    from .. import plots

    folder.mkdir(exist_ok=True)
    drawers = {
        "wright_map.png": lambda p: plots.wright_map(est, abilities, path=p),
        "item_information.png": lambda p: plots.item_information_curves(est, path=p),
        "test_information.png": lambda p: plots.test_information_curve(est, theta=abilities,
                                                                       path=p),
    }
    if andersen is not None:
        drawers["andersen.png"] = lambda p: plots.andersen_plot(andersen, path=p)
    for name, draw in drawers.items():
        write_plot(folder, name, draw)
    print(f"wrote {', '.join(drawers)} to {folder}", file=sys.stderr)

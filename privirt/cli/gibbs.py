"""``privirt gibbs``: fit the 2PNO model by Gibbs sampling and write a posterior summary.

Example::

    privirt gibbs responses.csv --iter 10000 --warmup 5000 --chains 4 \\
        --out summary.csv --plots figures/
    privirt gibbs votes.csv --person-col member --slopes free \\
        --anchor KENNEDY=- --anchor HELMS=+ --out summary.csv

The command line's prior on the slopes a is N(1, 1) truncated to a > 0, which docs/gibbs.md
recommends for routine use (the flat prior's tail is improper), and N(0, 4) with
``--slopes free``; ``--prior-a-flat`` gives the paper's flat prior, which stays the default of
:func:`privirt.gibbs_2pno` for reproduction.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ._paths import OutNotWritten, plots_then_raise, write_plot
from ._plot_items import PLOTTED_RULE, TRACE_ITEMS, plotted_items
from ._sampler_args import (
    add_chain_arguments,
    add_data_arguments,
    add_prior_arguments,
    check_outputs,
    check_schedule,
    fixed_by_anchors,
    make_plot_dir,
    priors_from_args,
    summarise,
    warn_convergence,
    write_summary,
)

#: the command line's default prior on a: N(1, 1) truncated to a > 0 (docs/gibbs.md)
DEFAULT_PRIOR_A = (1.0, 1.0)
#: ... and with --slopes free: N(0, 4) (either sign equally likely a priori)
FREE_PRIOR_A = (0.0, 4.0)
#: the files ``--plots`` writes
PLOT_FILES = ("trace_a.png", "trace_b.png", "item_response_curves.png", "theta_density.png")


def parse_anchor(text: str) -> tuple[str, float | str]:
    """``NAME=VALUE`` -> (name, value): a number fixes θ, ``+`` / ``-`` constrains its sign."""
    name, sep, value = text.rpartition("=")
    value = value.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"--anchor expects NAME=VALUE such as HELMS=+ (θ > 0), KENNEDY=- (θ < 0) or "
            f"HELMS=1.5 (θ fixed), got {text!r}"
        )
    if value in ("+", "-"):
        return name, value
    try:
        return name, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--anchor {text!r}: the value after '=' must be + or - (a sign) or a number "
            "(θ fixed at it)"
        ) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "gibbs",
        help="2PNO Gibbs sampler (Sheng, Welling & Zhu 2014): posterior summary of a, b, θ",
        description=(
            "Sample the posterior of the two-parameter normal ogive model "
            "P(y=1) = Φ(aθ − b), θ ~ N(0, 1), by Gibbs sampling, and write the summary "
            "(mean, sd, quantiles, batch-means MCSE, R-hat, ESS) of every parameter."
        ),
    )
    add_data_arguments(p)
    add_chain_arguments(
        p, warmup_help="discarded warmup (burn-in) iterations",
        plots_help=f"write trace plots of a and b (trace_a.png, trace_b.png: the {TRACE_ITEMS} "
                   "items whose a has the largest R-hat, b likewise, those without one first), "
                   "those items' response curves (item_response_curves.png) and the θ density "
                   "(theta_density.png) into DIR (needs matplotlib)",
    )
    add_prior_arguments(p, {
        "a": "normal prior on a, truncated to a > 0 unless --slopes free (default: 1 1, the "
             "safe choice of docs/gibbs.md; with --slopes free 0 4)",
        "b": "normal prior on b (default: flat, as in the paper)",
    })
    p.add_argument("--prior-a-flat", action="store_true",
                   help="the paper's flat prior on a > 0 instead (improper in the tail: steep "
                   "items in small samples can drift to huge slopes; see docs/gibbs.md)")
    p.add_argument("--persons", action="store_true",
                   help="without --out, print the persons' θ rows too (by default only a and b; "
                   "--out always writes every row)")
    p.add_argument(
        "--slopes", choices=["positive", "free"], default="positive",
        help="positive: a > 0 (test items keyed one way; the default); free: slopes of either "
             "sign (roll calls, reverse-worded items), direction fixed by --anchor",
    )
    p.add_argument(
        "--anchor", action="append", type=parse_anchor, default=[], metavar="NAME=VALUE",
        help="anchor person NAME (repeatable): VALUE + or - constrains θ to that sign, a "
             "number fixes θ at it (MCMCirt1d's theta.constraints), e.g. --anchor KENNEDY=-",
    )
    p.add_argument(
        "--engine", choices=["auto", "fused", "numpy"], default="auto",
        help="CPU engine: fused (numba kernel, the 'fast' extra), numpy, or auto (fused when "
             "numba is installed); the GPU has its own kernels",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..bayes import gibbs_2pno, twopno
    from ..bayes.gibbs import resolve_engine, sampler_device
    from ..bayes.slopes import check_anchors
    from ._input import read_responses

    started = time.perf_counter()
    check_outputs(args, PLOT_FILES)
    if args.prior_a_flat and args.prior_a is not None:
        raise ValueError("--prior-a and --prior-a-flat are two priors on a; give one")
    priors = priors_from_args(args, ("a", "b"))
    if not args.prior_a_flat:
        # positive slopes: N(1, 1) truncated to a > 0; free slopes: N(0, 4), symmetric in the
        # sign (MCMCirt1d's scale), so that neither direction is preferred a priori
        priors.setdefault("a", DEFAULT_PRIOR_A if args.slopes == "positive" else FREE_PRIOR_A)
    anchors = dict(args.anchor)
    if len(anchors) != len(args.anchor):
        raise ValueError("a person is given more than one --anchor; give each person once")
    # the priors, schedule, device/engine and anchor values before the data are read (one
    # error line, no data warning before it); the anchors' labels once the persons are known
    twopno.check_priors(priors)
    check_schedule(args)
    resolve_engine(args.engine, sampler_device(args.device, args.engine))
    check_anchors(anchors, pd.Index(list(anchors)))  # values only: labels match themselves
    resp = read_responses(args)
    post = gibbs_2pno(
        resp, n_iter=args.n_iter, warmup=args.warmup, thin=args.thin,
        n_chains=args.chains, priors=priors, device=args.device, seed=args.seed,
        progress=not args.no_progress, keep_draws=True, engine=args.engine,
        slopes=args.slopes, anchors=anchors or None,
    )
    table, timing = summarise(post, args, started)
    failed = None
    if args.out is not None:
        try:
            out = write_summary(table, args.out)
        except OutNotWritten as exc:  # (a full disk: the summary is printed; warnings and plots follow)
            failed = exc
        else:
            print(
                f"wrote {out} ({len(table)} rows: a, b for {resp.n_items} items, θ for "
                f"{resp.n_persons} persons; {post.n_chains} chain(s) × {post.n_draws} draws; "
                f"{timing})", file=sys.stderr
            )
    if args.out is None:
        shown = table if args.persons else table.drop(index="theta", level=0)
        sys.stdout.write(shown.to_string() + "\n")
        if not args.persons:
            print(f"(θ of {resp.n_persons} persons not shown: --persons prints them, --out "
                  "writes every row)", file=sys.stderr)
        print(timing, file=sys.stderr)
    warn_convergence(table, fixed=fixed_by_anchors(post))  # θ fixed by --anchor: constant
    if post.info["reflected_chains"]:
        print(f"chains reflected to agree with the data's first principal component: "
              f"{post.info['reflected_chains']} (give --anchor to fix the direction)",
              file=sys.stderr)
    plots_then_raise(failed, args.plots, lambda: _write_plots(post, table, args.plots))
    return 0


def _write_plots(post: Any, table: Any, path: str) -> None:
    """The traces of the items whose a, and whose b, mixed worst (:func:`plotted_items`, as
    ``privirt mh``), those items' response curves, and the θ density."""
    from .. import plots

    folder = make_plot_dir(path)
    chosen = plotted_items(table)
    for block, labels in chosen.items():
        write_plot(folder, f"trace_{block}.png",
                   lambda p, b=block, c=labels: plots.trace_plot(post, b, labels=c, path=p))
    curves = list(dict.fromkeys(chosen["a"] + chosen["b"]))  # at most 2 x 6: one page
    write_plot(folder, "item_response_curves.png",
               lambda p: plots.item_response_curves(post, items=curves, path=p))
    write_plot(folder, "theta_density.png", lambda p: plots.theta_density(post, path=p))
    print(f"wrote {', '.join(PLOT_FILES)} to {folder} ({PLOTTED_RULE}; the curves: those items)",
          file=sys.stderr)

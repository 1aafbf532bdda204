"""``privirt gibbs``: fit the 2PNO model by Gibbs sampling and write a posterior summary.

Example::

    privirt gibbs responses.csv --iter 10000 --warmup 5000 --chains 4 \\
        --out summary.csv --plots figures/

The command line's prior on the slopes a is N(1, 1) truncated to a > 0, which docs/gibbs.md
recommends for routine use (the flat prior's tail is improper); ``--prior-a-flat`` gives the
paper's flat prior, which stays the default of :func:`privirt.gibbs_2pno` for reproduction.
"""

from __future__ import annotations

import argparse
import sys
import time

from ._sampler_args import (
    add_chain_arguments,
    add_data_arguments,
    add_prior_arguments,
    check_outputs,
    make_plot_dir,
    page_names,
    pages,
    priors_from_args,
    summarise,
    warn_convergence,
    write_summary,
)

#: the command line's default prior on a: N(1, 1) truncated to a > 0 (docs/gibbs.md)
DEFAULT_PRIOR_A = (1.0, 1.0)
#: items per trace-plot page and per item-response-curve page
TRACE_PAGE, CURVE_PAGE = 6, 20


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
        plots_help="write trace plots of a and b (6 items a page: trace_a_1.png, ...), item "
                   "response curves and the θ density as PNG files into DIR (needs matplotlib)",
    )
    add_prior_arguments(p, {
        "a": "normal prior on a truncated to a > 0 (default: 1 1, the safe choice of "
             "docs/gibbs.md)",
        "b": "normal prior on b (default: flat, as in the paper)",
    })
    p.add_argument("--prior-a-flat", action="store_true",
                   help="the paper's flat prior on a > 0 instead (improper in the tail: steep "
                   "items in small samples can drift to huge slopes; see docs/gibbs.md)")
    p.add_argument("--persons", action="store_true",
                   help="without --out, print the persons' θ rows too (by default only a and b; "
                   "--out always writes every row)")
    p.add_argument(
        "--engine", choices=["auto", "fused", "numpy"], default="auto",
        help="CPU engine: fused (numba kernel, the 'fast' extra), numpy, or auto (fused when "
             "numba is installed); the GPU has its own kernels",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..bayes import gibbs_2pno
    from ._input import read_responses

    started = time.perf_counter()
    check_outputs(args)
    if args.prior_a_flat and args.prior_a is not None:
        raise ValueError("--prior-a and --prior-a-flat are two priors on a; give one")
    resp = read_responses(args)
    priors = priors_from_args(args, ("a", "b"))
    if not args.prior_a_flat:
        priors.setdefault("a", DEFAULT_PRIOR_A)
    post = gibbs_2pno(
        resp, n_iter=args.n_iter, warmup=args.warmup, thin=args.thin,
        n_chains=args.chains, priors=priors, device=args.device, seed=args.seed,
        progress=not args.no_progress, keep_draws=True, engine=args.engine,
    )
    table, timing = summarise(post, args, started)
    if args.out:
        out = write_summary(table, args.out)
        print(
            f"wrote {out} ({len(table)} rows: a, b for {resp.n_items} items, θ for "
            f"{resp.n_persons} persons; {post.n_chains} chain(s) × {post.n_draws} draws; "
            f"{timing})"
        )
    else:
        shown = table if args.persons else table.drop(index="theta", level=0)
        sys.stdout.write(shown.to_string() + "\n")
        if not args.persons:
            print(f"(θ of {resp.n_persons} persons not shown: --persons prints them, --out "
                  "writes every row)", file=sys.stderr)
        print(timing, file=sys.stderr)
    warn_convergence(table)
    if args.plots is not None:
        _write_plots(post, args.plots)
    return 0


def _write_plots(post, path: str) -> None:
    """Every item's trace (6 a page) and response curve (20 a page), and the θ density."""
    import matplotlib.pyplot as plt

    from .. import plots

    folder = make_plot_dir(path)
    items = list(post.labels["a"])
    jobs = []
    for block in ("a", "b"):
        chunks = pages(items, TRACE_PAGE)
        for name, chunk in zip(page_names(f"trace_{block}", len(chunks)), chunks):
            jobs.append((name, lambda p, c=chunk, b=block: plots.trace_plot(post, b, labels=c,
                                                                            path=p)))
    chunks = pages(items, CURVE_PAGE)
    for name, chunk in zip(page_names("item_response_curves", len(chunks)), chunks):
        jobs.append((name, lambda p, c=chunk: plots.item_response_curves(post, items=c, path=p)))
    jobs.append(("theta_density.png", lambda p: plots.theta_density(post, path=p)))
    for name, draw in jobs:
        plt.close(draw(folder / name))
    print(f"wrote {', '.join(name for name, _ in jobs)} to {folder}")

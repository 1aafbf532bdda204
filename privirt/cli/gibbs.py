"""``privirt gibbs``: fit the 2PNO model by Gibbs sampling and write a posterior summary.

Example::

    privirt gibbs responses.csv --iter 10000 --warmup 5000 --chains 4 \\
        --out summary.csv --plots figures/
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
    priors_from_args,
    summarise,
    write_summary,
)


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
        plots_help="write trace plots of a and b, item response curves and the θ density as "
                   "PNG files into DIR (needs matplotlib)",
    )
    add_prior_arguments(p, {
        "a": "normal prior on a truncated to a > 0 (default: flat on a > 0)",
        "b": "normal prior on b (default: flat, as in the paper)",
    })
    p.add_argument(
        "--engine", choices=["auto", "fused", "numpy"], default="auto",
        help="CPU engine: fused (numba kernel, the 'fast' extra), numpy, or auto (fused when "
             "numba is installed); the GPU has its own kernels",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..bayes import gibbs_2pno
    from ..data.responses import as_responses

    started = time.perf_counter()
    check_outputs(args)
    resp = as_responses(args.file, format=args.format, person_col=args.person_col)
    priors = priors_from_args(args, ("a", "b"))
    post = gibbs_2pno(
        resp, n_iter=args.n_iter, warmup=args.warmup, thin=args.thin,
        n_chains=args.chains, priors=priors or None, device=args.device, seed=args.seed,
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
        sys.stdout.write(table.to_string() + "\n")
        print(timing, file=sys.stderr)
    if args.plots is not None:
        from .. import plots

        folder = make_plot_dir(args.plots)
        import matplotlib.pyplot as plt

        written = []
        for name, draw in (
            ("trace_a.png", lambda p: plots.trace_plot(post, "a", path=p)),
            ("trace_b.png", lambda p: plots.trace_plot(post, "b", path=p)),
            ("item_response_curves.png", lambda p: plots.item_response_curves(post, path=p)),
            ("theta_density.png", lambda p: plots.theta_density(post, path=p)),
        ):
            fig = draw(folder / name)
            plt.close(fig)
            written.append(name)
        print(f"wrote {', '.join(written)} to {folder}")
    return 0

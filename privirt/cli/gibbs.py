"""``privirt gibbs``: fit the 2PNO model by Gibbs sampling and write a posterior summary.

Example::

    privirt gibbs responses.csv --iter 10000 --warmup 5000 --chains 4 \\
        --out summary.csv --plots figures/
    privirt gibbs votes.csv --person-col member --slopes free \\
        --anchor KENNEDY=- --anchor HELMS=+ --out summary.csv
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
    warn_deprecated_flags,
    write_summary,
)


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
        plots_help="write trace plots of a and b, item response curves and the θ density as "
                   "PNG files into DIR (needs matplotlib)",
    )
    add_prior_arguments(p, {
        "a": "normal prior on a truncated to a > 0 (default: flat on a > 0)",
        "b": "normal prior on b (default: flat, as in the paper)",
    })
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
    from ..bayes import gibbs_2pno
    from ..responses import as_responses

    started = time.perf_counter()
    warn_deprecated_flags(args)
    check_outputs(args)
    resp = as_responses(args.file, format=args.format, person_col=args.person_col)
    priors = priors_from_args(args, ("a", "b"))
    anchors = dict(args.anchor)
    if len(anchors) != len(args.anchor):
        raise ValueError("a person is given more than one --anchor; give each person once")
    post = gibbs_2pno(
        resp, n_iter=args.n_iter, warmup=args.warmup, thin=args.thin,
        n_chains=args.chains, priors=priors or None, device=args.device, seed=args.seed,
        progress=not args.no_progress, keep_draws=True, engine=args.engine,
        slopes=args.slopes, anchors=anchors or None,
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
    if post.info["reflected_chains"]:
        print(f"chains reflected to agree with the data's first principal component: "
              f"{post.info['reflected_chains']} (give --anchor to fix the direction)",
              file=sys.stderr)
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

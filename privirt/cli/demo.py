"""``privirt demo``: spectral, conditional-ML and private spectral estimates on the bundled
LSAT6 data, side by side."""

from __future__ import annotations

import argparse

from ._types import number


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="spectral vs conditional ML vs private spectral on the bundled LSAT6 data",
        description="Estimate the Rasch difficulties of the five LSAT6 items (1000 persons) "
        "with the spectral estimator, with conditional maximum likelihood and with the "
        "differentially private spectral estimator (discrete Gaussian noise on the pairwise "
        "counts), and print them side by side.",
    )
    parser.add_argument(
        "--dataset", default="lsat6", help="bundled data set (default: lsat6; see list_datasets)"
    )
    parser.add_argument(
        "--epsilon", type=number, default=1.0, metavar="E",
        help="privacy budget ε of the private column (default 1; δ = 1e-4)",
    )
    parser.add_argument("--no-private", action="store_true", help="omit the private column")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from .. import metrics
    from ..cmle import cmle_estimate
    from ..data import load_dataset
    from ..spectral import spectral_estimate

    X = load_dataset(args.dataset)
    spec = spectral_estimate(X, device="cpu")
    cml = cmle_estimate(X)
    table = pd.DataFrame(
        {
            "p_correct": X.mean(axis=0),
            "spectral": spec.beta,
            "cmle": cml.beta,
            "cmle_se": cml.se,
        }
    )
    table["difference"] = table["spectral"] - table["cmle"]
    private = None
    if not args.no_private:
        from ..private import private_spectral_estimate

        # fresh secure noise on every run: the column changes from run to run
        private = private_spectral_estimate(X, epsilon=args.epsilon, delta=1e-4, device="cpu")
        table[f"private_eps{args.epsilon:g}"] = private.beta
    table.index.name = "item"
    print(
        f"Rasch item difficulties on {args.dataset} ({X.shape[0]} persons × {X.shape[1]} items), "
        "centred, higher = harder"
    )
    print(table.to_string(float_format=lambda v: f"{v: .4f}", index_names=False))
    print(
        f"max |spectral − cmle| = {metrics.linf_error(spec.beta, cml.beta):.4f}; "
        f"Kendall tau = {metrics.kendall_tau(spec.beta, cml.beta):.3f}; "
        f"spectral solver: {spec.solver}; cmle converged: {cml.converged}"
    )
    if private is not None:
        p = private.privacy
        print(
            f"private column: {p.mechanism} noise (sigma = {p.noise_value:.3g}) on the pairwise "
            f"counts, ({p.epsilon:g}, {p.delta:g})-DP for the relation '{p.relation}'; "
            f"max |private − cmle| = {metrics.linf_error(private.beta, cml.beta):.4f} "
            "(fresh noise each run)"
        )
    return 0

"""``privirt demo``: non-private (spectral, conditional ML) and private (totals with intervals,
Algorithm 2) Rasch difficulties on the bundled LSAT6 data, side by side; then 2PNO
discriminations: the non-private Gibbs posterior mean beside the private 2PL estimate."""

from __future__ import annotations

import argparse

from .._constants import DEFAULT_DELTA, DEFAULT_DELTA_TEXT
from ._types import Once, number


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="non-private and private Rasch difficulties and 2PNO discriminations on the bundled LSAT6 data",
        description="Estimate the Rasch difficulties of the five LSAT6 items (1000 persons) "
        "without privacy (spectral and conditional ML) and with differential privacy: the "
        "private totals estimator (noisy item totals and score histogram, with 95 % intervals "
        "that include the privacy noise) beside Algorithm 2 (noisy pairwise counts); then the "
        "2PNO discriminations: the Gibbs posterior mean beside the private 2PL estimate (noisy "
        "item totals and pair disagreement counts).",
    )
    parser.add_argument(
        "--dataset", default="lsat6", help="bundled data set (default: lsat6; see list_datasets)"
    )
    parser.add_argument(
        "--epsilon", action=Once, type=number, default=None, metavar="E",
        help=f"privacy ε of each private column (default 1; δ = {DEFAULT_DELTA_TEXT})",
    )
    parser.add_argument("--no-private", action="store_true",
                        help="only the non-private Rasch table (no private sets, no 2PNO table)")
    parser.set_defaults(func=run)


_FMT = {"float_format": lambda v: f"{v: .4f}", "index_names": False}


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from .. import metrics
    from ..private.accounting import check_target_epsilon
    from ..rasch.cmle import cmle_estimate
    from ..data.datasets import load_dataset
    from ..rasch.spectral import spectral_estimate

    if args.no_private and args.epsilon is not None:
        raise ValueError("--epsilon sets the private columns, which --no-private leaves out; give one of the two")
    if not args.no_private:
        args.epsilon = 1.0 if args.epsilon is None else args.epsilon
        try:
            check_target_epsilon(args.epsilon)  # before any work
        except ValueError as exc:  # (without the library's advice to leave out epsilon: the demo's default is 1)
            text = str(exc).split("; privirt has no non-private path")[0]
            raise ValueError(f"{text}; --no-private leaves out the private columns") from None
    X = load_dataset(args.dataset)
    spec = spectral_estimate(X, device="cpu")
    cml = cmle_estimate(X, progress=False)  # a bundled data set: a fraction of a second
    table = pd.DataFrame(
        {
            "p_correct": X.mean(axis=0),
            "spectral": spec.beta,
            "cmle": cml.beta,
            "cmle_se": cml.se,
        }
    )
    table["spectral-cmle"] = table["spectral"] - table["cmle"]
    table.index.name = "item"
    print(
        f"Rasch item difficulties on {args.dataset} ({X.shape[0]} persons × {X.shape[1]} items), "
        "centred, higher = harder"
    )
    print("\nNot private (exact statistics of the raw responses):")
    print(table.to_string(**_FMT))
    print(
        f"max |spectral − cmle| = {metrics.linf_error(spec.beta, cml.beta):.4f}; "
        f"Kendall tau = {metrics.kendall_tau(spec.beta, cml.beta):.3f}"
    )
    if args.no_private:
        return 0

    from ..private import private_spectral_estimate
    from ..private.totals.api import private_totals_estimate

    eps = args.epsilon
    # fresh secure noise on every run: these columns change from run to run
    tot = private_totals_estimate(X, epsilon=eps, delta=DEFAULT_DELTA)
    alg2 = private_spectral_estimate(X, epsilon=eps, delta=DEFAULT_DELTA, device="cpu", estimator="spectral")
    private = pd.DataFrame(
        {"totals": tot.beta, "totals_lo": tot.ci["lo"], "totals_hi": tot.ci["hi"],
         "alg2": alg2.beta, "alg2_lo": alg2.ci["lo"], "alg2_hi": alg2.ci["hi"]}
    )
    private.index.name = "item"
    print(f"\nPrivate (each column set ({eps:g}, {DEFAULT_DELTA_TEXT})-DP on its own; fresh noise every run):")
    print(private.to_string(**_FMT))
    tp, ap = tot.privacy, alg2.privacy
    print(
        f"totals: noisy item totals and raw-score histogram (discrete Gaussian, sigma = "
        f"{_part_sigmas(tp)}), Rasch marginal ML with shrinkage; [lo, hi] is a 95 % interval "
        "that includes the privacy noise"
    )
    print(
        f"alg2: Algorithm 2 of Nguyen & Zhang, noisy pairwise counts (discrete Gaussian, sigma = "
        f"{ap.noise_value:.3g}), spectral estimate; [lo, hi] is a 95 % bootstrap interval of the "
        "released counts (docs/intervals.md)"
    )
    print(
        f"max |totals − cmle| = {metrics.linf_error(tot.beta, cml.beta):.4f}; "
        f"max |alg2 − cmle| = {metrics.linf_error(alg2.beta, cml.beta):.4f}"
    )
    print(
        f"({eps:g}, {DEFAULT_DELTA_TEXT})-DP for the relation '{tp.relation}': whatever one person's answers, "
        f"the probability of any output changes by a factor of at most e^{eps:g}, except with "
        f"probability at most δ = {DEFAULT_DELTA_TEXT}."
    )
    _two_pl(X, eps, args.dataset)
    print(
        "The output as a whole is NOT a private release: the non-private columns are exact statistics "
        f"of the same data, and the three private sets together are ({3 * eps:g}, 3e-4)-DP (basic "
        "composition)."
    )
    return 0


def max_abs_difference(a, b) -> float:
    """The largest |a_i − b_i| of two Series by item (discriminations are not centred:
    ``metrics.linf_error`` centres both first, as difficulties need)."""
    return float((a - b.reindex(a.index)).abs().max())


def _two_pl(X, eps: float, name: str) -> None:
    """2PNO discriminations: the Gibbs posterior mean (not private) beside the private estimate."""
    import pandas as pd

    from ..bayes import gibbs_2pno
    from ..private.twopl import private_2pl_estimate

    post = gibbs_2pno(X, n_iter=3000, warmup=1000, seed=1, progress=False, keep_draws=False)
    fit = private_2pl_estimate(X, epsilon=eps, delta=DEFAULT_DELTA)  # fresh secure noise every run
    table = pd.DataFrame({"gibbs_a": post.mean("a"), "a": fit.a, "a_lo": fit.ci["a"]["lo"], "a_hi": fit.ci["a"]["hi"],
                          "gibbs_b": post.mean("b"), "b": fit.b, "b_lo": fit.ci["b"]["lo"], "b_hi": fit.ci["b"]["hi"]})
    table.index.name = "item"
    print(f"\n2PNO discriminations a and difficulties b on {name}, P = Φ(a θ − b), θ ~ N(0, 1): "
          f"Gibbs posterior mean (not private) beside private ({eps:g}, {DEFAULT_DELTA_TEXT})-DP estimates:")
    print(table.to_string(**_FMT))
    print(f"private: noisy item totals and pair disagreement counts (discrete Gaussian, sigma = "
          f"{_part_sigmas(fit.privacy)}), one-factor normal-ogive fit with shrinkage of a; [lo, hi] is a "
          f"95 % interval that includes the privacy noise; max |a − gibbs_a| = "
          f"{max_abs_difference(fit.a, post.mean('a')):.3f}")


def _part_sigmas(statement) -> str:
    """One σ per part of a multi-part release: "20.7 on the item totals and 34.8 on the score histogram"."""
    return " and ".join(f"{q.sigma:.3g} on the {q.name}" for q in statement.parts)

"""Ideal-point workflow: a votes matrix in, a ranked, plotted posterior out.

The Bayesian 2PL model read as a spatial voting model (Clinton, Jackman & Rivers 2004):
voter ``i`` has an ideal point θ_i on one dimension; vote ``j`` has a polarity
(slope) ``a_j`` and a cut point (intercept) ``b_j``, and

    P(voter i votes yes on j) = logistic(a_j θ_i − b_j).

Abstentions and absences are missing and drop out of the likelihood.  The direction of the
scale is not identified by the data ((θ, a) and (−θ, −a) fit equally well), so one or more
*anchors* fix it: ``--anchor NAME=-1`` keeps NAME's ideal point negative ("left"),
``--anchor NAME=+1`` positive.

Steps
-----
1. Load the matrix (CSV or Parquet; rows = voters, columns = votes, 1 = yea, 0 = nay,
   empty = absent; ``--transpose`` when voters are the columns, ``--person-col`` names the
   label column, ``--drop-cols`` removes non-vote columns such as party or state).
2. Run :func:`privirt.mh_2pl` with the anchors, several chains and adaptive proposals.
3. Write ``summary.csv`` (all parameters: mean, sd, 2.5 %, median, 97.5 %, MCSE, R-hat,
   ESS), ``ideal_points.csv`` (θ sorted), ``ideal_points.png`` (dot and 95 % interval per
   voter; beyond 500 voters, the 20 lowest and 20 highest) and ``trace_theta.png`` (the anchors
   and the extremes) into ``--out``.
4. Print the ranking, acceptance rates and the largest R-hat, and on stderr the warning of
   ``privirt mh`` when the chains have not converged (R-hat > 1.01 or bulk ESS < 400).

Example (simulated votes; see the README)::

    python experiments/ideal_points.py votes.csv --anchor v3=-1 --anchor v17=+1 \\
        --iter 4000 --warmup 2000 --chains 2 --out results/
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir)))

import privirt  # noqa: E402
from privirt.cli._sampler_args import convergence_problem  # noqa: E402
from privirt.cli.mh import parse_anchor  # noqa: E402


def column_names(values: list[str]) -> list[str]:
    """The ``--drop-cols`` names, separated by spaces or by commas (``a b`` or ``a,b``, as
    ``privirt``'s ``--drop-cols a,b``); empty pieces (``a, b``) are skipped."""
    return [name for value in values for name in (n.strip() for n in value.split(",")) if name]


def load_votes(path: str, *, transpose: bool, person_col: str | None,
               drop_cols: list[str]) -> privirt.Responses:
    """Read a votes table as a voters × votes :class:`privirt.Responses`."""
    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if p.suffix.lower() in (".parquet", ".pq"):
        frame = pd.read_parquet(p)
    else:
        frame = pd.read_csv(p)
    if person_col is not None:
        if person_col not in frame.columns and person_col != frame.index.name:
            raise ValueError(f"--person-col {person_col!r} is not a column of {path}")
        if person_col in frame.columns:  # else a Parquet file restored it as the index
            frame = frame.set_index(person_col)
    elif frame.columns[0].startswith("Unnamed") or frame.columns[0].lower() in (
        "person", "voter", "name", "id"
    ):
        frame = frame.set_index(frame.columns[0])
    bad = [c for c in drop_cols if c not in frame.columns]
    if bad:
        raise ValueError(f"--drop-cols: no column(s) {bad} in {path}; give column names of "
                         "its header, separated by spaces or commas")
    frame = frame.drop(columns=drop_cols)
    if transpose:
        frame = frame.T
    return privirt.as_responses(frame)


def main(argv: list[str] | None = None) -> int:
    """Run the workflow; bad input is one ``ideal_points.py: error: ...`` line, status 2."""
    try:
        return _run(argv)
    except (OSError, ValueError, privirt.PrivirtError) as exc:
        print(f"ideal_points.py: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


def _run(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description="Ideal points from a votes matrix (2PL MH).")
    ap.add_argument("votes", help="votes CSV/Parquet: rows voters, columns votes")
    ap.add_argument("--transpose", action="store_true", help="voters are the columns")
    ap.add_argument("--person-col", default=None, help="column with the voter labels")
    ap.add_argument("--drop-cols", nargs="*", default=[], metavar="COL",
                    help="non-vote columns to drop: COL COL ... or COL,COL,...")
    ap.add_argument("--anchor", action="append", type=parse_anchor, default=[],
                    metavar="NAME=VALUE", help="sign anchor, e.g. --anchor Scalia=+1")
    ap.add_argument("--prior-a", type=float, nargs=2, metavar=("MEAN", "VAR"), default=None,
                    help="normal prior of the slopes (default 0 100; e.g. 0 4 keeps θ on "
                    "the N(0, 1) scale when there are many more votes than voters)")
    ap.add_argument("--iter", type=int, default=10000, help="iterations incl. warmup")
    ap.add_argument("--warmup", type=int, default=5000)
    ap.add_argument("--thin", type=int, default=1)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="ideal_points_out", help="output folder")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    args = ap.parse_args(argv)

    resp = load_votes(args.votes, transpose=args.transpose, person_col=args.person_col,
                      drop_cols=column_names(args.drop_cols))
    anchors = dict(args.anchor) or None
    post = privirt.mh_2pl(resp, n_iter=args.iter, warmup=args.warmup, thin=args.thin,
                          n_chains=args.chains, seed=args.seed, anchors=anchors,
                          priors=None if args.prior_a is None else {"a": tuple(args.prior_a)},
                          progress=not args.quiet)
    # after the sampler has taken the arguments: refused input is the one error line
    print(f"{resp}", file=sys.stderr)
    if anchors is None:
        print("no --anchor given: the sign of the scale is set by convention "
              "(mean slope positive)", file=sys.stderr)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = post.summary()
    summary.to_csv(out / "summary.csv")
    theta = post.summary("theta").sort_values("mean")
    theta.to_csv(out / "ideal_points.csv")

    from privirt.plots import IDEAL_POINT_ROWS, ideal_point_plot, trace_plot

    # every person while the figure stays readable; beyond, the 20 lowest and 20 highest
    ends = None if len(theta) <= IDEAL_POINT_ROWS else list(theta.index[:20]) + list(theta.index[-20:])
    ideal_point_plot(post, labels=ends, path=out / "ideal_points.png")
    show = list(anchors or []) + list(theta.index[:2]) + list(theta.index[-2:])
    show = [lab for lab in dict.fromkeys(show) if lab in theta.index][:6]
    trace_plot(post, "theta", labels=show, path=out / "trace_theta.png")

    print("ranking (lowest to highest ideal point):")
    for rank, (label, row) in enumerate(theta.iterrows(), start=1):
        print(f"{rank:4d}  {str(label):30s} {row['mean']:7.3f}  "
              f"[{row['q2.5']:7.3f}, {row['q97.5']:7.3f}]")
    print("\nacceptance rates:")
    print(post.acceptance_rates().round(3).to_string())
    if post.n_chains > 1:
        print(f"max R-hat: {summary['rhat'].max():.3f}")
    cut = "" if ends is None else f" (the 20 lowest and 20 highest of {len(theta)} voters)"
    print(f"\nwrote summary.csv, ideal_points.csv, ideal_points.png{cut}, trace_theta.png to {out}")
    problem = convergence_problem(summary)  # the words of privirt mh's warning
    if problem is not None:
        print(f"ideal_points.py: warning: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

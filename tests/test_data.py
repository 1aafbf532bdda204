"""Bundled data sets: shapes, labels and the published item proportions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.data.datasets import dataset_path

# Proportions correct as published with the LSAT data (Bock & Lieberman 1970; Bock & Aitkin 1981)
LSAT6_P = [0.924, 0.709, 0.553, 0.763, 0.870]
LSAT7_P = [0.828, 0.658, 0.772, 0.606, 0.843]


@pytest.mark.parametrize("name, props", [("lsat6", LSAT6_P), ("lsat7", LSAT7_P)])
def test_shape_labels_and_proportions(name, props):
    X = privirt.load_dataset(name)
    assert X.shape == (1000, 5)
    assert list(X.columns) == [f"item{i}" for i in range(1, 6)]
    assert X.index.name == "person" and X.index[0] == "p0001" and X.index.is_unique
    assert set(np.unique(X.to_numpy())) <= {0, 1}
    np.testing.assert_allclose(X.mean().to_numpy(), props, atol=5e-4)


def test_list_and_unknown():
    assert {"lsat6", "lsat7"} <= set(privirt.list_datasets())
    with pytest.raises(ValueError, match="unknown data set 'lsat8'"):
        privirt.load_dataset("lsat8")
    assert dataset_path("lsat6").name == "lsat6.csv"


def test_loads_as_responses():
    resp = privirt.as_responses(privirt.load_dataset("lsat7"))
    assert resp.shape == (1000, 5) and not resp.has_missing
    assert resp.persons[0] == "p0001"


# ---------------------------------------------------------------------------------------
# MovieLens ML-100K from a user-supplied u.data file (a small generated one here)
def _write_u_data(path, n_users=60, n_items=40, keep=0.6, seed=0):
    """A u.data-format file (tab-separated user, item, rating, timestamp) of 1-5 star ratings
    drawn from a rank-2 preference matrix; returns the true scores (users × items)."""
    rng = np.random.default_rng(seed)
    truth = 3.0 + rng.normal(size=(n_users, 2)) @ rng.normal(size=(2, n_items))
    users, items = np.nonzero(rng.random(truth.shape) < keep)
    stars = np.clip(np.rint(truth[users, items]), 1, 5).astype(int)
    stamps = 874724710 + rng.integers(0, 10**6, size=len(users))
    order = rng.permutation(len(users))  # u.data is not sorted by user
    lines = [f"{users[k] + 1}\t{items[k] + 1}\t{stars[k]}\t{stamps[k]}\n" for k in order]
    path.write_text("".join(lines), encoding="utf-8")
    return truth


def test_read_movielens_100k(tmp_path):
    path = tmp_path / "u.data"
    _write_u_data(path)
    ratings = privirt.data.datasets.read_movielens_100k(path)
    assert list(ratings.columns) == ["userId", "movieId", "rating", "timestamp"]
    assert ratings["userId"].dtype == np.int64 and ratings["rating"].dtype == np.float64
    assert len(ratings) == len(path.read_text().splitlines())
    assert ratings["rating"].between(1, 5).all() and ratings["userId"].min() >= 1
    long = privirt.data.datasets.movielens_ratings(path)
    assert list(long.columns) == ["userId", "movieId", "rating"]


def test_load_movielens_follows_the_papers_preprocessing(tmp_path):
    path = tmp_path / "u.data"
    truth = _write_u_data(path)
    X = privirt.load_movielens(path, rank=2, min_item_ratings=5, shrinkage=0.0)
    assert X.shape == (60, 40) and X.dtypes.eq(np.int8).all()
    assert X.index[0] == "u1" and X.columns[0] == "m1" and X.index.name == "person"
    # the same as the documented steps, one by one
    ratings = privirt.data.datasets.movielens_ratings(path)
    scores = privirt.data.datasets.complete_low_rank(ratings, rank=2, shrinkage=0.0, min_item_ratings=5)
    pd.testing.assert_frame_equal(X, privirt.data.datasets.binarize_by_user_mean(scores))
    # and close to binarising the (unobserved) true preferences at each user's mean
    true_bits = truth < truth.mean(axis=1, keepdims=True)
    assert (X.to_numpy() == true_bits).mean() > 0.85
    # items with too few ratings are dropped before completion
    per_item = ratings.groupby("movieId").size()
    cut = int(per_item.median()) + 1
    few = privirt.load_movielens(path, rank=2, min_item_ratings=cut)
    assert list(few.columns) == [f"m{i}" for i in per_item.index[per_item >= cut]]
    assert 2 <= few.shape[1] < 40


def test_load_movielens_random_item_subsets(tmp_path):
    path = tmp_path / "u.data"
    _write_u_data(path)
    full = privirt.load_movielens(path, rank=2, min_item_ratings=5)
    a = privirt.load_movielens(path, m=10, seed=3, rank=2, min_item_ratings=5)
    b = privirt.load_movielens(path, m=10, seed=3, rank=2, min_item_ratings=5)
    c = privirt.load_movielens(path, m=10, seed=4, rank=2, min_item_ratings=5)
    pd.testing.assert_frame_equal(a, b)
    assert a.shape == (60, 10) and list(c.columns) != list(a.columns)
    # a subset of the columns, in their original order
    pos = [full.columns.get_loc(col) for col in a.columns]
    assert pos == sorted(pos)
    pd.testing.assert_frame_equal(a, full[a.columns])
    with pytest.raises(ValueError, match="m must be an integer from 2 to the number of items"):
        privirt.load_movielens(path, m=41, rank=2, min_item_ratings=5)


@pytest.mark.parametrize("m", [None, 10])
@pytest.mark.parametrize("seed", ["abc", -1, 1.5, True])
def test_load_movielens_refuses_a_bad_seed_before_any_work(tmp_path, monkeypatch, seed, m):
    # without m the seed was not checked at all, with m only after the soft-impute
    path = tmp_path / "u.data"
    _write_u_data(path)
    monkeypatch.setattr(privirt.data.datasets, "complete_low_rank",
                        lambda *a, **k: pytest.fail("worked before refusing the seed"))
    with pytest.raises(ValueError, match="seed must be"):
        privirt.load_movielens(path, m=m, seed=seed, rank=2, min_item_ratings=5)


@pytest.mark.parametrize("content, message", [
    ("", "the file is empty"),
    ("1,2,3,4\n2,3,4,5\n", r"found 1 column\(s\) per line"),
    ("1\t2\t3\t874724710\n2\t5\tfive\t874724710\n", "line 2 has rating 'five', not a number"),
    ("1\t2\t3\t874724710\n2.5\t5\t4\t874724710\n", "line 2 has userId '2.5', not an integer"),
    ("1\t2\t3\n", r"found 3 column\(s\) per line"),
])
def test_malformed_u_data_is_a_one_line_error(tmp_path, content, message):
    path = tmp_path / "u.data"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as exc:
        privirt.load_movielens(path)
    assert "\n" not in str(exc.value) and "ML-100K" in str(exc.value)


def test_missing_u_data_is_a_one_line_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no MovieLens ratings file at") as exc:
        privirt.load_movielens(tmp_path / "nothing" / "u.data")
    assert "\n" not in str(exc.value) and "u.data" in str(exc.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"rank": 0}, "rank must be a positive integer"),
    ({"min_item_ratings": 2.5}, "min_item_ratings must be a positive integer"),
    ({"shrinkage": 1.0}, r"shrinkage must be a number in \[0, 1\)"),
    ({"m": 1}, "m must be an integer from 2"),
])
def test_load_movielens_checks_its_options(tmp_path, kwargs, message):
    path = tmp_path / "u.data"
    _write_u_data(path)
    with pytest.raises(ValueError, match=message):
        privirt.load_movielens(path, **kwargs)


@pytest.mark.parametrize("name", ["../datasets/lsat6", "x" * 300, "lsat6.csv", None])
def test_load_dataset_takes_only_a_bundled_name(name, tmp_path):
    # '../datasets/lsat6' and an absolute path loaded files outside the bundle, and a 300-byte
    # name failed as a raw 'File name too long' naming the package's folder
    with pytest.raises(ValueError, match=r"^unknown data set .*; available: \['lsat6', 'lsat7'\]"):
        privirt.load_dataset(name)
    other = tmp_path / "other.csv"
    other.write_text((privirt.data.datasets.dataset_path("lsat6")).read_text())
    with pytest.raises(ValueError, match=r"^unknown data set"):
        privirt.load_dataset(str(other.with_suffix("")))


def test_simulated_difficulties_beyond_a_double_are_refused():
    with pytest.raises(ValueError, match=r"^beta_scale=1e\+308 gives difficulties beyond a double"):
        privirt.simulate_rasch(5, 3, beta_scale=1e308, seed=88_000_006)  # (a seed whose sum overflows)

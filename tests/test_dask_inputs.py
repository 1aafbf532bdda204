"""The Dask engine reads its inputs as the in-memory reader does: item labels, the person
column, a file's unnamed label column, text booleans and long tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privirt

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as cl:
        yield cl


def _data(n=60, m=4, seed=2_200_000):
    rng = np.random.default_rng(seed)
    X = (rng.random((n, m)) < rng.uniform(0.2, 0.8, m)).astype(float)
    X[rng.random((n, m)) < 0.1] = np.nan
    return X


def test_array_items_are_matched_to_the_column_labels(client):
    X = _data()
    arr = da.from_array(X, chunks=(17, 4))
    for items in ([2, 3, 1, 0], [3, 0], ["3", "1"]):
        got = privirt.sufficient_statistics(arr, engine="dask", client=client, items=items)
        ref = privirt.sufficient_statistics(X, items=items)
        assert got.totals.tolist() == ref.totals.tolist()
        np.testing.assert_array_equal(got.counts[0], ref.counts[0])
        np.testing.assert_array_equal(got.counts[1], ref.counts[1])
        np.testing.assert_array_equal(got.answered, ref.answered)
    with pytest.raises(ValueError, match="item 'a' of `items` is not"):
        privirt.sufficient_statistics(arr, engine="dask", client=client, items=["a", "b", "c", "d"])
    # seeded private releases: the public item set in another order, and with an absent item
    for items in ([3, 2, 1, 0], [1, 0, 4, 3, 2]):
        got = privirt.release_counts(arr, engine="dask", client=client, epsilon=1.0,
                                     seed=2_200_001, items=items, n_persons=60)
        ref = privirt.release_counts(X, epsilon=1.0, seed=2_200_001, items=items, n_persons=60)
        pd.testing.assert_frame_equal(got.Y, ref.Y)
    with pytest.raises(ValueError, match="not in the public item set"):
        privirt.release_counts(arr, engine="dask", client=client, epsilon=1.0, seed=2_200_002,
                               items=[0, 1, 2], n_persons=60)

"""Pairwise counts against brute-force loops (dense, sparse, chunked; with missing data)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import privirt
from privirt.stats.api import pairwise_counts
from privirt.stats.counts import MAX_CHUNK, differential_counts, pairwise_counts_frame


def brute_force(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Literal definition: loop over persons and item pairs (NaN = missing)."""
    n, m = X.shape
    Y = np.zeros((m, m), dtype=np.int64)
    B = np.zeros((m, m), dtype=np.int64)
    for person in range(n):
        for i in range(m):
            for j in range(m):
                if i == j or np.isnan(X[person, i]) or np.isnan(X[person, j]):
                    continue
                B[i, j] += 1
                if X[person, i] == 1 and X[person, j] == 0:
                    Y[i, j] += 1
    return Y, B


# cells: 0, 1 or missing (NaN)
cells = st.sampled_from([0.0, 1.0, np.nan])
matrices = hnp.arrays(
    np.float64,
    st.tuples(st.integers(1, 25), st.integers(1, 7)),
    elements=cells,
)


@settings(max_examples=60, deadline=None)
@given(X=matrices, chunk=st.integers(1, 30), method=st.sampled_from(["dense", "sparse"]))
def test_counts_equal_brute_force(X, chunk, method):
    Yb, Bb = brute_force(X)
    Y, B = pairwise_counts(
        privirt.as_responses(X, empty="keep"), device="cpu", method=method, chunk_size=chunk
    )
    assert Y.dtype == np.int64 and B.dtype == np.int64
    np.testing.assert_array_equal(Y, Yb)
    np.testing.assert_array_equal(B, Bb)


@settings(max_examples=30, deadline=None)
@given(
    X=hnp.arrays(np.float64, st.tuples(st.integers(1, 30), st.integers(2, 6)),
                 elements=st.sampled_from([0.0, 1.0])),
    chunk=st.integers(1, 40),
)
def test_complete_data_single_syrk_path(X, chunk):
    # no missing cells: the Y = s1ᵀ − CᵀC, B = n shortcut
    Yb, Bb = brute_force(X)
    Y, B = pairwise_counts(X, device="cpu", method="dense", chunk_size=chunk)
    np.testing.assert_array_equal(Y, Yb)
    np.testing.assert_array_equal(B, Bb)


def test_properties_on_larger_random_data():
    rng = np.random.default_rng(7)
    X = (rng.random((3000, 12)) < 0.6).astype(float)
    X[rng.random(X.shape) < 0.3] = np.nan
    Y, B = pairwise_counts(X, device="cpu", chunk_size=257)
    Yb, Bb = brute_force(X[:200])  # spot check on a slice
    Ys, Bs = pairwise_counts(X[:200], device="cpu", method="sparse", chunk_size=64)
    np.testing.assert_array_equal(Ys, Yb)
    np.testing.assert_array_equal(Bs, Bb)
    assert np.all(np.diag(Y) == 0) and np.all(np.diag(B) == 0)
    np.testing.assert_array_equal(B, B.T)
    assert np.all(Y + Y.T <= B)
    # chunking does not change the result
    Y1, B1 = pairwise_counts(X, device="cpu", chunk_size=len(X))
    np.testing.assert_array_equal(Y, Y1)
    np.testing.assert_array_equal(B, B1)
    np.testing.assert_array_equal(differential_counts(X, device="cpu", chunk_size=100), Y)


@pytest.mark.parametrize("observed", [1.0, 0.8])
def test_dense_cpu_equals_integer_products_with_a_short_last_chunk(observed):
    # reused chunk buffers and totals read off the Gram diagonal, against int64 products
    rng = np.random.default_rng(21)
    X = (rng.random((2503, 17)) < 0.55).astype(float)
    X[rng.random(X.shape) >= observed] = np.nan
    C = (X == 1).astype(np.int64)
    W = (X == 0).astype(np.int64)
    A = C + W
    Ye, Be = C.T @ W, A.T @ A
    np.fill_diagonal(Ye, 0)
    np.fill_diagonal(Be, 0)
    for chunk in (1000, 2503, 4096):
        Y, B = pairwise_counts(X, device="cpu", method="dense", chunk_size=chunk)
        np.testing.assert_array_equal(Y, Ye)
        np.testing.assert_array_equal(B, Be)
        np.testing.assert_array_equal(
            differential_counts(X, device="cpu", method="dense", chunk_size=chunk), Ye
        )


def test_auto_uses_sparse_for_mostly_missing_and_agrees():
    rng = np.random.default_rng(3)
    X = np.full((2000, 30), np.nan)
    obs = rng.random(X.shape) < 0.02
    X[obs] = rng.integers(0, 2, obs.sum())
    resp = privirt.as_responses(X, empty="keep")
    Ya, Ba = pairwise_counts(resp, device="cpu")
    Yd, Bd = pairwise_counts(resp, device="cpu", method="dense")
    np.testing.assert_array_equal(Ya, Yd)
    np.testing.assert_array_equal(Ba, Bd)


def test_labelled_frames_and_doc_example():
    X = pd.DataFrame({"a": [1, 1, 0], "b": [0, 1, np.nan]}, index=["p", "q", "r"])
    Y, B = pairwise_counts_frame(X, device="cpu")
    assert list(Y.index) == ["a", "b"] and list(B.columns) == ["a", "b"]
    assert Y.loc["a", "b"] == 1 and Y.loc["b", "a"] == 0
    assert B.loc["a", "b"] == 2


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, MAX_CHUNK + 1])
def test_chunk_size_validation(bad):
    with pytest.raises(ValueError, match="chunk_size"):
        pairwise_counts(np.ones((3, 2)), device="cpu", chunk_size=bad)


def test_bad_method_and_device():
    with pytest.raises(ValueError, match="method"):
        pairwise_counts(np.ones((3, 2)), method="fast")
    with pytest.raises(ValueError, match="device"):
        pairwise_counts(np.ones((3, 2)), device="tpu")


def test_invalid_responses_rejected():
    with pytest.raises(ValueError, match="invalid response 2"):
        pairwise_counts(np.array([[0, 2], [1, 0]]))


@pytest.mark.gpu
def test_gpu_counts_equal_cpu():
    rng = np.random.default_rng(11)
    X = (rng.random((5000, 40)) < 0.5).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    Yc, Bc = pairwise_counts(X, device="cpu")
    Yg, Bg = pairwise_counts(X, device="gpu", chunk_size=1000)
    np.testing.assert_array_equal(Yg, Yc)
    np.testing.assert_array_equal(Bg, Bc)
    Xf = np.nan_to_num(X, nan=1.0)
    np.testing.assert_array_equal(
        pairwise_counts(Xf, device="gpu")[0], pairwise_counts(Xf, device="cpu")[0]
    )


@pytest.mark.gpu
def test_gpu_device_resident_input():
    import cupy

    rng = np.random.default_rng(12)
    X = (rng.random((3000, 20)) < 0.5).astype(float)
    X[rng.random(X.shape) < 0.25] = np.nan
    Yc, Bc = pairwise_counts(X, device="cpu")
    Yg, Bg = pairwise_counts(cupy.asarray(X), device="gpu", chunk_size=700)
    np.testing.assert_array_equal(Yg, Yc)
    np.testing.assert_array_equal(Bg, Bc)
    with pytest.raises(ValueError, match="invalid response"):
        pairwise_counts(cupy.asarray(np.array([[0.0, 3.0]])), device="gpu")


def test_counts_benchmark_runs_and_prints_its_table(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_counts.py"
    spec = importlib.util.spec_from_file_location("bench_counts", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--sizes", "3000x12", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "sgemm/privirt" in lines[1] and len(lines) == 4
    codes = bench.make_codes(500, 7, 0.9)
    assert set(np.unique(codes)) <= {-1, 0, 1} and (codes == -1).any()


def test_the_private_releases_count_with_one_kernel_whatever_share_is_missing(monkeypatch):
    """The kernel was picked from the data (complete, missing cells, or sparse below 5 % observed):
    a release's time told how much of the data was missing, which an MCAR declaration protects
    (a service's analyst saw 64, 285 and 90 ms).  The private paths take one kernel."""
    import privirt
    from privirt.private.twopl import release_2pl
    from privirt.stats import counts as C

    rng = np.random.default_rng(310_020)
    full = (rng.random((400, 12)) < 0.5).astype(float)
    some = full.copy()
    some[rng.random(full.shape) < 0.3] = np.nan
    few = full.copy()
    few[rng.random(full.shape) > 0.02] = np.nan
    few[np.arange(12), np.arange(12)] = 1.0  # every item answered somewhere
    calls = []
    for name in ("_counts_dense", "_counts_sparse", "_counts_complete_cpu"):
        real = getattr(C, name)

        def spy(*args, _real=real, _name=name):
            calls.append((_name, args[3] if _name == "_counts_dense" else None))
            return _real(*args)

        monkeypatch.setattr(C, name, spy)
    for X in (full, some, few):
        privirt.release_counts(X, epsilon=1.0, delta=1e-5, seed=310_021)
        release_2pl(X, epsilon=1.0, delta=1e-5, seed=310_022, missing="mcar")
    assert calls == [("_counts_dense", True)] * 6
    # the kernel picked from the data (method="auto") differs for the three; the counts do not
    picked = []
    for X in (full, some, few):
        calls.clear()
        exact = C.differential_counts(X, device="cpu")
        picked.append(calls[-1])
        np.testing.assert_array_equal(C.differential_counts(X, device="cpu", private=True), exact)
        np.testing.assert_array_equal(C.local_pairwise_counts(X, device="cpu", private=True)[1],
                                      C.local_pairwise_counts(X, device="cpu")[1])
    assert picked == [("_counts_complete_cpu", None), ("_counts_dense", True), ("_counts_sparse", None)]


def test_randomized_response_draws_its_coins_whatever_is_missing(monkeypatch):
    """The coins for missing cells were drawn only in chunks holding one: the release's time
    told whether, and in how many chunks, cells were missing (~8 ms at 160 000 × 50)."""
    import privirt
    from privirt.private import rr

    drawn = []
    real = rr.uniform_bits
    monkeypatch.setattr(rr, "uniform_bits", lambda shape, rng: drawn.append(shape) or real(shape, rng))
    monkeypatch.setattr(rr, "_RR_CHUNK_CELLS", 400)  # chunks of 40 rows of 10 items
    rng = np.random.default_rng(310_080)
    full = (rng.random((200, 10)) < 0.5).astype(float)
    one = full.copy()
    one[3, 4] = np.nan
    seen = []
    for X in (full, one):
        drawn.clear()
        res = privirt.private_spectral_estimate(X, epsilon=2.0, mechanism="randomized_response", seed=310_081)
        seen.append(list(drawn))
        assert len(res.beta) == 10
    assert seen[0] == seen[1] == [(40, 10)] * 5


@pytest.mark.parametrize("pairwise", ["no", "yes", 1, 0, 1.5, [True], None])
def test_pairwise_must_be_true_or_false(pairwise):
    # any truthy object was taken: pairwise="no" computed the pairwise counts
    X = np.array([[1, 0], [1, 1], [0, np.nan]])
    with pytest.raises(ValueError, match=r"^pairwise must be True or False, got "):
        privirt.sufficient_statistics(X, pairwise=pairwise)
    assert privirt.sufficient_statistics(X, pairwise=np.bool_(False)).counts is None


@pytest.mark.parametrize("make", [list, tuple, lambda: np.array([], dtype=object), lambda: iter([])],
                         ids=["list", "tuple", "array", "iterator"])
def test_sufficient_statistics_refuses_an_empty_item_list(make):
    # items=[] returned statistics of zero items (totals == [])
    X = np.array([[1, 0], [1, 1], [0, np.nan]])
    with pytest.raises(ValueError, match=r"^items is empty: give at least one item label"):
        privirt.sufficient_statistics(X, items=make())
    st = privirt.sufficient_statistics(X, items=iter([1]))  # a generator is read once
    assert st.totals.tolist() == [1]

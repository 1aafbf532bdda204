"""The shared seed and result contract (privirt._seeds, privirt._results)."""

import numpy as np
import pandas as pd
import pytest

from privirt._results import ItemEstimate, top_k_labels
from privirt._seeds import child, describe_seed, numpy_rng, secure_rng, seed_sequence


@pytest.mark.parametrize("bad", [True, -1, 1.5, "3", np.random.default_rng(0), [1, 2]])
def test_seed_sequence_refuses_other_types(bad):
    with pytest.raises(ValueError, match="seed"):
        seed_sequence(bad)


def test_seed_sequence_accepts_int_numpy_int_sequence_none():
    assert seed_sequence(None) is None
    assert seed_sequence(7).entropy == 7
    assert seed_sequence(np.int64(7)).entropy == 7
    ss = np.random.SeedSequence(9)
    assert seed_sequence(ss) is ss


def test_child_equals_spawn_and_names_are_distinct_streams():
    ss = np.random.SeedSequence(11)
    assert np.array_equal(child(ss, 2).generate_state(4), np.random.SeedSequence(11).spawn(3)[2].generate_state(4))
    a = child(ss, "noise").generate_state(4)
    b = child(ss, "graph").generate_state(4)
    assert not np.array_equal(a, b)
    assert describe_seed(child(ss, 1, 2))["spawn_key"] == [1, 2]
    with pytest.raises(ValueError):
        child(ss, -1)


def test_secure_rng_private_only_without_seed_and_reproducible_with_one():
    assert secure_rng(None).private
    r1, r2 = secure_rng(3, "noise"), secure_rng(3, "noise")
    assert not r1.private
    assert np.array_equal(r1.random_uint64(5), r2.random_uint64(5))
    assert not np.array_equal(secure_rng(3, "noise").random_uint64(5), secure_rng(3, "other").random_uint64(5))


def test_numpy_rng_reproducible_per_stream():
    assert np.array_equal(numpy_rng(4, "x").random(3), numpy_rng(4, "x").random(3))
    assert not np.array_equal(numpy_rng(4, "x").random(3), numpy_rng(4, "y").random(3))


class _Est(ItemEstimate):
    def __init__(self, beta):
        self.beta, self.info = beta, {}


def test_item_estimate_contract():
    est = _Est(pd.Series([0.5, -1.0, 0.5], index=pd.Index(["a", "b", "c"], name="item")))
    assert list(est.items) == ["a", "b", "c"]
    assert list(est.top_k(2)) == ["a", "c"]
    assert list(est.top_k(1, largest=False)) == ["b"]
    frame = est.to_frame()
    assert list(frame.columns) == ["beta"] and frame.index.name == "item"
    with pytest.raises(ValueError, match="between 1"):
        top_k_labels(est.beta, 0)


def test_results_compare_by_identity_and_never_raise():
    # the generated dataclass __eq__ compared pandas fields and raised "truth value of a
    # Series is ambiguous" for r == copy; results compare by identity (eq=False), as Responses
    import pickle

    import privirt

    S = 3_800_050
    X, *_ = privirt.simulate_rasch(200, 4, seed=S)
    X2, *_ = privirt.simulate_2pno(200, 4, seed=S + 1)
    counts = privirt.release_counts(X, epsilon=1.0, seed=S + 2)
    totals = privirt.release_totals(X, epsilon=1.0, seed=S + 3)
    rel2 = privirt.release_2pl(X2, epsilon=1.0, seed=S + 4)
    results = [
        privirt.cmle_estimate(X), privirt.spectral_estimate(X),
        privirt.private_spectral_estimate(X, epsilon=1.0, seed=S + 5, n_boot=0),
        counts, privirt.noise_aware_estimate(counts),
        totals, privirt.estimate_from_release(totals, n_boot=0),
        rel2, privirt.estimate_2pl_from_release(rel2, n_boot=0),
        privirt.andersen_test(X), privirt.sufficient_statistics(X),
        privirt.gibbs_2pno(X2, n_iter=6, warmup=2, seed=S + 6, progress=False, keep_draws=False),
    ]
    assert len({type(r).__name__ for r in results}) == 12
    for r in results:
        copy = pickle.loads(pickle.dumps(r))
        assert r == r and not (r != r), type(r).__name__
        assert (r == copy) is False and (r != copy) is True, type(r).__name__
        assert len({r, copy}) == 2  # hashable, by identity

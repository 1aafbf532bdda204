"""Bundled data sets: shapes, labels and the published item proportions."""

from __future__ import annotations

import numpy as np
import pytest

import privirt
from privirt.data import dataset_path

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

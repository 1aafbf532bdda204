"""Plot helpers: argument errors say what is wrong (the drawing itself is tested with the
samplers that produce the posteriors)."""

from __future__ import annotations

import pytest

import privirt

pytest.importorskip("matplotlib")
from privirt import plots  # noqa: E402


@pytest.fixture(scope="module")
def small_posterior():
    X, *_ = privirt.simulate_2pno(60, 4, seed=1)
    return privirt.gibbs_2pno(X, n_iter=40, burn_in=20, seed=1, progress=False)


def test_trace_plot_unknown_or_no_labels(small_posterior):
    # an unknown label was a bare KeyError and an empty list a matplotlib error about
    # "rows"; the sibling plots name the unknown labels in a ValueError
    with pytest.raises(ValueError, match=r"unknown a label\(s\) \['nope'\]"):
        plots.trace_plot(small_posterior, "a", labels=["nope"])
    with pytest.raises(ValueError, match="labels is empty"):
        plots.trace_plot(small_posterior, "a", labels=[])
    label = small_posterior.labels["a"][1]
    fig = plots.trace_plot(small_posterior, "a", labels=[label])
    assert len(fig.axes) == 2

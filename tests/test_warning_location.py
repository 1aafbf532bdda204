"""privirt's warnings name the user's line (here: this file), not a line inside privirt, however
deep inside privirt they are issued (:func:`privirt.exceptions.user_stacklevel`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import privirt
from privirt.exceptions import EmptyResponsesWarning, IdentifiabilityWarning, NoiseDominatesWarning

X = np.asarray(privirt.simulate_rasch(100, 8, seed=91900003)[0], dtype=float)
X2 = np.asarray(privirt.simulate_2pno(100, 8, seed=91900004)[0], dtype=float)
REVERSED = X2.copy()
REVERSED[:, 0] = 1 - REVERSED[:, 0]  # an item that correlates negatively with the rest
EMPTY_ITEM = X.copy()
EMPTY_ITEM[:, 0] = np.nan

CALLS = {
    "private_spectral_estimate rr": (NoiseDominatesWarning, lambda: privirt.private_spectral_estimate(
        X, epsilon=0.5, mechanism="randomized_response", n_boot=0, seed=1)),
    "private_spectral_estimate gaussian": (NoiseDominatesWarning, lambda: privirt.private_spectral_estimate(
        X, epsilon=0.01, delta=1e-4, n_boot=0, seed=1)),
    "private_spectral_estimate one person": (NoiseDominatesWarning, lambda: privirt.private_spectral_estimate(
        X[:1], epsilon=1.0, delta=1e-4, n_boot=20, seed=1)),
    "release_counts": (NoiseDominatesWarning, lambda: privirt.release_counts(
        X, epsilon=0.01, delta=1e-4, seed=1)),
    "private_totals_estimate": (NoiseDominatesWarning, lambda: privirt.private_totals_estimate(
        X, epsilon=0.001, n_boot=0, seed=1)),
    "release_totals": (NoiseDominatesWarning, lambda: privirt.release_totals(X, epsilon=0.001, seed=1)),
    "release_2pl": (NoiseDominatesWarning, lambda: privirt.release_2pl(X2, epsilon=0.01, seed=1)),
    "private_2pl_estimate": (NoiseDominatesWarning, lambda: privirt.private_2pl_estimate(
        X2, epsilon=0.01, n_boot=0, seed=1)),
    "private_2pl_estimate, a reversed item": (UserWarning, lambda: privirt.private_2pl_estimate(
        REVERSED, epsilon=20.0, n_boot=0, seed=1)),
    "gibbs_2pno, a reversed item": (UserWarning, lambda: privirt.gibbs_2pno(
        REVERSED, n_iter=4, warmup=2, progress=False, seed=1, engine="numpy")),
    "spectral_estimate, an empty item": (EmptyResponsesWarning, lambda: privirt.spectral_estimate(EMPTY_ITEM)),
    "spectral_estimate, items never compared": (IdentifiabilityWarning, lambda: privirt.spectral_estimate(
        np.array([[1.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))),
    "andersen_test, a group's fit not converged": (UserWarning, lambda: privirt.andersen_test(X, max_iter=1)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_the_warning_names_the_callers_line(name):
    category, call = CALLS[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    ours = [w for w in caught if issubclass(w.category, category)]
    assert ours, f"{name} gave no {category.__name__}"
    assert {w.filename for w in ours} == {__file__}, [f"{w.filename}:{w.lineno}" for w in ours]


def test_a_call_from_outside_privirt_is_its_own_level():
    from privirt.exceptions import user_stacklevel

    assert user_stacklevel() == 1  # this frame is the user's: the warning names it


def test_privirts_own_runtime_warnings_are_still_errors_in_this_suite():
    # pyproject's filter error::RuntimeWarning:privirt.* matches the module of the line a warning
    # names: once privirt's own RuntimeWarnings named the caller's line, they passed as warnings
    import numpy as np

    import privirt
    from privirt.exceptions import PrivirtRuntimeWarning

    X, _, beta = privirt.simulate_rasch(50, 6, seed=92800001)
    with pytest.raises(PrivirtRuntimeWarning, match="did not converge"):  # raised: an error here
        privirt.estimate_abilities(X, np.asarray(beta), max_iter=1, tol=1e-300, device="cpu")
    assert issubclass(PrivirtRuntimeWarning, RuntimeWarning)

"""The 2PNO Gibbs kernels on a real CUDA device (skipped without one).

``tests/test_gpu_static.py`` runs the same kernel text compiled for the host; these tests
run it on the GPU: the truncated-normal device function against its numpy port (far tails
and the overflow guard included), and whole chains (orbit moves, proper priors, free slopes
with and without anchors, a missing cell) against the exact posterior moments of tiny
problems, as the CPU engines are checked in ``tests/test_gibbs.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import privirt
from tests._exact_posterior import assert_moments_match, tiny_2pno_problem, tiny_free_problem

pytestmark = pytest.mark.gpu

_TN_WRAPPER = r"""
extern "C" __global__ void privirt_test_tn(const double* L, double* out, unsigned int k0,
                                           unsigned int k1, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = std_tn_lower(L[i], 1u, 0u, (unsigned int)i, 0u, k0, k1);
}
"""


def test_device_truncated_normal_equals_its_port():
    """``std_tn_lower`` on the device gives the numpy port's draws (inverse CDF below 5,
    Robert's rejection above, the bound itself from 1e150 and at inf, where the loop once
    never ended) to the accuracy of CUDA's ``normcdfinv``."""
    import cupy as cp

    from privirt.bayes.twopno_gpu import cuda_preamble
    from tests.test_gibbs import _std_tn_lower_port

    lows = np.array([-2.0, 0.5, 4.0, 5.0, 6.0, 12.0, 30.0, 1e149, 1e150, 1e200, 1e308, np.inf])
    L = np.repeat(lows, 500)
    kernel = cp.RawKernel(cuda_preamble() + _TN_WRAPPER, "privirt_test_tn")
    out = cp.full(L.size, np.nan)
    kernel(((L.size + 127) // 128,), (128,),
           (cp.asarray(L), out, np.uint32(12345), np.uint32(678), np.int64(L.size)))
    got = cp.asnumpy(out)
    want = _std_tn_lower_port(L, np.arange(L.size, dtype=np.uint64), (12345, 678))
    assert np.all(got >= L)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    np.testing.assert_array_equal(got[L >= 1e150], L[L >= 1e150])


def test_device_chain_matches_the_exact_posterior_of_a_tiny_problem():
    """Z, θ, chunked item sums, the item draw with proper priors, the orbit moves and a
    missing cell, run on the GPU as whole chains, against exact posterior moments."""
    Y, priors, exact = tiny_2pno_problem()
    post = privirt.gibbs_2pno(Y, n_iter=3000, warmup=500, n_chains=40, seed=31,
                              progress=False, device="gpu", priors=priors)
    assert post.info["device"] == "gpu" and post.info["orbit_moves"]
    assert_moments_match(post, exact)


@pytest.mark.parametrize("anchored", [True, False])
def test_device_free_slopes_match_the_exact_posterior(anchored):
    """slopes="free" on the GPU: the untruncated item draw, anchored θ (truncated, fixed)
    and, unanchored, the reflection of whole chains, against exact moments."""
    Y, kwargs, exact = tiny_free_problem(anchored)
    post = privirt.gibbs_2pno(Y, n_iter=3000, warmup=500, n_chains=40, seed=32,
                              progress=False, device="gpu", **kwargs)
    assert post.info["device"] == "gpu" and post.info["slopes"] == "free"
    assert_moments_match(post, exact)
    assert (post.get_draws("a") < 0).mean() > 0.05
    th = post.get_draws("theta")
    if anchored:
        assert np.all(th[:, :, 1] > 0) and np.all(th[:, :, 3] == 0.8)


def test_device_kept_draws_equal_the_streamed_summaries():
    """keep_draws=True writes each kept draw into its slot on the device; keep_draws=False
    feeds the same iterations to the fused streaming update: same seed, same means."""
    X = privirt.simulate_2pno(150, 6, seed=35, p_observed=0.8)[0]
    kw = dict(n_iter=70, warmup=31, thin=3, n_chains=2, seed=36, device="gpu", progress=False)
    kept = privirt.gibbs_2pno(X, keep_draws=True, **kw)
    streamed = privirt.gibbs_2pno(X, keep_draws=False, **kw)
    for param in ("a", "b", "theta"):
        d = kept.draws[param]
        assert d.shape[:2] == (2, 13) and np.isfinite(d).all()
        np.testing.assert_allclose(d.mean(axis=1), streamed.streaming[param].mean, rtol=1e-12)

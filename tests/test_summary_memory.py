"""The posterior summary's working memory is bounded, and the sampler counts it up front.

``summarize`` needed 9–14 times a block's draws at once (a 61 MB θ block peaked at 555 MB),
while ``check_memory`` counted only the draws: a run that fitted sampled for its full length
and then failed in the summary.  Now a large block is summarised in parameter chunks whose
working arrays fit in ``SUMMARY_BYTES`` (the same values), and ``check_memory`` refuses,
before sampling, a run whose draws plus that working set do not fit.
"""

from __future__ import annotations

import os
import resource
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.bayes import diagnostics, driver
from privirt.cli import main
from tests._memory import traced_peak


def _draws(rng: np.random.Generator, c: int, n: int, k: int) -> np.ndarray:
    d = np.cumsum(rng.standard_normal((c, n, k)), axis=1) * 0.1 + rng.standard_normal((c, n, k))
    d[:, :, ::4] = np.round(d[:, :, ::4], 1)  # ties
    d[:, :, 5] = 0.7  # a constant parameter
    return d


@pytest.mark.parametrize("n, workers", [(300, 1), (301, 3), (7, 2)])
def test_summarize_in_chunks_gives_the_same_values(monkeypatch, n, workers):
    d = _draws(np.random.default_rng(94_100_001), 3, n, 41)
    monkeypatch.setattr(diagnostics, "_workers", lambda: 1)
    whole = diagnostics.summarize(d)
    monkeypatch.setattr(diagnostics, "_workers", lambda: workers)
    monkeypatch.setattr(diagnostics, "PARALLEL_VALUES", 1)
    # room for the working arrays of 2 parameters on each worker
    monkeypatch.setattr(diagnostics, "SUMMARY_BYTES", 2 * workers * diagnostics.working_bytes(3, n))
    calls = []
    real = diagnostics._summarize
    monkeypatch.setattr(diagnostics, "_summarize", lambda a, q: calls.append(a.shape[2]) or real(a, q))
    chunked = diagnostics.summarize(d)
    # chunks of 2 (a lone last parameter joins the one before: numpy sums one column pairwise)
    assert sum(calls) == 41 and len(calls) == 20 and set(calls) == {2, 3}
    assert whole.keys() == chunked.keys()
    for key in whole:
        np.testing.assert_array_equal(chunked[key], whole[key])


def test_the_summary_peak_is_bounded_and_working_bytes_bounds_it(monkeypatch):
    d = np.random.default_rng(94_100_002).standard_normal((2, 1030, 200))  # FFT of 2048 for 515
    monkeypatch.setattr(diagnostics, "_workers", lambda: 1)

    def peak() -> int:
        return traced_peak(diagnostics.summarize, d)[1]

    unbounded = peak()
    assert unbounded > 5 * d.nbytes  # the working set the chunks bound
    assert unbounded <= diagnostics.working_bytes(2, 1030, 200)  # what check_memory counts
    monkeypatch.setattr(diagnostics, "SUMMARY_BYTES", d.nbytes // 4)
    assert peak() <= d.nbytes // 4 + 64 * 200 * 8  # the chunks' arrays plus the results


class _Pools(ThreadPoolExecutor):
    """A thread pool that notes how many threads it was allowed."""
    sizes: list[int] = []

    def __init__(self, max_workers: int, **kw) -> None:
        self.sizes.append(max_workers)
        super().__init__(max_workers, **kw)


@pytest.mark.parametrize("ties", [False, True])  # most draws tie: the tie scores' arrays
@pytest.mark.parametrize("c, n, k, workers, pairs", [
    (4, 2000, 9, 4, 0.5),  # a long chain: not even 2 parameters fit, so 2 (or 3) in turn
    (2, 3001, 7, 3, 0.8),
    (4, 1025, 16, 8, 2.2),  # 8 cores but room for 2 threads of 2 parameters
    (3, 1000, 12, 2, 5.0),  # room for more than the cores: one range a thread
])
def test_long_chains_stay_within_what_check_memory_counts(monkeypatch, c, n, k, workers, pairs, ties):
    rng = np.random.default_rng(94_100_004)
    d = np.cumsum(rng.standard_normal((c, n, k)), axis=1) * 0.1 + rng.standard_normal((c, n, k))
    if ties:
        d = np.round(d, 1)
        d[:, :, 1] = 0.7  # a constant parameter
    monkeypatch.setattr(diagnostics, "_workers", lambda: 1)
    whole = diagnostics.summarize(d)
    monkeypatch.setattr(diagnostics, "_workers", lambda: workers)
    monkeypatch.setattr(diagnostics, "PARALLEL_VALUES", 1)
    two = diagnostics.working_bytes(c, n, 2)
    budget = int(pairs * two)
    monkeypatch.setattr(diagnostics, "SUMMARY_BYTES", budget)
    monkeypatch.setattr(diagnostics, "ThreadPoolExecutor", _Pools)
    _Pools.sizes = []
    chunked, peak = traced_peak(diagnostics.summarize, d)
    for key in whole:
        np.testing.assert_array_equal(chunked[key], whole[key])
    # at most as many threads as 2 parameters' working arrays fit in the budget; none below 2
    assert all(2 <= t <= min(workers, budget // two) for t in _Pools.sizes), _Pools.sizes
    assert _Pools.sizes or budget // two < 2 or workers < 2
    # check_memory counts at least the peak beyond the draws (refuses one byte less) ...
    monkeypatch.setattr(driver, "available_memory", lambda: float(d.nbytes + peak - 1))
    with pytest.raises(MemoryError, match="their summary's"):
        driver.check_memory(c, n, {"theta": k})
    # ... and not so much more that it refuses what fits three times over: over the threads'
    # working arrays at once, which check_memory must assume; the peak measured lies between one
    # thread's and all of theirs (under load a thread could finish before the other started:
    # 2 of 3 whole-suite runs on 2 busy cores failed the check against the peak alone)
    overlapped = peak * max(_Pools.sizes or [1])
    monkeypatch.setattr(driver, "available_memory", lambda: float(d.nbytes + 3 * overlapped))
    driver.check_memory(c, n, {"theta": k})


def _sysconf_with(pages: int):
    real = os.sysconf

    def sysconf(name):
        return pages if name == "SC_PHYS_PAGES" else real(name)
    return sysconf


def test_a_run_whose_summary_does_not_fit_is_refused_before_sampling(tmp_path, monkeypatch, capsys):
    X = privirt.simulate_2pno(300, 5, seed=94_100_003)[0]
    path, out = tmp_path / "x.csv", tmp_path / "s.csv"
    pd.DataFrame(X).to_csv(path)
    chains, draws = 2, 2000  # --iter 2100 --warmup 100
    need = 8 * chains * draws * (300 + 10)
    summary = diagnostics.summary_bytes(chains, draws, 300)  # what check_memory counts
    assert summary > need // 2
    page = os.sysconf("SC_PAGE_SIZE")
    monkeypatch.setattr(os, "sysconf", _sysconf_with((need + summary // 2) // page))
    monkeypatch.setattr(resource, "getrlimit", lambda r: (resource.RLIM_INFINITY,) * 2)
    sampled = []
    monkeypatch.setattr(driver, "DrawSink", lambda *a, **k: sampled.append(1))
    assert main(["gibbs", str(path), "--iter", "2100", "--warmup", "100", "--chains", "2",
                 "--no-progress", "--seed", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privirt: error: the kept draws"), err
    assert "their summary's" in err[0] and "keep fewer draws" in err[0]
    assert not sampled and not out.exists()
    # with room for both the same run is let through (to where sampling would begin)
    monkeypatch.setattr(os, "sysconf", _sysconf_with((need + summary) // page + 2))
    driver.check_memory(chains, draws, {"a": 5, "b": 5, "theta": 300})

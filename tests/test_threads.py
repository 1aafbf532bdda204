"""The one-BLAS-thread blocks (privirt._threads) when blocks of several threads overlap: the
limit holds inside every block and the process's own setting comes back after the last."""

from __future__ import annotations

import threading

import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

from privirt import _threads  # noqa: E402


def _release_control() -> None:
    """threadpoolctl 3.8 lets only the thread that set OpenBLAS's limit set it again."""
    clear = getattr(getattr(threadpoolctl, "OpenBLASController", None), "clear_controlling_thread", None)
    if clear is not None:
        clear()


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


@pytest.fixture()
def two_blas_threads():
    """BLAS at two threads before the test (also on a one-core machine), put back after."""
    controller = threadpoolctl.ThreadpoolController()
    limiter = controller.limit(limits=2, user_api="blas")
    _release_control()
    if not _blas_threads() or set(_blas_threads()) != {2}:
        limiter.restore_original_limits()
        pytest.skip("no BLAS whose thread count threadpoolctl can set")
    yield
    limiter.restore_original_limits()
    _release_control()


def _overlap(first_block, second_block, first_out: bool) -> list[list[int]]:
    """Thread 1 enters ``first_block``, thread 2 enters ``second_block``; then the first one
    (``first_out``) or the second leaves first. Returns the BLAS thread counts seen inside."""
    inside, seen = [threading.Event(), threading.Event()], []
    leave = [threading.Event(), threading.Event()]

    def run(k, block):
        if k == 1:
            inside[0].wait(10)
        with block():
            seen.append(_blas_threads())
            inside[k].set()
            leave[k].wait(10)
            seen.append(_blas_threads())

    threads = [threading.Thread(target=run, args=(0, first_block)),
               threading.Thread(target=run, args=(1, second_block))]
    for t in threads:
        t.start()
    inside[1].wait(10)
    order = (0, 1) if first_out else (1, 0)
    leave[order[0]].set()
    threads[order[0]].join(10)
    leave[order[1]].set()
    threads[order[1]].join(10)
    return seen


@pytest.mark.parametrize("first_out", [True, False])
def test_overlapping_blocks_in_two_threads_restore_the_process_setting(two_blas_threads, first_out):
    """Each block restored the limits it found: the second in found 1 and, last out, left the
    process at one BLAS thread for good (about half the speed on 2 cores, for every later call)."""
    seen = _overlap(_threads.single_blas_thread, _threads.single_blas_thread, first_out)
    assert len(seen) == 4 and all(set(s) == {1} for s in seen), seen
    assert set(_blas_threads()) == {2}


def test_the_dask_engines_block_shares_the_count(two_blas_threads):
    """The Dask engine's block (every pool of the process, a fresh scan) overlapping a BLAS block."""
    pytest.importorskip("distributed")
    from privirt.stats import dask_engine

    seen = _overlap(_threads.single_blas_thread, dask_engine._one_blas_thread, True)
    assert len(seen) == 4 and all(set(s) == {1} for s in seen), seen
    assert set(_blas_threads()) == {2}


@pytest.mark.parametrize("own_block", [False, True])
def test_a_forked_child_drops_the_blocks_of_threads_it_does_not_have(two_blas_threads, own_block):
    """A child forked while another thread had a block open inherited the count of that block,
    whose thread does not exist there: it never closed, and the child kept one BLAS thread for
    good. The child drops it and restores at once; a block of the forking thread itself stays
    open in the child until it closes there."""
    import os

    if not hasattr(os, "fork"):
        pytest.skip("no os.fork")
    entered, leave = threading.Event(), threading.Event()

    def hold():
        with _threads.single_blas_thread():
            entered.set()
            leave.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    entered.wait(10)
    read, write = os.pipe()
    import contextlib

    with _threads.single_blas_thread() if own_block else contextlib.nullcontext():
        pid = os.fork()
        inside = _blas_threads() if pid == 0 else None  # the child, in the forking thread's block
    if pid == 0:  # after the block closed in the child: report and leave
        try:
            os.write(write, repr((inside, _blas_threads())).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    inside, after = eval(os.read(read, 4096).decode())
    os.close(read)
    leave.set()
    t.join(10)
    assert set(inside) == ({1} if own_block else {2})
    assert set(after) == {2}
    assert set(_blas_threads()) == {2}


def test_the_private_2pl_fits_solve_under_one_blas_thread(two_blas_threads, monkeypatch):
    """A mend (7a5bd6e) put FitWeights between @one_blas_thread and _fit_batch: the decorator
    wrapped the dataclass, and every batched solve of the 2PL's fits (the point fits, the
    noise-variance refits, the bootstrap's) ran with BLAS's threads, 6-40x slower where the cores
    are shared (0.7 s for an (8, 101, 101) solve against 5 ms).  The solves now see one thread."""
    import numpy as np

    from privirt.private.twopl import fit

    seen = []
    solve = fit._solve

    def spy(A, g):
        seen.append(_blas_threads())
        return solve(A, g)

    monkeypatch.setattr(fit, "_solve", spy)
    rng = np.random.default_rng(94_100_101)
    m, n = 6, 400
    t = rng.uniform(0.3, 0.7, (3, m)) * n
    i, j = fit.pair_index(m)
    d = (t[:, i] + t[:, j]) / 2.0
    fit.fit_factor(t, d, n, 1.0, 1.0)
    assert seen and all(set(s) == {1} for s in seen), seen
    assert isinstance(fit.FitWeights, type)  # (the dataclass itself, not a wrapper)


def test_one_blas_thread_decorates_functions_only():
    """The decorator above a class (as the mend left it) limits nothing the class's users call."""
    import ast
    from pathlib import Path

    import privirt

    wrong = []
    for path in Path(privirt.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = {ast.unparse(d).split("(")[0] for d in node.decorator_list}
                if names & {"one_blas_thread", "_threads.one_blas_thread"}:
                    wrong.append(f"{path.name}:{node.lineno} {node.name}")
    assert not wrong, wrong


def _spy(monkeypatch, owner, name: str) -> list[tuple[str, set[int]]]:
    """Replace ``owner.name`` by a wrapper recording (calling function, BLAS thread counts)."""
    import sys

    seen: list[tuple[str, set[int]]] = []
    original = getattr(owner, name)

    def spy(*args, **kwargs):
        seen.append((sys._getframe(1).f_code.co_name, set(_blas_threads())))
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return seen


def _at(seen: list[tuple[str, set[int]]], *sites: str) -> list[set[int]]:
    counts = [threads for caller, threads in seen if caller in sites]
    assert counts, f"none of {sites} called it: {seen}"
    return counts


def test_cmles_newton_steps_and_covariance_factorise_on_one_blas_thread(two_blas_threads, monkeypatch):
    """cmle_estimate's m × m Cholesky factorisations (each Newton step's and the covariance's)
    ran on BLAS's 2 threads: 2.7-10x slower at m = 150-200 with the other core busy."""
    import scipy.linalg

    import privirt

    X = privirt.simulate_rasch(200, 64, seed=94_300_101)[0]  # (below 64 items: no limit)
    seen = _spy(monkeypatch, scipy.linalg, "cho_factor")
    privirt.cmle_estimate(X, progress=False)
    assert all(s == {1} for s in _at(seen, "_newton_step", "_covariance")), seen
    assert {"_newton_step", "_covariance"} <= {caller for caller, _ in seen}
    assert set(_blas_threads()) == {2}  # and the process's setting is back


@pytest.mark.parametrize("private", [False, True])
def test_the_spectral_direct_solve_runs_on_one_blas_thread(two_blas_threads, monkeypatch, private):
    """spectral_estimate's (and the randomized-response release's) m × m solve ran on BLAS's 2
    threads: 2.5-13x slower at m = 100-400 with the other core busy."""
    import warnings

    import numpy as np

    import privirt

    X = privirt.simulate_rasch(200, 64, seed=94_300_102)[0]  # (below 64 items: no limit)
    seen = _spy(monkeypatch, np.linalg, "solve")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if private:
            privirt.private_spectral_estimate(X, epsilon=1.0, mechanism="randomized_response",
                                              seed=94_300_103, progress=False, device="cpu")
        else:
            privirt.spectral_estimate(X, device="cpu")  # (the GPU's solve is cupy's)
    assert all(s == {1} for s in _at(seen, "_solve_direct")), seen
    assert set(_blas_threads()) == {2}


def test_noise_aware_estimate_solves_on_one_blas_thread(two_blas_threads, monkeypatch):
    """noise_aware_estimate (public; the README points to it) left the limit to its private
    wrappers: called directly its Fisher-scoring solves ran on 2 threads, 22x slower at m = 150."""
    from scipy.linalg import lapack

    import privirt

    X = privirt.simulate_rasch(300, 8, seed=94_300_104)[0]
    release = privirt.release_counts(X, epsilon=1.0, delta=1e-4, seed=94_300_105)
    seen = _spy(monkeypatch, lapack, "dpotrf")
    privirt.noise_aware_estimate(release)
    assert all(s == {1} for s in _at(seen, "_cho_solve", "_inverse_factor")), seen
    assert set(_blas_threads()) == {2}


def test_mh_2pls_default_start_takes_its_svd_on_one_blas_thread(two_blas_threads, monkeypatch):
    """mh_2pl's data-driven start took an n × m SVD on BLAS's 2 threads (short runs 2.9x slower
    on a busy core; and its last bits followed the thread count)."""
    import numpy as np

    import privirt

    X = privirt.simulate_2pl(60, 6, seed=94_300_106)[0]
    seen = _spy(monkeypatch, np.linalg, "svd")
    privirt.mh_2pl(X, n_iter=20, warmup=10, seed=94_300_107, progress=False)
    assert all(s == {1} for s in _at(seen, "_default_init")), seen
    assert set(_blas_threads()) == {2}

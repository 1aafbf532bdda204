"""The 2PL Metropolis–Hastings kernel: blockwise random-walk Metropolis over θ, a and
b = −nb, all chains as a leading array axis, plus the scale and shift "ridge" moves.

Each block costs one pass of ``softplus`` over the persons × items matrix: ``F =
softplus(w·η)`` of the current state (``w = 1 − 2y`` observed, 0 missing) is kept, the
block's candidate ``F'`` computed once, and row (θ) or column (a, b) sums of ``F − F'``
give the likelihood ratios.  Random numbers are drawn ahead for up to 256 iterations and
everything in the accept test that does not depend on the state is computed once per
segment of iterations.  See ``docs/mh.md`` for the derivation and the adaptation rule.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._progress import ProgressBar
from .._threads import single_blas_thread
from .schedule import Schedule
from .twopl_setup import TARGET_ACCEPTANCE

__all__ = ["run_chains"]

_ADAPT_WINDOW = 50
_SD_LIMITS = (1e-4, 1e2)
_RNG_BATCH = 256  # iterations of random numbers per draw call
_RNG_BUDGET = 2**20  # at most this many numbers per array and draw call
_SPLIT_SUMS_CELLS = 8192  # from this many cells, reduce F and F' separately
_RIDGE_SD0 = (0.05, 0.05)  # starting sds of the ridge moves' log-scale and shift



def _softplus_fast(xp: Any, E: Any) -> None:
    """E <- log1p(exp(E)) in place: two vectorised transcendental passes.

    Accurate to rounding for E ≤ 709; above, exp overflows to inf, which the caller
    detects (numpy's overflow flag) and then recomputes with :func:`_softplus_stable`.
    On the GPU the sampler always uses the stable form instead, since checking for
    overflow would wait on the device.  (The sampler makes the same two calls with positional
    outputs in ``neg_loglik``.)
    """
    xp.exp(E, out=E)  # the caller routes numpy's overflow report to a flag
    xp.log1p(E, out=E)


def _softplus_stable(xp: Any, E: Any) -> None:
    """E <- max(E, 0) + log1p(exp(-|E|)) in place (no overflow for any finite E)."""
    pos = xp.maximum(E, 0.0)
    xp.abs(E, out=E)
    xp.negative(E, out=E)
    xp.exp(E, out=E)
    xp.log1p(E, out=E)
    E += pos


class _Rng:
    """Random numbers drawn ahead of the iterations that use them.

    The proposals' standard normals and the accept tests' standard exponentials
    (``E = −log u``: accept when ``log r > −E``) do not depend on the state, so they are
    drawn for up to ``_RNG_BATCH`` iterations per call (fewer when a batch would exceed
    ``_RNG_BUDGET`` numbers) and scaled by the current proposal sds only when used.
    """

    def __init__(self, xp: Any, seed: int, shape: tuple[int, ...], gpu: bool) -> None:
        self.xp, self.shape = xp, shape
        self.gen = xp.random.RandomState(seed % (2**32)) if gpu else np.random.default_rng(seed)
        per_iter = max(1, int(np.prod(shape)))
        self.rows = max(1, min(_RNG_BATCH, _RNG_BUDGET // per_iter))

    def draw(self, rows: int) -> tuple[Any, Any]:
        size = (rows,) + self.shape
        z = self.xp.asarray(self.gen.standard_normal(size))
        e = self.xp.asarray(self.gen.standard_exponential(size))
        return z, e


def _segments(
    n_iter: int, warmup: int, batch: int, windows: bool
) -> list[tuple[int, int, bool]]:
    """Split the iterations into segments ``(start, end, new_batch)``: a segment never
    crosses a random-number batch, the end of warmup or (with ``windows``, during warmup)
    the end of an adaptation window, so its random numbers can be scaled once and its
    acceptance counts go to one place.  ``new_batch`` marks a segment that starts a
    batch."""
    out = []
    it, batch_end = 0, 0
    while it < n_iter:
        new_batch = it == batch_end
        if new_batch:
            batch_end = min(it + batch, n_iter)
        end = batch_end
        if it < warmup:
            end = min(end, warmup)
            if windows:
                end = min(end, (it // _ADAPT_WINDOW + 1) * _ADAPT_WINDOW)
        out.append((it, end, new_batch))
        it = end
    return out


class _OverflowFlag:
    """numpy floating-point error callback: records that an overflow happened."""

    def __init__(self) -> None:
        self.hit = False

    def __call__(self, err: str, flag: int) -> None:
        self.hit = True


def run_chains(xp: Any, *args: Any, gpu: bool, **kwargs: Any) -> dict[str, Any]:
    """Run the chains (arguments as :func:`_run_chains`).  On the CPU, numpy reports an overflow of the softplus fast path to
    a flag (no warning, no extra pass over the data) and the block is then recomputed
    stably; on the GPU a non-finite block sum triggers the recomputation."""
    if gpu:
        return _run_chains(xp, *args, gpu=gpu, flag=None, **kwargs)
    flag = _OverflowFlag()
    # one BLAS thread: the rank-2 products η = U @ V are memory-bound, and OpenBLAS's threads
    # split them from ~5000 × 100 and spun (10⁴ × 100: 28.9 CPU s against 8.4 on one thread)
    with np.errstate(over="call", call=flag), single_blas_thread():
        return _run_chains(xp, *args, gpu=gpu, flag=flag, **kwargs)


def _run_chains(
    xp: Any,
    y_host: np.ndarray,
    obs_host: np.ndarray,
    state: dict[str, np.ndarray],
    pri: dict[str, tuple[float, float]],
    sd0: dict[str, float],
    anchors: list[tuple[int, float]],
    *,
    schedule: Schedule,
    store: dict[str, Any],
    adapt: bool,
    seed: int,
    bar: ProgressBar,
    gpu: bool,
    flag: _OverflowFlag | None,
    ridge_moves: bool,
) -> dict[str, Any]:
    C = state["theta"].shape[0]
    n_iter, warmup, thin, n_keep = schedule.n_iter, schedule.warmup, schedule.thin, schedule.n_draws
    n, m = y_host.shape
    nm = n + 2 * m  # θ, a, nb = -b
    K = nm + 2  # then the ridge moves' log-scale and shift
    sl_t, sl_a, sl_b = slice(0, n), slice(n, n + m), slice(n + m, nm)
    i_sc = nm
    if flag is None:  # GPU: set below from a non-finite sum
        flag = _OverflowFlag()

    # Array calls with the output as a positional argument (cheaper to parse than out=);
    # cupy gets it as a keyword.  np.dot on 2-D views is the fastest product for one chain.
    if gpu:
        add, sub, mul, greater, exp, log1p, matmul = (
            _out_keyword(f)
            for f in (xp.add, xp.subtract, xp.multiply, xp.greater, xp.exp, xp.log1p, xp.matmul)
        )
    else:
        add, sub, mul, greater, exp, log1p, matmul = (
            np.add, np.subtract, np.multiply, np.greater, np.exp, np.log1p, np.matmul
        )
    copyto = xp.copyto
    # accepted rows / columns of a block's candidate into F: np.putmask with a broadcast
    # mask is faster than copyto(where=) when the mask selects columns
    putmask = _copy_where(xp) if gpu else np.putmask

    # F = softplus(W ∘ η) is minus the log-likelihood cell by cell: W = +1 where y = 0,
    # -1 where y = 1 (softplus(η) − η = softplus(−η)), and 0 where missing (a constant
    # log 2 that cancels in every difference).
    w_host = np.where(obs_host, 1.0 - 2.0 * y_host, 0.0)
    W = xp.asarray(np.ascontiguousarray(np.broadcast_to(w_host, (C, n, m))))

    # η = U @ V with U = [θ, 1] (C, n, 2) and V = [a; nb] (C, 2, m).  They are stored
    # parameter-major, so that θ, a and nb are contiguous rows and U, V transposed views:
    # UT = [θ; 1] (2, C, n), UTp = [θ'; 1] for the θ block's candidates, and for the items
    # one array of rows R = [a', a, nb, 1, nb'] (5, C, m) in which every product operand
    # is an evenly spaced pair of rows: V = [a; nb] (rows 1, 2), the a block's candidate
    # Va = [a'; nb] (rows 0, 2), the b block's Vb = [a; nb'] (rows 1, 4), and [a; nb; 1]
    # (rows 1-3) gives the ridge moves' sums.  So the current a and nb have one home.
    UT, UTp = xp.ones((2, C, n)), xp.ones((2, C, n))
    R = xp.ones((5, C, m))
    UT[0] = xp.asarray(state["theta"])
    R[1] = xp.asarray(state["a"])
    R[2] = -xp.asarray(state["b"])
    U, Up = UT.transpose(1, 2, 0), UTp.transpose(1, 2, 0)
    V = R[1:3].transpose(1, 0, 2)
    Va, Vb = R[0:3:2].transpose(1, 0, 2), R[1:5:3].transpose(1, 0, 2)
    theta, tp = UT[0][:, :, None], UTp[0][:, :, None]  # (C, n, 1)
    ap, a, nb, nbp = (R[r][:, None, :] for r in (0, 1, 2, 4))  # (C, 1, m)

    # Σ(F − F') over a block's axis: for small matrices one subtraction and one product
    # (fewest calls); for large ones a product each for F and F' and a subtraction of the
    # two sum vectors (one pass over each matrix instead of three, and no matrix D)
    split_sums = C * n * m >= _SPLIT_SUMS_CELLS
    E = xp.empty((C, n, m))  # candidate block's softplus(W ∘ η')
    F = xp.empty((C, n, m))  # current state's
    D = None if split_sums else xp.empty((C, n, m))  # F − F'
    ones_m = xp.ones((m, 1))
    ones_n = xp.ones((1, n))
    d_t, tmp_t = xp.empty((C, n, 1)), xp.empty((C, n, 1))
    d_m, tmp_m = xp.empty((C, 1, m)), xp.empty((C, 1, m))
    # operands of the products: 2-D views for one chain on the CPU, else batched
    if C == 1 and not gpu:
        prod = np.dot
        U_, Up_, V_, Va_, Vb_ = U[0], Up[0], V[0], Va[0], Vb[0]
        E_, F_, d_t_, d_m_, tmp_t_, tmp_m_ = E[0], F[0], d_t[0], d_m[0], tmp_t[0], tmp_m[0]
        D_ = None if D is None else D[0]
    else:
        prod = matmul
        U_, Up_, V_, Va_, Vb_, E_, F_, D_ = U, Up, V, Va, Vb, E, F, D
        d_t_, d_m_, tmp_t_, tmp_m_ = d_t, d_m, tmp_t, tmp_m

    def neg_loglik(out: Any, out_: Any, UU: Any, VV: Any) -> None:
        """out <- softplus(W ∘ (UU @ VV)) (``out_`` is ``out`` as the product's operand),
        recomputed stably if the fast path overflowed."""
        flag.hit = False
        if gpu:  # always the stable form: an overflow check would cost a host sync
            _stable(out, out_, UU, VV)
            return
        prod(UU, VV, out_)
        mul(out, W, out)
        exp(out, out)  # the fast softplus (see _softplus_fast); numpy flags an overflow
        log1p(out, out)
        if flag.hit:
            _stable(out, out_, UU, VV)
            flag.hit = False

    def _stable(out: Any, out_: Any, UU: Any, VV: Any) -> None:
        prod(UU, VV, out_)
        mul(out, W, out)
        _softplus_stable(xp, out)

    def item_step(p: Any, z: Any, pp: Any, VV_: Any, k1: Any, th: Any, acc: Any, accF: Any) -> None:
        """One item block (a, or nb = −b): propose p' = p + z for every item at once, accept
        where Σ_i (F − F') − k1·p > th (the state-free part of the log ratio and the
        log-uniform threshold are precomputed per segment), and keep F in step."""
        add(p, z, pp)
        neg_loglik(E, E_, U_, VV_)  # the candidate's softplus matrix
        if split_sums:  # Σ_i (F − F')
            prod(ones_n, F_, tmp_m_)
            prod(ones_n, E_, d_m_)
            sub(tmp_m, d_m, d_m)
        else:
            sub(F, E, D)
            prod(ones_n, D_, d_m_)
        mul(k1, p, tmp_m)
        sub(d_m, tmp_m, d_m)
        greater(d_m, th, acc)
        copyto(p, pp, where=acc)
        putmask(F, accF, E)

    neg_loglik(F, F[0] if prod is np.dot else F, U_, V_)

    # per-parameter constants of the prior term (internal coordinates: nb = -b has prior
    # mean -b0): with p' = p + z, log r = Σ(F − F') − c z (2 (p − μ) + z), c = 1 / (2 var)
    (mt, vt), (ma, va), (mb, vb) = pri["theta"], pri["a"], pri["b"]
    c_t, c_a, c_b = 1.0 / (2.0 * vt), 1.0 / (2.0 * va), 1.0 / (2.0 * vb)
    cvec_h = np.zeros(K)
    mu2_h = np.zeros(K)
    cvec_h[sl_t], cvec_h[sl_a], cvec_h[sl_b] = c_t, c_a, c_b
    mu2_h[sl_t], mu2_h[sl_a], mu2_h[sl_b] = 2.0 * mt, 2.0 * ma, -2.0 * mb
    cvec, two_c, mu2 = xp.asarray(cvec_h), xp.asarray(2.0 * cvec_h), xp.asarray(mu2_h)

    sd_all = xp.empty((C, K))
    sd_all[:, sl_t] = sd0["theta"]
    sd_all[:, sl_a] = sd0["a"]
    sd_all[:, sl_b] = sd0["b"]
    sd_all[:, i_sc] = _RIDGE_SD0[0]
    sd_all[:, i_sc + 1] = _RIDGE_SD0[1]
    cnt_win = xp.zeros((C, nm), dtype=xp.int64)
    cnt_post = xp.zeros((C, nm), dtype=xp.int64)
    draws = store  # (C, n_keep, ·) arrays, filled at the kept iterations
    if anchors:
        anc_idx = xp.asarray(np.array([i for i, _ in anchors], dtype=np.int64))
        anc_sign = xp.asarray(np.array([math.copysign(1.0, v) for _, v in anchors]))
        tp2 = UTp[0]
    ridge = _RidgeMoves(xp, UT, R, pri, anchors) if ridge_moves else None
    ridge_win = [[0, 0] for _ in range(C)]
    ridge_post = [[0, 0] for _ in range(C)]
    rng = _Rng(xp, seed, (C, K), gpu)
    acc_buf = xp.empty((rng.rows, C, nm), dtype=bool)  # accept decisions of a segment
    k_window = 0
    n_post = n_iter - warmup
    n_stored = 0
    next_keep = warmup  # iteration (0-based) whose state is the next draw (Schedule's rule)

    for start, end, new_batch in _segments(n_iter, warmup, rng.rows, adapt):
        if new_batch:
            Z_raw, E_raw = rng.draw(min(rng.rows, n_iter - start))
            batch_start = start
        L = end - start
        rows = slice(start - batch_start, end - batch_start)
        # Scale this segment's proposals and fold everything that does not depend on the
        # state into two arrays: accept p' = p + z  <=>  Σ(F − F') − k1 p > thr, with
        # k1 = 2 c z and thr = c z (z − 2μ) − E.  Each is split by block and shaped to
        # broadcast against the (chain, person, item) arrays; iterating over the leading
        # axis then hands the loop one view per iteration.
        z = Z_raw[rows] * sd_all
        k1 = z * two_c
        thr = z - mu2
        thr *= z
        thr *= cvec
        thr -= E_raw[rows]
        per_iter = []
        for arr in (z, k1, thr):
            per_iter.append(xp.ascontiguousarray(arr[:, :, sl_t])[:, :, :, None])
            per_iter.append(xp.ascontiguousarray(arr[:, :, sl_a])[:, :, None, :])
            per_iter.append(xp.ascontiguousarray(arr[:, :, sl_b])[:, :, None, :])
        acc_seg = acc_buf[:L]
        acc_ts = acc_seg[:, :, sl_t][:, :, :, None]
        acc_as = acc_seg[:, :, sl_a][:, :, None, :]
        acc_bs = acc_seg[:, :, sl_b][:, :, None, :]
        per_iter += [acc_ts, acc_as, acc_bs]
        if gpu:  # copyto(where=) broadcasts the (C, n, 1) / (C, 1, m) masks itself
            per_iter += [acc_ts, acc_as, acc_bs]
        else:  # putmask wants a mask of the target's shape: broadcast views
            per_iter += [np.broadcast_to(s, (L, C, n, m)) for s in (acc_ts, acc_as, acc_bs)]
        if ridge_moves:
            ridge_z = z[:, :, i_sc:].tolist()
            ridge_le = (-E_raw[rows, :, i_sc:]).tolist()
        in_warmup = start < warmup
        ridge_cnt = ridge_win if in_warmup else ridge_post

        it = start
        for (z_t, z_a, z_b, k1_t, k1_a, k1_b, th_t, th_a, th_b,
             acc_t, acc_a, acc_b, accF_t, accF_a, accF_b) in zip(*per_iter):
            # ---- θ block: all persons at once -----------------------------------------
            add(theta, z_t, tp)
            neg_loglik(E, E_, Up_, V_)  # the candidate's softplus matrix
            if split_sums:  # Σ_j (F − F')
                prod(F_, ones_m, tmp_t_)
                prod(E_, ones_m, d_t_)
                sub(tmp_t, d_t, d_t)
            else:
                sub(F, E, D)
                prod(D_, ones_m, d_t_)
            mul(k1_t, theta, tmp_t)
            d_t -= tmp_t
            greater(d_t, th_t, acc_t)
            if anchors:  # truncated prior: reject anchored θ' on the wrong side of 0
                acc_t[:, anc_idx, 0] &= tp2[:, anc_idx] * anc_sign > 0
            copyto(theta, tp, where=acc_t)
            putmask(F, accF_t, E)

            # ---- a block, then the b block (as nb = -b): all items at once -------------
            item_step(a, z_a, ap, Va_, k1_a, th_a, acc_a, accF_a)
            item_step(nb, z_b, nbp, Vb_, k1_b, th_b, acc_b, accF_b)

            # ---- ridge moves: directions along which the likelihood is constant -------
            if ridge_moves:
                k = it - start
                ridge(ridge_z[k], ridge_le[k], ridge_cnt)

            # ---- storage ----------------------------------------------------------------
            if it == next_keep:
                draws["theta"][:, n_stored] = UT[0]
                draws["a"][:, n_stored] = R[1]
                draws["b"][:, n_stored] = R[2]  # negated below
                n_stored += 1
                next_keep = next_keep + thin if n_stored < n_keep else -1
            it += 1

        # ---- acceptance counts, adaptation (end of each warmup window), progress --------
        cnt = cnt_win if in_warmup else cnt_post
        cnt += acc_seg.sum(axis=0)
        if adapt and in_warmup and end % _ADAPT_WINDOW == 0:
            k_window += 1
            rate = xp.empty((C, K))
            rate[:, :nm] = cnt_win
            rate[:, nm:] = xp.asarray(np.array(ridge_win, dtype=float))
            step = 3.0 / math.sqrt(k_window + 2)
            rate *= step / _ADAPT_WINDOW
            rate -= step * TARGET_ACCEPTANCE
            sd_all *= xp.exp(rate)
            xp.clip(sd_all, _SD_LIMITS[0], _SD_LIMITS[1], out=sd_all)
            cnt_win[...] = 0
            ridge_win = [[0, 0] for _ in range(C)]
        bar.update(end)
    bar.update(n_iter)
    xp.negative(draws["b"], out=draws["b"])
    acc_post = xp.empty((C, K))
    acc_post[:, :nm] = cnt_post
    acc_post[:, nm:] = xp.asarray(np.array(ridge_post, dtype=float))
    rates = acc_post / n_post
    return {
        "draws": draws,
        "acceptance": {"theta": rates[:, sl_t], "a": rates[:, sl_a], "b": rates[:, sl_b]},
        "sd": {"theta": sd_all[:, sl_t], "a": sd_all[:, sl_a], "b": sd_all[:, sl_b]},
        "ridge_acceptance": rates[:, i_sc:] if ridge_moves else None,
        "ridge_sd": sd_all[:, i_sc:] if ridge_moves else None,
    }


def _out_keyword(f: Any) -> Any:
    """``f(x, y, out)`` as ``f(x, y, out=out)`` (and ``f(x, out)`` as ``f(x, out=out)``)."""

    def call(*args: Any) -> Any:
        return f(*args[:-1], out=args[-1])

    return call


def _copy_where(xp: Any) -> Any:
    """``putmask(dst, mask, src)`` done as ``copyto(dst, src, where=mask)``."""

    def putmask(dst: Any, mask: Any, src: Any) -> None:
        xp.copyto(dst, src, where=mask)

    return putmask


class _RidgeMoves:
    """Per chain: a scale move (θ, a) -> (cθ, a/c) then a shift move (θ, b) -> (θ + d,
    b + a d).  Both leave η = aθ − b, hence the likelihood and ``F``, unchanged; they are
    accepted on the priors and the Jacobian (c^(n−m) for the scale, 1 for the shift).

    Only sufficient statistics enter (Σθ, Σθ², Σa, Σa², Σ a·(−b)), obtained from two
    matrix–vector products, so a move costs O(n + m); the scalar work is done on host
    floats, and an accepted move scales or shifts its chain's rows in place.  ``UT`` =
    [θ; 1] and the rows 1-3 of ``R`` = [a; nb; 1] hold the state (nb = −b).
    """

    def __init__(
        self, xp: Any, UT: Any, R: Any, pri: dict[str, tuple[float, float]],
        anchors: list[tuple[int, float]],
    ) -> None:
        C, n = UT.shape[1], UT.shape[2]
        m = R.shape[2]
        self.n, self.m, self.C = n, m, C
        (self.mt, vt), (self.ma, va), (self.mb, vb) = pri["theta"], pri["a"], pri["b"]
        self.c_t, self.c_a, self.c_b = 1.0 / (2.0 * vt), 1.0 / (2.0 * va), 1.0 / (2.0 * vb)
        self.xp, self.UT = xp, UT
        if C == 1:  # [θ; 1] θ = [Σθ², Σθ] and [a; nb; 1] a = [Σa², Σ a·nb, Σa]
            self.u, self.t, self.s, self.a = UT[:, 0, :], UT[0, 0], R[1:4, 0, :], R[1, 0]
        else:
            self.u, self.t = UT.transpose(1, 0, 2), UT[0][:, :, None]
            self.s, self.a = R[1:4].transpose(1, 0, 2), R[1][:, :, None]
        self.th_rows = [UT[0, c] for c in range(C)]
        self.a_rows = [R[1, c] for c in range(C)]
        self.nb_rows = [R[2, c] for c in range(C)]
        self.anc_idx = [i for i, _ in anchors]
        self.anc_sign = [math.copysign(1.0, v) for _, v in anchors]

    def __call__(self, z: list, le: list, counts: list) -> None:
        """One scale and one shift proposal per chain; ``z[c]`` holds the chain's
        log-scale and shift proposals, ``le[c]`` their ``log u``, ``counts[c]`` the
        acceptance counters."""
        n, m = self.n, self.m
        mt, ma, mb, c_t, c_a, c_b = self.mt, self.ma, self.mb, self.c_t, self.c_a, self.c_b
        if self.C == 1:
            G = [self.u.dot(self.t).tolist()]
            H = [self.s.dot(self.a).tolist()]
        else:
            G = self.xp.matmul(self.u, self.t)[:, :, 0].tolist()
            H = self.xp.matmul(self.s, self.a)[:, :, 0].tolist()
        anc = self.UT[0][:, self.anc_idx].tolist() if self.anc_idx else None
        for c in range(self.C):
            stt, st = G[c]
            saa, sanb, sa = H[c]
            # scale move
            lc = z[c][0]
            k = math.exp(lc)
            lr = c_t * ((1.0 - k * k) * stt + 2.0 * mt * (k - 1.0) * st)
            lr += c_a * ((1.0 - 1.0 / (k * k)) * saa + 2.0 * ma * (1.0 / k - 1.0) * sa)
            lr += (n - m) * lc
            if lr > le[c][0]:
                self.th_rows[c] *= k
                self.a_rows[c] /= k
                stt, st = stt * k * k, st * k
                saa, sanb, sa = saa / (k * k), sanb / k, sa / k
                if anc is not None:
                    anc[c] = [v * k for v in anc[c]]
                counts[c][0] += 1
            # shift move: θ -> θ + d, b -> b + a d (nb -> nb − a d)
            d = z[c][1]
            lr = c_t * (-2.0 * d * (st - n * mt) - n * d * d)
            lr += c_b * (2.0 * d * (sanb + mb * sa) - d * d * saa)
            ok = lr > le[c][1]
            if ok and anc is not None:
                ok = all(sg * (v + d) > 0 for sg, v in zip(self.anc_sign, anc[c]))
            if ok:
                self.th_rows[c] += d
                self.nb_rows[c] -= d * self.a_rows[c]
                counts[c][1] += 1

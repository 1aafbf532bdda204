"""numba kernel of the orbit moves of the fused CPU engine (imported only when numba is
installed): per chain, the sums the scale and shift moves need, their random inputs from the
Philox stream (counters (iteration, 4, 0, 0) and (iteration, 5, 0, 0)) and the move (c, d).
The item's latent scale is drawn in the (a, b) pass (:func:`privirt.bayes.twopno_numba.items`).
The maths is in :mod:`privirt.bayes.moves` and ``docs/gibbs.md``."""

from __future__ import annotations

import math

import numpy as np

from .._backend import import_numba
from . import moves as _moves
from .twopno_numba import _JIT, ndtri, uniform2

njit = import_numba().njit  # numba refusing its NUMBA_* settings: one line (_backend)
_log_scale_mh = njit(**_JIT)(_moves.log_scale_mh)
_shift_draw = njit(**_JIT)(_moves.shift_draw)
_S_SCALE, _S_SHIFT = (np.uint64(s) for s in _moves.MOVE_STREAMS[:2])


@njit(**_JIT)
def moves(theta, a, b, keys, it, th_con, scale, shift, n_free, power, pa_prec, pa_lin, pb_prec,
          pb_lin, cd):
    """``cd[bb] = (c, d)`` of every chain bb from the new θ (B, n) and the previous a, b (B, k);
    ``th_con`` (n,) the anchors (2: fixed, ±1: sign); (1, 0) where neither move runs."""
    n = theta.shape[1]
    k = a.shape[1]
    zero = np.uint64(0)
    c_it = np.uint64(it)
    for bb in range(theta.shape[0]):
        cd[bb, 0] = 1.0
        cd[bb, 1] = 0.0
        if not (scale or shift):
            continue
        s_t = 0.0
        s_tt = 0.0
        plus_min = np.inf
        minus_max = -np.inf
        for i in range(n):
            con = th_con[i]
            if con == 2:
                continue
            th = theta[bb, i]
            s_t += th
            s_tt += th * th
            if con == 1:
                plus_min = min(plus_min, th)
            elif con == -1:
                minus_max = max(minus_max, th)
        s_a = 0.0
        s_aa = 0.0
        s_ab = 0.0
        for j in range(k):
            aj = a[bb, j]
            s_a += aj
            s_aa += aj * aj
            s_ab += aj * b[bb, j]
        k0 = keys[bb, 0]
        k1 = keys[bb, 1]
        c = 1.0
        if scale:
            u0, u1 = uniform2(c_it, _S_SCALE, zero, zero, k0, k1)
            c = math.exp(_log_scale_mh(power, 0.5 * s_tt, 0.5 * pa_prec * s_aa, pa_lin * s_a,
                                       0.0, ndtri(u0), u1))
        d = 0.0
        if shift:
            v0, _ = uniform2(c_it, _S_SHIFT, zero, zero, k0, k1)
            d = _shift_draw(c, s_t, s_aa, s_ab, s_a, plus_min, minus_max, n_free, pb_prec,
                            pb_lin, ndtri(v0))
        cd[bb, 0] = c
        cd[bb, 1] = d

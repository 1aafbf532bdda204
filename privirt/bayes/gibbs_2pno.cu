// Fused CUDA kernels of the 2PNO Gibbs sampler (privirt.bayes.gibbs, device="gpu").
//
// Loaded with importlib.resources and compiled by cupy's RawModule (NVRTC, --std=c++17).
// Each kernel runs its body once for every index i in [0, size) (a grid-stride loop).
// Arrays are flat: Z (B, n, k); theta (B, n); a, b (B, k); the int8 codes (D, n, k),
// batch element `bidx` reading data set `bidx / C`; the partial sums (P, B, k); the draw
// stores (B, n_keep, .), written at draw slot `keep` when keep >= 0; the anchors th_con (n)
// (0 none, 1 theta > 0, -1 theta < 0, 2 fixed at th_fix (n)); free_slopes: a unrestricted.  Random numbers: the
// counter (iteration, stream, index, .) under the batch element's two-word key, with
// streams 0 (Z), 1 (theta), 2 and 3 (a and b), and stream + (t << 8) for the t-th retry
// of a rejection step; streams 4, 5 and 6 the orbit moves (privirt/bayes/moves.py).  Kernels,
// in the order of one iteration: z, theta, item_sums, item (which also draws the orbit moves:
// every thread of a chain computes the chain's scale and shift from the same partial sums, so
// they agree exactly, then moves its share of the persons).

__device__ __forceinline__ void philox4x32_10(unsigned int c0, unsigned int c1,
        unsigned int c2, unsigned int c3, unsigned int k0, unsigned int k1,
        unsigned int* o) {
    for (int r = 0; r < 10; ++r) {
        unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    o[0] = c0; o[1] = c1; o[2] = c2; o[3] = c3;
}
// two uniforms in the open interval (0, 1), 52 random bits each, from one Philox block
__device__ __forceinline__ void uniform2(unsigned int c0, unsigned int c1,
        unsigned int c2, unsigned int c3, unsigned int k0, unsigned int k1,
        double* u) {
    unsigned int o[4];
    philox4x32_10(c0, c1, c2, c3, k0, k1, o);
    const double s = 2.220446049250313e-16;  /* 2^-52 */
    u[0] = ((double)(((unsigned long long)(o[0] >> 6) << 26) + (o[1] >> 6)) + 0.5) * s;
    u[1] = ((double)(((unsigned long long)(o[2] >> 6) << 26) + (o[3] >> 6)) + 0.5) * s;
}
// X ~ N(0,1) | X > L.  L <= 5: upper-tail inverse CDF; L > 5: Robert (1995) exponential
// rejection with the optimal rate (acceptance > 0.98).  `stream` separates the uses.
__device__ double std_tn_lower(double L, unsigned int c0, unsigned int stream,
        unsigned int c2, unsigned int c3, unsigned int k0, unsigned int k1) {
    double u[2];
    uniform2(c0, stream, c2, c3, k0, k1, u);
    if (L <= 5.0) {
        return -normcdfinv(u[0] * normcdf(-L));
    }
    // L >= 1e150 (or inf/NaN, a diverged state): the draw is L in doubles (X - L ~ 1/L, below
    // half an ulp of L), and L * L may overflow, which left the loop below without an exit
    if (!(L < 1e150)) return L;
    const double alpha = 0.5 * (L + sqrt(L * L + 4.0));
    for (unsigned int t = 1; ; ++t) {
        double x = L - log(u[0]) / alpha;
        double d = x - alpha;
        if (log(u[1]) <= -0.5 * d * d) return x;
        uniform2(c0, stream + (t << 8), c2, c3, k0, k1, u);
    }
}

// The orbit moves (privirt/bayes/moves.py, line for line; docs/gibbs.md derives them).
// One independence MH step from t = 0 for the density exp(h(t)), h(t) = p t - al e^{2t}
// - be e^{-2t} + ga e^{-t} + de e^{t}: the proposal N(m, -1/h''(m)) at the mode m found by
// Newton's method from a start that moves with the orbit; 0 when rejected or not integrable.
__device__ double log_scale_mh(double p, double al, double be, double ga, double de,
        double z, double u) {
    if (!(al > 0.0 && (be > 0.0 || p > 0.0))) return 0.0;
    double t = (be > 0.0) ? 0.25 * log(be / al) : 0.5 * log(p / (2.0 * al));
    bool ok = false;
    for (int r = 0; r < 60; ++r) {
        double e1 = exp(t), em1 = 1.0 / e1;
        double h1 = p - 2.0 * al * e1 * e1 + 2.0 * be * em1 * em1 - ga * em1 + de * e1;
        double h2 = -4.0 * al * e1 * e1 - 4.0 * be * em1 * em1 + ga * em1 + de * e1;
        if (!(h2 < 0.0)) return 0.0;
        double step = fmin(fmax(-h1 / h2, -1.0), 1.0);
        t += step;
        if (fabs(step) <= 1e-12 * (1.0 + fabs(t))) { ok = true; break; }
    }
    double e1 = exp(t), em1 = 1.0 / e1;
    double h2 = -4.0 * al * e1 * e1 - 4.0 * be * em1 * em1 + ga * em1 + de * e1;
    if (!(ok && h2 < 0.0)) return 0.0;
    const double sd = 1.0 / sqrt(-h2);
    const double t_new = t + sd * z;
    e1 = exp(t_new); em1 = 1.0 / e1;
    const double h_new = p * t_new - al * e1 * e1 - be * em1 * em1 + ga * em1 + de * e1;
    const double log_r = h_new - (-al - be + ga + de) + 0.5 * z * z
                         - 0.5 * (t / sd) * (t / sd);
    return (log(u) < log_r) ? t_new : 0.0;
}
// the shift d after the scale c (0 when d would break a sign anchor)
__device__ double shift_draw(double c, double s_t, double s_aa, double s_ab, double s_a,
        double plus_min, double minus_max, double n_free, double pb_prec, double pb_lin,
        double z) {
    const double tau = n_free + pb_prec * s_aa / (c * c);
    const double mu = (-c * s_t - (pb_prec * s_ab - pb_lin * s_a) / c) / tau;
    const double d = mu + z / sqrt(tau);
    if (!(c * plus_min + d > 0.0 && c * minus_max + d < 0.0)) return 0.0;
    return d;
}

extern "C" __global__ void privirt_gibbs_z(
        const double* __restrict__ theta,
        const double* __restrict__ a,
        const double* __restrict__ b,
        const signed char* __restrict__ codes,
        const unsigned int* __restrict__ keys,
        unsigned int it,
        int n_persons,
        int n_items,
        int C,
        int D,
        double* __restrict__ z,
        long long size) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < size; i += (long long)blockDim.x * gridDim.x) {
        const long long nk = (long long)n_persons * n_items;
        const long long bidx = i / nk;
        const long long cell = i - bidx * nk;
        const long long row = cell / n_items, col = cell - row * n_items;
        const long long d = (D == 1) ? 0 : bidx / C;
        const signed char y = codes[d * nk + cell];
        if (y < 0) { z[i] = 0.0; }
        else {
            const double mu = theta[bidx * n_persons + row] * a[bidx * n_items + col]
                              - b[bidx * n_items + col];
            const double s = (y == 1) ? 1.0 : -1.0;
            const double x = std_tn_lower(-s * mu, it, 0u, (unsigned int)cell,
                                          (unsigned int)(cell >> 32),
                                          keys[2 * bidx], keys[2 * bidx + 1]);
            z[i] = mu + s * x;
        }
    }
}

extern "C" __global__ void privirt_gibbs_theta(
        const double* __restrict__ z,
        const double* __restrict__ a,
        const double* __restrict__ b,
        const signed char* __restrict__ codes,
        const unsigned int* __restrict__ keys,
        const signed char* __restrict__ th_con,
        const double* __restrict__ th_fix,
        unsigned int it,
        int n_persons,
        int n_items,
        int C,
        int D,
        int missing,
        int keep,
        int n_keep,
        double* __restrict__ theta,
        double* __restrict__ store,
        long long size) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < size; i += (long long)blockDim.x * gridDim.x) {
        const long long bidx = i / n_persons;
        const long long person = i - bidx * n_persons;
        const long long d = (D == 1) ? 0 : bidx / C;
        const long long row = i * n_items;  /* Z is 0 where missing */
        const long long crow = (d * n_persons + person) * n_items;
        const long long item0 = bidx * n_items;
        double za = 0.0, aa = 0.0, ab = 0.0;
        for (int j = 0; j < n_items; ++j) {
            const double aj = a[item0 + j];
            za += z[row + j] * aj;
            if (missing && codes[crow + j] < 0) continue;
            aa += aj * aj;
            ab += aj * b[item0 + j];
        }
        const double p = 1.0 + aa;
        const signed char con = th_con[person];
        double t;
        if (con == 0) {
            double u[2];
            uniform2(it, 1u, (unsigned int)person, 0u, keys[2 * bidx], keys[2 * bidx + 1], u);
            t = (za + ab) / p + normcdfinv(u[0]) / sqrt(p);
        } else if (con == 2) {  /* fixed by an anchor */
            t = th_fix[person];
        } else {  /* theta > 0 (con = 1) or < 0 (con = -1): truncated, same counter */
            const double m = (za + ab) / p, sd = 1.0 / sqrt(p), sg = (double)con;
            t = m + sg * sd * std_tn_lower(-sg * m / sd, it, 1u, (unsigned int)person, 0u,
                                           keys[2 * bidx], keys[2 * bidx + 1]);
        }
        theta[i] = t;
        if (keep >= 0) store[(bidx * n_keep + keep) * n_persons + person] = t;
    }
}

extern "C" __global__ void privirt_gibbs_item_sums(
        const double* __restrict__ z,
        const double* __restrict__ theta,
        const double* __restrict__ a,
        const double* __restrict__ b,
        const signed char* __restrict__ codes,
        const signed char* __restrict__ th_con,
        int n_persons,
        int n_items,
        int C,
        int D,
        int batch,
        int missing,
        int rows,
        double* __restrict__ s_tz,
        double* __restrict__ s_z,
        double* __restrict__ s_tt,
        double* __restrict__ s_t,
        double* __restrict__ s_1,
        double* __restrict__ s_rr,
        double* __restrict__ s_person,
        double* __restrict__ s_items,
        long long size) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < size; i += (long long)blockDim.x * gridDim.x) {
        const long long bk = (long long)batch * n_items;
        const long long chunk = i / bk;
        const long long bidx = (i - chunk * bk) / n_items;
        const long long j = i - chunk * bk - bidx * n_items;
        const long long d = (D == 1) ? 0 : bidx / C;
        const long long r0 = chunk * rows;
        const long long r1 = (r0 + rows < n_persons) ? r0 + rows : n_persons;
        const double aj = a[bidx * n_items + j], bj = b[bidx * n_items + j];
        double tz = 0.0, sz = 0.0, tt = 0.0, st = 0.0, s1 = 0.0, rr = 0.0;
        for (long long r = r0; r < r1; ++r) {
            const double zz = z[(bidx * n_persons + r) * n_items + j];
            const double th = theta[bidx * n_persons + r];
            tz += th * zz;
            sz += zz;
            if (missing && codes[(d * n_persons + r) * n_items + j] < 0) continue;
            tt += th * th;
            st += th;
            s1 += 1.0;
            const double res = zz - (th * aj - bj);  /* the items' latent scales' R_j */
            rr += res * res;
        }
        s_tz[i] = tz; s_z[i] = sz; s_tt[i] = tt; s_t[i] = st; s_1[i] = s1; s_rr[i] = rr;
        if (j == 0) {  /* the chunk's person sums of the scale and shift moves */
            double pt = 0.0, ptt = 0.0, pmin = 1e308, pmax = -1e308;  /* none: +-1e308 */
            for (long long r = r0; r < r1; ++r) {
                const signed char con = th_con[r];
                if (con == 2) continue;
                const double th = theta[bidx * n_persons + r];
                pt += th;
                ptt += th * th;
                if (con == 1) pmin = fmin(pmin, th);
                else if (con == -1) pmax = fmax(pmax, th);
            }
            const long long q = (chunk * batch + bidx) * 4;
            s_person[q] = pt; s_person[q + 1] = ptt; s_person[q + 2] = pmin;
            s_person[q + 3] = pmax;
            if (chunk == 0) {  /* the chain's item sums, of the previous a and b */
                double sa = 0.0, saa = 0.0, sab = 0.0;
                for (int jj = 0; jj < n_items; ++jj) {
                    const double av = a[bidx * n_items + jj];
                    sa += av;
                    saa += av * av;
                    sab += av * b[bidx * n_items + jj];
                }
                s_items[bidx * 3] = sa; s_items[bidx * 3 + 1] = saa; s_items[bidx * 3 + 2] = sab;
            }
        }
    }
}

extern "C" __global__ void privirt_gibbs_item(
        const double* __restrict__ s_tz,
        const double* __restrict__ s_z,
        const double* __restrict__ s_tt,
        const double* __restrict__ s_t,
        const double* __restrict__ s_1,
        const double* __restrict__ s_rr,
        const double* __restrict__ s_person,
        const double* __restrict__ s_items,
        int move_scale,
        int move_shift,
        int move_latent,
        double n_free,
        double power,
        int n_persons,
        int chunks,
        int batch,
        double pa_prec,
        double pa_lin,
        double pb_prec,
        double pb_lin,
        int free_slopes,
        const unsigned int* __restrict__ keys,
        unsigned int it,
        int n_items,
        int keep,
        int n_keep,
        double* __restrict__ a,
        double* __restrict__ b,
        double* __restrict__ store_a,
        double* __restrict__ store_b,
        double* __restrict__ theta,
        double* __restrict__ store_theta,
        long long size) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < size; i += (long long)blockDim.x * gridDim.x) {
        const long long bk = (long long)batch * n_items;
        const long long bidx = i / n_items;
        const long long item = i - bidx * n_items;
        double tz = 0.0, sz = 0.0, tt = 0.0, st = 0.0, s1 = 0.0, rr = 0.0;
        for (int c = 0; c < chunks; ++c) {
            const long long q = c * bk + i;
            tz += s_tz[q]; sz += s_z[q]; tt += s_tt[q]; st += s_t[q]; s1 += s_1[q];
            rr += s_rr[q];
        }
        const unsigned int k0 = keys[2 * bidx], k1 = keys[2 * bidx + 1];
        double u[2];
        /* the chain's scale c and shift d, the same in every thread of the chain */
        double cs = 1.0, ds = 0.0;
        if (move_scale || move_shift) {
            double pt = 0.0, ptt = 0.0, pmin = 1e308, pmax = -1e308;  /* none: +-1e308 */
            for (int c = 0; c < chunks; ++c) {
                const long long q = ((long long)c * batch + bidx) * 4;
                pt += s_person[q]; ptt += s_person[q + 1];
                pmin = fmin(pmin, s_person[q + 2]); pmax = fmax(pmax, s_person[q + 3]);
            }
            const double sa = s_items[bidx * 3], saa = s_items[bidx * 3 + 1];
            const double sab = s_items[bidx * 3 + 2];
            if (move_scale) {
                uniform2(it, 4u, 0u, 0u, k0, k1, u);
                cs = exp(log_scale_mh(power, 0.5 * ptt, 0.5 * pa_prec * saa, pa_lin * sa, 0.0,
                                      normcdfinv(u[0]), u[1]));
            }
            if (move_shift) {
                uniform2(it, 5u, 0u, 0u, k0, k1, u);
                ds = shift_draw(cs, pt, saa, sab, sa, pmin, pmax, n_free, pb_prec, pb_lin,
                                normcdfinv(u[0]));
            }
            if (cs != 1.0 || ds != 0.0) {  /* theta -> c theta + d: this thread's persons */
                for (long long r = item; r < n_persons; r += n_items) {
                    const double tn = cs * theta[bidx * n_persons + r] + ds;
                    theta[bidx * n_persons + r] = tn;
                    if (keep >= 0) store_theta[(bidx * n_keep + keep) * n_persons + r] = tn;
                }
            }
        }
        double g = 1.0;
        if (move_latent) {  /* the item's latent scale, with a' = a / c, b' = b + a' d */
            const double aj = a[i] / cs, bj = b[i] + aj * ds;
            uniform2(it, 6u, (unsigned int)item, 0u, k0, k1, u);
            g = exp(log_scale_mh(s1 + 2.0, 0.5 * (rr + pa_prec * aj * aj + pb_prec * bj * bj),
                                 0.0, 0.0, pa_lin * aj + pb_lin * bj, normcdfinv(u[0]), u[1]));
        }
        if (cs != 1.0 || ds != 0.0 || g != 1.0) {  /* the sums after the moves */
            const double tz2 = g * (cs * tz + ds * sz), sz2 = g * sz;
            const double tt2 = cs * cs * tt + 2.0 * cs * ds * st + ds * ds * s1;
            const double st2 = cs * st + ds * s1;
            tz = tz2; sz = sz2; tt = tt2; st = st2;
        }
        /* x_i = (theta_i, -1): P = [[sum th^2, -sum th], [-sum th, sum 1]] + prior,
           r = [sum th Z, -sum Z] + prior precision x prior mean */
        const double paa = tt + pa_prec, pab = -st, pbb = s1 + pb_prec;
        const double ra = tz + pa_lin, rb = -sz + pb_lin;
        const double det = paa * pbb - pab * pab;
        const double ma = (pbb * ra - pab * rb) / det;
        const double mb = (paa * rb - pab * ra) / det;
        const double sda = sqrt(pbb / det);
        double av;
        if (free_slopes) {  /* untruncated: a = m_a - sd_a Phi^-1(u) */
            uniform2(it, 2u, (unsigned int)item, 0u, k0, k1, u);
            av = ma - sda * normcdfinv(u[0]);
        } else {
            av = ma + sda * std_tn_lower(-ma / sda, it, 2u, (unsigned int)item, 0u, k0, k1);
            av = fmax(av, 2.2250738585072014e-308);
        }
        uniform2(it, 3u, (unsigned int)item, 0u, k0, k1, u);
        const double bv = mb - (pab / pbb) * (av - ma) + normcdfinv(u[0]) / sqrt(pbb);
        a[i] = av;
        b[i] = bv;
        if (keep >= 0) {
            const long long o = (bidx * n_keep + keep) * n_items + item;
            store_a[o] = av;
            store_b[o] = bv;
        }
    }
}

// The nonlinear Gaussian filters, one thread per track, the state in registers: the EKF
// (SIGMA 0; ITER > 1: the iterated EKF's Gauss-Newton updates) or a sigma-point filter
// (SIGMA 1: the UKF's or the CKF's points and weights in WM, WC), as on the CPU
// (nonlinear/ekf.rs, nonlinear/sigma.rs, nonlinear/iterated.rs). The launcher writes
// before this file: NX, NY, NANG, NMODE, SIGMA, ITER, NP, CENTRAL, SCALE, PSD_TOL, each
// mode J's functions model_f<J>, model_h<J> (values) and model_fjac<J>, model_hjac<J>
// (values then the row-major Jacobian), and the constants QM [NMODE][NX][NX],
// RM [NMODE][NY][NY], X0, P00, WM, WC, and k_ang(a), the a-th angle component (a
// function, not an array, so that it folds to a constant and the points' arrays stay in
// registers). One model is mode 0; the IMM's kernel (imm.cu) runs every mode's
// predict<J> and update<J>.
//
// Layouts, structure of arrays so that a warp's loads and stores are contiguous: z
// [T][NY][B], mean [T][NX][B], cov [T][NX * NX][B], ll [T][B] (with `last`, one step:
// the final state and the total log-likelihood); err [B] is 0, or the failing step k as
// 2 (k + 1) + (0: P, 1: S).

#if SIGMA
// The moments of y = g(x) (D outputs) over the points of (m, P): mean (angles as
// circular means when ANGLES), covariance and the cross covariance C (NX x D).
template <int D, bool MEASURE, int J>
__device__ __forceinline__ bool transform(const real* m, const real* P, real* mean, real* cov, real* cross) {
    real L[NX * NX];
    if (!chol_psd<NX>(P, L)) return false;
    real ys[NP * D];
#pragma unroll
    for (int i = 0; i < NP; i++) {
        real x[NX];
        const int q = i - CENTRAL;
        const int j = q < NX ? q : q - NX;
        const real s = q < NX ? (real)SCALE : -(real)SCALE;
#pragma unroll
        for (int r = 0; r < NX; r++) x[r] = q < 0 ? m[r] : m[r] + s * L[r * NX + j];
        if (MEASURE) model_h<J>(x, ys + i * D); else model_f<J>(x, ys + i * D);
    }
#pragma unroll
    for (int r = 0; r < D; r++) {
        real v = (real)0;
#pragma unroll
        for (int i = 0; i < NP; i++) v += WM[i] * ys[i * D + r];
        mean[r] = v;
    }
    if (MEASURE) {
#pragma unroll
        for (int a = 0; a < NANG; a++) {
            real sn = (real)0, cs = (real)0;
#pragma unroll
            for (int i = 0; i < NP; i++) {
                real si, ci;
                k_sincos(ys[i * D + k_ang(a)], &si, &ci);
                sn += WM[i] * si;
                cs += WM[i] * ci;
            }
            mean[k_ang(a)] = atan2(sn, cs);
        }
    }
#pragma unroll
    for (int i = 0; i < D * D; i++) cov[i] = (real)0;
#pragma unroll
    for (int i = 0; i < NX * D; i++) cross[i] = (real)0;
#pragma unroll
    for (int i = 0; i < NP; i++) {
        real dy[D], dx[NX];
        const int q = i - CENTRAL;
        const int j = q < NX ? q : q - NX;
        const real s = q < NX ? (real)SCALE : -(real)SCALE;
#pragma unroll
        for (int r = 0; r < D; r++) dy[r] = ys[i * D + r] - mean[r];
        if (MEASURE) {
#pragma unroll
            for (int a = 0; a < NANG; a++) dy[k_ang(a)] = k_wrap(dy[k_ang(a)]);
        }
#pragma unroll
        for (int r = 0; r < NX; r++) dx[r] = q < 0 ? (real)0 : (m[r] + s * L[r * NX + j]) - m[r];
        const real w = WC[i];
#pragma unroll
        for (int r = 0; r < D; r++)
#pragma unroll
            for (int c = 0; c <= r; c++) cov[r * D + c] += w * dy[r] * dy[c];
#pragma unroll
        for (int r = 0; r < NX; r++)
#pragma unroll
            for (int c = 0; c < D; c++) cross[r * D + c] += w * dx[r] * dy[c];
    }
#pragma unroll
    for (int r = 0; r < D; r++)
#pragma unroll
        for (int c = 0; c < r; c++) cov[c * D + r] = cov[r * D + c];
    return true;
}

// The prediction of (m, P) in place, and D = Cov(x_k, x_k+1) (NX x NX, the smoother's).
template <int J>
__device__ __forceinline__ bool predict_d(real* m, real* P, real* D) {
    real mean[NX], cov[NX * NX];
    if (!transform<NX, false, J>(m, P, mean, cov, D)) return false;
#pragma unroll
    for (int r = 0; r < NX; r++) m[r] = mean[r];
#pragma unroll
    for (int i = 0; i < NX * NX; i++) P[i] = cov[i] + QM[J * NX * NX + i];
    symmetrize<NX>(P);
    return true;
}

// 0: done; 1: P has no factor; 2: S is not positive definite.
template <int J>
__device__ __forceinline__ int update(const real* z, real* m, real* P, real* ll) {
    real mean[NY], S[NY * NY], C[NX * NY];
    if (!transform<NY, true, J>(m, P, mean, S, C)) return 1;
    real y[NY];
#pragma unroll
    for (int r = 0; r < NY; r++) y[r] = z[r] - mean[r];
#pragma unroll
    for (int a = 0; a < NANG; a++) y[k_ang(a)] = k_wrap(y[k_ang(a)]);
#pragma unroll
    for (int i = 0; i < NY * NY; i++) S[i] += RM[J * NY * NY + i];
    return moment_update(m, P, y, S, C, ll) ? 0 : 2;
}
#else
// The prediction of (m, P) in place, and D = P F^T = Cov(x_k, x_k+1) (the smoother's).
template <int J>
__device__ __forceinline__ bool predict_d(real* m, real* P, real* D) {
    real o[NX + NX * NX];
    model_fjac<J>(m, o);
    // D = P F^T, P = F D + Q.
    real FPF[NX * NX];
    through<NX>(P, o + NX, D, FPF);
#pragma unroll
    for (int i = 0; i < NX * NX; i++) P[i] = FPF[i] + QM[J * NX * NX + i];
    symmetrize<NX>(P);
#pragma unroll
    for (int r = 0; r < NX; r++) m[r] = o[r];
    return true;
}

// C = P H^T (NX x NY) and S = H C + R of mode J, with H the Jacobian of h (NY x NX).
template <int J>
__device__ __forceinline__ void ekf_moments(const real* P, const real* H, real* C, real* S) {
    through<NY>(P, H, C, S);
#pragma unroll
    for (int i = 0; i < NY * NY; i++) S[i] += RM[J * NY * NY + i];
}

// The EKF update: y = z - h(m), C = P H^T, S = H C + R with H the Jacobian at m.
template <int J>
__device__ __forceinline__ int ekf_update(const real* z, real* m, real* P, real* ll) {
    real o[NY + NY * NX];
    model_hjac<J>(m, o);
    const real* H = o + NY;
    real y[NY];
#pragma unroll
    for (int r = 0; r < NY; r++) y[r] = z[r] - o[r];
#pragma unroll
    for (int a = 0; a < NANG; a++) y[k_ang(a)] = k_wrap(y[k_ang(a)]);
    real C[NX * NY], S[NY * NY];
    ekf_moments<J>(P, H, C, S);
    return moment_update(m, P, y, S, C, ll) ? 0 : 2;
}

// The iterated EKF's update (ITER > 1): from x = m (the prediction), ITER Gauss-Newton
// steps x <- m + K (z - h(x) - H (m - x)) with H the Jacobian at x; P from the last
// step, the log-likelihood from the first (the EKF's).
template <int J>
__device__ __forceinline__ int iekf_update(const real* z, real* m, real* P, real* ll) {
    real x[NX], Pn[NX * NX];
#pragma unroll
    for (int r = 0; r < NX; r++) x[r] = m[r];
    for (int it = 0; it < ITER; it++) {
        real o[NY + NY * NX];
        model_hjac<J>(x, o);
        const real* H = o + NY;
        real y[NY];
#pragma unroll
        for (int r = 0; r < NY; r++) {
            real v = z[r] - o[r];
#pragma unroll
            for (int k = 0; k < NX; k++) v -= H[r * NX + k] * (m[k] - x[k]);
            y[r] = v;
        }
#pragma unroll
        for (int a = 0; a < NANG; a++) y[k_ang(a)] = k_wrap(y[k_ang(a)]);
        real C[NX * NY], S[NY * NY];
        ekf_moments<J>(P, H, C, S);
        real mi[NX], l;
#pragma unroll
        for (int r = 0; r < NX; r++) mi[r] = m[r];
#pragma unroll
        for (int i = 0; i < NX * NX; i++) Pn[i] = P[i];
        if (!moment_update(mi, Pn, y, S, C, &l)) return 2;
        if (it == 0) *ll = l;
#pragma unroll
        for (int r = 0; r < NX; r++) x[r] = mi[r];
    }
#pragma unroll
    for (int r = 0; r < NX; r++) m[r] = x[r];
#pragma unroll
    for (int i = 0; i < NX * NX; i++) P[i] = Pn[i];
    return 0;
}

template <int J>
__device__ __forceinline__ int update(const real* z, real* m, real* P, real* ll) {
    return ITER > 1 ? iekf_update<J>(z, m, P, ll) : ekf_update<J>(z, m, P, ll);
}
#endif

template <int J>
__device__ __forceinline__ bool predict(real* m, real* P) {
    real D[NX * NX];
    return predict_d<J>(m, P, D);
}

// Track b's measurement at step k from z [T][NY][B] into zk; whether it is missing (a NaN).
__device__ __forceinline__ bool load_z(const real* __restrict__ z, int k, long long B, int b, real* zk) {
    bool missing = false;
#pragma unroll
    for (int j = 0; j < NY; j++) {
        zk[j] = z[((long long)k * NY + j) * B + b];
        missing |= isnan(zk[j]);
    }
    return missing;
}

extern "C" __global__ void __launch_bounds__(128) nl_filter(const real* __restrict__ z, real* __restrict__ mean,
                                                            real* __restrict__ cov, real* __restrict__ ll,
                                                            int* __restrict__ err, int nb, int steps, int last) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    const long long B = nb;
    real m[NX], P[NX * NX];
#pragma unroll
    for (int i = 0; i < NX; i++) m[i] = X0[i];
#pragma unroll
    for (int i = 0; i < NX * NX; i++) P[i] = P00[i];
    int fail = 0;
    real total = (real)0;
    for (int k = 0; k < steps; k++) {
        if (k > 0 && !predict<0>(m, P)) {
            fail = 2 * (k + 1);
            break;
        }
        real zk[NY];
        const bool missing = load_z(z, k, B, b, zk);
        real l = (real)0;
        if (!missing) {
            const int u = update<0>(zk, m, P, &l);
            if (u) {
                fail = 2 * (k + 1) + (u - 1);
                break;
            }
        }
        total += l;
        if (last && k < steps - 1) continue;
        // With `last`, only the final state, at slot 0, and the total log-likelihood.
        const long long s = last ? 0 : k;
#pragma unroll
        for (int i = 0; i < NX; i++) mean[(s * NX + i) * B + b] = m[i];
#pragma unroll
        for (int i = 0; i < NX * NX; i++) cov[(s * NX * NX + i) * B + b] = P[i];
        ll[s * B + b] = last ? total : l;
    }
    err[b] = fail;
}

// One RTS step (nonlinear/smoother.rs `rts_step`): from the filtered (m, P) at k, the
// prediction (mp, Pp) from it with D = Cov(x_k, x_k+1), and the smoothed (ms, Ps) at
// k + 1, the smoothed moments at k into (ms, Ps): G = D Pp^-1 (through Pp = L L^T),
// ms = m + G (ms - mp), Ps = P + G (Ps - Pp) G^T. False when Pp is not positive
// definite.
__device__ __forceinline__ bool rts_step(const real* m, const real* P, const real* mp, const real* Pp,
                                         const real* D, real* ms, real* Ps) {
    real L[NX * NX], il[NX];
    if (!chol_pd<NX>(Pp, L, il)) return false;
    // G = D Pp^-1, row by row (Pp is symmetric); dm = ms - mp.
    real G[NX * NX], dm[NX];
#pragma unroll
    for (int r = 0; r < NX; r++) {
        real w[NX];
#pragma unroll
        for (int c = 0; c < NX; c++) w[c] = D[r * NX + c];
        chol_solve<NX>(L, il, w);
#pragma unroll
        for (int c = 0; c < NX; c++) G[r * NX + c] = w[c];
        dm[r] = ms[r] - mp[r];
    }
#pragma unroll
    for (int r = 0; r < NX; r++) {
        real v = (real)0;
#pragma unroll
        for (int c = 0; c < NX; c++) v += G[r * NX + c] * dm[c];
        ms[r] = m[r] + v;
    }
    // Ps = P + G (Ps - Pp) G^T: (Ps - Pp) through the map G.
    real dP[NX * NX], E[NX * NX], GdG[NX * NX];
#pragma unroll
    for (int i = 0; i < NX * NX; i++) dP[i] = Ps[i] - Pp[i];
    through<NX>(dP, G, E, GdG);
#pragma unroll
    for (int i = 0; i < NX * NX; i++) Ps[i] = P[i] + GdG[i];
    symmetrize<NX>(Ps);
    return true;
}

// Step k's moments in the kernels' layout [T][NX][B], [T][NX * NX][B].
__device__ __forceinline__ void load_moments(const real* __restrict__ mean, const real* __restrict__ cov, int k,
                                             long long B, int b, real* m, real* P) {
#pragma unroll
    for (int i = 0; i < NX; i++) m[i] = mean[((long long)k * NX + i) * B + b];
#pragma unroll
    for (int i = 0; i < NX * NX; i++) P[i] = cov[((long long)k * NX * NX + i) * B + b];
}
__device__ __forceinline__ void store_moments(real* __restrict__ mean, real* __restrict__ cov, int k, long long B,
                                              int b, const real* m, const real* P) {
#pragma unroll
    for (int i = 0; i < NX; i++) mean[((long long)k * NX + i) * B + b] = m[i];
#pragma unroll
    for (int i = 0; i < NX * NX; i++) cov[((long long)k * NX * NX + i) * B + b] = P[i];
}

// An affine Gaussian approximation g(x) ~ A x + c + N(0, W) of the model's f (D = NX) or
// h (D = NY) about (m, P) (nonlinear/iterated.rs `linearise`): the Jacobian at m (the
// EKF and IEKF: W = 0), or statistical linear regression on the sigma points of (m, P)
// (A = C^T P^-1, c = ybar - A m, W = Pyy - A P A^T). False when P has no factor (the CPU
// falls back to a pseudo-inverse where P is only semi-definite; the GPU reports it).
template <int D, bool MEASURE>
__device__ __forceinline__ bool linearise(const real* m, const real* P, real* A, real* c, real* W) {
#if SIGMA
    real ybar[D], Pyy[D * D], C[NX * D];
    if (!transform<D, MEASURE, 0>(m, P, ybar, Pyy, C)) return false;
    real L[NX * NX], il[NX];
    if (!chol_pd<NX>(P, L, il)) return false;
#pragma unroll
    for (int r = 0; r < D; r++) {
        real w[NX];
#pragma unroll
        for (int i = 0; i < NX; i++) w[i] = C[i * D + r];
        chol_solve<NX>(L, il, w);
#pragma unroll
        for (int i = 0; i < NX; i++) A[r * NX + i] = w[i];
    }
    // W = Pyy - A P A^T, c = ybar - A m.
    real E[NX * D], APA[D * D];
    through<D>(P, A, E, APA);
#pragma unroll
    for (int r = 0; r < D; r++) {
        real v = ybar[r];
#pragma unroll
        for (int i = 0; i < NX; i++) v -= A[r * NX + i] * m[i];
        c[r] = v;
    }
#pragma unroll
    for (int i = 0; i < D * D; i++) W[i] = Pyy[i] - APA[i];
    symmetrize<D>(W);
#else
    real o[D + D * NX];
    if (MEASURE) model_hjac<0>(m, o); else model_fjac<0>(m, o);
#pragma unroll
    for (int r = 0; r < D; r++) {
        real v = o[r];
#pragma unroll
        for (int i = 0; i < NX; i++) {
            A[r * NX + i] = o[D + r * NX + i];
            v -= o[D + r * NX + i] * m[i];
        }
        c[r] = v;
#pragma unroll
        for (int q = 0; q < D; q++) W[r * D + q] = (real)0;
    }
#endif
    return true;
}

// The prediction through f ~ A x + c + N(0, W) (about the previous pass's smoothed
// moments at k - 1, sm0 / sP0) of (m, P) in place, and D = P A^T.
__device__ __forceinline__ bool affine_predict(const real* sm0, const real* sP0, real* m, real* P, real* Dc) {
    real A[NX * NX], c[NX], W[NX * NX];
    if (!linearise<NX, false>(sm0, sP0, A, c, W)) return false;
    // D = P A^T, P = A D + Q + W, m = A m + c.
    real APA[NX * NX], mn[NX];
    through<NX>(P, A, Dc, APA);
#pragma unroll
    for (int i = 0; i < NX * NX; i++) P[i] = APA[i] + QM[i] + W[i];
    symmetrize<NX>(P);
#pragma unroll
    for (int r = 0; r < NX; r++) {
        real v = (real)0;
#pragma unroll
        for (int i = 0; i < NX; i++) v += A[r * NX + i] * m[i];
        mn[r] = v + c[r];
    }
#pragma unroll
    for (int r = 0; r < NX; r++) m[r] = mn[r];
    return true;
}

// The RTS smoother's backward pass of one track over its filtered moments (fmean,
// fcov) into (smean, scov), which may be the same arrays (in place): pass 0 predicts as
// the filter does; a later pass of the iterated smoothers through the affine model
// linearised about the previous pass's smoothed moments, still in (smean, scov) at step
// k when step k is smoothed. Returns 0, or 3 (k + 1) + (0: a P at k has no factor; 2:
// the predicted P at k is not positive definite).
__device__ __forceinline__ int rts_backward(const real* fmean, const real* fcov, real* smean, real* scov,
                                            long long B, int b, int steps, int pass) {
    real ms[NX], Ps[NX * NX];
    load_moments(fmean, fcov, steps - 1, B, b, ms, Ps);
    store_moments(smean, scov, steps - 1, B, b, ms, Ps);
    for (int k = steps - 2; k >= 0; k--) {
        real m[NX], P[NX * NX], mp[NX], Pp[NX * NX], Dc[NX * NX];
        load_moments(fmean, fcov, k, B, b, m, P);
#pragma unroll
        for (int i = 0; i < NX; i++) mp[i] = m[i];
#pragma unroll
        for (int i = 0; i < NX * NX; i++) Pp[i] = P[i];
        bool ok;
        if (pass == 0) {
            ok = predict_d<0>(mp, Pp, Dc);
        } else {
            real sm0[NX], sP0[NX * NX];
            load_moments(smean, scov, k, B, b, sm0, sP0);
            ok = affine_predict(sm0, sP0, mp, Pp, Dc);
        }
        if (!ok) return 3 * (k + 1);
        if (!rts_step(m, P, mp, Pp, Dc, ms, Ps)) return 3 * (k + 2) + 2;
        store_moments(smean, scov, k, B, b, ms, Ps);
    }
    return 0;
}

// The RTS smoother of each track, in place over the filter's outputs in nl_filter's
// layout (rts_backward's pass 0). err [B] is 0 or rts_backward's code.
extern "C" __global__ void __launch_bounds__(128) nl_rts(real* __restrict__ mean, real* __restrict__ cov,
                                                         int* __restrict__ err, int nb, int steps) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    err[b] = rts_backward(mean, cov, mean, cov, nb, b, steps, 0);
}

// The iterated smoothers (nonlinear/iterated.rs): pass 1 the filter (fmean, fcov, ll)
// and its RTS smoother (smean, scov); each later pass linearises every f and h about the
// previous pass's smoothed moments (still in smean, scov: the forward pass only reads
// them, and the backward pass reads step k's before it writes step k) and runs the
// Kalman filter and RTS smoother of that affine model. err [B] is 0, or 3 (k + 1) +
// (0: a P has no factor; 1: S is not positive definite; 2: the predicted P is not).
extern "C" __global__ void __launch_bounds__(128) nl_iterated(const real* __restrict__ z, real* __restrict__ fmean,
                                                              real* __restrict__ fcov, real* __restrict__ ll,
                                                              real* __restrict__ smean, real* __restrict__ scov,
                                                              int* __restrict__ err, int nb, int steps, int passes) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    const long long B = nb;
    int fail = 0;
    for (int pass = 0; pass < passes && !fail; pass++) {
        // Forward: the filter (pass 0) or the affine model's Kalman filter.
        real m[NX], P[NX * NX];
#pragma unroll
        for (int i = 0; i < NX; i++) m[i] = X0[i];
#pragma unroll
        for (int i = 0; i < NX * NX; i++) P[i] = P00[i];
        for (int k = 0; k < steps; k++) {
            if (k > 0) {
                bool ok;
                if (pass == 0) {
                    ok = predict<0>(m, P);
                } else {
                    real sm0[NX], sP0[NX * NX], Dc[NX * NX];
                    load_moments(smean, scov, k - 1, B, b, sm0, sP0);
                    ok = affine_predict(sm0, sP0, m, P, Dc);
                }
                // The filter's prediction fails at step k; the affine model's at the
                // linearisation about step k - 1 (as on the CPU).
                if (!ok) {
                    fail = pass == 0 ? 3 * (k + 1) : 3 * k;
                    break;
                }
            }
            real zk[NY];
            const bool missing = load_z(z, k, B, b, zk);
            real l = (real)0;
            if (!missing) {
                int u;
                if (pass == 0) {
                    u = update<0>(zk, m, P, &l);
                } else {
                    // h ~ H x + c + N(0, W) about the previous pass's smoothed moments.
                    real sm[NX], sP[NX * NX], H[NY * NX], c[NY], W[NY * NY];
                    load_moments(smean, scov, k, B, b, sm, sP);
                    if (!linearise<NY, true>(sm, sP, H, c, W)) {
                        u = 1;
                    } else {
                        real y[NY];
#pragma unroll
                        for (int r = 0; r < NY; r++) {
                            real v = zk[r] - c[r];
#pragma unroll
                            for (int i = 0; i < NX; i++) v -= H[r * NX + i] * m[i];
                            y[r] = v;
                        }
#pragma unroll
                        for (int a = 0; a < NANG; a++) y[k_ang(a)] = k_wrap(y[k_ang(a)]);
                        // C = P H^T, S = H C + R + W.
                        real C[NX * NY], S[NY * NY];
                        through<NY>(P, H, C, S);
#pragma unroll
                        for (int i = 0; i < NY * NY; i++) S[i] += RM[i] + W[i];
                        u = moment_update(m, P, y, S, C, &l) ? 0 : 2;
                    }
                }
                if (u) {
                    fail = 3 * (k + 1) + (u - 1);
                    break;
                }
            }
            store_moments(fmean, fcov, k, B, b, m, P);
            ll[(long long)k * B + b] = l;
        }
        if (fail) break;
        // Backward: the RTS smoother of the pass's model into smean / scov.
        fail = rts_backward(fmean, fcov, smean, scov, B, b, steps, pass);
    }
    err[b] = fail;
}

// out [C][R] = in [R][C]: a tiled transpose through shared memory, so that both the reads
// and the writes of a warp are contiguous (the host's [B][T][...] to and from the
// kernel's structure of arrays).
extern "C" __global__ void __launch_bounds__(256) nl_transpose(const real* __restrict__ in, real* __restrict__ out,
                                                               long long R, long long C) {
    __shared__ real tile[32][33];
    const long long c0 = (long long)blockIdx.x * 32;
    for (long long r0 = (long long)blockIdx.y * 32; r0 < R; r0 += (long long)gridDim.y * 32) {
        for (int ty = threadIdx.y; ty < 32; ty += blockDim.y) {
            const long long r = r0 + ty, c = c0 + threadIdx.x;
            if (r < R && c < C) tile[ty][threadIdx.x] = in[r * C + c];
        }
        __syncthreads();
        for (int ty = threadIdx.y; ty < 32; ty += blockDim.y) {
            const long long c = c0 + ty, r = r0 + threadIdx.x;
            if (r < R && c < C) out[c * R + r] = tile[threadIdx.x][ty];
        }
        __syncthreads();
    }
}

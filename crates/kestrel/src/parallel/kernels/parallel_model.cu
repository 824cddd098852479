// Building the elements from the model and the measurements, and reading the moments
// back out (Sarkka & Garcia-Fernandez, eqs. 43-45, 47, 49-50, 52, 25-26), one thread per
// step. kestrel's step 0 is the paper's k = 1 element with the prior in place of the
// predicted moments; a NaN in a measurement makes that step's element a bare prediction.
// Batched launches: blockIdx.y is the sequence (track); z, elements and outputs of the
// sequences lie one after the other, the model and the prior are shared.

SCAN_KERNELS(FilterOp, pf)
SCAN_KERNELS(SmoothOp, ps)

#define LN_2PI_ ((real)1.8378770664093454835606594728112)

// Step k's model (the one set of a time-invariant model), loaded in whole blocks (ld_block).
__device__ __forceinline__ StepM step_at(const StepM* st, int varying, long long k) {
    StepM m;
    ld_block<(int)(sizeof(StepM) / sizeof(real))>(reinterpret_cast<const real*>(st + (varying ? k : 0)), reinterpret_cast<real*>(&m));
    return m;
}

__device__ __forceinline__ bool missing(const real* z) {
    bool m = false;
#pragma unroll
    for (int a = 0; a < NY; ++a) m |= nan_(z[a]);
    return m;
}

// xp = F x + u and V = F P: the first half of a prediction (kf_predict, and the
// smoothing elements' gain).
__device__ __forceinline__ void predict_parts(const StepM& m, const real* x, const real* P, real xp[NX], real V[NX2]) {
#pragma unroll
    for (int i = 0; i < NX; ++i) {
        real s = m.u[i];
#pragma unroll
        for (int l = 0; l < NX; ++l) s += m.F[i * NX + l] * x[l];
        xp[i] = s;
#pragma unroll
        for (int j = 0; j < NX; ++j) {
            real t = 0;
#pragma unroll
            for (int l = 0; l < NX; ++l) t += m.F[i * NX + l] * P[l * NX + j];
            V[i * NX + j] = t;
        }
    }
}

__device__ __forceinline__ void kf_predict(real x[NX], real P[NX2], const StepM& m) {
    real FP[NX2], xn[NX];
    predict_parts(m, x, P, xn, FP);
#pragma unroll
    for (int i = 0; i < NX; ++i) {
        x[i] = xn[i];
#pragma unroll
        for (int j = 0; j <= i; ++j) {
            real s = m.Q[i * NX + j];
#pragma unroll
            for (int l = 0; l < NX; ++l) s += FP[i * NX + l] * m.F[j * NX + l];
            P[i * NX + j] = s; P[j * NX + i] = s;
        }
    }
}

// Update with z (no NaN); false when S is not positive definite. ll receives
// log N(z; H x + d, S).
__device__ __forceinline__ bool kf_update(real x[NX], real P[NX2], const StepM& m, const real* z, real& ll) {
    real S[NY * NY], W[NY * NX], y[NY];
#pragma unroll
    for (int a = 0; a < NY; ++a) {
        real s = z[a] - m.d[a];
#pragma unroll
        for (int l = 0; l < NX; ++l) s -= m.H[a * NX + l] * x[l];
        y[a] = s;
#pragma unroll
        for (int j = 0; j < NX; ++j) {
            real t = 0;
#pragma unroll
            for (int l = 0; l < NX; ++l) t += m.H[a * NX + l] * P[l * NX + j];
            W[a * NX + j] = t;
        }
    }
#pragma unroll
    for (int a = 0; a < NY; ++a) {
#pragma unroll
        for (int b = 0; b <= a; ++b) {
            real s = m.R[a * NY + b];
#pragma unroll
            for (int l = 0; l < NX; ++l) s += m.H[a * NX + l] * W[b * NX + l];
            S[a * NY + b] = s; S[b * NY + a] = s;
        }
    }
    if (!chol<NY>(S)) return false;
    lsolve<NY, NX>(S, W);
    lsolve<NY, 1>(S, y);
    real logdet = 0, maha = 0;
#pragma unroll
    for (int a = 0; a < NY; ++a) { logdet += log(S[a * NY + a]); maha += y[a] * y[a]; }
#pragma unroll
    for (int i = 0; i < NX; ++i) {
        real s = 0;
#pragma unroll
        for (int a = 0; a < NY; ++a) s += W[a * NX + i] * y[a];
        x[i] += s;
    }
#pragma unroll
    for (int i = 0; i < NX; ++i) {
#pragma unroll
        for (int j = 0; j <= i; ++j) {
            real s = 0;
#pragma unroll
            for (int a = 0; a < NY; ++a) s += W[a * NX + i] * W[a * NX + j];
            real v = P[i * NX + j] - s;
            P[i * NX + j] = v; P[j * NX + i] = v;
        }
    }
    ll = -(real)0.5 * ((real)NY * LN_2PI_ + maha) - logdet;
    return true;
}

__device__ __forceinline__ void fe_nan(FE& o) {
#pragma unroll
    for (int i = 0; i < NX2; ++i) { o.A[i] = nanv(); o.C[i] = nanv(); o.J[i] = nanv(); }
#pragma unroll
    for (int i = 0; i < NX; ++i) { o.b[i] = nanv(); o.eta[i] = nanv(); }
}

// One step of the Kalman filter conditioned on the state before a run of steps: o holds
// the product e_lo x ... x e_{k-1} of filtering elements, i.e. x_{k-1} | x_{lo-1}, z_lo..k-1
// ~ N(A x_{lo-1} + b, C) and the information (eta, J) of z_lo..k-1 about x_{lo-1}; after
// the call it holds e_lo x ... x e_k for step k's model m and measurement zk. Predict
// (A, b, C) through F, Q, u; then with S = H C H^T + R = L L^T, the whitened W = L^{-1} H C,
// G = L^{-1} H A and e = L^{-1} (z - d - H b): b += W^T e, A -= W^T G, C -= W^T W,
// eta += G^T e, J += G^T G. From the identity this is the element of step k (eqs. 43-45);
// from a product it is that product times the element, at about a third of the operator's
// arithmetic (no NX x NX solve), so the fused reduce walks its chunk with it.
__device__ __forceinline__ void fe_step(FE& o, const StepM& m, const real* zk) {
    {
        real FA[NX2], FC[NX2], bn[NX];
#pragma unroll
        for (int i = 0; i < NX; ++i) {
            real s = m.u[i];
#pragma unroll
            for (int l = 0; l < NX; ++l) s += m.F[i * NX + l] * o.b[l];
            bn[i] = s;
#pragma unroll
            for (int j = 0; j < NX; ++j) {
                real a = 0, c = 0;
#pragma unroll
                for (int l = 0; l < NX; ++l) { a += m.F[i * NX + l] * o.A[l * NX + j]; c += m.F[i * NX + l] * o.C[l * NX + j]; }
                FA[i * NX + j] = a;
                FC[i * NX + j] = c;
            }
        }
#pragma unroll
        for (int i = 0; i < NX; ++i) {
            o.b[i] = bn[i];
#pragma unroll
            for (int j = 0; j < NX; ++j) o.A[i * NX + j] = FA[i * NX + j];
#pragma unroll
            for (int j = 0; j <= i; ++j) {
                real s = (real)0.5 * (m.Q[i * NX + j] + m.Q[j * NX + i]);
#pragma unroll
                for (int l = 0; l < NX; ++l) s += FC[i * NX + l] * m.F[j * NX + l];
                o.C[i * NX + j] = s; o.C[j * NX + i] = s;
            }
        }
    }
    if (missing(zk)) return;
    real S[NY * NY], W[NY * NX], G[NY * NX], e[NY];
#pragma unroll
    for (int a = 0; a < NY; ++a) {
        real s = zk[a] - m.d[a];
#pragma unroll
        for (int j = 0; j < NX; ++j) {
            real w = 0, g = 0;
#pragma unroll
            for (int l = 0; l < NX; ++l) { w += m.H[a * NX + l] * o.C[l * NX + j]; g += m.H[a * NX + l] * o.A[l * NX + j]; }
            W[a * NX + j] = w;
            G[a * NX + j] = g;
            s -= m.H[a * NX + j] * o.b[j];
        }
        e[a] = s;
    }
#pragma unroll
    for (int a = 0; a < NY; ++a) {
#pragma unroll
        for (int b = 0; b <= a; ++b) {
            real s = (real)0.5 * (m.R[a * NY + b] + m.R[b * NY + a]);
#pragma unroll
            for (int l = 0; l < NX; ++l) s += W[a * NX + l] * m.H[b * NX + l];
            S[a * NY + b] = s; S[b * NY + a] = s;
        }
    }
    if (!chol<NY>(S)) { fe_nan(o); return; }
    lsolve<NY, NX>(S, W);
    lsolve<NY, NX>(S, G);
    lsolve<NY, 1>(S, e);
#pragma unroll
    for (int r = 0; r < NX; ++r) {
        real sb = 0, se = 0;
#pragma unroll
        for (int q = 0; q < NY; ++q) { sb += W[q * NX + r] * e[q]; se += G[q * NX + r] * e[q]; }
        o.b[r] += sb;
        o.eta[r] += se;
#pragma unroll
        for (int c = 0; c < NX; ++c) {
            real sa = 0;
#pragma unroll
            for (int q = 0; q < NY; ++q) sa += W[q * NX + r] * G[q * NX + c];
            o.A[r * NX + c] -= sa;
        }
#pragma unroll
        for (int c = 0; c <= r; ++c) {
            real sc = 0, sj = 0;
#pragma unroll
            for (int q = 0; q < NY; ++q) { sc += W[q * NX + r] * W[q * NX + c]; sj += G[q * NX + r] * G[q * NX + c]; }
            real cv = o.C[r * NX + c] - sc, jv = o.J[r * NX + c] + sj;
            o.C[r * NX + c] = cv; o.C[c * NX + r] = cv;
            o.J[r * NX + c] = jv; o.J[c * NX + r] = jv;
        }
    }
}

// The filtering element of step k (eqs. 43-45; step 0: eq. 44 with the prior) of the
// sequence whose measurements start at z.
__device__ __forceinline__ void pf_element(const StepM* st, int varying, const real* prior, const real* z, long long k, FE& o) {
    const real* zk = z + k * NY;
    const StepM& m = step_at(st, varying, k);
    if (k == 0) {
        real x[NX], P[NX2];
#pragma unroll
        for (int i = 0; i < NX; ++i) x[i] = prior[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) P[i] = prior[NX + i];
        real ll;
        bool ok = missing(zk) || kf_update(x, P, m, zk, ll);
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.A[i] = 0; o.C[i] = P[i]; o.J[i] = 0; }
#pragma unroll
        for (int i = 0; i < NX; ++i) { o.b[i] = x[i]; o.eta[i] = 0; }
        if (!ok) fe_nan(o);
        return;
    }
    FilterOp::identity(o);
    fe_step(o, m, zk);
}

extern "C" __global__ void pf_build(const StepM* st, int varying, const real* prior, const real* z, long long T, FE* el) {
    build_elements<StepM, FE, pf_element>(st, varying, prior, z, T, el);
}

// x_{k|k} = b_k, P_{k|k} = C_k (eq. 47), and the step's log-likelihood from the
// prediction of the filtered moments of step k-1 (the prior at step 0).
extern "C" __global__ void pf_extract(const FE* el, const StepM* st, int varying, const real* prior, const real* z, long long T,
                                      real* mean, real* cov, real* ll) {
    long long k = gtid();
    if (k >= T) return;
    el += bat() * T;
    to_sequence(T, z, mean, cov, ll);
#pragma unroll
    for (int i = 0; i < NX; ++i) mean[k * NX + i] = el[k].b[i];
#pragma unroll
    for (int i = 0; i < NX2; ++i) cov[k * NX2 + i] = el[k].C[i];
    const real* zk = z + k * NY;
    if (missing(zk)) { ll[k] = 0; return; }
    real x[NX], P[NX2];
    const StepM& m = step_at(st, varying, k);
    if (k == 0) {
#pragma unroll
        for (int i = 0; i < NX; ++i) x[i] = prior[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) P[i] = prior[NX + i];
    } else {
#pragma unroll
        for (int i = 0; i < NX; ++i) x[i] = el[k - 1].b[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) P[i] = el[k - 1].C[i];
        kf_predict(x, P, m);
    }
    real l;
    ll[k] = kf_update(x, P, m, zk, l) ? l : nanv();
}

// The parts of step k's smoother gain from the filtered (x, P) of step k and the model
// of step k + 1: xp = F x + u, V = F P, and Pp = L, the lower Cholesky factor of
// P_{k+1|k} = (Q + Q^T) / 2 + V F^T; false where that is not positive definite.
__device__ __forceinline__ bool gain_parts(const StepM& m, const real* x, const real* P, real xp[NX], real V[NX2], real Pp[NX2]) {
    predict_parts(m, x, P, xp, V);
#pragma unroll
    for (int i = 0; i < NX; ++i) {
#pragma unroll
        for (int j = 0; j <= i; ++j) {
            real s = (real)0.5 * (m.Q[i * NX + j] + m.Q[j * NX + i]);
#pragma unroll
            for (int l = 0; l < NX; ++l) s += V[i * NX + l] * m.F[j * NX + l];
            Pp[i * NX + j] = s; Pp[j * NX + i] = s;
        }
    }
    return chol<NX>(Pp);
}

// The smoothing element of step k (eqs. 49-50) from the filtered moments of the
// sequence (mean, cov) of T steps.
__device__ __forceinline__ void ps_element(const StepM* st, int varying, const real* mean, const real* cov, long long T, long long k, SE& o) {
    real x[NX], P[NX2];
    ld_block<NX>(mean + k * NX, x);
    ld_block<NX2>(cov + k * NX2, P);
    if (k == T - 1) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.E[i] = 0; o.L[i] = P[i]; }
#pragma unroll
        for (int i = 0; i < NX; ++i) o.g[i] = x[i];
        return;
    }
    real V[NX2], Pp[NX2], xp[NX];
    if (!gain_parts(step_at(st, varying, k + 1), x, P, xp, V, Pp)) {
#pragma unroll
        for (int i = 0; i < NX2; ++i) { o.E[i] = nanv(); o.L[i] = nanv(); }
#pragma unroll
        for (int i = 0; i < NX; ++i) o.g[i] = nanv();
        return;
    }
    lsolve<NX, NX>(Pp, V);  // V = L^{-1} F P
#pragma unroll
    for (int i = 0; i < NX; ++i) {
#pragma unroll
        for (int j = 0; j <= i; ++j) {
            real s = 0;
#pragma unroll
            for (int q = 0; q < NX; ++q) s += V[q * NX + i] * V[q * NX + j];
            real v = (real)0.5 * (P[i * NX + j] + P[j * NX + i]) - s;
            o.L[i * NX + j] = v; o.L[j * NX + i] = v;
        }
    }
    ltsolve<NX, NX>(Pp, V);  // V = E^T
#pragma unroll
    for (int i = 0; i < NX; ++i) {
        real s = x[i];
#pragma unroll
        for (int j = 0; j < NX; ++j) { o.E[i * NX + j] = V[j * NX + i]; s -= V[j * NX + i] * xp[j]; }
        o.g[i] = s;
    }
}

// One step of the RTS smoother by the smoothing element e of step k: from the smoothed
// (xs, Ps) of step k + 1 to those of step k, x = E x' + g, P = E P' E^T + L (symmetrized);
// at the last step (last) the element's (g, L) themselves.
__device__ __forceinline__ void rts_step(const SE& e, bool last, real xs[NX], real Ps[NX2]) {
    if (last) {
#pragma unroll
        for (int i = 0; i < NX; ++i) xs[i] = e.g[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) Ps[i] = e.L[i];
        return;
    }
    real xn[NX], EP[NX2];
#pragma unroll
    for (int r = 0; r < NX; ++r) {
        real s = e.g[r];
#pragma unroll
        for (int c = 0; c < NX; ++c) {
            s += e.E[r * NX + c] * xs[c];
            real t = 0;
#pragma unroll
            for (int l = 0; l < NX; ++l) t += e.E[r * NX + l] * Ps[l * NX + c];
            EP[r * NX + c] = t;
        }
        xn[r] = s;
    }
#pragma unroll
    for (int r = 0; r < NX; ++r) {
        xs[r] = xn[r];
#pragma unroll
        for (int c = 0; c <= r; ++c) {
            real s1 = 0, s2 = 0;
#pragma unroll
            for (int l = 0; l < NX; ++l) { s1 += EP[r * NX + l] * e.E[c * NX + l]; s2 += EP[c * NX + l] * e.E[r * NX + l]; }
            real v = (real)0.5 * (s1 + s2) + (real)0.5 * (e.L[r * NX + c] + e.L[c * NX + r]);
            Ps[r * NX + c] = v; Ps[c * NX + r] = v;
        }
    }
}

// Smoothing elements from the filtered moments.
extern "C" __global__ void ps_build(const StepM* st, int varying, const real* mean, const real* cov, long long T, SE* se) {
    long long k = gtid();
    if (k >= T) return;
    mean += bat() * T * NX;
    cov += bat() * T * NX2;
    se += bat() * T;
    SE o;
    ps_element(st, varying, mean, cov, T, k, o);
    se[k] = o;
}

// x_{k|T} = g_k, P_{k|T} = L_k (eq. 52).
extern "C" __global__ void ps_extract(const SE* se, long long T, real* mean, real* cov) {
    long long k = gtid();
    if (k >= T) return;
    se += bat() * T;
    mean += bat() * T * NX;
    cov += bat() * T * NX2;
#pragma unroll
    for (int i = 0; i < NX; ++i) mean[k * NX + i] = se[k].g[i];
#pragma unroll
    for (int i = 0; i < NX2; ++i) cov[k * NX2 + i] = se[k].L[i];
}

// back_k = a_{k+1} for k < T-1, the identity at T-1 (eq. 54).
extern "C" __global__ void tf_shift(const FE* el, FE* back, long long T) {
    long long k = gtid();
    if (k >= T) return;
    el += bat() * T;
    back += bat() * T;
    if (k + 1 < T) back[k] = el[k + 1];
    else { FE e; FilterOp::identity(e); back[k] = e; }
}

// Eqs. 25-26: P_{k|T} = (I + P J)^{-1} P, x_{k|T} = (I + P J)^{-1} (x + P eta), with
// (eta, J) of the backward element bk.
__device__ __forceinline__ void tf_merge(const FE& bk, const real* xg, const real* Pg, real* sm, real* sc) {
    const int W = NX + 1;
    real M[NX2], B[NX * W], x[NX], P[NX2];
    ld_block<NX>(xg, x);
    ld_block<NX2>(Pg, P);
#pragma unroll
    for (int r = 0; r < NX; ++r) {
        real s = x[r];
#pragma unroll
        for (int c = 0; c < NX; ++c) {
            real t = (r == c) ? (real)1 : (real)0;
#pragma unroll
            for (int l = 0; l < NX; ++l) t += P[r * NX + l] * bk.J[l * NX + c];
            M[r * NX + c] = t;
            B[r * W + c] = P[r * NX + c];
            s += P[r * NX + c] * bk.eta[c];
        }
        B[r * W + NX] = s;
    }
    bool ok = solve_nx<W>(M, B);
#pragma unroll
    for (int r = 0; r < NX; ++r) {
        x[r] = ok ? B[r * W + NX] : nanv();
#pragma unroll
        for (int c = 0; c < NX; ++c) P[r * NX + c] = ok ? (real)0.5 * (B[r * W + c] + B[c * W + r]) : nanv();
    }
    st_block<NX>(sm, x);
    st_block<NX2>(sc, P);
}

extern "C" __global__ void tf_combine(const FE* back, const real* mean, const real* cov, long long T, real* smean, real* scov) {
    long long k = gtid();
    if (k >= T) return;
    back += bat() * T;
    mean += bat() * T * NX;
    cov += bat() * T * NX2;
    smean += bat() * T * NX;
    scov += bat() * T * NX2;
    tf_merge(back[k], mean + k * NX, cov + k * NX2, smean + k * NX, scov + k * NX2);
}

// The sequential Kalman filter of one sequence of T steps in the calling thread: prior
// update at step 0, then predict-and-update; a covariance that fails its Cholesky leaves
// NaN in that step's log-likelihood.
__device__ __forceinline__ void kf_run(const StepM* st, int varying, const real* prior, const real* z, long long T, real* mean, real* cov,
                                       real* ll) {
    real x[NX], P[NX2];
#pragma unroll
    for (int i = 0; i < NX; ++i) x[i] = prior[i];
#pragma unroll
    for (int i = 0; i < NX2; ++i) P[i] = prior[NX + i];
    for (long long k = 0; k < T; ++k) {
        const StepM& m = step_at(st, varying, k);
        if (k > 0) kf_predict(x, P, m);
        const real* zk = z + k * NY;
        real l = 0;
        if (!missing(zk) && !kf_update(x, P, m, zk, l)) l = nanv();
        ll[k] = l;
#pragma unroll
        for (int i = 0; i < NX; ++i) mean[k * NX + i] = x[i];
#pragma unroll
        for (int i = 0; i < NX2; ++i) cov[k * NX2 + i] = P[i];
    }
}

// The sequential Kalman filter in one thread (the paper's speed-up baseline).
extern "C" __global__ void kf_seq(const StepM* st, int varying, const real* prior, const real* z, long long T, real* mean, real* cov, real* ll) {
    if (gtid() != 0) return;
    kf_run(st, varying, prior, z + bat() * T * NY, T, mean + bat() * T * NX, cov + bat() * T * NX2, ll + bat() * T);
}

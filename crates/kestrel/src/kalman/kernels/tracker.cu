// The per-step API on the GPU (BatchTracker): the state of every target stays on the
// GPU in structure-of-arrays layout (x [NX][B], packed P [NP][B]), so each call reads
// and writes whole lines; measurements, masks, noise and control inputs come in the
// host layout [B][..]. `live[b]` is 1 for a slot that holds a target. Prediction and
// update are separate kernels, so the host can gate and associate in between; the
// predicted measurement H x + d ([NY][B]) and S (packed [NYP][B]) of every live slot are
// written by tracker_update (and by tracker_measure without an update).

// F and Q of one axis of a kinematic model over dt (model/builders.rs, axis_block),
// computed in double and rounded once, as on the CPU. Only products and quotients: no
// contraction can change them.
__device__ __forceinline__ void kin_block(int order, double dt, double q, double* fb, double* qb) {
    for (int i = 0; i < 9; ++i) {
        fb[i] = 0.0;
        qb[i] = 0.0;
    }
    if (order == 2) {
        fb[0] = 1.0;
        fb[1] = dt;
        fb[4] = 1.0;
        qb[0] = dt * dt * dt / 3.0 * q;
        qb[1] = dt * dt / 2.0 * q;
        qb[3] = dt * dt / 2.0 * q;
        qb[4] = dt * q;
    } else {
        fb[0] = 1.0;
        fb[1] = dt;
        fb[2] = dt * dt / 2.0;
        fb[4] = 1.0;
        fb[5] = dt;
        fb[8] = 1.0;
        // The powers as the CPU's powi forms them (binary powering): d4 = d2 d2, d5 = dt d4.
        const double d2 = dt * dt, d3 = dt * d2, d4 = d2 * d2, d5 = dt * d4;
        qb[0] = d5 / 20.0 * q;
        qb[1] = d4 / 8.0 * q;
        qb[2] = d3 / 6.0 * q;
        qb[3] = d4 / 8.0 * q;
        qb[4] = d3 / 3.0 * q;
        qb[5] = d2 / 2.0 * q;
        qb[6] = d3 / 6.0 * q;
        qb[7] = d2 / 2.0 * q;
        qb[8] = dt * q;
    }
}

// Prediction with F, Q and the offset u given per thread (intervals, control inputs).
// The per-step kernels round exactly as the CPU's per-step API (kalman/lanes.rs,
// predict_fixed and predict_lanes; kalman/step.rs, predict_parts, has the same order):
// the same order of every sum, zero entries of F skipped (the same sums when finite),
// and no fused multiply-adds (kmul<true>), so that in f32 as in f64 the GPU's state is
// the CPU's bit for bit, whatever cancellation the update brings.
__device__ __forceinline__ void kf_predict_fq(const real* F, const real* Q, const real* u, real* x, real* P) {
    real xn[NX];
    real Pn[NP];
    UNROLL for (int i = 0; i < NX; ++i) {
        real fp[NX];  // row i of F P
        UNROLL for (int j = 0; j < NX; ++j) {
            real t = (real)0;
            UNROLL for (int l = 0; l < NX; ++l) if (F[i * NX + l] != (real)0) t += kmul<true>(F[i * NX + l], P[pk(l, j)]);
            fp[j] = t;
        }
        UNROLL for (int j = 0; j <= i; ++j) {
            real t = Q[i * NX + j];
            UNROLL for (int l = 0; l < NX; ++l) if (F[j * NX + l] != (real)0) t += kmul<true>(fp[l], F[j * NX + l]);
            Pn[pk(i, j)] = t;
        }
    }
    UNROLL for (int i = 0; i < NX; ++i) {
        real s = u[i];
        UNROLL for (int l = 0; l < NX; ++l) if (F[i * NX + l] != (real)0) s += kmul<true>(F[i * NX + l], x[l]);
        xn[i] = s;
    }
    UNROLL for (int i = 0; i < NX; ++i) x[i] = xn[i];
    UNROLL for (int p = 0; p < NP; ++p) P[p] = Pn[p];
}

// `kin_order` 0: the model's F and Q; 2 or 3: a kinematic model (kin_dims axes, white
// noise intensity kin_q) over dts[b] (or dt when dts is null). `ctrl` ([B][NX], may be
// null) is added to the model's u.
extern "C" __global__ void __launch_bounds__(128) tracker_predict(
    const __grid_constant__ ModelParams mp, real* __restrict__ xs, real* __restrict__ Ps,
    const unsigned char* __restrict__ live, int nb, const real* __restrict__ ctrl, const double* __restrict__ dts,
    double dt, int kin_order, double kin_q) {
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb || !live[b]) return;
    const long long B = nb;
    real x[NX];
    real P[NP];
    UNROLL for (int i = 0; i < NX; ++i) x[i] = xs[i * B + b];
    UNROLL for (int p = 0; p < NP; ++p) P[p] = Ps[p * B + b];
    {
        real F[NX * NX];
        real Q[NX * NX];
        real u[NX];
        if (kin_order == 0) {
            UNROLL for (int i = 0; i < NX * NX; ++i) {
                F[i] = MF(i / NX, i % NX);
                Q[i] = MQ(i / NX, i % NX);
            }
        } else {
            double fb[9], qb[9];
            kin_block(kin_order, dts != nullptr ? dts[b] : dt, kin_q, fb, qb);
            UNROLL for (int i = 0; i < NX; ++i) {
                UNROLL for (int j = 0; j < NX; ++j) {
                    const bool same = (i / kin_order) == (j / kin_order);
                    const int e = (i % kin_order) * 3 + (j % kin_order);
                    F[i * NX + j] = same ? (real)fb[e] : (real)0;
                    Q[i * NX + j] = same ? (real)qb[e] : (real)0;
                }
            }
        }
        UNROLL for (int i = 0; i < NX; ++i) u[i] = MU(i) + (ctrl != nullptr ? ctrl[b * NX + i] : (real)0);
        kf_predict_fq(F, Q, u, x, P);
    }
    UNROLL for (int i = 0; i < NX; ++i) xs[i * B + b] = x[i];
    UNROLL for (int p = 0; p < NP; ++p) Ps[p * B + b] = P[p];
}

// Measurement update of every live slot whose row of z has no NaN and whose mask (may
// be null) is set, with the model's R or rs[b] ([B][NY][NY], may be null). Every
// operation is the CPU per-step API's for this size (kf_correct with EXACT; the prelude's
// KS_LANE_ORDER says which of the CPU's two orders), so the state comes out as the CPU's
// bit for bit. Writes the predicted measurement and S of every live slot;
// `apply` 0 writes only those (tracker_measure). ll[b] is the update's predictive
// log-likelihood, 0 without a measurement.
__device__ __forceinline__ void update_slot(const ModelParams& mp, long long b, long long B, const real* __restrict__ z,
                                            const unsigned char* __restrict__ mask, const real* __restrict__ rs,
                                            real* __restrict__ xs, real* __restrict__ Ps, real* __restrict__ ll,
                                            real* __restrict__ zhat, real* __restrict__ Ss, bool apply,
                                            unsigned long long* err) {
    real x[NX];
    real P[NP];
    UNROLL for (int i = 0; i < NX; ++i) x[i] = xs[i * B + b];
    UNROLL for (int p = 0; p < NP; ++p) P[p] = Ps[p * B + b];
    real zk[NY];
    bool use = apply && (mask == nullptr || mask[b] != 0);
    UNROLL for (int a = 0; a < NY; ++a) zk[a] = use ? z[b * NY + a] : (real)0;
    use = use && !any_nan(zk);
    real y[NY];
    real hp[NY][NX];
    real S[NYP];
    real zh[NY];
    kf_innovation<true, KS_LANE_ORDER != 0>(mp, rs != nullptr ? rs + b * NY * NY : nullptr, zk, x, P, zh, y, hp, S);
    UNROLL for (int a = 0; a < NY; ++a) zhat[a * B + b] = zh[a];
    UNROLL for (int p = 0; p < NYP; ++p) Ss[p * B + b] = S[p];
    if (!use) {
        if (apply) ll[b] = (real)0;
        return;
    }
    real l;
    if (!kf_correct<true, KS_LANE_ORDER != 0>(S, y, hp, x, P, l)) {
        report(err, (unsigned long long)b);
        return;
    }
    ll[b] = l;
    UNROLL for (int i = 0; i < NX; ++i) xs[i * B + b] = x[i];
    UNROLL for (int p = 0; p < NP; ++p) Ps[p * B + b] = P[p];
}

extern "C" __global__ void __launch_bounds__(128) tracker_update(
    const __grid_constant__ ModelParams mp, const real* __restrict__ z, const unsigned char* __restrict__ mask,
    const real* __restrict__ rs, real* __restrict__ xs, real* __restrict__ Ps, real* __restrict__ ll,
    real* __restrict__ zhat, real* __restrict__ Ss, const unsigned char* __restrict__ live, int nb, int apply,
    unsigned long long* err) {
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb || !live[b]) return;
    update_slot(mp, b, nb, z, mask, rs, xs, Ps, ll, zhat, Ss, apply != 0, err);
}

// Writes the priors of the n slots listed in `slots`: x0s [n][NX], P0s [n][NX][NX] (full,
// row-major; the lower triangle is read), and marks them live.
extern "C" __global__ void tracker_set(const int* __restrict__ slots, int n, const real* __restrict__ x0s,
                                       const real* __restrict__ P0s, real* __restrict__ xs, real* __restrict__ Ps,
                                       real* __restrict__ ll, unsigned char* __restrict__ live, int nb) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long b = slots[i];
    const long long B = nb;
    UNROLL for (int k = 0; k < NX; ++k) xs[k * B + b] = x0s[(long long)i * NX + k];
    UNROLL for (int r = 0; r < NX; ++r) {
        UNROLL for (int c = 0; c <= r; ++c) Ps[pk(r, c) * B + b] = P0s[((long long)i * NX + r) * NX + c];
    }
    ll[b] = (real)0 / (real)0;
    live[b] = 1;
}

// Frees the slots listed in `slots` (their state becomes NaN).
extern "C" __global__ void tracker_remove(const int* __restrict__ slots, int n, real* __restrict__ xs,
                                          real* __restrict__ Ps, unsigned char* __restrict__ live, int nb) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long b = slots[i];
    const long long B = nb;
    const real nan = (real)0 / (real)0;
    UNROLL for (int k = 0; k < NX; ++k) xs[k * B + b] = nan;
    UNROLL for (int p = 0; p < NP; ++p) Ps[p * B + b] = nan;
    live[b] = 0;
}

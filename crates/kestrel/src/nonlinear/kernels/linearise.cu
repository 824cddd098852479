// The parallel iterated smoother's linearisation on the device (nonlinear/
// parallel_iterated.rs `linearised`): one track's affine time-varying model about its
// previous pass's smoothed moments, every step at once, written straight into the
// parallel family's per-step model records (parallel/cuda `DevModel`: F, u, Q, H, d, R,
// row-major, in the scan's precision `lin_out`), with the measurements' angles unwrapped
// about the linearisation's predictions. Compiled with `real` = double whatever the
// scan's precision, as the CPU linearises in f64 and rounds the model once.

// Scalars of one step's record: F [NX][NX], u [NX], Q [NX][NX], H [NY][NX], d [NY],
// R [NY][NY].
#define LIN_REC (2 * NX * NX + NX + NY * NX + NY + NY * NY)

// Thread k (< t): step k's record from the smoothed moments sm [t][NX], sc [t][NX][NX]
// and the measurements z [t][NY] (NaN = missing). Step k's transition is f linearised
// about step k - 1 (step 0's, unused by the filter, about step 0; the identity when the
// track has one step); its observation h linearised about step k (zeros and R where the
// step is missing). zu [t][NY] gets z with each angle component replaced by
// yhat + wrap(z - yhat), yhat = A m + c. err (initially INT_MAX) gets the lowest
// 2 k + (0: f, 1: h) whose moments have no Cholesky factor.
extern "C" __global__ void __launch_bounds__(128) nl_linearise_steps(const double* __restrict__ sm,
                                                                      const double* __restrict__ sc,
                                                                      const double* __restrict__ z,
                                                                      lin_out* __restrict__ steps,
                                                                      lin_out* __restrict__ zu,
                                                                      int* __restrict__ err, int t) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= t) return;
    lin_out* rec = steps + (long long)k * LIN_REC;
    lin_out* F = rec;
    lin_out* u = F + NX * NX;
    lin_out* Q = u + NX;
    lin_out* H = Q + NX * NX;
    lin_out* d = H + NY * NX;
    lin_out* R = d + NY;
    real m[NX], P[NX * NX];
    // The transition.
    if (t == 1) {
#pragma unroll
        for (int i = 0; i < NX * NX; i++) {
            F[i] = (lin_out)(i / NX == i % NX ? 1 : 0);
            Q[i] = (lin_out)QM[i];
        }
#pragma unroll
        for (int i = 0; i < NX; i++) u[i] = (lin_out)0;
    } else {
        const int j = k > 0 ? k - 1 : 0;
        load_moments(sm, sc, j, 1, 0, m, P);
        real A[NX * NX], c[NX], W[NX * NX];
        if (!linearise<NX, false>(m, P, A, c, W)) {
            atomicMin(err, 2 * j);
            return;
        }
#pragma unroll
        for (int i = 0; i < NX * NX; i++) {
            F[i] = (lin_out)A[i];
            Q[i] = (lin_out)(QM[i] + W[i]);
        }
#pragma unroll
        for (int i = 0; i < NX; i++) u[i] = (lin_out)c[i];
    }
    // The observation.
    real zk[NY];
    bool missing = false;
#pragma unroll
    for (int a = 0; a < NY; a++) {
        zk[a] = z[(long long)k * NY + a];
        missing |= isnan(zk[a]);
    }
    if (missing) {
#pragma unroll
        for (int i = 0; i < NY * NX; i++) H[i] = (lin_out)0;
#pragma unroll
        for (int a = 0; a < NY; a++) d[a] = (lin_out)0;
#pragma unroll
        for (int i = 0; i < NY * NY; i++) R[i] = (lin_out)RM[i];
    } else {
        load_moments(sm, sc, k, 1, 0, m, P);
        real A[NY * NX], c[NY], W[NY * NY];
        if (!linearise<NY, true>(m, P, A, c, W)) {
            atomicMin(err, 2 * k + 1);
            return;
        }
#pragma unroll
        for (int i = 0; i < NY * NX; i++) H[i] = (lin_out)A[i];
#pragma unroll
        for (int a = 0; a < NY; a++) d[a] = (lin_out)c[a];
#pragma unroll
        for (int i = 0; i < NY * NY; i++) R[i] = (lin_out)(RM[i] + W[i]);
#pragma unroll
        for (int a = 0; a < NANG; a++) {
            const int q = k_ang(a);
            // yhat as the CPU forms it: (A m) + c.
            real y = (real)0;
#pragma unroll
            for (int i = 0; i < NX; i++) y += A[q * NX + i] * m[i];
            y += c[q];
            zk[q] = y + k_wrap(zk[q] - y);
        }
    }
#pragma unroll
    for (int a = 0; a < NY; a++) zu[(long long)k * NY + a] = (lin_out)zk[a];
}

// out = in, widened to double: the scan's smoothed moments for the next pass's
// linearisation (n values).
extern "C" __global__ void __launch_bounds__(256) nl_widen(const lin_out* __restrict__ in, double* __restrict__ out,
                                                            long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (double)in[i];
}

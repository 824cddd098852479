// The interacting multiple model filter, one thread per track, every mode's moments in
// registers (nonlinear/imm.rs on the CPU): step 0 updates every mode from the prior with
// mu = MU0; each later step mixes (cbar_j = sum_i TR[i][j] mu_i, mixing weights
// TR[i][j] mu_i / cbar_j), predicts and updates every mode with its filter (predict<J>,
// update<J> of filter.cu through the launcher's predict_mode / update_mode), then
// mu_j = cbar_j L_j / c with c = sum_j cbar_j L_j (in log space), loglik = ln c; a missing
// step predicts only (mu = cbar, loglik 0). Outputs: the moment-matched mean and
// covariance and mu. Layouts as nl_filter's, and probs [T][NMODE][B].

// sum_i w_i N(m_i, P_i) moment-matched into (mo, Po): as the CPU's `mix`, terms of
// weight 0 left out of the covariance.
__device__ __forceinline__ void imm_mix(const real (*m)[NX], const real (*P)[NX * NX], const real* w, real* mo,
                                        real* Po) {
#pragma unroll
    for (int r = 0; r < NX; r++) mo[r] = (real)0;
#pragma unroll
    for (int i = 0; i < NMODE; i++)
#pragma unroll
        for (int r = 0; r < NX; r++) mo[r] += m[i][r] * w[i];
#pragma unroll
    for (int e = 0; e < NX * NX; e++) Po[e] = (real)0;
#pragma unroll
    for (int i = 0; i < NMODE; i++) {
        if (w[i] == (real)0) continue;
        real d[NX];
#pragma unroll
        for (int r = 0; r < NX; r++) d[r] = m[i][r] - mo[r];
#pragma unroll
        for (int r = 0; r < NX; r++)
#pragma unroll
            for (int c = 0; c < NX; c++) Po[r * NX + c] += (P[i][r * NX + c] + d[r] * d[c]) * w[i];
    }
    symmetrize<NX>(Po);
}

extern "C" __global__ void __launch_bounds__(128) nl_imm(const real* __restrict__ z, real* __restrict__ mean,
                                                         real* __restrict__ cov, real* __restrict__ ll,
                                                         real* __restrict__ probs, int* __restrict__ err, int nb,
                                                         int steps) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    const long long B = nb;
    real m[NMODE][NX], P[NMODE][NX * NX], mu[NMODE];
#pragma unroll
    for (int j = 0; j < NMODE; j++) {
#pragma unroll
        for (int i = 0; i < NX; i++) m[j][i] = X0[i];
#pragma unroll
        for (int i = 0; i < NX * NX; i++) P[j][i] = P00[i];
        mu[j] = MU0[j];
    }
    int fail = 0;
    for (int k = 0; k < steps && !fail; k++) {
        real cbar[NMODE];
        if (k == 0) {
#pragma unroll
            for (int j = 0; j < NMODE; j++) cbar[j] = mu[j];
        } else {
#pragma unroll
            for (int j = 0; j < NMODE; j++) {
                real v = (real)0;
#pragma unroll
                for (int i = 0; i < NMODE; i++) v += TR[i * NMODE + j] * mu[i];
                cbar[j] = v;
            }
            real m0[NMODE][NX], P0[NMODE][NX * NX];
#pragma unroll
            for (int j = 0; j < NMODE; j++) {
                real w[NMODE];
                // One division a mode: the weights multiply by 1 / cbar_j.
                const real ic = cbar[j] > (real)0 ? (real)1 / cbar[j] : (real)0;
#pragma unroll
                for (int i = 0; i < NMODE; i++)
                    w[i] = cbar[j] > (real)0 ? TR[i * NMODE + j] * mu[i] * ic : (real)(i == j ? 1 : 0);
                imm_mix(m, P, w, m0[j], P0[j]);
            }
#pragma unroll
            for (int j = 0; j < NMODE; j++) {
#pragma unroll
                for (int i = 0; i < NX; i++) m[j][i] = m0[j][i];
#pragma unroll
                for (int i = 0; i < NX * NX; i++) P[j][i] = P0[j][i];
            }
#pragma unroll
            for (int j = 0; j < NMODE; j++)
                if (!fail && !predict_mode(j, m[j], P[j])) fail = 2 * (k + 1);
            if (fail) break;
        }
        real zk[NY];
        const bool missing = load_z(z, k, B, b, zk);
        real l = (real)0;
        if (missing) {
#pragma unroll
            for (int j = 0; j < NMODE; j++) mu[j] = cbar[j];
        } else {
            real logs[NMODE];
#pragma unroll
            for (int j = 0; j < NMODE; j++) {
                real lj = (real)0;
                const int u = fail ? 0 : update_mode(j, zk, m[j], P[j], &lj);
                if (u && !fail) fail = 2 * (k + 1) + (u - 1);
                logs[j] = log(cbar[j]) + lj;
            }
            if (fail) break;
            real top = logs[0];
#pragma unroll
            for (int j = 1; j < NMODE; j++) top = fmax(top, logs[j]);
            real sum = (real)0;
#pragma unroll
            for (int j = 0; j < NMODE; j++) sum += exp(logs[j] - top);
            l = top + log(sum);
#pragma unroll
            for (int j = 0; j < NMODE; j++) mu[j] = exp(logs[j] - l);
        }
        real mc[NX], Pc[NX * NX];
        imm_mix(m, P, mu, mc, Pc);
#pragma unroll
        for (int i = 0; i < NX; i++) mean[((long long)k * NX + i) * B + b] = mc[i];
#pragma unroll
        for (int i = 0; i < NX * NX; i++) cov[((long long)k * NX * NX + i) * B + b] = Pc[i];
#pragma unroll
        for (int j = 0; j < NMODE; j++) probs[((long long)k * NMODE + j) * B + b] = mu[j];
        ll[(long long)k * B + b] = l;
    }
    err[b] = fail;
}

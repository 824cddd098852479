// The built-in models of the particle filter on the GPU, the twins of particle/models.rs
// (same formulas, same order of noise draws and of summation). The launcher writes the
// model's numbers as constants (PF_*) ahead of this file and picks one kind. A custom
// model (kind = "custom") replaces this file by the user's source, which defines the
// same three functions:
//
//   __device__ void pf_prior(real_t* x, PfNormals& noise);              // x_0 ~ prior
//   __device__ void pf_propagate(unsigned k, real_t* x, PfNormals& noise); // x_{k-1} -> x_k
//   __device__ real_t pf_loglik(unsigned k, const real_t* x, const real_t* z); // ln p(z_k | x_k)
//
// with NX, NY, real_t (float or double) and PF_X0 / PF_L0 (prior mean and square root,
// row-major) defined.

#if defined(PF_GAUSSIAN_PRIOR)
__device__ __forceinline__ void pf_gaussian_prior(real_t* x, PfNormals& noise) {
    real_t n[NX];
    for (int j = 0; j < NX; ++j) n[j] = noise.draw();
    for (int i = 0; i < NX; ++i) {
        real_t acc = (real_t)PF_X0(i);
        for (int j = 0; j < NX; ++j)
            if (PF_L0(i * NX + j) != 0.0) acc += (real_t)PF_L0(i * NX + j) * n[j];
        x[i] = acc;
    }
}
#endif

#if defined(PF_KIND_LINEAR)
__device__ __forceinline__ void pf_prior(real_t* x, PfNormals& noise) { pf_gaussian_prior(x, noise); }
__device__ __forceinline__ void pf_propagate(unsigned, real_t* x, PfNormals& noise) {
    real_t prev[NX], n[NX];
    for (int j = 0; j < NX; ++j) { prev[j] = x[j]; n[j] = noise.draw(); }
    for (int i = 0; i < NX; ++i) {
        real_t acc = (real_t)PF_U(i);
        for (int j = 0; j < NX; ++j) {
            if (PF_F(i * NX + j) != 0.0) acc += (real_t)PF_F(i * NX + j) * prev[j];
            if (PF_SQ(i * NX + j) != 0.0) acc += (real_t)PF_SQ(i * NX + j) * n[j];
        }
        x[i] = acc;
    }
}
__device__ __forceinline__ real_t pf_loglik(unsigned, const real_t* x, const real_t* z) {
    real_t y[NY];
    for (int i = 0; i < NY; ++i) {
        real_t acc = z[i] - (real_t)PF_D(i);
        for (int j = 0; j < NX; ++j)
            if (PF_H(i * NX + j) != 0.0) acc -= (real_t)PF_H(i * NX + j) * x[j];
        y[i] = acc;
    }
    real_t q = 0;
    for (int i = 0; i < NY; ++i) {
        real_t acc = y[i];
        for (int j = 0; j < i; ++j) acc -= (real_t)PF_CR(i * NY + j) * y[j];
        real_t v = acc / (real_t)PF_CR(i * NY + i);
        y[i] = v;
        q += v * v;
    }
    return -(real_t)PF_LOG_NORM - (real_t)0.5 * q;
}
#endif

#if defined(PF_KIND_CV)
// 2-D constant velocity [px, vx, py, vy]; noise factor (PF_A, PF_B, PF_C) per axis.
__device__ __forceinline__ void pf_prior(real_t* x, PfNormals& noise) { pf_gaussian_prior(x, noise); }
__device__ __forceinline__ void pf_propagate(unsigned, real_t* x, PfNormals& noise) {
    const real_t dt = (real_t)PF_DT, a = (real_t)PF_A, b = (real_t)PF_B, c = (real_t)PF_C;
    real_t n0 = noise.draw(), n1 = noise.draw(), n2 = noise.draw(), n3 = noise.draw();
    x[0] = x[0] + dt * x[1] + a * n0;
    x[1] = x[1] + b * n0 + c * n1;
    x[2] = x[2] + dt * x[3] + a * n2;
    x[3] = x[3] + b * n2 + c * n3;
}
__device__ __forceinline__ real_t pf_gauss_ll(real_t y, double c0, double c1) {
    return (real_t)c0 - (real_t)c1 * y * y;
}
__device__ __forceinline__ real_t pf_wrap(real_t a) {
    const real_t pi = (real_t)3.141592653589793, two_pi = (real_t)6.283185307179586;
    if (a > pi) a -= two_pi;
    else if (a <= -pi) a += two_pi;
    return a;
}
__device__ __forceinline__ real_t pf_loglik(unsigned, const real_t* x, const real_t* z) {
    real_t ll = 0;
#if defined(PF_MEASURE_RANGE)
    for (int s = 0; s < NY; ++s) {
        real_t dx = x[0] - (real_t)PF_SENSORS(2 * s), dy = x[2] - (real_t)PF_SENSORS(2 * s + 1);
        ll += pf_gauss_ll(z[s] - sqrt(dx * dx + dy * dy), PF_LL0, PF_LL1);
    }
#elif defined(PF_MEASURE_BEARING)
    for (int s = 0; s < NY; ++s) {
        real_t bb = atan2(x[2] - (real_t)PF_SENSORS(2 * s + 1), x[0] - (real_t)PF_SENSORS(2 * s));
        ll += pf_gauss_ll(pf_wrap(z[s] - bb), PF_LL0, PF_LL1);
    }
#else
    real_t dx = x[0] - (real_t)PF_SENSORS(0), dy = x[2] - (real_t)PF_SENSORS(1);
    ll = pf_gauss_ll(z[0] - sqrt(dx * dx + dy * dy), PF_LL0, PF_LL1) +
         pf_gauss_ll(pf_wrap(z[1] - atan2(dy, dx)), PF_LL0B, PF_LL1B);
#endif
    return ll;
}
#endif

#if defined(PF_KIND_SV)
__device__ __forceinline__ void pf_prior(real_t* x, PfNormals& noise) {
    x[0] = (real_t)PF_MU + (real_t)PF_SD0 * noise.draw();
}
__device__ __forceinline__ void pf_propagate(unsigned, real_t* x, PfNormals& noise) {
    const real_t mu = (real_t)PF_MU;
    x[0] = mu + (real_t)PF_PHI * (x[0] - mu) + (real_t)PF_SIGMA * noise.draw();
}
__device__ __forceinline__ real_t pf_loglik(unsigned, const real_t* x, const real_t* z) {
    return (real_t)(-0.9189385332046728) - (real_t)0.5 * (x[0] + z[0] * z[0] * exp(-x[0]));
}
#endif

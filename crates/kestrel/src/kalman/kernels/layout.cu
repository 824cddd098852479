// Conversion of structure-of-arrays outputs to the host layout, a tiled transpose
// through shared memory so that both the reads and the writes of a warp are contiguous.
// `in` has rows of length B (one value per track): row t * C + c for a vector of C
// components, row t * NP + pk(i, j) for a packed covariance. `out` is [B][S][CO] with
// CO = C (vector) or NX * NX (covariance, unpacked to the full matrix).
extern "C" __global__ void __launch_bounds__(256) soa_to_host(const real* __restrict__ in, real* __restrict__ out,
                                                              int nb, int steps, int C, int is_cov) {
    __shared__ real tile[32][33];
    const long long B = nb;
    const int CO = is_cov ? NX * NX : C;
    const long long ncol = (long long)steps * CO;
    const long long b0 = (long long)blockIdx.x * 32;
    for (long long o0 = (long long)blockIdx.y * 32; o0 < ncol; o0 += (long long)gridDim.y * 32) {
        for (int ty = threadIdx.y; ty < 32; ty += blockDim.y) {
            const long long o = o0 + ty;
            const long long b = b0 + threadIdx.x;
            if (o < ncol && b < B) {
                const long long t = o / CO;
                const int c = (int)(o - t * CO);
                const long long row = is_cov ? t * NP + pk(c / NX, c % NX) : t * C + c;
                tile[ty][threadIdx.x] = in[row * B + b];
            }
        }
        __syncthreads();
        for (int ty = threadIdx.y; ty < 32; ty += blockDim.y) {
            const long long b = b0 + ty;
            const long long o = o0 + threadIdx.x;
            if (o < ncol && b < B) out[b * ncol + o] = tile[threadIdx.x][ty];
        }
        __syncthreads();
    }
}

#if KS_INPUTS
// The other way, for per-track inputs: `in` is [B][S][C] (the host's layout), `out` has
// rows of length B, row t * C + c. Same tiling.
extern "C" __global__ void __launch_bounds__(256) host_to_soa(const real* __restrict__ in, real* __restrict__ out,
                                                              int nb, int steps, int C) {
    __shared__ real tile[32][33];
    const long long B = nb;
    const long long ncol = (long long)steps * C;
    const long long b0 = (long long)blockIdx.x * 32;
    for (long long o0 = (long long)blockIdx.y * 32; o0 < ncol; o0 += (long long)gridDim.y * 32) {
        for (int ty = threadIdx.y; ty < 32; ty += blockDim.y) {
            const long long b = b0 + ty;
            const long long o = o0 + threadIdx.x;
            if (o < ncol && b < B) tile[ty][threadIdx.x] = in[b * ncol + o];
        }
        __syncthreads();
        for (int ty = threadIdx.y; ty < 32; ty += blockDim.y) {
            const long long o = o0 + ty;
            const long long b = b0 + threadIdx.x;
            if (o < ncol && b < B) out[o * B + b] = tile[threadIdx.x][ty];
        }
        __syncthreads();
    }
}
#endif

#ifdef TBD_TILED
// Tiles with halos: the state of a TX x TY tile and a halo of DEC * SHRINK pixels is
// read once, advanced DEC frames in shared memory (the plain recursion, resampled every
// frame: the valid region shrinks by SHRINK per frame), the map of every frame written,
// and the tile's state written once. State traffic falls by DEC; output is not decimated.
#define HALO (DEC * SHRINK)
#define BW (TX + 2 * HALO)
#define BH (TY + 2 * HALO)

extern "C" __global__ void __launch_bounds__(TX * TY)
    tbd_tiled(const state_t* __restrict__ s_prev, state_t* __restrict__ s_next, const FRAME_T* __restrict__ frames,
              float* __restrict__ score, unsigned short* __restrict__ arg, int h, int w, float alpha) {
    __shared__ float buf[2][BH * BW];
    __shared__ float best[DEC][TY * TX];
    __shared__ unsigned short barg[DEC][TY * TX];
    const int tid = threadIdx.y * TX + threadIdx.x;
    const int nt = TX * TY;
    const int x0 = (int)blockIdx.x * TX - HALO, y0 = (int)blockIdx.y * TY - HALO;
    const size_t n = (size_t)h * w;
    const float c = 1.0f - alpha;
    for (int v = 0; v < NV; ++v) {
        const state_t* s = s_prev + v * n;
        for (int i = tid; i < BH * BW; i += nt) {
            const int gx = x0 + i % BW, gy = y0 + i / BW;
            buf[0][i] = ((unsigned)gx < (unsigned)w && (unsigned)gy < (unsigned)h)
                            ? load_state_f(LD(s + (size_t)gy * w + gx))
                            : 0.0f;
        }
        __syncthreads();
        const float vx = MVX[v], vy = MVY[v];
        int cur = 0;
        for (int k = 0; k < DEC; ++k) {
            const int m = (k + 1) * SHRINK;
            const int rw = BW - 2 * m, rh = BH - 2 * m;
            const float* src = buf[cur];
            float* dst = buf[cur ^ 1];
            const FRAME_T* f = frames + k * n;
            for (int i = tid; i < rw * rh; i += nt) {
                const int bx = m + i % rw, by = m + i / rw;
                const int gx = x0 + bx, gy = y0 + by;
                float val = 0.0f;
                if ((unsigned)gx < (unsigned)w && (unsigned)gy < (unsigned)h) {
                    // Taps stay inside the tile (margin >= SHRINK); cells outside the
                    // frame hold 0, which is the convention's "outside reads 0".
                    const float p =
                        bilinear([&](int r, int cc) { return src[r * BW + cc]; }, BH, BW, bx, by, -vx, -vy);
                    val = c * p + alpha * (float)LD(f + (size_t)gy * w + gx);
                }
                dst[by * BW + bx] = val;
                const int ox = bx - HALO, oy = by - HALO;
                if ((unsigned)ox < (unsigned)TX && (unsigned)oy < (unsigned)TY) {
                    const int o = oy * TX + ox;
                    if (v == 0 || val > best[k][o]) {
                        best[k][o] = val;
                        barg[k][o] = (unsigned short)v;
                    }
                }
            }
            __syncthreads();
            cur ^= 1;
        }
        state_t* so = s_next + v * n;
        for (int i = tid; i < TX * TY; i += nt) {
            const int gx = x0 + HALO + i % TX, gy = y0 + HALO + i / TX;
            if (gx < w && gy < h) so[(size_t)gy * w + gx] = store_state_f(buf[cur][(HALO + i / TX) * BW + HALO + i % TX]);
        }
        __syncthreads();
    }
    for (int k = 0; k < DEC; ++k) {
        for (int i = tid; i < TX * TY; i += nt) {
            const int gx = x0 + HALO + i % TX, gy = y0 + HALO + i / TX;
            if (gx < w && gy < h) {
                score[k * n + (size_t)gy * w + gx] = best[k][i];
                arg[k * n + (size_t)gy * w + gx] = barg[k][i];
            }
        }
    }
}

#endif

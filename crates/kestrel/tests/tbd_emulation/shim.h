// Lets kernels/tbd.cu compile as plain C++ (tests/tbd_kernels_on_cpu.rs): the CUDA
// keywords become nothing; a block's threads are std::threads when the kernel
// synchronises (the tiled kernel, __syncthreads = a barrier; a warp's shuffles meet at a
// barrier of its own), else one loop.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>
#define KESTREL_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __constant__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
struct dim3 { unsigned x, y, z; };
thread_local dim3 threadIdx;
dim3 blockIdx, blockDim, gridDim;
std::barrier<>* g_barrier = nullptr;
inline void __syncthreads() { if (g_barrier) g_barrier->arrive_and_wait(); }
// Warp shuffles (the streaming kernel; blocks 32 threads wide): each warp's threads meet
// at their own barrier, publish, meet again after reading.
std::barrier<>* g_warp_barrier[32] = {};
float g_shfl[1024];
// The value of lane + d of this thread's warp, its own where that lies past the warp
// (as __shfl_down_sync / __shfl_up_sync).
inline float emu_shfl(float x, int d) {
    const unsigned t = threadIdx.y * blockDim.x + threadIdx.x, wq = t / 32, lane = t % 32;
    if (blockDim.x != 32 || !g_warp_barrier[wq]) {
        std::fprintf(stderr, "a shuffle outside a warp of threads\n");
        std::abort();
    }
    g_shfl[t] = x;
    g_warp_barrier[wq]->arrive_and_wait();
    const int src = (int)lane + d;
    const float r = (src >= 0 && src < 32) ? g_shfl[wq * 32 + (unsigned)src] : x;
    g_warp_barrier[wq]->arrive_and_wait();
    return r;
}
template <class T> T __ldg(const T* p) { return *p; }
// __byte_perm: byte i of the result is byte (s >> 4 i) & 7 of the 8 bytes y:x.
inline unsigned emu_byte_perm(unsigned x, unsigned y, unsigned s) {
    const uint64_t xy = ((uint64_t)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((xy >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}

inline float emu_half_to_float(unsigned short h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0) {
        float v = std::ldexp((float)m, -24);
        return sign ? -v : v;
    }
    x = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

// Round to nearest, ties to even (as cvt.rn.f16.f32).
inline unsigned short emu_float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    if (ax >= 0x7f800000) return sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0);
    if (ax >= 0x477ff000) return sign | 0x7c00;
    if (ax < 0x38800000) {
        float a;
        std::memcpy(&a, &ax, 4);
        return sign | (unsigned short)std::nearbyint(a * 16777216.0f);
    }
    uint32_t e = (ax >> 23) - 112, m = ax & 0x7fffff, hm = m >> 13, rest = m & 0x1fff;
    uint32_t h = (e << 10) | hm;
    if (rest > 0x1000 || (rest == 0x1000 && (hm & 1))) h += 1;
    return sign | h;
}

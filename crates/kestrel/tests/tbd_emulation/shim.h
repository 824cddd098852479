// Lets the TBD kernel files (kernels/common.cuh + one .cu) compile as plain C++ (tests/tbd_kernels_on_cpu.rs): the CUDA
// keywords become nothing; a block's threads are std::threads when the kernel
// synchronises (the tiled kernel, __syncthreads = a barrier), else one loop.
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

// f16x2 arithmetic of the packed kernel: each half computed exactly in double and rounded
// once to f16, nearest even (as fma.rn.f16x2 / mul.rn.f16x2; the product of two halves
// and its sum with a third are exact in double at the magnitudes the kernel meets).
inline unsigned short emu_double_to_half(double d) {
    if (d != d) return 0x7e00;
    const double a = std::fabs(d);
    if (a >= 65520.0) return d < 0 ? 0xfc00 : 0x7c00;
    int ex = 0;
    std::frexp(a, &ex);  // a = m 2^ex, m in [0.5, 1)
    const int e = ex - 1 < -14 ? -14 : ex - 1;
    const double ulp = std::ldexp(1.0, e - 10);
    const double r = std::nearbyint(a / ulp) * ulp;
    const unsigned short h = emu_float_to_half((float)r);
    return d < 0 ? (unsigned short)(h | 0x8000) : h;
}
inline double emu_h(unsigned x, int half) { return emu_half_to_float((unsigned short)(x >> (16 * half))); }
inline unsigned emu_h2fma(unsigned a, unsigned b, unsigned c) {
    unsigned r = 0;
    for (int i = 0; i < 2; ++i) r |= (unsigned)emu_double_to_half(emu_h(a, i) * emu_h(b, i) + emu_h(c, i)) << (16 * i);
    return r;
}
inline unsigned emu_h2mul(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 2; ++i) r |= (unsigned)emu_double_to_half(emu_h(a, i) * emu_h(b, i)) << (16 * i);
    return r;
}
inline unsigned emu_h2max(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 2; ++i) {
        const double x = emu_h(a, i), y = emu_h(b, i);
        r |= ((y > x || x != x) ? (b >> (16 * i)) & 0xffffu : (a >> (16 * i)) & 0xffffu) << (16 * i);
    }
    return r;
}
inline unsigned emu_h2gt(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 2; ++i) r |= (emu_h(a, i) > emu_h(b, i) ? 0xffffu : 0u) << (16 * i);
    return r;
}

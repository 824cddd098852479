// Lets the tracker's CUDA kernels (tracking/kernels/track.cu, with the Kalman prelude,
// common.cuh and tracker.cu ahead of it) compile as plain C++ (see
// tests/tracking_kernels_on_cpu.rs): a block runs as blockDim host threads that meet at
// a barrier for __syncthreads(), blocks run one after another, shared memory is a
// static array, and the atomics take a lock.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static
#define __align__(n) alignas(n)
struct dim3 { unsigned x, y, z; };
thread_local dim3 threadIdx;
dim3 blockIdx, blockDim, gridDim;
std::barrier<>* tk_bar = nullptr;
inline void __syncthreads() { tk_bar->arrive_and_wait(); }
std::mutex tk_atomic;
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T atomicMin(T* p, T v) {
    std::lock_guard<std::mutex> g(tk_atomic);
    T o = *p;
    if (v < o) *p = v;
    return o;
}
template <class T> T atomicMax(T* p, T v) {
    std::lock_guard<std::mutex> g(tk_atomic);
    T o = *p;
    if (v > o) *p = v;
    return o;
}
template <class T> T atomicAdd(T* p, T v) {
    std::lock_guard<std::mutex> g(tk_atomic);
    T o = *p;
    *p = o + v;
    return o;
}
inline long long __double_as_longlong(double v) { long long b; std::memcpy(&b, &v, 8); return b; }
inline double __longlong_as_double(long long b) { double v; std::memcpy(&v, &b, 8); return v; }
using std::fmax;
using std::fmin;
using std::log;
using std::pow;
using std::sqrt;
// The unfused products (the files compile with -ffp-contract=off, so no product is
// fused with an addition here either).
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dmul_rn(double a, double b) { return a * b; }

// Runs f() once per thread of a grid of gx blocks of `block` threads.
inline void emulate(unsigned gx, unsigned block, const std::function<void()>& f) {
    gridDim = {gx, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned bx = 0; bx < gx; ++bx) {
        blockIdx = {bx, 0, 0};
        std::barrier<> bar(block);
        tk_bar = &bar;
        std::vector<std::thread> ts;
        ts.reserve(block);
        for (unsigned t = 0; t < block; ++t)
            ts.emplace_back([t, &f] { threadIdx = {t, 0, 0}; f(); });
        for (auto& t : ts) t.join();
    }
}

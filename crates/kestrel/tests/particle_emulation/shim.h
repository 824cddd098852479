// Lets the particle filter's CUDA kernels compile as plain C++ (see
// tests/particle_kernels_on_cpu.rs): a block runs as PF_BLOCK host threads that meet at a
// barrier for __syncthreads(), blocks run one after another, so shared memory is a
// static array and every kernel, reductions and scans included, runs as written.
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
struct dim3 { unsigned x, y, z; };
thread_local dim3 threadIdx;
dim3 blockIdx, blockDim, gridDim;
std::barrier<>* pf_bar = nullptr;
inline void __syncthreads() { pf_bar->arrive_and_wait(); }
inline unsigned atomicMax(unsigned* p, unsigned v) {
    std::atomic_ref<unsigned> a(*p);
    unsigned o = a.load();
    while (o < v && !a.compare_exchange_weak(o, v)) {}
    return o;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
using std::atan2;
using std::cos;
using std::exp;
using std::fmax;
using std::log;
using std::sin;
using std::sqrt;

// Runs f() once per thread of a (gx, gy) grid of blocks of `block` threads.
inline void emulate(unsigned gx, unsigned gy, unsigned block, const std::function<void()>& f) {
    gridDim = {gx, gy, 1};
    blockDim = {block, 1, 1};
    for (unsigned by = 0; by < gy; ++by)
        for (unsigned bx = 0; bx < gx; ++bx) {
            blockIdx = {bx, by, 0};
            std::barrier<> bar(block);
            pf_bar = &bar;
            std::vector<std::thread> ts;
            ts.reserve(block);
            for (unsigned t = 0; t < block; ++t)
                ts.emplace_back([t, &f] { threadIdx = {t, 0, 0}; f(); });
            for (auto& t : ts) t.join();
        }
}

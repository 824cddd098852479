// Lets the GNN association kernels (tracking/kernels/assign.cu) compile as plain C++
// (see tests/tracking_assign_kernels_on_cpu.rs). The kernels that never synchronise a
// block run every thread of a launch to completion one after another, in a shuffled
// order (a fresh one per launch) so that the result cannot lean on the order threads run
// in. The block solver (ga_solve_block) runs each block as host threads that meet at a
// barrier for __syncthreads(), blocks one after another, so its shared memory is a
// static array and its reductions and sort run as written; atomics are atomic.
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
struct dim3 { unsigned x, y, z; };
thread_local dim3 threadIdx;
dim3 blockIdx, blockDim, gridDim;
std::barrier<>* ga_bar = nullptr;
inline void __syncthreads() { ga_bar->arrive_and_wait(); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicMin(unsigned* p, unsigned v) {
    unsigned o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return o;
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
    unsigned o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v > o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return o;
}
inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
inline double atomicAdd(double* p, double v) {
    double o, nv;
    __atomic_load(p, &o, __ATOMIC_SEQ_CST);
    do {
        nv = o + v;
    } while (!__atomic_compare_exchange(p, &o, &nv, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return o;
}
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
    unsigned long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v > o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return o;
}
// A product never fused into the sum it feeds (the harness compiles with
// -ffp-contract=off, so every product is).
inline double __dmul_rn(double a, double b) { return a * b; }
using std::exp;
using std::fabs;
using std::fmax;
inline double __longlong_as_double(long long b) {
    double x;
    memcpy(&x, &b, 8);
    return x;
}
inline long long __double_as_longlong(double x) {
    long long b;
    memcpy(&b, &x, 8);
    return b;
}

std::mt19937_64 ga_order_rng;

// Runs f() once per thread of `threads` threads in blocks of `block`, shuffled.
inline void emulate(unsigned threads, unsigned block, const std::function<void()>& f) {
    const unsigned blocks = (threads + block - 1) / block;
    std::vector<unsigned> ids(blocks * block);
    std::iota(ids.begin(), ids.end(), 0u);
    std::shuffle(ids.begin(), ids.end(), ga_order_rng);
    gridDim = {blocks, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned id : ids) {
        blockIdx = {id / block, 0, 0};
        threadIdx = {id % block, 0, 0};
        f();
    }
}

// Runs f() on a grid of `blocks` blocks of `block` threads, each block as host threads
// meeting at a barrier.
inline void emulate_blocks(unsigned blocks, unsigned block, const std::function<void()>& f) {
    gridDim = {blocks, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < blocks; ++b) {
        blockIdx = {b, 0, 0};
        std::barrier<> bar(block);
        ga_bar = &bar;
        std::vector<std::thread> ts;
        ts.reserve(block);
        for (unsigned t = 0; t < block; ++t)
            ts.emplace_back([t, &f] { threadIdx = {t, 0, 0}; f(); });
        for (auto& t : ts) t.join();
    }
}

// Lets the GNN association kernels (tracking/kernels/assign.cu) compile as plain C++
// (see tests/tracking_assign_kernels_on_cpu.rs). None of them synchronises a block, so
// every thread of a launch runs to completion one after another, in a shuffled order
// (a fresh one per launch) so that the result cannot lean on the order threads run in;
// atomics are plain read-modify-writes.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
struct dim3 { unsigned x, y, z; };
dim3 blockIdx, threadIdx, blockDim, gridDim;
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
inline unsigned atomicMin(unsigned* p, unsigned v) { unsigned o = *p; if (v < o) *p = v; return o; }
inline unsigned atomicMax(unsigned* p, unsigned v) { unsigned o = *p; if (v > o) *p = v; return o; }
inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
    unsigned o = *p;
    if (o == cmp) *p = v;
    return o;
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

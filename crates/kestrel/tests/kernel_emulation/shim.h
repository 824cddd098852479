// Lets the CUDA kernels compile as plain C++ (see tests/gpu_kernels_on_cpu.rs): the
// CUDA keywords become nothing, thread and block indices become globals that the
// harness sets before calling a kernel once per thread. Kernels that synchronise
// threads (the layout transpose) are not run this way.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static
#define __align__(n) alignas(n)
template <class T> T __ldg(const T* p) { return *p; }
struct dim3 { unsigned x, y, z; };
dim3 blockIdx, threadIdx, blockDim, gridDim;
void __syncthreads() {}
unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    unsigned long long o = *p;
    if (v < o) *p = v;
    return o;
}
using std::log;
using std::sqrt;
// The unfused products (the files compile with -ffp-contract=off, so no product is
// fused with an addition here either).
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dmul_rn(double a, double b) { return a * b; }

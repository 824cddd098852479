// Decimation with the frames staged in shared memory (`Variant::Staged`): the seed's
// scheme (each trajectory folded through the DEC frames of a launch, the map emitted
// once per launch) with the block's DEC frame tiles read once each, coalesced, as
// alpha X into a double-buffered shared tile (zeros outside the frame, so no tap tests),
// the next frame's tile loaded while the current one is used; each thread keeps the
// trajectories of all vectors through its STAGED (1 or 2) pixels in registers, frame
// by frame. With 2 pixels per thread the three taps of a row that the two share come
// as one 8-byte and one 4-byte shared load (their alignment is a compile-time fact of
// the shift). The state is sampled from global memory once per launch, without tests
// where the footprint lies inside the frame. Same sampling positions and blends as
// `trajectory`; alpha multiplies the frame before the blend, not after (a rounding
// apart; the same arithmetic for integer vectors).
//
// With STAGED_LATE (`Variant::Late`) the state is sampled after the frames instead of
// before: the trajectories fold the frames from zero, G = sum_j c^(DEC-1-j) alpha X_j
// (the same Horner steps), and the sample joins last, c^DEC S + G (a rounding or two from
// the Horner order, which starts from S). No state load stands before the first frame
// and none is held in registers across the frames, so fewer registers and several blocks
// a multiprocessor (S_MINB) let one block's state loads overlap another's frames.
#ifdef STAGED
#define S_PX STAGED
#ifndef STAGED_LATE
#define STAGED_LATE 0
#endif
#ifndef S_MINB
#define S_MINB 1
#endif
// The late kernel with 2 pixels per thread keeps each tile row as its even columns then
// its odd ones (S_SPLIT), so that the three taps a thread reads from a row are three
// 4-byte loads at consecutive words across the warp (3 shared wavefronts a row; the
// 8-byte + 4-byte pair of the row-major tile takes 4, its 4-byte load 2-way conflicted),
// and blends each sample with the four products of its weights (compile-time) into the
// trajectory: c acc + w00 t00 + w01 t01 + w10 t10 + w11 t11.
#define S_SPLIT (STAGED_LATE && S_PX == 2)
// The late kernel on f32 frames copies the frame tiles into shared memory with cp.async
// (no registers, no load-to-store wait), S_AHEAD + 1 tiles deep: frames up to
// j + S_AHEAD are in flight while frame j is used. The tiles hold X itself; alpha
// multiplies the folded sum once at the end (alpha G), as for every frame type in the
// late kernel.
#if STAGED_LATE && defined(FRAME_F32)
#define S_ASYNC 1
// Frames in flight ahead of the one folded: S_AHEAD, in S_AHEAD + 1 tiles. H100, 13
// vectors, D10, 32 x 16, against 2 in the same runs (two each): the late kernel f32
// 1.431-1.436 -> 1.415 ms per 200 frames, f16 1.126-1.128 -> 1.107-1.110; the wave kernel
// (which keeps 2) wave3g6 f32 1.200-1.203 -> 1.205-1.209.
#define S_AHEAD (S_WAVE ? 2 : 3)
#define S_BUFS (S_AHEAD + 1)
#else
#define S_ASYNC 0
#define S_BUFS 2
#endif
#if S_ASYNC
#ifdef KESTREL_EMULATION
__device__ __forceinline__ void cp_async4(float* dst, const float* src, unsigned bytes) { *dst = bytes ? *src : 0.0f; }
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    if (valid) {
        std::memcpy(dst, src, 16);
    } else {
        std::memset(dst, 0, 16);
    }
}
__device__ __forceinline__ void cp_async_commit() {}
__device__ __forceinline__ void cp_async_wait1() {}
__device__ __forceinline__ void cp_async_wait0() {}
__device__ __forceinline__ void cp_async_wait2() {}
#else
// 4 bytes global -> shared; `bytes` is the source size: 4 (copy) or 0 (zero-fill; nothing
// is read, so the address need not be valid).
__device__ __forceinline__ void cp_async4(float* dst, const float* src, unsigned bytes) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}
// 16 bytes global -> shared (both 16-byte aligned), past L1, zero-filled when !valid;
// L2 fetches the whole 128-byte line from DRAM (a tile row is 352 bytes of f32). H100, 13
// vectors, D10, 32 x 16, two runs each against no hint in the same call: wave3g6 f32
// 1.212-1.223 -> 1.192-1.194 ms per 200 frames, wave2g8 1.356-1.360 -> 1.327-1.328, late2
// f16 1.136-1.145 -> 1.131-1.136; 64-byte lines: no change; 256: 1% slower.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Every group but the newest complete (this thread's copies).
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait0() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait2() { asm volatile("cp.async.wait_group 2;\n" ::: "memory"); }
#endif
#endif
#define S_OW (TX * S_PX)
#define S_OH TY
#define S_HALO ((DEC - 1) * SHRINK)
#define S_TW (S_OW + 2 * S_HALO)
// The late kernel with f32 frames and frame rows of whole 16-byte chunks (FRAME_W4: the
// width a multiple of 4, set by the launcher) keeps its frame tiles row-major instead of
// split and copies them 16 bytes at a time (S_ROW16): the tile starts S_LPAD columns left
// of the block's first output column (a multiple of 4) and its rows are whole chunks, so a
// chunk lies wholly inside the frame or wholly outside it. A pixel pair's three taps of a
// row are one 8-byte and one 4-byte shared load (4 wavefronts a warp against the split
// layout's 3), but a warp's copies of a frame fall from about 6 to 1.5 instructions a
// thread, and its bytes from L2 to the ones it needs (no second 4-byte copy of each
// sector). H100, 13 vectors, D10, 32 x 16, against the split layout in the same runs (two
// each): f16 state 1.265-1.273 -> 1.168-1.169 ms per 200 frames. With an f32 state it was
// 0.7% slower until each frame's copy shrank to the frame's reach; since then
// it is 2.7% faster for the wave kernel (wave2g8 1.399-1.402 -> 1.361-1.363 ms) and the
// same for the late kernel.
#ifndef FRAME_W4
#define FRAME_W4 0
#endif
#if FRAME_W4 && S_ASYNC && S_SPLIT
#define S_ROW16 1
#else
#define S_ROW16 0
#endif
#if S_ROW16
#define S_LPAD ((S_HALO + 3) / 4 * 4)
#define S_PW ((S_LPAD + S_OW + S_HALO + 3) / 4 * 4)
// S_CH chunks a tile row, S_CPER chunks a thread.
#define S_CH (S_PW / 4)
#define S_CHUNKS (S_PH * S_CH)
#define S_CPER ((S_CHUNKS + S_NT - 1) / S_NT)
#else
#define S_LPAD S_HALO
#define S_PW ((S_TW + 1) / 2 * 2)
#endif
#define S_PH (S_OH + 2 * S_HALO)
#define S_NT (TX * TY)
#define S_CELLS (S_PH * S_PW)
#define S_PER ((S_CELLS + S_NT - 1) / S_NT)
#define S_REACH (DEC * SHRINK + 1)
// The late kernel copies f32 frames with 2 pixels a thread by column pairs (S_PAIRS_ON):
// S_HW pairs a tile row, S_PPER pairs a thread.
#define S_PAIRS_ON (S_ASYNC && S_SPLIT)
// Each frame's copy takes only the rows and columns that its samples read (frame j of DEC
// reaches (DEC - 1 - j) SHRINK pixels, so the last frame's tile is the block's outputs
// alone; see `issue`): a third fewer bytes copied at D10 and 32 x 16 pairs. H100, 13
// vectors, 1024 x 1024, against full tiles in the same runs (two each, split f32 tiles):
// f32 wave2g8 1.455-1.462 -> 1.395-1.404 ms per 200 frames, late2 1.544-1.545 ->
// 1.475-1.476; f16 late2 1.171-1.175 -> 1.134-1.135. Bytes through L2 in a wave3g6
// launch (Nsight Compute, lts__t_bytes): 1.19 GB -> 1.02 GB.
#define S_HW (S_PW / 2)
#define S_PAIRS (S_PH * S_HW)
#define S_PPER ((S_PAIRS + S_NT - 1) / S_NT)
// The late kernel with copied frames also copies the state it samples into shared
// memory (S_SST, dynamic shared memory), 16 bytes at a time, while the first frames
// are folded, where rows are whole 16-byte chunks (w a multiple of S_SE, a runtime
// test): per vector S_SR rows of S_SC chunks, from the chunk that holds the vector's
// first tap column. The launcher passes NV * S_SVB bytes.
#define S_SST S_PAIRS_ON
#define S_SE (16 / (int)sizeof(state_t))
#define S_SR (S_OH + 1)
#define S_SC ((S_OW + S_SE - 1) / S_SE + 1)
#define S_SVB (S_SR * S_SC * 16)
// The state copies join the group of frame S_SGRP's tile. The late kernel's join frame
// 2's, waited for before frame 2 is folded; with two frames ahead (before S_AHEAD) they
// were issued after the first barrier, and on the H100 (f32, 32 x 16, D10) that was 2%
// faster than frame 1's group (issued before frame 0), 21% faster than frame 5's (issued
// mid-launch) and 9% faster than frame 0's (with the copies shrunk to each frame's reach,
// 2.6% faster than frame 1's for f32, 1.5% for f16). Three frames ahead, frame 2's group
// is issued with frames 0 and 1, before the first barrier (not timed against the other
// groups). The wave kernel's (and its wait for the tiles around) join frame 1's group,
// before frame 0 is folded: with the copies shrunk to the frames' reach, wave3g6 f32
// 1.239-1.243 -> 1.209-1.215 ms per 200 frames against frame 2's (frame 0's: 1.227; 3's
// and 4's: 1.38-1.41), f16 1.036-1.040 -> 1.031-1.036.
#define S_SGRP (DEC > 2 ? (S_WAVE ? 1 : 2) : DEC > 1 ? 1 : 0)
// The late kernel is launched as a programmatic dependent launch (`launch_ex`): its
// blocks may start while the launch before it still runs (every block of that one lets
// them, griddepcontrol.launch_dependents, when it starts). They copy their first frames,
// then wait for that launch to complete (griddepcontrol.wait) before they read the state
// it writes (frame S_SGRP's copies, or the samples after the last frame) or write what it
// reads. H100, 13 vectors, D10, 32 x 16, against the ordinary launch in the same runs
// (four each): f32 1.590-1.598 -> 1.543-1.557 ms per 200 frames, f16 1.311-1.319 ->
// 1.264-1.268 (`grid_dep_wait`, `grid_dep_launch`).
// The wave form of the late kernel (`Variant::Wave`, WAVE_PERIODS): one launch runs
// WAVE_PERIODS decimation periods of the whole frame, one tile and period a block. The
// blocks take their work items (period, tile row, tile column) from a ticket counter in
// the order the launcher lays out (`wave_order` in cuda.rs: period j of the launch G tile
// rows behind period j - 1), so that period j reads the state that period j - 1 wrote a
// short while before, from L2 instead of DRAM (H100, 13 vectors, D10, f32, 3 periods a
// launch: 67 MB read from DRAM a period against the late kernel's 98; the state is still
// written back, about 58 MB a period). A tile of period g waits (before its state copies) until
// the nine tiles around it have finished period g - 1: the state it samples lies in them
// (its reach is at most a tile: checked by the launcher) and it overwrites what they
// read. Periods are counted across launches (gp0: the launch's first), the state buffers
// taken by the period's parity and flags[tile] = the last period done + 1, so that a
// launch's first tiles wait on the last one's as its own periods wait on each other (no
// wait for the whole launch before it). Tickets are taken in the order blocks start and a
// block waits only on lower tickets, which blocks already running hold: no deadlock
// whatever the block order.
#ifdef WAVE_PERIODS
#define S_WAVE 1
#else
#define S_WAVE 0
#endif
#if S_WAVE
// Both state buffers are read and written in one launch: no restrict, no const.
#define S_SPREV state_t*
#define S_SNEXT state_t*
#else
#define S_SPREV const state_t* __restrict__
#define S_SNEXT state_t* __restrict__
#endif
__device__ __forceinline__ int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
// The first column of the chunk that holds column ox0 + ix (ox0: the block's first
// column, a multiple of S_OW; a compile-time offset from it where S_OW holds whole chunks).
__device__ __forceinline__ int s_chunk0(int ox0, int ix) {
    return (S_OW % S_SE == 0) ? ox0 + floor_div(ix, S_SE) * S_SE : floor_div(ox0 + ix, S_SE) * S_SE;
}
#if S_SST
#ifdef KESTREL_EMULATION
// One block at a time in the emulator: a static buffer is its shared memory.
static unsigned char s_dyn_emu[NV * S_SVB] __attribute__((aligned(16)));
#define S_DYN s_dyn_emu
#else
extern __shared__ __align__(16) unsigned char s_dyn[];
#define S_DYN s_dyn
#endif
#define S_SST_ON sst
#else
#define S_SST_ON false
#endif

// Bilinear sample of the state (global) at (x + sx, y + sy), as `bilinear`; IN: every
// tap lies inside the frame (no tests).
template <bool IN>
__device__ __forceinline__ float staged_state(const state_t* __restrict__ p, int h, int w, int x, int y, float sx,
                                              float sy) {
    const int ix = ifloor(sx), iy = ifloor(sy);
    auto at = [&](int rr, int cc) -> float {
        return (IN || ((unsigned)rr < (unsigned)h && (unsigned)cc < (unsigned)w))
                   ? load_state_f(LD(p + ((unsigned)rr * (unsigned)w + (unsigned)cc)))
                   : 0.0f;
    };
    return blend_taps(at, y + iy, x + ix, sx - (float)ix, sy - (float)iy);
}

// Bytes [a, a + size) into L2 (both multiples of 16), without waiting.
__device__ __forceinline__ void prefetch_l2(size_t a, unsigned size) {
#ifndef KESTREL_EMULATION
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(a), "r"(size) : "memory");
#endif
}

// Two neighbouring state cells (p even, so 8 / 4 bytes aligned) in one store.
__device__ __forceinline__ void store2_state(state_t* p, float a, float b) {
#if STATE_HALF
    *reinterpret_cast<unsigned*>(p) = (unsigned)store_state_f(a) | ((unsigned)store_state_f(b) << 16);
#else
    *reinterpret_cast<float2*>(p) = make_float2(a, b);
#endif
}

// The taps of one row for the S_PX pixels: columns col + 0 .. S_PX (the last only when
// `two`); `odd`: col is odd (compile-time), so that the 8-byte load is aligned.
__device__ __forceinline__ void staged_row(float (&t)[S_PX + 1], const float* row, bool two, bool odd) {
#if S_PX == 2
    if (!odd) {
        const float2 a = *reinterpret_cast<const float2*>(row);
        t[0] = a.x;
        t[1] = a.y;
        t[2] = two ? row[2] : 0.0f;
    } else {
        t[0] = row[0];
        if (two) {
            const float2 a = *reinterpret_cast<const float2*>(row + 1);
            t[1] = a.x;
            t[2] = a.y;
        } else {
            t[1] = row[1];
            t[2] = 0.0f;
        }
    }
#else
    t[0] = row[0];
    t[1] = two ? row[1] : 0.0f;
#endif
}

#if STAGED_LATE
#define S_BOUNDS __launch_bounds__(TX * TY, S_MINB)
#else
#define S_BOUNDS __launch_bounds__(TX * TY)
#endif
extern "C" __global__ void S_BOUNDS
    tbd_staged(S_SPREV s_prev, S_SNEXT s_next, const FRAME_T* __restrict__ frames,
               float* __restrict__ score, unsigned short* __restrict__ arg, int h, int w, float alpha
#if S_WAVE
               ,
               const unsigned* __restrict__ order, unsigned long long* ticket, unsigned* flags, unsigned long long base,
               unsigned gp0
#endif
    ) {
    __shared__ __align__(16) float fb[S_BUFS][S_PH][S_PW];
    const int tid = threadIdx.y * TX + threadIdx.x;
    const size_t n = (size_t)h * w;
#if S_WAVE
    // The work item: period wj of the launch (gp overall), tile (br, bc) of tgy x tgx.
    __shared__ unsigned s_item;
    const unsigned item = wave_take(order, ticket, base, &s_item, tid);
    const int wj = (int)(item & 0xffu), br = (int)((item >> 8) & 0xfffu), bc = (int)(item >> 20);
    const unsigned gp = gp0 + (unsigned)wj;
    const int tgx = (w + S_OW - 1) / S_OW, tgy = (h + S_OH - 1) / S_OH;
    // Period gp reads the buffer of its parity and writes the other.
    state_t* const sp = (gp & 1u) ? s_next : s_prev;
    state_t* const sn = (gp & 1u) ? s_prev : s_next;
    frames += (size_t)wj * DEC * n;
    score += (size_t)wj * n;
    arg += (size_t)wj * n;
#else
    const int bc = (int)blockIdx.x, br = (int)blockIdx.y;
    S_SPREV sp = s_prev;
    state_t* __restrict__ sn = s_next;
#endif
    const int ox0 = bc * S_OW, oy0 = br * S_OH;
    const int x0 = ox0 + (int)threadIdx.x * S_PX, y = oy0 + (int)threadIdx.y;
    const int gx0 = ox0 - S_HALO, gy0 = oy0 - S_HALO;
    const float c = 1.0f - alpha;
#if STAGED_LATE
    grid_dep_launch();
#endif
#if S_WAVE
    // Waits until the nine tiles around this one have finished period gp - 1.
    auto wave_wait = [&]() { wave_wait_around(flags, br, bc, tgx, tgy, gp, tid); };
#endif
#if S_ROW16
    // This thread's share of a frame tile, counted from the frame's first needed tile row
    // (fr0, set per frame in `issue`): chunk e = tid + q S_NT is row fr0 + e / S_CH,
    // columns 4 (e % S_CH) + 0..3, at 4 e + fr0 S_PW in the tile. cyk: its frame row at
    // fr0 = 0 (times 512),
    // whether its columns lie in the frame (256) and k (the offsets are computed per
    // frame: two more registers a thread made the f16 kernel spill).
    static_assert(S_CH < 256, "k packs into 8 bits");
    int cyk[S_CPER];
#pragma unroll
    for (int q = 0; q < S_CPER; ++q) {
        const int e = tid + q * S_NT;
        const int r = e / S_CH, k = e % S_CH;
        const int gx = ox0 - S_LPAD + 4 * k, gy = gy0 + r;
        const bool col = gx >= 0 && gx < w;
        cyk[q] = gy * 512 + (col ? 256 : 0) + k;
    }
#elif S_PAIRS_ON
    // This thread's share of a frame tile, by column pairs in global order (coalesced),
    // counted from the frame's first needed tile row (fr0, set per frame in `issue`): pair
    // p = tid + q S_NT is row fr0 + p / S_HW, columns 2k and 2k + 1 (k = p % S_HW) of the
    // tile, stored at k and S_HW + k of that row (the split layout). poff: the offset in
    // the frame of column 2k at fr0 = 0 (any value where neither column is in the frame);
    // pdst: the row's shared index of column 2k at fr0 = 0, bit 30 / 31 set where column
    // 2k / 2k + 1 lies in the frame's columns; pyk: the frame row at fr0 = 0 (times 256)
    // and k.
    static_assert(S_HW < 256, "k packs into 8 bits");
    int poff[S_PPER], pyk[S_PPER];
    unsigned pdst[S_PPER];
#pragma unroll
    for (int q = 0; q < S_PPER; ++q) {
        const int p = tid + q * S_NT;
        const int r = p / S_HW, k = p % S_HW;
        const int gx = gx0 + 2 * k, gy = gy0 + r;
        const bool ve = 2 * k < S_TW && (unsigned)gx < (unsigned)w;
        const bool vo = 2 * k + 1 < S_TW && (unsigned)(gx + 1) < (unsigned)w;
        poff[q] = (ve || vo) ? gy * w + gx : 0;
        pdst[q] = (unsigned)(r * S_PW + k) | (ve ? 1u << 30 : 0u) | (vo ? 1u << 31 : 0u);
        pyk[q] = gy * 256 + k;
    }
#else
    // This thread's share of a frame tile: element e = tid + q S_NT (row-major, pitch
    // S_PW), its offset in the frame or -1 (outside the frame, or the pad column).
    int goff[S_PER];
#pragma unroll
    for (int q = 0; q < S_PER; ++q) {
        const int e = tid + q * S_NT;
        const int r = e / S_PW;
        const int cc = S_SPLIT ? 2 * (e % (S_PW / 2)) + (e % S_PW >= S_PW / 2) : e % S_PW;
        const int gx = gx0 + cc, gy = gy0 + r;
        goff[q] = (e < S_CELLS && cc < S_TW && (unsigned)gx < (unsigned)w && (unsigned)gy < (unsigned)h) ? gy * w + gx
                                                                                                         : -1;
    }
#endif
    // The scale of a staged frame: alpha (the late kernel applies it at the end).
    const float xs = STAGED_LATE ? 1.0f : alpha;
    float* fl = &fb[0][0][0];
#if S_ASYNC
#if S_SST
    // The copies of the state the block samples at the end (see S_SGRP).
    const bool sst = (w % S_SE) == 0;
    unsigned char* sdyn = S_DYN;
    auto issue_state = [&]() {
        for (int e = tid; e < S_SR * S_SC; e += S_NT) {
            const int r = e / S_SC, k = e % S_SC;
#pragma unroll
            for (int v = 0; v < NV; ++v) {
                const int ix = ifloor(-(float)DEC * mvx(v)), iy = ifloor(-(float)DEC * mvy(v));
                const int gy = oy0 + iy + r, gc = s_chunk0(ox0, ix) + k * S_SE;
                const bool ok = (unsigned)gy < (unsigned)h && gc >= 0 && gc + S_SE <= w;
                cp_async16(sdyn + v * S_SVB + e * 16, sp + (size_t)v * n + (size_t)gy * w + gc, ok);
            }
        }
    };
#endif
    auto issue = [&](int j) {
        float* tile = fl + (j % S_BUFS) * (S_PH * S_PW);
        const float* f = frames + (size_t)j * n;
#if S_SST
#if S_WAVE
        if (j == S_SGRP) wave_wait();
#else
        if (j == S_SGRP) grid_dep_wait();
#endif
        if (sst && j == S_SGRP) issue_state();
#endif
        // Frame j is sampled DEC - 1 - j steps back: only the tile rows fr0 .. fr0 + nr - 1
        // and columns c0 .. c1 - 1, within (DEC - 1 - j) SHRINK of the block's outputs,
        // are read, and only those are copied (the rest of the tile keeps an older frame
        // and is not read). j is a compile-time constant once the frame loop is unrolled.
        const int hj = (DEC - 1 - j) * SHRINK;
        const int fr0 = S_HALO - hj, nr = S_OH + 2 * hj;
        const int c0 = S_LPAD - hj, c1 = S_LPAD + S_OW + hj;
#if S_ROW16
        // Chunks k with a column in [c0, c1).
        const int kmin = c0 / 4, kmax = (c1 + 3) / 4;
        const int nch = nr * S_CH;
#pragma unroll
        for (int q = 0; q < S_CPER; ++q) {
            const int e = tid + q * S_NT;
            if (q * S_NT >= nch) break;
            if (nch % S_NT != 0 && e >= nch) continue;
            const int k = cyk[q] & 255;
            if ((unsigned)(k - kmin) >= (unsigned)(kmax - kmin)) continue;
            const int gy = (cyk[q] >> 9) + fr0;
            const bool ok = ((cyk[q] >> 8) & 1) && (unsigned)gy < (unsigned)h;
            cp_async16(tile + fr0 * S_PW + 4 * e, f + (ok ? gy * w + ox0 - S_LPAD + 4 * k : 0), ok);
        }
#elif S_PAIRS_ON
        // Pairs k with a column in [c0, c1).
        const int kmin = c0 / 2, kmax = (c1 + 1) / 2;
        const int npr = nr * S_HW;
#pragma unroll
        for (int q = 0; q < S_PPER; ++q) {
            if (q * S_NT >= npr) break;
            if (npr % S_NT != 0 && tid + q * S_NT >= npr) continue;
            if ((unsigned)((pyk[q] & 255) - kmin) >= (unsigned)(kmax - kmin)) continue;
            const bool row = (unsigned)((pyk[q] >> 8) + fr0) < (unsigned)h;
            // A copy with source size 0 reads nothing (its address is not used).
            const float* src = f + (row ? poff[q] + fr0 * w : 0);
            float* dst = tile + fr0 * S_PW + (pdst[q] & 0xffffu);
            cp_async4(dst, src, row ? (pdst[q] >> 28) & 4u : 0u);
            cp_async4(dst + S_HW, src + 1, row ? (pdst[q] >> 29) & 4u : 0u);
        }
#else
#pragma unroll
        for (int q = 0; q < S_PER; ++q)
            if (tid + q * S_NT < S_CELLS) cp_async4(tile + tid + q * S_NT, f + goff[q], goff[q] >= 0 ? 4u : 0u);
#endif
        cp_async_commit();
    };
    issue(0);
    if (DEC > 1) issue(1);
    if (S_AHEAD > 2 && DEC > 2) issue(2);
#else
    float pf[S_PER];
#pragma unroll
    for (int q = 0; q < S_PER; ++q) pf[q] = goff[q] >= 0 ? xs * (float)LD(frames + goff[q]) : 0.0f;
#endif
#if STAGED_LATE
    // The state this block samples after its frames, prefetched into L2 now: one bulk
    // prefetch per row of each vector's footprint (its columns clamped to the frame and
    // widened to 16-byte bounds), so that the samples at the end wait for L2, not DRAM.
    if (!S_WAVE && !S_SST_ON && tid < NV * (S_OH + 1)) {
        const int v = tid / (S_OH + 1), r = tid % (S_OH + 1);
        const int ix = ifloor(-(float)DEC * MVX[v]), iy = ifloor(-(float)DEC * MVY[v]);
        const int gy = oy0 + iy + r;
        const int c0 = ox0 + ix > 0 ? ox0 + ix : 0, c1 = ox0 + S_OW + ix < w - 1 ? ox0 + S_OW + ix : w - 1;
        if ((unsigned)gy < (unsigned)h && c0 <= c1) {
            const state_t* row = sp + (size_t)v * n + (size_t)gy * w;
            const size_t a0 = (size_t)(row + c0) & ~(size_t)15;
            const size_t a1 = ((size_t)(row + c1 + 1) + 15) & ~(size_t)15;
            prefetch_l2(a0, (unsigned)(a1 - a0));
        }
    }
#endif
    // The trajectories start at the state sampled DEC steps back.
    float acc[NV][S_PX];
    const bool inside = x0 >= S_REACH && x0 + S_PX - 1 + S_REACH < w && y >= S_REACH && y + S_REACH < h;
#if STAGED_LATE
    auto sample = [&](int v, int a) -> float {
        const float sx = -(float)DEC * mvx(v), sy = -(float)DEC * mvy(v);
        const state_t* p = sp + (size_t)v * n;
        return inside ? staged_state<true>(p, h, w, x0 + a, y, sx, sy)
                      : staged_state<false>(p, h, w, x0 + a, y, sx, sy);
    };
#if S_SST
    // Both pixels' samples from the shared copy (outside the frame: the zero-filled
    // chunks; S_SST implies 2 pixels a thread), the same blend as `staged_state`: the three
    // tap columns of a row that the two share are loaded once, an f32 state's as one 8-byte
    // and one 4-byte load (the parity of the first column is that of ix, a compile-time
    // fact). H100, 13 vectors, D10, against 4 taps loaded a pixel in the same runs (two
    // each): wave3g6 f32 1.175-1.183 -> 1.162-1.165 ms per 200 frames, wave2g8 1.309-1.313
    // -> 1.297-1.299, late2 f16 32 x 8 1.081-1.089 -> 1.075-1.076.
    auto sample_shared = [&](int v, float& o0, float& o1) {
        const float sx = -(float)DEC * mvx(v), sy = -(float)DEC * mvy(v);
        const int ix = ifloor(sx), iy = ifloor(sy);
        const float fx = sx - (float)ix, fy = sy - (float)iy;
        const bool hx = fx != 0.0f, hy = fy != 0.0f;
        const state_t* b = reinterpret_cast<const state_t*>(sdyn + v * S_SVB) + (int)threadIdx.y * (S_SC * S_SE) +
                           (x0 + ix - s_chunk0(ox0, ix));
        float t[2][3];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const state_t* rw = b + r * (S_SC * S_SE);
            if (r == 1 && !hy) {
                t[1][0] = t[1][1] = t[1][2] = 0.0f;
                continue;
            }
#if STATE_HALF
            t[r][0] = load_state_f(rw[0]);
            t[r][1] = load_state_f(rw[1]);
            t[r][2] = hx ? load_state_f(rw[2]) : 0.0f;
#else
            staged_row(t[r], rw, hx, (ix & 1) != 0);
#endif
        }
        o0 = blend_taps([&](int rr, int cc) -> float { return t[rr][cc]; }, 0, 0, fx, fy);
        o1 = blend_taps([&](int rr, int cc) -> float { return t[rr][cc + 1]; }, 0, 0, fx, fy);
    };
#endif
#pragma unroll
    for (int v = 0; v < NV; ++v)
#pragma unroll
        for (int a = 0; a < S_PX; ++a) acc[v][a] = 0.0f;
#else
    // The staged kernel samples inline, not through the lambda above: with the lambda and
    // (threads, 1) launch bounds its f32 32 x 8 form ran 23% slower on the H100.
#pragma unroll
    for (int v = 0; v < NV; ++v)
#pragma unroll
        for (int a = 0; a < S_PX; ++a) {
            const float sx = -(float)DEC * mvx(v), sy = -(float)DEC * mvy(v);
            const state_t* p = sp + (size_t)v * n;
            acc[v][a] = inside ? staged_state<true>(p, h, w, x0 + a, y, sx, sy)
                               : staged_state<false>(p, h, w, x0 + a, y, sx, sy);
        }
#endif
    const int ly = (int)threadIdx.y + S_HALO, lx = (int)threadIdx.x * S_PX + S_LPAD;
#if S_ROW16
    // The thread's place in the row-major tile: row ly, column lx.
    const float* tthr = fl + ly * S_PW + lx;
#elif S_SPLIT
    // The thread's place in the split tile rows: row ly, pair column threadIdx.x.
    const float* tthr = fl + ly * S_PW + (int)threadIdx.x;
#endif
#pragma unroll
    for (int j = 0; j < DEC; ++j) {
        float* tile = fl + (j % S_BUFS) * (S_PH * S_PW);
#if S_ASYNC
        // Frame j has landed (this thread's copies; frames up to j + S_AHEAD - 1 may be
        // in flight), then every thread's, and every thread is done with frame j - 1,
        // whose tile frame j + S_AHEAD then takes. The last frames have fewer newer groups
        // (with DEC = 1 none: wait for all).
        if (S_AHEAD > 2 && j + 2 < DEC) {
            cp_async_wait2();
        } else if (j + 1 < DEC) {
            cp_async_wait1();
        } else {
            cp_async_wait0();
        }
        __syncthreads();
        if (j + S_AHEAD < DEC) issue(j + S_AHEAD);
#else
#pragma unroll
        for (int q = 0; q < S_PER; ++q)
            if (tid + q * S_NT < S_CELLS) tile[tid + q * S_NT] = pf[q];
        if (j + 1 < DEC) {
            const FRAME_T* f = frames + (size_t)(j + 1) * n;
#pragma unroll
            for (int q = 0; q < S_PER; ++q) pf[q] = goff[q] >= 0 ? xs * (float)LD(f + goff[q]) : 0.0f;
        }
        __syncthreads();
#endif
        const float back = (float)(DEC - 1 - j);
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            // Every shift, tap offset and weight is a compile-time constant (both loops
            // unrolled).
            const float sx = -back * mvx(v), sy = -back * mvy(v);
            const int ix = ifloor(sx), iy = ifloor(sy);
            const float fx = sx - (float)ix, fy = sy - (float)iy;
            const float wx0 = 1.0f - fx, wx1 = fx, wy0 = 1.0f - fy, wy1 = fy;
            const bool hx = wx1 != 0.0f, hy = wy1 != 0.0f;
#if S_SPLIT
            {
                // Columns lx + ix + 0..2 = 2 tx + q + 0..2 of rows ly + iy and the next.
                // From the thread's own pointer: every offset below is a compile-time constant.
#if S_ROW16
                const int q = S_LPAD + ix;
                const float* e0 = tthr + (j % S_BUFS) * (S_PH * S_PW) + iy * S_PW + ix;
#else
                const int q = S_HALO + ix;
                const int k = q >> 1;
                const float* e0 = tthr + (j % S_BUFS) * (S_PH * S_PW) + iy * S_PW;
#endif
                const float w00 = wx0 * wy0, w01 = wx1 * wy0, w10 = wx0 * wy1, w11 = wx1 * wy1;
                float t[2][3];
#pragma unroll
                for (int b = 0; b < 2; ++b) {
                    if (b == 1 && !hy) break;
#if S_ROW16
                    // Row-major: the 8-byte load at the even column (q is the parity of
                    // the first tap's tile column, lx being even).
                    staged_row(t[b], e0 + b * S_PW, hx, (q & 1) != 0);
#else
                    const float* ev = e0 + b * S_PW;
                    const float* od = ev + S_PW / 2;
                    if ((q & 1) == 0) {
                        t[b][0] = ev[k];
                        t[b][1] = od[k];
                        t[b][2] = hx ? ev[k + 1] : 0.0f;
                    } else {
                        t[b][0] = od[k];
                        t[b][1] = ev[k + 1];
                        t[b][2] = hx ? od[k + 1] : 0.0f;
                    }
#endif
                }
#pragma unroll
                for (int a = 0; a < 2; ++a) {
                    float r = c * acc[v][a];
                    r = w00 * t[0][a] + r;
                    if (hx) r = w01 * t[0][a + 1] + r;
                    if (hy) {
                        r = w10 * t[1][a] + r;
                        if (hx) r = w11 * t[1][a + 1] + r;
                    }
                    acc[v][a] = r;
                }
                continue;
            }
#endif
            const float* row0 = tile + (ly + iy) * S_PW + lx + ix;
            const bool odd = ((S_HALO + ix) & 1) != 0;
            float t[S_PX + 1], hr0[S_PX], hr1[S_PX];
            staged_row(t, row0, hx, odd);
#pragma unroll
            for (int a = 0; a < S_PX; ++a) hr0[a] = hx ? wx0 * t[a] + wx1 * t[a + 1] : t[a];
            if (hy) {
                staged_row(t, row0 + S_PW, hx, odd);
#pragma unroll
                for (int a = 0; a < S_PX; ++a) hr1[a] = hx ? wx0 * t[a] + wx1 * t[a + 1] : t[a];
            }
#pragma unroll
            for (int a = 0; a < S_PX; ++a) {
                const float p = hy ? wy0 * hr0[a] + wy1 * hr1[a] : hr0[a];
                acc[v][a] = c * acc[v][a] + p;
            }
        }
    }
#if STAGED_LATE
#if S_WAVE && !S_SST
    wave_wait();
#elif !S_WAVE
    grid_dep_wait();
#endif
    float cd = 1.0f;
#pragma unroll
    for (int j = 0; j < DEC; ++j) cd *= c;
#if S_SST
    if (sst) {
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            float o0, o1;
            sample_shared(v, o0, o1);
            acc[v][0] = cd * o0 + alpha * acc[v][0];
            acc[v][1] = cd * o1 + alpha * acc[v][1];
        }
    } else
#endif
    {
#pragma unroll
        for (int v = 0; v < NV; ++v)
#pragma unroll
            for (int a = 0; a < S_PX; ++a) acc[v][a] = cd * sample(v, a) + alpha * acc[v][a];
    }
#endif
    bool stored = false;
#if STAGED_LATE && S_PX == 2
    // Both pixels in the frame and the row of even length: 8-byte stores (x0 is even).
    if (y < h && x0 + 1 < w && (w & 1) == 0) {
        const unsigned p = (unsigned)y * (unsigned)w + (unsigned)x0;
        float best0 = 0.0f, best1 = 0.0f;
        int barg0 = 0, barg1 = 0;
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            store2_state(sn + (size_t)v * n + p, acc[v][0], acc[v][1]);
            if (v == 0 || acc[v][0] > best0) {
                best0 = acc[v][0];
                barg0 = v;
            }
            if (v == 0 || acc[v][1] > best1) {
                best1 = acc[v][1];
                barg1 = v;
            }
        }
        *reinterpret_cast<float2*>(score + p) = make_float2(best0, best1);
        *reinterpret_cast<unsigned*>(arg + p) = (unsigned)barg0 | ((unsigned)barg1 << 16);
        stored = true;
    }
#endif
#pragma unroll
    for (int a = 0; a < S_PX; ++a) {
        if (stored || x0 + a >= w || y >= h) continue;
        const unsigned p = (unsigned)y * (unsigned)w + (unsigned)(x0 + a);
        float best = 0.0f;
        int barg = 0;
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            (sn + (size_t)v * n)[p] = store_state_f(acc[v][a]);
            if (v == 0 || acc[v][a] > best) {
                best = acc[v][a];
                barg = v;
            }
        }
        score[p] = best;
        arg[p] = (unsigned short)barg;
    }
#if S_WAVE
    // The tile's period is done: every thread's stores come before the barrier, then one
    // thread's device-scope fence and release store of the flag (the barrier orders the
    // block's stores before it: the pattern of cooperative groups' grid barrier). A fence
    // in every thread, before the barrier, made each warp wait for its own stores to
    // reach L2: H100, 13 vectors, D10, 32 x 16, two runs each in one call, wave3g6 f32
    // 1.191-1.196 -> 1.175 ms per 200 frames, wave2g8 1.326-1.334 -> 1.310-1.313, wave3g6
    // f16 1.022-1.028 -> 1.009-1.011. (Not a shared helper: with the flag's address
    // computed before the barrier, as a call computes it, the SASS differs.)
    __syncthreads();
    if (tid == 0) {
        wave_fence();
        wave_store_flag(flags + br * tgx + bc, gp + 1u);
    }
#endif
}
#endif

// GNN association on the GPU (launched by tracking/cuda/assign.rs): clusters of tracks
// linked by the gated pairs an optimal assignment can hold, found by a lock-free
// union-find, then one optimal assignment per cluster with a miss choice per track: each
// small cluster solved by one thread, each larger one by one block.
//
// Input: the gated pairs as compressed rows by track, `start` [n + 1], `det` [m]
// (ascending within a row) and `ll` [m]; a pair costs -(gain + ll), a miss `miss`. Only
// live pairs (costing less than a miss: associate::live_pairs) take part anywhere: a
// pair that costs a miss or more is never in an optimal assignment, and without them
// dense clutter no longer chains 10^5 tracks into one cluster.
// Output: `pick` [n], the detection of each track or -1.
//
// Launch sequence, one thread per track unless said:
//   ga_init     (max(n, ndet) threads) parent[i] = i, size 0, owner/dloc empty, counters 0
//   ga_owner    owner[d] = the smallest track gating detection d
//   ga_union    unite each track with the owners of its detections
//   ga_root     parent[i] = root of i; size[root] += 1 (tracks with live pairs)
//   ga_place    no live pairs: pick -1; a cluster of one track: solved here; the root of
//               a larger cluster takes a cluster id and a span of `member`
//   ga_member   each track of a larger cluster writes itself into its cluster's span
//   ga_solve    (one thread per cluster) the cluster's assignment by the dense method,
//               or, past the thread's limits, its id appended to `blk`
//   ga_solve_block (one block per cluster of `blk`) the assignment by the sparse method,
//               or, past the block's limits, the id appended to `big` for the host
//
// The thread's solver is the shortest augmenting path method of tracking/assign.rs
// (Crouse's form of Jonker-Volgenant, `solve_wide` and `augmenting_path`) step for step,
// on the same matrix: rows the cluster's tracks in ascending order, columns its
// detections in ascending order, then one miss column per track; the block's is the same
// method in its sparse form (`solve_sparse_with_misses`), each Dijkstra step's nearest
// column found by a block reduction under the host heap's order. The same arithmetic and
// the same tie rules, and the host's choice between its dense and sparse solvers made by
// the same limits (associate::dense_fits), so that the device and the host pick the same
// assignment, ties included.
//
// Defined by the launcher: GA_MAXR (most tracks of a cluster solved by a thread), GA_MAXC
// (most columns, detections + tracks, at most 254), GA_BROWS, GA_BCOLS, GA_BPAIRS (most
// tracks, columns and live pairs of a cluster solved by a block; GA_BCOLS a power of
// two, all below 65535), GA_BTHREADS (threads of a block, a power of two), GA_INF.

#define GA_NONE 0xffffffffu
#define GA_FREE 255
#define GA_BFREE 0xffffu

// Whether a pair of log-likelihood ll costs less than a miss (associate::live_pairs).
__device__ __forceinline__ bool ga_live(double ll, double gain, double miss) {
    return -(gain + ll) < miss;
}

// Whether track i has a live pair.
__device__ __forceinline__ bool ga_any_live(const unsigned* start, const double* ll, unsigned i,
                                            double gain, double miss) {
    for (unsigned k = start[i]; k < start[i + 1]; ++k)
        if (ga_live(ll[k], gain, miss)) return true;
    return false;
}

// The root of x. Parents only ever point to smaller indices (a root is hooked under a
// smaller one), so the chain ends; halving the path as it goes is safe beside other
// threads because every write replaces a parent by one of its ancestors.
// l[0..n) in ascending order by insertion sort (a cluster's tracks, a detection's
// pairs: short lists); also used by jpda.cu.
__device__ __forceinline__ void ga_sort(unsigned* l, unsigned n) {
    for (unsigned a = 1; a < n; ++a) {
        const unsigned t = l[a];
        unsigned b = a;
        while (b > 0 && l[b - 1] > t) {
            l[b] = l[b - 1];
            --b;
        }
        l[b] = t;
    }
}

__device__ __forceinline__ unsigned ga_find(volatile unsigned* parent, unsigned x) {
    unsigned p = parent[x];
    while (p != x) {
        const unsigned g = parent[p];
        if (g != p) parent[x] = g;
        x = p;
        p = g;
    }
    return x;
}

// Joins the sets of a and b: the larger root is hooked under the smaller by
// compare-and-swap, retried from the new roots when another thread hooked it first.
__device__ __forceinline__ void ga_unite(volatile unsigned* parent, unsigned a, unsigned b) {
    for (;;) {
        a = ga_find(parent, a);
        b = ga_find(parent, b);
        if (a == b) return;
        if (a < b) {
            const unsigned t = a;
            a = b;
            b = t;
        }
        if (atomicCAS((unsigned*)&parent[a], a, b) == a) return;
    }
}

extern "C" __global__ void ga_init(unsigned n, unsigned ndet, unsigned* parent, unsigned* size,
                                   unsigned* owner, unsigned* dloc, unsigned* counters) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        parent[i] = i;
        size[i] = 0;
    }
    if (i < ndet) {
        owner[i] = GA_NONE;
        dloc[i] = GA_NONE;
    }
    if (i < 5) counters[i] = 0;
}

extern "C" __global__ void ga_owner(unsigned n, const unsigned* start, const unsigned* det,
                                    const double* ll, double gain, double miss, unsigned* owner) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (unsigned k = start[i]; k < start[i + 1]; ++k)
        if (ga_live(ll[k], gain, miss)) atomicMin(&owner[det[k]], i);
}

extern "C" __global__ void ga_union(unsigned n, const unsigned* start, const unsigned* det,
                                    const double* ll, double gain, double miss,
                                    const unsigned* owner, unsigned* parent) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (unsigned k = start[i]; k < start[i + 1]; ++k) {
        if (!ga_live(ll[k], gain, miss)) continue;
        const unsigned o = owner[det[k]];
        if (o != i) ga_unite(parent, i, o);
    }
}

// The find here only reads: a thread halving a path could otherwise write back a parent
// it read before another thread set it to the root, and leave a non-root behind.
extern "C" __global__ void ga_root(unsigned n, const unsigned* start, const double* ll,
                                   double gain, double miss, unsigned* parent, unsigned* size) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !ga_any_live(start, ll, i, gain, miss)) return;
    volatile unsigned* vp = parent;
    unsigned r = i, p = vp[i];
    while (p != r) {
        r = p;
        p = vp[r];
    }
    vp[i] = r;
    atomicAdd(&size[r], 1u);
}

// counters[0]: clusters of two tracks or more, counters[1]: their tracks, counters[2]:
// clusters left to the host, counters[3]: tracks of the largest cluster, counters[4]:
// clusters handed to the block solver.
extern "C" __global__ void ga_place(unsigned n, const unsigned* start, const unsigned* det,
                                    const double* ll, double gain, double miss,
                                    const unsigned* parent, const unsigned* size, unsigned* cid,
                                    unsigned* cstart, unsigned* csize, unsigned* cfill,
                                    unsigned* counters, int* pick) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned a = start[i], b = start[i + 1];
    if (!ga_any_live(start, ll, i, gain, miss)) {
        pick[i] = -1;
        return;
    }
    const unsigned r = parent[i];
    const unsigned s = size[r];
    if (s == 1) {
        // One row: the solver scans the columns from the last (the miss) to the first
        // and keeps the lowest cost, the later one on a tie.
        double lowest = miss;
        int choice = -1;
        for (unsigned k = b; k-- > a;) {
            if (!ga_live(ll[k], gain, miss)) continue;
            const double c = -(gain + ll[k]);
            if (c <= lowest) {
                lowest = c;
                choice = (int)det[k];
            }
        }
        pick[i] = choice;
        return;
    }
    if (r == i) {
        const unsigned c = atomicAdd(&counters[0], 1u);
        cid[i] = c;
        cstart[c] = atomicAdd(&counters[1], s);
        csize[c] = s;
        cfill[c] = 0;
        atomicMax(&counters[3], s);
    }
}

extern "C" __global__ void ga_member(unsigned n, const unsigned* start, const double* ll,
                                     double gain, double miss, const unsigned* parent,
                                     const unsigned* size, const unsigned* cid,
                                     const unsigned* cstart, unsigned* cfill, unsigned* member) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !ga_any_live(start, ll, i, gain, miss)) return;
    const unsigned r = parent[i];
    if (size[r] < 2) return;
    const unsigned c = cid[r];
    member[cstart[c] + atomicAdd(&cfill[c], 1u)] = i;
}

extern "C" __global__ void ga_solve(const unsigned* counters, const unsigned* cstart,
                                    const unsigned* csize, unsigned* member,
                                    const unsigned* start, const unsigned* det,
                                    const double* ll, double gain, double miss, unsigned* dloc,
                                    unsigned* blk, unsigned* big, int* pick) {
    (void)big;  // ga_solve_block's list: the two solvers take one parameter list
    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= counters[0]) return;
    const unsigned rows = csize[c];
    unsigned* tr = member + cstart[c];
    if (rows > GA_MAXR) {
        blk[atomicAdd((unsigned*)&counters[4], 1u)] = c;
        return;
    }
    // The rows in ascending track order (written back, so the host finds them sorted
    // too).
    ga_sort(tr, rows);
    // The cluster's detections: each belongs to this cluster alone, so its `dloc` entry
    // is this thread's to write.
    unsigned dl[GA_MAXC];
    unsigned nd = 0;
    const unsigned limit = GA_MAXC - rows;
    for (unsigned r = 0; r < rows; ++r) {
        const unsigned t = tr[r];
        for (unsigned k = start[t]; k < start[t + 1]; ++k) {
            if (!ga_live(ll[k], gain, miss)) continue;
            const unsigned d = det[k];
            if (dloc[d] != GA_NONE) continue;
            if (nd == limit) {
                // The block solver finds the detections afresh from empty entries.
                for (unsigned l = 0; l < nd; ++l) dloc[dl[l]] = GA_NONE;
                blk[atomicAdd((unsigned*)&counters[4], 1u)] = c;
                return;
            }
            dloc[d] = nd;
            dl[nd++] = d;
        }
    }
    for (unsigned a = 1; a < nd; ++a) {
        const unsigned t = dl[a];
        unsigned b = a;
        while (b > 0 && dl[b - 1] > t) {
            dl[b] = dl[b - 1];
            --b;
        }
        dl[b] = t;
    }
    for (unsigned l = 0; l < nd; ++l) dloc[dl[l]] = l;

    // Shortest augmenting paths (assign.rs, `solve_wide` and `augmenting_path`).
    const unsigned cols = nd + rows;
    double u[GA_MAXR], v[GA_MAXC], dist[GA_MAXC];
    unsigned char path[GA_MAXC], col4row[GA_MAXR], row4col[GA_MAXC], remaining[GA_MAXC];
    bool seen_row[GA_MAXR], seen_col[GA_MAXC];
    for (unsigned r = 0; r < rows; ++r) {
        u[r] = 0.0;
        col4row[r] = GA_FREE;
    }
    for (unsigned j = 0; j < cols; ++j) {
        v[j] = 0.0;
        row4col[j] = GA_FREE;
    }
    for (unsigned cur = 0; cur < rows; ++cur) {
        double min_val = 0.0;
        unsigned n_rem = cols;
        for (unsigned it = 0; it < cols; ++it) {
            remaining[it] = (unsigned char)(cols - it - 1);
            seen_col[it] = false;
            dist[it] = GA_INF;
        }
        for (unsigned r = 0; r < rows; ++r) seen_row[r] = false;
        unsigned i = cur;
        unsigned sink;
        for (;;) {
            seen_row[i] = true;
            // Only the row's gated pairs and its own miss are finite; a forbidden pair
            // never lowers a distance.
            const unsigned t = tr[i];
            for (unsigned k = start[t]; k < start[t + 1]; ++k) {
                if (!ga_live(ll[k], gain, miss)) continue;
                const unsigned j = dloc[det[k]];
                if (seen_col[j]) continue;
                const double rc = min_val + -(gain + ll[k]) - u[i] - v[j];
                if (rc < dist[j]) {
                    path[j] = (unsigned char)i;
                    dist[j] = rc;
                }
            }
            {
                const unsigned j = nd + i;
                if (!seen_col[j]) {
                    const double rc = min_val + miss - u[i] - v[j];
                    if (rc < dist[j]) {
                        path[j] = (unsigned char)i;
                        dist[j] = rc;
                    }
                }
            }
            unsigned index = 0;
            double lowest = GA_INF;
            for (unsigned it = 0; it < n_rem; ++it) {
                const unsigned j = remaining[it];
                if (dist[j] < lowest || (dist[j] == lowest && row4col[j] == GA_FREE)) {
                    lowest = dist[j];
                    index = it;
                }
            }
            // Finite: the current row's own miss column is always free.
            min_val = lowest;
            const unsigned j = remaining[index];
            seen_col[j] = true;
            --n_rem;
            remaining[index] = remaining[n_rem];
            if (row4col[j] == GA_FREE) {
                sink = j;
                break;
            }
            i = row4col[j];
        }
        u[cur] += min_val;
        for (unsigned r = 0; r < rows; ++r)
            if (seen_row[r] && r != cur) u[r] += min_val - dist[col4row[r]];
        for (unsigned j = 0; j < cols; ++j)
            if (seen_col[j]) v[j] -= min_val - dist[j];
        unsigned j = sink;
        for (;;) {
            const unsigned r = path[j];
            row4col[j] = (unsigned char)r;
            const unsigned t = col4row[r];
            col4row[r] = (unsigned char)j;
            j = t;
            if (r == cur) break;
        }
    }
    for (unsigned r = 0; r < rows; ++r) {
        const unsigned j = col4row[r];
        pick[tr[r]] = j < nd ? (int)dl[j] : -1;
    }
}

// Rust's f64::total_cmp as an integer order (-0 before +0), the heap order of the host's
// sparse solver.
__device__ __forceinline__ long long ga_order(double x) {
    const long long b = __double_as_longlong(x);
    return b ^ (long long)((unsigned long long)(b >> 63) >> 1);
}

// Whether column a (distance key ka, assigned or not) comes off the host's heap before
// column b: smaller distance, then unassigned, then the smaller index.
__device__ __forceinline__ bool ga_before(long long ka, bool aa, unsigned a, long long kb, bool ab,
                                          unsigned b) {
    if (ka != kb) return ka < kb;
    if (aa != ab) return !aa;
    return a < b;
}

// The block's sparse solver, one cluster of `blk` after another. Shared memory holds the
// cluster: its tracks (ascending), their live pairs (global index and local column), and
// the solver's duals, distances and matches; the Dijkstra search relaxes the reached
// row's pairs in parallel and takes the nearest unreached column by a block reduction.
extern "C" __global__ void ga_solve_block(const unsigned* counters, const unsigned* cstart,
                                          const unsigned* csize, const unsigned* member,
                                          const unsigned* start, const unsigned* det,
                                          const double* ll, double gain, double miss,
                                          unsigned* dloc, const unsigned* blk, unsigned* big,
                                          int* pick) {
    __shared__ unsigned tr[GA_BROWS];
    __shared__ unsigned short rs[GA_BROWS + 1];
    __shared__ unsigned pk[GA_BPAIRS];
    __shared__ unsigned short pc[GA_BPAIRS];
    __shared__ double u[GA_BROWS];
    __shared__ double v[GA_BCOLS];
    __shared__ double dist[GA_BCOLS];
    __shared__ unsigned short path[GA_BCOLS], row4col[GA_BCOLS], col4row[GA_BROWS];
    __shared__ unsigned char seen_col[GA_BCOLS], seen_row[GA_BROWS];
    __shared__ long long rkey[GA_BTHREADS];
    __shared__ unsigned ridx[GA_BTHREADS];
    __shared__ unsigned nd_s, np_s, fail_s;
    const unsigned tid = threadIdx.x;
    // The unique detections are sorted in `v`'s storage before the solve needs it.
    unsigned* keys = (unsigned*)v;
    for (unsigned q = blockIdx.x; q < counters[4]; q += gridDim.x) {
        const unsigned c = blk[q];
        const unsigned rows = csize[c];
        const unsigned* mem = member + cstart[c];
        if (rows > GA_BROWS) {
            if (tid == 0) big[atomicAdd((unsigned*)&counters[2], 1u)] = c;
            continue;
        }
        // Tracks in ascending order (each one's rank among the cluster's distinct ids).
        for (unsigned a = tid; a < rows; a += GA_BTHREADS) {
            const unsigned t = mem[a];
            unsigned r = 0;
            for (unsigned b = 0; b < rows; ++b) r += mem[b] < t;
            tr[r] = t;
        }
        if (tid == 0) {
            nd_s = 0;
            fail_s = 0;
        }
        __syncthreads();
        // Each row's live pairs: counts, their offsets, the pairs.
        for (unsigned r = tid; r < rows; r += GA_BTHREADS) {
            const unsigned t = tr[r];
            unsigned cnt = 0;
            for (unsigned k = start[t]; k < start[t + 1]; ++k) cnt += ga_live(ll[k], gain, miss);
            // Clamped: a larger cluster fails the pair limit below.
            rs[r + 1] = (unsigned short)(cnt < GA_BPAIRS ? cnt : GA_BPAIRS);
        }
        __syncthreads();
        if (tid == 0) {
            unsigned total = 0;
            rs[0] = 0;
            for (unsigned r = 0; r < rows; ++r) {
                total += rs[r + 1];
                if (total > GA_BPAIRS) {
                    fail_s = 1;
                    break;
                }
                rs[r + 1] = (unsigned short)total;
            }
            np_s = total;
        }
        __syncthreads();
        if (fail_s) {
            if (tid == 0) big[atomicAdd((unsigned*)&counters[2], 1u)] = c;
            __syncthreads();
            continue;
        }
        const unsigned np = np_s;
        for (unsigned r = tid; r < rows; r += GA_BTHREADS) {
            const unsigned t = tr[r];
            unsigned p = rs[r];
            for (unsigned k = start[t]; k < start[t + 1]; ++k)
                if (ga_live(ll[k], gain, miss)) pk[p++] = k;
        }
        __syncthreads();
        // The distinct detections: the first pair of each (its dloc entry), gathered
        // unordered, then sorted (bitonic, padded with GA_NONE) into their local indices.
        for (unsigned p = tid; p < np; p += GA_BTHREADS) atomicMin(&dloc[det[pk[p]]], p);
        __syncthreads();
        for (unsigned p = tid; p < np; p += GA_BTHREADS) {
            const unsigned d = det[pk[p]];
            if (dloc[d] == p) {
                const unsigned at = atomicAdd(&nd_s, 1u);
                if (at < 2 * GA_BCOLS) keys[at] = d;
            }
        }
        __syncthreads();
        const unsigned nd = nd_s;
        if (nd + rows > GA_BCOLS) {
            // Past the block's columns: the host solves it (dloc is not read there).
            if (tid == 0) big[atomicAdd((unsigned*)&counters[2], 1u)] = c;
            __syncthreads();
            continue;
        }
        unsigned width = 1;
        while (width < nd) width <<= 1;
        for (unsigned a = nd + tid; a < width; a += GA_BTHREADS) keys[a] = GA_NONE;
        __syncthreads();
        for (unsigned kk = 2; kk <= width; kk <<= 1) {
            for (unsigned jj = kk >> 1; jj > 0; jj >>= 1) {
                for (unsigned a = tid; a < width; a += GA_BTHREADS) {
                    const unsigned b = a ^ jj;
                    if (b > a) {
                        const bool up = (a & kk) == 0;
                        const unsigned x = keys[a], y = keys[b];
                        if ((x > y) == up) {
                            keys[a] = y;
                            keys[b] = x;
                        }
                    }
                }
                __syncthreads();
            }
        }
        for (unsigned l = tid; l < nd; l += GA_BTHREADS) dloc[keys[l]] = l;
        __syncthreads();
        for (unsigned p = tid; p < np; p += GA_BTHREADS) pc[p] = (unsigned short)dloc[det[pk[p]]];
        const unsigned cols = nd + rows;
        __syncthreads();
        for (unsigned r = tid; r < rows; r += GA_BTHREADS) {
            u[r] = 0.0;
            col4row[r] = GA_BFREE;
            seen_row[r] = 0;
        }
        for (unsigned j = tid; j < cols; j += GA_BTHREADS) {
            v[j] = 0.0;
            dist[j] = GA_INF;
            row4col[j] = GA_BFREE;
            seen_col[j] = 0;
        }
        __syncthreads();
        // Shortest augmenting paths (assign.rs, `solve_sparse_with_misses`).
        for (unsigned cur = 0; cur < rows; ++cur) {
            double min_val = 0.0;
            unsigned i = cur;
            unsigned sink;
            for (;;) {
                // Relax row i's live pairs and its own miss column (distinct columns).
                const unsigned a = rs[i], e = rs[i + 1] - a;
                for (unsigned x = tid; x <= e; x += GA_BTHREADS) {
                    const unsigned j = x < e ? pc[a + x] : nd + i;
                    const double cost = x < e ? -(gain + ll[pk[a + x]]) : miss;
                    if (seen_col[j]) continue;
                    const double r = min_val + cost - u[i] - v[j];
                    if (r < dist[j]) {
                        dist[j] = r;
                        path[j] = (unsigned short)i;
                    }
                }
                if (tid == 0) seen_row[i] = 1;
                __syncthreads();
                // The nearest column not yet reached, in the heap's order.
                long long bk = 0;
                unsigned bj = GA_NONE;
                bool ba = false;
                for (unsigned j = tid; j < cols; j += GA_BTHREADS) {
                    if (seen_col[j] || !(dist[j] < GA_INF)) continue;
                    const long long k = ga_order(dist[j]);
                    const bool as = row4col[j] != GA_BFREE;
                    if (bj == GA_NONE || ga_before(k, as, j, bk, ba, bj)) {
                        bk = k;
                        ba = as;
                        bj = j;
                    }
                }
                rkey[tid] = bk;
                ridx[tid] = bj;
                __syncthreads();
                for (unsigned w = GA_BTHREADS / 2; w > 0; w >>= 1) {
                    if (tid < w) {
                        const unsigned oj = ridx[tid + w];
                        const unsigned mj = ridx[tid];
                        if (oj != GA_NONE &&
                            (mj == GA_NONE ||
                             ga_before(rkey[tid + w], row4col[oj] != GA_BFREE, oj, rkey[tid],
                                       row4col[mj] != GA_BFREE, mj))) {
                            rkey[tid] = rkey[tid + w];
                            ridx[tid] = oj;
                        }
                    }
                    __syncthreads();
                }
                // Never empty: row i's own miss column is free until row i takes it.
                const unsigned j = ridx[0];
                min_val = dist[j];
                const unsigned owner_row = row4col[j];
                if (tid == 0) seen_col[j] = 1;
                // seen_col[j] set before the next row's relaxation; ridx[0] read by all.
                __syncthreads();
                if (owner_row == GA_BFREE) {
                    sink = j;
                    break;
                }
                i = owner_row;
            }
            __syncthreads();
            // Duals (before the augmentation changes col4row), then the augmentation.
            for (unsigned r = tid; r < rows; r += GA_BTHREADS) {
                if (r == cur) u[r] += min_val;
                else if (seen_row[r]) u[r] += min_val - dist[col4row[r]];
            }
            for (unsigned j = tid; j < cols; j += GA_BTHREADS)
                if (seen_col[j]) v[j] -= min_val - dist[j];
            __syncthreads();
            if (tid == 0) {
                unsigned j = sink;
                for (;;) {
                    const unsigned r = path[j];
                    row4col[j] = (unsigned short)r;
                    const unsigned t = col4row[r];
                    col4row[r] = (unsigned short)j;
                    j = t;
                    if (r == cur) break;
                }
            }
            for (unsigned r = tid; r < rows; r += GA_BTHREADS) seen_row[r] = 0;
            for (unsigned j = tid; j < cols; j += GA_BTHREADS) {
                dist[j] = GA_INF;
                seen_col[j] = 0;
            }
            __syncthreads();
        }
        for (unsigned r = tid; r < rows; r += GA_BTHREADS) {
            const unsigned j = col4row[r];
            int d = -1;
            if (j < nd)
                for (unsigned p = rs[r]; p < rs[r + 1]; ++p)
                    if (pc[p] == j) d = (int)det[pk[p]];
            pick[tr[r]] = d;
        }
        __syncthreads();
    }
}

// Writes the host's picks of the clusters it solved.
extern "C" __global__ void ga_scatter(unsigned count, const unsigned* track, const int* value,
                                      int* pick) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) pick[track[i]] = value[i];
}

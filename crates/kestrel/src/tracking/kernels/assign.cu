// GNN association on the GPU (launched by tracking/gpu_assign.rs): clusters of tracks
// linked by shared gated detections, found by a lock-free union-find, then one optimal
// assignment per cluster with a miss choice per track, each small cluster solved by one
// thread.
//
// Input: the gated pairs as compressed rows by track, `start` [n + 1], `det` [m]
// (ascending within a row) and `ll` [m]; a pair costs -(gain + ll), a miss `miss`.
// Output: `pick` [n], the detection of each track or -1.
//
// Launch sequence, one thread per track unless said:
//   ga_init     (max(n, ndet) threads) parent[i] = i, size 0, owner/dloc empty, counters 0
//   ga_owner    owner[d] = the smallest track gating detection d
//   ga_union    unite each track with the owners of its detections
//   ga_root     parent[i] = root of i; size[root] += 1 (tracks with pairs)
//   ga_place    no pairs: pick -1; a cluster of one track: solved here; the root of a
//               larger cluster takes a cluster id and a span of `member`
//   ga_member   each track of a larger cluster writes itself into its cluster's span
//   ga_solve    (one thread per cluster) the cluster's assignment, or, past the size
//               limits, its id appended to `big` for the host
//
// The per-cluster solver is the shortest augmenting path method of tracking/assign.rs
// (Crouse's form of Jonker-Volgenant) step for step, on the same matrix: rows the
// cluster's tracks in ascending order, columns its detections in ascending order, then
// one miss column per track; the same arithmetic and the same tie rules, so that the
// device and the host pick the same assignment.
//
// Defined by the launcher: GA_MAXR (most tracks of a cluster solved on the device),
// GA_MAXC (most columns, detections + tracks, at most 254), GA_INF.

#define GA_NONE 0xffffffffu
#define GA_FREE 255

// The root of x. Parents only ever point to smaller indices (a root is hooked under a
// smaller one), so the chain ends; halving the path as it goes is safe beside other
// threads because every write replaces a parent by one of its ancestors.
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
    if (i < 4) counters[i] = 0;
}

extern "C" __global__ void ga_owner(unsigned n, const unsigned* start, const unsigned* det,
                                    unsigned* owner) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (unsigned k = start[i]; k < start[i + 1]; ++k) atomicMin(&owner[det[k]], i);
}

extern "C" __global__ void ga_union(unsigned n, const unsigned* start, const unsigned* det,
                                    const unsigned* owner, unsigned* parent) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (unsigned k = start[i]; k < start[i + 1]; ++k) {
        const unsigned o = owner[det[k]];
        if (o != i) ga_unite(parent, i, o);
    }
}

// The find here only reads: a thread halving a path could otherwise write back a parent
// it read before another thread set it to the root, and leave a non-root behind.
extern "C" __global__ void ga_root(unsigned n, const unsigned* start, unsigned* parent,
                                   unsigned* size) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || start[i] == start[i + 1]) return;
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
// clusters left to the host, counters[3]: tracks of the largest cluster.
extern "C" __global__ void ga_place(unsigned n, const unsigned* start, const unsigned* det,
                                    const double* ll, double gain, double miss,
                                    const unsigned* parent, const unsigned* size, unsigned* cid,
                                    unsigned* cstart, unsigned* csize, unsigned* cfill,
                                    unsigned* counters, int* pick) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned a = start[i], b = start[i + 1];
    if (a == b) {
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

extern "C" __global__ void ga_member(unsigned n, const unsigned* start, const unsigned* parent,
                                     const unsigned* size, const unsigned* cid,
                                     const unsigned* cstart, unsigned* cfill, unsigned* member) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || start[i] == start[i + 1]) return;
    const unsigned r = parent[i];
    if (size[r] < 2) return;
    const unsigned c = cid[r];
    member[cstart[c] + atomicAdd(&cfill[c], 1u)] = i;
}

extern "C" __global__ void ga_solve(const unsigned* counters, const unsigned* cstart,
                                    const unsigned* csize, unsigned* member,
                                    const unsigned* start, const unsigned* det,
                                    const double* ll, double gain, double miss, unsigned* dloc,
                                    unsigned* big, int* pick) {
    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= counters[0]) return;
    const unsigned rows = csize[c];
    unsigned* tr = member + cstart[c];
    if (rows > GA_MAXR) {
        big[atomicAdd((unsigned*)&counters[2], 1u)] = c;
        return;
    }
    // The rows in ascending track order (insertion sort; written back, so the host
    // finds them sorted too).
    for (unsigned a = 1; a < rows; ++a) {
        const unsigned t = tr[a];
        unsigned b = a;
        while (b > 0 && tr[b - 1] > t) {
            tr[b] = tr[b - 1];
            --b;
        }
        tr[b] = t;
    }
    // The cluster's detections: each belongs to this cluster alone, so its `dloc` entry
    // is this thread's to write.
    unsigned dl[GA_MAXC];
    unsigned nd = 0;
    const unsigned limit = GA_MAXC - rows;
    for (unsigned r = 0; r < rows; ++r) {
        const unsigned t = tr[r];
        for (unsigned k = start[t]; k < start[t + 1]; ++k) {
            const unsigned d = det[k];
            if (dloc[d] != GA_NONE) continue;
            if (nd == limit) {
                big[atomicAdd((unsigned*)&counters[2], 1u)] = c;
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

// Writes the host's picks of the clusters it solved.
extern "C" __global__ void ga_scatter(unsigned count, const unsigned* track, const int* value,
                                      int* pick) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) pick[track[i]] = value[i];
}

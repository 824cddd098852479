// JPDA marginals on the GPU (launched by tracking/cuda/jpda.rs), compiled after
// assign.cu, whose union-find gives the clusters: with `miss` infinite every gated pair
// takes part (JPDA weighs them all). Per cluster, as associate::jpda on the host:
//
//   gj_weights  (a thread per track) the track's weights scaled by its largest:
//               top = max(log_miss, gain + ll_k), m = exp(log_miss - top),
//               a_k = exp(gain + ll_k - top)
//   gj_single   (a thread per track) a track alone in its cluster: its one-row
//               enumeration, total = m + a_0 + a_1 + ..., beta = weight / total
//   gj_classify (a thread per cluster of two tracks or more) the number of joint events
//               prod (1 + pairs of a track); up to `exact` of them (and GJ_MAXR tracks):
//               every event enumerated by this thread in the host's order (tracks
//               ascending, "miss" then each free detection), the marginals summed in
//               the same order; otherwise the cluster is flagged for belief propagation
//   gj_dcount, gj_dplace, gj_dfill, gj_dsort  (once, when a cluster is flagged) each
//               detection's pairs among the flagged clusters, listed in ascending pair
//               order: pairs are laid track after track, so this is the host's order of
//               the rows (tracks ascending) that sum a detection's column
//   gj_mu, gj_col, gj_nu, gj_check  (one round of loopy belief propagation over the
//               pairs of every flagged cluster not yet converged, Williams & Lau 2014 as
//               associate::jpda_lbp): a cluster stops, as on the host, after the round
//               whose largest change of a message is below 1e-13; the launcher repeats
//               the rounds while a cluster is still going (at most 500), reading the
//               count back each round
//   gj_final    (a thread per flagged track) beta0 = m / s, beta_k = a_k nu_k / s
//
// Outputs: beta0 [n] (1 for a track without pairs) and beta [m] in the pairs' order.
// Every sum runs in the host's order with the host's roundings (products by __dmul_rn,
// never fused into the sum they feed; a detection's column summed by one thread over its
// pairs in ascending order), so both methods give the host's marginals to the rounding
// of exp, the same bits from run to run. clbp[c]: 0 enumerated, 1 propagating, 2
// propagated and converged.
//
// Defined by the launcher: GJ_MAXR (most tracks of an enumerated cluster).

extern "C" __global__ void gj_weights(unsigned n, const unsigned* start, const double* ll,
                                      double gain, double log_miss, double* mw, double* a) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double top = log_miss;
    for (unsigned k = start[i]; k < start[i + 1]; ++k) top = fmax(top, gain + ll[k]);
    mw[i] = exp(log_miss - top);
    for (unsigned k = start[i]; k < start[i + 1]; ++k) a[k] = exp(gain + ll[k] - top);
}

extern "C" __global__ void gj_single(unsigned n, const unsigned* start, const unsigned* parent,
                                     const unsigned* size, const double* mw, const double* a,
                                     double* beta0, double* beta) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned s = start[i], e = start[i + 1];
    if (s == e) {
        beta0[i] = 1.0;
        return;
    }
    if (size[parent[i]] != 1) return;
    double total = mw[i];
    for (unsigned k = s; k < e; ++k) total += a[k];
    if (total > 0.0) {
        beta0[i] = mw[i] / total;
        for (unsigned k = s; k < e; ++k) beta[k] = a[k] / total;
    } else {
        beta0[i] = mw[i];
        for (unsigned k = s; k < e; ++k) beta[k] = a[k];
    }
}

// counters[0] clusters of two tracks or more (from ga_place); jc[0] enumerated clusters,
// jc[1] clusters flagged for belief propagation, jc[2] their tracks (jc[3]: gj_dplace's
// running count of pairs).
extern "C" __global__ void gj_classify(const unsigned* counters, const unsigned* cstart,
                                       const unsigned* csize, unsigned* member,
                                       const unsigned* start, const unsigned* det,
                                       const double* mw, const double* a, double exact,
                                       unsigned* dloc, unsigned* clbp,
                                       unsigned long long* cchange, unsigned* jc,
                                       double* beta0, double* beta) {
    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= counters[0]) return;
    const unsigned rows = csize[c];
    unsigned* tr = member + cstart[c];
    double events = 1.0;
    bool enumerate = rows <= GJ_MAXR;
    for (unsigned r = 0; r < rows && enumerate; ++r) {
        events *= 1.0 + (double)(start[tr[r] + 1] - start[tr[r]]);
        enumerate = events <= exact;
    }
    if (!enumerate) {
        clbp[c] = 1;
        cchange[c] = 0ull;
        atomicAdd(&jc[1], 1u);
        atomicAdd(&jc[2], rows);
        return;
    }
    clbp[c] = 0;
    atomicAdd(&jc[0], 1u);
    // Tracks ascending, as the host's rows.
    ga_sort(tr, rows);
    double b0[GJ_MAXR], w_at[GJ_MAXR + 1];
    int choice[GJ_MAXR];
    for (unsigned r = 0; r < rows; ++r) {
        b0[r] = 0.0;
        for (unsigned k = start[tr[r]]; k < start[tr[r] + 1]; ++k) beta[k] = 0.0;
    }
    // Depth-first over the rows: choice -2 not started, -1 the miss, c >= 0 the row's
    // c-th pair; a detection in use carries a mark in dloc (this cluster's alone).
    double total = 0.0;
    int r = 0;
    w_at[0] = 1.0;
    choice[0] = -2;
    while (r >= 0) {
        if (r == (int)rows) {
            const double w = w_at[rows];
            total += w;
            for (unsigned t = 0; t < rows; ++t) {
                if (choice[t] == -1) b0[t] += w;
                else beta[start[tr[t]] + choice[t]] += w;
            }
            --r;
            continue;
        }
        const unsigned s = start[tr[r]], e = start[tr[r] + 1];
        double w;
        if (choice[r] == -2) {
            choice[r] = -1;
            w = w_at[r] * mw[tr[r]];
        } else {
            if (choice[r] >= 0) dloc[det[s + choice[r]]] = GA_NONE;
            int q = choice[r] + 1;
            while (s + q < e && dloc[det[s + q]] != GA_NONE) ++q;
            if (s + q >= e) {
                choice[r] = -2;
                --r;
                continue;
            }
            choice[r] = q;
            dloc[det[s + q]] = c;
            w = w_at[r] * a[s + q];
        }
        // A zero weight ends the branch, as on the host.
        if (w == 0.0) continue;
        w_at[r + 1] = w;
        ++r;
        if (r < (int)rows) choice[r] = -2;
    }
    for (unsigned p = 0; p < rows; ++p) {
        const unsigned t = tr[p];
        if (total > 0.0) {
            beta0[t] = b0[p] / total;
            for (unsigned k = start[t]; k < start[t + 1]; ++k) beta[k] /= total;
        } else {
            beta0[t] = b0[p];
        }
    }
}

// The belief propagation state of track i's cluster (0: none, 1: propagating, 2: done).
__device__ __forceinline__ unsigned gj_state(unsigned i, const unsigned* start,
                                             const unsigned* parent, const unsigned* size,
                                             const unsigned* cid, const unsigned* clbp) {
    if (start[i] == start[i + 1]) return 0;
    const unsigned r = parent[i];
    return size[r] >= 2 ? clbp[cid[r]] : 0;
}

extern "C" __global__ void gj_init(unsigned m, unsigned ndet, double* nu, unsigned* dn,
                                   unsigned* jc) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < m) nu[k] = 1.0;
    if (k < ndet) dn[k] = 0;
    if (k < 4) jc[k] = 0;
}

// (a thread per track) dn[d]: the pairs of flagged clusters at detection d.
extern "C" __global__ void gj_dcount(unsigned n, const unsigned* start, const unsigned* det,
                                     const unsigned* parent, const unsigned* size,
                                     const unsigned* cid, const unsigned* clbp, unsigned* dn) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || gj_state(i, start, parent, size, cid, clbp) != 1) return;
    for (unsigned k = start[i]; k < start[i + 1]; ++k) atomicAdd(&dn[det[k]], 1u);
}

// (a thread per detection) ds[d]: where detection d's list starts in dp.
extern "C" __global__ void gj_dplace(unsigned ndet, const unsigned* dn, unsigned* ds,
                                     unsigned* dfill, unsigned* jc) {
    const unsigned d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= ndet) return;
    dfill[d] = 0;
    if (dn[d] > 0) ds[d] = atomicAdd(&jc[3], dn[d]);
}

// (a thread per track) each pair of a flagged cluster into its detection's list.
extern "C" __global__ void gj_dfill(unsigned n, const unsigned* start, const unsigned* det,
                                    const unsigned* parent, const unsigned* size,
                                    const unsigned* cid, const unsigned* clbp,
                                    const unsigned* ds, unsigned* dfill, unsigned* dp) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || gj_state(i, start, parent, size, cid, clbp) != 1) return;
    for (unsigned k = start[i]; k < start[i + 1]; ++k)
        dp[ds[det[k]] + atomicAdd(&dfill[det[k]], 1u)] = k;
}

// (a thread per detection) its list in ascending pair order.
extern "C" __global__ void gj_dsort(unsigned ndet, const unsigned* dn, const unsigned* ds,
                                    unsigned* dp) {
    const unsigned d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d < ndet && dn[d] > 1) ga_sort(dp + ds[d], dn[d]);
}

extern "C" __global__ void gj_mu(unsigned n, const unsigned* start, const unsigned* det,
                                 const unsigned* parent, const unsigned* size,
                                 const unsigned* cid, const unsigned* clbp, const double* mw,
                                 const double* a, const double* nu, double* mu) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || gj_state(i, start, parent, size, cid, clbp) != 1) return;
    const unsigned s0 = start[i], e = start[i + 1];
    double sum = 0.0;
    for (unsigned k = s0; k < e; ++k) sum += __dmul_rn(a[k], nu[k]);
    const double s = mw[i] + sum;
    for (unsigned k = s0; k < e; ++k) {
        const double rest = s - __dmul_rn(a[k], nu[k]);
        mu[k] = rest > 0.0 ? a[k] / rest : GA_INF;
    }
}

// (a thread per detection) col[d]: the sum of the messages to detection d, in its list's
// order, from 0 as the host's; thread 0 clears the count of clusters going.
extern "C" __global__ void gj_col(unsigned ndet, const unsigned* dn, const unsigned* ds,
                                  const unsigned* dp, const double* mu, double* col,
                                  unsigned* active) {
    const unsigned d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d == 0) *active = 0;
    if (d >= ndet || dn[d] == 0) return;
    const unsigned* l = dp + ds[d];
    double c = 0.0;
    for (unsigned p = 0; p < dn[d]; ++p) c += mu[l[p]];
    col[d] = c;
}

extern "C" __global__ void gj_nu(unsigned n, const unsigned* start, const unsigned* det,
                                 const unsigned* parent, const unsigned* size,
                                 const unsigned* cid, const unsigned* clbp, const double* mu,
                                 const double* col, double* nu, unsigned long long* cchange) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || gj_state(i, start, parent, size, cid, clbp) != 1) return;
    double most = 0.0;
    for (unsigned k = start[i]; k < start[i + 1]; ++k) {
        const double v = 1.0 / (1.0 + col[det[k]] - mu[k]);
        most = fmax(most, fabs(v - nu[k]));
        nu[k] = v;
    }
    // Non-negative doubles order as their bits.
    atomicMax(&cchange[cid[parent[i]]], (unsigned long long)__double_as_longlong(most));
}

// (a thread per cluster) A propagating cluster whose largest change this round is below
// the host's 1e-13 is done; the others are counted in `active`.
extern "C" __global__ void gj_check(const unsigned* counters, unsigned* clbp,
                                    unsigned long long* cchange, unsigned* active) {
    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= counters[0] || clbp[c] != 1) return;
    if (__longlong_as_double((long long)cchange[c]) < 1e-13) clbp[c] = 2;
    else atomicAdd(active, 1u);
    cchange[c] = 0ull;
}

extern "C" __global__ void gj_final(unsigned n, const unsigned* start, const unsigned* parent,
                                    const unsigned* size, const unsigned* cid,
                                    const unsigned* clbp, const double* mw, const double* a,
                                    const double* nu, double* beta0, double* beta) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || gj_state(i, start, parent, size, cid, clbp) == 0) return;
    const unsigned s0 = start[i], e = start[i + 1];
    double sum = 0.0;
    for (unsigned k = s0; k < e; ++k) sum += __dmul_rn(a[k], nu[k]);
    const double s = mw[i] + sum;
    beta0[i] = mw[i] / s;
    for (unsigned k = s0; k < e; ++k) beta[k] = __dmul_rn(a[k], nu[k]) / s;
}

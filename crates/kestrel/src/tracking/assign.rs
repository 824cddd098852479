//! Optimal 2-D assignment: the shortest augmenting path method (Jonker & Volgenant 1987,
//! in the rectangular form of Crouse, "On implementing 2D rectangular assignment
//! algorithms", IEEE TAES 2016, the algorithm behind SciPy's `linear_sum_assignment`).
//!
//! Rows are assigned to distinct columns, every row to one column, minimising the total
//! cost; a cost of `f64::INFINITY` forbids a pair. With `rows > cols` the problem is
//! solved transposed. The dual variables `u`, `v` stay feasible (`c_ij - u_i - v_j >= 0`)
//! and each row is added by one Dijkstra search over reduced costs, so the whole solve
//! is `O(rows^2 cols)` and exact.

/// Buffers of the solver, reusable across problems so that many small problems allocate
/// nothing after the first.
#[derive(Default, Debug)]
pub struct Assignment {
    u: Vec<f64>,
    v: Vec<f64>,
    dist: Vec<f64>,
    path: Vec<usize>,
    col4row: Vec<usize>,
    row4col: Vec<usize>,
    seen_row: Vec<bool>,
    seen_col: Vec<bool>,
    remaining: Vec<usize>,
    transposed: Vec<f64>,
}

const NONE: usize = usize::MAX;

impl Assignment {
    /// A solver with no buffers yet (they grow to the largest problem solved).
    pub fn new() -> Self {
        Self::default()
    }

    /// Solves the problem with the row-major `rows x cols` matrix `cost` and returns, for
    /// each row, its column (when `rows <= cols`, every row has one; when `rows > cols`,
    /// every column has one row and the other rows get `None`). `None` overall: no
    /// assignment avoids the forbidden (infinite) pairs, or a cost is NaN or `-inf`.
    pub fn solve(&mut self, rows: usize, cols: usize, cost: &[f64]) -> Option<Vec<Option<usize>>> {
        assert_eq!(cost.len(), rows * cols, "cost matrix of the wrong size");
        if cost.iter().any(|c| c.is_nan() || *c == f64::NEG_INFINITY) {
            return None;
        }
        if rows == 0 || cols == 0 {
            return Some(vec![None; rows]);
        }
        if rows <= cols {
            self.solve_wide(rows, cols, cost)?;
            Some(self.col4row[..rows].iter().map(|&c| Some(c)).collect())
        } else {
            let mut t = std::mem::take(&mut self.transposed);
            t.clear();
            t.resize(rows * cols, 0.0);
            for i in 0..rows {
                for j in 0..cols {
                    t[j * rows + i] = cost[i * cols + j];
                }
            }
            let ok = self.solve_wide(cols, rows, &t);
            self.transposed = t;
            ok?;
            let mut out = vec![None; rows];
            for (j, &i) in self.col4row[..cols].iter().enumerate() {
                out[i] = Some(j);
            }
            Some(out)
        }
    }

    /// `rows <= cols`; on success `col4row[..rows]` holds the assignment.
    fn solve_wide(&mut self, rows: usize, cols: usize, c: &[f64]) -> Option<()> {
        reset(&mut self.u, rows, 0.0);
        reset(&mut self.v, cols, 0.0);
        reset(&mut self.dist, cols, f64::INFINITY);
        reset(&mut self.path, cols, NONE);
        reset(&mut self.col4row, rows, NONE);
        reset(&mut self.row4col, cols, NONE);
        reset(&mut self.seen_row, rows, false);
        reset(&mut self.seen_col, cols, false);
        reset(&mut self.remaining, cols, 0);
        for cur in 0..rows {
            let (sink, min_val) = self.augmenting_path(cols, c, cur)?;
            // Update the duals so that reduced costs stay non-negative.
            self.u[cur] += min_val;
            for i in 0..rows {
                if self.seen_row[i] && i != cur {
                    self.u[i] += min_val - self.dist[self.col4row[i]];
                }
            }
            for j in 0..cols {
                if self.seen_col[j] {
                    self.v[j] -= min_val - self.dist[j];
                }
            }
            // Augment along the path back from the sink.
            let mut j = sink;
            loop {
                let i = self.path[j];
                self.row4col[j] = i;
                std::mem::swap(&mut self.col4row[i], &mut j);
                if i == cur {
                    break;
                }
            }
        }
        Some(())
    }

    /// Dijkstra over reduced costs from row `cur` to the nearest free column.
    fn augmenting_path(&mut self, cols: usize, c: &[f64], cur: usize) -> Option<(usize, f64)> {
        let mut min_val = 0.0;
        let mut n_rem = cols;
        for it in 0..cols {
            // Reverse order: ties go to the last column, as in Crouse's reference code.
            self.remaining[it] = cols - it - 1;
        }
        self.seen_row.iter_mut().for_each(|s| *s = false);
        self.seen_col.iter_mut().for_each(|s| *s = false);
        self.dist.iter_mut().for_each(|d| *d = f64::INFINITY);
        let mut i = cur;
        loop {
            let mut index = NONE;
            let mut lowest = f64::INFINITY;
            self.seen_row[i] = true;
            let row = &c[i * cols..(i + 1) * cols];
            for it in 0..n_rem {
                let j = self.remaining[it];
                let r = min_val + row[j] - self.u[i] - self.v[j];
                if r < self.dist[j] {
                    self.path[j] = i;
                    self.dist[j] = r;
                }
                if self.dist[j] < lowest || (self.dist[j] == lowest && self.row4col[j] == NONE) {
                    lowest = self.dist[j];
                    index = it;
                }
            }
            min_val = lowest;
            if !min_val.is_finite() {
                return None;
            }
            let j = self.remaining[index];
            self.seen_col[j] = true;
            n_rem -= 1;
            self.remaining[index] = self.remaining[n_rem];
            if self.row4col[j] == NONE {
                return Some((j, min_val));
            }
            i = self.row4col[j];
        }
    }
}

fn reset<T: Clone>(v: &mut Vec<T>, n: usize, x: T) {
    v.clear();
    v.resize(n, x);
}

/// Solves a problem where each row may also stay unassigned at a cost: `cost` is
/// `rows x cols` (infinite = forbidden pair) and `unassigned[i]` the cost of leaving row
/// `i` without a column. Returns each row's column, or `None` for an unassigned row, and
/// the total cost. Solved exactly as the `rows x (cols + rows)` problem whose extra
/// column `cols + i` is row `i`'s own "no column" choice.
pub fn solve_with_misses(
    solver: &mut Assignment,
    rows: usize,
    cols: usize,
    cost: &[f64],
    unassigned: &[f64],
) -> Option<(Vec<Option<usize>>, f64)> {
    assert_eq!(unassigned.len(), rows);
    let w = cols + rows;
    let mut big = vec![f64::INFINITY; rows * w];
    for i in 0..rows {
        big[i * w..i * w + cols].copy_from_slice(&cost[i * cols..(i + 1) * cols]);
        big[i * w + cols + i] = unassigned[i];
    }
    let sol = solver.solve(rows, w, &big)?;
    let mut total = 0.0;
    let out = sol
        .into_iter()
        .enumerate()
        .map(|(i, j)| {
            // Every row is assigned in a rows <= cols problem.
            let j = j.unwrap_or(cols + i);
            total += big[i * w + j];
            (j < cols).then_some(j)
        })
        .collect();
    Some((out, total))
}

/// A column in the sparse solver's Dijkstra queue: smallest distance first, then
/// unassigned columns first.
#[derive(PartialEq)]
struct Queued(f64, bool, usize);

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // Reversed: BinaryHeap pops the largest.
        o.0.total_cmp(&self.0)
            .then(o.1.cmp(&self.1))
            .then(o.2.cmp(&self.2))
    }
}

/// [`solve_with_misses`] for sparse problems: row `i`'s allowed columns are
/// `col[start[i]..start[i + 1]]` with costs `cost[..]` (every other pair is forbidden),
/// and `unassigned[i]` the cost of leaving it without one. The same shortest augmenting
/// path method with the same duals, but each Dijkstra search relaxes only the edges of
/// the rows it reaches and keeps its frontier in a binary heap, so memory is
/// `O(rows + cols + edges)` and a search costs `O(edges reached x log)` instead of the
/// dense method's `O(rows x (cols + rows))` per row: what a cluster of 10^5 tracks needs.
pub fn solve_sparse_with_misses(
    rows: usize,
    cols: usize,
    start: &[usize],
    col: &[u32],
    cost: &[f64],
    unassigned: &[f64],
) -> Option<(Vec<Option<usize>>, f64)> {
    assert_eq!(start.len(), rows + 1);
    assert_eq!(unassigned.len(), rows);
    assert_eq!(col.len(), cost.len());
    if cost
        .iter()
        .chain(unassigned)
        .any(|c| c.is_nan() || *c == f64::NEG_INFINITY)
    {
        return None;
    }
    // Columns 0..cols, then row i's own "no column" at cols + i.
    let w = cols + rows;
    let mut u = vec![0.0; rows];
    let mut v = vec![0.0; w];
    let mut dist = vec![f64::INFINITY; w];
    let mut path = vec![NONE; w];
    let mut col4row = vec![NONE; rows];
    let mut row4col = vec![NONE; w];
    let mut seen_col = vec![false; w];
    let (mut touched, mut seen_rows, mut seen_cols) = (Vec::new(), Vec::new(), Vec::new());
    let mut heap = std::collections::BinaryHeap::new();
    for cur in 0..rows {
        let mut min_val = 0.0;
        let mut i = cur;
        heap.clear();
        let sink = loop {
            seen_rows.push(i);
            let own = (cols + i, unassigned[i]);
            let edges = (start[i]..start[i + 1])
                .map(|k| (col[k] as usize, cost[k]))
                .chain(std::iter::once(own));
            for (j, c) in edges {
                if seen_col[j] || c == f64::INFINITY {
                    continue;
                }
                let r = min_val + c - u[i] - v[j];
                if r < dist[j] {
                    if dist[j] == f64::INFINITY {
                        touched.push(j);
                    }
                    dist[j] = r;
                    path[j] = i;
                    heap.push(Queued(r, row4col[j] != NONE, j));
                }
            }
            // The nearest column not yet reached (stale entries skipped).
            let j = loop {
                let Queued(r, _, j) = heap.pop()?;
                if !seen_col[j] && r == dist[j] {
                    break j;
                }
            };
            min_val = dist[j];
            seen_col[j] = true;
            seen_cols.push(j);
            if row4col[j] == NONE {
                break j;
            }
            i = row4col[j];
        };
        u[cur] += min_val;
        for &i in &seen_rows {
            if i != cur {
                u[i] += min_val - dist[col4row[i]];
            }
        }
        for &j in &seen_cols {
            v[j] -= min_val - dist[j];
        }
        let mut j = sink;
        loop {
            let i = path[j];
            row4col[j] = i;
            std::mem::swap(&mut col4row[i], &mut j);
            if i == cur {
                break;
            }
        }
        for &j in &touched {
            dist[j] = f64::INFINITY;
            seen_col[j] = false;
        }
        touched.clear();
        seen_rows.clear();
        seen_cols.clear();
    }
    let mut total = 0.0;
    let out = (0..rows)
        .map(|i| {
            let j = col4row[i];
            if j >= cols {
                total += unassigned[i];
                return None;
            }
            let k = (start[i]..start[i + 1])
                .find(|&k| col[k] as usize == j)
                .unwrap_or(start[i]);
            total += cost[k];
            Some(j)
        })
        .collect();
    Some((out, total))
}

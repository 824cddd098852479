//! The exact filter's gains, computed once on the host, for the GPU's exact method.
//!
//! For a time-invariant model the covariance recursion of the Kalman filter does not
//! depend on the data, only on which measurements are missing. Its per-step products
//! (the update's `W^T = L^{-1} H P`, the Cholesky factor `L` of `S = L L^T` and the
//! log-density's constant) are computed here in `f64` for every distinct missing pattern
//! of the tracks (tracks with the same missing steps share them) until the predicted
//! covariance reaches its fixed point, and stored once: a table of records and, per step,
//! the record it uses (`-1` where the measurement is missing). What is left for the
//! device is the mean recursion, which is affine in the state:
//!
//! ```text
//! e_t = L_t^{-1} (z_t - H x_t - d),  ll_t = c_t - |e_t|^2 / 2,
//! x_{t+1} = F (x_t + W_t e_t) + u
//! ```
//!
//! and runs as a chunked parallel scan (`kernels/scan.cu`). The fixed point is declared
//! when no entry of the predicted covariance moves by more than [`FIXED_POINT`] times its
//! largest entry in one step (the same rule as `--steady`); after a missing measurement
//! the recursion resumes from the covariance it left and runs until it settles again.
//! Where gaps repeat (a measurement missing every `k` steps, or tracks with the same
//! period at other phases) it may never settle, but the covariance at the gaps settles
//! into a cycle: a gap whose predicted covariance equals an earlier gap's (by the same
//! rule) takes the records that followed the earlier one for as long as the missing
//! steps agree, and the recursion is replayed from that gap where they part. A series of
//! 10^6 steps with a gap every 20 then costs a few hundred records, not 10^6.

use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::kalman::dense::{ConvertedModel, Workspace};
use crate::kalman::step::{predict, update};
use crate::linalg::Real;
use crate::model::Model;
use rayon::prelude::*;
use std::collections::HashMap;

/// The covariance recursion's fixed point: a relative change per step below this.
pub const FIXED_POINT: f64 = 1e-14;

/// Values per record: `W^T` (`ny x nx`), `L` (`ny x ny`, lower), the constant.
pub fn record_len(nx: usize, ny: usize) -> usize {
    ny * nx + ny * ny + 1
}

/// The per-step gains of every track.
#[derive(Clone, Debug)]
pub struct Schedule<T> {
    /// State size.
    pub nx: usize,
    /// Measurement size.
    pub ny: usize,
    /// Number of tracks.
    pub tracks: usize,
    /// Steps per track.
    pub steps: usize,
    /// Records `[R][record_len]`: `W^T` row-major, `L` row-major, `-(ny ln 2 pi)/2 - sum
    /// ln L_ii`.
    pub table: Vec<T>,
    /// The record of each step, `-1` where the measurement is missing: track `b`'s row
    /// starts at `b * stride`; step `t` reads `index[b * stride + t]` while
    /// `t < index_len`, and `steady` after. With missing values `[tracks][steps]`
    /// (`stride = index_len = steps`); without, one row shared by every track (`stride =
    /// 0`) that ends where the recursion has settled.
    pub index: Vec<i32>,
    /// Distance between two tracks' rows of `index` (0: one shared row).
    pub stride: usize,
    /// Length of a row of `index`.
    pub index_len: usize,
    /// The record of every step from `index_len` on (the settled one).
    pub steady: i32,
}

impl<T: Real> Schedule<T> {
    /// The gains of every track of `z` under `model` (time-invariant).
    pub fn new(model: &Model, z: &Measurements<T>) -> Result<Schedule<T>> {
        let (nx, ny, steps) = (model.nx(), model.ny(), z.steps);
        let m = ConvertedModel::<f64>::new(model, 1);
        let not_pd = |b: usize| {
            move |k: usize| Error::NotPositiveDefinite {
                track: b,
                step: k,
                what: "innovation covariance S",
            }
        };
        if !z.data.par_iter().any(|v| v.is_nan_value()) {
            // Nothing missing: every track has the same schedule, and it ends in the
            // settled record. Run the recursion on a growing prefix until it settles
            // (or covers the series) and share that one row.
            let mut len = steps.min(1024);
            loop {
                let mut table = Vec::new();
                let mut row = vec![0i32; len];
                let settled = gains_of(
                    &m,
                    &vec![false; len],
                    0,
                    len,
                    // Nothing is missing: no gap entry is ever met.
                    &mut Memo::new(0),
                    &mut table,
                    &mut row,
                )
                .map_err(not_pd(0))?;
                let last = row.last().copied().unwrap_or(-1);
                if settled == Some(last) || len == steps {
                    return Self::finish(nx, ny, z, &table, row, 0, len, last);
                }
                len = len.saturating_mul(4).min(steps);
            }
        }
        let mut table: Vec<f64> = Vec::new();
        let mut index = vec![0i32; z.tracks * steps];
        const BLOCK: usize = 1 << 16;
        let mut missing = vec![false; z.tracks * steps];
        missing
            .par_chunks_mut(BLOCK)
            .zip(z.data.par_chunks(BLOCK * ny))
            .for_each(|(m, zs)| {
                for (m, zk) in m.iter_mut().zip(zs.chunks_exact(ny)) {
                    *m = zk.iter().any(|v| v.is_nan_value());
                }
            });
        let mut memo = Memo::new(missing.len());
        // Tracks with the same missing steps share the recursion: their first row is
        // copied.
        let mut known: HashMap<&[bool], usize> = HashMap::new();
        for b in 0..z.tracks {
            let pattern = &missing[b * steps..(b + 1) * steps];
            if let Some(&first) = known.get(pattern) {
                index.copy_within(first * steps..(first + 1) * steps, b * steps);
                continue;
            }
            gains_of(&m, &missing, b, steps, &mut memo, &mut table, &mut index)
                .map_err(not_pd(b))?;
            if z.tracks > 1 {
                known.insert(pattern, b);
            }
        }
        Self::finish(nx, ny, z, &table, index, steps, steps, -1)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        nx: usize,
        ny: usize,
        z: &Measurements<T>,
        table: &[f64],
        index: Vec<i32>,
        stride: usize,
        index_len: usize,
        steady: i32,
    ) -> Result<Schedule<T>> {
        if table.len() / record_len(nx, ny) > i32::MAX as usize {
            return Err(Error::input("the gain table has too many records"));
        }
        Ok(Schedule {
            nx,
            ny,
            tracks: z.tracks,
            steps: z.steps,
            table: table.iter().map(|v| T::of(*v)).collect(),
            index,
            stride,
            index_len,
            steady,
        })
    }

    /// The record of track `b`'s step `t` (`-1`: missing).
    pub fn id(&self, b: usize, t: usize) -> i32 {
        if t < self.index_len {
            self.index[b * self.stride + t]
        } else {
            self.steady
        }
    }

    /// The mean recursion on the host, in `f64` (the reference the kernels are held to).
    pub fn loglik(&self, model: &Model, z: &Measurements<T>) -> Vec<f64> {
        let (nx, ny, steps) = (self.nx, self.ny, self.steps);
        let rec = record_len(nx, ny);
        let m = ConvertedModel::<f64>::new(model, 1);
        let mats = m.at(0);
        let mut out = vec![0.0; self.tracks * steps];
        let mut x = vec![0.0; nx];
        let mut tmp = vec![0.0; nx];
        let mut e = vec![0.0; ny];
        for b in 0..self.tracks {
            x.copy_from_slice(&m.x0);
            let zt = z.track(b);
            for t in 0..steps {
                let id = self.id(b, t);
                if id >= 0 {
                    let r: Vec<f64> = self.table[id as usize * rec..(id as usize + 1) * rec]
                        .iter()
                        .map(|v| v.to_f64())
                        .collect();
                    let (wt, l, c) = (&r[..ny * nx], &r[ny * nx..ny * nx + ny * ny], r[rec - 1]);
                    let mut maha = 0.0;
                    for a in 0..ny {
                        let mut v = zt[t * ny + a].to_f64() - mats.d[a];
                        for j in 0..nx {
                            v -= mats.h[a * nx + j] * x[j];
                        }
                        for q in 0..a {
                            v -= l[a * ny + q] * e[q];
                        }
                        e[a] = v / l[a * ny + a];
                        maha += e[a] * e[a];
                    }
                    for i in 0..nx {
                        for a in 0..ny {
                            x[i] += wt[a * nx + i] * e[a];
                        }
                    }
                    out[b * steps + t] = c - 0.5 * maha;
                }
                for i in 0..nx {
                    let mut s = mats.u[i];
                    for j in 0..nx {
                        s += mats.f[i * nx + j] * x[j];
                    }
                    tmp[i] = s;
                }
                x.copy_from_slice(&tmp);
            }
        }
        out
    }
}

/// Gap entries whose predicted covariance was computed. A gap entry is a missing step
/// after an update (or a missing first step); from there on the recursion depends only
/// on the predicted covariance at the entry and on which later steps are missing, so a
/// later entry whose covariance equals an earlier one's (by the [`FIXED_POINT`] rule)
/// reuses the records computed after the earlier one for as long as the two tracks'
/// missing steps agree. A measurement missing every `k` steps thus costs the recursion
/// only until the covariance at the gaps has settled into its cycle, not once a step.
struct Memo {
    /// Flat step (`track * steps + step`) of each computed entry.
    pos: Vec<usize>,
    /// The predicted covariance of each computed entry, `[entries][nx * nx]`.
    p: Vec<f64>,
    /// The computed entry of every gap entry met, computed or reused, by flat step
    /// (`u32::MAX` elsewhere).
    at: Vec<u32>,
}

/// Computed entries compared with a new one, the most recent first.
const RECENT_ENTRIES: usize = 64;

impl Memo {
    /// Room for `steps` flat steps.
    fn new(steps: usize) -> Memo {
        Memo {
            pos: Vec::new(),
            p: Vec::new(),
            at: vec![u32::MAX; steps],
        }
    }

    /// The most recent computed entry whose covariance equals `p`, if any.
    fn find(&self, p: &[f64]) -> Option<u32> {
        let n = p.len();
        let scale = p.iter().fold(0f64, |s, v| s.max(v.abs()));
        (0..self.pos.len())
            .rev()
            .take(RECENT_ENTRIES)
            .find_map(|e| {
                let q = &self.p[e * n..(e + 1) * n];
                let diff = p.iter().zip(q).fold(0f64, |d, (a, b)| d.max((a - b).abs()));
                (diff <= FIXED_POINT * scale).then_some(e as u32)
            })
    }

    fn push(&mut self, pos: usize, p: &[f64]) -> u32 {
        self.pos.push(pos);
        self.p.extend_from_slice(p);
        let e = (self.pos.len() - 1) as u32;
        self.at[pos] = e;
        e
    }
}

/// Where a track's step comes from while it reuses an earlier stretch of the recursion.
#[derive(Clone, Copy)]
struct Follow {
    /// The flat step whose record this step takes (`None`: the earlier stretch ended
    /// with its track).
    src: Option<usize>,
    /// The flat end of the earlier stretch's track.
    end: usize,
    /// The last gap entry on this track's path (step) and its computed entry.
    entry: (usize, u32),
}

/// The covariance recursion of track `b` (`missing` is flat, `steps` a track): records
/// appended to `table`, each step's record id in `index[b * steps..]` (`-1` where
/// missing); the settled record where the recursion ends settled. `Err(step)` where `S`
/// is not positive definite.
fn gains_of(
    m: &ConvertedModel<f64>,
    missing: &[bool],
    b: usize,
    steps: usize,
    memo: &mut Memo,
    table: &mut Vec<f64>,
    index: &mut [i32],
) -> std::result::Result<Option<i32>, usize> {
    let (nx, ny) = (m.nx, m.ny);
    let mats = m.at(0);
    let rec = record_len(nx, ny);
    let base = b * steps;
    let mut ws = Workspace::<f64>::new(nx, ny);
    ws.p.copy_from_slice(&m.p0);
    let mut prev = vec![0.0; nx * nx];
    let zero = vec![0.0; ny];
    // The settled record and the predicted covariance it belongs to.
    let mut steady: Option<(i32, Vec<f64>)> = None;
    // Two predictions compare only across an update: without one (a missing step) the
    // covariance may repeat itself (a stationary prior) far from the fixed point.
    let mut updated = false;
    // `ws.p` already holds this step's prediction (the first step, or after a replay).
    let mut predicted = true;
    let mut follow: Option<Follow> = None;
    let half_log2pi = 0.5 * ny as f64 * crate::linalg::LN_2PI;
    let mut t = 0;
    while t < steps {
        if let Some(mut f) = follow {
            if let Some(src) = f.src {
                // The stretch where the two tracks' missing steps agree (up to the end
                // of either track) takes the earlier records and gap entries whole.
                let k = base + t;
                let room = (f.end - src).min(steps - t);
                let agree = missing[src..src + room]
                    .iter()
                    .zip(&missing[k..k + room])
                    .position(|(a, b)| a != b)
                    .unwrap_or(room);
                // The stretch may run into itself (the earlier one a period behind):
                // then it repeats with that period, so after the first period the
                // copies double, each from what is already final.
                let apart = k - src;
                let first = agree.min(apart);
                index.copy_within(src..src + first, k);
                memo.at.copy_within(src..src + first, k);
                let mut done = first;
                while done < agree {
                    let n = (agree - done).min(done);
                    index.copy_within(k..k + n, k + done);
                    memo.at.copy_within(k..k + n, k + done);
                    done += n;
                }
                if let Some(j) = (k..k + agree).rev().find(|&j| memo.at[j] != u32::MAX) {
                    f.entry = (j - base, memo.at[j]);
                }
                t += agree;
                if t == steps {
                    break;
                }
            }
            // The missing steps differ from here on (or the earlier stretch ended with
            // its track): this step's prediction, replayed from the last gap entry.
            let (from, e) = f.entry;
            ws.p.copy_from_slice(&memo.p[e as usize * nx * nx..(e as usize + 1) * nx * nx]);
            for s in from..t {
                if !missing[base + s] {
                    update(
                        nx, ny, mats, &zero, &mut ws.x, &mut ws.p, &mut ws.y, &mut ws.s, &mut ws.wt,
                    )
                    .ok_or(s)?;
                }
                predict(nx, mats, &mut ws.x, &mut ws.p, &mut ws.tmp);
            }
            follow = None;
            predicted = true;
            updated = false;
        }
        let k = base + t;
        let entry = missing[k] && (t == 0 || !missing[k - 1]);
        if let Some((id, p)) = &steady {
            if !missing[k] {
                // Settled: every step up to the next missing one takes the record.
                let n = missing[k..base + steps]
                    .iter()
                    .position(|&m| m)
                    .unwrap_or(steps - t);
                index[k..k + n].fill(*id);
                t += n;
                continue;
            }
            // Off the fixed point: the update is skipped, the recursion resumes.
            ws.p.copy_from_slice(p);
            steady = None;
            predicted = true;
            updated = false;
        }
        if !predicted {
            predict(nx, mats, &mut ws.x, &mut ws.p, &mut ws.tmp);
        }
        predicted = false;
        if entry {
            if let Some(e) = memo.find(&ws.p) {
                // The recursion has been here before: reuse what followed.
                memo.at[k] = e;
                index[k] = -1;
                let src = memo.pos[e as usize] + 1;
                let end = (src - 1) / steps * steps + steps;
                follow = Some(Follow {
                    src: Some(src).filter(|&s| s < end),
                    end,
                    entry: (t, e),
                });
                t += 1;
                continue;
            }
            memo.push(k, &ws.p);
        }
        let settled = updated && {
            let mut scale = 0f64;
            let mut diff = 0f64;
            for (a, b) in ws.p.iter().zip(&prev) {
                scale = scale.max(a.abs());
                diff = diff.max((a - b).abs());
            }
            diff <= FIXED_POINT * scale
        };
        prev.copy_from_slice(&ws.p);
        updated = !missing[k];
        if missing[k] {
            index[k] = -1;
            t += 1;
            continue;
        }
        let p_pred = settled.then(|| ws.p.clone());
        ws.x.fill(0.0);
        update(
            nx, ny, mats, &zero, &mut ws.x, &mut ws.p, &mut ws.y, &mut ws.s, &mut ws.wt,
        )
        .ok_or(t)?;
        let id = (table.len() / rec) as i32;
        table.extend_from_slice(&ws.wt);
        let mut logdet = 0.0;
        for a in 0..ny {
            for q in 0..ny {
                table.push(if q <= a { ws.s[a * ny + q] } else { 0.0 });
            }
            logdet += ws.s[a * ny + a].ln();
        }
        table.push(-half_log2pi - logdet);
        index[k] = id;
        if let Some(p) = p_pred {
            steady = Some((id, p));
        }
        t += 1;
    }
    Ok(steady.map(|(id, _)| id))
}

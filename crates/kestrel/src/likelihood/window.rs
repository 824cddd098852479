//! The windowed filter on the CPU: the taps of [`super::taps`] applied to every window.
//!
//! Steps `t < N-1` of each track are exact (the filter from the model's prior). Every
//! later window whose measurements are all present shares one set of taps, so runs of
//! such windows are one FIR filter over the track (vectorised across consecutive
//! steps). A window with missing values needs its own covariance recursion: windows are
//! keyed by the relative positions of their missing values and each pattern's taps are
//! computed once and shared by every window (and track) with that pattern; with
//! missing values at regular intervals there are as many patterns as the interval.

use super::exact::{self, Structure};
use super::taps::{gains, Gains, Taps};
use crate::data::Measurements;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kalman::dense::{ConvertedModel, Workspace};
use crate::kalman::step::{predict, update};
use crate::linalg::Real;
use crate::model::Model;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Windows per parallel task.
const CHUNK: usize = 1 << 14;
/// Steps per block of the FIR (its accumulators stay in L1).
const BLOCK: usize = 256;
/// Cached pattern taps beyond this many values are computed afresh instead of stored.
const CACHE_VALUES: usize = 32 << 20;

/// Taps in the working precision.
pub(crate) struct TapsT<T> {
    pub ny: usize,
    pub g: Vec<T>,
    pub c: Vec<T>,
    pub l: Vec<T>,
    pub norm: T,
    /// The positions whose measurements the window uses.
    pub used: Vec<usize>,
}

impl<T: Real> TapsT<T> {
    pub fn of(t: &Taps) -> Self {
        TapsT {
            ny: t.ny,
            g: t.g.iter().map(|v| T::of(*v)).collect(),
            c: t.c.iter().map(|v| T::of(*v)).collect(),
            l: t.l.iter().map(|v| T::of(*v)).collect(),
            norm: T::of(t.norm),
            used: (0..t.present.len()).filter(|&i| t.present[i]).collect(),
        }
    }

    /// `log N(z; y^, L L^T)` with `acc = y^` (overwritten).
    #[inline]
    fn logpdf(&self, z: &[T], acc: &mut [T]) -> T {
        let ny = self.ny;
        for a in 0..ny {
            let mut v = z[a] - acc[a];
            for b in 0..a {
                v -= self.l[a * ny + b] * acc[b];
            }
            acc[a] = v / self.l[a * ny + a];
        }
        let mut maha = T::zero();
        for a in 0..ny {
            maha += acc[a] * acc[a];
        }
        self.norm - T::of(0.5) * maha
    }
}

/// What the cache knows of a pattern.
enum Entry<T> {
    /// Seen once: its window was run directly.
    Seen,
    Taps(Arc<TapsT<T>>),
}

/// Pattern -> entry, and how many tap values the map holds.
type PatternMap<T> = (HashMap<Vec<u32>, Entry<T>>, usize);

/// Taps per missing pattern. A pattern seen once is run directly (the window's own
/// recursion, cheaper than deriving taps that nobody reuses); from its second window on
/// its taps are computed and shared.
struct PatternCache<'a, T> {
    model: &'a Model,
    n: usize,
    vague: f64,
    /// The recursion without missing values, whose prefix every pattern shares.
    base: Gains,
    map: Mutex<PatternMap<T>>,
}

impl<T: Real> PatternCache<'_, T> {
    /// The pattern's taps, or `None` the first time it is seen.
    fn get(&self, key: &[u32]) -> Result<Option<Arc<TapsT<T>>>> {
        {
            let mut g = self.lock();
            match g.0.get(key) {
                Some(Entry::Taps(t)) => return Ok(Some(t.clone())),
                Some(Entry::Seen) => {}
                None => {
                    // Keys alone are small; past the budget nothing more is remembered.
                    if g.1 + key.len() <= CACHE_VALUES {
                        g.1 += key.len();
                        g.0.insert(key.to_vec(), Entry::Seen);
                    }
                    return Ok(None);
                }
            }
        }
        let missing: Vec<usize> = key.iter().map(|&k| k as usize).collect();
        let gs = gains(self.model, self.n, self.vague, &missing, Some(&self.base))?;
        let t = Arc::new(TapsT::of(&Taps::from_gains(
            self.model, self.n, &gs, &missing,
        )?));
        let mut g = self.lock();
        if g.1 + t.g.len() <= CACHE_VALUES {
            g.1 += t.g.len();
            g.0.insert(key.to_vec(), Entry::Taps(t.clone()));
        }
        Ok(Some(t))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PatternMap<T>> {
        // A panic while holding the lock leaves a consistent map (inserts are atomic).
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One window run directly (Algorithm 2 itself, in `f64`, no allocation per step): the
/// vague start at `s`, the measurements `z[s..=t]`, the last step's log-likelihood.
struct Direct {
    m: ConvertedModel<f64>,
    vague: f64,
}

impl Direct {
    fn run<T: Real>(
        &self,
        ws: &mut Workspace<f64>,
        zw: &mut [f64],
        z: &[T],
        s: usize,
        t: usize,
    ) -> Result<T> {
        let (nx, ny) = (self.m.nx, self.m.ny);
        let mats = self.m.at(0);
        ws.x.fill(0.0);
        ws.p.fill(0.0);
        for i in 0..nx {
            ws.p[i * nx + i] = self.vague;
        }
        let mut ll = 0.0;
        for k in s..=t {
            if k > s {
                predict(nx, mats, &mut ws.x, &mut ws.p, &mut ws.tmp);
            }
            let zk = &z[k * ny..(k + 1) * ny];
            if zk.iter().any(|v| v.is_nan_value()) {
                continue;
            }
            for (a, v) in zw.iter_mut().zip(zk) {
                *a = v.to_f64();
            }
            ll = update(
                nx, ny, mats, zw, &mut ws.x, &mut ws.p, &mut ws.y, &mut ws.s, &mut ws.wt,
            )
            .ok_or_else(|| {
                Error::input("the windowed filter's innovation covariance is not positive definite")
            })?;
        }
        Ok(T::of(ll))
    }
}

/// Log-likelihoods of every track with windows of `n` steps.
pub(crate) fn run<T: Real>(
    device: Device,
    model: &Model,
    z: &Measurements<T>,
    n: usize,
    vague: f64,
) -> Result<Vec<T>> {
    #[cfg(not(feature = "cuda"))]
    crate::cuda::refuse(device, "the windowed likelihood")?;
    #[cfg(feature = "cuda")]
    if let Device::Cuda(i) = device {
        return super::cuda::window(i, model, z, n, vague);
    }
    let mut out = vec![T::zero(); z.tracks * z.steps];
    cpu(model, z, n, vague, &mut out)?;
    Ok(out)
}

/// The first `h = min(n - 1, steps)` steps of every track: exact, from the model's
/// prior, into the first `h` values of each `stride`-long row of `out` (`stride >= h`).
pub(crate) fn head<T: Real>(
    model: &Model,
    z: &Measurements<T>,
    n: usize,
    out: &mut [T],
    stride: usize,
) -> Result<()> {
    let steps = z.steps;
    let h = (n - 1).min(steps);
    if h == 0 {
        return Ok(());
    }
    let m = ConvertedModel::<T>::new(model, steps);
    let st = Structure::of(&model.f);
    out.par_chunks_mut(stride)
        .enumerate()
        .try_for_each(|(b, o)| exact::track(&m, st, b, z.track(b), None, &mut o[..h]))
}

fn cpu<T: Real>(
    model: &Model,
    z: &Measurements<T>,
    n: usize,
    vague: f64,
    out: &mut [T],
) -> Result<()> {
    head(model, z, n, out, z.steps)?;
    let steps = z.steps;
    let h = (n - 1).min(steps);
    if h == steps {
        return Ok(());
    }
    let base_gains = gains(model, n, vague, &[], None)?;
    let base = TapsT::<T>::of(&Taps::from_gains(model, n, &base_gains, &[])?);
    let cache = PatternCache::<T> {
        model,
        n,
        vague,
        base: base_gains,
        map: Mutex::new((HashMap::new(), 0)),
    };
    let direct = Direct {
        m: ConvertedModel::<f64>::new(model, 1),
        vague,
    };
    let ny = z.ny;
    out.par_chunks_mut(steps)
        .enumerate()
        .try_for_each(|(b, o)| -> Result<()> {
            let zt = z.track(b);
            let missing: Vec<usize> = (0..steps)
                .filter(|&k| zt[k * ny..(k + 1) * ny].iter().any(|v| v.is_nan_value()))
                .collect();
            o[h..]
                .par_chunks_mut(CHUNK)
                .enumerate()
                .try_for_each(|(c, oc)| {
                    crate::cancel::check()?;
                    let t0 = h + c * CHUNK;
                    windows(&base, &cache, &direct, zt, ny, n, &missing, t0, oc)
                })
        })
}

/// Windows ending at `t0 .. t0 + out.len()` of one track.
#[allow(clippy::too_many_arguments)]
fn windows<T: Real>(
    base: &TapsT<T>,
    cache: &PatternCache<'_, T>,
    direct: &Direct,
    z: &[T],
    ny: usize,
    n: usize,
    missing: &[usize],
    t0: usize,
    out: &mut [T],
) -> Result<()> {
    let t1 = t0 + out.len();
    // Missing positions in [t - n + 1, t) are missing[lo..hi].
    let mut lo = missing.partition_point(|&m| m + n < t0 + 1);
    let mut hi = missing.partition_point(|&m| m < t0);
    let mut key: Vec<u32> = Vec::new();
    let mut acc = vec![T::zero(); ny];
    let mut ws = Workspace::<f64>::new(direct.m.nx, ny);
    let mut zw = vec![0.0; ny];
    let mut t = t0;
    while t < t1 {
        while lo < missing.len() && missing[lo] + n < t + 1 {
            lo += 1;
        }
        while hi < missing.len() && missing[hi] < t {
            hi += 1;
        }
        let zt = &z[t * ny..(t + 1) * ny];
        if hi < missing.len() && missing[hi] == t {
            out[t - t0] = T::zero();
            t += 1;
            continue;
        }
        if lo == hi {
            // A run of windows without missing values: up to the next missing step.
            let end = if hi < missing.len() {
                missing[hi].min(t1)
            } else {
                t1
            };
            fir(base, z, ny, n, t, end, &mut out[t - t0..end - t0]);
            t = end;
            continue;
        }
        let s = t + 1 - n;
        key.clear();
        key.extend(missing[lo..hi].iter().map(|&m| (m - s) as u32));
        let Some(taps) = cache.get(&key)? else {
            out[t - t0] = direct.run(&mut ws, &mut zw, z, s, t)?;
            t += 1;
            continue;
        };
        acc.copy_from_slice(&taps.c);
        for &i in &taps.used {
            let zi = &z[(s + i) * ny..(s + i + 1) * ny];
            let g = &taps.g[i * ny * ny..(i + 1) * ny * ny];
            for a in 0..ny {
                let mut v = acc[a];
                for b in 0..ny {
                    v += g[a * ny + b] * zi[b];
                }
                acc[a] = v;
            }
        }
        out[t - t0] = taps.logpdf(zt, &mut acc);
        t += 1;
    }
    Ok(())
}

/// The shared taps over the windows ending at `t0..t1`, none of which has a missing
/// value: `y^_t = c + sum_i G_i z_{t-n+1+i}`, accumulated tap by tap over a block of
/// consecutive steps so that the inner loop runs across steps (vectorised).
fn fir<T: Real>(
    taps: &TapsT<T>,
    z: &[T],
    ny: usize,
    n: usize,
    t0: usize,
    t1: usize,
    out: &mut [T],
) {
    let mut acc = vec![T::zero(); BLOCK * ny];
    let mut tmp = vec![T::zero(); ny];
    let mut b0 = t0;
    while b0 < t1 {
        let b1 = (b0 + BLOCK).min(t1);
        let len = b1 - b0;
        let acc = &mut acc[..len * ny];
        for j in 0..len {
            acc[j * ny..(j + 1) * ny].copy_from_slice(&taps.c);
        }
        let s0 = b0 + 1 - n;
        if ny == 1 {
            for i in 0..n - 1 {
                let g = taps.g[i];
                let zs = &z[s0 + i..s0 + i + len];
                for (a, zv) in acc.iter_mut().zip(zs) {
                    *a += g * *zv;
                }
            }
        } else {
            for i in 0..n - 1 {
                let g = &taps.g[i * ny * ny..(i + 1) * ny * ny];
                let zs = &z[(s0 + i) * ny..(s0 + i + len) * ny];
                for (av, zv) in acc.chunks_exact_mut(ny).zip(zs.chunks_exact(ny)) {
                    for a in 0..ny {
                        let mut v = av[a];
                        for b in 0..ny {
                            v += g[a * ny + b] * zv[b];
                        }
                        av[a] = v;
                    }
                }
            }
        }
        for j in 0..len {
            let t = b0 + j;
            tmp.copy_from_slice(&acc[j * ny..(j + 1) * ny]);
            out[t - t0] = taps.logpdf(&z[t * ny..(t + 1) * ny], &mut tmp);
        }
        b0 = b1;
    }
}

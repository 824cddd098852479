//! The windowed filter on the GPU (`kernels/window.cu`): one thread per step.
//!
//! The host prepares a [`Plan`]: the shared taps (windows without missing values), the
//! taps of every missing pattern with the list of windows that use it, and the values
//! the host computes itself (the exact first `N-1` steps, steps whose own measurement is
//! missing, and windows of patterns past the table budget, run directly). The device runs
//! `window_shared` over every step `t >= N-1` of every track (blocks of consecutive steps
//! share their measurements in shared memory; tracks are the grid's second dimension),
//! then `window_patterns` over the listed windows, overwriting theirs. The same plan
//! drives the C++ emulation of the kernels in the tests.

use super::super::taps::{gains, Taps};
use super::super::window::{head, TapsT};
use super::params::{WindowPatterns, WindowShared};
use super::LAST_MS;
use crate::cuda::{catch, download, gpu, launch, upload, Arg, DevBuf, EventTimer};
use crate::data::Measurements;
use crate::error::{Error, Result};
use crate::kalman::dense::{ConvertedModel, Workspace};
use crate::kalman::step::{predict, update};
use crate::linalg::Real;
use crate::model::Model;
use rayon::prelude::*;
use std::collections::HashMap;

/// The kernels' source.
pub const SOURCE: &str = include_str!("../kernels/window.cu");
/// Threads (and steps) per block of `window_shared`.
pub const BLOCK: usize = 128;
/// Taps staged in shared memory at a time, at most: fewer for larger `ny` so that the
/// staged taps and measurements fit the 48 KB of static shared memory.
pub const TILE: usize = 256;

/// The tile of taps for measurement size `ny`.
pub fn tile_for(ny: usize) -> usize {
    (2048 / (ny * ny).max(1)).clamp(1, TILE)
}

/// Bytes of shared memory `window_shared` needs in double precision.
fn shared_bytes(ny: usize) -> usize {
    let tile = tile_for(ny);
    (tile * ny * ny + (tile + BLOCK) * ny) * 8
}
/// At most this many pattern tap values go to the device; later patterns run on the host.
const PATTERN_VALUES: usize = 64 << 20;

/// The source with its compile-time constants.
pub fn source(ny: usize, real: &str) -> String {
    format!(
        "#define REAL {}\n#define NY {ny}\n#define BLOCK {BLOCK}\n#define TILE {}\n{SOURCE}",
        if real == "f32" { "float" } else { "double" },
        tile_for(ny)
    )
}

/// What the device computes and what the host fills in.
pub struct Plan<T> {
    pub n: usize,
    pub ny: usize,
    pub tracks: usize,
    pub steps: usize,
    /// Shared taps `[N-1][ny][ny]`, `c`, `L`, normaliser.
    pub g: Vec<T>,
    pub c: Vec<T>,
    pub l: Vec<T>,
    pub norm: T,
    /// Per pattern: taps `[P][N-1][ny][ny]`, `c [P][ny]`, `L [P][ny][ny]`, `norm [P]`.
    pub pg: Vec<T>,
    pub pc: Vec<T>,
    pub pl: Vec<T>,
    pub pnorm: Vec<T>,
    /// Windows with missing values: `track * steps + t` and their pattern.
    pub index: Vec<u64>,
    pub pattern: Vec<i32>,
    /// Values the host computed (`track * steps + t`, value), written over the device's.
    pub host: Vec<(usize, T)>,
}

fn direct_window(
    m: &ConvertedModel<f64>,
    ws: &mut Workspace<f64>,
    vague: f64,
    z: &[f64],
    ny: usize,
    s: usize,
    t: usize,
) -> Result<f64> {
    let nx = m.nx;
    let mats = m.at(0);
    ws.x.fill(0.0);
    ws.p.fill(0.0);
    for i in 0..nx {
        ws.p[i * nx + i] = vague;
    }
    let mut ll = 0.0;
    for k in s..=t {
        if k > s {
            predict(nx, mats, &mut ws.x, &mut ws.p, &mut ws.tmp);
        }
        let zk = &z[k * ny..(k + 1) * ny];
        if zk.iter().any(|v| v.is_nan()) {
            continue;
        }
        ll = update(
            nx, ny, mats, zk, &mut ws.x, &mut ws.p, &mut ws.y, &mut ws.s, &mut ws.wt,
        )
        .ok_or_else(|| {
            Error::input("the windowed filter's innovation covariance is not positive definite")
        })?;
    }
    Ok(ll)
}

/// Prepares the device's work for windows of `n` steps.
pub fn prepare<T: Real>(
    model: &Model,
    z: &Measurements<T>,
    n: usize,
    vague: f64,
) -> Result<Plan<T>> {
    let (b, steps, ny) = (z.tracks, z.steps, z.ny);
    let base_gains = gains(model, n, vague, &[], None)?;
    let base = TapsT::<T>::of(&Taps::from_gains(model, n, &base_gains, &[])?);
    let mut plan = Plan {
        n,
        ny,
        tracks: b,
        steps,
        g: base.g.clone(),
        c: base.c.clone(),
        l: base.l.clone(),
        norm: base.norm,
        pg: Vec::new(),
        pc: Vec::new(),
        pl: Vec::new(),
        pnorm: Vec::new(),
        index: Vec::new(),
        pattern: Vec::new(),
        host: Vec::new(),
    };
    let h = (n - 1).min(steps);
    if h > 0 {
        let mut heads = vec![T::zero(); b * h];
        head(model, z, n, &mut heads, h)?;
        plan.host.reserve(b * h);
        for tr in 0..b {
            plan.host
                .extend((0..h).map(|t| (tr * steps + t, heads[tr * h + t])));
        }
    }
    // Series without a missing value (the common case) need no pattern: one parallel
    // pass finds them, and the loop below skips them without a scan of its own.
    let has_missing: Vec<bool> = (0..b)
        .into_par_iter()
        .map(|tr| z.track(tr).par_iter().any(|v| v.is_nan_value()))
        .collect();
    let mut ids: HashMap<Vec<u32>, i32> = HashMap::new();
    let direct = ConvertedModel::<f64>::new(model, 1);
    let mut ws = Workspace::<f64>::new(model.nx(), ny);
    for tr in (0..b).filter(|&tr| has_missing[tr]) {
        let zt = z.track(tr);
        let missing: Vec<usize> = (0..steps)
            .filter(|&k| zt[k * ny..(k + 1) * ny].iter().any(|v| v.is_nan_value()))
            .collect();
        if missing.is_empty() {
            continue;
        }
        let z64: Vec<f64> = zt.iter().map(|v| v.to_f64()).collect();
        let (mut lo, mut hi) = (0, 0);
        let mut key = Vec::new();
        for t in h..steps {
            while lo < missing.len() && missing[lo] + n < t + 1 {
                lo += 1;
            }
            while hi < missing.len() && missing[hi] < t {
                hi += 1;
            }
            if hi < missing.len() && missing[hi] == t {
                plan.host.push((tr * steps + t, T::zero()));
                continue;
            }
            if lo == hi {
                continue;
            }
            let s = t + 1 - n;
            key.clear();
            key.extend(missing[lo..hi].iter().map(|&m| (m - s) as u32));
            let id = match ids.get(&key) {
                Some(&id) => Some(id),
                None if plan.pg.len() + (n - 1) * ny * ny <= PATTERN_VALUES => {
                    let miss: Vec<usize> = key.iter().map(|&k| k as usize).collect();
                    let gs = gains(model, n, vague, &miss, Some(&base_gains))?;
                    let tp = TapsT::<T>::of(&Taps::from_gains(model, n, &gs, &miss)?);
                    let id = ids.len() as i32;
                    ids.insert(key.clone(), id);
                    plan.pg.extend_from_slice(&tp.g);
                    plan.pc.extend_from_slice(&tp.c);
                    plan.pl.extend_from_slice(&tp.l);
                    plan.pnorm.push(tp.norm);
                    Some(id)
                }
                None => None,
            };
            match id {
                Some(id) => {
                    plan.index.push((tr * steps + t) as u64);
                    plan.pattern.push(id);
                }
                None => {
                    let v = direct_window(&direct, &mut ws, vague, &z64, ny, s, t)?;
                    plan.host.push((tr * steps + t, T::of(v)));
                }
            }
        }
    }
    Ok(plan)
}

/// The windowed filter on GPU `ordinal`.
pub(crate) fn window<T: Real>(
    ordinal: usize,
    model: &Model,
    z: &Measurements<T>,
    n: usize,
    vague: f64,
) -> Result<Vec<T>> {
    if shared_bytes(z.ny) > 48 * 1024 {
        return Err(Error::Unsupported(format!(
            "the windowed filter on cuda would need {} bytes of shared memory for {} measurement components (at most 48 KB; run it on the CPU)",
            shared_bytes(z.ny),
            z.ny
        )));
    }
    let plan = prepare(model, z, n, vague)?;
    catch(|| run(ordinal, &plan, z))
}

fn run<T: Real>(ordinal: usize, plan: &Plan<T>, z: &Measurements<T>) -> Result<Vec<T>> {
    let g = gpu(ordinal)?;
    let module = g.module(
        "the windowed filter",
        &source(plan.ny, T::NAME),
        &["window_shared", "window_patterns"],
    )?;
    let st = &g.stream;
    let (b, steps, n) = (plan.tracks, plan.steps, plan.n);
    let total = b * steps;
    let dz = DevBuf::<T>::new(&g, z.data.len(), "measurements")?;
    let dout = DevBuf::<T>::new(&g, total, "log-likelihoods")?;
    let buf = |v: &[T], what: &str| DevBuf::from_slice(&g, st, v, what);
    // The series and the log-likelihoods through the runtime's staged copies (pinned
    // buffers, host side on every core, beside the DMA).
    upload(&g, st, &z.data, &dz, 0, "measurements")?;
    let (dg, dc, dl) = (
        buf(&plan.g, "taps")?,
        buf(&plan.c, "taps")?,
        buf(&plan.l, "taps")?,
    );
    let (pg, pc, pl, pn) = (
        buf(&plan.pg, "pattern taps")?,
        buf(&plan.pc, "pattern taps")?,
        buf(&plan.pl, "pattern taps")?,
        buf(&plan.pnorm, "pattern taps")?,
    );
    let didx = DevBuf::from_slice(&g, st, &plan.index, "window list")?;
    let dpat = DevBuf::from_slice(&g, st, &plan.pattern, "window list")?;
    dout.poison(st)?;
    let norm = |v: T| -> Arg<'static> {
        if T::NAME == "f32" {
            Arg::F32(v.to_f64() as f32)
        } else {
            Arg::F64(v.to_f64())
        }
    };
    let timer = EventTimer::new(&g)?;
    timer.start(st)?;
    let t_begin = n - 1;
    if t_begin < steps {
        let per = steps - t_begin;
        let grid = (per.div_ceil(BLOCK) as u32, b as u32, 1);
        let p = WindowShared {
            z: &dz,
            g: &dg,
            c: &dc,
            l: &dl,
            norm: norm(plan.norm),
            out: &dout,
            steps: steps as i64,
            n: n as i32,
            t_begin: t_begin as i64,
        };
        launch(st, &module, "window_shared", grid, (BLOCK as u32, 1, 1), &p)?;
    }
    if !plan.index.is_empty() {
        let count = plan.index.len();
        launch(
            st,
            &module,
            "window_patterns",
            (count.div_ceil(128) as u32, 1, 1),
            (128, 1, 1),
            &WindowPatterns {
                z: &dz,
                g: &pg,
                c: &pc,
                l: &pl,
                norm: &pn,
                index: &didx,
                pattern: &dpat,
                count: count as i64,
                out: &dout,
                steps: steps as i64,
                n: n as i32,
            },
        )?;
    }
    timer.stop(st)?;
    let ms = f64::from(timer.elapsed_ms()?);
    LAST_MS.with(|c| c.set(ms));
    let mut out = vec![T::zero(); total];
    download(&g, st, &dout, 0, &mut out, "log-likelihoods")?;
    for &(i, v) in &plan.host {
        out[i] = v;
    }
    if let Some(i) = crate::data::first_where(&out, |v: T| v.is_nan_value()) {
        return Err(Error::Cuda(format!(
            "the windowed filter left track {}, step {} unwritten",
            i / steps,
            i % steps
        )));
    }
    Ok(out)
}

//! The per-step API on the GPU: [`BatchTracker`] is the device-resident form of
//! [`crate::kalman::BatchState`], with the same calls and the same meaning: targets in
//! stable slots, each added with its own prior; [`BatchTracker::predict`] (the model's
//! step, one interval or one per target for kinematic models, a per-target control
//! input) and [`BatchTracker::update`] (one row per slot, a mask, a per-target `R`) as
//! separate calls, so that the host can gate and associate in between
//! ([`BatchTracker::measure`] brings every target's `H x + d` and `S` back).
//!
//! The state never leaves the GPU (structure of arrays: `x [nx][capacity]`, packed `P`);
//! each call uploads only its inputs, in full: every update copies all `capacity` rows
//! of `z` (and the mask), so a slot the caller did not fill cannot re-apply an older
//! detection. Adds and removals are queued on the host and applied by one kernel before
//! the next call. Calls are asynchronous on the tracker's own stream; a covariance that
//! lost positive definiteness is reported by [`BatchTracker::synchronize`] and the
//! readers. The tracker is `Send`: it may move to another thread (one thread uses it at
//! a time).

use super::params::{TrackerPredict, TrackerRemove, TrackerSet, TrackerUpdate};
use super::slot::{transpose, BLOCK};
use super::source::{kernels, model_params, Part};
use super::CudaOptions;
use crate::cuda::{
    as_bytes, ck, dtoh, grid_for, htod, launch, sync, Addr, Arg, DevBuf, EventTimer, Gpu, Module,
    Pinned,
};
use crate::data::Estimates;
use crate::error::{Error, Result};
use crate::kalman::state::Prediction;
use crate::kalman::Interval;
use crate::linalg::Real;
use crate::model::{Kinematics, Model};
use cudarc::driver::{CudaEvent, CudaStream};
use std::sync::Arc;

/// Inputs uploaded by one call: a device buffer grown on demand.
struct Upload<T> {
    buf: Option<DevBuf<T>>,
    what: &'static str,
}

impl<T: Copy> Upload<T> {
    fn new(what: &'static str) -> Self {
        Upload { buf: None, what }
    }

    /// Copies `v` to the device (asynchronously from page-locked `v`, else staged by the
    /// driver before return) and returns the device address.
    fn put(&mut self, gpu: &Gpu, stream: &CudaStream, v: &[T]) -> Result<u64> {
        if self.buf.as_ref().is_none_or(|b| b.len() < v.len()) {
            // The old buffer may still be read by queued kernels.
            sync(stream, self.what)?;
            self.buf = Some(DevBuf::new(gpu, v.len().max(1), self.what)?);
        }
        let b = self
            .buf
            .as_ref()
            .ok_or_else(|| Error::Cuda("upload buffer".into()))?;
        htod(stream, v, b, 0, self.what)?;
        Ok(b.ptr())
    }
}

/// Many targets tracked on one GPU, one call at a time (see the module documentation).
pub struct BatchTracker<T: Real> {
    gpu: Arc<Gpu>,
    k: Arc<Module>,
    params: Vec<T>,
    nx: usize,
    ny: usize,
    cap: usize,
    kin: Option<Kinematics>,
    x: DevBuf<T>,
    p: DevBuf<T>,
    ll: DevBuf<T>,
    zhat: DevBuf<T>,
    s: DevBuf<T>,
    live_d: DevBuf<u8>,
    err: DevBuf<u64>,
    z: DevBuf<T>,
    mask: DevBuf<u8>,
    /// Page-locked rows of the next update and its mask.
    staged: Pinned<T>,
    staged_mask: Pinned<u8>,
    /// Recorded after the last copy out of `staged`.
    copied: CudaEvent,
    r: Upload<T>,
    ctrl: Upload<T>,
    dts: Upload<f64>,
    slots: Upload<i32>,
    priors_x: Upload<T>,
    priors_p: Upload<T>,
    live: Vec<bool>,
    /// Free slots, lowest last.
    free: Vec<usize>,
    add_slots: Vec<i32>,
    add_x: Vec<T>,
    add_p: Vec<T>,
    remove_slots: Vec<i32>,
    x0: Vec<T>,
    p0: Vec<T>,
    updates: usize,
    stream: Arc<CudaStream>,
}

impl<T: Real> BatchTracker<T> {
    /// A tracker for up to `capacity` targets of `model` on GPU `ordinal`, with no targets.
    pub fn new(ordinal: usize, model: &Model, capacity: usize, opts: &CudaOptions) -> Result<Self> {
        model.validate()?;
        if capacity == 0 || capacity > i32::MAX as usize {
            return Err(Error::input(format!(
                "tracker capacity must be between 1 and {}, got {capacity}",
                i32::MAX
            )));
        }
        let gpu = crate::cuda::gpu(ordinal)?;
        let k = kernels::<T>(&gpu, model, opts.bake_model, Part::Tracker)?;
        let (nx, ny) = (model.nx(), model.ny());
        let np = nx * (nx + 1) / 2;
        let nyp = ny * (ny + 1) / 2;
        let stream = ck(gpu.ctx.new_stream(), "creating the tracker's stream")?;
        let mk = |n: usize, what: &str| DevBuf::<T>::new(&gpu, n, what);
        let t = BatchTracker {
            params: model_params::<T>(model),
            nx,
            ny,
            cap: capacity,
            kin: None,
            x: mk(capacity * nx, "tracker means")?,
            p: mk(capacity * np, "tracker covariances")?,
            ll: mk(capacity, "tracker log-likelihoods")?,
            zhat: mk(capacity * ny, "predicted measurements")?,
            s: mk(capacity * nyp, "innovation covariances")?,
            live_d: DevBuf::new(&gpu, capacity, "tracker slots")?,
            err: DevBuf::new(&gpu, 1, "the error flag")?,
            z: mk(capacity * ny, "tracker measurements")?,
            mask: DevBuf::new(&gpu, capacity, "the measurement mask")?,
            staged: Pinned::<T>::new(&gpu, capacity * ny)?,
            staged_mask: Pinned::<u8>::new(&gpu, capacity)?,
            copied: ck(gpu.ctx.new_event(None), "creating an event")?,
            r: Upload::new("per-target R"),
            ctrl: Upload::new("control inputs"),
            dts: Upload::new("sampling intervals"),
            slots: Upload::new("slot list"),
            priors_x: Upload::new("prior means"),
            priors_p: Upload::new("prior covariances"),
            live: vec![false; capacity],
            free: (0..capacity).rev().collect(),
            add_slots: Vec::new(),
            add_x: Vec::new(),
            add_p: Vec::new(),
            remove_slots: Vec::new(),
            x0: model.prior.x0.iter().map(|v| T::of(*v)).collect(),
            p0: (0..nx * nx)
                .map(|i| T::of(model.prior.p0[(i / nx, i % nx)]))
                .collect(),
            updates: 0,
            stream,
            k,
            gpu,
        };
        gpu_memset(&t.stream, &t.live_d, 0)?;
        t.err.poison(&t.stream)?;
        for b in [&t.x, &t.p, &t.ll, &t.zhat, &t.s] {
            b.poison(&t.stream)?;
        }
        ck(t.copied.record(&t.stream), "recording an event")?;
        sync(&t.stream, "initialising the tracker")?;
        Ok(t)
    }

    /// Declares how `F` and `Q` depend on the sampling interval (as
    /// [`crate::kalman::BatchState::with_kinematics`]).
    pub fn with_kinematics(mut self, kin: Kinematics) -> Result<Self> {
        if kin.nx() != self.nx {
            return Err(Error::input(format!(
                "the kinematics have {} state components, the model has {}",
                kin.nx(),
                self.nx
            )));
        }
        self.kin = Some(kin);
        Ok(self)
    }

    /// State size.
    pub fn nx(&self) -> usize {
        self.nx
    }

    /// Measurement size.
    pub fn ny(&self) -> usize {
        self.ny
    }

    /// Capacity (the most targets at once).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Number of live targets.
    pub fn len(&self) -> usize {
        self.cap - self.free.len()
    }

    /// True when no target is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when `slot` holds a live target.
    pub fn is_live(&self, slot: usize) -> bool {
        self.live.get(slot).copied().unwrap_or(false)
    }

    /// Updates run so far.
    pub fn updates(&self) -> usize {
        self.updates
    }

    /// Adds a target with the model's prior; returns its slot (the lowest free one).
    pub fn add(&mut self) -> Result<usize> {
        let (x0, p0) = (self.x0.clone(), self.p0.clone());
        self.queue_add(&x0, &p0)
    }

    /// Adds a target with its own prior: mean `x0` (`nx`), covariance `p0` (`nx x nx`,
    /// row-major, symmetric positive semi-definite). Returns its slot.
    pub fn add_with_prior(&mut self, x0: &[T], p0: &[T]) -> Result<usize> {
        crate::kalman::state::check_prior(self.nx, x0, p0)?;
        self.queue_add(x0, p0)
    }

    fn queue_add(&mut self, x0: &[T], p0: &[T]) -> Result<usize> {
        let slot = self.free.pop().ok_or_else(|| {
            Error::input(format!(
                "cannot add a target: all {} slots are taken",
                self.cap
            ))
        })?;
        // A slot removed and taken again before the queue is applied: the removal runs
        // first (see flush), then the add.
        self.add_slots.push(slot as i32);
        self.add_x.extend_from_slice(x0);
        self.add_p.extend_from_slice(p0);
        self.live[slot] = true;
        Ok(slot)
    }

    /// Stops tracking the target in `slot`; the slot becomes free.
    pub fn remove(&mut self, slot: usize) -> Result<()> {
        if !self.is_live(slot) {
            return Err(Error::input(format!("slot {slot} holds no target")));
        }
        // An add of this slot still queued is dropped instead.
        if let Some(i) = self.add_slots.iter().position(|&s| s as usize == slot) {
            let nx = self.nx;
            self.add_slots.remove(i);
            self.add_x.drain(i * nx..(i + 1) * nx);
            self.add_p.drain(i * nx * nx..(i + 1) * nx * nx);
        }
        self.remove_slots.push(slot as i32);
        self.live[slot] = false;
        let at = self.free.partition_point(|&f| f > slot);
        self.free.insert(at, slot);
        Ok(())
    }

    /// Applies the queued removals, then the queued adds.
    fn flush(&mut self) -> Result<()> {
        if !self.remove_slots.is_empty() {
            let n = self.remove_slots.len();
            let d = self
                .slots
                .put(&self.gpu, &self.stream, &self.remove_slots)?;
            launch(
                &self.stream,
                &self.k,
                "tracker_remove",
                grid_for(n, BLOCK),
                (BLOCK, 1, 1),
                &TrackerRemove {
                    slots: &Addr(d),
                    n: n as i32,
                    xs: &self.x,
                    ps: &self.p,
                    live: &self.live_d,
                    nb: self.cap as i32,
                },
            )?;
            // The slot list buffer is reused below: wait for this kernel.
            sync(&self.stream, "removing targets")?;
            self.remove_slots.clear();
        }
        if !self.add_slots.is_empty() {
            let n = self.add_slots.len();
            let d = self.slots.put(&self.gpu, &self.stream, &self.add_slots)?;
            let xs = self.priors_x.put(&self.gpu, &self.stream, &self.add_x)?;
            let ps = self.priors_p.put(&self.gpu, &self.stream, &self.add_p)?;
            launch(
                &self.stream,
                &self.k,
                "tracker_set",
                grid_for(n, BLOCK),
                (BLOCK, 1, 1),
                &TrackerSet {
                    slots: &Addr(d),
                    n: n as i32,
                    x0s: &Addr(xs),
                    p0s: &Addr(ps),
                    xs: &self.x,
                    ps: &self.p,
                    ll: &self.ll,
                    live: &self.live_d,
                    nb: self.cap as i32,
                },
            )?;
            sync(&self.stream, "adding targets")?;
            self.add_slots.clear();
            self.add_x.clear();
            self.add_p.clear();
        }
        Ok(())
    }

    /// Moves every live target one step with the model's `F`, `Q` and `u`.
    pub fn predict(&mut self) -> Result<()> {
        self.predict_with(&Prediction::new())
    }

    /// Moves every live target over `dt` with the kinematics' `F` and `Q`.
    pub fn predict_dt(&mut self, dt: f64) -> Result<()> {
        self.predict_with(&Prediction::new().dt(dt))
    }

    /// The general prediction (as [`crate::kalman::BatchState::predict_with`]).
    pub fn predict_with(&mut self, pred: &Prediction<'_, T>) -> Result<()> {
        let (cap, nx) = (self.cap, self.nx);
        let need_kin = |what: &str| {
            self.kin.ok_or_else(|| {
                Error::Unsupported(format!(
                    "{what} needs the model's kinematics (BatchTracker::with_kinematics)"
                ))
            })
        };
        let (order, q, dt, dts) = match pred.interval {
            Interval::Model => (0, 0.0, 0.0, None),
            Interval::Dt(dt) => {
                let k = need_kin("a sampling interval")?;
                if !(dt.is_finite() && dt > 0.0) {
                    return Err(Error::input(format!(
                        "the sampling interval must be finite and positive, got {dt}"
                    )));
                }
                (k.order(), k.q(), dt, None)
            }
            Interval::PerTarget(d) => {
                let k = need_kin("per-target sampling intervals")?;
                if d.len() != cap {
                    return Err(Error::input(format!(
                        "per-target intervals: expected {cap} values, got {}",
                        d.len()
                    )));
                }
                if let Some(s) =
                    (0..cap).find(|&s| self.live[s] && !(d[s].is_finite() && d[s] > 0.0))
                {
                    return Err(Error::input(format!(
                        "slot {s}: the sampling interval must be finite and positive, got {}",
                        d[s]
                    )));
                }
                (k.order(), k.q(), 0.0, Some(d))
            }
        };
        if let Some(c) = pred.control {
            if c.len() != cap * nx {
                return Err(Error::input(format!(
                    "control inputs: expected {cap} slots x {nx} values, got {}",
                    c.len()
                )));
            }
            if let Some(i) = (0..cap * nx).find(|&i| self.live[i / nx] && !c[i].is_finite_value()) {
                return Err(Error::input(format!(
                    "slot {}: control input {} is not finite",
                    i / nx,
                    c[i]
                )));
            }
        }
        self.flush()?;
        let dts_ptr = match dts {
            Some(d) => self.dts.put(&self.gpu, &self.stream, d)?,
            None => 0,
        };
        let ctrl_ptr = match pred.control {
            Some(c) => self.ctrl.put(&self.gpu, &self.stream, c)?,
            None => 0,
        };
        launch(
            &self.stream,
            &self.k,
            "tracker_predict",
            grid_for(cap, BLOCK),
            (BLOCK, 1, 1),
            &TrackerPredict {
                mp: Arg::Bytes(as_bytes(&self.params)),
                xs: &self.x,
                ps: &self.p,
                live: &self.live_d,
                nb: cap as i32,
                ctrl: &Addr(ctrl_ptr),
                dts: &Addr(dts_ptr),
                dt,
                kin_order: order as i32,
                kin_q: q,
            },
        )?;
        // Pageable inputs were staged by the driver before return; the upload buffers
        // are reused by the next call on the same stream, after this kernel.
        Ok(())
    }

    /// Updates every live target with its row of `z`, `[capacity][ny]` (NaN, a `false`
    /// in `mask` or a free slot: no measurement), with the model's `R` or `r`
    /// (`[capacity][ny][ny]`). Returns once the inputs are copied; the kernel runs on.
    pub fn update(&mut self, z: &[T], mask: Option<&[bool]>, r: Option<&[T]>) -> Result<()> {
        let (cap, ny) = (self.cap, self.ny);
        if z.len() != cap * ny {
            return Err(Error::input(format!(
                "measurements: expected {cap} slots x {ny} = {} values, got {}",
                cap * ny,
                z.len()
            )));
        }
        if let Some(m) = mask {
            if m.len() != cap {
                return Err(Error::input(format!(
                    "the mask: expected {cap} values, got {}",
                    m.len()
                )));
            }
        }
        if let Some(r) = r {
            if r.len() != cap * ny * ny {
                return Err(Error::input(format!(
                    "per-target R: expected {cap} slots x {} values, got {}",
                    ny * ny,
                    r.len()
                )));
            }
        }
        if let Some(i) = z
            .iter()
            .position(|v| !v.is_nan_value() && !v.is_finite_value())
        {
            return Err(Error::input(format!(
                "slot {}: measurement component z{} is infinite",
                i / ny,
                i % ny
            )));
        }
        self.flush()?;
        ck(self.copied.synchronize(), "waiting for the staging buffer")?;
        self.staged.as_mut_slice().copy_from_slice(z);
        if let Some(m) = mask {
            for (d, s) in self.staged_mask.as_mut_slice().iter_mut().zip(m) {
                *d = u8::from(*s);
            }
            htod(
                &self.stream,
                self.staged_mask.as_slice(),
                &self.mask,
                0,
                "copying the mask",
            )?;
        }
        htod(
            &self.stream,
            self.staged.as_slice(),
            &self.z,
            0,
            "copying measurements to the GPU",
        )?;
        ck(self.copied.record(&self.stream), "recording an event")?;
        let r_ptr = match r {
            Some(r) => self.r.put(&self.gpu, &self.stream, r)?,
            None => 0,
        };
        let mask_ptr = if mask.is_some() { self.mask.ptr() } else { 0 };
        self.launch_update(mask_ptr, r_ptr, true)?;
        self.updates += 1;
        Ok(())
    }

    fn launch_update(&self, mask: u64, r: u64, apply: bool) -> Result<()> {
        launch(
            &self.stream,
            &self.k,
            "tracker_update",
            grid_for(self.cap, BLOCK),
            (BLOCK, 1, 1),
            &TrackerUpdate {
                mp: Arg::Bytes(as_bytes(&self.params)),
                z: &self.z,
                mask: &Addr(mask),
                rs: &Addr(r),
                xs: &self.x,
                ps: &self.p,
                ll: &self.ll,
                zhat: &self.zhat,
                ss: &self.s,
                live: &self.live_d,
                nb: self.cap as i32,
                apply: i32::from(apply),
                err: &self.err,
            },
        )
    }

    /// Every live target's predicted measurement `H x + d` (`[capacity][ny]`) and
    /// innovation covariance `S` (`[capacity][ny][ny]`) from its current state, with the
    /// model's `R` or `r`, copied to the host (free slots hold NaN), for gating.
    pub fn measure(&mut self, r: Option<&[T]>) -> Result<(Vec<T>, Vec<T>)> {
        let (cap, ny) = (self.cap, self.ny);
        if let Some(r) = r {
            if r.len() != cap * ny * ny {
                return Err(Error::input(format!(
                    "per-target R: expected {cap} slots x {} values, got {}",
                    ny * ny,
                    r.len()
                )));
            }
        }
        self.flush()?;
        let r_ptr = match r {
            Some(r) => self.r.put(&self.gpu, &self.stream, r)?,
            None => 0,
        };
        self.launch_update(0, r_ptr, false)?;
        self.innovations()
    }

    /// `H x + d` and `S` of the last [`BatchTracker::measure`] or
    /// [`BatchTracker::update`], copied to the host: `[capacity][ny]`,
    /// `[capacity][ny][ny]` (free slots NaN).
    pub fn innovations(&self) -> Result<(Vec<T>, Vec<T>)> {
        self.synchronize()?;
        let (cap, ny) = (self.cap, self.ny);
        let nyp = ny * (ny + 1) / 2;
        let mut zs = vec![T::nan(); cap * ny];
        let mut ss = vec![T::nan(); cap * nyp];
        dtoh(
            &self.stream,
            &self.zhat,
            0,
            &mut zs,
            "copying predicted measurements",
        )?;
        dtoh(
            &self.stream,
            &self.s,
            0,
            &mut ss,
            "copying innovation covariances",
        )?;
        sync(&self.stream, "reading the innovations")?;
        let mut zhat = vec![T::nan(); cap * ny];
        let mut s = vec![T::nan(); cap * ny * ny];
        for b in (0..cap).filter(|&b| self.live[b]) {
            for a in 0..ny {
                zhat[b * ny + a] = zs[a * cap + b];
                for c in 0..ny {
                    let (i, j) = if a >= c { (a, c) } else { (c, a) };
                    s[(b * ny + a) * ny + c] = ss[(i * (i + 1) / 2 + j) * cap + b];
                }
            }
        }
        Ok((zhat, s))
    }

    /// Device seconds of `f` on the tracker's stream (CUDA events around it).
    #[doc(hidden)]
    pub fn time_device(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<f64> {
        let t = EventTimer::new(&self.gpu)?;
        let stream = self.stream.clone();
        t.start(&stream)?;
        f(self)?;
        t.stop(&stream)?;
        Ok(f64::from(t.elapsed_ms()?) * 1e-3)
    }

    /// Waits for every call so far and reports a failure of the recursion.
    pub fn synchronize(&self) -> Result<()> {
        let mut v = [0u64];
        dtoh(&self.stream, &self.err, 0, &mut v, "reading the error flag")?;
        sync(&self.stream, "waiting for the tracker")?;
        if v[0] != u64::MAX {
            return Err(Error::NotPositiveDefinite {
                track: v[0] as usize,
                step: self.updates.saturating_sub(1),
                what: "innovation covariance S (reported at the update of detection)",
            });
        }
        Ok(())
    }

    /// The current state of every slot, copied to the host: `mean [capacity][1][nx]`,
    /// `cov [capacity][1][nx][nx]`, `loglik [capacity][1]` = the log-likelihood of each
    /// target's last update. Free slots hold NaN.
    pub fn state(&mut self) -> Result<Estimates<T>> {
        self.flush()?;
        self.synchronize()?;
        let (nx, cap) = (self.nx, self.cap);
        let mut e = Estimates::nan(cap, 1, nx, true);
        let mh = DevBuf::<T>::new(&self.gpu, cap * nx, "state means")?;
        let ch = DevBuf::<T>::new(&self.gpu, cap * nx * nx, "state covariances")?;
        let np = nx * (nx + 1) / 2;
        transpose(&self.stream, &self.k, &self.x, &mh, cap, 1, nx, nx)?;
        transpose(&self.stream, &self.k, &self.p, &ch, cap, 1, np, nx * nx)?;
        dtoh(&self.stream, &mh, 0, &mut e.mean, "copying tracker means")?;
        dtoh(
            &self.stream,
            &ch,
            0,
            &mut e.cov,
            "copying tracker covariances",
        )?;
        let ll = e
            .loglik
            .as_mut()
            .ok_or_else(|| Error::Cuda("no log-likelihood buffer".into()))?;
        dtoh(
            &self.stream,
            &self.ll,
            0,
            ll,
            "copying tracker log-likelihoods",
        )?;
        sync(&self.stream, "reading the tracker state")?;
        for (b, used) in self.live.iter().enumerate() {
            if !used {
                e.mean[b * nx..(b + 1) * nx].fill(T::nan());
                e.cov[b * nx * nx..(b + 1) * nx * nx].fill(T::nan());
                ll[b] = T::nan();
            }
        }
        Ok(e)
    }
}

impl<T: Real> Drop for BatchTracker<T> {
    fn drop(&mut self) {
        // Buffers and the page-locked staging memory must outlive the queued work.
        let _ = self.stream.synchronize();
    }
}

fn gpu_memset(stream: &CudaStream, b: &DevBuf<u8>, v: u8) -> Result<()> {
    // SAFETY: the range is the whole allocation.
    ck(
        unsafe { cudarc::driver::result::memset_d8_async(b.ptr(), v, b.len(), stream.cu_stream()) },
        "clearing a buffer",
    )
}

#[allow(dead_code)]
fn assert_send() {
    fn send<S: Send>() {}
    send::<BatchTracker<f32>>();
    send::<BatchTracker<f64>>();
}

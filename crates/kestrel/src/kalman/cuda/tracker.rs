//! Online tracking of many targets: [`BatchTracker`] keeps every target's mean and
//! covariance on the GPU and runs one predict/update for all of them per
//! [`BatchTracker::step`].
//!
//! Measurements go through two page-locked host buffers: while the copy of one step's
//! measurements is in flight, the caller fills the other ([`BatchTracker::staging`]).
//! Each step is one CUDA graph launch (the copy and the kernel, captured once per
//! staging buffer), so the per-step launch cost is one call into the driver. Steps are
//! asynchronous: errors of the recursion (a covariance that lost positive definiteness)
//! are reported by [`BatchTracker::synchronize`] and by the readers of the state.

use super::slot::{transpose, BLOCK};
use super::source::{kernels, model_params, Part};
use super::CudaOptions;
use crate::cuda::{
    as_bytes, ck, grid_for, htod, launch, Arg, DevBuf, EventTimer, Gpu, Module, Pinned,
};
use crate::data::Estimates;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::model::Model;
use cudarc::driver::{sys, CudaEvent, CudaGraph, CudaStream};
use std::sync::Arc;

/// Many targets tracked on one GPU, one step at a time (see the module documentation).
pub struct BatchTracker<T: Real> {
    gpu: Arc<Gpu>,
    k: Arc<Module>,
    params: Vec<T>,
    nx: usize,
    ny: usize,
    cap: usize,
    x: DevBuf<T>,
    p: DevBuf<T>,
    ll_total: DevBuf<T>,
    ll_last: DevBuf<T>,
    status: DevBuf<u8>,
    err: DevBuf<u64>,
    z: DevBuf<T>,
    pinned: [Pinned<T>; 2],
    done: [CudaEvent; 2],
    graphs: Option<[CudaGraph; 2]>,
    parity: usize,
    used: Vec<bool>,
    steps: u64,
    stream: Arc<CudaStream>,
}

impl<T: Real> BatchTracker<T> {
    /// A tracker for up to `capacity` targets of `model` on GPU `ordinal`, with no targets.
    pub fn new(ordinal: usize, model: &Model, capacity: usize, opts: &CudaOptions) -> Result<Self> {
        if capacity == 0 || capacity > i32::MAX as usize {
            return Err(Error::Input {
                msg: format!(
                    "tracker capacity must be between 1 and {}, got {capacity}",
                    i32::MAX
                ),
            });
        }
        let gpu = crate::cuda::gpu(ordinal)?;
        let k = kernels::<T>(&gpu, model, opts.bake_model, Part::Tracker)?;
        let (nx, ny) = (model.nx(), model.ny());
        let np = nx * (nx + 1) / 2;
        let stream = ck(gpu.ctx.new_stream(), "creating the tracker's stream")?;
        let mk = |n: usize, what: &str| DevBuf::<T>::new(&gpu, n, what);
        let mut pinned = [
            Pinned::<T>::new(&gpu, capacity * ny)?,
            Pinned::<T>::new(&gpu, capacity * ny)?,
        ];
        for p in pinned.iter_mut() {
            p.as_mut_slice().fill(T::nan());
        }
        let ev = || ck(gpu.ctx.new_event(None), "creating an event");
        let t = BatchTracker {
            params: model_params::<T>(model),
            nx,
            ny,
            cap: capacity,
            x: mk(capacity * nx, "tracker means")?,
            p: mk(capacity * np, "tracker covariances")?,
            ll_total: mk(capacity, "tracker log-likelihoods")?,
            ll_last: mk(capacity, "tracker log-likelihoods")?,
            status: DevBuf::new(&gpu, capacity, "tracker status")?,
            err: DevBuf::new(&gpu, 1, "the error flag")?,
            z: mk(capacity * ny, "tracker measurements")?,
            pinned,
            done: [ev()?, ev()?],
            graphs: None,
            parity: 0,
            used: vec![false; capacity],
            steps: 0,
            stream,
            k,
            gpu,
        };
        gpu_memset(&t.stream, &t.status, 0)?;
        t.err.poison(&t.stream)?;
        for b in [&t.x, &t.p, &t.ll_total, &t.ll_last] {
            b.poison(&t.stream)?;
        }
        let mut t = t;
        t.graphs = t.capture().ok();
        crate::cuda::sync(&t.stream, "initialising the tracker")?;
        Ok(t)
    }

    /// Capacity (the largest number of targets at once).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Number of targets being tracked.
    pub fn len(&self) -> usize {
        self.used.iter().filter(|u| **u).count()
    }

    /// True when no target is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Steps run so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// True when steps run as CUDA graph launches (false: the capture failed and each
    /// step launches the copy and the kernel directly).
    pub fn uses_graphs(&self) -> bool {
        self.graphs.is_some()
    }

    fn enqueue_step(&self, parity: usize) -> Result<()> {
        htod(
            &self.stream,
            self.pinned[parity].as_slice(),
            &self.z,
            0,
            "copying measurements to the GPU",
        )?;
        self.launch_step()
    }

    fn launch_step(&self) -> Result<()> {
        launch(
            &self.stream,
            &self.k,
            "tracker_step",
            grid_for(self.cap, BLOCK),
            (BLOCK, 1, 1),
            &[
                Arg::Bytes(as_bytes(&self.params)),
                Arg::Ptr(self.z.ptr()),
                Arg::Ptr(self.x.ptr()),
                Arg::Ptr(self.p.ptr()),
                Arg::Ptr(self.ll_total.ptr()),
                Arg::Ptr(self.ll_last.ptr()),
                Arg::Ptr(self.status.ptr()),
                Arg::I32(self.cap as i32),
                Arg::Ptr(self.err.ptr()),
            ],
        )
    }

    fn capture(&self) -> Result<[CudaGraph; 2]> {
        let mut g = Vec::with_capacity(2);
        for parity in 0..2 {
            ck(
                self.stream
                    .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                "beginning a graph capture",
            )?;
            let r = self.enqueue_step(parity);
            let graph = ck(
                self.stream.end_capture(sys::CUgraphInstantiate_flags(0)),
                "ending a graph capture",
            )?;
            r?;
            let graph = graph.ok_or_else(|| Error::Cuda("the captured graph is empty".into()))?;
            ck(graph.upload(), "uploading a graph")?;
            g.push(graph);
        }
        let b = g.pop().ok_or_else(|| Error::Cuda("graph capture".into()))?;
        let a = g.pop().ok_or_else(|| Error::Cuda("graph capture".into()))?;
        Ok([a, b])
    }

    /// Adds `n` targets with the model's prior; returns their slots (ids until removed).
    /// Their first step updates the prior without a prediction.
    pub fn add(&mut self, n: usize) -> Result<Vec<usize>> {
        let free: Vec<usize> = (0..self.cap).filter(|&i| !self.used[i]).take(n).collect();
        if free.len() < n {
            return Err(Error::Input {
                msg: format!(
                    "cannot add {n} targets: {} of {} slots are free",
                    free.len(),
                    self.cap
                ),
            });
        }
        self.set_slots(&free, true)?;
        Ok(free)
    }

    /// Stops tracking the targets in `slots` (their slots become free).
    pub fn remove(&mut self, slots: &[usize]) -> Result<()> {
        if let Some(&s) = slots.iter().find(|&&s| s >= self.cap || !self.used[s]) {
            return Err(Error::Input {
                msg: format!("target {s} is not tracked"),
            });
        }
        self.set_slots(slots, false)
    }

    fn set_slots(&mut self, slots: &[usize], add: bool) -> Result<()> {
        if slots.is_empty() {
            return Ok(());
        }
        let idx: Vec<i32> = slots.iter().map(|&s| s as i32).collect();
        let d = DevBuf::<i32>::new(&self.gpu, idx.len(), "slot list")?;
        htod(&self.stream, &idx, &d, 0, "copying the slot list")?;
        let n = idx.len();
        if add {
            launch(
                &self.stream,
                &self.k,
                "tracker_init",
                grid_for(n, BLOCK),
                (BLOCK, 1, 1),
                &[
                    Arg::Bytes(as_bytes(&self.params)),
                    Arg::Ptr(d.ptr()),
                    Arg::I32(n as i32),
                    Arg::Ptr(self.x.ptr()),
                    Arg::Ptr(self.p.ptr()),
                    Arg::Ptr(self.ll_total.ptr()),
                    Arg::Ptr(self.ll_last.ptr()),
                    Arg::Ptr(self.status.ptr()),
                    Arg::I32(self.cap as i32),
                ],
            )?;
        } else {
            launch(
                &self.stream,
                &self.k,
                "tracker_remove",
                grid_for(n, BLOCK),
                (BLOCK, 1, 1),
                &[
                    Arg::Ptr(d.ptr()),
                    Arg::I32(n as i32),
                    Arg::Ptr(self.status.ptr()),
                ],
            )?;
        }
        // The slot list is freed on return: wait for the kernel that reads it.
        crate::cuda::sync(&self.stream, "updating tracker slots")?;
        for &s in slots {
            self.used[s] = add;
        }
        Ok(())
    }

    /// The page-locked buffer for the next step's measurements, `[capacity][ny]` (NaN =
    /// no measurement: predict only). Waits until the copy that last used it is done.
    pub fn staging(&mut self) -> Result<&mut [T]> {
        ck(
            self.done[self.parity].synchronize(),
            "waiting for a staging buffer",
        )?;
        Ok(self.pinned[self.parity].as_mut_slice())
    }

    /// Runs one step with the measurements in the staging buffer; returns at once.
    pub fn step_staged(&mut self) -> Result<()> {
        let p = self.parity;
        match &self.graphs {
            Some(g) => ck(g[p].launch(), "launching the tracker step graph")?,
            None => self.enqueue_step(p)?,
        }
        ck(self.done[p].record(&self.stream), "recording an event")?;
        self.parity ^= 1;
        self.steps += 1;
        Ok(())
    }

    /// Runs one step on the measurements already on the device, without a copy: the
    /// kernel alone, for measuring it apart from the transfers.
    pub fn step_resident(&mut self) -> Result<()> {
        self.launch_step()?;
        self.steps += 1;
        Ok(())
    }

    /// Runs one step with `z`, `[capacity][ny]` (copied into the staging buffer first).
    pub fn step(&mut self, z: &[T]) -> Result<()> {
        let (cap, ny) = (self.cap, self.ny);
        if z.len() != cap * ny {
            return Err(Error::Input {
                msg: format!(
                    "a step needs {cap} x {ny} = {} measurement values, got {}",
                    cap * ny,
                    z.len()
                ),
            });
        }
        self.staging()?.copy_from_slice(z);
        self.step_staged()
    }

    /// Device seconds of `f` on the tracker's stream (CUDA events around it).
    pub fn time_device(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<f64> {
        let t = EventTimer::new(&self.gpu)?;
        let stream = self.stream.clone();
        t.start(&stream)?;
        f(self)?;
        t.stop(&stream)?;
        Ok(f64::from(t.elapsed_ms()?) * 1e-3)
    }

    /// Waits for every step so far and reports a failure of the recursion.
    pub fn synchronize(&self) -> Result<()> {
        let mut v = [0u64];
        crate::cuda::dtoh(&self.stream, &self.err, 0, &mut v, "reading the error flag")?;
        crate::cuda::sync(&self.stream, "waiting for the tracker")?;
        if v[0] != u64::MAX {
            return Err(Error::NotPositiveDefinite {
                track: v[0] as usize,
                step: self.steps.saturating_sub(1) as usize,
                what: "innovation covariance S (reported at the step of detection)",
            });
        }
        Ok(())
    }

    /// The current state of every slot: `mean [capacity][1][nx]`, `cov [capacity][1][nx][nx]`,
    /// `loglik [capacity][1]` = each target's total log-likelihood. Free slots hold NaN.
    pub fn state(&self) -> Result<Estimates<T>> {
        self.synchronize()?;
        let (nx, cap) = (self.nx, self.cap);
        let mut e = Estimates::nan(cap, 1, nx, true);
        let mh = DevBuf::<T>::new(&self.gpu, cap * nx, "state means")?;
        let ch = DevBuf::<T>::new(&self.gpu, cap * nx * nx, "state covariances")?;
        let np = nx * (nx + 1) / 2;
        transpose(&self.stream, &self.k, &self.x, &mh, cap, 1, nx, nx)?;
        transpose(&self.stream, &self.k, &self.p, &ch, cap, 1, np, nx * nx)?;
        crate::cuda::dtoh(&self.stream, &mh, 0, &mut e.mean, "copying tracker means")?;
        crate::cuda::dtoh(
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
        crate::cuda::dtoh(
            &self.stream,
            &self.ll_total,
            0,
            ll,
            "copying tracker log-likelihoods",
        )?;
        crate::cuda::sync(&self.stream, "reading the tracker state")?;
        for (b, used) in self.used.iter().enumerate() {
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
        // Buffers and the pinned staging memory must outlive the queued steps.
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

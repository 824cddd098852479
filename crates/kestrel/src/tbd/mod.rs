//! Spatio-temporal track-before-detect (Mazurek, "Optimization of Track-Before-Detect
//! Systems with Decimation for GPGPU"): dim targets found by accumulating frames along
//! motion hypotheses.
//!
//! For each motion vector `v = (vx, vy)` (pixels per frame) the state is
//!
//! ```text
//! P_k(x, y; v) = (1 - alpha) P_{k-1}(x - vx, y - vy; v) + alpha X_k(x, y),   P_0 = 0,
//! ```
//!
//! positions outside the frame read 0 and fractional positions are sampled bilinearly
//! (`motion.rs` states the convention). The detection map is `D_k = max_v P_k` with
//! the arg-max vector (the first on ties).
//!
//! *Decimation* `D` (the seed's scheme): frames are taken in blocks of `D`, each
//! trajectory folded through the block in one pass with its value kept on chip, and the
//! map emitted once per block, after frames `D-1, 2D-1, ...` (0-based), and after the
//! last frame when the sequence ends inside a block (that block is shorter). For integer
//! vectors the emitted maps equal the plain recursion's exactly; for fractional ones the
//! block samples each frame once along the straight trajectory instead of resampling the
//! state every frame (`cpu.rs` says how they differ).
//!
//! *Manoeuvres* (`switch.rs`, Mazurek eq. 1b): with a Markov matrix `M` between the
//! vectors ([`Params::transition`]) the step reads `sum_v' M[v', v] P_{k-1}(x - v, v')`
//! instead of `P_{k-1}(x - v, v)`; the identity is the recursion above, bit for bit.
//!
//! Files: `motion.rs` (vectors, sampling), `switch.rs` (transition matrices,
//! manoeuvres), `cpu.rs` (reference and fast path), `detect.rs` (threshold, calibration, non-maximum suppression), `sim.rs` (frames with
//! targets), `eval.rs` (Pd against Pfa and SNR), `frames.rs` (`.npy` frames, streamed),
//! `cuda/` + `kernels/` (the GPU: `common.cuh` and one `.cu` per kernel family).

pub mod autotune;
pub mod cpu;
pub mod cuda;
pub mod detect;
pub mod eval;
pub mod frames;
pub mod motion;
mod pass;
pub mod sim;
pub mod switch;

pub use detect::{calibrate, detect, Detection};
pub use frames::{Dtype, Frames};
pub use motion::{parse_velocities, speeds_directions, Motion};
pub use sim::{Noise, NoiseFrames, Target};
pub use switch::Transition;

use crate::device::Device;
use crate::error::{Error, Result};
use cpu::CpuState;

/// What the recursion needs besides the frames.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// The motion hypotheses (pixels per frame), one state plane each.
    pub motions: Vec<Motion>,
    /// Weight of the newest frame, in (0, 1].
    pub alpha: f32,
    /// Frames per emitted map (1 = every frame).
    pub decimation: usize,
    /// The Markov matrix between the vectors (manoeuvres, `switch.rs`); None or the
    /// identity: the plain recursion.
    pub transition: Option<Transition>,
}

impl Params {
    /// Checks the parameters against frames of `h x w`.
    pub fn check(&self, h: usize, w: usize) -> Result<()> {
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(Error::input(format!(
                "alpha must lie in (0, 1], got {}",
                self.alpha
            )));
        }
        if self.decimation == 0 || self.decimation > 1024 {
            return Err(Error::input(format!(
                "decimation must be between 1 and 1024, got {}",
                self.decimation
            )));
        }
        motion::check_motions(&self.motions, h, w)?;
        if let Some(m) = &self.transition {
            if m.len() != self.motions.len() {
                return Err(Error::input(format!(
                    "the transition matrix is {0} x {0}, but there are {1} motion vectors",
                    m.len(),
                    self.motions.len()
                )));
            }
        }
        Ok(())
    }

    /// The transition matrix when it is not the identity (the recursion switches).
    pub fn switching(&self) -> Option<&Transition> {
        self.transition.as_ref().filter(|m| !m.is_identity())
    }

    /// Bytes of one state `[V][H][W]` of f32, if it fits in a usize.
    pub fn state_bytes(&self, h: usize, w: usize) -> Option<usize> {
        self.motions
            .len()
            .checked_mul(h)?
            .checked_mul(w)?
            .checked_mul(4)
    }
}

/// The detection map of one emitted frame `t` (0-based frame index): `score[y][x] =
/// D_t(x, y)` and `arg[y][x]`, the index of the arg-max motion vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Map {
    /// The emitted frame (0-based frame index).
    pub t: usize,
    /// Map height (pixels).
    pub h: usize,
    /// Map width (pixels).
    pub w: usize,
    /// `score[y * w + x] = D_t(x, y)`, the best motion's score.
    pub score: Vec<f32>,
    /// `arg[y * w + x]`, the index of the arg-max motion.
    pub arg: Vec<u16>,
}

/// Options of the GPU path.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct GpuOptions {
    /// Store the state as f16 (computed in f32; half the state traffic).
    pub half: bool,
    /// This kernel instead of the autotuner's choice.
    pub kernel: Option<cuda::KernelConfig>,
}

setters!(GpuOptions {
    with_half(half: bool, "Sets [`GpuOptions::half`]."),
    with_kernel(kernel: Option<cuda::KernelConfig>, "Sets [`GpuOptions::kernel`]."),
});

enum Engine {
    Cpu(CpuState),
    #[cfg(feature = "cuda")]
    Cuda(Box<cuda::GpuTbd>),
    /// The recursion with a transition matrix on the GPU (`cuda/switch.rs`).
    #[cfg(feature = "cuda")]
    CudaSwitch(Box<cuda::switch::GpuSwitch>),
}

/// The largest finite IEEE half.
const F16_MAX: f32 = 65504.0;

/// The recursion over a stream of frames, on one device: push frames one at a time, a
/// map comes back at every emitted frame.
pub struct Tbd {
    params: Params,
    h: usize,
    w: usize,
    engine: Engine,
    pending: Vec<Vec<f32>>,
    /// Frame buffers to reuse (no allocation per frame).
    spare_frames: Vec<Vec<f32>>,
    /// Map buffers given back by [`Tbd::recycle`].
    spare_maps: Vec<(Vec<f32>, Vec<u16>)>,
    /// Frames per launch of the engine.
    per_launch: usize,
    seen: usize,
}

/// Physical memory of this machine in bytes (None when unknown).
fn physical_memory() -> Option<u64> {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && size > 0 {
            return Some(pages as u64 * size as u64);
        }
    }
    None
}

impl Tbd {
    /// A zero state for frames of `h x w`. The memory the run needs (two states and a
    /// block of frames) is checked before anything is allocated.
    pub fn new(params: Params, h: usize, w: usize, device: Device) -> Result<Tbd> {
        Tbd::with_gpu_options(params, h, w, device, GpuOptions::default())
    }

    /// As [`Tbd::new`], with the GPU path's options (ignored on the CPU). Without a
    /// kernel given, the autotuner chooses one (timed once, then cached). For D = 1 the
    /// chosen kernel may keep the state on chip for K frames: maps then come back K at
    /// a time. For D > 1 it may run several periods a launch (the wave kernel): maps then
    /// come back that many at a time.
    pub fn with_gpu_options(
        params: Params,
        h: usize,
        w: usize,
        device: Device,
        opts: GpuOptions,
    ) -> Result<Tbd> {
        params.check(h, w)?;
        let need = params
            .state_bytes(h, w)
            .and_then(|s| s.checked_mul(2))
            .and_then(|s| {
                s.checked_add(h.checked_mul(w)?.checked_mul(4 * (params.decimation + 2))?)
            });
        let limit = physical_memory().unwrap_or(u64::MAX);
        match need {
            Some(n) if (n as u64) <= limit => {}
            _ => {
                let gb = (params.motions.len() as f64 * h as f64 * w as f64 * 8.0
                    + h as f64 * w as f64 * 4.0 * (params.decimation + 2) as f64)
                    / 1e9;
                return Err(Error::input(format!(
                    "{} motion vectors on {w} x {h} frames would need {gb:.1} GB (this machine has {:.1} GB)",
                    params.motions.len(),
                    limit as f64 / 1e9
                )));
            }
        }
        let engine = match device {
            Device::Cpu => Engine::Cpu(
                CpuState::new(h, w, &params.motions, params.alpha)?
                    .with_transition(params.switching().cloned()),
            ),
            #[cfg(feature = "cuda")]
            Device::Cuda(_) | Device::AllCuda if params.switching().is_some() => {
                if let Some(k) = opts.kernel {
                    return Err(Error::input(format!(
                        "kernel {}: the named kernels run the constant-velocity recursion; with a transition matrix the switching kernel runs (name no kernel)",
                        k.name()
                    )));
                }
                let ordinal = match device {
                    Device::Cuda(o) => o,
                    _ => 0,
                };
                Engine::CudaSwitch(Box::new(cuda::switch::GpuSwitch::new(
                    ordinal, &params, h, w, opts.half,
                )?))
            }
            #[cfg(feature = "cuda")]
            Device::Cuda(_) | Device::AllCuda => {
                // One GPU: the recursion is one state (all devices: the first).
                let ordinal = match device {
                    Device::Cuda(o) => o,
                    _ => 0,
                };
                let cfg = match opts.kernel {
                    Some(k) => k,
                    None => autotune::choose(ordinal, &params, h, w, Dtype::F32, opts.half)?,
                };
                cfg.check_decimation(params.decimation)?;
                Engine::Cuda(Box::new(cuda::GpuTbd::new(
                    ordinal,
                    &params,
                    h,
                    w,
                    cfg,
                    Dtype::F32,
                )?))
            }
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) | Device::AllCuda => {
                let _ = &opts;
                return Err(Error::Unsupported(format!(
                    "{device}: this build of kestrel has no GPU support (feature `cuda`)"
                )));
            }
        };
        let per_launch = match &engine {
            #[cfg(feature = "cuda")]
            Engine::Cuda(g) => g.frames_per_launch(),
            _ => params.decimation,
        };
        // A kernel of several periods a launch holds that many frames here before a launch.
        if (per_launch as u64).saturating_mul((h * w * 4) as u64) > limit {
            return Err(Error::input(format!(
                "kernel {}: {per_launch} frames of {w} x {h} held for each launch would need {:.1} GB (this machine has {:.1} GB)",
                engine_kernel_name(&engine),
                per_launch as f64 * (h * w * 4) as f64 / 1e9,
                limit as f64 / 1e9
            )));
        }
        Ok(Tbd {
            h,
            w,
            engine,
            pending: Vec::with_capacity(per_launch),
            spare_frames: Vec::new(),
            spare_maps: Vec::new(),
            per_launch,
            params,
            seen: 0,
        })
    }

    /// On the CPU with `D = 1`: advance the state `k` frames per pass over memory
    /// (`cpu.rs`, [`cpu::CpuState::steps`]), the maps then coming back `k` at a time,
    /// each the same as one frame at a time gives. Elsewhere (GPU, `D > 1`) nothing
    /// changes. The state in memory moves once per pass instead of once per frame, which
    /// is what limits the plain step on a CPU.
    pub fn with_cpu_frames_per_pass(mut self, k: usize) -> Tbd {
        if matches!(self.engine, Engine::Cpu(_)) && self.params.decimation == 1 && k >= 1 {
            self.per_launch = k;
            self.pending = Vec::with_capacity(k);
        }
        self
    }

    /// The recursion's parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Frames pushed so far.
    pub fn frames_seen(&self) -> usize {
        self.seen
    }

    /// Adds frame `X_k` (`h * w`, row-major); returns the maps completed by it (one at
    /// each emitted frame; with a kernel that keeps the state on chip for K frames, K
    /// at a time; with one of N periods a launch, N at a time).
    pub fn push(&mut self, frame: &[f32]) -> Result<Vec<Map>> {
        if frame.len() != self.h * self.w {
            return Err(Error::input(format!(
                "frame {} holds {} pixels, expected {} x {} = {}",
                self.seen,
                frame.len(),
                self.w,
                self.h,
                self.h * self.w
            )));
        }
        let half = match &self.engine {
            #[cfg(feature = "cuda")]
            Engine::Cuda(g) => g.cfg.half,
            #[cfg(feature = "cuda")]
            Engine::CudaSwitch(g) => g.half,
            Engine::Cpu(_) => false,
        };
        if half {
            // The state is a weighted mean of frames: a frame that fits in f16 keeps
            // it in range; a larger one would turn the state infinite.
            if let Some(i) = frame.iter().position(|v| v.abs() > F16_MAX) {
                return Err(Error::input(format!(
                    "frame {}, row {}, column {}: value {} does not fit in f16 (at most {F16_MAX}), in which the state is kept (the f16 state option); use the f32 state",
                    self.seen,
                    i / self.w,
                    i % self.w,
                    frame[i]
                )));
            }
        }
        if self.pending.is_empty() && self.per_launch == 1 && matches!(self.engine, Engine::Cpu(_))
        {
            // The plain recursion on the CPU: straight from the caller's frame.
            let mut map = self.spare_map(self.seen);
            #[cfg_attr(not(feature = "cuda"), allow(irrefutable_let_patterns))]
            if let Engine::Cpu(st) = &mut self.engine {
                st.block(&[frame], &mut map.score, &mut map.arg);
            }
            self.seen += 1;
            return Ok(vec![map]);
        }
        let mut buf = self.spare_frames.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        self.pending.push(buf);
        self.seen += 1;
        if self.pending.len() == self.per_launch {
            return self.flush();
        }
        Ok(Vec::new())
    }

    /// Ends the sequence: frames left over run as a shorter block (decimation: one map
    /// after the last frame; a K-frame GPU kernel: one map per frame), the GPU's tail on
    /// the CPU from the GPU's state (the same arithmetic).
    pub fn finish(&mut self) -> Result<Vec<Map>> {
        if self.pending.is_empty() {
            return Ok(Vec::new());
        }
        #[cfg(feature = "cuda")]
        if let Engine::Cuda(g) = &self.engine {
            let mut st = CpuState::new(self.h, self.w, &self.params.motions, self.params.alpha)?;
            st.set_state(&g.state()?);
            self.engine = Engine::Cpu(st);
            if self.params.decimation == 1 {
                self.per_launch = 1;
                let frames = std::mem::take(&mut self.pending);
                let first = self.seen - frames.len();
                let mut out = Vec::new();
                for (i, f) in frames.into_iter().enumerate() {
                    self.pending.push(f);
                    let mut m = self.flush()?;
                    m.iter_mut().for_each(|m| m.t = first + i);
                    out.extend(m);
                }
                return Ok(out);
            }
            if self.pending.len() > self.params.decimation {
                // A kernel of several periods a launch: the tail in blocks of D frames
                // (the last one shorter), each with its map.
                let d = self.params.decimation;
                self.per_launch = d;
                let end = self.seen;
                let mut frames = std::mem::take(&mut self.pending).into_iter();
                let mut out = Vec::new();
                self.seen = end - frames.len();
                loop {
                    self.pending.extend(frames.by_ref().take(d));
                    if self.pending.is_empty() {
                        break;
                    }
                    self.seen += self.pending.len();
                    out.extend(self.flush()?);
                }
                debug_assert_eq!(self.seen, end);
                return Ok(out);
            }
        }
        self.flush()
    }

    /// Gives the buffers of a map that the caller is done with back to the recursion,
    /// which writes later maps into them (on the CPU: no allocation per frame).
    pub fn recycle(&mut self, map: Map) {
        let n = self.h * self.w;
        if map.score.len() == n && map.arg.len() == n && self.spare_maps.len() < 4 {
            self.spare_maps.push((map.score, map.arg));
        }
    }

    /// A map for frame `t` on recycled buffers when there are some (every value is
    /// overwritten by the block that fills it).
    fn spare_map(&mut self, t: usize) -> Map {
        let n = self.h * self.w;
        let (score, arg) = self
            .spare_maps
            .pop()
            .unwrap_or_else(|| (vec![0.0; n], vec![0; n]));
        Map {
            t,
            h: self.h,
            w: self.w,
            score,
            arg,
        }
    }

    fn flush(&mut self) -> Result<Vec<Map>> {
        let first = self.seen - self.pending.len();
        let t_last = self.seen - 1;
        // The CPU's maps: one per block of D frames, or (D = 1) one per frame of a pass.
        let cpu_maps: Vec<Map> = match self.engine {
            Engine::Cpu(_) if self.params.decimation == 1 => {
                (first..self.seen).map(|t| self.spare_map(t)).collect()
            }
            Engine::Cpu(_) => vec![self.spare_map(t_last)],
            #[cfg(feature = "cuda")]
            Engine::Cuda(_) | Engine::CudaSwitch(_) => Vec::new(),
        };
        let out = match &mut self.engine {
            Engine::Cpu(st) => {
                let mut maps = cpu_maps;
                let frames: Vec<&[f32]> = self.pending.iter().map(|f| f.as_slice()).collect();
                if self.params.decimation == 1 {
                    let mut rows: Vec<(&mut [f32], &mut [u16])> = maps
                        .iter_mut()
                        .map(|m| (&mut m.score[..], &mut m.arg[..]))
                        .collect();
                    st.steps(&frames, &mut rows);
                } else {
                    let m = &mut maps[0];
                    st.block(&frames, &mut m.score, &mut m.arg);
                }
                maps
            }
            #[cfg(feature = "cuda")]
            Engine::CudaSwitch(g) => {
                let frames: Vec<&[f32]> = self.pending.iter().map(|f| f.as_slice()).collect();
                let (score, arg) = g.run(&frames)?;
                vec![Map {
                    t: t_last,
                    h: self.h,
                    w: self.w,
                    score,
                    arg,
                }]
            }
            #[cfg(feature = "cuda")]
            Engine::Cuda(g) => {
                let mut raw = Vec::with_capacity(self.pending.len() * self.h * self.w * 4);
                for f in &self.pending {
                    raw.extend(f.iter().flat_map(|v| v.to_le_bytes()));
                }
                g.load_frames(&raw)?;
                g.launch()?;
                let maps = g.maps()?;
                let d = self.params.decimation;
                maps.into_iter()
                    .enumerate()
                    .map(|(i, (score, arg))| Map {
                        // Decimation: one map after each D frames (one or, with several
                        // periods a launch, more); else one every frame.
                        t: if d > 1 {
                            first + (i + 1) * d - 1
                        } else {
                            first + i
                        },
                        h: self.h,
                        w: self.w,
                        score,
                        arg,
                    })
                    .collect()
            }
        };
        self.spare_frames.append(&mut self.pending);
        Ok(out)
    }

    /// The state `P` after the last completed block, `[V][H][W]`.
    pub fn state(&self) -> Result<Vec<f32>> {
        match &self.engine {
            Engine::Cpu(st) => Ok(st.state()),
            #[cfg(feature = "cuda")]
            Engine::Cuda(g) => g.state(),
            #[cfg(feature = "cuda")]
            Engine::CudaSwitch(g) => g.state(),
        }
    }

    /// The GPU kernel in use (None on the CPU).
    pub fn kernel(&self) -> Option<cuda::KernelConfig> {
        match &self.engine {
            #[cfg(feature = "cuda")]
            Engine::Cuda(g) => Some(g.cfg),
            _ => None,
        }
    }
}

fn engine_kernel_name(e: &Engine) -> String {
    match e {
        Engine::Cpu(_) => "cpu".into(),
        #[cfg(feature = "cuda")]
        Engine::Cuda(g) => g.cfg.name(),
        #[cfg(feature = "cuda")]
        Engine::CudaSwitch(_) => "switch".into(),
    }
}

/// Runs the recursion over `frames` (`[T][H][W]`) and returns every emitted map.
pub fn run(
    frames: &[f32],
    h: usize,
    w: usize,
    params: &Params,
    device: Device,
) -> Result<Vec<Map>> {
    let n = h * w;
    if n == 0 || frames.is_empty() || !frames.len().is_multiple_of(n) {
        return Err(Error::input(format!(
            "{} values are not a whole number of {w} x {h} frames",
            frames.len()
        )));
    }
    let mut tbd = Tbd::new(params.clone(), h, w, device)?;
    let mut maps = Vec::new();
    for f in frames.chunks(n) {
        maps.extend(tbd.push(f)?);
    }
    maps.extend(tbd.finish()?);
    Ok(maps)
}

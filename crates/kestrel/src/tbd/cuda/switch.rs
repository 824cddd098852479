//! The recursion with manoeuvres on the GPU (`tbd/switch.rs`, kernel
//! `kernels/switch.cu`): one launch a frame, the neighbours' states in shared memory,
//! the map written at the last frame of each decimation block.

use super::super::frames::Dtype;
use super::super::motion::Motion;
use super::assemble::MAX_BLOCK_SHARED;
use super::{shrink, source, KernelConfig, Variant};
#[cfg(feature = "cuda")]
use {
    super::super::Params,
    super::params::Switch,
    super::{half_to_f32, MapPair},
    crate::cuda::{self, Addr, DevBuf, Gpu, Module},
    crate::error::{Error, Result},
    std::sync::Arc,
};

/// The kernel source (after `common.cuh` and `fused.cu`, whose helpers it uses).
pub const SWITCH_CU: &str = include_str!("../kernels/switch.cu");

/// Tile width of the switching kernel (a warp along a row).
const SW_TX: u32 = 32;

/// Dynamic shared memory of a `block` tile for `nv` vectors reaching `halo` pixels:
/// every vector's state over the tile and halo, and two mixed planes.
pub fn switch_shared_bytes(nv: usize, halo: usize, block: (u32, u32)) -> usize {
    (nv + 2) * (block.0 as usize + 2 * halo) * (block.1 as usize + 2 * halo) * 4
}

/// The block of the switching kernel for `motions`: 32 x 8, or fewer rows where the
/// vectors' planes would not fit in a block's shared memory; None when not even one row
/// fits.
pub fn switch_block(motions: &[Motion]) -> Option<(u32, u32)> {
    let halo = shrink(motions);
    (1..=8u32)
        .rev()
        .map(|ty| (SW_TX, ty))
        .find(|&b| switch_shared_bytes(motions.len(), halo, b) <= MAX_BLOCK_SHARED)
}

/// The translation unit: the fused kernel's (for `half` state, f32 frames, `block`)
/// and `switch.cu`.
pub fn switch_source(motions: &[Motion], half: bool, block: (u32, u32), w: usize) -> String {
    let cfg = KernelConfig {
        variant: Variant::Fused,
        half,
        ldg: true,
        unroll: false,
        frames: 1,
        block,
    };
    let halo = shrink(motions);
    let floats = switch_shared_bytes(motions.len(), halo, block) / 4;
    format!(
        "#define SW_HALO {halo}\n#define SW_FLOATS {floats}\n{}\n{SWITCH_CU}",
        source(motions, Dtype::F32, &cfg, w)
    )
}

/// The recursion with a transition matrix on one GPU: state, frames, matrix and map on
/// the device.
#[cfg(feature = "cuda")]
pub struct GpuSwitch {
    gpu: Arc<Gpu>,
    module: Arc<Module>,
    /// Frame height.
    pub h: usize,
    /// Frame width.
    pub w: usize,
    nv: usize,
    alpha: f32,
    /// The state is stored as f16.
    pub half: bool,
    /// The block (and tile) shape.
    pub block: (u32, u32),
    shared: u32,
    state: [DevBuf<u8>; 2],
    cur: usize,
    /// Room for one decimation block of frames, `[D][H][W]` f32.
    frames: DevBuf<f32>,
    host: Vec<f32>,
    score: DevBuf<f32>,
    arg: DevBuf<u16>,
    start: DevBuf<u32>,
    src: DevBuf<u32>,
    wt: DevBuf<f32>,
}

#[cfg(feature = "cuda")]
impl GpuSwitch {
    /// A zero state on GPU `ordinal` for `params` (which must hold a transition matrix),
    /// the state stored as f16 where `half`.
    pub fn new(
        ordinal: usize,
        params: &Params,
        h: usize,
        w: usize,
        half: bool,
    ) -> Result<GpuSwitch> {
        params.check(h, w)?;
        let Some(m) = &params.transition else {
            return Err(Error::input(
                "the switching kernel needs a transition matrix",
            ));
        };
        let nv = params.motions.len();
        let block = switch_block(&params.motions).ok_or_else(|| {
            Error::input(format!(
                "{nv} motion vectors reaching {} pixels do not fit the switching kernel's shared memory ({MAX_BLOCK_SHARED} bytes a block)",
                shrink(&params.motions)
            ))
        })?;
        cuda::catch(|| {
            let gpu = cuda::gpu(ordinal)?;
            let n = h * w;
            let sbytes = nv * n * if half { 2 } else { 4 };
            let d = params.decimation;
            let need = 2 * sbytes + d * n * 4 + n * 6;
            let free = gpu.usable_memory()?;
            if need > free {
                return Err(Error::input(format!(
                    "{nv} motion vectors on {w} x {h} frames would need {:.2} GB of GPU memory ({:.2} GB free)",
                    need as f64 / 1e9,
                    free as f64 / 1e9
                )));
            }
            let src = switch_source(&params.motions, half, block, w);
            let module = gpu.module("tbd-switch", &src, &["tbd_switch"])?;
            let shared = switch_shared_bytes(nv, shrink(&params.motions), block);
            cuda::allow_dynamic_shared(&module, "tbd_switch", shared)?;
            let s = &gpu.stream;
            let (cs, cv, cw) = m.columns();
            let t = GpuSwitch {
                state: [
                    DevBuf::<u8>::new(&gpu, sbytes, "the TBD state")?,
                    DevBuf::<u8>::new(&gpu, sbytes, "the TBD state")?,
                ],
                frames: DevBuf::<f32>::new(&gpu, d * n, "frames")?,
                score: DevBuf::<f32>::new(&gpu, n, "the detection map")?,
                arg: DevBuf::<u16>::new(&gpu, n, "arg-max vectors")?,
                start: DevBuf::from_slice(&gpu, s, cs, "the transition matrix")?,
                src: DevBuf::from_slice(&gpu, s, cv, "the transition matrix")?,
                wt: DevBuf::from_slice(&gpu, s, cw, "the transition matrix")?,
                module,
                h,
                w,
                nv,
                alpha: params.alpha,
                half,
                block,
                shared: shared as u32,
                cur: 0,
                host: Vec::with_capacity(d * n),
                gpu,
            };
            let zeros = vec![0u8; sbytes];
            cuda::htod(&t.gpu.stream, &zeros, &t.state[0], 0, "zeroing the state")?;
            cuda::sync(&t.gpu.stream, "zeroing the state")?;
            Ok(t)
        })
    }

    /// Fills the outputs (the map, the next state) with NaN, so that an unwritten value
    /// shows.
    pub fn poison(&self) -> Result<()> {
        cuda::catch(|| {
            self.score.poison(&self.gpu.stream)?;
            self.arg.poison(&self.gpu.stream)?;
            self.state[1 - self.cur].poison(&self.gpu.stream)
        })
    }

    /// Loads `frames` (at most the decimation, each `h * w`) to the device.
    pub fn load(&mut self, frames: &[&[f32]]) -> Result<()> {
        let n = self.h * self.w;
        if frames.len() * n > self.frames.len() || frames.iter().any(|f| f.len() != n) {
            return Err(Error::input(format!(
                "{} frames of {} x {} for a block of at most {}",
                frames.len(),
                self.w,
                self.h,
                self.frames.len() / n.max(1)
            )));
        }
        self.host.clear();
        frames.iter().for_each(|f| self.host.extend_from_slice(f));
        cuda::catch(|| {
            cuda::htod(
                &self.gpu.stream,
                &self.host,
                &self.frames,
                0,
                "copying frames",
            )
        })
    }

    /// Launches the first `count` loaded frames (asynchronous), one launch a frame, the
    /// map written by the last.
    pub fn launch(&mut self, count: usize) -> Result<()> {
        let (bx, by) = self.block;
        let grid = (
            (self.w as u32).div_ceil(bx),
            (self.h as u32).div_ceil(by),
            1,
        );
        let n = self.h * self.w;
        cuda::catch(|| {
            for j in 0..count {
                let p = Switch {
                    s_prev: &self.state[self.cur],
                    s_next: &self.state[1 - self.cur],
                    frame: &Addr(self.frames.at(j * n)),
                    score: &self.score,
                    arg: &self.arg,
                    h: self.h as i32,
                    w: self.w as i32,
                    alpha: self.alpha,
                    col_start: &self.start,
                    col_src: &self.src,
                    col_wt: &self.wt,
                    emit: i32::from(j + 1 == count),
                };
                let (s, m, block) = (&self.gpu.stream, &self.module, (bx, by, 1));
                cuda::launch_ex(s, m, "tbd_switch", grid, block, self.shared, &p, false)?;
                self.cur = 1 - self.cur;
            }
            Ok(())
        })
    }

    /// One decimation block: `frames` advance the state, the map after the last comes back.
    pub fn run(&mut self, frames: &[&[f32]]) -> Result<MapPair> {
        if frames.is_empty() {
            return Err(Error::input("an empty block of frames"));
        }
        self.load(frames)?;
        self.launch(frames.len())?;
        self.map()
    }

    /// The map of the last launch that wrote one.
    pub fn map(&self) -> Result<MapPair> {
        let n = self.h * self.w;
        cuda::catch(|| {
            let mut s = vec![0f32; n];
            let mut a = vec![0u16; n];
            cuda::dtoh(&self.gpu.stream, &self.score, 0, &mut s, "copying the map")?;
            cuda::dtoh(&self.gpu.stream, &self.arg, 0, &mut a, "copying the map")?;
            cuda::sync(&self.gpu.stream, "copying the map")?;
            Ok((s, a))
        })
    }

    /// The state `[V][H][W]` as f32.
    pub fn state(&self) -> Result<Vec<f32>> {
        cuda::catch(|| {
            let buf = &self.state[self.cur];
            let mut raw = vec![0u8; buf.len()];
            cuda::dtoh(&self.gpu.stream, buf, 0, &mut raw, "copying the state")?;
            cuda::sync(&self.gpu.stream, "copying the state")?;
            Ok(if self.half {
                raw.chunks_exact(2)
                    .map(|b| half_to_f32(u16::from_le_bytes([b[0], b[1]])))
                    .collect()
            } else {
                raw.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            })
        })
    }

    /// The device's name.
    pub fn device_name(&self) -> String {
        self.gpu.name.clone()
    }

    /// Vectors of the state.
    pub fn vectors(&self) -> usize {
        self.nv
    }

    /// Milliseconds of `frames` frames (one launch each, the frames loaded before, a map
    /// at the last), by CUDA events.
    pub fn time_frames(&mut self, frames: usize) -> Result<f64> {
        let timer = cuda::catch(|| cuda::EventTimer::new(&self.gpu))?;
        let per = self.frames.len() / (self.h * self.w).max(1);
        cuda::catch(|| timer.start(&self.gpu.stream))?;
        let mut left = frames;
        while left > 0 {
            let k = left.min(per);
            self.launch(k)?;
            left -= k;
        }
        cuda::catch(|| {
            timer.stop(&self.gpu.stream)?;
            cuda::sync(&self.gpu.stream, "timing")?;
            Ok(timer.elapsed_ms()? as f64)
        })
    }
}

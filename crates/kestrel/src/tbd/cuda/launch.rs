//! The launcher: one kernel configuration's module on one GPU, its buffers and launches
//! ([`GpuTbd`]), on the shared CUDA runtime (`crate::cuda`).

use super::super::frames::Dtype;
use super::super::motion::Motion;
use super::super::Params;
use super::assemble::{
    dynamic_shared_bytes, kernel_names, source, tiled_shared_bytes, wave_order, MAX_BLOCK_SHARED,
};
use super::params::{Step, WaveStep};
use super::{half_to_f32, KernelConfig, MapPair, Variant};
use crate::cuda::{self, Addr, DevBuf, Gpu, Module};
use crate::error::{Error, Result};
use std::sync::Arc;

/// The device side of a [`Variant::Wave`] kernel: its work order, ticket counter, the
/// last period each tile finished (+ 1), and the counts kept by the host (tickets
/// taken, periods run).
struct WaveState {
    order: DevBuf<u32>,
    ticket: DevBuf<u64>,
    flags: DevBuf<u32>,
    items: usize,
    issued: u64,
    period: u32,
}

/// The recursion on one GPU with one kernel configuration; state, frames and maps stay
/// on the device between launches.
pub struct GpuTbd {
    gpu: Arc<Gpu>,
    module: Arc<Module>,
    /// The kernel configuration in use.
    pub cfg: KernelConfig,
    frame: Dtype,
    motions: Vec<Motion>,
    alpha: f32,
    /// Frame height.
    pub h: usize,
    /// Frame width.
    pub w: usize,
    state: [DevBuf<u8>; 2],
    cur: usize,
    /// `slots` launches' frames, one after the other; a launch reads slot `slot`.
    frames: DevBuf<u8>,
    slots: usize,
    slot: usize,
    score: DevBuf<f32>,
    arg: DevBuf<u16>,
    /// Dynamic shared memory of each launch in bytes ([`dynamic_shared_bytes`]).
    dynamic: u32,
    wave: Option<WaveState>,
}

/// Compiles (or loads from the cache) the module of `cfg` for `params` on frames `w`
/// wide on GPU `ordinal`, allocating nothing: [`GpuTbd::new`] then finds it in memory.
/// Sweeps call it from several threads at once, since NVRTC compiles on the host.
pub fn prepare(
    ordinal: usize,
    params: &Params,
    w: usize,
    cfg: KernelConfig,
    frame: Dtype,
) -> Result<()> {
    cfg.check(&params.motions)?;
    cuda::catch(|| {
        let gpu = cuda::gpu(ordinal)?;
        let src = source(&params.motions, frame, &cfg, w);
        gpu.module("tbd", &src, &kernel_names(&cfg, params.motions.len()))
            .map(|_| ())
    })
}

impl GpuTbd {
    /// A zero state on GPU `ordinal`; compiles (or loads from the cache) the module.
    pub fn new(
        ordinal: usize,
        params: &Params,
        h: usize,
        w: usize,
        cfg: KernelConfig,
        frame: Dtype,
    ) -> Result<GpuTbd> {
        params.check(h, w)?;
        cfg.check(&params.motions)?;
        if matches!(frame, Dtype::F64) {
            return Err(Error::Unsupported(
                "f64 frames on the GPU (convert to f32)".into(),
            ));
        }
        cuda::catch(|| {
            let gpu = cuda::gpu(ordinal)?;
            let n = h * w;
            let nv = params.motions.len();
            let sbytes = nv * n * if cfg.half { 2 } else { 4 };
            let maps = cfg.maps_per_launch();
            // The map buffers hold f32 scores and u16 arg-max whatever `map_bytes` (the
            // packed kernel uses the front of them).
            let need = 2 * sbytes + cfg.frames_per_launch() * n * frame.size() + maps * n * 6;
            let free = gpu.usable_memory()?;
            if need > free {
                return Err(Error::input(format!(
                    "{nv} motion vectors on {w} x {h} frames would need {:.2} GB of GPU memory ({:.2} GB free)",
                    need as f64 / 1e9,
                    free as f64 / 1e9
                )));
            }
            let src = source(&params.motions, frame, &cfg, w);
            let module = gpu.module("tbd", &src, &kernel_names(&cfg, nv))?;
            let dynamic = dynamic_shared_bytes(&cfg, &params.motions, frame);
            if dynamic > 0 {
                let total = dynamic + tiled_shared_bytes(&cfg, &params.motions);
                if total > MAX_BLOCK_SHARED {
                    return Err(Error::input(format!(
                        "kernel {}: {total} bytes of shared memory a block (at most {MAX_BLOCK_SHARED})",
                        cfg.name()
                    )));
                }
                for k in kernel_names(&cfg, nv) {
                    cuda::allow_dynamic_shared(&module, k, dynamic)?;
                }
            }
            let state = [
                DevBuf::<u8>::new(&gpu, sbytes, "the TBD state")?,
                DevBuf::<u8>::new(&gpu, sbytes, "the TBD state")?,
            ];
            let frames =
                DevBuf::<u8>::new(&gpu, cfg.frames_per_launch() * n * frame.size(), "frames")?;
            let wave = match cfg.wave() {
                Some((periods, lag)) => {
                    let (ox, oy) = cfg.out_tile(&params.motions);
                    let (tx, ty) = (w.div_ceil(ox), h.div_ceil(oy));
                    if tx > 4095 || ty > 4095 {
                        return Err(Error::input(format!(
                            "kernel {}: {tx} x {ty} tiles (at most 4095 each way)",
                            cfg.name()
                        )));
                    }
                    let order = wave_order(periods, lag, tx, ty);
                    let s = &gpu.stream;
                    let ws = WaveState {
                        order: DevBuf::from_slice(&gpu, s, &order, "the wave order")?,
                        ticket: DevBuf::from_slice(&gpu, s, &[0u64], "the wave ticket")?,
                        flags: DevBuf::from_slice(&gpu, s, &vec![0u32; tx * ty], "wave flags")?,
                        items: order.len(),
                        issued: 0,
                        period: 0,
                    };
                    cuda::sync(s, "setting up the wave kernel")?;
                    Some(ws)
                }
                _ => None,
            };
            let score = DevBuf::<f32>::new(&gpu, maps * n, "detection maps")?;
            let arg = DevBuf::<u16>::new(&gpu, maps * n, "arg-max vectors")?;
            let t = GpuTbd {
                gpu,
                module,
                cfg,
                frame,
                motions: params.motions.clone(),
                alpha: params.alpha,
                h,
                w,
                state,
                cur: 0,
                frames,
                slots: 1,
                slot: 0,
                score,
                arg,
                dynamic: dynamic as u32,
                wave,
            };
            t.zero_state()?;
            Ok(t)
        })
    }

    fn zero_state(&self) -> Result<()> {
        let zeros = vec![0u8; self.state[self.cur].len()];
        cuda::htod(
            &self.gpu.stream,
            &zeros,
            &self.state[self.cur],
            0,
            "zeroing the state",
        )?;
        cuda::sync(&self.gpu.stream, "zeroing the state")
    }

    /// The device's name.
    pub fn device_name(&self) -> String {
        self.gpu.name.clone()
    }

    /// Frames consumed per launch.
    pub fn frames_per_launch(&self) -> usize {
        self.cfg.frames_per_launch()
    }

    /// Fills the outputs (maps, the next state) with NaN, so that an unwritten value shows.
    pub fn poison(&self) -> Result<()> {
        cuda::catch(|| {
            self.score.poison(&self.gpu.stream)?;
            self.arg.poison(&self.gpu.stream)?;
            self.state[1 - self.cur].poison(&self.gpu.stream)
        })
    }

    /// Bytes of one launch's frames.
    fn launch_bytes(&self) -> usize {
        self.cfg.frames_per_launch() * self.h * self.w * self.frame.size()
    }

    /// Room for the frames of `slots` launches (1 unless set), the launches reading them in
    /// turn: a benchmark fills them once ([`GpuTbd::load_frames_into`]) so that each launch
    /// reads frames at addresses no recent launch read, as a stream's new frames are (one
    /// buffer read again each launch could be partly served from L2). The frames loaded
    /// before are dropped; the next launch reads slot 0.
    pub fn frame_slots(&mut self, slots: usize) -> Result<()> {
        if slots == 0 {
            return Err(Error::input("zero frame slots".to_string()));
        }
        let bytes = slots * self.launch_bytes();
        cuda::catch(|| {
            let free = self.gpu.usable_memory()? + self.frames.len();
            if bytes > free {
                return Err(Error::input(format!(
                    "{slots} launches of frames would need {:.2} GB of GPU memory ({:.2} GB free)",
                    bytes as f64 / 1e9,
                    free as f64 / 1e9
                )));
            }
            // The old buffer is freed first, so that both need not fit at once.
            self.frames = DevBuf::<u8>::new(&self.gpu, 1, "frames")?;
            self.frames = DevBuf::<u8>::new(&self.gpu, bytes, "frames")?;
            self.slots = slots;
            self.slot = 0;
            Ok(())
        })
    }

    /// Copies one launch's frames into slot `slot` (see [`GpuTbd::frame_slots`]).
    pub fn load_frames_into(&self, slot: usize, raw: &[u8]) -> Result<()> {
        if slot >= self.slots {
            return Err(Error::input(format!("frame slot {slot} of {}", self.slots)));
        }
        if raw.len() != self.launch_bytes() {
            return Err(Error::input(format!(
                "{} bytes of frames for a launch of {} frames of {} x {} {}",
                raw.len(),
                self.cfg.frames_per_launch(),
                self.w,
                self.h,
                self.frame.name()
            )));
        }
        let at = slot * self.launch_bytes();
        cuda::catch(|| cuda::htod(&self.gpu.stream, raw, &self.frames, at, "copying frames"))
    }

    /// Copies `frames_per_launch()` frames (bytes as stored, `[F][H][W]`) to the device,
    /// into the slot that the next launch reads.
    pub fn load_frames(&self, raw: &[u8]) -> Result<()> {
        self.load_frames_into(self.slot, raw)
    }

    /// One launch (asynchronous): the loaded frames advance the state; the maps are
    /// written on the device.
    pub fn launch(&mut self) -> Result<()> {
        cuda::catch(|| {
            let (bx, by) = self.cfg.block;
            let (ox, oy) = self.cfg.out_tile(&self.motions);
            let mut grid = (
                (self.w as u32).div_ceil(ox as u32),
                (self.h as u32).div_ceil(oy as u32),
                1,
            );
            let step = Step {
                s_prev: &self.state[self.cur],
                s_next: &self.state[1 - self.cur],
                frames: &Addr(self.frames.at(self.slot * self.launch_bytes())),
                score: &self.score,
                arg: &self.arg,
                h: self.h as i32,
                w: self.w as i32,
                alpha: self.alpha,
            };
            // The wave form: one block a work item; the state buffers in fixed places,
            // taken by the parity of the period (`cur` follows it).
            let wave = self.wave.as_ref().map(|ws| WaveStep {
                s_prev: &self.state[0],
                s_next: &self.state[1],
                frames: step.frames,
                score: step.score,
                arg: step.arg,
                h: step.h,
                w: step.w,
                alpha: step.alpha,
                order: &ws.order,
                ticket: &ws.ticket,
                flags: &ws.flags,
                base: ws.issued,
                gp0: ws.period,
            });
            if let Some(ws) = &self.wave {
                grid = (ws.items as u32, 1, 1);
            }
            // The late and packed kernels need the state of the launch before them only
            // after their first frames (`griddepcontrol.wait` in `staged.cu`, `packed.cu`): their blocks
            // may start while that launch's last blocks run. The wave kernel waits on its
            // flags instead.
            let programmatic = matches!(
                self.cfg.variant,
                Variant::Late { .. } | Variant::Wave { .. } | Variant::Packed { .. }
            ) && self.gpu.cc.0 >= 9;
            let (s, m, block) = (&self.gpu.stream, &self.module, (bx, by, 1));
            for k in kernel_names(&self.cfg, self.motions.len()) {
                match &wave {
                    Some(p) => cuda::launch_ex(s, m, k, grid, block, self.dynamic, p, programmatic),
                    None => {
                        cuda::launch_ex(s, m, k, grid, block, self.dynamic, &step, programmatic)
                    }
                }?;
            }
            if let Some(ws) = &mut self.wave {
                ws.issued += ws.items as u64;
                ws.period = ws
                    .period
                    .wrapping_add(self.cfg.wave().map_or(1, |(p, _)| p));
                self.cur = (ws.period & 1) as usize;
            } else {
                self.cur = 1 - self.cur;
            }
            self.slot = (self.slot + 1) % self.slots;
            Ok(())
        })
    }

    /// Waits for the device.
    pub fn sync(&self) -> Result<()> {
        cuda::catch(|| cuda::sync(&self.gpu.stream, "track-before-detect"))
    }

    /// The maps of the last launch: `maps_per_launch()` pairs (score, arg), `[H][W]` each.
    pub fn maps(&self) -> Result<Vec<MapPair>> {
        cuda::catch(|| {
            let n = self.h * self.w;
            let m = self.cfg.maps_per_launch();
            let mut s = vec![0f32; m * n];
            let mut a = vec![0u16; m * n];
            if self.cfg.map_bytes() == 3 {
                // f16 scores and u8 arg-max in the front of the buffers (`packed.cu`, PACKED).
                let mut sh = vec![0f32; (m * n).div_ceil(2)];
                let mut ab = vec![0u16; (m * n).div_ceil(2)];
                cuda::dtoh(&self.gpu.stream, &self.score, 0, &mut sh, "copying maps")?;
                cuda::dtoh(&self.gpu.stream, &self.arg, 0, &mut ab, "copying maps")?;
                cuda::sync(&self.gpu.stream, "copying maps")?;
                let halves = sh.iter().flat_map(|x| {
                    let b = x.to_bits();
                    [b as u16, (b >> 16) as u16]
                });
                for (d, h) in s.iter_mut().zip(halves) {
                    *d = half_to_f32(h);
                }
                for (d, b) in a.iter_mut().zip(ab.iter().flat_map(|x| x.to_le_bytes())) {
                    *d = b as u16;
                }
            } else {
                cuda::dtoh(&self.gpu.stream, &self.score, 0, &mut s, "copying maps")?;
                cuda::dtoh(&self.gpu.stream, &self.arg, 0, &mut a, "copying maps")?;
                cuda::sync(&self.gpu.stream, "copying maps")?;
            }
            Ok(s.chunks(n)
                .zip(a.chunks(n))
                .map(|(s, a)| (s.to_vec(), a.to_vec()))
                .collect())
        })
    }

    /// The state `[V][H][W]` as f32.
    pub fn state(&self) -> Result<Vec<f32>> {
        cuda::catch(|| {
            let buf = &self.state[self.cur];
            let mut raw = vec![0u8; buf.len()];
            cuda::dtoh(&self.gpu.stream, buf, 0, &mut raw, "copying the state")?;
            cuda::sync(&self.gpu.stream, "copying the state")?;
            Ok(if self.cfg.half {
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

    /// Milliseconds of `launches` launches on device-resident frames, by CUDA events.
    pub fn time_launches(&mut self, launches: usize) -> Result<f64> {
        let timer = cuda::catch(|| cuda::EventTimer::new(&self.gpu))?;
        cuda::catch(|| timer.start(&self.gpu.stream))?;
        for _ in 0..launches {
            self.launch()?;
        }
        cuda::catch(|| {
            timer.stop(&self.gpu.stream)?;
            cuda::sync(&self.gpu.stream, "timing")?;
            Ok(timer.elapsed_ms()? as f64)
        })
    }
}

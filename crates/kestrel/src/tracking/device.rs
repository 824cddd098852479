//! The tracker on a device: [`DeviceTracker`] runs [`Tracker`] on the CPU or
//! [`GpuTracker`](super::cuda::GpuTracker) on a GPU behind one interface, so that the
//! command line, the Python package and the benchmarks choose the engine in one place.

use super::tracker::Tracker;
#[cfg(feature = "cuda")]
use super::{cuda::GpuTracker, tracks::Tracks};
use super::{TrackSet, TrackerConfig};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::model::Model;

/// Where the scans run.
enum Engine {
    Cpu(Box<Tracker>),
    /// The GPU tracker and, when the caller reads tracks every scan, their host copy.
    #[cfg(feature = "cuda")]
    Gpu(Box<GpuTracker>, Option<Tracks>),
}

/// A multi-target tracker on one device (GNN or JPDA on either). On a GPU, by default,
/// the tracks are copied to the host after every scan
/// so that [`DeviceTracker::tracks`] reads them; [`DeviceTracker::with_host_tracks`]
/// turns that off for runs that only time the device.
pub struct DeviceTracker {
    engine: Engine,
    device: Device,
}

impl DeviceTracker {
    /// A tracker of `model` with `cfg` on `device` (`AllCuda`: the first GPU); without the
    /// `cuda` feature every GPU is refused, naming the device.
    pub fn new(model: &Model, cfg: TrackerConfig, device: Device) -> Result<DeviceTracker> {
        let device = device.first();
        let engine = match device {
            Device::Cpu => Engine::Cpu(Box::new(Tracker::new(model, cfg)?)),
            #[cfg(feature = "cuda")]
            Device::Cuda(_) | Device::AllCuda => {
                let ordinal = if let Device::Cuda(o) = device { o } else { 0 };
                let t = GpuTracker::new(ordinal, model, cfg)?;
                let tracks = t.tracks()?;
                Engine::Gpu(Box::new(t), Some(tracks))
            }
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) | Device::AllCuda => {
                return Err(Error::Unsupported(format!(
                    "{device}: this build of kestrel has no GPU support (feature `cuda`)"
                )));
            }
        };
        Ok(DeviceTracker { engine, device })
    }

    /// A tracker of a nonlinear model or an IMM, each track filtered by the filter of
    /// `opts` ([`Tracker::nonlinear`]). It runs on the CPU: a GPU is refused, naming the
    /// device.
    pub fn nonlinear(
        problem: &crate::nonlinear::NonlinearProblem,
        opts: &crate::nonlinear::NonlinearOptions,
        cfg: TrackerConfig,
        device: Device,
    ) -> Result<DeviceTracker> {
        let device = device.first();
        if device != Device::Cpu {
            return Err(Error::Unsupported(format!(
                "{device}: tracking with a nonlinear model or an IMM runs on the CPU only (use the CPU; the GPU tracker takes linear models)"
            )));
        }
        Ok(DeviceTracker {
            engine: Engine::Cpu(Box::new(Tracker::nonlinear(problem, opts, cfg)?)),
            device,
        })
    }

    /// Modes of an IMM tracker (1 otherwise).
    pub fn modes(&self) -> usize {
        match &self.engine {
            Engine::Cpu(t) => t.modes(),
            #[cfg(feature = "cuda")]
            Engine::Gpu(..) => 1,
        }
    }

    /// Whether a GPU tracker copies its tracks to the host after every scan (default:
    /// yes). Without the copies [`DeviceTracker::tracks`] is refused until
    /// [`DeviceTracker::copy_tracks`] makes one.
    #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
    pub fn with_host_tracks(mut self, copy: bool) -> Self {
        #[cfg(feature = "cuda")]
        if let Engine::Gpu(_, tracks) = &mut self.engine {
            if !copy {
                *tracks = None;
            }
        }
        #[cfg(not(feature = "cuda"))]
        let _ = copy;
        self
    }

    /// The device the scans run on (its `Display` names the GPU).
    pub fn device(&self) -> Device {
        self.device
    }

    /// One scan: `z` holds the scan's detections, `ny` values each.
    pub fn step(&mut self, z: &[f64]) -> Result<()> {
        match &mut self.engine {
            Engine::Cpu(t) => t.step(z),
            #[cfg(feature = "cuda")]
            Engine::Gpu(t, tracks) => {
                t.step(z)?;
                if tracks.is_some() {
                    *tracks = Some(t.tracks()?);
                }
                Ok(())
            }
        }
    }

    /// Copies a GPU tracker's tracks to the host now (a no-op on the CPU).
    pub fn copy_tracks(&mut self) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Engine::Gpu(t, tracks) = &mut self.engine {
            *tracks = Some(t.tracks()?);
        }
        Ok(())
    }

    /// The live tracks after the last scan (on a GPU: as last copied to the host).
    pub fn tracks(&self) -> Result<&dyn TrackSet> {
        match &self.engine {
            Engine::Cpu(t) => Ok(t.as_ref()),
            #[cfg(feature = "cuda")]
            Engine::Gpu(_, Some(tracks)) => Ok(tracks),
            #[cfg(feature = "cuda")]
            Engine::Gpu(_, None) => Err(Error::input(
                "the GPU tracker's tracks are not copied to the host (copy_tracks)",
            )),
        }
    }

    /// Live tracks (on a GPU without reading the tracks back).
    pub fn len(&self) -> usize {
        match &self.engine {
            Engine::Cpu(t) => t.len(),
            #[cfg(feature = "cuda")]
            Engine::Gpu(t, _) => t.len(),
        }
    }

    /// True without live tracks.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the scans' time went.
    pub fn timing(&self) -> super::Timing {
        match &self.engine {
            Engine::Cpu(t) => t.timing,
            #[cfg(feature = "cuda")]
            Engine::Gpu(t, _) => t.timing,
        }
    }

    /// The gate's chi-square threshold.
    pub fn gate_threshold(&self) -> f64 {
        match &self.engine {
            Engine::Cpu(t) => t.gate_threshold(),
            #[cfg(feature = "cuda")]
            Engine::Gpu(t, _) => t.gate_threshold(),
        }
    }
}

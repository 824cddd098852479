//! Where an algorithm runs: the CPU (rayon) or a CUDA GPU.

use crate::error::{Error, Result};
use std::fmt;

/// A compute device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Device {
    /// All cores of this machine, through rayon.
    Cpu,
    /// The CUDA GPU with this ordinal.
    Cuda(usize),
    /// Every CUDA GPU of this host: a batch of tracks is split over them (methods that
    /// cannot be split run on the first).
    AllCuda,
}

/// What [`Device::auto`] chose.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AutoDevice {
    /// The device to run on.
    pub device: Device,
    /// Why no GPU was chosen (no driver, no device, ...), when the CPU was.
    pub why_not_gpu: Option<String>,
}

impl Device {
    /// The GPU when a CUDA driver and device are usable, else the CPU, with the reason
    /// the GPU was passed over.
    ///
    /// ```
    /// let choice = kestrel::Device::auto();
    /// if let Some(why) = &choice.why_not_gpu {
    ///     println!("running on the CPU: {why}");
    /// }
    /// let device = choice.device;
    /// # let _ = device;
    /// ```
    pub fn auto() -> AutoDevice {
        match crate::cuda::available(0) {
            Ok(()) => AutoDevice {
                device: Device::Cuda(0),
                why_not_gpu: None,
            },
            Err(why) => AutoDevice {
                device: Device::Cpu,
                why_not_gpu: Some(why),
            },
        }
    }

    /// The device to run single-device work on: the first GPU for `AllCuda`.
    pub fn first(self) -> Device {
        match self {
            Device::AllCuda => Device::Cuda(0),
            d => d,
        }
    }

    /// Parses `auto`, `cpu`, `cuda`, `cuda:N` or `cuda:all`; CUDA devices are checked
    /// for availability.
    pub fn parse(s: &str) -> Result<Device> {
        match s {
            "auto" => Ok(Device::auto().device),
            "cpu" => Ok(Device::Cpu),
            "cuda:all" => {
                crate::cuda::available(0).map_err(|why| {
                    Error::DeviceUnavailable(format!("{s}: no usable CUDA GPU: {why}"))
                })?;
                Ok(Device::AllCuda)
            }
            _ => {
                let ordinal = match s.strip_prefix("cuda") {
                    Some("") => 0,
                    Some(rest) => rest
                        .strip_prefix(':')
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| {
                            Error::Unsupported(format!(
                                "unknown device \"{s}\" (expected auto, cpu, cuda, cuda:N or cuda:all)"
                            ))
                        })?,
                    None => {
                        return Err(Error::Unsupported(format!(
                            "unknown device \"{s}\" (expected auto, cpu, cuda, cuda:N or cuda:all)"
                        )))
                    }
                };
                crate::cuda::available(ordinal).map_err(|why| {
                    Error::DeviceUnavailable(format!("cuda:{ordinal}: no usable CUDA GPU: {why}"))
                })?;
                Ok(Device::Cuda(ordinal))
            }
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu ({} threads)", rayon::current_num_threads()),
            Device::AllCuda => {
                let n = crate::cuda::device_count();
                write!(f, "cuda:all ({n} GPUs")?;
                if n > 0 {
                    write!(
                        f,
                        ": {}",
                        crate::cuda::device_name(0).unwrap_or_else(|_| "?".into())
                    )?;
                }
                write!(f, ")")
            }
            Device::Cuda(i) => write!(
                f,
                "cuda:{i} ({})",
                crate::cuda::device_name(*i).unwrap_or_else(|_| "?".into())
            ),
        }
    }
}

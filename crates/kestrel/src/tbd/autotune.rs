//! A small autotuner: times the kernel variants for a frame size, motion set,
//! decimation and frame type on the device, and caches the fastest in
//! `<cache dir>/tbd-autotune.txt` (one line per setting: key, kernel, frames/s), so the
//! timing runs once per machine, setting and list of candidates.

#[cfg(feature = "cuda")]
use super::cuda::GpuTbd;
use super::cuda::{shrink, KernelConfig, Variant};
use super::frames::Dtype;
use super::Params;
#[cfg(feature = "cuda")]
use crate::error::{Error, Result};

/// The variants worth timing: for decimation D > 1 the per-trajectory kernels (fused,
/// fused with several pixels per thread, per-vector) and the late kernel (frame tiles
/// copied into shared memory by cp.async, the state sampled after the frames) with D
/// frames per launch, and the late kernel over several periods a launch (`wave`); for
/// D = 1 the per-trajectory kernels and the lean kernel, the state on chip for K = 4
/// frames in tiles of 128, 96, 80 or 64 columns, one, two or three vectors between
/// barriers. Loads, unrolling and block shapes vary. Kernels that no run chose on the
/// H100 or the H200 are not timed: the seed's tiled and staged kernels (kept for its
/// figure and by name) and the retired resident and streaming kernels
/// (docs/tbd-gpu.md, "Retired variants").
pub fn candidates(params: &Params, half: bool) -> Vec<KernelConfig> {
    let d = params.decimation;
    let mut v = Vec::new();
    let mut push = |c: KernelConfig| {
        if c.check(&params.motions).is_ok() {
            v.push(c);
        }
    };
    let base = KernelConfig {
        half,
        ..KernelConfig::fused(d)
    };
    // The seed's variants: cached or plain loads and block shapes (vectors unrolled), and
    // one block shape with the vector loop not unrolled.
    for block in [(32, 8), (64, 4), (128, 2), (32, 16), (32, 32)] {
        for ldg in [true, false] {
            push(KernelConfig { ldg, block, ..base });
        }
    }
    push(KernelConfig {
        unroll: false,
        ..base
    });
    // Several pixels per thread, plain loads (faster than __ldg for the fused kernel on
    // an H100). Unrolling the vectors makes the body 13 x D x PX x PY samples long: it
    // spills at D = 10, so only D = 1 times it.
    for (px, py, block) in [
        (4, 2, (32, 4)),
        (4, 2, (32, 8)),
        (2, 2, (32, 8)),
        (4, 1, (32, 8)),
        (2, 4, (32, 4)),
    ] {
        for unroll in [false, true] {
            if unroll && d > 1 {
                continue;
            }
            push(KernelConfig {
                variant: Variant::FusedCells { px, py },
                ldg: false,
                unroll,
                block,
                ..base
            });
        }
    }
    // Decimation with the frame tiles staged in shared memory, the state sampled after
    // the frames, several blocks a multiprocessor (the first staged kernel, which samples
    // it first, ran at 0.53x of this one on the H200 and is no longer timed).
    if d > 1 {
        // On the H100, 32 x 4 and 64 x 4 blocks of 2 pixels per thread ran at 0.54-0.73x
        // the 32 x 8 one; 32 x 8 and 32 x 12 lead, each ahead in one precision.
        for (px, block) in [(2, (32, 8)), (2, (32, 12)), (2, (32, 16)), (1, (64, 4))] {
            push(KernelConfig {
                variant: Variant::Late { px },
                ldg: false,
                block,
                ..base
            });
        }
        // The late kernel over several periods a launch, the state between them kept in
        // L2: periods x lag (tile rows between periods) trades the L2 the state needs
        // against waits for the tiles of the period before.
        for (periods, lag) in [(2, 8), (3, 6), (4, 5)] {
            push(KernelConfig {
                variant: Variant::Wave { periods, lag },
                ldg: false,
                block: (32, 16),
                ..base
            });
        }
    }
    // One kernel per vector.
    if params.motions.len() <= 64 {
        for ldg in [true, false] {
            push(KernelConfig {
                variant: Variant::PerVector,
                ldg,
                ..base
            });
        }
    }
    if d == 1 && shrink(&params.motions) <= 4 {
        // The lean kernel (vectors unrolled: its choices are made at compile time): 1024
        // threads with 4 rows each, 512 with 8 (more registers), K = 4 (K = 8 spills);
        // two or three vectors between barriers (four spill: 0.5x of three).
        for (rows, vecs, block, frames) in [
            (4, 1, (128, 8), 4),
            (4, 1, (96, 8), 4),
            (8, 1, (128, 4), 4),
            (2, 1, (64, 16), 4),
            (4, 2, (96, 8), 4),
            (4, 3, (96, 8), 4),
            (4, 3, (80, 8), 4),
            (4, 3, (128, 8), 4),
            (4, 3, (64, 12), 4),
        ] {
            push(KernelConfig {
                variant: Variant::Lean { rows, vecs },
                ldg: true,
                unroll: true,
                frames,
                block,
                ..base
            });
        }
    }
    v
}

/// The packed kernels worth timing (decimation 1 only; `Variant::Packed`, the state held
/// and computed in f16x2): not among [`candidates`], since f16 arithmetic is less exact
/// than the f16 state (`packed.cu`, `PACKED`) and must be asked for by name (`--kernel`).
/// K = 4, two blocks a multiprocessor: two rows a thread in 32 x 16 threads (64 x 32
/// pixels) with four or five vectors between barriers, and three rows in 32 x 11 (64 x 33
/// pixels, 779 tiles on a 1024 x 1024 frame: just under three rounds of 264 blocks) with
/// four or five; one block a multiprocessor of 64 x 16 threads, four vectors; the fastest
/// with plain loads too; and the wave forms of 3 x 4 at 32 x 11 that were fastest on the
/// H100 (4 periods a launch 4 tile rows apart, 3 periods 5 apart: `docs/tbd-gpu.md`,
/// "Fifteenth round").
pub fn packed_candidates(params: &Params) -> Vec<KernelConfig> {
    if params.decimation != 1 {
        return Vec::new();
    }
    [
        (2, 5, (32, 16), true, (0, 0)),
        (2, 4, (32, 16), true, (0, 0)),
        (3, 5, (32, 11), true, (0, 0)),
        (3, 4, (32, 11), true, (0, 0)),
        (2, 4, (64, 16), true, (0, 0)),
        (2, 5, (32, 16), false, (0, 0)),
        (3, 4, (32, 11), true, (4, 4)),
        (3, 4, (32, 11), true, (3, 5)),
    ]
    .into_iter()
    .map(|(rows, vecs, block, ldg, wave)| KernelConfig {
        ldg,
        ..KernelConfig::packed(rows, vecs, wave, 4, block)
    })
    .filter(|c| c.check(&params.motions).is_ok())
    .collect()
}

/// Frames to time on: a fixed pattern of small integers, not zeros (zeros can hide an
/// unwritten output and run faster than real data).
pub fn timing_frames(bytes: usize, frame: Dtype) -> Vec<u8> {
    let n = bytes / frame.size();
    let mut raw = Vec::with_capacity(bytes);
    for i in 0..n {
        let v = ((i * 7 + i / 1031 * 13) % 17) as u8;
        match frame {
            Dtype::U8 => raw.push(v),
            Dtype::U16 => raw.extend((v as u16).to_le_bytes()),
            Dtype::F64 => raw.extend((v as f64 * 0.1).to_le_bytes()),
            _ => raw.extend((v as f32 * 0.1).to_le_bytes()),
        }
    }
    raw
}

#[cfg(feature = "cuda")]
fn key(device: &str, params: &Params, h: usize, w: usize, frame: Dtype, half: bool) -> String {
    let mut hsh = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |b: &[u8]| {
        for &x in b {
            hsh = (hsh ^ x as u64).wrapping_mul(0x100_0000_01b3);
        }
    };
    eat(device.as_bytes());
    for m in &params.motions {
        eat(&m.vx.to_le_bytes());
        eat(&m.vy.to_le_bytes());
    }
    // The candidates too: a choice made among other kernels (an older kestrel) is timed
    // again, not kept.
    for c in candidates(params, half) {
        eat(c.name().as_bytes());
    }
    format!(
        "{:016x}-{w}x{h}-v{}-D{}-{}-{}",
        hsh,
        params.motions.len(),
        params.decimation,
        frame.name(),
        if half { "f16" } else { "f32" }
    )
}

#[cfg(feature = "cuda")]
fn cache_file() -> Option<std::path::PathBuf> {
    crate::cuda::nvrtc::cache_dir().map(|d| d.join("tbd-autotune.txt"))
}

/// Frames per second of `cfg` on device-resident frames (median of a few timed runs).
#[cfg(feature = "cuda")]
pub fn measure(gpu: &mut GpuTbd, launches: usize) -> Result<f64> {
    let mut t = Vec::new();
    gpu.time_launches(2)?;
    for _ in 0..3 {
        t.push(gpu.time_launches(launches)?);
    }
    t.sort_by(|a, b| a.total_cmp(b));
    let frames = (launches * gpu.frames_per_launch()) as f64;
    Ok(frames / (t[1] / 1e3))
}

/// The fastest kernel for this setting on GPU `ordinal`: from the cache, else timed.
#[cfg(feature = "cuda")]
pub fn choose(
    ordinal: usize,
    params: &Params,
    h: usize,
    w: usize,
    frame: Dtype,
    half: bool,
) -> Result<KernelConfig> {
    let device = crate::cuda::device_name(ordinal)?;
    let k = key(&device, params, h, w, frame, half);
    let file = cache_file();
    if let Some(text) = file.as_ref().and_then(|f| std::fs::read_to_string(f).ok()) {
        for line in text.lines().rev() {
            let mut it = line.split_whitespace();
            if it.next() == Some(k.as_str()) {
                if let Some(c) = it.next().and_then(KernelConfig::parse) {
                    return Ok(c);
                }
            }
        }
    }
    let mut best: Option<(f64, KernelConfig)> = None;
    let cands = candidates(params, half);
    let most = cands
        .iter()
        .map(|c| c.frames_per_launch())
        .max()
        .unwrap_or(1);
    let raw = timing_frames(h * w * frame.size() * most.max(64), frame);
    // A candidate that cannot run here (device resources, or memory: the wave kernel
    // holds several periods of frames) is skipped; if none runs, the first one's error.
    let mut first_err = None;
    for c in cands {
        let mut g = match GpuTbd::new(ordinal, params, h, w, c, frame) {
            Ok(g) => g,
            Err(e) => {
                first_err.get_or_insert(e);
                continue;
            }
        };
        g.load_frames(&raw[..h * w * frame.size() * c.frames_per_launch()])?;
        let launches = (64 / c.frames_per_launch()).max(4);
        let fps = measure(&mut g, launches)?;
        if best.map(|(b, _)| fps > b).unwrap_or(true) {
            best = Some((fps, c));
        }
    }
    let (fps, c) = match (best, first_err) {
        (Some(b), _) => b,
        (None, Some(e)) => return Err(e),
        (None, None) => return Err(Error::Cuda("no track-before-detect kernel ran".into())),
    };
    if let Some(f) = file {
        // Failing soft: a cache that cannot be written only costs a new timing. The file is
        // replaced whole (temporary + rename), so a link planted at its name is replaced,
        // not followed, and a concurrent reader sees the old or the new file.
        let mut text = match std::fs::symlink_metadata(&f) {
            Ok(m) if m.is_file() => std::fs::read_to_string(&f).unwrap_or_default(),
            _ => String::new(),
        };
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text += &format!("{k} {} {fps:.0}\n", c.name());
        let _ = crate::cuda::nvrtc::write_cache(&f, text.as_bytes());
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tbd::{speeds_directions, Motion};

    /// The benchmark's plain recursion over `motions` at decimation `decimation`.
    fn params(motions: &[Motion], decimation: usize) -> Params {
        Params {
            motions: motions.to_vec(),
            alpha: 0.1,
            decimation,
            transition: None,
        }
    }

    #[test]
    fn the_autotuner_never_chooses_f16_arithmetic() {
        // The packed kernels (f16x2 arithmetic) are timed by the benchmark and run when
        // named, never chosen for an f16 state on their own.
        for d in [1, 10] {
            let p = params(&speeds_directions(&[0.0, 1.0], 12).unwrap(), d);
            for half in [false, true] {
                assert!(candidates(&p, half)
                    .iter()
                    .all(|c| !matches!(c.variant, Variant::Packed { .. })));
            }
            let packed = packed_candidates(&p);
            assert_eq!(packed.is_empty(), d != 1);
            assert!(packed.iter().all(|c| c.half
                && c.check(&p.motions).is_ok()
                && c.emits_every_frame()
                && KernelConfig::parse(&c.name()) == Some(*c)));
        }
    }

    #[test]
    fn every_candidate_name_reads_back_as_itself() {
        // The cache file and `kestrel tbd --kernel` hold names: each must parse to the
        // same configuration (the lean kernel's vectors between barriers included).
        let motions = speeds_directions(&[0.0, 1.0], 12).unwrap();
        let mut lean_vecs = std::collections::BTreeSet::new();
        for decimation in [1, 10] {
            let p = params(&motions, decimation);
            for half in [false, true] {
                for c in candidates(&p, half) {
                    assert_eq!(KernelConfig::parse(&c.name()), Some(c), "{}", c.name());
                    if let Variant::Lean { vecs, .. } = c.variant {
                        lean_vecs.insert(vecs);
                    }
                }
            }
        }
        assert_eq!(lean_vecs.into_iter().collect::<Vec<_>>(), [1, 2, 3]);
        let v3 = KernelConfig::parse("lean4v3/ldg/unroll/f16/96x8/K4").unwrap();
        assert_eq!(v3.variant, Variant::Lean { rows: 4, vecs: 3 });
        assert_eq!(v3.name(), "lean4v3/ldg/unroll/f16/96x8/K4");
        assert!(KernelConfig::parse("lean4v/ldg/unroll/f16/96x8/K4").is_none());
        assert!(KernelConfig::parse("lean4v5/ldg/unroll/f16/96x8/K4")
            .unwrap()
            .check(&motions)
            .is_err());
        // The packed kernel and its wave form.
        let pw = KernelConfig::parse("packed3v4w4g4/ldg/unroll/f16/32x11/K4").unwrap();
        assert_eq!(
            pw.variant,
            Variant::Packed {
                rows: 3,
                vecs: 4,
                periods: 4,
                lag: 4
            }
        );
        assert_eq!(pw.name(), "packed3v4w4g4/ldg/unroll/f16/32x11/K4");
        assert_eq!((pw.frames_per_launch(), pw.maps_per_launch()), (16, 16));
        assert!(pw.check(&motions).is_ok());
        let p1 = KernelConfig::parse("packed3v4/ldg/unroll/f16/32x11/K4").unwrap();
        assert_eq!((p1.frames_per_launch(), p1.wave()), (4, None));
        assert_eq!(pw.wave(), Some((4, 4)));
        for bad in [
            "packed3v4w4/ldg/unroll/f16/32x11/K4",
            "packed3v4w4g/ldg/unroll/f16/32x11/K4",
            "packed3vw4g4/ldg/unroll/f16/32x11/K4",
        ] {
            assert!(KernelConfig::parse(bad).is_none(), "{bad}");
        }
        for bad in [
            // No lag; 256 periods; a tile (8 x 4 pixels) smaller than its halo (K12: 12).
            "packed3v4w4g0/ldg/unroll/f16/32x11/K4",
            "packed3v4w256g4/ldg/unroll/f16/32x11/K4",
            "packed3v4w2g2/ldg/unroll/f16/32x11/K12",
        ] {
            let c = KernelConfig::parse(bad).unwrap();
            assert!(c.check(&motions).is_err(), "{bad}");
        }
        // The retired kernels are no longer read from names (an autotuner cache that
        // holds one times the candidates again); the seed's tiled and staged kernels are
        // read by name though the autotuner does not time them.
        for retired in [
            "resident4/ldg/unroll/f32/128x8/K4",
            "stream16/plain/unroll/f32/32x8/K4",
            "stream64v2/plain/unroll/f16/32x4/K4",
        ] {
            assert!(KernelConfig::parse(retired).is_none(), "{retired}");
        }
        for seed in [
            "tiled/ldg/loop/f32/32x8/K4",
            "staged2/plain/unroll/f32/32x8/D10",
        ] {
            let c = KernelConfig::parse(seed).unwrap();
            assert_eq!(c.name(), seed);
            assert!(c.check(&motions).is_ok(), "{seed}");
        }
        for d in [1, 10] {
            let p = params(&motions, d);
            assert!(candidates(&p, false)
                .iter()
                .all(|c| !matches!(c.variant, Variant::Tiled | Variant::Staged { .. })));
        }
    }
}

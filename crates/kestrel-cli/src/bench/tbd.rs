//! Benchmarks of track-before-detect: the CPU fast path, and on a GPU every kernel
//! variant the autotuner considers (13 vectors, 1024 x 1024 frames by default), each
//! against its roofline, frames on the device and frames coming over PCIe (u8, f32).
//!
//! Roofline of a launch: the bytes its scheme must move (state read and written once,
//! the wave kernel's written once a period, its frames read once, its maps written: f32
//! score + u16 arg per pixel) over the device's bandwidth measured in the same run (a
//! device-to-device copy, bytes read and written: 2.9 TB/s on the H100, about 4.0 TB/s
//! on the H200); per frame that is that / frames per launch. Host-fed: the frame's bytes over
//! the measured host-to-device copy bandwidth. Timed on a fixed non-zero pattern of
//! frames; on the device, from a ring of frame buffers ([`RING_BYTES`]), so that no
//! launch reads frames another launch has just read. `KESTREL_BENCH_TBD=part,...` keeps
//! only the kernels whose name holds a part; a part that is a whole kernel name (as
//! `kestrel tbd --kernel` takes it) is measured even where the autotuner does not
//! consider it. `KESTREL_BENCH_TBD_RING=bytes` sets the ring's size (0: one buffer, read
//! again by every launch). `KESTREL_BENCH_TBD_SIZE=HxW` sets the GPU runs' frame size
//! (default 1024x1024; 512x512 with `--quick`), `KESTREL_BENCH_TBD_FRAMES=N` the frames of
//! a timed device-fed run (default 200).

use super::{time_runs, Record, Sink};
use kestrel::tbd::cpu::CpuState;
use kestrel::tbd::cuda::{GpuTbd, KernelConfig, Variant};
use kestrel::tbd::{autotune, speeds_directions, Dtype, Params};
use serde_json::json;

/// Bytes of frames the device-fed runs cycle through (five times the H100's 50 MB L2).
const RING_BYTES: usize = 256 << 20;

fn params(decimation: usize) -> Params {
    Params {
        motions: speeds_directions(&[0.0, 1.0], 12).expect("the benchmark's vectors"),
        alpha: 0.1,
        decimation,
        transition: None,
    }
}

/// Bytes per frame that the scheme of `cfg` must move: the state read once a launch and
/// written once a launch, except that the wave kernel writes it after every period (its
/// L2 keeps what the next period reads, not what it writes) and the packed kernel's wave
/// form reads and writes it every period, its frames and its maps (in the kernel's own
/// format, `map_bytes`).
fn bytes_per_frame(cfg: &KernelConfig, nv: usize, n: usize, frame: Dtype) -> f64 {
    let sb = if cfg.half { 2 } else { 4 };
    let f = cfg.frames_per_launch() as f64;
    let maps = cfg.maps_per_launch() as f64;
    // The packed kernel's wave form reads and writes the state every period of `frames`.
    let (reads, writes) = match cfg.variant {
        Variant::Wave { periods, .. } => (1.0, periods as f64),
        Variant::Packed { periods, .. } if periods > 0 => (periods as f64, periods as f64),
        _ => (1.0, 1.0),
    };
    let state = (nv * n * sb) as f64;
    ((reads + writes) * state + f * (n * frame.size()) as f64 + maps * (n * cfg.map_bytes()) as f64)
        / f
}

fn record(
    name: String,
    device: &str,
    prec: &'static str,
    h: usize,
    w: usize,
    nv: usize,
    frames: usize,
    secs: &[f64],
    extra: serde_json::Value,
) -> Record {
    let mut r = Record::new(name, device, prec, h * w, frames, nv, 1, secs);
    let fps = frames as f64 / r.median_s;
    let mut e = json!({"frames_per_s": fps, "height": h, "width": w, "vectors": nv});
    if let (Some(o), Some(x)) = (e.as_object_mut(), extra.as_object()) {
        for (k, v) in x {
            o.insert(k.clone(), v.clone());
        }
    }
    r.extra = e;
    r
}

fn cpu(sink: &mut Sink, quick: bool) {
    let (h, w) = if quick { (256, 256) } else { (1024, 1024) };
    let frames = if quick { 8 } else { 20 };
    for d in [1usize, 10] {
        let p = params(d);
        let mut st =
            CpuState::new(h, w, &p.motions, p.alpha).expect("the benchmark's state is a few MB");
        let fr: Vec<Vec<f32>> = (0..d)
            .map(|k| {
                (0..h * w)
                    .map(|i| ((i * 7 + k * 13) % 17) as f32 * 0.1)
                    .collect()
            })
            .collect();
        let refs: Vec<&[f32]> = fr.iter().map(|f| f.as_slice()).collect();
        let mut s = vec![0.0f32; h * w];
        let mut a = vec![0u16; h * w];
        let launches = (frames / d).max(1);
        let times = time_runs(1, 3, || {
            for _ in 0..launches {
                st.block(&refs, &mut s, &mut a);
            }
        });
        let device = format!("cpu ({} threads)", rayon::current_num_threads());
        sink.push(record(
            format!("tbd/cpu/D{d}"),
            &device,
            "f32",
            h,
            w,
            p.motions.len(),
            launches * d,
            &times,
            json!({}),
        ));
    }
}

/// The benchmark's passes: (decimation, f16 state).
const PASSES: [(usize, bool); 4] = [(1, false), (1, true), (10, false), (10, true)];

/// What a pass of decimation `d` and state type `half` times with no parts given: the
/// autotuner's candidates, and (D = 1, f16 state) the packed kernels, which compute in
/// f16 and are reported as their own precision, `f16x2`.
fn pass_candidates(d: usize, half: bool) -> Vec<KernelConfig> {
    let p = params(d);
    let mut v = autotune::candidates(&p, half);
    if half {
        v.extend(autotune::packed_candidates(&p));
    }
    v
}

/// The precision a kernel computes in, as the records and the summary name it.
fn precision(cfg: &KernelConfig) -> &'static str {
    match (cfg.variant, cfg.half) {
        (Variant::Packed { .. }, _) => "f16x2",
        (_, true) => "f16",
        _ => "f32",
    }
}

/// The parts of `KESTREL_BENCH_TBD=part,part` (empty: every candidate), each checked by
/// [`check_parts`].
pub fn kernel_parts() -> anyhow::Result<Vec<String>> {
    let only: Vec<String> = std::env::var("KESTREL_BENCH_TBD")
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    check_parts(&only)?;
    Ok(only)
}

/// Every part names something to time: a part of some candidate's name, or a whole
/// kernel name of one of the passes that the benchmark's vectors can run (a typo would
/// otherwise time nothing, silently).
fn check_parts(only: &[String]) -> anyhow::Result<()> {
    for o in only {
        let part_of_candidate = PASSES.iter().any(|&(d, half)| {
            pass_candidates(d, half)
                .iter()
                .any(|c| c.name().contains(o.as_str()))
        });
        let named = KernelConfig::parse(o).is_some_and(|c| {
            PASSES.iter().any(|&(d, half)| {
                c.half == half
                    && c.check_decimation(d).is_ok()
                    && c.check(&params(d).motions).is_ok()
            })
        });
        if !part_of_candidate && !named {
            return Err(crate::cmd::bad(format!(
                "KESTREL_BENCH_TBD: {o:?} is part of no candidate kernel's name, nor a kernel of decimation 1 or 10 that the benchmark's vectors can run"
            )));
        }
    }
    Ok(())
}

/// The kernels a pass of decimation `d` and state type `half` times: the autotuner's
/// candidates whose name holds one of the parts of `only` (all where it is empty), then
/// each part that is a whole kernel name of this decimation and state type that they lack.
fn kernels_to_time(
    candidates: Vec<KernelConfig>,
    only: &[String],
    d: usize,
    half: bool,
) -> Vec<KernelConfig> {
    let mut cfgs: Vec<KernelConfig> = candidates
        .into_iter()
        .filter(|c| only.is_empty() || only.iter().any(|o| c.name().contains(o.as_str())))
        .collect();
    for o in only {
        if let Some(cfg) = KernelConfig::parse(o) {
            let fits = cfg.half == half && cfg.check_decimation(d).is_ok();
            if fits && !cfgs.contains(&cfg) {
                cfgs.push(cfg);
            }
        }
    }
    cfgs
}

fn gpu(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    if let Err(why) = kestrel::cuda::available(0) {
        errln!("bench tbd: no GPU ({why}); GPU rows skipped");
        return Ok(());
    }
    let (h, w) = frame_size()?.unwrap_or(if quick { (512, 512) } else { (1024, 1024) });
    let n = h * w;
    let device = kestrel::cuda::device_name(0)?;
    let bandwidth = super::device_bandwidth();
    let ring = ring_bytes()?;
    let timed_frames = timed_frames()?;
    let mut best: Vec<(String, f64)> = Vec::new();
    let only = kernel_parts()?;
    for (d, half) in PASSES {
        let p = params(d);
        let nv = p.motions.len();
        // The fastest of each precision (f16 state: f16 and f16x2).
        let mut top: Vec<(f64, KernelConfig)> = Vec::new();
        for cfg in kernels_to_time(pass_candidates(d, half), &only, d, half) {
            let mut g = match GpuTbd::new(0, &p, h, w, cfg, Dtype::F32) {
                Ok(g) => g,
                Err(e) => {
                    errln!("bench tbd: {}: {e}", cfg.name());
                    continue;
                }
            };
            // A ring of frame slots (two at least), each launch reading the next: no
            // launch finds its frames in L2 from an earlier one, as a stream's new frames
            // would not be.
            let raw = autotune::timing_frames(n * 4 * cfg.frames_per_launch(), Dtype::F32);
            let slots = if ring == 0 {
                1
            } else {
                ring.div_ceil(raw.len()).max(2)
            };
            g.frame_slots(slots)?;
            for s in 0..slots {
                g.load_frames_into(s, &raw)?;
            }
            let launches = if quick {
                (40 / cfg.frames_per_launch()).max(2)
            } else {
                (timed_frames / cfg.frames_per_launch()).max(4)
            };
            // A configuration the device cannot launch (resources) is reported and
            // skipped, as the autotuner skips it.
            let timed = g.time_launches(2).and_then(|_| {
                (0..5)
                    .map(|_| g.time_launches(launches))
                    .collect::<Result<Vec<f64>, _>>()
            });
            let ms = match timed {
                Ok(ms) => ms,
                Err(e) => {
                    errln!("bench tbd: {}: {e}", cfg.name());
                    continue;
                }
            };
            let secs: Vec<f64> = ms.iter().map(|m| m / 1e3).collect();
            let frames = launches * cfg.frames_per_launch();
            let bpf = bytes_per_frame(&cfg, nv, n, Dtype::F32);
            let r = record(
                format!("tbd/gpu/{}", cfg.name()),
                &device,
                precision(&cfg),
                h,
                w,
                nv,
                frames,
                &secs,
                json!({
                    "fed": "device",
                    "decimation": d,
                    "bytes_per_frame": bpf,
                    "bandwidth_Bps": bandwidth,
                    "roofline_frames_per_s": bandwidth / bpf,
                }),
            );
            let fps = frames as f64 / r.median_s;
            let mut r = r;
            if let Some(o) = r.extra.as_object_mut() {
                o.insert(
                    "fraction_of_roofline".into(),
                    json!(fps / (bandwidth / bpf)),
                );
            }
            sink.push(r);
            match top.iter_mut().find(|t| precision(&t.1) == precision(&cfg)) {
                Some(t) if fps > t.0 => *t = (fps, cfg),
                Some(_) => {}
                None => top.push((fps, cfg)),
            }
        }
        for (fps, cfg) in top {
            best.push((format!("D{d} {}: {}", precision(&cfg), cfg.name()), fps));
            host_fed(sink, &device, &p, h, w, cfg, quick)?;
        }
    }
    for (what, fps) in best {
        errln!("bench tbd: fastest {what}: {fps:.0} frames/s");
    }
    switching(sink, &device, bandwidth, h, w, timed_frames)
}

/// The recursion with manoeuvres on the GPU (`--switch 0.1` over the benchmark's 13
/// vectors; `tbd/kernels/switch.cu`, one launch a frame): frames per second on
/// device-resident frames against the roofline of its traffic (the state read and
/// written once a frame, the frame, the map once a period).
fn switching(
    sink: &mut Sink,
    device: &str,
    bandwidth: f64,
    h: usize,
    w: usize,
    frames: usize,
) -> anyhow::Result<()> {
    let n = h * w;
    for (d, half) in [(1, false), (1, true), (10, false)] {
        let mut p = params(d);
        p.transition = Some(kestrel::tbd::Transition::switching(&p.motions, 0.1)?);
        let nv = p.motions.len();
        let mut g = match kestrel::tbd::cuda::switch::GpuSwitch::new(0, &p, h, w, half) {
            Ok(g) => g,
            Err(e) => {
                errln!("bench tbd: the switching kernel: {e}");
                return Ok(());
            }
        };
        let raw = autotune::timing_frames(n * 4 * d, Dtype::F32);
        let fr: Vec<f32> = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let refs: Vec<&[f32]> = fr.chunks(n).collect();
        g.load(&refs)?;
        g.time_frames(d)?;
        let count = frames.max(d).div_ceil(d) * d;
        let ms = g.time_frames(count)?;
        let secs = vec![ms / 1e3];
        let s = if half { 2.0 } else { 4.0 };
        let bpf = 2.0 * s * (nv * n) as f64 + 4.0 * n as f64 + 6.0 * n as f64 / d as f64;
        let prec = if half { "f16" } else { "f32" };
        let r = record(
            format!("tbd/switch/P0.1/{prec}/D{d}"),
            device,
            prec,
            h,
            w,
            nv,
            count,
            &secs,
            json!({ "kernel": "switch", "decimation": d, "switch": 0.1, "block": format!("{:?}", g.block), "bandwidth_Bps": bandwidth, "roofline_frames_per_s": bandwidth / bpf }),
        );
        errln!(
            "bench tbd: switching kernel ({prec} state, D{d}): {:.0} frames/s (roofline {:.0})",
            count as f64 / (ms / 1e3),
            bandwidth / bpf
        );
        sink.push(r);
    }
    Ok(())
}

/// Frames copied from host memory before each launch (u8 and f32), against the bus.
fn host_fed(
    sink: &mut Sink,
    device: &str,
    p: &Params,
    h: usize,
    w: usize,
    cfg: KernelConfig,
    quick: bool,
) -> anyhow::Result<()> {
    let n = h * w;
    for frame in [Dtype::U8, Dtype::F32] {
        let mut g = GpuTbd::new(0, p, h, w, cfg, frame)?;
        let raw = vec![7u8; n * frame.size() * cfg.frames_per_launch()];
        let launches = if quick {
            (20 / cfg.frames_per_launch()).max(2)
        } else {
            (100 / cfg.frames_per_launch()).max(4)
        };
        // The bus: the same copies alone.
        let copy = time_runs(1, 3, || {
            for _ in 0..launches {
                g.load_frames(&raw).expect("copy");
            }
            g.sync().expect("sync");
        });
        let times = time_runs(1, 3, || {
            for _ in 0..launches {
                g.load_frames(&raw).expect("copy");
                g.launch().expect("launch");
            }
            g.sync().expect("sync");
        });
        let bytes = (launches * raw.len()) as f64;
        let bus = bytes / super::median(&copy);
        let frames = launches * cfg.frames_per_launch();
        let bus_fps = bus / (n * frame.size()) as f64;
        let r = record(
            format!("tbd/gpu-host-fed/{}/{}", frame.name(), cfg.name()),
            device,
            precision(&cfg),
            h,
            w,
            p.motions.len(),
            frames,
            &times,
            json!({"fed": "host", "frame_type": frame.name(), "bus_GBps": bus / 1e9, "bus_limit_frames_per_s": bus_fps}),
        );
        sink.push(r);
    }
    Ok(())
}

/// Bytes of the device-fed runs' frame ring: `KESTREL_BENCH_TBD_RING` (0: one buffer,
/// read again by every launch), else [`RING_BYTES`]; a value that is not a byte count is
/// a usage error (`kestrel bench` checks it before any family runs).
pub fn ring_bytes() -> anyhow::Result<usize> {
    match std::env::var("KESTREL_BENCH_TBD_RING") {
        Err(_) => Ok(RING_BYTES),
        Ok(v) => v.trim().parse::<usize>().map_err(|_| {
            crate::cmd::bad(format!(
                "KESTREL_BENCH_TBD_RING={v:?}: expected a number of bytes (0: one frame buffer)"
            ))
        }),
    }
}

/// The GPU runs' frame size from `KESTREL_BENCH_TBD_SIZE=HxW` (None: not set); a value
/// that is not two positive numbers is a usage error, checked before any family runs.
/// Each side at most [`MAX_SIDE`] (a frame of that size already exceeds any GPU's memory
/// for the state, which the run then reports; larger products could overflow).
pub fn frame_size() -> anyhow::Result<Option<(usize, usize)>> {
    let Ok(v) = std::env::var("KESTREL_BENCH_TBD_SIZE") else {
        return Ok(None);
    };
    let side = |t: &str| {
        t.trim()
            .parse::<usize>()
            .ok()
            .filter(|&x| (1..=MAX_SIDE).contains(&x))
    };
    let parsed = v
        .trim()
        .split_once(['x', 'X'])
        .and_then(|(a, b)| Some((side(a)?, side(b)?)));
    parsed.map(Some).ok_or_else(|| {
        crate::cmd::bad(format!(
            "KESTREL_BENCH_TBD_SIZE={v:?}: expected HEIGHTxWIDTH, each 1..={MAX_SIDE}, as 2048x2048"
        ))
    })
}

/// The largest side `KESTREL_BENCH_TBD_SIZE` takes.
const MAX_SIDE: usize = 65536;

/// The most frames `KESTREL_BENCH_TBD_FRAMES` takes (five timed runs of them a kernel).
const MAX_TIMED_FRAMES: usize = 100_000;

/// Frames a timed run of the device-fed GPU benchmark covers: `KESTREL_BENCH_TBD_FRAMES`
/// (default 200; rounded down to whole launches, at least 4); a value that is not a
/// number of frames in 1..=[`MAX_TIMED_FRAMES`] is a usage error, checked before any
/// family runs.
pub fn timed_frames() -> anyhow::Result<usize> {
    match std::env::var("KESTREL_BENCH_TBD_FRAMES") {
        Err(_) => Ok(200),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(f) if (1..=MAX_TIMED_FRAMES).contains(&f) => Ok(f),
            _ => Err(crate::cmd::bad(format!(
                "KESTREL_BENCH_TBD_FRAMES={v:?}: expected a number of frames, 1..={MAX_TIMED_FRAMES}"
            ))),
        },
    }
}

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    if std::env::var("KESTREL_BENCH_GPU_ONLY")
        .map(|v| v == "1")
        .unwrap_or(false)
    {
        return gpu(sink, quick);
    }
    cpu(sink, quick);
    gpu(sink, quick)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_kernels_are_timed_in_the_f16_pass_as_their_own_precision() {
        // The D = 1 f16 pass times the packed kernels (f16 arithmetic) besides the
        // autotuner's candidates, and names them f16x2, so that the summary's f16 line
        // stays the f16 state computed in f32; no other pass times them.
        let f16 = pass_candidates(1, true);
        let packed: Vec<&KernelConfig> = f16
            .iter()
            .filter(|c| matches!(c.variant, Variant::Packed { .. }))
            .collect();
        assert!(!packed.is_empty());
        assert!(packed.iter().all(|c| precision(c) == "f16x2"));
        assert!(f16
            .iter()
            .filter(|c| !matches!(c.variant, Variant::Packed { .. }))
            .all(|c| precision(c) == "f16"));
        for (d, half) in [(1, false), (10, false), (10, true)] {
            assert!(pass_candidates(d, half)
                .iter()
                .all(|c| !matches!(c.variant, Variant::Packed { .. })));
        }
        // A part of a packed kernel's name names something to time.
        assert!(check_parts(&["packed2v5/".to_string()]).is_ok());
    }

    #[test]
    fn rooflines_count_each_kernels_map_format() {
        // 13 vectors, f16 state, K = 4, f32 frames: the state read and written once a
        // launch (13 B a pixel and frame), the frame (4 B), the map: 6 B (f32 score, u16
        // arg-max) for the lean kernel, 3 B (f16 score, u8 arg-max) for the packed one.
        let n = 1 << 20;
        let k4 = |variant| KernelConfig {
            variant,
            half: true,
            ldg: true,
            unroll: true,
            frames: 4,
            block: (32, 11),
        };
        let lean = k4(Variant::Lean { rows: 4, vecs: 3 });
        let packed = k4(Variant::Packed {
            rows: 3,
            vecs: 4,
            periods: 0,
            lag: 0,
        });
        assert_eq!(bytes_per_frame(&lean, 13, n, Dtype::F32), 23.0 * n as f64);
        assert_eq!(bytes_per_frame(&packed, 13, n, Dtype::F32), 20.0 * n as f64);
        // The wave form reads and writes the state every period of 4 frames: the same.
        let wave = k4(Variant::Packed {
            rows: 3,
            vecs: 4,
            periods: 4,
            lag: 4,
        });
        assert_eq!(bytes_per_frame(&wave, 13, n, Dtype::F32), 20.0 * n as f64);
    }

    #[test]
    fn named_kernels_join_the_candidates_of_their_pass() {
        let p = params(10);
        let cands = autotune::candidates(&p, false);
        let named = |v: &[KernelConfig]| v.iter().map(|c| c.name()).collect::<Vec<_>>();
        // No parts: every candidate, nothing else.
        assert_eq!(
            named(&kernels_to_time(cands.clone(), &[], 10, false)),
            named(&cands)
        );
        let only: Vec<String> = [
            "wave3g6/",
            "wave2g12/plain/unroll/f32/32x16/D10",
            "wave3g6/plain/unroll/f32/32x16/D10",
            "wave2g12/plain/unroll/f16/32x16/D10",
            "lean4v3/ldg/unroll/f32/64x12/K4",
        ]
        .map(str::to_string)
        .to_vec();
        // A part keeps the candidates that hold it; a whole name outside them is added
        // once, to the pass of its decimation and state type only.
        let got = named(&kernels_to_time(cands.clone(), &only, 10, false));
        assert_eq!(
            got,
            [
                "wave3g6/plain/unroll/f32/32x16/D10",
                "wave2g12/plain/unroll/f32/32x16/D10"
            ]
        );
        let got = named(&kernels_to_time(
            autotune::candidates(&p, true),
            &only,
            10,
            true,
        ));
        assert_eq!(
            got,
            [
                "wave3g6/plain/unroll/f16/32x16/D10",
                "wave2g12/plain/unroll/f16/32x16/D10"
            ]
        );
        let got = named(&kernels_to_time(
            autotune::candidates(&params(1), false),
            &only,
            1,
            false,
        ));
        assert_eq!(got, ["lean4v3/ldg/unroll/f32/64x12/K4"]);
        assert!(check_parts(&only).is_ok());
    }

    #[test]
    fn a_part_that_names_nothing_to_time_is_refused() {
        let refused = |p: &str| check_parts(&[p.to_string()]).is_err();
        // A typo, a name of no candidate that does not parse, a decimation the benchmark
        // does not run, and a kernel the vectors cannot run (three tiles of 52,560 bytes).
        assert!(refused("wave9z"));
        assert!(refused("wave2g12/plain/unroll/f32/32x16"));
        assert!(refused("wave2g12/plain/unroll/f32/32x16/D5"));
        assert!(refused("wave2g8/plain/unroll/f32/64x12/D10"));
        // A part of candidates' names and a whole name outside them pass.
        assert!(!refused("late2/"));
        assert!(!refused("wave2g12/plain/unroll/f32/32x16/D10"));
        // The retired kernels are nothing to time; the seed's tiled and staged kernels,
        // no longer candidates, are timed when named whole, not by a part of the name.
        assert!(refused("resident4/"));
        assert!(refused("stream16/plain/unroll/f32/32x8/K4"));
        assert!(refused("tiled/"));
        assert!(!refused("tiled/ldg/loop/f32/32x8/K4"));
        assert!(!refused("staged2/plain/unroll/f32/32x8/D10"));
    }
}

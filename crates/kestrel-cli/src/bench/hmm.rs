//! Hidden Markov models (`kestrel bench --only hmm`): a 4-state model with 8 symbols
//! (categorical) and a 4-state model with 2-D Gaussian emissions, B x T from one long
//! sequence (1 x 10^6) to many short ones (10^5 x 100), sequential and parallel in time,
//! on the CPU (f64) and, when present, the GPU (f32 and f64; the kernel time in `extra`).
//! `KESTREL_BENCH_GPU_ONLY=1` skips the CPU runs.

use super::{time_runs, Record, Sink};
use kestrel::hmm::{hmm_on, Emission, HiddenMarkovModel, HmmMethod, HmmOptions};
use kestrel::{Device, Measurements, Real};

fn rows(k: usize, m: usize, seed: u64) -> Vec<f64> {
    // A fixed pseudo-random stochastic matrix, heavier on the diagonal.
    let mut s = seed;
    let mut v = Vec::with_capacity(k * m);
    for i in 0..k {
        let mut row: Vec<f64> = (0..m)
            .map(|j| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                0.1 + (s >> 40) as f64 / (1u64 << 24) as f64 + if i == j { 2.0 } else { 0.0 }
            })
            .collect();
        let t: f64 = row.iter().sum();
        row.iter_mut().for_each(|x| *x /= t);
        v.extend(row);
    }
    v
}

fn models() -> anyhow::Result<Vec<(&'static str, HiddenMarkovModel)>> {
    let k = 4;
    let cat = HiddenMarkovModel::new(
        rows(k, k, 1),
        vec![0.25; k],
        Emission::Categorical {
            symbols: 8,
            probs: rows(k, 8, 2),
        },
    )?;
    let gauss = HiddenMarkovModel::new(
        rows(k, k, 3),
        vec![0.25; k],
        Emission::Gaussian {
            ny: 2,
            means: (0..2 * k).map(|i| (i as f64 * 0.7).sin() * 2.0).collect(),
            covs: (0..k).flat_map(|_| [1.0, 0.2, 0.2, 0.5]).collect(),
        },
    )?;
    Ok(vec![("categorical", cat), ("gaussian", gauss)])
}

fn observations(m: &HiddenMarkovModel, b: usize, t: usize) -> anyhow::Result<Measurements<f64>> {
    let ny = m.ny();
    let mut s = 7u64;
    let data = (0..b * t * ny)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            match m.emission() {
                Emission::Categorical { symbols, .. } => ((s >> 33) % *symbols as u64) as f64,
                _ => (s >> 11) as f64 / (1u64 << 53) as f64 * 6.0 - 3.0,
            }
        })
        .collect();
    Ok(Measurements::new(b, t, ny, data)?)
}

fn one<T: Real>(
    sink: &mut Sink,
    device: Device,
    label: &str,
    kind: &str,
    m: &HiddenMarkovModel,
    z: &Measurements<f64>,
    method: HmmMethod,
    repeats: usize,
) -> anyhow::Result<()> {
    let z: Measurements<T> = z.cast();
    let opts = HmmOptions::default().with_method(method);
    let mut kernel = Vec::new();
    let times = time_runs(1, repeats, || {
        let r = hmm_on(device, m, &z, &opts);
        if device != Device::Cpu {
            kernel.push(kestrel::hmm::cuda::last_kernel_ms());
        }
        if let Err(e) = r {
            errln!("bench hmm: {e}");
        }
    });
    let mut r = Record::new(
        format!("hmm/{kind}/{}", method.name()),
        label,
        T::NAME,
        z.tracks(),
        z.steps(),
        m.states(),
        m.ny(),
        &times,
    );
    if !kernel.is_empty() {
        r.extra = serde_json::json!({ "kernel_ms": super::median(&kernel) });
    }
    sink.push(r);
    Ok(())
}

pub fn run(sink: &mut Sink, quick: bool) -> anyhow::Result<()> {
    let sizes: &[(usize, usize)] = if quick {
        &[(1, 100_000), (100, 1_000)]
    } else {
        &[
            (1, 1_000_000),
            (100, 10_000),
            (1_000, 1_000),
            (100_000, 100),
        ]
    };
    let repeats = if quick { 2 } else { 5 };
    let gpu_only = std::env::var("KESTREL_BENCH_GPU_ONLY").is_ok_and(|v| v == "1");
    let gpu = kestrel::cuda::available(0).is_ok();
    let gpu_label = if gpu {
        format!(
            "cuda:0 ({})",
            kestrel::cuda::device_name(0).unwrap_or_default()
        )
    } else {
        String::new()
    };
    let cpu_label = format!("cpu ({} threads)", rayon::current_num_threads());
    for (kind, m) in models()? {
        for &(b, t) in sizes {
            let z = observations(&m, b, t)?;
            for method in [HmmMethod::Sequential, HmmMethod::Parallel] {
                if !gpu_only {
                    one::<f64>(sink, Device::Cpu, &cpu_label, kind, &m, &z, method, repeats)?;
                }
                if gpu {
                    one::<f32>(
                        sink,
                        Device::Cuda(0),
                        &gpu_label,
                        kind,
                        &m,
                        &z,
                        method,
                        repeats,
                    )?;
                    one::<f64>(
                        sink,
                        Device::Cuda(0),
                        &gpu_label,
                        kind,
                        &m,
                        &z,
                        method,
                        repeats,
                    )?;
                }
            }
        }
    }
    Ok(())
}

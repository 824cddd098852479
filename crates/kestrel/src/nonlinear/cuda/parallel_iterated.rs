//! `smooth --method parallel-iterated` on a GPU with every pass on the device: the
//! linearisation of each later pass (`kernels/linearise.cu`, one thread a step, the model
//! in f64) writes the affine model's per-step records and the unwrapped measurements
//! straight into the parallel RTS smoother's buffers (`parallel::cuda::ResidentRts`),
//! whose smoothed moments stay on the device for the next pass. Only the first pass's
//! moments go up and the last pass's outputs come down.

use super::super::models::NonlinearModel;
use super::super::sigma::SigmaRule;
use super::params::{NlLineariseSteps, NlWiden};
use super::source::linearise_source;
use crate::cuda::{by_precision, catch, dtoh, gpu, grid_for, htod, launch, sync, Addr, DevBuf};
use crate::data::Estimates;
use crate::error::{Error, Result};
use crate::linalg::Real;
use crate::parallel::cuda::{GpuReal, ResidentRts};

const BLOCK: u32 = 128;

/// One track's later passes (`passes` of them) of the parallel iterated smoother on GPU
/// `ordinal`, from the first pass's smoothed moments `sm` `[t][nx]`, `sc` `[t][nx][nx]`
/// (f64) and its measurements `z` `[t][ny]`: the last pass's filtered and smoothed
/// estimates in `T`. `rule` is the sigma-point rule of the UKF or CKF, `None` for the
/// EKF and IEKF (Jacobians).
pub(crate) fn later_passes<T: Real>(
    ordinal: usize,
    model: &NonlinearModel,
    rule: Option<&SigmaRule>,
    z: &[f64],
    sm: &[f64],
    sc: &[f64],
    passes: usize,
) -> Result<(Estimates<T>, Estimates<T>)> {
    fn cast<T: Real, D: Real>(
        (f, s): (Estimates<D>, Estimates<D>),
    ) -> (Estimates<T>, Estimates<T>) {
        (f.cast(), s.cast())
    }
    by_precision!(T, D => catch(|| run::<D>(ordinal, model, rule, z, sm, sc, passes)).map(cast))
}

fn run<D: GpuReal>(
    ordinal: usize,
    model: &NonlinearModel,
    rule: Option<&SigmaRule>,
    z: &[f64],
    sm: &[f64],
    sc: &[f64],
    passes: usize,
) -> Result<(Estimates<D>, Estimates<D>)> {
    let g = gpu(ordinal)?;
    let (nx, ny) = (model.nx(), model.ny());
    let t = z.len() / ny;
    let what = "the parallel iterated smoother's linearisation";
    let module = g.module(
        what,
        &linearise_source::<D>(model, rule),
        &["nl_linearise_steps", "nl_widen"],
    )?;
    let st = &g.stream;
    let mut rts = ResidentRts::<D>::new(&g, nx, ny, t, &model.prior)?;
    // The moments the next pass linearises about, in f64, and the measurements.
    let sm64 = DevBuf::<f64>::from_slice(&g, st, sm, "smoothed means")?;
    let sc64 = DevBuf::<f64>::from_slice(&g, st, sc, "smoothed covariances")?;
    let z64 = DevBuf::<f64>::from_slice(&g, st, z, "measurements")?;
    let err = DevBuf::<i32>::new(&g, 1, "failures")?;
    let (steps, zu) = rts.inputs();
    let (smean, scov) = rts.smoothed();
    let widen = |src: u64, dst: &DevBuf<f64>| {
        dst.poison(st)?;
        let n = dst.len();
        launch(
            st,
            &module,
            "nl_widen",
            grid_for(n, 256),
            (256, 1, 1),
            &NlWiden {
                r#in: &Addr(src),
                out: &dst,
                n: n as i64,
            },
        )
    };
    let unset = [i32::MAX];
    let mut code = [0i32];
    for pass in 0..passes {
        crate::cancel::check()?;
        if pass > 0 {
            widen(smean, &sm64)?;
            widen(scov, &sc64)?;
        }
        rts.poison_inputs()?;
        htod(st, &unset, &err, 0, "failures")?;
        launch(
            st,
            &module,
            "nl_linearise_steps",
            grid_for(t, BLOCK),
            (BLOCK, 1, 1),
            &NlLineariseSteps {
                sm: &sm64,
                sc: &sc64,
                z: &z64,
                steps: &Addr(steps),
                zu: &Addr(zu),
                err: &err,
                t: t as i32,
            },
        )?;
        dtoh(st, &err, 0, &mut code, "failures")?;
        sync(st, what)?;
        if code[0] != i32::MAX {
            let step = (code[0] / 2) as usize;
            // Named as the CPU's linearisation names it.
            return Err(Error::NotPositiveDefinite {
                track: 0,
                step,
                what: "P",
            });
        }
        rts.run()?;
    }
    rts.read()
}

//! The per-step API for any model size: one slot at a time with the general path's
//! [`step`](crate::kalman::step) functions (those of [`crate::filter`] for sizes without
//! a fast path), in parallel over slots.

use super::{Dt, Engine, Store};
use crate::kalman::step::{correct, innovation, predict_parts, Innovation, StepMats};
use crate::linalg::Real;
use crate::model::{Kinematics, Model};
use rayon::prelude::*;

/// Slots per rayon task at the least.
const MIN_SLOTS: usize = 64;

pub(super) struct General<T> {
    m: StepMats<T>,
}

impl<T: Real> General<T> {
    pub fn new(m: &Model) -> Self {
        General {
            m: StepMats::of(m, 0),
        }
    }
}

/// Scratch of one rayon task.
struct Scratch<T> {
    f: Vec<T>,
    q: Vec<T>,
    u: Vec<T>,
    tmp: Vec<T>,
    y: Vec<T>,
    s: Vec<T>,
    wt: Vec<T>,
}

impl<T: Real> Scratch<T> {
    fn new(nx: usize, ny: usize) -> Self {
        let z = |n| vec![T::zero(); n];
        Scratch {
            f: z(nx * nx),
            q: z(nx * nx),
            u: z(nx),
            tmp: z(nx * nx),
            y: z(ny),
            s: z(ny * ny),
            wt: z(ny * nx),
        }
    }
}

fn fill_kin<T: Real>(k: &Kinematics, dt: f64, nx: usize, f: &mut [T], q: &mut [T]) {
    let b = k.block(dt);
    for i in 0..nx {
        for j in 0..nx {
            let (fv, qv) = k.entry(&b, i, j);
            f[i * nx + j] = T::of(fv);
            q[i * nx + j] = T::of(qv);
        }
    }
}

impl<T: Real> Engine<T> for General<T> {
    fn predict(
        &mut self,
        st: &mut Store<T>,
        dt: Dt<'_>,
        kin: Option<&Kinematics>,
        control: Option<&[T]>,
    ) {
        let (nx, ny) = (st.nx, st.ny);
        let mut model = None;
        if let (Dt::Uniform(dt), Some(k)) = (dt, kin) {
            let mut f = vec![T::zero(); nx * nx];
            let mut q = vec![T::zero(); nx * nx];
            fill_kin(k, dt, nx, &mut f, &mut q);
            model = Some((f, q));
        }
        let m = &self.m;
        let (f0, q0) = match &model {
            Some((f, q)) => (&f[..], &q[..]),
            None => (&m.f[..], &m.q[..]),
        };
        let live = &st.live;
        st.x.par_chunks_mut(nx)
            .zip(st.p.par_chunks_mut(nx * nx))
            .enumerate()
            .with_min_len(MIN_SLOTS)
            .for_each_init(
                || Scratch::new(nx, ny),
                |sc, (b, (x, p))| {
                    if !live[b] {
                        return;
                    }
                    let (mut f, mut q) = (f0, q0);
                    if let (Dt::PerTarget(dts), Some(k)) = (dt, kin) {
                        fill_kin(k, dts[b], nx, &mut sc.f, &mut sc.q);
                        (f, q) = (&sc.f[..], &sc.q[..]);
                    }
                    let u: &[T] = match control {
                        Some(c) => {
                            for i in 0..nx {
                                sc.u[i] = m.u[i] + c[b * nx + i];
                            }
                            &sc.u
                        }
                        None => &m.u,
                    };
                    predict_parts(nx, f, u, q, x, p, &mut sc.tmp);
                },
            );
    }

    fn update(
        &mut self,
        st: &mut Store<T>,
        z: &[T],
        mask: Option<&[bool]>,
        r: Option<&[T]>,
    ) -> Option<usize> {
        let (nx, ny) = (st.nx, st.ny);
        let m = &self.m;
        let live = &st.live;
        st.x.par_chunks_mut(nx)
            .zip(st.p.par_chunks_mut(nx * nx))
            .zip(st.ll.par_chunks_mut(1))
            .zip(st.zhat.par_chunks_mut(ny))
            .zip(st.s.par_chunks_mut(ny * ny))
            .enumerate()
            .with_min_len(MIN_SLOTS)
            .map_init(
                || Scratch::new(nx, ny),
                |sc, (b, ((((x, p), ll), zhat), s))| {
                    if !live[b] {
                        return None;
                    }
                    let rb = r.map_or(&m.r[..], |r| &r[b * ny * ny..(b + 1) * ny * ny]);
                    let zb = &z[b * ny..(b + 1) * ny];
                    let keep = Innovation { zhat, s };
                    let apply = mask.is_none_or(|mk| mk[b]) && !zb.iter().any(|v| v.is_nan_value());
                    innovation(
                        nx,
                        ny,
                        &m.h,
                        &m.d,
                        rb,
                        zb,
                        x,
                        p,
                        &mut sc.y,
                        &mut sc.s,
                        &mut sc.wt,
                        Some(keep),
                    );
                    if !apply {
                        ll[0] = T::zero();
                        return None;
                    }
                    match correct(nx, ny, x, p, &mut sc.y, &mut sc.s, &mut sc.wt) {
                        Some(v) => {
                            ll[0] = v;
                            None
                        }
                        None => Some(b),
                    }
                },
            )
            .flatten()
            .min()
    }

    fn measure(&mut self, st: &mut Store<T>, r: Option<&[T]>) {
        let (nx, ny) = (st.nx, st.ny);
        let m = &self.m;
        let live = &st.live;
        let (x, p) = (&st.x, &st.p);
        st.zhat
            .par_chunks_mut(ny)
            .zip(st.s.par_chunks_mut(ny * ny))
            .enumerate()
            .with_min_len(MIN_SLOTS)
            .for_each_init(
                || Scratch::new(nx, ny),
                |sc, (b, (zhat, s))| {
                    if !live[b] {
                        return;
                    }
                    let rb = r.map_or(&m.r[..], |r| &r[b * ny * ny..(b + 1) * ny * ny]);
                    let xb = &x[b * nx..(b + 1) * nx];
                    let pb = &p[b * nx * nx..(b + 1) * nx * nx];
                    innovation_only(nx, ny, m, rb, xb, pb, sc, zhat, s);
                },
            );
    }
}

/// `H x + d` and `S` of one slot without a measurement.
#[allow(clippy::too_many_arguments)]
fn innovation_only<T: Real>(
    nx: usize,
    ny: usize,
    m: &StepMats<T>,
    r: &[T],
    x: &[T],
    p: &[T],
    sc: &mut Scratch<T>,
    zhat: &mut [T],
    s: &mut [T],
) {
    // Any z of the right length will do: the innovation itself is dropped.
    innovation(
        nx,
        ny,
        &m.h,
        &m.d,
        r,
        &m.d,
        x,
        p,
        &mut sc.y,
        &mut sc.s,
        &mut sc.wt,
        Some(Innovation { zhat, s }),
    );
}

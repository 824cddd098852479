//! The per-step API on the SIMD lanes of the batch filter's fast path: the same
//! [`lanes::predict_fixed`] and [`lanes::update_lanes`] as [`crate::filter`], so the two
//! agree bit for bit. Groups of [`lanes::L`] slots are gathered from the slot-major
//! buffers, advanced, and scattered back, in parallel over groups.

use super::{Dt, Engine, Store};
use crate::kalman::lanes::{self, splat, with_dims, Fixed, LaneCov, LaneMean, L, V};
use crate::linalg::Real;
use crate::model::{Kinematics, Model};
use rayon::prelude::*;

/// Groups per rayon task at the least (a group is a few hundred operations).
const MIN_GROUPS: usize = 16;

pub(super) struct Fast<T, const NX: usize, const NY: usize> {
    m: Fixed<T, NX, NY>,
    #[cfg(target_arch = "x86_64")]
    avx2: bool,
}

/// The lane engine for the model's size, or `None` when the fast path has none.
pub(super) fn engine<T: Real>(m: &Model) -> Option<Box<dyn Engine<T>>> {
    with_dims!(m.nx(), m.ny(), |NX, NY| Box::new(Fast::<T, NX, NY> {
        m: Fixed::new(m),
        #[cfg(target_arch = "x86_64")]
        avx2: lanes::have_avx2(),
    }) as Box<dyn Engine<T>>)
}

/// Per-target intervals: the kinematics, the intervals `[capacity]`, and the structural
/// zeros of `F`.
type PerTarget<'a, const NX: usize> = (&'a Kinematics, &'a [f64], &'a [[bool; NX]; NX]);

/// A group's measurements, update weights and measurement noise, per lane.
type Gathered<T, const NY: usize> = ([V<T>; NY], V<T>, [[V<T>; NY]; NY]);

/// One group's slice of the store.
struct Group<'a, T> {
    first: usize,
    x: &'a mut [T],
    p: &'a mut [T],
    ll: &'a mut [T],
    zhat: &'a mut [T],
    s: &'a mut [T],
    live: &'a [bool],
}

/// Runs `f` on every group with at least one live slot, in parallel; returns the lowest
/// slot `f` reports.
fn for_groups<T: Real, const NX: usize, const NY: usize>(
    st: &mut Store<T>,
    f: impl Fn(Group<'_, T>) -> Option<usize> + Sync + Send,
) -> Option<usize> {
    let live = &st.live;
    st.x.par_chunks_mut(L * NX)
        .zip(st.p.par_chunks_mut(L * NX * NX))
        .zip(st.ll.par_chunks_mut(L))
        .zip(st.zhat.par_chunks_mut(L * NY))
        .zip(st.s.par_chunks_mut(L * NY * NY))
        .enumerate()
        .with_min_len(MIN_GROUPS)
        .filter_map(|(g, ((((x, p), ll), zhat), s))| {
            let first = g * L;
            let live = &live[first..(first + L).min(live.len())];
            if !live.iter().any(|&v| v) {
                return None;
            }
            f(Group {
                first,
                x,
                p,
                ll,
                zhat,
                s,
                live,
            })
        })
        .min()
}

#[inline(always)]
fn gather<T: Real, const NX: usize>(g: &Group<'_, T>) -> (LaneMean<T, NX>, LaneCov<T, NX>) {
    let zero = T::zero();
    let mut x: LaneMean<T, NX> = [splat(zero); NX];
    let mut p: LaneCov<T, NX> = [[splat(zero); NX]; NX];
    for l in 0..g.live.len() {
        if !g.live[l] {
            continue;
        }
        for i in 0..NX {
            x[i][l] = g.x[l * NX + i];
            for j in 0..NX {
                p[i][j][l] = g.p[(l * NX + i) * NX + j];
            }
        }
    }
    (x, p)
}

#[inline(always)]
fn scatter<T: Real, const NX: usize>(
    g: &mut Group<'_, T>,
    x: &LaneMean<T, NX>,
    p: &LaneCov<T, NX>,
) {
    for l in 0..g.live.len() {
        if !g.live[l] {
            continue;
        }
        for i in 0..NX {
            g.x[l * NX + i] = x[i][l];
            for j in 0..NX {
                g.p[(l * NX + i) * NX + j] = p[i][j][l];
            }
        }
    }
}

/// The offset per lane: the model's `u` plus the control input where there is one.
#[inline(always)]
fn offsets<T: Real, const NX: usize>(
    u: &[T; NX],
    control: Option<&[T]>,
    first: usize,
    n: usize,
) -> [V<T>; NX] {
    let mut v: [V<T>; NX] = std::array::from_fn(|i| splat(u[i]));
    if let Some(c) = control {
        for l in 0..n {
            for i in 0..NX {
                v[i][l] += c[(first + l) * NX + i];
            }
        }
    }
    v
}

/// The structural zeros of a kinematic `F`: zero for every interval.
fn kin_skip<const NX: usize>(k: &Kinematics) -> [[bool; NX]; NX] {
    let b = k.block(1.0);
    std::array::from_fn(|i| std::array::from_fn(|j| k.entry(&b, i, j).0 == 0.0))
}

#[inline(always)]
fn predict_group<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    g: &mut Group<'_, T>,
    per: Option<PerTarget<'_, NX>>,
    control: Option<&[T]>,
) {
    let (mut x, mut p) = gather::<T, NX>(g);
    let u = offsets(&m.u, control, g.first, g.live.len());
    match per {
        None => lanes::predict_fixed(m, &u, &mut x, &mut p),
        Some((k, dts, skip)) => {
            let zero = T::zero();
            let mut f: [[V<T>; NX]; NX] = [[splat(zero); NX]; NX];
            let mut q: [[V<T>; NX]; NX] = [[splat(zero); NX]; NX];
            for l in 0..g.live.len() {
                if !g.live[l] {
                    continue;
                }
                let b = k.block(dts[g.first + l]);
                for i in 0..NX {
                    for j in 0..NX {
                        let (fv, qv) = k.entry(&b, i, j);
                        f[i][j][l] = T::of(fv);
                        q[i][j][l] = T::of(qv);
                    }
                }
            }
            lanes::predict_lanes(&f, skip, &q, &u, &mut x, &mut p);
        }
    }
    scatter(g, &x, &p);
}

/// Gathers a group's measurements, mask and noise: `w` is 1 for lanes to update.
#[inline(always)]
fn gather_z<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    g: &Group<'_, T>,
    z: Option<&[T]>,
    mask: Option<&[bool]>,
    r: Option<&[T]>,
) -> Gathered<T, NY> {
    let zero = T::zero();
    let mut zz: [V<T>; NY] = [splat(zero); NY];
    let mut w: V<T> = splat(zero);
    let mut rr: [[V<T>; NY]; NY] =
        std::array::from_fn(|a| std::array::from_fn(|b| splat(m.r[a][b])));
    for l in 0..g.live.len() {
        let slot = g.first + l;
        if !g.live[l] {
            continue;
        }
        if let Some(r) = r {
            for a in 0..NY {
                for b in 0..NY {
                    rr[a][b][l] = r[(slot * NY + a) * NY + b];
                }
            }
        }
        let Some(z) = z else { continue };
        if mask.is_some_and(|m| !m[slot]) {
            continue;
        }
        let mut ok = true;
        for a in 0..NY {
            let v = z[slot * NY + a];
            zz[a][l] = v;
            ok &= !v.is_nan_value();
        }
        if ok {
            w[l] = T::one();
        }
    }
    (zz, w, rr)
}

#[inline(always)]
fn update_group<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    g: &mut Group<'_, T>,
    z: Option<&[T]>,
    mask: Option<&[bool]>,
    r: Option<&[T]>,
) -> Option<usize> {
    let (mut x, mut p) = gather::<T, NX>(g);
    let (zz, w, rr) = gather_z(m, g, z, mask, r);
    let up = lanes::update_lanes(m, &rr, &zz, &w, &mut x, &mut p);
    let mut bad = None;
    for l in 0..g.live.len() {
        if !g.live[l] {
            continue;
        }
        if up.bad[l] && w[l] > T::zero() && bad.is_none() {
            bad = Some(g.first + l);
        }
        for a in 0..NY {
            g.zhat[l * NY + a] = up.zhat[a][l];
            for b in 0..=a {
                g.s[(l * NY + a) * NY + b] = up.s[a][b][l];
                g.s[(l * NY + b) * NY + a] = up.s[a][b][l];
            }
        }
        if z.is_some() {
            g.ll[l] = up.ll[l];
        }
    }
    if z.is_some() {
        scatter(g, &x, &p);
    }
    bad
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn predict_group_avx2<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    g: &mut Group<'_, T>,
    per: Option<PerTarget<'_, NX>>,
    control: Option<&[T]>,
) {
    predict_group(m, g, per, control)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn update_group_avx2<T: Real, const NX: usize, const NY: usize>(
    m: &Fixed<T, NX, NY>,
    g: &mut Group<'_, T>,
    z: Option<&[T]>,
    mask: Option<&[bool]>,
    r: Option<&[T]>,
) -> Option<usize> {
    update_group(m, g, z, mask, r)
}

impl<T: Real, const NX: usize, const NY: usize> Fast<T, NX, NY> {
    fn run_predict(
        &self,
        m: &Fixed<T, NX, NY>,
        st: &mut Store<T>,
        per: Option<PerTarget<'_, NX>>,
        control: Option<&[T]>,
    ) {
        #[cfg(target_arch = "x86_64")]
        let avx2 = self.avx2;
        for_groups::<T, NX, NY>(st, |mut g| {
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the processor was checked for AVX2 when the engine was built.
                unsafe { predict_group_avx2(m, &mut g, per, control) };
                return None;
            }
            predict_group(m, &mut g, per, control);
            None
        });
    }

    fn run_update(
        &self,
        st: &mut Store<T>,
        z: Option<&[T]>,
        mask: Option<&[bool]>,
        r: Option<&[T]>,
    ) -> Option<usize> {
        let m = &self.m;
        #[cfg(target_arch = "x86_64")]
        let avx2 = self.avx2;
        for_groups::<T, NX, NY>(st, |mut g| {
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the processor was checked for AVX2 when the engine was built.
                return unsafe { update_group_avx2(m, &mut g, z, mask, r) };
            }
            update_group(m, &mut g, z, mask, r)
        })
    }
}

impl<T: Real, const NX: usize, const NY: usize> Engine<T> for Fast<T, NX, NY> {
    fn predict(
        &mut self,
        st: &mut Store<T>,
        dt: Dt<'_>,
        kin: Option<&Kinematics>,
        control: Option<&[T]>,
    ) {
        match (dt, kin) {
            (Dt::Uniform(dt), Some(k)) => {
                // The model with F and Q of this interval: exactly the fixed path of a
                // model built for `dt`.
                let mut m = self.m.clone();
                let b = k.block(dt);
                for i in 0..NX {
                    for j in 0..NX {
                        let (fv, qv) = k.entry(&b, i, j);
                        m.f[i][j] = T::of(fv);
                        m.q[i][j] = T::of(qv);
                    }
                }
                self.run_predict(&m, st, None, control);
            }
            (Dt::PerTarget(dts), Some(k)) => {
                let skip = kin_skip::<NX>(k);
                self.run_predict(&self.m, st, Some((k, dts, &skip)), control);
            }
            _ => self.run_predict(&self.m, st, None, control),
        }
    }

    fn update(
        &mut self,
        st: &mut Store<T>,
        z: &[T],
        mask: Option<&[bool]>,
        r: Option<&[T]>,
    ) -> Option<usize> {
        self.run_update(st, Some(z), mask, r)
    }

    fn measure(&mut self, st: &mut Store<T>, r: Option<&[T]>) {
        self.run_update(st, None, None, r);
    }
}

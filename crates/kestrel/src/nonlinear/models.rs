//! Nonlinear Gaussian models with additive noise,
//!
//! ```text
//! x_k = f(x_{k-1}) + w_k,   w_k ~ N(0, Q)
//! z_k = h(x_k) + v_k,       v_k ~ N(0, R)
//! x_0 ~ N(x0, P0)   (the state at step 0, before the step-0 measurement)
//! ```
//!
//! `f` and `h` are compiled expressions ([`super::expr`]) with exact Jacobians. Built
//! from expression strings ([`NonlinearModel::from_expressions`]), from a linear
//! [`Model`] ([`NonlinearModel::from_linear`]), the coordinated turn
//! ([`NonlinearModel::coordinated_turn`]) and the particle filter's tracking kinds
//! ([`NonlinearModel::from_pf`]).

use super::expr::{parse, Expr, Function, Graph, Scope};
use crate::error::{Error, Result};
use crate::model::{check_psd, check_spd, Model, Prior};
use crate::particle::{PfKind, PfModel};
use nalgebra::{DMatrix, DVector};

/// Builds a measurement's expressions, `R` and angle components into a graph.
type MeasureFn = dyn Fn(&mut Graph) -> (Vec<Expr>, DMatrix<f64>, Vec<usize>);

/// A nonlinear model with additive Gaussian noise (see the module documentation).
#[derive(Clone, Debug)]
pub struct NonlinearModel {
    pub(crate) states: Vec<String>,
    pub(crate) f: Function,
    pub(crate) h: Function,
    pub(crate) q: DMatrix<f64>,
    pub(crate) r: DMatrix<f64>,
    pub(crate) angles: Vec<usize>,
    pub(crate) prior: Prior,
    /// The radar of a built-in range-bearing measurement of `(px, py) = (x0, x2)`: the
    /// tracker starts a new track's search at the detection's exact inverse.
    pub(crate) radar: Option<[f64; 2]>,
}

/// The measurement of the coordinated-turn kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Measure {
    /// `[px, py]` with variance `r` each.
    Position {
        /// Variance of each coordinate.
        r: f64,
    },
    /// A radar at `radar` measuring `[range, bearing]`.
    RangeBearing {
        /// Radar position.
        radar: [f64; 2],
        /// Range variance.
        r_range: f64,
        /// Bearing variance (radians^2).
        r_bearing: f64,
    },
}

/// The turn rate of the coordinated-turn kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TurnRate {
    /// A known turn rate (rad per unit time): the state is `[px, vx, py, vy]`.
    Known(f64),
    /// Estimated: the state is `[px, vx, py, vy, omega]`, `omega` a random walk with
    /// variance `q_omega dt` per step.
    Estimated {
        /// Spectral density of the turn rate's random walk.
        q_omega: f64,
    },
}

impl NonlinearModel {
    /// From expression strings: `f` (one per state, the state at step k from the state at
    /// k-1, names `states`), `h`, the noise covariances, named constants, the indices of
    /// the measurement components that are angles, and the prior. An expression that
    /// does not parse is [`Error::Model`] naming `f[i]` or `h[i]` and the column.
    #[allow(clippy::too_many_arguments)]
    pub fn from_expressions(
        states: &[String],
        f: &[String],
        h: &[String],
        q: DMatrix<f64>,
        r: DMatrix<f64>,
        constants: &[(String, f64)],
        angles: &[usize],
        prior: Prior,
    ) -> Result<Self> {
        let nx = states.len();
        if f.len() != nx {
            return Err(Error::model(
                "f",
                format!("has {} expressions, the state has {nx} components", f.len()),
            ));
        }
        for (i, s) in states.iter().enumerate() {
            if states[..i].contains(s) {
                return Err(Error::model("states", format!("\"{s}\" is named twice")));
            }
            if constants.iter().any(|(c, _)| c == s) {
                return Err(Error::model(
                    "constants",
                    format!("\"{s}\" is also a state name"),
                ));
            }
        }
        let scope = Scope {
            inputs: states,
            constants,
        };
        let mut g = Graph::new();
        let mut compile = |field: &str, srcs: &[String]| -> Result<Vec<Expr>> {
            srcs.iter()
                .enumerate()
                .map(|(i, s)| {
                    parse(s, &scope, &mut g)
                        .map_err(|e| Error::model(format!("{field}[{i}]"), e.to_string()))
                })
                .collect()
        };
        let fe = compile("f", f)?;
        let he = compile("h", h)?;
        Self::assemble(states.to_vec(), g, &fe, &he, q, r, angles, prior)
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        states: Vec<String>,
        mut g: Graph,
        fe: &[Expr],
        he: &[Expr],
        q: DMatrix<f64>,
        r: DMatrix<f64>,
        angles: &[usize],
        prior: Prior,
    ) -> Result<Self> {
        let nx = states.len();
        let ny = he.len();
        if nx == 0 {
            return Err(Error::model("states", "the state has no component"));
        }
        if ny == 0 {
            return Err(Error::model("h", "no measurement expression"));
        }
        let shape = |field: &str, m: &DMatrix<f64>, n: usize| -> Result<()> {
            if m.nrows() != n || m.ncols() != n {
                return Err(Error::model(
                    field,
                    format!("must be {n} x {n}, got {} x {}", m.nrows(), m.ncols()),
                ));
            }
            Ok(())
        };
        shape("Q", &q, nx)?;
        shape("R", &r, ny)?;
        shape("P0", &prior.p0, nx)?;
        if prior.x0.len() != nx {
            return Err(Error::model(
                "x0",
                format!("has {} entries, the state has {nx}", prior.x0.len()),
            ));
        }
        check_psd("Q", &q)?;
        check_spd("R", &r)?;
        check_psd("P0", &prior.p0)?;
        if prior.x0.iter().any(|v| !v.is_finite()) {
            return Err(Error::model("x0", "has a non-finite entry"));
        }
        let mut angles = angles.to_vec();
        angles.sort_unstable();
        angles.dedup();
        if let Some(&a) = angles.iter().find(|&&a| a >= ny) {
            return Err(Error::model(
                "angles",
                format!("index {a} is not a measurement component (ny = {ny})"),
            ));
        }
        let f = Function::new(&mut g, nx, fe);
        let h = Function::new(&mut g, nx, he);
        Ok(NonlinearModel {
            states,
            f,
            h,
            q,
            r,
            angles,
            prior,
            radar: None,
        })
    }

    /// The linear model `f(x) = F x + u`, `h(x) = H x + d` (its Jacobians are `F` and
    /// `H`, so the extended filters equal the Kalman filter to rounding).
    pub fn from_linear(m: &Model) -> Result<Self> {
        let (nx, ny) = (m.nx(), m.ny());
        let mut g = Graph::new();
        let row = |a: &DMatrix<f64>, i: usize| -> Vec<f64> { a.row(i).iter().copied().collect() };
        let fe: Vec<Expr> = (0..nx)
            .map(|i| g.linear(&row(m.f(), i), m.u()[i]))
            .collect();
        let he: Vec<Expr> = (0..ny)
            .map(|i| g.linear(&row(m.h(), i), m.d()[i]))
            .collect();
        let states = (0..nx).map(|i| format!("x{i}")).collect();
        Self::assemble(
            states,
            g,
            &fe,
            &he,
            m.q().clone(),
            m.r().clone(),
            &[],
            m.prior().clone(),
        )
    }

    /// The coordinated turn (Bar-Shalom, Li & Kirubarajan 2001, 11.7): state
    /// `[px, vx, py, vy]` (and `omega` when estimated), over `dt`:
    ///
    /// ```text
    /// px' = px + S vx - C vy      vx' = cos(w dt) vx - sin(w dt) vy
    /// py' = py + C vx + S vy      vy' = sin(w dt) vx + cos(w dt) vy
    /// S = sin(w dt) / w,  C = (1 - cos(w dt)) / w
    /// ```
    ///
    /// exact at `w = 0` (S and C and their derivatives by series there: the constant
    /// velocity model). `Q` is the constant-velocity model's white-noise acceleration
    /// `q [[dt^3/3, dt^2/2], [dt^2/2, dt]]` per axis (plus `q_omega dt` on `omega`).
    pub fn coordinated_turn(
        dt: f64,
        q: f64,
        turn: TurnRate,
        measure: &Measure,
        prior: Prior,
    ) -> Result<Self> {
        if !(dt > 0.0) || !dt.is_finite() {
            return Err(Error::model("dt", format!("must be positive, got {dt}")));
        }
        let mut g = Graph::new();
        let (px, vx, py, vy) = (g.var(0), g.var(1), g.var(2), g.var(3));
        let w = match turn {
            TurnRate::Known(w) => g.num(w),
            TurnRate::Estimated { .. } => g.var(4),
        };
        let t = g.num(dt);
        let s = g.sin_over(w, t);
        let c = g.cos_over(w, t);
        let wt = g.mul(w, t);
        let (sn, cs) = (g.sin(wt), g.cos(wt));
        let lin = |g: &mut Graph, a: Expr, b: Expr, x: Expr, y: Expr, sign: f64| {
            let l = g.mul(a, x);
            let r = g.mul(b, y);
            if sign > 0.0 {
                g.add(l, r)
            } else {
                g.sub(l, r)
            }
        };
        let dx = lin(&mut g, s, c, vx, vy, -1.0);
        let dy = lin(&mut g, c, s, vx, vy, 1.0);
        let mut fe = vec![
            g.add(px, dx),
            lin(&mut g, cs, sn, vx, vy, -1.0),
            g.add(py, dy),
            lin(&mut g, sn, cs, vx, vy, 1.0),
        ];
        let mut states: Vec<String> = ["px", "vx", "py", "vy"].map(String::from).to_vec();
        let nx = if let TurnRate::Estimated { .. } = turn {
            fe.push(w);
            states.push("omega".into());
            5
        } else {
            4
        };
        let mut qm = DMatrix::zeros(nx, nx);
        for a in [0, 2] {
            qm[(a, a)] = q * dt.powi(3) / 3.0;
            qm[(a, a + 1)] = q * dt * dt / 2.0;
            qm[(a + 1, a)] = q * dt * dt / 2.0;
            qm[(a + 1, a + 1)] = q * dt;
        }
        if let TurnRate::Estimated { q_omega } = turn {
            qm[(4, 4)] = q_omega * dt;
        }
        let (he, r, angles) = measurement(&mut g, measure);
        let mut out = Self::assemble(states, g, &fe, &he, qm, r, &angles, prior)?;
        if let Measure::RangeBearing { radar, .. } = measure {
            out.radar = Some(*radar);
        }
        Ok(out)
    }

    /// The particle filter's tracking kinds (range-only, bearings-only, range-bearing:
    /// constant velocity in 2-D, state `[px, vx, py, vy]`) and its linear-Gaussian kind
    /// as a Gaussian model. The stochastic-volatility kind (its noise is not additive)
    /// and custom CUDA models are refused.
    pub fn from_pf(m: &PfModel) -> Result<Self> {
        let prior = match &m.prior {
            Some(p) => {
                let n = p.x0.len();
                let l = DMatrix::from_row_slice(n, n, &p.sqrt_p0);
                Prior {
                    x0: DVector::from_vec(p.x0.clone()),
                    p0: &l * l.transpose(),
                }
            }
            None => {
                return Err(Error::Unsupported(format!(
                "kind = \"{}\" has no Gaussian form for the Kalman-type filters (use kestrel pf)",
                m.kind_name()
            )))
            }
        };
        let (cv, h): (_, Box<MeasureFn>) =
            match &m.kind {
                PfKind::RangeOnly { cv, sensors, r } | PfKind::BearingsOnly { cv, sensors, r } => {
                    let bearing = matches!(m.kind, PfKind::BearingsOnly { .. });
                    let (sensors, r) = (sensors.clone(), *r);
                    (
                        cv,
                        Box::new(move |g: &mut Graph| {
                            let he: Vec<Expr> = sensors
                                .iter()
                                .map(|s| {
                                    let (dx, dy) = offsets(g, *s);
                                    if bearing {
                                        g.atan2(dy, dx)
                                    } else {
                                        g.hypot(dx, dy)
                                    }
                                })
                                .collect();
                            let n = he.len();
                            let angles = if bearing { (0..n).collect() } else { vec![] };
                            (he, DMatrix::identity(n, n) * r, angles)
                        }),
                    )
                }
                PfKind::RangeBearing {
                    cv,
                    radar,
                    r_range,
                    r_bearing,
                } => {
                    let meas = Measure::RangeBearing {
                        radar: *radar,
                        r_range: *r_range,
                        r_bearing: *r_bearing,
                    };
                    (
                        cv,
                        Box::new(move |g: &mut Graph| measurement(g, &meas)),
                    )
                }
                PfKind::Linear(_) => {
                    return Err(Error::Unsupported(
                        "a linear-Gaussian particle model: read the file with model::model_from_toml and use NonlinearModel::from_linear".into(),
                    ))
                }
                _ => {
                    return Err(Error::Unsupported(format!(
                        "kind = \"{}\" has no Gaussian form for the Kalman-type filters (use kestrel pf)",
                        m.kind_name()
                    )))
                }
            };
        let mut g = Graph::new();
        let (dt, q) = (cv.dt, cv.q);
        let fm = DMatrix::from_row_slice(
            4,
            4,
            &[
                1.0, dt, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, dt, 0.0, 0.0, 0.0, 1.0,
            ],
        );
        let fe: Vec<Expr> = (0..4)
            .map(|i| {
                let row: Vec<f64> = fm.row(i).iter().copied().collect();
                g.linear(&row, 0.0)
            })
            .collect();
        let mut qm = DMatrix::zeros(4, 4);
        for a in [0, 2] {
            qm[(a, a)] = q * dt.powi(3) / 3.0;
            qm[(a, a + 1)] = q * dt * dt / 2.0;
            qm[(a + 1, a)] = q * dt * dt / 2.0;
            qm[(a + 1, a + 1)] = q * dt;
        }
        let (he, r, angles) = h(&mut g);
        let states = ["px", "vx", "py", "vy"].map(String::from).to_vec();
        let mut out = Self::assemble(states, g, &fe, &he, qm, r, &angles, prior)?;
        if let PfKind::RangeBearing { radar, .. } = &m.kind {
            out.radar = Some(*radar);
        }
        Ok(out)
    }

    /// State size.
    pub fn nx(&self) -> usize {
        self.states.len()
    }

    /// Measurement size.
    pub fn ny(&self) -> usize {
        self.h.n_out()
    }

    /// The state names.
    pub fn states(&self) -> &[String] {
        &self.states
    }

    /// The compiled transition `f` (with its Jacobian).
    pub fn f(&self) -> &Function {
        &self.f
    }

    /// The compiled measurement function `h` (with its Jacobian).
    pub fn h(&self) -> &Function {
        &self.h
    }

    /// Process noise covariance.
    pub fn q(&self) -> &DMatrix<f64> {
        &self.q
    }

    /// Measurement noise covariance.
    pub fn r(&self) -> &DMatrix<f64> {
        &self.r
    }

    /// The measurement components that are angles (innovations wrapped to (-pi, pi]).
    pub fn angles(&self) -> &[usize] {
        &self.angles
    }

    /// The prior on the state at step 0.
    pub fn prior(&self) -> &Prior {
        &self.prior
    }

    /// The same model with another prior (checked).
    pub fn with_prior(mut self, prior: Prior) -> Result<Self> {
        let nx = self.nx();
        if prior.x0.len() != nx || prior.p0.nrows() != nx || prior.p0.ncols() != nx {
            return Err(Error::model("P0", format!("the prior must have size {nx}")));
        }
        check_psd("P0", &prior.p0)?;
        self.prior = prior;
        Ok(self)
    }
}

/// `(px - sx, py - sy)` of the sensor at `s`.
fn offsets(g: &mut Graph, s: [f64; 2]) -> (Expr, Expr) {
    let (px, py) = (g.var(0), g.var(2));
    let (sx, sy) = (g.num(s[0]), g.num(s[1]));
    (g.sub(px, sx), g.sub(py, sy))
}

fn measurement(g: &mut Graph, m: &Measure) -> (Vec<Expr>, DMatrix<f64>, Vec<usize>) {
    match m {
        Measure::Position { r } => (
            vec![g.var(0), g.var(2)],
            DMatrix::identity(2, 2) * *r,
            vec![],
        ),
        Measure::RangeBearing {
            radar,
            r_range,
            r_bearing,
        } => {
            let (dx, dy) = offsets(g, *radar);
            let he = vec![g.hypot(dx, dy), g.atan2(dy, dx)];
            (
                he,
                DMatrix::from_diagonal(&DVector::from_vec(vec![*r_range, *r_bearing])),
                vec![1],
            )
        }
    }
}

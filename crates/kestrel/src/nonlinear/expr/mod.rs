//! The model expression language: parsed once into a hash-consed expression graph
//! (common subexpressions shared, constants folded), differentiated symbolically on that
//! graph (exact Jacobians, never finite differences), and compiled to a flat tape of
//! register instructions evaluated over a batch of points (instruction-major: each
//! instruction runs over every point before the next one, so the hot loop is a plain
//! loop over lanes, not a tree walk per call).
//!
//! Grammar (`^` binds tighter than unary minus and is right-associative, so `-x^2` is
//! `-(x^2)` and `2^-1` is `0.5`):
//!
//! ```text
//! expr  := term (('+' | '-') term)*
//! term  := unary (('*' | '/') unary)*
//! unary := '-' unary | power
//! power := atom ('^' unary)?
//! atom  := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! Functions: sin cos tan asin acos atan sinh cosh tanh exp log sqrt abs (one argument);
//! atan2(y, x) hypot(a, b) min max (two).

use std::collections::HashMap;

/// A node of the expression graph: an operation on earlier nodes (by index), so the
/// node list is always in topological order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Node {
    /// A constant, by its bits (so nodes hash and compare exactly).
    Const(u64),
    /// Input `i` (a state component).
    Var(u32),
    Un(Un, u32),
    Bin(Bin, u32, u32),
}

/// One-argument operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Un {
    Neg,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Exp,
    Log,
    Sqrt,
    Abs,
    /// The sign (derivative of `abs`; 0 at 0).
    Sign,
}

/// Two-argument operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Atan2,
    Hypot,
    Min,
    Max,
    /// 1 when `a <= b`, else 0 (the derivatives of min and max).
    Le,
    /// `sin(a b) / a`, exact (a series) near `a = 0` (coordinated turn).
    SinOver,
    /// `(1 - cos(a b)) / a`, exact near `a = 0`.
    CosOver,
    /// `d/da sin(a b) / a`.
    DSinOver,
    /// `d/da (1 - cos(a b)) / a`.
    DCosOver,
}

const UNARY: [(&str, Un); 13] = [
    ("sin", Un::Sin),
    ("cos", Un::Cos),
    ("tan", Un::Tan),
    ("asin", Un::Asin),
    ("acos", Un::Acos),
    ("atan", Un::Atan),
    ("sinh", Un::Sinh),
    ("cosh", Un::Cosh),
    ("tanh", Un::Tanh),
    ("exp", Un::Exp),
    ("log", Un::Log),
    ("sqrt", Un::Sqrt),
    ("abs", Un::Abs),
];

const BINARY: [(&str, Bin); 4] = [
    ("atan2", Bin::Atan2),
    ("hypot", Bin::Hypot),
    ("min", Bin::Min),
    ("max", Bin::Max),
];

/// The functions of the language, for messages.
pub const FUNCTIONS: &str =
    "sin cos tan asin acos atan sinh cosh tanh exp log sqrt abs (1 argument), atan2 hypot min max (2)";

/// A handle to a node of a [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Expr(u32);

/// The expression graph: nodes shared by structure, constants folded, trivial
/// identities (`x + 0`, `x * 1`, `x * 0`) removed as nodes are made.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    memo: HashMap<Node, u32>,
}

/// Below this `|a b|` the turn gains and their derivatives use their series (truncated
/// where the next term is under 1e-16 relative); above it the closed forms lose at most
/// 1e-16 / (a b)^2 relative to cancellation.
const SERIES_BELOW: f64 = 0.05;

fn sin_over(a: f64, b: f64) -> f64 {
    let t = a * b;
    if t.abs() < SERIES_BELOW {
        let t2 = t * t;
        b * (1.0 - t2 / 6.0 * (1.0 - t2 / 20.0 * (1.0 - t2 / 42.0 * (1.0 - t2 / 72.0))))
    } else {
        t.sin() / a
    }
}

fn cos_over(a: f64, b: f64) -> f64 {
    let t = a * b;
    if t.abs() < SERIES_BELOW {
        let t2 = t * t;
        b * t / 2.0 * (1.0 - t2 / 12.0 * (1.0 - t2 / 30.0 * (1.0 - t2 / 56.0 * (1.0 - t2 / 90.0))))
    } else {
        // 1 - cos t = 2 sin^2(t / 2), without the cancellation.
        2.0 * (t / 2.0).sin().powi(2) / a
    }
}

fn dsin_over(a: f64, b: f64) -> f64 {
    let t = a * b;
    if t.abs() < SERIES_BELOW {
        // d/da [b (1 - t^2/6 + t^4/120 - t^6/5040)] with t = a b.
        let t2 = t * t;
        b * b * t * (-1.0 / 3.0 + t2 / 30.0 - t2 * t2 / 840.0 + t2 * t2 * t2 / 45360.0)
    } else {
        (b * t.cos() * a - t.sin()) / (a * a)
    }
}

fn dcos_over(a: f64, b: f64) -> f64 {
    let t = a * b;
    if t.abs() < SERIES_BELOW {
        // d/da [b (t/2 - t^3/24 + t^5/720 - t^7/40320)].
        let t2 = t * t;
        b * b * (0.5 - t2 / 8.0 + t2 * t2 / 144.0 - t2 * t2 * t2 / 5760.0)
    } else {
        (b * t.sin() * a - 2.0 * (t / 2.0).sin().powi(2)) / (a * a)
    }
}

fn un(op: Un, x: f64) -> f64 {
    match op {
        Un::Neg => -x,
        Un::Sin => x.sin(),
        Un::Cos => x.cos(),
        Un::Tan => x.tan(),
        Un::Asin => x.asin(),
        Un::Acos => x.acos(),
        Un::Atan => x.atan(),
        Un::Sinh => x.sinh(),
        Un::Cosh => x.cosh(),
        Un::Tanh => x.tanh(),
        Un::Exp => x.exp(),
        Un::Log => x.ln(),
        Un::Sqrt => x.sqrt(),
        Un::Abs => x.abs(),
        Un::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
    }
}

fn bin(op: Bin, a: f64, b: f64) -> f64 {
    match op {
        Bin::Add => a + b,
        Bin::Sub => a - b,
        Bin::Mul => a * b,
        Bin::Div => a / b,
        Bin::Pow => pow(a, b),
        Bin::Atan2 => a.atan2(b),
        Bin::Hypot => a.hypot(b),
        Bin::Min => a.min(b),
        Bin::Max => a.max(b),
        Bin::Le => {
            if a <= b {
                1.0
            } else {
                0.0
            }
        }
        Bin::SinOver => sin_over(a, b),
        Bin::CosOver => cos_over(a, b),
        Bin::DSinOver => dsin_over(a, b),
        Bin::DCosOver => dcos_over(a, b),
    }
}

/// `a^b` with small integer exponents by multiplication (exact for negative bases).
fn pow(a: f64, b: f64) -> f64 {
    if b == b.trunc() && b.abs() <= 64.0 {
        a.powi(b as i32)
    } else {
        a.powf(b)
    }
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, n: Node) -> Expr {
        if let Some(&i) = self.memo.get(&n) {
            return Expr(i);
        }
        let i = self.nodes.len() as u32;
        self.nodes.push(n);
        self.memo.insert(n, i);
        Expr(i)
    }

    fn constant(&self, e: Expr) -> Option<f64> {
        match self.nodes[e.0 as usize] {
            Node::Const(bits) => Some(f64::from_bits(bits)),
            _ => None,
        }
    }

    /// The constant `c`.
    pub fn num(&mut self, c: f64) -> Expr {
        // One zero: -0.0 and 0.0 are the same node.
        let c = if c == 0.0 { 0.0 } else { c };
        self.push(Node::Const(c.to_bits()))
    }

    /// Input `i`.
    pub fn var(&mut self, i: usize) -> Expr {
        self.push(Node::Var(i as u32))
    }

    fn un(&mut self, op: Un, a: Expr) -> Expr {
        if let Some(x) = self.constant(a) {
            return self.num(un(op, x));
        }
        if op == Un::Neg {
            if let Node::Un(Un::Neg, inner) = self.nodes[a.0 as usize] {
                return Expr(inner);
            }
        }
        self.push(Node::Un(op, a.0))
    }

    fn bin(&mut self, op: Bin, a: Expr, b: Expr) -> Expr {
        let (ca, cb) = (self.constant(a), self.constant(b));
        if let (Some(x), Some(y)) = (ca, cb) {
            return self.num(bin(op, x, y));
        }
        let is = |c: Option<f64>, v: f64| c == Some(v);
        match op {
            Bin::Add if is(ca, 0.0) => return b,
            Bin::Add | Bin::Sub if is(cb, 0.0) => return a,
            Bin::Sub if is(ca, 0.0) => return self.neg(b),
            Bin::Mul if is(ca, 0.0) || is(cb, 0.0) => return self.num(0.0),
            Bin::Mul if is(ca, 1.0) => return b,
            Bin::Mul | Bin::Div if is(cb, 1.0) => return a,
            Bin::Mul if is(ca, -1.0) => return self.neg(b),
            Bin::Mul if is(cb, -1.0) => return self.neg(a),
            Bin::Div if is(ca, 0.0) => return self.num(0.0),
            Bin::Pow if is(cb, 1.0) => return a,
            Bin::Pow if is(cb, 0.0) => return self.num(1.0),
            _ => {}
        }
        if op == Bin::Sub && a == b {
            return self.num(0.0);
        }
        // Commutative operations in one order, so `a + b` and `b + a` share a node.
        let (a, b) = match op {
            Bin::Add | Bin::Mul | Bin::Hypot | Bin::Min | Bin::Max if a.0 > b.0 => (b, a),
            _ => (a, b),
        };
        self.push(Node::Bin(op, a.0, b.0))
    }

    /// `a + b`.
    pub fn add(&mut self, a: Expr, b: Expr) -> Expr {
        self.bin(Bin::Add, a, b)
    }
    /// `a - b`.
    pub fn sub(&mut self, a: Expr, b: Expr) -> Expr {
        self.bin(Bin::Sub, a, b)
    }
    /// `a * b`.
    pub fn mul(&mut self, a: Expr, b: Expr) -> Expr {
        self.bin(Bin::Mul, a, b)
    }
    /// `a / b`.
    pub fn div(&mut self, a: Expr, b: Expr) -> Expr {
        self.bin(Bin::Div, a, b)
    }
    /// `-a`.
    pub fn neg(&mut self, a: Expr) -> Expr {
        self.un(Un::Neg, a)
    }
    /// `sin a`.
    pub fn sin(&mut self, a: Expr) -> Expr {
        self.un(Un::Sin, a)
    }
    /// `cos a`.
    pub fn cos(&mut self, a: Expr) -> Expr {
        self.un(Un::Cos, a)
    }
    /// `atan2(a, b)`.
    pub fn atan2(&mut self, a: Expr, b: Expr) -> Expr {
        self.bin(Bin::Atan2, a, b)
    }
    /// `hypot(a, b)`.
    pub fn hypot(&mut self, a: Expr, b: Expr) -> Expr {
        self.bin(Bin::Hypot, a, b)
    }
    /// `sin(w t) / w`, exact at `w = 0` (its limit `t`): the coordinated turn's position
    /// gain, with an exact derivative in `w` (`t` must not depend on the inputs).
    pub fn sin_over(&mut self, w: Expr, t: Expr) -> Expr {
        self.bin(Bin::SinOver, w, t)
    }
    /// `(1 - cos(w t)) / w`, exact at `w = 0` (its limit 0).
    pub fn cos_over(&mut self, w: Expr, t: Expr) -> Expr {
        self.bin(Bin::CosOver, w, t)
    }
    /// `sum_j c_j x_j + c0` over the nonzero `c_j`.
    pub fn linear(&mut self, coeffs: &[f64], c0: f64) -> Expr {
        let mut acc = self.num(c0);
        for (j, &c) in coeffs.iter().enumerate() {
            if c != 0.0 {
                let x = self.var(j);
                let c = self.num(c);
                let t = self.mul(c, x);
                acc = self.add(acc, t);
            }
        }
        acc
    }

    /// The derivative of `e` in input `v`, exact (the chain rule on the graph; each
    /// node's derivative made once, in `memo`).
    pub fn diff(&mut self, e: Expr, v: usize, memo: &mut HashMap<u32, Expr>) -> Expr {
        if let Some(&d) = memo.get(&e.0) {
            return d;
        }
        let d = match self.nodes[e.0 as usize] {
            Node::Const(_) => self.num(0.0),
            Node::Var(i) => self.num(if i as usize == v { 1.0 } else { 0.0 }),
            Node::Un(op, a) => {
                let a = Expr(a);
                let da = self.diff(a, v, memo);
                if self.constant(da) == Some(0.0) {
                    self.num(0.0)
                } else {
                    let g = self.dun(op, a, e);
                    self.mul(g, da)
                }
            }
            Node::Bin(op, a, b) => {
                let (a, b) = (Expr(a), Expr(b));
                let da = self.diff(a, v, memo);
                let db = self.diff(b, v, memo);
                self.dbin(op, a, b, e, da, db)
            }
        };
        memo.insert(e.0, d);
        d
    }

    /// `d op(a) / da`, given `e = op(a)`.
    fn dun(&mut self, op: Un, a: Expr, e: Expr) -> Expr {
        let one = self.num(1.0);
        match op {
            Un::Neg => self.num(-1.0),
            Un::Sin => self.cos(a),
            Un::Cos => {
                let s = self.sin(a);
                self.neg(s)
            }
            Un::Tan => {
                let e2 = self.mul(e, e);
                self.add(one, e2)
            }
            Un::Asin | Un::Acos => {
                let a2 = self.mul(a, a);
                let r = self.sub(one, a2);
                let r = self.un(Un::Sqrt, r);
                let g = self.div(one, r);
                if op == Un::Asin {
                    g
                } else {
                    self.neg(g)
                }
            }
            Un::Atan => {
                let a2 = self.mul(a, a);
                let r = self.add(one, a2);
                self.div(one, r)
            }
            Un::Sinh => self.un(Un::Cosh, a),
            Un::Cosh => self.un(Un::Sinh, a),
            Un::Tanh => {
                let e2 = self.mul(e, e);
                self.sub(one, e2)
            }
            Un::Exp => e,
            Un::Log => self.div(one, a),
            Un::Sqrt => {
                let two = self.num(2.0);
                let d = self.mul(two, e);
                self.div(one, d)
            }
            Un::Abs => self.un(Un::Sign, a),
            Un::Sign => self.num(0.0),
        }
    }

    fn dbin(&mut self, op: Bin, a: Expr, b: Expr, e: Expr, da: Expr, db: Expr) -> Expr {
        let zero = |g: &Graph, x: Expr| g.constant(x) == Some(0.0);
        if zero(self, da) && zero(self, db) {
            return self.num(0.0);
        }
        match op {
            Bin::Add => self.add(da, db),
            Bin::Sub => self.sub(da, db),
            Bin::Mul => {
                let l = self.mul(da, b);
                let r = self.mul(a, db);
                self.add(l, r)
            }
            Bin::Div => {
                // (da - e db) / b
                let t = self.mul(e, db);
                let n = self.sub(da, t);
                self.div(n, b)
            }
            Bin::Pow => {
                let mut out = self.num(0.0);
                if !zero(self, da) {
                    // b a^(b-1) da
                    let one = self.num(1.0);
                    let bm1 = self.sub(b, one);
                    let p = self.bin(Bin::Pow, a, bm1);
                    let t = self.mul(b, p);
                    out = self.mul(t, da);
                }
                if !zero(self, db) {
                    // a^b ln(a) db
                    let l = self.un(Un::Log, a);
                    let t = self.mul(e, l);
                    let t = self.mul(t, db);
                    out = self.add(out, t);
                }
                out
            }
            Bin::Atan2 => {
                // atan2(a, b): (b da - a db) / (a^2 + b^2)
                let l = self.mul(b, da);
                let r = self.mul(a, db);
                let n = self.sub(l, r);
                let a2 = self.mul(a, a);
                let b2 = self.mul(b, b);
                let d = self.add(a2, b2);
                self.div(n, d)
            }
            Bin::Hypot => {
                let l = self.mul(a, da);
                let r = self.mul(b, db);
                let n = self.add(l, r);
                self.div(n, e)
            }
            Bin::Min | Bin::Max => {
                // min: a's derivative where a <= b; max: b's there.
                let le = self.bin(Bin::Le, a, b);
                let one = self.num(1.0);
                let gt = self.sub(one, le);
                let (first, second) = if op == Bin::Min { (da, db) } else { (db, da) };
                let l = self.mul(le, first);
                let r = self.mul(gt, second);
                self.add(l, r)
            }
            Bin::Le => self.num(0.0),
            Bin::SinOver | Bin::CosOver => {
                assert!(
                    zero(self, db),
                    "sin_over / cos_over: the interval must not depend on the inputs"
                );
                let dop = if op == Bin::SinOver {
                    Bin::DSinOver
                } else {
                    Bin::DCosOver
                };
                let g = self.bin(dop, a, b);
                self.mul(g, da)
            }
            Bin::DSinOver | Bin::DCosOver => {
                unreachable!("second derivatives of the turn gains are not needed")
            }
        }
    }
}

mod parse;
mod tape;
#[cfg(test)]
mod tests;

pub use parse::{parse, ExprError, Scope};
#[cfg(feature = "cuda")]
pub(crate) use tape::Ins;
pub use tape::{Function, Tape};

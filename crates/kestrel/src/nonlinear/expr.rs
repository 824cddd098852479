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

// ---------------------------------------------------------------------------------------
// The parser.

/// A parse or check error in one expression: the 1-based column (in characters) and
/// what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct ExprError {
    /// 1-based column of the offending token.
    pub column: usize,
    /// What is wrong.
    pub msg: String,
}

impl std::fmt::Display for ExprError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {}", self.column, self.msg)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Op(char),
    End,
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let save = i;
                i += 1;
                if i < chars.len() && (chars[i] == '+' || chars[i] == '-') {
                    i += 1;
                }
                if i < chars.len() && chars[i].is_ascii_digit() {
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                } else {
                    i = save;
                }
            }
            let text: String = chars[start..i].iter().collect();
            let v: f64 = text.parse().map_err(|_| ExprError {
                column: col,
                msg: format!("malformed number \"{text}\""),
            })?;
            out.push((Tok::Num(v), col));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Tok::Name(chars[start..i].iter().collect()), col));
        } else if "+-*/^(),".contains(c) {
            out.push((Tok::Op(c), col));
            i += 1;
        } else {
            return Err(ExprError {
                column: col,
                msg: format!("unexpected character '{c}'"),
            });
        }
    }
    out.push((Tok::End, chars.len() + 1));
    Ok(out)
}

/// The names an expression may use: inputs (by index) and constants (folded in).
pub struct Scope<'a> {
    /// Input names, in order.
    pub inputs: &'a [String],
    /// Named constants.
    pub constants: &'a [(String, f64)],
}

impl Scope<'_> {
    fn describe(&self) -> String {
        let mut s = format!("states: {}", self.inputs.join(", "));
        if !self.constants.is_empty() {
            let names: Vec<&str> = self.constants.iter().map(|(n, _)| n.as_str()).collect();
            s += &format!("; constants: {}", names.join(", "));
        }
        s
    }
}

struct Parser<'s, 'g> {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    scope: &'s Scope<'s>,
    g: &'g mut Graph,
}

impl Parser<'_, '_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }
    fn col(&self) -> usize {
        self.toks[self.pos].1
    }
    fn fail<T>(&self, msg: impl Into<String>) -> Result<T, ExprError> {
        Err(ExprError {
            column: self.col(),
            msg: msg.into(),
        })
    }
    fn describe(t: &Tok) -> String {
        match t {
            Tok::Num(v) => format!("number {v}"),
            Tok::Name(n) => format!("\"{n}\""),
            Tok::Op(c) => format!("'{c}'"),
            Tok::End => "the end".into(),
        }
    }

    fn expr(&mut self) -> Result<Expr, ExprError> {
        let mut acc = self.term()?;
        while let Tok::Op(c @ ('+' | '-')) = *self.peek() {
            self.pos += 1;
            let r = self.term()?;
            acc = if c == '+' {
                self.g.add(acc, r)
            } else {
                self.g.sub(acc, r)
            };
        }
        Ok(acc)
    }

    fn term(&mut self) -> Result<Expr, ExprError> {
        let mut acc = self.unary()?;
        while let Tok::Op(c @ ('*' | '/')) = *self.peek() {
            self.pos += 1;
            let r = self.unary()?;
            acc = if c == '*' {
                self.g.mul(acc, r)
            } else {
                self.g.div(acc, r)
            };
        }
        Ok(acc)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        if *self.peek() == Tok::Op('-') {
            self.pos += 1;
            let a = self.unary()?;
            return Ok(self.g.neg(a));
        }
        if *self.peek() == Tok::Op('+') {
            self.pos += 1;
            return self.unary();
        }
        self.power()
    }

    fn power(&mut self) -> Result<Expr, ExprError> {
        let base = self.atom()?;
        if *self.peek() == Tok::Op('^') {
            self.pos += 1;
            let e = self.unary()?;
            return Ok(self.g.bin(Bin::Pow, base, e));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        let col = self.col();
        match self.peek().clone() {
            Tok::Num(v) => {
                self.pos += 1;
                Ok(self.g.num(v))
            }
            Tok::Op('(') => {
                self.pos += 1;
                let e = self.expr()?;
                if *self.peek() != Tok::Op(')') {
                    return self.fail(format!(
                        "expected ')' to close the '(' at column {col}, found {}",
                        Self::describe(self.peek())
                    ));
                }
                self.pos += 1;
                Ok(e)
            }
            Tok::Name(name) => {
                self.pos += 1;
                if *self.peek() == Tok::Op('(') {
                    return self.call(&name, col);
                }
                if let Some(i) = self.scope.inputs.iter().position(|n| *n == name) {
                    return Ok(self.g.var(i));
                }
                if let Some((_, v)) = self.scope.constants.iter().find(|(n, _)| *n == name) {
                    return Ok(self.g.num(*v));
                }
                match name.as_str() {
                    "pi" => return Ok(self.g.num(std::f64::consts::PI)),
                    "e" => return Ok(self.g.num(std::f64::consts::E)),
                    _ => {}
                }
                let hint = if UNARY.iter().any(|(n, _)| *n == name)
                    || BINARY.iter().any(|(n, _)| *n == name)
                {
                    format!(" (\"{name}\" is a function: write {name}(...))")
                } else {
                    format!(" ({})", self.scope.describe())
                };
                Err(ExprError {
                    column: col,
                    msg: format!("unknown name \"{name}\"{hint}"),
                })
            }
            t => self.fail(format!(
                "expected a number, a name or '(', found {}",
                Self::describe(&t)
            )),
        }
    }

    fn call(&mut self, name: &str, col: usize) -> Result<Expr, ExprError> {
        let arity = if UNARY.iter().any(|(n, _)| *n == name) {
            1
        } else if BINARY.iter().any(|(n, _)| *n == name) {
            2
        } else {
            return Err(ExprError {
                column: col,
                msg: format!("unknown function \"{name}\" (the functions: {FUNCTIONS})"),
            });
        };
        self.pos += 1; // '('
        let mut args = Vec::new();
        if *self.peek() != Tok::Op(')') {
            loop {
                args.push(self.expr()?);
                if *self.peek() == Tok::Op(',') {
                    self.pos += 1;
                } else {
                    break;
                }
            }
        }
        if *self.peek() != Tok::Op(')') {
            return self.fail(format!(
                "expected ',' or ')' in the arguments of {name}, found {}",
                Self::describe(self.peek())
            ));
        }
        self.pos += 1;
        if args.len() != arity {
            return Err(ExprError {
                column: col,
                msg: format!(
                    "{name} takes {arity} argument{}, got {}",
                    if arity > 1 { "s" } else { "" },
                    args.len()
                ),
            });
        }
        Ok(if arity == 1 {
            let op = UNARY.iter().find(|(n, _)| *n == name).map(|p| p.1);
            self.g.un(op.expect("listed in UNARY"), args[0])
        } else {
            let op = BINARY.iter().find(|(n, _)| *n == name).map(|p| p.1);
            self.g.bin(op.expect("listed in BINARY"), args[0], args[1])
        })
    }
}

/// Parses one expression into `g`, resolving names in `scope`.
pub fn parse(src: &str, scope: &Scope<'_>, g: &mut Graph) -> Result<Expr, ExprError> {
    let toks = lex(src)?;
    let mut p = Parser {
        toks,
        pos: 0,
        scope,
        g,
    };
    if *p.peek() == Tok::End {
        return p.fail("empty expression");
    }
    let e = p.expr()?;
    if *p.peek() != Tok::End {
        let t = Parser::describe(p.peek());
        return p.fail(format!("unexpected {t} (an operator missing?)"));
    }
    Ok(e)
}

// ---------------------------------------------------------------------------------------
// The tape.

#[derive(Clone, Copy, Debug)]
pub(crate) enum Ins {
    Const(f64),
    Var(u32),
    Un(Un, u32),
    Bin(Bin, u32, u32),
}

/// A compiled vector function `R^n_in -> R^n_out`: the instructions reachable from its
/// outputs, one register each, in topological order.
#[derive(Clone, Debug)]
pub struct Tape {
    n_in: usize,
    ins: Vec<Ins>,
    outputs: Vec<u32>,
}

impl Tape {
    /// Compiles the `outputs` of `g` over `n_in` inputs (dead nodes dropped).
    pub fn compile(g: &Graph, n_in: usize, outputs: &[Expr]) -> Tape {
        let n = g.nodes.len();
        let mut live = vec![false; n];
        for o in outputs {
            live[o.0 as usize] = true;
        }
        for i in (0..n).rev() {
            if !live[i] {
                continue;
            }
            match g.nodes[i] {
                Node::Un(_, a) => live[a as usize] = true,
                Node::Bin(_, a, b) => {
                    live[a as usize] = true;
                    live[b as usize] = true;
                }
                _ => {}
            }
        }
        let mut reg = vec![u32::MAX; n];
        let mut ins = Vec::new();
        for i in 0..n {
            if !live[i] {
                continue;
            }
            reg[i] = ins.len() as u32;
            ins.push(match g.nodes[i] {
                Node::Const(b) => Ins::Const(f64::from_bits(b)),
                Node::Var(v) => Ins::Var(v),
                Node::Un(op, a) => Ins::Un(op, reg[a as usize]),
                Node::Bin(op, a, b) => Ins::Bin(op, reg[a as usize], reg[b as usize]),
            });
        }
        Tape {
            n_in,
            ins,
            outputs: outputs.iter().map(|o| reg[o.0 as usize]).collect(),
        }
    }

    /// Number of inputs.
    pub fn n_in(&self) -> usize {
        self.n_in
    }

    /// Number of outputs.
    pub fn n_out(&self) -> usize {
        self.outputs.len()
    }

    /// The instructions, one register each, in order (for code generation).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn instructions(&self) -> &[Ins] {
        &self.ins
    }

    /// The registers holding the outputs, in output order.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn output_registers(&self) -> &[u32] {
        &self.outputs
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.ins.len()
    }

    /// True when the tape has no instruction.
    pub fn is_empty(&self) -> bool {
        self.ins.is_empty()
    }

    /// Evaluates at one point: `x` (`n_in`) to `out` (`n_out`); `regs` is scratch.
    pub fn eval(&self, x: &[f64], out: &mut [f64], regs: &mut Vec<f64>) {
        regs.clear();
        regs.reserve(self.ins.len());
        for ins in &self.ins {
            let v = match *ins {
                Ins::Const(c) => c,
                Ins::Var(i) => x[i as usize],
                Ins::Un(op, a) => un(op, regs[a as usize]),
                Ins::Bin(op, a, b) => bin(op, regs[a as usize], regs[b as usize]),
            };
            regs.push(v);
        }
        for (o, &r) in out.iter_mut().zip(&self.outputs) {
            *o = regs[r as usize];
        }
    }

    /// Evaluates at `m` points: `xs` `[m][n_in]` to `out` `[m][n_out]`, instruction by
    /// instruction over all points (registers `[instruction][m]` in `regs`).
    pub fn eval_batch(&self, xs: &[f64], m: usize, out: &mut [f64], regs: &mut Vec<f64>) {
        let n_in = self.n_in;
        regs.clear();
        regs.resize(self.ins.len() * m, 0.0);
        for (i, ins) in self.ins.iter().enumerate() {
            let (done, rest) = regs.split_at_mut(i * m);
            let dst = &mut rest[..m];
            let r = |a: u32| &done[a as usize * m..(a as usize + 1) * m];
            match *ins {
                Ins::Const(c) => dst.fill(c),
                Ins::Var(v) => {
                    for (p, d) in dst.iter_mut().enumerate() {
                        *d = xs[p * n_in + v as usize];
                    }
                }
                Ins::Un(op, a) => {
                    let a = r(a);
                    match op {
                        Un::Neg => dst.iter_mut().zip(a).for_each(|(d, x)| *d = -x),
                        _ => dst.iter_mut().zip(a).for_each(|(d, &x)| *d = un(op, x)),
                    }
                }
                Ins::Bin(op, a, b) => {
                    let (a, b) = (r(a), r(b));
                    let it = dst.iter_mut().zip(a.iter().zip(b));
                    match op {
                        Bin::Add => it.for_each(|(d, (x, y))| *d = x + y),
                        Bin::Sub => it.for_each(|(d, (x, y))| *d = x - y),
                        Bin::Mul => it.for_each(|(d, (x, y))| *d = x * y),
                        Bin::Div => it.for_each(|(d, (x, y))| *d = x / y),
                        _ => it.for_each(|(d, (&x, &y))| *d = bin(op, x, y)),
                    }
                }
            }
        }
        let n_out = self.outputs.len();
        for (k, &r) in self.outputs.iter().enumerate() {
            let src = &regs[r as usize * m..(r as usize + 1) * m];
            for (p, &v) in src.iter().enumerate() {
                out[p * n_out + k] = v;
            }
        }
    }
}

/// A compiled vector function with its exact Jacobian: `value` computes `y = g(x)`,
/// `with_jacobian` computes `y` and `J` (`[n_out][n_in]`, row-major) in one tape that
/// shares their common subexpressions.
#[derive(Clone, Debug)]
pub struct Function {
    value: Tape,
    jac: Tape,
}

impl Function {
    /// Compiles `outputs` of `g` over `n_in` inputs, and their derivatives.
    pub fn new(g: &mut Graph, n_in: usize, outputs: &[Expr]) -> Function {
        let value = Tape::compile(g, n_in, outputs);
        let mut all = outputs.to_vec();
        for v in 0..n_in {
            // One memo per input: the derivative of each shared node made once.
            let mut memo = HashMap::new();
            for &o in outputs {
                let d = g.diff(o, v, &mut memo);
                all.push(d);
            }
        }
        // `all` is [outputs, d/dx0 of each output, d/dx1 ...]: reorder to row-major J.
        let n_out = outputs.len();
        let mut ordered = outputs.to_vec();
        for i in 0..n_out {
            for v in 0..n_in {
                ordered.push(all[n_out + v * n_out + i]);
            }
        }
        let jac = Tape::compile(g, n_in, &ordered);
        Function { value, jac }
    }

    /// Number of inputs.
    pub fn n_in(&self) -> usize {
        self.value.n_in()
    }

    /// Number of outputs.
    pub fn n_out(&self) -> usize {
        self.value.n_out()
    }

    /// The value tape.
    pub fn tape(&self) -> &Tape {
        &self.value
    }

    /// The tape of `y` and `J` together: outputs `[y (n_out), J row-major]`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn jacobian_tape(&self) -> &Tape {
        &self.jac
    }

    /// `y = g(x)`.
    pub fn value(&self, x: &[f64], y: &mut [f64], regs: &mut Vec<f64>) {
        self.value.eval(x, y, regs)
    }

    /// `y = g(x)` at `m` points (`xs [m][n_in]`, `ys [m][n_out]`).
    pub fn value_batch(&self, xs: &[f64], m: usize, ys: &mut [f64], regs: &mut Vec<f64>) {
        self.value.eval_batch(xs, m, ys, regs)
    }

    /// `y = g(x)` and `J = dg/dx` (row-major `[n_out][n_in]`); `scratch` must hold
    /// `n_out (1 + n_in)` values.
    pub fn with_jacobian(
        &self,
        x: &[f64],
        y: &mut [f64],
        j: &mut [f64],
        scratch: &mut Vec<f64>,
        regs: &mut Vec<f64>,
    ) {
        let (n_out, n_in) = (self.n_out(), self.n_in());
        scratch.resize(n_out * (1 + n_in), 0.0);
        self.jac.eval(x, scratch, regs);
        y.copy_from_slice(&scratch[..n_out]);
        j.copy_from_slice(&scratch[n_out..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(srcs: &[&str], names: &[&str], consts: &[(&str, f64)]) -> Function {
        let inputs: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let constants: Vec<(String, f64)> =
            consts.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let scope = Scope {
            inputs: &inputs,
            constants: &constants,
        };
        let mut g = Graph::new();
        let outs: Vec<Expr> = srcs
            .iter()
            .map(|s| parse(s, &scope, &mut g).unwrap())
            .collect();
        Function::new(&mut g, inputs.len(), &outs)
    }

    fn err(src: &str) -> ExprError {
        let inputs = vec!["x".to_string(), "y".to_string()];
        let constants = vec![("dt".to_string(), 0.1)];
        let scope = Scope {
            inputs: &inputs,
            constants: &constants,
        };
        parse(src, &scope, &mut Graph::new()).unwrap_err()
    }

    #[test]
    fn precedence_and_values() {
        let f = compile(
            &[
                "-x^2",
                "2^-1",
                "x - y - 1",
                "x / y / 2",
                "2 * 3 ^ 2",
                "atan2(y, x) + pi",
                "1.5e1 + .5",
            ],
            &["x", "y"],
            &[],
        );
        let mut y = vec![0.0; 7];
        f.value(&[3.0, 4.0], &mut y, &mut Vec::new());
        let want = [
            -9.0,
            0.5,
            -2.0,
            3.0 / 4.0 / 2.0,
            18.0,
            4f64.atan2(3.0) + std::f64::consts::PI,
            15.5,
        ];
        for (a, b) in y.iter().zip(want) {
            assert!((a - b).abs() < 1e-15, "{a} vs {b}");
        }
    }

    #[test]
    fn errors_name_the_column() {
        let e = err("x + omga");
        assert_eq!(e.column, 5);
        assert!(e.msg.contains("unknown name \"omga\""), "{}", e.msg);
        assert!(e.msg.contains("states: x, y; constants: dt"), "{}", e.msg);
        let e = err("1 + atan2(x)");
        assert_eq!(e.column, 5);
        assert!(
            e.msg.contains("atan2 takes 2 arguments, got 1"),
            "{}",
            e.msg
        );
        let e = err("sin(x, y)");
        assert!(e.msg.contains("sin takes 1 argument, got 2"), "{}", e.msg);
        let e = err("foo(x)");
        assert!(e.msg.contains("unknown function \"foo\""), "{}", e.msg);
        let e = err("(x + y");
        assert_eq!(e.column, 7);
        assert!(e.msg.contains("expected ')'"), "{}", e.msg);
        let e = err("x y");
        assert_eq!(e.column, 3);
        let e = err("x $ y");
        assert_eq!((e.column, e.msg.as_str()), (3, "unexpected character '$'"));
        assert!(err("").msg.contains("empty"));
        assert!(err("sin").msg.contains("is a function"));
    }

    #[test]
    fn batch_equals_single_points() {
        let f = compile(
            &[
                "sin(x) * y + exp(-x^2)",
                "hypot(x, y) - min(x, y) + max(x, 2)",
                "abs(x - y)",
            ],
            &["x", "y"],
            &[],
        );
        let xs = [0.3, -1.2, 2.0, 0.5, -0.7, 4.0];
        let mut yb = vec![0.0; 9];
        f.value_batch(&xs, 3, &mut yb, &mut Vec::new());
        for p in 0..3 {
            let mut y = vec![0.0; 3];
            f.value(&xs[2 * p..2 * p + 2], &mut y, &mut Vec::new());
            assert_eq!(&yb[3 * p..3 * p + 3], &y[..]);
        }
    }

    #[test]
    fn shared_subexpressions_are_one_instruction() {
        let f = compile(&["sin(x + y) * sin(y + x)"], &["x", "y"], &[]);
        // x, y, x + y, sin, product.
        assert_eq!(f.tape().len(), 5);
    }

    #[test]
    fn turn_gains_are_exact_through_zero() {
        let t = 0.7;
        for w in [0.0f64, 1e-12, 1e-6, 0.049 / t, 0.051 / t, 0.3, -2.0] {
            let (s, c) = if w == 0.0 {
                (t, 0.0)
            } else {
                // 1 - cos x = 2 sin^2(x / 2), without the cancellation.
                ((w * t).sin() / w, 2.0 * (w * t / 2.0).sin().powi(2) / w)
            };
            assert!(
                (sin_over(w, t) - s).abs() < 1e-15,
                "{w}: sin_over {} against {s}",
                sin_over(w, t)
            );
            assert!(
                (cos_over(w, t) - c).abs() < 1e-15,
                "{w}: cos_over {} against {c}",
                cos_over(w, t)
            );
            let h = 1e-5;
            let fd = |f: fn(f64, f64) -> f64| {
                (f(w - 2.0 * h, t) - 8.0 * f(w - h, t) + 8.0 * f(w + h, t) - f(w + 2.0 * h, t))
                    / (12.0 * h)
            };
            assert!(
                (dsin_over(w, t) - fd(sin_over)).abs() < 1e-9,
                "{w}: dsin_over {} against {}",
                dsin_over(w, t),
                fd(sin_over)
            );
            assert!(
                (dcos_over(w, t) - fd(cos_over)).abs() < 1e-9,
                "{w}: dcos_over {} against {}",
                dcos_over(w, t),
                fd(cos_over)
            );
        }
    }
}

//! The tape: the graph's live nodes compiled to register instructions, evaluated
//! instruction-major over a batch of points.

use super::*;

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
        // Every register is written (by its own instruction) before it is read: the
        // buffer only needs the room, not zeros.
        if regs.len() < self.ins.len() * m {
            regs.resize(self.ins.len() * m, 0.0);
        }
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

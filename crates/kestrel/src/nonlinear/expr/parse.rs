//! The parser: tokens, then recursive descent into the graph (`mod.rs`'s grammar).

use super::*;

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

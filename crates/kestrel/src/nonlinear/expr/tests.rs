//! The expression language against hand-written functions and derivatives.

use super::*;

fn compile(srcs: &[&str], names: &[&str], consts: &[(&str, f64)]) -> Function {
    let inputs: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let constants: Vec<(String, f64)> = consts.iter().map(|(n, v)| (n.to_string(), *v)).collect();
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

//! Kernel parameters as typed structs: every family declares the parameters of each of
//! its kernels once, with [`params!`](crate::cuda::params), as a struct whose fields
//! are the kernel's parameters in order and by name (buffers, integers of the
//! parameter's own width, explicit [`Arg`]s for floats of the module's precision and
//! by-value structs), and launches it with [`launch`](crate::cuda::launch). The
//! invocation also lists each struct's signature ([`Signature`]), so that a CPU test
//! compares the structs with the kernels' CUDA declarations ([`check`]): a parameter
//! missing, added, moved, renamed or of another kind fails on any machine, not first on
//! a GPU.

use super::gpu::{Arg, DevBuf};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

/// What a kernel parameter is, as its CUDA declaration spells it and as a field's type
/// passes it.
// Read by the signature check, which runs in the tests.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A pointer (a device buffer).
    Ptr,
    /// `int`.
    I32,
    /// `unsigned int`.
    U32,
    /// A 64-bit integer (`long long`, `unsigned long long`).
    I64,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// `real` (CUDA side): `float` or `double` by the module's precision.
    Real,
    /// A struct passed by value (CUDA side).
    Struct,
    /// An explicit [`Arg`] (Rust side): a float of the module's precision or a struct's
    /// bytes, whose kind is the value's.
    Any,
}

#[cfg(test)]
impl Kind {
    /// Whether a field of kind `self` may pass a parameter declared as `decl`.
    fn passes(self, decl: Kind) -> bool {
        match (self, decl) {
            (Kind::Any, _) => true,
            (Kind::F32 | Kind::F64, Kind::Real) => true,
            (a, b) => a == b,
        }
    }
}

/// A field of a parameter struct: its kind and its launch argument.
pub(crate) trait Param<'a> {
    #[allow(dead_code)] // read by the signature check (tests)
    const KIND: Kind;
    fn arg(&self, stream: &CudaStream) -> Arg<'a>;
}

/// A device buffer of any element type, as a kernel parameter: its address. A field
/// of type [`Buf`] takes a reference to any buffer (`&self.mean`), for families whose
/// buffers are generic in their scalar.
pub(crate) trait Buffer {
    fn address(&self, stream: &CudaStream) -> u64;
}

impl<T> Buffer for CudaSlice<T> {
    fn address(&self, stream: &CudaStream) -> u64 {
        // The context does not track events (`crate::cuda`): the guard records nothing.
        self.device_ptr(stream).0
    }
}

impl<T> Buffer for DevBuf<T> {
    fn address(&self, _: &CudaStream) -> u64 {
        self.ptr()
    }
}

impl<T: Buffer + ?Sized> Buffer for &T {
    fn address(&self, stream: &CudaStream) -> u64 {
        (**self).address(stream)
    }
}

/// A device address kept from a buffer (or 0: "none", where a kernel takes a null
/// pointer for an input not given), as a buffer.
pub(crate) struct Addr(pub u64);

impl Buffer for Addr {
    fn address(&self, _: &CudaStream) -> u64 {
        self.0
    }
}

/// A buffer field of a parameter struct.
pub(crate) type Buf<'a> = &'a (dyn Buffer + 'a);

impl<'a> Param<'a> for dyn Buffer + '_ {
    const KIND: Kind = Kind::Ptr;
    fn arg(&self, stream: &CudaStream) -> Arg<'a> {
        Arg::Ptr(self.address(stream))
    }
}

impl<'a> Param<'a> for Arg<'a> {
    const KIND: Kind = Kind::Any;
    fn arg(&self, _: &CudaStream) -> Arg<'a> {
        *self
    }
}

impl<'a, T: Param<'a> + ?Sized> Param<'a> for &T {
    const KIND: Kind = T::KIND;
    fn arg(&self, stream: &CudaStream) -> Arg<'a> {
        (**self).arg(stream)
    }
}

macro_rules! scalar_param {
    ($($t:ty => $kind:ident $v:ident $conv:expr),* $(,)?) => {
        $(impl<'a> Param<'a> for $t {
            const KIND: Kind = Kind::$kind;
            fn arg(&self, _: &CudaStream) -> Arg<'a> {
                let $v = *self;
                $conv
            }
        })*
    };
}
scalar_param!(
    i32 => I32 v Arg::I32(v),
    u32 => U32 v Arg::U32(v),
    i64 => I64 v Arg::U64(v as u64),
    u64 => I64 v Arg::U64(v),
    f32 => F32 v Arg::F32(v),
    f64 => F64 v Arg::F64(v),
);

/// A field of a parameter struct: one kernel parameter (any [`Param`]), or a group of
/// consecutive parameters that several kernels take alike, declared once with
/// [`group!`](crate::cuda::group) and set once at the launch site.
pub(crate) trait Field<'a> {
    /// Each parameter's name and kind, the field's `name` for a single one.
    #[allow(dead_code)] // read by the signature check (tests)
    fn fields(name: &'static str, out: &mut Vec<(&'static str, Kind)>);
    /// The launch arguments, in order.
    fn args(&self, stream: &CudaStream, out: &mut Vec<Arg<'a>>);
}

impl<'a, T: Param<'a> + ?Sized> Field<'a> for T {
    fn fields(name: &'static str, out: &mut Vec<(&'static str, Kind)>) {
        out.push((name, T::KIND));
    }
    fn args(&self, stream: &CudaStream, out: &mut Vec<Arg<'a>>) {
        out.push(self.arg(stream));
    }
}

/// Declares a group of kernel parameters (fields in the kernels' order, named as their
/// parameters) for [`params!`] structs to take as one field: a `Copy` struct whose
/// fields stand in the kernels' lists where the group's field stands in the struct.
///
/// ```ignore
/// group! {
///     /// The draw coordinates.
///     pub(super) struct Draw<'a> { flag: Buf<'a>, n: u32, kr: u32 }
/// }
/// ```
macro_rules! group {
    ($(
        $(#[$m:meta])*
        $vis:vis struct $name:ident<$lt:lifetime> {
            $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)?
        }
    )+) => {
        $(
            $(#[$m])*
            #[derive(Clone, Copy)]
            $vis struct $name<$lt> {
                $($(#[$fm])* pub $f: $t),*
            }
            impl<$lt> $crate::cuda::Field<$lt> for $name<$lt> {
                fn fields(_: &'static str, out: &mut Vec<(&'static str, $crate::cuda::Kind)>) {
                    $(<$t as $crate::cuda::Field<$lt>>::fields(stringify!($f), out);)*
                }
                fn args(
                    &self,
                    stream: &cudarc::driver::CudaStream,
                    out: &mut Vec<$crate::cuda::Arg<$lt>>,
                ) {
                    $($crate::cuda::Field::args(&self.$f, stream, out);)*
                }
            }
        )+
    };
}
pub(crate) use group;

/// Whether `entry` of a struct's kernel list names kernel `name`: the name itself, or
/// `base_*` for every kernel whose name starts with `base_` (one built by `base_##i`).
pub(crate) fn names(entry: &str, name: &str) -> bool {
    match entry.strip_suffix('*') {
        Some(base) => name.starts_with(base),
        None => entry == name,
    }
}

/// A kernel's parameters: the kernels that take them and their fields in order.
pub(crate) trait Params<'a> {
    /// The kernels declared with these parameters.
    const KERNELS: &'static [&'static str];
    /// Each parameter's name and kind, in the kernels' order (a group's in its place).
    #[allow(dead_code)] // read by the signature check (tests)
    fn fields() -> Vec<(&'static str, Kind)>;
    /// The launch's arguments.
    fn args(&self, stream: &CudaStream) -> Vec<Arg<'a>>;
}

/// A parameter struct's signature, for [`check`].
#[cfg(test)]
pub(crate) type Signature = (&'static [&'static str], fn() -> Vec<(&'static str, Kind)>);

/// Declares kernel parameter structs (fields in the kernels' order, named as their
/// parameters, case aside) and `SIGNATURES`, the list of them for [`check`]:
///
/// ```ignore
/// params! {
///     /// poison's parameters.
///     pub(super) struct Poison<'a> for ["poison"] { p: Buf<'a>, n: i64 }
/// }
/// ```
macro_rules! params {
    ($(
        $(#[$m:meta])*
        $vis:vis struct $name:ident<$lt:lifetime> for [$($k:literal),+ $(,)?] {
            $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)?
        }
    )+) => {
        $(
            $(#[$m])*
            $vis struct $name<$lt> {
                $($(#[$fm])* pub $f: $t),*
            }
            impl<$lt> $crate::cuda::Params<$lt> for $name<$lt> {
                const KERNELS: &'static [&'static str] = &[$($k),+];
                fn fields() -> Vec<(&'static str, $crate::cuda::Kind)> {
                    let mut out = Vec::new();
                    $(<$t as $crate::cuda::Field<$lt>>::fields(stringify!($f), &mut out);)*
                    out
                }
                fn args(
                    &self,
                    stream: &cudarc::driver::CudaStream,
                ) -> Vec<$crate::cuda::Arg<$lt>> {
                    let mut out = Vec::new();
                    $($crate::cuda::Field::args(&self.$f, stream, &mut out);)*
                    out
                }
            }
        )+
        /// Every parameter struct of this module, for the signature check.
        #[cfg(test)]
        pub(crate) const SIGNATURES: &[$crate::cuda::Signature] = &[$((
            <$name<'static> as $crate::cuda::Params<'static>>::KERNELS,
            <$name<'static> as $crate::cuda::Params<'static>>::fields,
        )),+];
    };
}
pub(crate) use params;

/// A kernel's declared parameters: name and kind of each.
#[cfg(test)]
type Declared = Vec<(String, Kind)>;

#[cfg(test)]
/// The kind of a declared parameter's type (`decl` without its name); `typedefs` maps
/// the source's aliases to what they stand for.
fn kind_of(ty: &str, typedefs: &[(String, String)]) -> Kind {
    if ty.contains('*') {
        return Kind::Ptr;
    }
    let words: Vec<&str> = ty
        .split_whitespace()
        .filter(|w| {
            !matches!(
                *w,
                "const" | "__grid_constant__" | "__restrict__" | "volatile"
            )
        })
        .collect();
    let ty = words.join(" ");
    if let Some((_, to)) = typedefs.iter().find(|(name, _)| *name == ty) {
        return kind_of(to, typedefs);
    }
    match ty.as_str() {
        "int" | "int32_t" => Kind::I32,
        "unsigned" | "unsigned int" | "uint32_t" => Kind::U32,
        "long long" | "unsigned long long" | "long long int" | "int64_t" | "uint64_t"
        | "size_t" => Kind::I64,
        "float" => Kind::F32,
        "double" => Kind::F64,
        "real" | "REAL" => Kind::Real,
        _ => Kind::Struct,
    }
}

#[cfg(test)]
/// Every `extern "C" __global__` kernel of `source` with its parameters (a name built
/// with `P##_` in a macro is kept with that prefix), and the source's `typedef`s.
fn declarations(source: &str) -> Vec<(String, Declared)> {
    let mut typedefs = Vec::new();
    for line in source.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("typedef ") {
            if let Some(body) = rest.strip_suffix(';') {
                if let Some((to, name)) = body.rsplit_once(' ') {
                    typedefs.push((name.trim().to_string(), to.trim().to_string()));
                }
            }
        }
    }
    // A macro that stands for `extern "C" __global__` (a file also compiled on the CPU)
    // is read as what it stands for; its own definition is not a kernel.
    let mut text = source.replace("\\\n", " ");
    let aliases: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#define "))
        .filter_map(|l| l.strip_suffix("extern \"C\" __global__"))
        .map(|name| name.trim().to_string())
        .collect();
    for a in aliases {
        text = text.replace(&format!("#define {a} extern \"C\" __global__"), "");
        text = text.replace(&a, "__global__");
    }
    // Object-like macros, for parameter lists spelled through them.
    let defines: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#define "))
        .filter_map(|l| {
            let name_end = l.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
            let (name, body) = l.split_at(name_end);
            (!body.starts_with('(')).then_some((name, body.trim()))
        })
        .collect();
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("__global__") {
        rest = &rest[at + "__global__".len()..];
        let Some(open) = rest.find('(') else { break };
        let mut head = rest[..open].trim();
        // `void __launch_bounds__(N) name(`: skip the bounds' parentheses.
        let mut after = open;
        if head.ends_with("__launch_bounds__") {
            let Some(close) = rest[open..].find(')') else {
                break;
            };
            let from = open + close + 1;
            let Some(o2) = rest[from..].find('(') else {
                break;
            };
            head = rest[from..from + o2].trim();
            after = from + o2;
        }
        let name = head.split_whitespace().last().unwrap_or("").to_string();
        let mut depth = 0;
        let mut end = after;
        for (i, c) in rest[after..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = after + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let list = expand(&rest[after + 1..end], &defines);
        // A list with an `#if` block is two lists: without the block and with it.
        let lists = if list.contains("#if") {
            let mut skip = false;
            let mut without = String::new();
            for line in list.lines() {
                let t = line.trim_start();
                if t.starts_with("#if") {
                    skip = true;
                } else if t.starts_with("#endif") {
                    skip = false;
                } else if !skip && !t.starts_with('#') {
                    without += line;
                    without.push('\n');
                }
            }
            let with: String = list
                .lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .map(|l| format!("{l}\n"))
                .collect();
            vec![without, with]
        } else {
            vec![list]
        };
        for list in lists {
            let params = list
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty() && *p != "void")
                .map(|p| {
                    let split = p
                        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .map_or(0, |i| i + 1);
                    (p[split..].to_string(), kind_of(&p[..split], &typedefs))
                })
                .collect();
            out.push((name.clone(), params));
        }
        rest = &rest[end..];
    }
    out
}

#[cfg(test)]
/// `list` with every identifier that names one of the object-like macros `defines`
/// replaced by the macro's body, until none is left (a few rounds at most).
fn expand(list: &str, defines: &[(&str, &str)]) -> String {
    let mut text = list.to_string();
    for _ in 0..8 {
        let mut out = String::with_capacity(text.len());
        let mut changed = false;
        let mut word = String::new();
        for c in text.chars().chain(std::iter::once(' ')) {
            if c.is_alphanumeric() || c == '_' {
                word.push(c);
                continue;
            }
            match defines.iter().find(|(name, _)| *name == word) {
                Some((_, body)) => {
                    out += body;
                    changed = true;
                }
                None => out += &word,
            }
            word.clear();
            out.push(c);
        }
        out.pop();
        text = out;
        if !changed {
            break;
        }
    }
    text
}

#[cfg(test)]
/// Compares every signature with the kernels of `source` (the family's CUDA files):
/// each kernel a signature names must be declared, with the fields' names (case aside,
/// `r#` aside) and kinds in order. A declaration `P##_name` in a macro stands for
/// `PREFIX_name`; a name `base_*` among a signature's kernels stands for every kernel
/// whose name starts with `base_` (one built by `base_##i`). Returns every mismatch, one
/// line each.
pub(crate) fn check(source: &str, signatures: &[Signature]) -> Vec<String> {
    let decls = declarations(source);
    let mut bad = Vec::new();
    for (kernels, fields) in signatures {
        let fields = &fields();
        for &kernel in *kernels {
            let named = |name: &str| {
                names(kernel, name)
                    || name.split_once("##_").is_some_and(|(_, tail)| {
                        kernel.split_once('_').is_some_and(|(_, k)| k == tail)
                    })
            };
            let lists: Vec<&Declared> = decls
                .iter()
                .filter(|(name, _)| named(name))
                .map(|(_, params)| params)
                .collect();
            if lists.is_empty() {
                bad.push(format!("{kernel}: no such kernel in the source"));
                continue;
            }
            // Every list a kernel is declared with must match (one kernel), or one of
            // those of an `#if` in its list.
            let found: Vec<Vec<String>> = lists
                .iter()
                .map(|p| mismatches(kernel, p, fields))
                .collect();
            if !found.iter().any(Vec::is_empty) {
                let best = found
                    .iter()
                    .zip(&lists)
                    .find(|(_, p)| p.len() == fields.len())
                    .map_or(&found[0], |(f, _)| f);
                bad.extend(best.iter().cloned());
            }
        }
    }
    bad
}

/// Fails, naming every mismatch, unless [`check`] finds none.
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_matches(source: &str, signatures: &[Signature]) {
    let bad = check(source, signatures);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// What differs between `kernel`'s declared `params` and the struct's `fields`.
#[cfg(test)]
fn mismatches(kernel: &str, params: &Declared, fields: &[(&str, Kind)]) -> Vec<String> {
    let mut bad = Vec::new();
    if params.len() != fields.len() {
        bad.push(format!(
            "{kernel}: {} parameters declared, {} fields",
            params.len(),
            fields.len()
        ));
    }
    for (i, ((pname, pkind), (fname, fkind))) in params.iter().zip(fields).enumerate() {
        if pname.to_lowercase() != fname.trim_start_matches("r#").to_lowercase()
            || !fkind.passes(*pkind)
        {
            bad.push(format!(
                "{kernel}: parameter {i} is `{pname}` ({pkind:?}), the field `{fname}` ({fkind:?})"
            ));
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = r#"
typedef unsigned long long tk_u64;
extern "C" __global__ void __launch_bounds__(256) k_one(const __grid_constant__ ModelParams mp, int n,
    long long C, real* __restrict__ xs, double gamma, tk_u64 id) {}
#define SCAN(P, OP) \
    extern "C" __global__ void P##_up(OP::E* a, long long n, unsigned s) { k_up<OP>(a, n, s); }
#define ARGS const real* __restrict__ z, \
    int nb
#define ARGS_IN ARGS, const __grid_constant__ TrackIn in
extern "C" __global__ void __launch_bounds__(128) k_in(ARGS_IN) {}
"#;

    #[test]
    fn declarations_are_read_with_their_kinds() {
        let d = declarations(SOURCE);
        assert_eq!(d.len(), 3);
        assert_eq!(d[2].0, "k_in");
        let names: Vec<&str> = d[2].1.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["z", "nb", "in"]);
        let kinds: Vec<Kind> = d[2].1.iter().map(|p| p.1).collect();
        assert_eq!(kinds, [Kind::Ptr, Kind::I32, Kind::Struct]);
        assert_eq!(d[0].0, "k_one");
        let kinds: Vec<Kind> = d[0].1.iter().map(|p| p.1).collect();
        assert_eq!(
            kinds,
            [
                Kind::Struct,
                Kind::I32,
                Kind::I64,
                Kind::Ptr,
                Kind::F64,
                Kind::I64
            ]
        );
        let names: Vec<&str> = d[0].1.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["mp", "n", "C", "xs", "gamma", "id"]);
        assert_eq!(d[1].0, "P##_up");
    }

    #[test]
    fn a_list_entry_names_its_kernels() {
        assert!(names("tbd_lean", "tbd_lean"));
        assert!(!names("tbd_lean", "tbd_lean2"));
        assert!(names("tbd_vec_*", "tbd_vec_12"));
        assert!(!names("tbd_vec_*", "tbd_lean"));
    }

    #[test]
    fn a_mismatch_is_named() {
        const GOOD: &[(&str, Kind)] = &[
            ("mp", Kind::Any),
            ("n", Kind::I32),
            ("c", Kind::I64),
            ("xs", Kind::Ptr),
            ("gamma", Kind::F64),
            ("id", Kind::I64),
        ];
        const UP: &[(&str, Kind)] = &[("a", Kind::Ptr), ("n", Kind::I64), ("s", Kind::U32)];
        let good: fn() -> Vec<(&'static str, Kind)> = || GOOD.to_vec();
        let up: fn() -> Vec<(&'static str, Kind)> = || UP.to_vec();
        assert!(check(SOURCE, &[(&["k_one"], good), (&["fe_up", "se_up"], up)]).is_empty());
        // Swapped, of another width, one short, and a kernel that is not there.
        let swapped: fn() -> Vec<(&'static str, Kind)> =
            || vec![("a", Kind::Ptr), ("s", Kind::U32), ("n", Kind::I64)];
        let narrow: fn() -> Vec<(&'static str, Kind)> =
            || vec![("a", Kind::Ptr), ("n", Kind::I32), ("s", Kind::U32)];
        let short: fn() -> Vec<(&'static str, Kind)> = || vec![("a", Kind::Ptr), ("n", Kind::I64)];
        for fields in [swapped, narrow, short] {
            let bad = check(SOURCE, &[(&["fe_up"], fields)]);
            assert!(!bad.is_empty() && bad[0].starts_with("fe_up: "), "{bad:?}");
        }
        assert_eq!(
            check(SOURCE, &[(&["k_two"], good)]),
            ["k_two: no such kernel in the source"]
        );
    }
}

//! Fuzzing of the readers, in the test suite: real NPY, CSV and TOML files mutated byte
//! by byte (flips, inserted delimiters and control bytes, deletions, truncations,
//! duplicated chunks) by proptest. Whatever the bytes, a reader returns either data
//! consistent with its shape or an error that names the file on one short line; it never
//! panics, hangs or allocates from a size it read without checking. A few hundred cases
//! per format keep it within seconds; `PROPTEST_CASES` raises the count for a longer run.

use kestrel::io;
use kestrel::model::model_from_toml;
use proptest::prelude::*;
use std::path::Path;

/// One edit of a byte string.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
    Duplicate(usize, usize),
}

/// Bytes that matter to the formats: delimiters, signs, exponents, quotes, control
/// characters, NPY header characters.
const SPECIAL: &[u8] = b",\n\r\0\t -+.eE9nNaI\"'[]={}()#:\xff\x93";

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![any::<u8>(), proptest::sample::select(SPECIAL)];
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, m)| Mutation::Flip(i, m)),
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), proptest::collection::vec(byte, 1..16))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), 1usize..256).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
    ]
}

fn apply(mut b: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        let n = b.len().max(1);
        match m {
            Mutation::Flip(i, x) => {
                if !b.is_empty() {
                    b[i % n] ^= x;
                }
            }
            Mutation::Set(i, x) => {
                if !b.is_empty() {
                    b[i % n] = *x;
                }
            }
            Mutation::Insert(i, xs) => {
                let at = i % (b.len() + 1);
                b.splice(at..at, xs.iter().copied());
            }
            Mutation::Delete(i, k) => {
                let at = i % n;
                let end = (at + k).min(b.len());
                if at < end {
                    b.drain(at..end);
                }
            }
            Mutation::Truncate(i) => b.truncate(i % n),
            Mutation::Duplicate(i, k) => {
                let at = i % n;
                let end = (at + k).min(b.len());
                let chunk: Vec<u8> = b[at.min(end)..end].to_vec();
                b.splice(end..end, chunk);
            }
        }
    }
    b
}

fn csv_seed() -> Vec<u8> {
    let mut s = String::from("track,t,z0,z1\n");
    for b in 0..3 {
        for k in 0..4 {
            if (b + k) % 5 == 3 {
                s += &format!("{b},{k},,\n");
            } else {
                s += &format!("{b},{k},{}.25,-{}e-1\n", b * 10 + k, k + 1);
            }
        }
    }
    s.into_bytes()
}

fn npy_seed(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(header.len() as u16).to_le_bytes());
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

fn npy_f64_seed() -> Vec<u8> {
    let data: Vec<u8> = (0..2 * 3 * 2)
        .flat_map(|i| (i as f64 * 0.5 - 1.0).to_le_bytes())
        .collect();
    npy_seed("<f8", "(2, 3, 2)", &data)
}

fn npy_f32_seed() -> Vec<u8> {
    let data: Vec<u8> = (0..2 * 2 * 3)
        .flat_map(|i| (i as f32 * 1.5).to_le_bytes())
        .collect();
    npy_seed("<f4", "(2, 2, 3)", &data)
}

fn toml_seed() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cv2d.toml"))
        .expect("the example model")
}

fn toml_builder_seed() -> Vec<u8> {
    b"[model]\nkind = \"cv\"\ndims = 2\ndt = 0.5\nq = 1.0\nr = 4.0\n[prior]\np0 = 100.0\n".to_vec()
}

/// An error is one line that names the file and stays short.
fn check_error(e: &kestrel::Error, name: &str) {
    let msg = e.to_string();
    assert!(!msg.is_empty());
    assert!(msg.contains(name), "error does not name {name}: {msg}");
    // Quoted excerpts are cut; the message stays far below the size of the input.
    assert!(
        msg.len() < 1200,
        "a long error ({} bytes): {msg}",
        msg.len()
    );
}

fn check_measurements<T: kestrel::Real>(bytes: &[u8], ext: &str) {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("z.{ext}");
    let p = dir.path().join(&name);
    std::fs::write(&p, bytes).unwrap();
    match io::read_measurements::<T>(&p) {
        Ok(z) => {
            let (tracks, steps, ny, data) = (z.tracks(), z.steps(), z.ny(), z.data());
            assert_eq!(data.len(), tracks * steps * ny);
            assert!(data.iter().all(|v| v.is_finite_value() || v.is_nan_value()));
        }
        Err(e) => check_error(&e, &name),
    }
}

fn config() -> ProptestConfig {
    // Failures are reported with the mutated bytes; no persistence files in the tree.
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_csv_never_panics(ms in proptest::collection::vec(mutation(), 1..6)) {
        let b = apply(csv_seed(), &ms);
        check_measurements::<f64>(&b, "csv");
        check_measurements::<f32>(&b, "csv");
    }

    #[test]
    fn mutated_npy_never_panics(ms in proptest::collection::vec(mutation(), 1..6), f32_seed in any::<bool>()) {
        let seed = if f32_seed { npy_f32_seed() } else { npy_f64_seed() };
        let b = apply(seed, &ms);
        check_measurements::<f64>(&b, "npy");
        check_measurements::<f32>(&b, "npy");
    }

    #[test]
    fn mutated_toml_never_panics(ms in proptest::collection::vec(mutation(), 1..6), builder in any::<bool>()) {
        let seed = if builder { toml_builder_seed() } else { toml_seed() };
        let b = apply(seed, &ms);
        let text = String::from_utf8_lossy(&b);
        match model_from_toml(&text, Path::new("m.toml")) {
            Ok(m) => {
                assert!(m.nx() >= 1 && m.nx() <= kestrel::limits::MAX_DIM);
                m.validate().unwrap();
            }
            Err(e) => check_error(&e, "m.toml"),
        }
    }

    /// NPY headers that claim any shape: the reader trusts no size it reads.
    #[test]
    fn npy_headers_with_any_shape(a in any::<u64>(), b in 0u64..1 << 40, c in prop_oneof![Just(0u64), Just(2u64), any::<u64>()], ndim in 1usize..5) {
        let dims = [a, b, c, 2];
        let shape = format!("({},)", dims[..ndim].iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "));
        let bytes = npy_seed("<f8", &shape, &[0u8; 96]);
        check_measurements::<f64>(&bytes, "npy");
    }
}

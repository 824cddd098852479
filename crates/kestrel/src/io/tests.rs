use super::*;
use std::io::Write;
use std::path::PathBuf;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write a test file");
    p
}

/// Random-looking but reproducible values with some missing steps.
fn sample(tracks: usize, steps: usize, ny: usize) -> Measurements<f64> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let data = (0..tracks * steps * ny)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if (i / ny) % 7 == 3 {
                f64::NAN
            } else {
                (s >> 11) as f64 / (1u64 << 53) as f64 * 200.0 - 100.0
            }
        })
        .collect();
    Measurements::new(tracks, steps, ny, data).expect("consistent sizes")
}

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

fn parse_err_of<T: std::fmt::Debug>(r: Result<T>) -> (Option<usize>, String) {
    match r {
        Err(Error::Parse { line, msg, .. }) => (line, msg),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn csv_and_npy_round_trip_exactly() {
    let d = tmp();
    let z = sample(5, 7, 3);
    for name in ["z.csv", "z.npy"] {
        let p = d.path().join(name);
        write_measurements(&p, &z).unwrap();
        let back: Measurements<f64> = read_measurements(&p).unwrap();
        assert_eq!((back.tracks, back.steps, back.ny), (5, 7, 3), "{name}");
        assert!(same(&back.data, &z.data), "{name}");
        let back32: Measurements<f32> = read_measurements(&p).unwrap();
        let want32: Vec<f64> = z.data.iter().map(|&v| v as f32 as f64).collect();
        let got32: Vec<f64> = back32.data.iter().map(|&v| v as f64).collect();
        assert!(same(&got32, &want32), "{name} as f32");
    }
}

#[test]
fn csv_reads_across_many_pieces() {
    // Larger than one parsing piece (1 MiB), so order checks cross piece boundaries.
    let d = tmp();
    let z = sample(3000, 50, 2);
    let p = d.path().join("big.csv");
    write_measurements(&p, &z).unwrap();
    assert!(std::fs::metadata(&p).unwrap().len() > 3 << 20);
    let back: Measurements<f64> = read_measurements(&p).unwrap();
    assert!(same(&back.data, &z.data));
    // A gap deep inside the file is found and its line named.
    let text = std::fs::read_to_string(&p).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let victim = 2 + 2345 * 50 + 17; // 1-based line of track 2345, step 17
    lines.remove(victim - 1);
    let p2 = write(&d, "gap.csv", &(lines.join("\n") + "\n"));
    let (line, msg) = parse_err_of(read_measurements::<f64>(&p2));
    assert_eq!(line, Some(victim), "{msg}");
    assert!(
        msg.contains("track 2345") && msg.contains("step 17 is missing"),
        "{msg}"
    );
}

#[test]
fn short_decimals_parse_exactly_as_the_standard_parser() {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % n
    };
    let mut fast = 0;
    for _ in 0..200_000 {
        let digits = 1 + next(18) as usize;
        let mut text: String = (0..digits)
            .map(|_| char::from(b'0' + next(10) as u8))
            .collect();
        if next(4) > 0 {
            text.insert(next(digits as u64 + 1) as usize, '.');
        }
        match next(3) {
            0 => text.insert(0, '-'),
            1 if next(2) == 0 => text.insert(0, '+'),
            _ => {}
        }
        let want64: f64 = text.parse().unwrap();
        let want32: f32 = text.parse().unwrap();
        if let Some(v) = csv::parse_short::<f64>(text.as_bytes()) {
            assert_eq!(v.to_bits(), want64.to_bits(), "{text}");
            fast += 1;
        }
        if let Some(v) = csv::parse_short::<f32>(text.as_bytes()) {
            assert_eq!(v.to_bits(), want32.to_bits(), "{text} as f32");
        }
    }
    assert!(fast > 50_000, "the fast path took only {fast} numbers");
    for odd in ["", "-", ".", "1e5", "NaN", "1.2.3", "--1", "1-", " 1"] {
        assert!(csv::parse_short::<f64>(odd.as_bytes()).is_none(), "{odd}");
    }
}

#[test]
fn delimiters_are_found_exactly() {
    // Every length up to a few words, and bytes next to the delimiters in value
    // ('-' = ',' ^ 1, 0x0b = '\n' ^ 1) that a carrying zero-byte test would confuse.
    let alphabet = b",\n-\x0b0123456789.e\r \x00\xff";
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..70 {
        for _ in 0..20 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    alphabet[(s % alphabet.len() as u64) as usize]
                })
                .collect();
            let want: Vec<usize> = (0..len)
                .filter(|&i| bytes[i] == b',' || bytes[i] == b'\n')
                .collect();
            let got: Vec<usize> = csv::Delimiters::new(&bytes).collect();
            assert_eq!(got, want, "{bytes:?}");
        }
    }
}

#[test]
fn csv_missing_values_empty_or_nan() {
    let d = tmp();
    let p = write(
        &d,
        "m.csv",
        "track,t,z0,z1\n0,0,1.5,\n0,1,NaN,2\n1,0,nan,3e2\n1,1,-4,5\n",
    );
    let z: Measurements<f64> = read_measurements(&p).unwrap();
    assert_eq!((z.tracks, z.steps, z.ny), (2, 2, 2));
    assert!(same(
        &z.data,
        &[1.5, f64::NAN, f64::NAN, 2.0, f64::NAN, 300.0, -4.0, 5.0]
    ));
    assert!(z.is_missing(0, 0) && z.is_missing(0, 1) && !z.is_missing(1, 1));
}

#[test]
fn csv_with_quotes_and_crlf_reads_the_same() {
    let d = tmp();
    let plain = write(
        &d,
        "p.csv",
        "track,t,z0\n0,0,1.5\n0,1,\n\n1,0,-2\n1,1,3e-3\n",
    );
    let quoted = write(
        &d,
        "q.csv",
        "\"track\",\"t\",\"z0\"\r\n0,0,\"1.5\"\r\n0,1,\"\"\r\n1,0,-2\r\n1,1,3e-3\r\n",
    );
    let a: Measurements<f64> = read_measurements(&plain).unwrap();
    let b: Measurements<f64> = read_measurements(&quoted).unwrap();
    assert!(same(&a.data, &[1.5, f64::NAN, -2.0, 3e-3]));
    assert!(same(&a.data, &b.data) && (a.tracks, a.steps) == (b.tracks, b.steps));
    let bad = write(&d, "qb.csv", "track,t,z0\n0,0,\"1.5\"\n0,1,\"x\"\n");
    let (line, msg) = parse_err_of(read_measurements::<f64>(&bad));
    assert_eq!(line, Some(3), "{msg}");
    assert!(msg.contains("malformed number \"x\""), "{msg}");
}

#[test]
fn csv_errors_name_line_field_track_step() {
    let d = tmp();
    let cases: &[(&str, Option<usize>, &[&str])] = &[
        (
            "track,t,z0\n0,0,1\n0,1,1.2.3\n",
            Some(3),
            &[
                "field z0",
                "column 3",
                "track 0",
                "step 1",
                "malformed number \"1.2.3\"",
            ],
        ),
        (
            "track,t,z0,z1\n0,0,1,2\n0,1,1\n",
            Some(3),
            &["expected 4 fields", "found 3"],
        ),
        (
            "track,t,z0\n0,0,1\n0,2,1\n",
            Some(3),
            &["track 0", "step 1 is missing"],
        ),
        ("track,t,z0\n0,0,1\n0,0,1\n", Some(3), &["step 0 repeated"]),
        (
            "track,t,z0\n0,0,1\n0,1,1\n2,0,1\n2,1,1\n",
            Some(4),
            &["track 2 follows track 0"],
        ),
        (
            "track,t,z0\n0,0,1\n0,1,1\n1,0,1\n",
            Some(4),
            &["track 1 ends at step 0", "2 steps"],
        ),
        (
            "track,t,z0\n0,0,1\n0,1,1\n1,1,1\n",
            Some(4),
            &["track 1 starts at step 1"],
        ),
        ("track,t,z0\n1,0,1\n", Some(2), &["first row is track 1"]),
        ("track,t,z0\n0,x,1\n", Some(2), &["field t", "invalid step"]),
        ("track,t,z0\n0,0,inf\n", Some(2), &["infinite"]),
        ("track,step,z0\n0,0,1\n", Some(1), &["header must be"]),
        ("track,t,z0\n", None, &["no measurements"]),
        ("", None, &["empty file"]),
    ];
    for (i, (text, want_line, needles)) in cases.iter().enumerate() {
        let p = write(&d, &format!("bad{i}.csv"), text);
        let (line, msg) = parse_err_of(read_measurements::<f64>(&p));
        assert_eq!(line, *want_line, "case {i}: {msg}");
        for n in *needles {
            assert!(msg.contains(n), "case {i}: \"{msg}\" lacks \"{n}\"");
        }
    }
}

#[test]
fn npy_errors_and_f32_input() {
    let d = tmp();
    let p = d.path().join("i.npy");
    ndarray_npy::write_npy(&p, &ndarray::Array3::<i64>::zeros((2, 3, 1))).unwrap();
    let (_, msg) = parse_err_of(read_measurements::<f64>(&p));
    assert!(
        msg.contains("dtype") && msg.contains("float64 or float32"),
        "{msg}"
    );
    let p = d.path().join("two.npy");
    ndarray_npy::write_npy(&p, &ndarray::Array2::<f64>::zeros((2, 3))).unwrap();
    let (_, msg) = parse_err_of(read_measurements::<f64>(&p));
    assert!(msg.contains("3-D"), "{msg}");
    let p = write(&d, "junk.npy", "not numpy at all");
    let (_, msg) = parse_err_of(read_measurements::<f64>(&p));
    assert!(msg.contains("not a valid .npy"), "{msg}");
    let p = d.path().join("f32.npy");
    let a = ndarray::Array3::<f32>::from_shape_fn((2, 3, 2), |(b, k, j)| {
        (b * 6 + k * 2 + j) as f32 * 0.5
    });
    ndarray_npy::write_npy(&p, &a).unwrap();
    let z: Measurements<f64> = read_measurements(&p).unwrap();
    assert_eq!(
        z.data(),
        (0..12).map(|i| i as f64 * 0.5).collect::<Vec<_>>()
    );
}

#[test]
fn unknown_extension_and_missing_file() {
    let d = tmp();
    let (_, msg) = parse_err_of(read_measurements::<f64>(&d.path().join("z.txt")));
    assert!(
        msg.contains(".txt") && msg.contains(".csv or .npy"),
        "{msg}"
    );
    match read_measurements::<f64>(&d.path().join("absent.csv")) {
        Err(e @ Error::Io { .. }) => assert!(e.to_string().contains("absent.csv")),
        other => panic!("expected an I/O error, got {other:?}"),
    }
    let est = Estimates::<f64>::nan(1, 1, 1, false);
    assert!(write_estimates(d.path().join("e.npy"), &est).is_err());
    assert!(!d.path().join("e.npy").exists());
}

fn sample_estimates(tracks: usize, steps: usize, nx: usize, loglik: bool) -> Estimates<f64> {
    // Estimates are finite (the writers refuse NaN); the sample's missing values become 0.25.
    let mut z = sample(tracks, steps, nx * nx + nx + 1);
    z.data_mut()
        .iter_mut()
        .filter(|v| v.is_nan())
        .for_each(|v| *v = 0.25);
    let w = nx * nx + nx + 1;
    let mut e = Estimates::nan(tracks, steps, nx, loglik);
    for i in 0..tracks * steps {
        let row = &z.data[i * w..(i + 1) * w];
        e.mean[i * nx..(i + 1) * nx].copy_from_slice(&row[..nx]);
        e.cov[i * nx * nx..(i + 1) * nx * nx].copy_from_slice(&row[nx..nx + nx * nx]);
        if let Some(l) = &mut e.loglik {
            l[i] = row[w - 1];
        }
    }
    e
}

#[test]
fn estimates_csv_and_npz_hold_the_same_values() {
    let d = tmp();
    for (nx, loglik) in [(2, true), (3, false), (11, true)] {
        let e = sample_estimates(4, 5, nx, loglik);
        let pc = d.path().join(format!("e{nx}.csv"));
        let pz = d.path().join(format!("e{nx}.npz"));
        write_estimates(&pc, &e).unwrap();
        write_estimates(&pz, &e).unwrap();
        let z: Estimates<f64> = read_estimates_npz(&pz).unwrap();
        assert!(same(&z.mean, &e.mean) && same(&z.cov, &e.cov));
        assert_eq!(z.loglik.is_some(), loglik);
        let text = std::fs::read_to_string(&pc).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(header.len(), 2 + nx + nx * nx + loglik as usize);
        assert_eq!(header[2 + nx], if nx > 10 { "P0_0" } else { "P00" });
        assert_eq!(header[2 + nx + 1], if nx > 10 { "P0_1" } else { "P01" });
        assert_eq!(header.last() == Some(&"loglik"), loglik);
        let rows: Vec<Vec<f64>> = lines
            .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
            .collect();
        assert_eq!(rows.len(), 20);
        for (i, r) in rows.iter().enumerate() {
            assert_eq!((r[0] as usize, r[1] as usize), (i / 5, i % 5));
            assert!(same(&r[2..2 + nx], &e.mean[i * nx..(i + 1) * nx]));
            assert!(same(
                &r[2 + nx..2 + nx + nx * nx],
                &e.cov[i * nx * nx..(i + 1) * nx * nx]
            ));
            if let Some(l) = &e.loglik {
                assert!(same(&r[r.len() - 1..], &l[i..i + 1]));
            }
        }
    }
}

#[test]
fn written_numbers_read_back_exactly() {
    let vals = [
        0.1,
        -1e-300,
        1e300,
        123456.789,
        f64::MIN_POSITIVE,
        5e-324,
        1.0 / 3.0,
        -0.0,
        7.0,
    ];
    let mut buf = Vec::new();
    for v in vals {
        buf.clear();
        csv::push_value(&mut buf, v);
        let s = std::str::from_utf8(&buf).unwrap();
        assert!(s.len() <= 24, "{s}");
        assert_eq!(s.parse::<f64>().unwrap().to_bits(), v.to_bits(), "{s}");
        buf.clear();
        csv::push_value(&mut buf, v as f32);
        let s = std::str::from_utf8(&buf).unwrap();
        assert_eq!(
            s.parse::<f32>().unwrap().to_bits(),
            (v as f32).to_bits(),
            "{s}"
        );
    }
    buf.clear();
    csv::push_value(&mut buf, f64::NAN);
    assert_eq!(buf, b"NaN");
}

#[test]
fn truth_files_use_state_names() {
    let d = tmp();
    let p = d.path().join("x.csv");
    write_truth(
        &p,
        2,
        2,
        3,
        &[
            1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0,
        ],
    )
    .unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(
        text.starts_with("track,t,x0,x1,x2\n0,0,1.0,2.0,3.0\n0,1,4.0,5.0,6.0\n1,0,7.0,8.0,9.0\n"),
        "{text}"
    );
    assert!(write_truth(&p, 2, 2, 3, &[1.0f64]).is_err());
}

#[test]
fn failed_write_leaves_no_file() {
    let d = tmp();
    let p = d.path().join("out.csv");
    let r = write_atomic(&p, |w| {
        w.write_all(b"partial")?;
        Err(std::io::Error::other("disk full"))
    });
    assert!(r.is_err());
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        0,
        "neither the file nor its temporary remains"
    );
}

#[test]
fn peek_rows_reads_npy_headers_and_estimates_csv() {
    let d = tempfile::tempdir().unwrap();
    let (b, t) = (37, 53);
    let data: Vec<f64> = (0..b * t * 2).map(|i| (i as f64) * 0.37 - 11.0).collect();
    let z = crate::Measurements::new(b, t, 2, data).unwrap();
    let npy = d.path().join("z.npy");
    super::write_measurements(&npy, &z).unwrap();
    assert_eq!(super::peek_rows(&npy), Some((b * t) as u64));
    let csv = d.path().join("z.csv");
    super::write_measurements(&csv, &z).unwrap();
    let est = super::peek_rows(&csv).unwrap() as f64;
    let exact = (b * t) as f64;
    assert!((est - exact).abs() < 0.2 * exact, "{est} vs {exact}");
    assert_eq!(super::peek_rows(d.path().join("none.npy")), None);
}

#[test]
fn non_finite_estimates_are_refused_with_track_and_step() {
    let d = tmp();
    for (which, at) in [("mean", 2 * 5 * 2 + 3 * 2 + 1), ("cov", 7), ("loglik", 9)] {
        let mut e = sample_estimates(4, 5, 2, true);
        match which {
            "mean" => e.mean[at] = f64::NAN,
            "cov" => e.cov[at] = f64::NAN,
            _ => e.loglik.as_mut().unwrap()[at] = f64::NEG_INFINITY,
        }
        for name in ["e.csv", "e.npz"] {
            let p = d.path().join(name);
            let err = write_estimates(&p, &e).unwrap_err();
            assert!(matches!(err, Error::NonFinite { .. }), "{err}");
            let msg = err.to_string();
            let want = match which {
                "mean" => "track 2, step 3: mean x1 is NaN",
                "cov" => "track 0, step 1: covariance P11 is NaN",
                _ => "track 1, step 4: log-likelihood is -inf",
            };
            assert!(msg.contains(want), "{msg}");
            assert!(!p.exists());
        }
    }
    // An infinite variance alone is written, with a warning.
    let mut e = sample_estimates(2, 3, 2, true);
    e.cov[4 * 4 + 3] = f64::INFINITY;
    let p = d.path().join("inf.npz");
    write_estimates(&p, &e).unwrap();
    let w = crate::error::take_warnings();
    assert!(
        w.iter()
            .any(|w| w.contains("inf.npz") && w.contains("track 1, step 1 (P11)")),
        "{w:?}"
    );
}

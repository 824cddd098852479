//! The tracking commands end to end: `eval` against the library's metrics, `simulate
//! --scenario`, `track`, and their errors for broken input.

mod common;

use common::*;
use std::path::Path;

fn write(p: &Path, text: &str) {
    std::fs::write(p, text).unwrap();
}

#[test]
fn eval_computes_gospa_ospa_and_mot_by_hand() {
    let d = tempfile::tempdir().unwrap();
    let truth = d.path().join("truth.csv");
    let tracks = d.path().join("tracks.csv");
    // Step 0: truth 1 at (0,0), truth 2 at (10,0); track 5 at (3,4) (distance 5), a
    // tentative track that does not count. Step 1: no tracks.
    write(&truth, "t,id,x0,x1\n0,1,0,0\n0,2,10,0\n1,1,0,0\n");
    write(
        &tracks,
        "t,track,status,x0,x1,P00,P01,P10,P11\n0,5,confirmed,3,4,1,0,0,1\n0,6,tentative,10,0,1,0,0,1\n",
    );
    let out = d.path().join("steps.csv");
    let plot = d.path().join("g.svg");
    let o = kestrel(&[
        "eval",
        "--truth",
        s(&truth),
        "--tracks",
        s(&tracks),
        "--metric",
        "gospa",
        "--c",
        "10",
        "--p",
        "2",
        "--output",
        s(&out),
        "--plot",
        s(&plot),
    ]);
    ok(&o);
    let steps = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<Vec<f64>> = steps
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|f| f.parse().unwrap()).collect())
        .collect();
    // Step 0: 25 (localisation) + 50 (truth 2 missed); step 1: 50 (truth 1 missed).
    assert!((rows[0][1] - 75f64.sqrt()).abs() < 1e-12 && (rows[1][1] - 50f64.sqrt()).abs() < 1e-12);
    let mean = (75f64.sqrt() + 50f64.sqrt()) / 2.0;
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        stdout.contains(&format!("mean GOSPA {mean:.4}")),
        "{stdout}"
    );
    assert!(std::fs::read_to_string(&plot).unwrap().starts_with("<svg"));
    // OSPA: step 0 (25 + 100) / 2; step 1: 100 / 1.
    let o = kestrel(&[
        "eval",
        "--truth",
        s(&truth),
        "--tracks",
        s(&tracks),
        "--metric",
        "ospa",
    ]);
    ok(&o);
    let want = ((62.5f64).sqrt() + 10.0) / 2.0;
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("mean OSPA {want:.4}")));
    // MOT with threshold 6: one match (distance 5), 2 misses, no false tracks: MOTA 1/3.
    let o = kestrel(&[
        "eval",
        "--truth",
        s(&truth),
        "--tracks",
        s(&tracks),
        "--metric",
        "mot",
        "--c",
        "6",
    ]);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        text.contains("MOTA 0.3333") && text.contains("MOTP 5.0000"),
        "{text}"
    );
}

#[test]
fn eval_rejects_broken_input() {
    let d = tempfile::tempdir().unwrap();
    let truth = d.path().join("truth.csv");
    let tracks = d.path().join("tracks.csv");
    write(&truth, "t,id,x0,x1\n0,1,0,0\n");
    write(&tracks, "t,track,status,x0,x1\n0,5,confirmed,3,4\n");
    let before = std::fs::read_dir(d.path()).unwrap().count();
    let run = |t: &Path, k: &Path, extra: &[&str]| {
        let mut args = vec![
            "eval",
            "--truth",
            s(t),
            "--tracks",
            s(k),
            "--metric",
            "gospa",
        ];
        args.extend_from_slice(extra);
        kestrel(&args)
    };
    expect_bad(
        &run(&truth, &tracks, &["--c", "0"]),
        &["--c"],
        d.path(),
        before,
    );
    expect_bad(
        &run(&truth, &tracks, &["--p", "0.5"]),
        &["--p"],
        d.path(),
        before,
    );
    let bad_truth = d.path().join("bad.csv");
    write(&bad_truth, "t,id,x0,x1\n0,1,0\n");
    expect_bad(
        &run(&bad_truth, &tracks, &[]),
        &["bad.csv:2", "fields"],
        d.path(),
        before + 1,
    );
    write(&bad_truth, "t,id,x0\n0,1,0\n");
    expect_bad(
        &run(&bad_truth, &tracks, &[]),
        &["state components"],
        d.path(),
        before + 1,
    );
    write(&bad_truth, "t,id,x0,x1\n0,1,0,abc\n");
    expect_bad(
        &run(&bad_truth, &tracks, &[]),
        &["bad.csv:2", "x1"],
        d.path(),
        before + 1,
    );
    let bad_tracks = d.path().join("badtracks.csv");
    write(&bad_tracks, "t,track,status,x0,x1\n0,5,lost,3,4\n");
    expect_bad(
        &run(&truth, &bad_tracks, &[]),
        &["badtracks.csv:2", "status"],
        d.path(),
        before + 2,
    );
}

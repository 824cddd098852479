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
    let o = eval(
        s(&truth),
        s(&tracks),
        "gospa",
        &[
            "--c",
            "10",
            "--p",
            "2",
            "--output",
            s(&out),
            "--plot",
            s(&plot),
        ],
    );
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
    let o = eval(s(&truth), s(&tracks), "ospa", &[]);
    ok(&o);
    let want = ((62.5f64).sqrt() + 10.0) / 2.0;
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("mean OSPA {want:.4}")));
    // MOT with threshold 6: one match (distance 5), 2 misses, no false tracks: MOTA 1/3.
    let o = eval(s(&truth), s(&tracks), "mot", &["--c", "6"]);
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
    let bad_eval = |t: &Path, k: &Path, extra: &[&str], needles: &[&str]| {
        let base = [
            "eval",
            "--truth",
            s(t),
            "--tracks",
            s(k),
            "--metric",
            "gospa",
        ];
        run_bad(d.path(), &with(&base, extra), needles);
    };
    bad_eval(&truth, &tracks, &["--c", "0"], &["--c"]);
    bad_eval(&truth, &tracks, &["--p", "0.5"], &["--p"]);
    let bad_truth = d.path().join("bad.csv");
    write(&bad_truth, "t,id,x0,x1\n0,1,0\n");
    bad_eval(&bad_truth, &tracks, &[], &["bad.csv:2", "fields"]);
    write(&bad_truth, "t,id,x0\n0,1,0\n");
    bad_eval(&bad_truth, &tracks, &[], &["state components"]);
    write(&bad_truth, "t,id,x0,x1\n0,1,0,abc\n");
    bad_eval(&bad_truth, &tracks, &[], &["bad.csv:2", "x1"]);
    let bad_tracks = d.path().join("badtracks.csv");
    write(&bad_tracks, "t,track,status,x0,x1\n0,5,lost,3,4\n");
    bad_eval(&truth, &bad_tracks, &[], &["badtracks.csv:2", "status"]);
}

fn simulate_scenario(dir: &Path, extra: &[&str]) -> (std::path::PathBuf, std::path::PathBuf) {
    let det = dir.join("det.csv");
    let truth = dir.join("truth.csv");
    let model = example("tracking.toml");
    let mut args = vec![
        "simulate",
        "--scenario",
        "crossing",
        "--model",
        &model,
        "--tracks",
        "10",
        "--steps",
        "25",
        "--pd",
        "0.9",
        "--clutter",
        "10",
        "--region",
        "500",
        "--births",
        "0.1",
        "--seed",
        "4",
        "--output",
        s(&det),
        "--truth",
        s(&truth),
    ];
    args.extend_from_slice(extra);
    ok(&kestrel(&args));
    (det, truth)
}

#[test]
fn simulate_track_and_eval_end_to_end() {
    let d = tempfile::tempdir().unwrap();
    let (det, truth) = simulate_scenario(d.path(), &[]);
    let text = std::fs::read_to_string(&det).unwrap();
    assert!(text.starts_with("t,z0,z1\n"));
    let t_text = std::fs::read_to_string(&truth).unwrap();
    assert!(t_text.starts_with("t,id,x0,x1,x2,x3\n"));
    // Ten targets at step 0.
    assert_eq!(t_text.lines().filter(|l| l.starts_with("0,")).count(), 10);
    let model = example("tracking.toml");
    for (assoc, marginals) in [("gnn", "auto"), ("jpda", "auto"), ("jpda", "lbp")] {
        let tracks = d.path().join(format!("tracks-{assoc}-{marginals}.csv"));
        let which = if assoc == "jpda" {
            ["--jpda-marginals", marginals]
        } else {
            ["--gate", "0.999"]
        };
        ok(&kestrel(&[
            "track",
            which[0],
            which[1],
            "--model",
            &model,
            "--detections",
            s(&det),
            "--output",
            s(&tracks),
            "--assoc",
            assoc,
            "--pd",
            "0.9",
            "--clutter",
            "1e-5",
            "--confirm",
            "3/4",
            "--delete",
            "3",
        ]));
        let out = std::fs::read_to_string(&tracks).unwrap();
        assert!(out.starts_with("t,track,status,x0,x1,x2,x3,P00,P01,"));
        assert!(out
            .lines()
            .skip(1)
            .all(|l| l.split(',').count() == 3 + 4 + 16));
        let o = eval(
            s(&truth),
            s(&tracks),
            "mot",
            &["--c", "20", "--model", &model],
        );
        ok(&o);
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        let mota: f64 = text.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(mota > 0.7, "{assoc} {marginals}: {text}");
    }
    // NPY detections and times in seconds give the same tracks.
    let npy = d.path().join("det.npy");
    let secs = d.path().join("det-seconds.csv");
    let mut rows = Vec::new();
    let mut with_seconds = String::from("t,z0,z1\n");
    for l in text.lines().skip(1) {
        let v: Vec<f64> = l.split(',').map(|f| f.parse().unwrap()).collect();
        with_seconds += &format!("{},{},{}\n", v[0] * 0.5, v[1], v[2]);
        rows.extend(v);
    }
    kestrel::io::write_npy_array(&npy, &[rows.len() / 3, 3], &rows).unwrap();
    write(&secs, &with_seconds);
    let base = d.path().join("tracks-gnn-auto.csv");
    let a = d.path().join("a.csv");
    let b = d.path().join("b.csv");
    let run = |input: &Path, out: &Path, extra: &[&str]| {
        let mut args = vec![
            "track",
            "--model",
            &model,
            "--detections",
            s(input),
            "--output",
            s(out),
            "--pd",
            "0.9",
            "--clutter",
            "1e-5",
            "--confirm",
            "3/4",
        ];
        args.extend_from_slice(extra);
        ok(&kestrel(&args));
    };
    run(&npy, &a, &[]);
    assert_eq!(
        std::fs::read_to_string(&a).unwrap(),
        std::fs::read_to_string(&base).unwrap()
    );
    run(&secs, &b, &["--dt", "0.5"]);
    let halve = |text: String| -> Vec<String> {
        text.lines()
            .skip(1)
            .map(|l| l.split_once(',').unwrap().1.to_string())
            .collect()
    };
    assert_eq!(
        halve(std::fs::read_to_string(&b).unwrap()),
        halve(std::fs::read_to_string(&base).unwrap())
    );
}

#[test]
fn track_and_scenario_reject_broken_input() {
    let d = tempfile::tempdir().unwrap();
    let model = example("tracking.toml");
    let det = d.path().join("det.csv");
    write(&det, "t,z0,z1\n0,1,2\n1,3,4\n");
    let wide = d.path().join("wide.csv");
    write(&wide, "t,z0,z1,z2\n0,1,2,3\n");
    let back = d.path().join("back.csv");
    write(&back, "t,z0,z1\n0,1,2\n2,3,4\n1,5,6\n");
    let ragged = d.path().join("ragged.csv");
    write(&ragged, "t,z0,z1\n0,1,2\n1,3\n");
    let frac = d.path().join("frac.csv");
    write(&frac, "t,z0,z1\n0.5,1,2\n");
    let out = d.path().join("tracks.csv");
    let bad_track = |input: &Path, extra: &[&str], needles: &[&str]| {
        let base = [
            "track",
            "--model",
            &model,
            "--detections",
            s(input),
            "--output",
            s(&out),
        ];
        run_bad(d.path(), &with(&base, extra), needles);
    };
    bad_track(&wide, &[], &["wide.csv", "3 components", "measures 2"]);
    bad_track(&back, &[], &["back.csv:4", "backwards"]);
    bad_track(&ragged, &[], &["ragged.csv:3", "fields"]);
    bad_track(&frac, &[], &["frac.csv:2", "--dt"]);
    bad_track(&frac, &["--dt", "0.3"], &["frac.csv:2", "multiple"]);
    bad_track(&det, &["--pd", "0"], &["--pd"]);
    bad_track(&det, &["--pd", "1.5"], &["--pd"]);
    bad_track(&det, &["--clutter", "-1"], &["--clutter"]);
    bad_track(&det, &["--confirm", "4/3"], &["--confirm", "M <= N"]);
    bad_track(&det, &["--confirm", "three"], &["--confirm"]);
    bad_track(&det, &["--gate", "1"], &["--gate"]);
    bad_track(&det, &["--delete", "0"], &["--delete"]);
    bad_track(&det, &["--dt", "-1"], &["--dt"]);
    // Without a GPU, --device cuda is refused (with either association).
    bad_track(
        &det,
        &["--assoc", "jpda", "--device", "cuda"],
        &["--device cuda"],
    );
    bad_track(&det, &["--device", "tpu"], &["tpu"]);
    bad_track(
        &det,
        &["--assoc", "jpda", "--jpda-marginals", "fast"],
        &["--jpda-marginals", "fast"],
    );
    bad_track(
        &det,
        &["--jpda-marginals", "lbp"],
        &["--jpda-marginals", "--assoc jpda"],
    );
    let bad_sim = |extra: &[&str], needles: &[&str]| {
        let base = [
            "simulate",
            "--model",
            &model,
            "--tracks",
            "3",
            "--steps",
            "4",
            "--output",
            s(&out),
        ];
        run_bad(d.path(), &with(&base, extra), needles);
    };
    bad_sim(&["--scenario", "random", "--pd", "0"], &["--pd"]);
    bad_sim(&["--scenario", "random", "--clutter", "-3"], &["--clutter"]);
    bad_sim(&["--scenario", "random", "--death", "2"], &["--death"]);
    bad_sim(&["--pd", "0.5"], &["--pd", "--scenario"]);
}

#[test]
fn track_rejects_broken_npy_detections_and_settings() {
    let d = tempfile::tempdir().unwrap();
    let model = example("tracking.toml");
    let det = d.path().join("det.csv");
    write(&det, "t,z0,z1\n0,1,2\n1,3,4\n");
    // NPY of the wrong width (3 measurement components for a model that measures 2),
    // with times going backwards, and of the wrong rank.
    let wide = d.path().join("wide.npy");
    kestrel::io::write_npy_array(&wide, &[1, 4], &[0.0, 1.0, 2.0, 3.0]).unwrap();
    let back = d.path().join("back.npy");
    kestrel::io::write_npy_array(
        &back,
        &[3, 3],
        &[0.0, 1.0, 2.0, 2.0, 3.0, 4.0, 1.0, 5.0, 6.0],
    )
    .unwrap();
    let flat = d.path().join("flat.npy");
    kestrel::io::write_npy_array(&flat, &[3], &[0.0, 1.0, 2.0]).unwrap();
    let before = std::fs::read_dir(d.path()).unwrap().count();
    let out = d.path().join("tracks.csv");
    let track = |input: &Path, extra: &[&str]| {
        let mut args = vec![
            "track",
            "--model",
            &model,
            "--detections",
            s(input),
            "--output",
            s(&out),
        ];
        args.extend_from_slice(extra);
        kestrel(&args)
    };
    expect_bad(
        &track(&wide, &[]),
        &["wide.npy", "3 components"],
        d.path(),
        before,
    );
    expect_bad(
        &track(&back, &[]),
        &["back.npy", "backwards"],
        d.path(),
        before,
    );
    expect_bad(
        &track(&flat, &[]),
        &["flat.npy", "[N, 1 + ny]"],
        d.path(),
        before,
    );
    for (flag, value) in [
        ("--pd", "NaN"),
        ("--pd", "-0.5"),
        ("--clutter", "0"),
        ("--clutter", "NaN"),
        ("--clutter", "inf"),
        ("--confirm", "0/3"),
        ("--confirm", "3/"),
        ("--gate", "0"),
    ] {
        expect_bad(&track(&det, &[flag, value]), &[flag], d.path(), before);
    }
}

/// Radar plots `t,range,bearing` of three targets that cross the bearing's wrap at +-pi
/// (the negative x axis), with a little clutter; deterministic "noise".
fn radar_plots(p: &Path) -> Vec<[f64; 2]> {
    let starts = [
        (-2000.0, -300.0, 0.0, 15.0),
        (-2600.0, 400.0, 0.0, -15.0),
        (-1500.0, 600.0, 5.0, 0.0),
    ];
    let mut csv = String::from("t,range,bearing\n");
    let mut end = Vec::new();
    for k in 0..30 {
        for (i, &(x0, y0, vx, vy)) in starts.iter().enumerate() {
            let (x, y): (f64, f64) = (x0 + vx * k as f64, y0 + vy * k as f64);
            let wobble = ((7 * k + 3 * i) as f64).sin();
            let b = (y.atan2(x) + 0.002 * wobble + std::f64::consts::PI)
                .rem_euclid(2.0 * std::f64::consts::PI)
                - std::f64::consts::PI;
            csv += &format!("{k},{},{b}\n", x.hypot(y) + 4.0 * wobble);
            if k == 29 {
                end.push([x, y]);
            }
        }
        let c = (k as f64 * 1.7).sin();
        csv += &format!("{k},{},{}\n", 2500.0 + 1000.0 * c, 3.0 * c);
    }
    write(p, &csv);
    end
}

const RADAR: &str = r#"
[model]
kind = "range-bearing"
dt = 1.0
q = 0.5
radar = [0.0, 0.0]
r_range = 25.0
r_bearing = 4e-6
[prior]
x0 = [0.0, 0.0, 0.0, 0.0]
P0 = [[1e6, 0, 0, 0], [0, 400.0, 0, 0], [0, 0, 1e6, 0], [0, 0, 0, 400.0]]
"#;

const RADAR_IMM: &str = r#"
[imm]
transition = [[0.95, 0.05], [0.1, 0.9]]
initial = [0.8, 0.2]
[[imm.mode]]
kind = "ct"
dt = 1.0
q = 0.5
omega = 0.0
measure = "range-bearing"
radar = [0.0, 0.0]
r_range = 25.0
r_bearing = 4e-6
[[imm.mode]]
kind = "ct"
dt = 1.0
q = 0.5
omega = 0.1
measure = "range-bearing"
radar = [0.0, 0.0]
r_range = 25.0
r_bearing = 4e-6
[prior]
x0 = [0.0, 0.0, 0.0, 0.0]
P0 = [[1e6, 0, 0, 0], [0, 400.0, 0, 0], [0, 0, 1e6, 0], [0, 0, 0, 400.0]]
[filter]
kind = "ukf"
"#;

/// The confirmed tracks of the last scan of a tracks file: `(x0, x2)` and the row's
/// trailing mode probabilities.
fn last_confirmed(text: &str, nx: usize) -> Vec<(f64, f64, Vec<f64>)> {
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let last = rows.last().unwrap()[0];
    rows.iter()
        .filter(|r| r[0] == last && r[2] == "confirmed")
        .map(|r| {
            let v = |i: usize| r[i].parse::<f64>().unwrap();
            let probs = (3 + nx + nx * nx..r.len()).map(v).collect();
            (v(3), v(5), probs)
        })
        .collect()
}

#[test]
fn radar_plots_are_tracked_with_a_nonlinear_model_or_an_imm() {
    let d = Dir::new();
    let det = d.p("plots.csv");
    let end = radar_plots(&det);
    let rb = d.file("rb.toml", RADAR.as_bytes());
    let imm = d.file("imm.toml", RADAR_IMM.as_bytes());
    for (model, filter, assoc, modes) in [
        (&rb, Some("ukf"), "gnn", 0),
        (&rb, Some("ekf"), "jpda", 0),
        (&rb, None, "gnn", 0),
        (&imm, None, "gnn", 2),
        (&imm, Some("ckf"), "jpda", 2),
    ] {
        let out = d.p("tracks.csv");
        let mut args = vec![
            "track",
            "--model",
            model.as_str(),
            "--detections",
            det.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--assoc",
            assoc,
            "--pd",
            "0.95",
        ];
        if let Some(f) = filter {
            args.extend(["--filter", f]);
        }
        let o = kestrel(&args);
        ok(&o);
        let what = format!("{model} {filter:?} {assoc}");
        let err = stderr(&o);
        let name = filter.unwrap_or(if modes > 0 { "ukf" } else { "ekf" });
        assert!(err.contains(name), "{what}: {err}");
        let text = std::fs::read_to_string(&out).unwrap();
        let head = text.lines().next().unwrap();
        assert!(
            head.starts_with("t,track,status,x0,x1,x2,x3,P00,"),
            "{head}"
        );
        assert_eq!(head.ends_with(",p0,p1"), modes == 2, "{what}: {head}");
        let tracks = last_confirmed(&text, 4);
        // Every target ends with a confirmed track at its position, and no other.
        assert_eq!(tracks.len(), end.len(), "{what}: {tracks:?}");
        for [x, y] in &end {
            assert!(
                tracks.iter().any(|t| (t.0 - x).hypot(t.1 - y) < 30.0),
                "{what}: no track at ({x}, {y}): {tracks:?}"
            );
        }
        for t in &tracks {
            assert_eq!(t.2.len(), modes, "{what}");
            if modes > 0 {
                assert!(
                    (t.2.iter().sum::<f64>() - 1.0).abs() < 1e-9,
                    "{what}: {t:?}"
                );
            }
        }
    }
}

#[test]
fn nonlinear_tracking_refuses_what_it_cannot_do() {
    let d = Dir::new();
    let det = d.p("plots.csv");
    radar_plots(&det);
    let rb = d.file("rb.toml", RADAR.as_bytes());
    let det = det.to_str().unwrap();
    let out = d.sentinel("tracks.csv");
    let base = [
        "track",
        "--detections",
        det,
        "--output",
        &out,
        "--model",
        &rb,
    ];
    for (extra, needle) in [
        (&["--device", "cuda"][..], "runs on the CPU only"),
        (&["--filter", "kf"][..], "needs a linear model"),
        (&["--filter", "pf"][..], "--filter pf: unknown filter"),
    ] {
        d.run_bad(&with(&base, extra), &[needle]);
        d.intact("tracks.csv");
    }
    // Three-component detections for a two-component radar.
    let three = d.file("three.csv", b"t,z0,z1,z2\n0,1,2,3\n");
    d.run_bad(
        &[
            "track",
            "--detections",
            &three,
            "--output",
            &out,
            "--model",
            &rb,
        ],
        &["3 components", "the model measures 2"],
    );
    d.intact("tracks.csv");
    // Named detection columns: a name twice, a number for a name, a bad value.
    for (text, needles) in [
        (
            &b"t,range,range\n0,1,2\n"[..],
            &["'range' is named twice"][..],
        ),
        (b"t,1,2\n0,1,2\n", &["column 2 has no name"]),
        (b"t,range,bearing\n0,1,x\n", &[":2: bearing", "'x'"]),
    ] {
        let bad = d.file("bad.csv", text);
        d.run_bad(
            &[
                "track",
                "--detections",
                &bad,
                "--output",
                &out,
                "--model",
                &rb,
            ],
            needles,
        );
        d.intact("tracks.csv");
    }
    // A broken expression model, and one whose h has no finite Jacobian at the prior
    // mean (the radar's own position), where no track can start.
    let expr = |h0: &str| {
        format!(
            "[model]\nkind = \"nonlinear\"\nstates = [\"px\", \"vx\", \"py\", \"vy\"]\n\
             f = [\"px + vx\", \"vx\", \"py + vy\", \"vy\"]\n\
             h = [\"{h0}\", \"atan2(py, px)\"]\nangles = [1]\n\
             Q = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]\n\
             R = [[25, 0], [0, 1e-5]]\n[prior]\nx0 = [0, 0, 0, 0]\n\
             P0 = [[1e6, 0, 0, 0], [0, 100, 0, 0], [0, 0, 1e6, 0], [0, 0, 0, 100]]\n"
        )
    };
    for (h0, needles) in [
        ("hypot(px, qy)", &["h[0]", "unknown name \"qy\""][..]),
        (
            "hypot(px, py)",
            &[
                "scan 0: no track could start from detection 0",
                "not finite",
            ],
        ),
    ] {
        let m = d.file("expr.toml", expr(h0).as_bytes());
        d.run_bad(
            &[
                "track",
                "--detections",
                det,
                "--output",
                &out,
                "--model",
                &m,
            ],
            needles,
        );
        d.intact("tracks.csv");
    }
}

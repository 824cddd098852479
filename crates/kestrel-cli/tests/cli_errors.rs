//! Every kind of broken input gives exit status 2, an `error:` line that names the
//! problem (file, line, field, track, step), and no output file.

mod common;

use common::*;
use std::path::{Path, PathBuf};

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        Case {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    fn out(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// Runs `filter` with the given model and input, expecting a clean failure.
    fn filter_fails(&self, model: &str, input: &Path, extra: &[&str], needles: &[&str]) {
        let out = self.out("out.npz");
        self.fails(
            &with(&model_args("filter", model, s(input), s(&out), ""), extra),
            needles,
        );
        assert!(!out.exists());
    }
    /// Runs `args`, expecting the failure contract with `needles`.
    fn fails(&self, args: &[&str], needles: &[&str]) {
        run_bad(self.dir.path(), args, needles);
    }
}

const GOOD_CSV: &str = "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5,2.5\n1,0,-1,0\n1,1,,\n";

#[test]
fn malformed_measurements_are_named() {
    let c = Case::new();
    let m = example("cv2d.toml");
    let bad_number = c.file("num.csv", "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5,2.x5\n");
    c.filter_fails(
        &m,
        &bad_number,
        &[],
        &[
            "num.csv:3",
            "z1",
            "track 0",
            "step 1",
            "malformed number \"2.x5\"",
        ],
    );
    let columns = c.file("cols.csv", "track,t,z0,z1\n0,0,1.0,2.0\n0,1,1.5\n");
    c.filter_fails(
        &m,
        &columns,
        &[],
        &["cols.csv:3", "expected 4 fields", "found 3"],
    );
    let gap = c.file("gap.csv", "track,t,z0,z1\n0,0,1,2\n0,1,1,2\n0,3,1,2\n");
    c.filter_fails(
        &m,
        &gap,
        &[],
        &["gap.csv:4", "track 0", "step 2 is missing"],
    );
    let header = c.file("head.csv", "id,t,z0,z1\n0,0,1,2\n");
    c.filter_fails(&m, &header, &[], &["head.csv:1", "header"]);
    let dims = c.file("dims.csv", "track,t,z0,z1,z2\n0,0,1,2,3\n");
    c.filter_fails(
        &m,
        &dims,
        &[],
        &["dims.csv", "3 components", "model measures 2"],
    );
    let junk = c.file("junk.npy", "this is not an array");
    c.filter_fails(&m, &junk, &[], &["junk.npy", ".npy"]);
}

#[test]
fn broken_models_are_named() {
    let c = Case::new();
    let z = c.file("z.csv", GOOD_CSV);
    let r_not_pd = c.file(
        "r.toml",
        "[model]\nF = [[1.0, 0.0], [0.0, 1.0]]\nQ = [[1.0, 0.0], [0.0, 1.0]]\nH = [[1.0, 0.0], [0.0, 1.0]]\nR = [[1.0, 2.0], [2.0, 1.0]]\n[prior]\nx0 = [0.0, 0.0]\nP0 = [[1.0, 0.0], [0.0, 1.0]]\n",
    );
    c.filter_fails(
        s(&r_not_pd),
        &z,
        &[],
        &["r.toml", "R", "not positive definite"],
    );
    let nan = c.file(
        "nan.toml",
        "[model]\nF = [[1.0, nan], [0.0, 1.0]]\nQ = [[1.0, 0.0], [0.0, 1.0]]\nH = [[1.0, 0.0], [0.0, 1.0]]\nR = [[1.0, 0.0], [0.0, 1.0]]\n[prior]\nx0 = [0.0, 0.0]\nP0 = [[1.0, 0.0], [0.0, 1.0]]\n",
    );
    c.filter_fails(s(&nan), &z, &[], &["nan.toml", "F", "not finite"]);
    let syntax = c.file("syntax.toml", "[model\nF = 1\n");
    c.filter_fails(s(&syntax), &z, &[], &["syntax.toml"]);
    let missing = c.out("absent.toml");
    c.filter_fails(s(&missing), &z, &[], &["absent.toml"]);
}

#[test]
fn files_devices_and_usage_errors() {
    let c = Case::new();
    let m = example("cv2d.toml");
    let z = c.file("z.csv", GOOD_CSV);
    c.filter_fails(&m, &c.out("absent.csv"), &[], &["absent.csv"]);
    std::fs::create_dir(c.out("dir.csv")).unwrap();
    c.filter_fails(&m, &c.out("dir.csv"), &[], &["dir.csv", "is a directory"]);
    let txt = c.file("z.txt", GOOD_CSV);
    c.filter_fails(&m, &txt, &[], &["z.txt", ".csv or .npy"]);
    c.filter_fails(&m, &z, &["--device", "tpu"], &["unknown device", "tpu"]);
    if kestrel::cuda::available(0).is_err() {
        c.filter_fails(&m, &z, &["--device", "cuda"], &["cuda"]);
        // The parallel filter split over every GPU: the same refusal, naming the device.
        c.filter_fails(
            &m,
            &z,
            &["--method", "parallel", "--device", "cuda:all"],
            &["cuda:all"],
        );
    } else {
        println!("a CUDA GPU is present: the no-GPU error of --device cuda is not checked");
    }

    // An unknown output extension is refused before any work.
    let (json, npz) = (c.out("out.json"), c.out("o.npz"));
    let filter = model_args("filter", &m, s(&z), s(&npz), "");
    c.fails(
        &with(&filter, &["--output", s(&json)]),
        &["out.json", ".csv or .npz"],
    );
    // clap's usage errors exit 2 as well.
    c.fails(&with(&filter, &["--method", "sideways"]), &["sideways"]);
    let smooth = model_args("smooth", &m, s(&z), s(&npz), "");
    c.fails(&with(&smooth, &["--scan", "bogus"]), &["bogus"]);
    let z2 = c.out("z2.csv");
    c.fails(
        &[
            "simulate",
            "--model",
            &m,
            "--tracks",
            "2",
            "--steps",
            "3",
            "--missing",
            "1.5",
            "--output",
            s(&z2),
        ],
        &["--missing"],
    );
    let png = c.out("p.png");
    c.fails(
        &["demo", "--tracks", "3", "--steps", "3", "--plot", s(&png)],
        &["svg"],
    );
}

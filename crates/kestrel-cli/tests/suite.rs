//! The command line's tests, as one test executable: each file of `tests/` is a
//! module here (one link for all of them).

// Each file declares the helper modules it uses (tests/common, emulation, ...), as it
// did when it was an executable of its own: a helper is compiled once per file using it.
#![allow(clippy::duplicate_mod)]

#[path = "cli.rs"]
mod cli;
#[path = "cli_contract.rs"]
mod cli_contract;
#[path = "cli_errors.rs"]
mod cli_errors;
#[path = "cli_fuzz.rs"]
mod cli_fuzz;
#[path = "cli_hmm.rs"]
mod cli_hmm;
#[path = "cli_loglik.rs"]
mod cli_loglik;
#[path = "cli_nonlinear.rs"]
mod cli_nonlinear;
#[path = "cli_outputs.rs"]
mod cli_outputs;
#[path = "cli_pf.rs"]
mod cli_pf;
#[path = "cli_reliability.rs"]
mod cli_reliability;
#[path = "cli_retrodict.rs"]
mod cli_retrodict;
#[path = "cli_round3.rs"]
mod cli_round3;
#[path = "cli_tbd.rs"]
mod cli_tbd;
#[path = "cli_time_varying.rs"]
mod cli_time_varying;
#[path = "cli_tracking.rs"]
mod cli_tracking;
#[path = "readme_examples.rs"]
mod readme_examples;

/// Every file of `tests/` is a module of one of the test executables that Cargo.toml
/// declares (automatic test discovery is off, so a file left out would never run).
#[test]
fn every_test_file_is_compiled() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests");
    if !std::path::Path::new(dir).is_dir() {
        eprintln!("skipped: {dir} is not here (a copy of the executable on another machine)");
        return;
    }
    let manifest = include_str!("../Cargo.toml");
    let roots: Vec<String> = SUITE_ROOTS
        .iter()
        .map(|r| std::fs::read_to_string(format!("{dir}/{r}")).expect("a suite root"))
        .collect();
    for entry in std::fs::read_dir(dir).expect("the tests directory") {
        let name = entry
            .expect("an entry")
            .file_name()
            .into_string()
            .expect("UTF-8");
        if !name.ends_with(".rs") || SUITE_ROOTS.contains(&name.as_str()) {
            continue;
        }
        let included = roots
            .iter()
            .any(|r| r.contains(&format!("#[path = \"{name}\"]")))
            || manifest.contains(&format!("path = \"tests/{name}\""));
        assert!(
            included,
            "tests/{name} is in no test executable: add `#[path = \"{name}\"] mod ...;` to one of {SUITE_ROOTS:?} or a [[test]] to Cargo.toml"
        );
    }
}

const SUITE_ROOTS: &[&str] = &["suite.rs"];

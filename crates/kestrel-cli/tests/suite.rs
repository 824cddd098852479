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
#[path = "cli_results.rs"]
mod cli_results;
#[path = "cli_retrodict.rs"]
mod cli_retrodict;
#[path = "cli_round3.rs"]
mod cli_round3;
#[path = "cli_round3_fuzz.rs"]
mod cli_round3_fuzz;
#[path = "cli_round3_memory.rs"]
mod cli_round3_memory;
#[path = "cli_tbd.rs"]
mod cli_tbd;
#[path = "cli_time_varying.rs"]
mod cli_time_varying;
#[path = "cli_tracking.rs"]
mod cli_tracking;
#[path = "readme_examples.rs"]
mod readme_examples;

#[path = "../../kestrel/tests/suite_guard.rs"]
mod suite_guard;

/// Every file of `tests/` is a module of one of this crate's test executables.
#[test]
fn every_test_file_is_compiled() {
    suite_guard::every_file_is_compiled(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests"),
        include_str!("../Cargo.toml"),
        &["suite.rs"],
    );
}

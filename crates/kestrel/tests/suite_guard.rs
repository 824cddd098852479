//! The guard of both crates' test suites (the kestrel-cli suite includes this file by
//! path): automatic test discovery is off, so a file of `tests/` that no executable
//! declares would never run.

/// Every `.rs` file of `dir` other than the `roots` (the executables' root files) is a
/// `#[path]` module of one of the roots or a `[[test]]` of `manifest` (Cargo.toml's text).
pub fn every_file_is_compiled(dir: &str, manifest: &str, roots: &[&str]) {
    if !std::path::Path::new(dir).is_dir() {
        eprintln!("skipped: {dir} is not here (a copy of the executable on another machine)");
        return;
    }
    let texts: Vec<String> = roots
        .iter()
        .map(|r| std::fs::read_to_string(format!("{dir}/{r}")).expect("a suite root"))
        .collect();
    for entry in std::fs::read_dir(dir).expect("the tests directory") {
        let name = entry
            .expect("an entry")
            .file_name()
            .into_string()
            .expect("UTF-8");
        if !name.ends_with(".rs") || roots.contains(&name.as_str()) {
            continue;
        }
        let included = texts
            .iter()
            .any(|r| r.contains(&format!("#[path = \"{name}\"]")))
            || manifest.contains(&format!("path = \"tests/{name}\""));
        assert!(
            included,
            "tests/{name} is in no test executable: add `#[path = \"{name}\"] mod ...;` to one of {roots:?} or a [[test]] to Cargo.toml"
        );
    }
}

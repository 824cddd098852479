//! The README's shell examples run verbatim, in order, as a newcomer would run them: from
//! the repository root, with `kestrel` on the PATH (here the binary under test), the
//! first line moving into a scratch directory under `~` (here a temporary HOME). The
//! set-up commands (`cargo ...`, `scripts/test`) and `pip install .` are not examples:
//! the sections "Set-up on a fresh machine" and "From Python" are left out.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Sections whose shell blocks are set-up, not examples.
const SET_UP: [&str; 2] = ["## Set-up", "## From Python"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The ```sh blocks of the README outside the set-up sections, in order.
fn examples(readme: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut skip = false;
    let mut block: Option<String> = None;
    for line in readme.lines() {
        if let Some(b) = block.as_mut() {
            if line.trim_start().starts_with("```") {
                if !skip {
                    blocks.push(std::mem::take(b));
                }
                block = None;
            } else {
                b.push_str(line);
                b.push('\n');
            }
        } else if line.starts_with("## ") {
            skip = SET_UP.iter().any(|s| line.starts_with(s));
        } else if line.trim() == "```sh" {
            block = Some(String::new());
        }
    }
    blocks
}

/// The files the examples write (`--output`, `--truth`, `--plot`, `--state-out` values).
fn outputs(script: &str) -> Vec<String> {
    let words: Vec<&str> = script.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| matches!(w[0], "--output" | "--truth" | "--plot" | "--state-out"))
        .map(|w| w[1].to_string())
        .collect()
}

#[test]
fn readme_shell_examples_run_verbatim_in_a_scratch_directory() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let blocks = examples(&readme);
    assert!(
        blocks.len() >= 7,
        "expected the README's examples of every family, found {} shell blocks",
        blocks.len()
    );
    let first = blocks[0].lines().next().unwrap_or_default();
    assert!(
        first.contains("cd ~/"),
        "the README's first example must move into a scratch directory, not {first:?}"
    );
    let script = blocks.concat();
    for cmd in ["cargo ", "scripts/test", "--device cuda"] {
        assert!(
            !script.contains(cmd),
            "an example runs {cmd:?}: it belongs in the set-up or needs a GPU"
        );
    }

    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kestrel"), bin.join("kestrel")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let t0 = std::time::Instant::now();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("set -euo pipefail\n{script}"))
        .current_dir(repo())
        .env("HOME", &home)
        .env("PATH", path)
        .env("KESTREL_CACHE_DIR", tmp.path().join("cache"))
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "the README's examples failed ({}):\n--- stderr\n{}\n--- stdout (tail)\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "README examples: {} blocks in {:.1} s",
        blocks.len(),
        t0.elapsed().as_secs_f64()
    );

    // Every output landed in the scratch directory.
    let scratch = home.join("kestrel-try");
    assert!(
        scratch.join("examples").is_dir(),
        "no scratch copy of examples/"
    );
    let written = outputs(&script);
    assert!(written.len() >= 20, "outputs found: {written:?}");
    for f in &written {
        assert!(
            scratch.join(f).exists(),
            "{f} was not written into the scratch directory"
        );
    }

    // No example reads a file that no earlier example made or that examples/ lacks.
    let mut made: Vec<String> = Vec::new();
    let words: Vec<&str> = script.split_whitespace().collect();
    for w in words.windows(2) {
        match w[0] {
            "--output" | "--truth" | "--plot" | "--state-out" => made.push(w[1].to_string()),
            "--input" | "--detections" | "--tracks" | "--model" if w[1].contains('.') => {
                let ok = made.iter().any(|m| m == w[1])
                    || (w[1].starts_with("examples/") && repo().join(w[1]).is_file());
                assert!(ok, "an example reads {} before any example makes it", w[1]);
            }
            _ => {}
        }
    }
}

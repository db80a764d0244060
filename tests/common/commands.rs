//! Running the `proctrace` command as a user would, output captured: any
//! subcommand, a render into a file, the bundled demo recorded.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs proctrace with `args`, output captured; `record` checks root
/// first (`super::recorder_bin`).
pub fn proctrace(args: &[&str]) -> Output {
    let bin = match args.first() {
        Some(&"record") => super::recorder_bin(),
        _ => super::proctrace_bin(),
    };
    Command::new(bin)
        .args(args)
        .output()
        .expect("running proctrace")
}

/// Runs proctrace and requires it to succeed.
pub fn proctrace_ok(args: &[&str]) -> Output {
    let run = proctrace(args);
    assert!(
        run.status.success(),
        "proctrace {args:?} failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    run
}

/// Renders `input` as `mode` into `output`.
pub fn render(input: &Path, mode: &str, output: &Path) {
    proctrace_ok(&[
        "render",
        "-i",
        input.to_str().unwrap(),
        "-d",
        mode,
        "-o",
        output.to_str().unwrap(),
    ]);
}

/// Records demo/demo.sh into `dir`.
pub fn record_demo(dir: &Path) -> PathBuf {
    let path = dir.join("demo.ndjson");
    let demo = repo().join("demo/demo.sh");
    proctrace_ok(&[
        "record",
        "-o",
        path.to_str().unwrap(),
        "--",
        demo.to_str().unwrap(),
    ]);
    path
}

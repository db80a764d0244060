//! What every subcommand does to the file `-o` names: replaced whole once
//! the output is, or left as it was when the subcommand fails.

use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::render::proctrace;

fn data(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    path.to_str().unwrap().to_owned()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A file of the user's at `dir/name`, with contents and a mode of its own.
fn precious(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, b"precious\nbytes\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
    path
}

/// A subcommand that fails, whether before writing or half-way through,
/// exits 2 and leaves the file it would have replaced byte for byte, and
/// nothing else behind it.
#[test]
fn a_failing_subcommand_keeps_the_file_it_would_replace() {
    let inputs = tempfile::tempdir().unwrap();
    // A raw recording damaged after its first lines: `ingest` has written
    // its header and the first events when it reaches the damage.
    let raw = fs::read_to_string(data("raw.ndjson")).unwrap();
    let mut lines: Vec<&str> = raw.lines().collect();
    lines.insert(6, "not json at all");
    let damaged = inputs.path().join("damaged.ndjson");
    fs::write(&damaged, lines.join("\n") + "\n").unwrap();
    let damaged = damaged.to_str().unwrap();
    let demo = data("demo.ndjson");
    let cases: [&[&str]; 5] = [
        &["render", "-i", &demo, "-d", "cpu-flamegraph"],
        &["render", "-i", &demo, "-d", "pprof"],
        &["render", "-i", damaged, "-d", "tree"],
        &["ingest", "-i", damaged, "--root-pid", "1000"],
        &["diff", &demo, damaged],
    ];
    for args in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = precious(dir.path(), "out");
        let mut args = args.to_vec();
        args.extend(["-o", out.to_str().unwrap()]);
        let output = proctrace(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        assert_eq!(fs::read(&out).unwrap(), b"precious\nbytes\n", "{args:?}");
        let mode = fs::metadata(&out).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640, "{args:?}");
        assert_eq!(names(dir.path()), ["out"], "{args:?}");
    }
}

/// A subcommand that succeeds replaces the file whole: none of the old
/// bytes stay past the new end, the mode stays the file's, a symbolic
/// link still names the file it named, and a device is written in place.
#[test]
fn a_finished_output_replaces_the_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree.txt");
    fs::write(&out, "x".repeat(10_000)).unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.path().join("link.txt");
    std::os::unix::fs::symlink("tree.txt", &link).unwrap();
    let demo = data("demo.ndjson");
    let expected = fs::read_to_string(data("expected/demo.tree")).unwrap();
    for target in [&out, &link] {
        let args = [
            "render",
            "-i",
            &demo,
            "-d",
            "tree",
            "-o",
            target.to_str().unwrap(),
        ];
        let output = proctrace(&args);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        assert_eq!(fs::read_to_string(&out).unwrap(), expected);
        let mode = fs::metadata(&out).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640);
        assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(names(dir.path()), ["link.txt", "tree.txt"]);
    }
    let output = proctrace(&["render", "-i", &demo, "-d", "tree", "-o", "/dev/null"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

/// Runs proctrace with `args` and a stdout whose reader is gone.
fn into_a_closed_pipe(args: &[&str]) -> Output {
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    Command::new(env!("CARGO_BIN_EXE_proctrace"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(write)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("running proctrace")
}

/// The recording each view has something to show of.
fn fixture_for(view: &str) -> String {
    let corpus = |name: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fuzz-corpus")
            .join(name);
        path.to_str().unwrap().to_owned()
    };
    match view {
        "cpu" | "cpu-folded" | "cpu-flamegraph" | "pprof" => corpus("profile.ndjson"),
        "probes" | "probe-folded" => corpus("probes.ndjson"),
        "wall" | "offcpu-folded" | "offcpu-flamegraph" | "wall-flamegraph" => {
            corpus("offcpu.ndjson")
        }
        "hang" | "folded" | "flamegraph" => data("hang.ndjson"),
        "leaks" => data("leak.ndjson"),
        _ => data("demo.ndjson"),
    }
}

/// A stdout whose reader went away ends every subcommand and view as it
/// ends ls: by SIGPIPE, with nothing on stderr (no panic, no "Broken
/// pipe").
#[test]
fn a_closed_stdout_ends_every_subcommand_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let views = crate::docs::views(&crate::docs::help(&["render"]));
    assert!(views.len() >= 20, "{views:?}");
    let renders: Vec<Vec<String>> = views
        .iter()
        .map(|view| {
            ["render", "-i", &fixture_for(view), "-d", view]
                .map(str::to_owned)
                .to_vec()
        })
        .collect();
    let demo = data("demo.ndjson");
    let others: [&[&str]; 7] = [
        &["completions", "bash"],
        &["man"],
        &["--help"],
        &["render", "--help"],
        &["diff", &demo, &demo],
        &["ingest", "-i", &data("raw.ndjson"), "--root-pid", "1000"],
        &["probes", "/usr/bin/python3.11"],
    ];
    let others = others
        .iter()
        .map(|args| args.iter().map(|a| a.to_string()).collect());
    for args in renders.into_iter().chain(others) {
        if args[0] == "probes"
            && !crate::common::prerequisite(Path::new(&args[1]).exists(), &args[1])
        {
            continue;
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = into_a_closed_pipe(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr, "", "{args:?}");
    }
}

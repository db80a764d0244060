//! `proctrace render` and `proctrace ingest` as a user runs them: the
//! built binary on hand-made recordings in tests/data.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MODES: [&str; 5] = ["sequential", "by-process", "mermaid", "tree", "summary"];

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Runs the built binary as a user would, without colours.
pub(crate) fn proctrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proctrace"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("running proctrace")
}

fn render(input: &Path, mode: &str) -> Output {
    proctrace(&["render", "-i", input.to_str().unwrap(), "-d", mode])
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Each mode of each fixture against its expected output in tests/data/expected.
#[test]
fn every_mode_renders_as_expected() {
    let demo_modes: Vec<&str> = MODES.iter().copied().chain(["markdown"]).collect();
    let cases = [
        ("demo", &demo_modes[..]),
        ("legacy", &MODES[..]),
        ("interrupted", &["tree", "summary", "markdown"][..]),
        ("leak", &["leaks", "summary", "markdown"][..]),
        // A real `record --timeout 1s` of `sleep 30 | cat`: one snapshot.
        ("hang", &["markdown"][..]),
        // Two `python3 -c SCRIPT server-N` told apart by the argument after
        // the long script, which a cut command keeps.
        ("servers", &["hang"][..]),
        // A real `--cpu-profile --probe` recording cut after its sixth line.
        ("cut-profile", &["tree"][..]),
    ];
    for (fixture, modes) in cases {
        for mode in modes {
            let output = render(&data(&format!("{fixture}.ndjson")), mode);
            assert!(
                output.status.success(),
                "{fixture} {mode}: {}",
                stderr(&output)
            );
            let expected = fs::read_to_string(data(&format!("expected/{fixture}.{mode}"))).unwrap();
            assert_eq!(stdout(&output), expected, "{fixture} rendered as {mode}");
            if *mode == "markdown" {
                crate::common::assert_markdown(&expected);
            }
        }
    }
}

#[test]
fn leaks_of_a_recording_without_leaks_says_so() {
    for fixture in ["demo", "legacy"] {
        let output = render(&data(&format!("{fixture}.ndjson")), "leaks");
        assert!(output.status.success(), "{fixture}: {}", stderr(&output));
        assert_eq!(
            stdout(&output),
            "no process outlived the process that started it\n",
            "{fixture}"
        );
    }
    let output = render(&data("interrupted.ndjson"), "leaks");
    assert_eq!(
        stdout(&output),
        "the recording is cut short (no trailer: proctrace was killed, or the file truncated): \
         a process cut off before its exit, or after its parent's, is not known to have outlived \
         it\nno process outlived the process that started it before the cut\n"
    );
}

/// A view whose recording holds none of what it is drawn from writes
/// nothing, says what is missing and how to record it in one line, and
/// exits 2: the one rule of every view.
#[test]
fn a_view_of_nothing_is_one_line_and_status_2() {
    let header = r#"{"Header":{"format_version":1,"proctrace_version":"0.1.0","start_time":"2026-11-25T07:00:00Z","root_pid":5,"command":["true"],"kernel":"6.1","raw":false,"cpu_profile":{"hz":99,"clock":"cpu-clock"},"probes":[{"id":0,"spec":"uprobe:libc:malloc","kind":"uprobe","file":"/usr/lib/libc.so.6","name":"malloc"}]}}"#;
    let exec = r#"{"Exec":{"seq":0,"timestamp":1,"pid":5,"ppid":1,"pgid":5,"argv":["true"],"cmdline":"true"}}"#;
    let trailer = r#"{"Trailer":{"events":1,"lost":0,"lost_buffer_full":0,"lost_tracking_full":0,"end_timestamp":2,"interrupted":false,"samples":0}}"#;
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.ndjson");
    fs::write(&empty, format!("{header}\n{exec}\n{trailer}\n")).unwrap();
    let no_profile = "no CPU profile: record with --cpu-profile to sample where the CPU goes";
    let no_probes =
        "no probes: record with --probe SPEC to count a function's or USDT probe's hits";
    let no_sample = "no sample of the tree was taken (it used too little CPU)";
    let no_cpu_time = "no process has a CPU time of 1µs or more (older recordings have none): \
                       render with --weight wall";
    let no_snapshot = "no snapshot of the live tree: record with --timeout, --hang-after or \
                       --linger, or send proctrace SIGUSR1";
    let no_waits = "no waits: record with --off-cpu to follow where the tree's threads wait";
    let demo = data("demo.ndjson");
    let cases = [
        (&demo, "wall", no_waits),
        (&demo, "offcpu-folded", no_waits),
        (&demo, "offcpu-flamegraph", no_waits),
        (&demo, "wall-flamegraph", no_waits),
        (&demo, "cpu", no_profile),
        (&demo, "cpu-folded", no_profile),
        (&demo, "cpu-flamegraph", no_profile),
        (&demo, "pprof", no_profile),
        (&demo, "probes", no_probes),
        (&demo, "probe-folded", no_probes),
        (&demo, "hang", no_snapshot),
        (&demo, "folded", no_cpu_time),
        (&demo, "flamegraph", no_cpu_time),
        (&empty, "cpu", no_sample),
        (&empty, "cpu-folded", no_sample),
        (&empty, "cpu-flamegraph", no_sample),
        (&empty, "pprof", no_sample),
        (&empty, "probes", "no process of the tree hit its 1 probes"),
        (
            &empty,
            "probe-folded",
            "no process of the tree hit its 1 probes",
        ),
    ];
    for (input, view, missing) in cases {
        let output = render(input, view);
        let name = input.display();
        assert_eq!(output.status.code(), Some(2), "{name} {view}: {output:?}");
        assert_eq!(
            stderr(&output),
            format!("proctrace: {name} has nothing for -d {view}: {missing}\n"),
        );
        assert!(output.stdout.is_empty(), "{name} {view}");
    }
}

/// Every view of a recording cut short says so, and what it means for
/// it, rather than what a whole one would mean: no "still running", no
/// tree that "used too little CPU". A view whose data went with the cut
/// is refused, by the one rule, saying so.
#[test]
fn every_view_of_a_cut_recording_says_it_is_cut() {
    let cut = data("cut-profile.ndjson");
    let note = "the recording is cut short (no trailer: proctrace was killed, or the file \
                truncated): ";
    for mode in ["tree", "summary", "profile", "leaks", "markdown", "mermaid"] {
        let output = render(&cut, mode);
        assert!(output.status.success(), "{mode}: {}", stderr(&output));
        let text = stdout(&output).to_lowercase();
        assert!(
            text.contains(note),
            "{mode}:
{text}"
        );
        assert!(
            !text.contains("still running"),
            "{mode}:
{text}"
        );
    }
    let samples = "samples are written at a recording's end, so those of the cut part are \
                   missing
";
    let snapshots = "a snapshot taken after the cut is missing with it
";
    for (mode, meaning) in [
        ("cpu", samples),
        ("cpu-folded", samples),
        ("cpu-flamegraph", samples),
        ("hang", snapshots),
    ] {
        let output = render(&cut, mode);
        assert_eq!(output.status.code(), Some(2), "{mode}");
        let said = stderr(&output);
        assert!(
            said.ends_with(&format!("{note}{meaning}")),
            "{mode}: {said}"
        );
        assert!(!said.contains("too little cpu"), "{mode}: {said}");
    }
    let html = stdout(&render(&cut, "html"));
    assert!(html.contains(r#""cut":true"#), "the report's data says it");
    let perfetto = stdout(&render(&cut, "perfetto"));
    assert!(perfetto.contains(r#""cut_short":true"#), "{perfetto}");
    let whole = data("profiled.ndjson");
    let diff = proctrace(&["diff", whole.to_str().unwrap(), cut.to_str().unwrap()]);
    assert!(
        stdout(&diff).contains(
            "
B is cut short (no trailer): its processes after the cut are missing"
        ),
        "{}",
        stdout(&diff)
    );
}

/// Without `-d`, the summary; without `-i`, stdin.
#[test]
fn summary_is_the_default_and_reads_stdin() {
    let input = fs::read(data("demo.ndjson")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_proctrace"))
        .arg("render")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let expected = fs::read_to_string(data("expected/demo.summary")).unwrap();
    assert_eq!(stdout(&output), expected);
}

/// With no `-i` and a terminal on stdin, `render` and `ingest` say so in
/// one line and exit 2 instead of waiting for a recording nobody types.
#[test]
fn no_input_on_a_terminal_is_refused() {
    // script(1) runs each on a terminal of its own.
    if !crate::common::have_tool("script") {
        return;
    }
    for args in ["render -d hang", "ingest --root-pid 1"] {
        let command = format!("'{}' {args}", env!("CARGO_BIN_EXE_proctrace"));
        let output = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args}: {output:?}");
        assert_eq!(
            stdout(&output),
            "proctrace: no recording given, and stdin is a terminal: name one with -i FILE, \
             or pipe it in\r\n",
            "{args}"
        );
    }
}

#[test]
fn output_goes_to_the_file_given() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree.txt");
    let output = proctrace(&[
        "render",
        "-i",
        data("demo.ndjson").to_str().unwrap(),
        "-d",
        "tree",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success());
    assert!(output.stdout.is_empty());
    let expected = fs::read_to_string(data("expected/demo.tree")).unwrap();
    assert_eq!(fs::read_to_string(out).unwrap(), expected);
}

#[test]
fn a_cut_off_last_line_and_missing_trailer_are_warnings() {
    let output = render(&data("interrupted.ndjson"), "sequential");
    assert!(output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("interrupted.ndjson:7: last line is cut off"),
        "{err}"
    );
    assert!(err.contains("no trailer"), "{err}");
    // The unknown header field and the blank line did not stop it.
    assert_eq!(stdout(&output).lines().count(), 5);
}

/// Writes `lines` to a file named rec.ndjson and renders it from its directory.
fn render_lines(lines: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("rec.ndjson"), lines.join("\n") + "\n").unwrap();
    Command::new(env!("CARGO_BIN_EXE_proctrace"))
        .current_dir(dir.path())
        .args(["render", "-i", "rec.ndjson", "-d", "tree"])
        .output()
        .unwrap()
}

const EXEC: &str = r#"{"Exec":{"seq":0,"timestamp":1,"pid":5,"ppid":1,"pgid":5,"argv":["true"],"cmdline":"true"}}"#;

/// Asserts a one-line error naming rec.ndjson:`line` with `reason`, exit code 2.
fn assert_invalid(lines: &[&str], line: usize, reason: &str) {
    let output = render_lines(lines);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!("proctrace: rec.ndjson:{line}: invalid record: ")),
        "{err}"
    );
    assert!(err.contains(reason), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn garbage_in_the_middle_is_an_error_with_file_and_line() {
    assert_invalid(&[EXEC, "not json at all", EXEC], 2, "expected");
}

#[test]
fn an_unknown_variant_is_an_error() {
    let frok = r#"{"Frok":{"seq":1,"timestamp":2,"parent_pid":5,"child_pid":6,"parent_pgid":5}}"#;
    assert_invalid(&[EXEC, frok], 2, "unknown variant `Frok`");
}

#[test]
fn wrong_types_are_an_error() {
    let exit = r#"{"Exit":{"seq":1,"timestamp":"soon","pid":5,"ppid":1,"pgid":5}}"#;
    assert_invalid(&[EXEC, exit, EXEC], 2, "invalid type");
}

#[test]
fn a_complete_but_invalid_last_line_is_an_error_not_a_cut() {
    assert_invalid(&[EXEC, r#"{"Exit":{"pid":5}}"#], 2, "missing field");
}

#[test]
fn unknown_fields_are_ignored() {
    let exec =
        r#"{"Exec":{"seq":0,"timestamp":1,"pid":5,"ppid":1,"pgid":5,"cmdline":"true","new":[1]}}"#;
    let output = render_lines(&[exec]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("5 true"));
}

#[test]
fn a_missing_input_file_is_an_error() {
    let output = proctrace(&["render", "-i", "/nonexistent/rec.ndjson"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).starts_with("proctrace: opening /nonexistent/rec.ndjson: "));
}

#[test]
fn ingest_extracts_the_tree_from_a_raw_recording() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree.ndjson");
    let output = proctrace(&[
        "ingest",
        "-i",
        data("raw.ndjson").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--root-pid",
        "1000",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let expected = fs::read_to_string(data("expected/raw.ingested")).unwrap();
    assert_eq!(fs::read_to_string(out).unwrap(), expected);
}

/// An empty file, or one of blank lines, is no recording: `render` and
/// `diff` fail with exit status 2 naming it, so that a CI gate does not
/// pass on a broken recording.
#[test]
fn an_empty_recording_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("empty.ndjson", ""), ("blank.ndjson", "\n\n")] {
        let path = dir.path().join(name);
        fs::write(&path, text).unwrap();
        let path = path.to_str().unwrap();
        for args in [
            vec!["render", "-i", path, "-d", "summary"],
            vec!["diff", path, path],
        ] {
            let output = proctrace(&args);
            assert_eq!(output.status.code(), Some(2), "{args:?}");
            assert_eq!(
                stderr(&output),
                format!(
                    "proctrace: {path}: no records: not a recording (empty, or nothing but blank lines)\n"
                ),
                "{args:?}"
            );
            assert!(output.stdout.is_empty(), "{args:?}");
        }
    }
}

/// `--slower` takes a factor above 1 or a positive time; anything else
/// would list processes that got faster.
#[test]
fn slower_thresholds_that_would_list_faster_processes_are_refused() {
    let demo = data("demo.ndjson");
    let demo = demo.to_str().unwrap();
    for bad in ["0.5x", "1x", "+0s"] {
        let output = proctrace(&["diff", "--slower", bad, demo, demo]);
        assert_eq!(output.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&output).contains("factor above 1"),
            "{bad}: {}",
            stderr(&output)
        );
    }
    let output = proctrace(&["diff", "--slower", "1.5x", demo, demo]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

/// Each cause of an error is said once.
#[test]
fn an_error_says_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("binary.ndjson");
    fs::write(&binary, b"\xff\xfe\n").unwrap();
    let directory = dir.path().to_str().unwrap();
    for input in [binary.to_str().unwrap(), directory] {
        let output = render(Path::new(input), "summary");
        assert_eq!(output.status.code(), Some(2), "{input}");
        let message = stderr(&output);
        assert_eq!(message.lines().count(), 1, "{message}");
        let cause = message.rsplit(": ").next().unwrap().trim_end();
        assert_eq!(message.matches(cause).count(), 1, "{message}");
    }
}

/// `-d pprof` of a recording made without `--cpu-profile` is one line
/// and status 2, with no file left behind; to a terminal it is
/// refused before the recording is read, as gzip refuses.
#[test]
fn pprof_needs_a_profile_and_a_file_or_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let demo = data("demo.ndjson");
    let demo = demo.to_str().unwrap();
    let out = dir.path().join("cpu.pb.gz");
    let output = proctrace(&[
        "render",
        "-i",
        demo,
        "-d",
        "pprof",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        format!(
            "proctrace: {demo} has nothing for -d pprof: no CPU profile: record with \
             --cpu-profile to sample where the CPU goes\n"
        )
    );
    assert!(!out.exists(), "an empty file left behind");

    // script(1) runs it on a terminal of its own.
    if !crate::common::have_tool("script") {
        return;
    }
    let command = format!(
        "'{}' render -i '{demo}' -d pprof",
        env!("CARGO_BIN_EXE_proctrace")
    );
    let output = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stdout(&output).contains("-d pprof is binary: write it to a file with -o FILE"),
        "{}",
        stdout(&output)
    );
}

/// The latency histogram has a row for every power of two from the
/// shortest call's to the longest's, the empty ones with a count of 0.
#[test]
fn the_latency_histogram_shows_its_empty_powers() {
    let probes = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/probes.ndjson");
    let output = render(&probes, "probes");
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.starts_with("  latency to "))
        .skip(1)
        .take_while(|line| line.starts_with("    "))
        .collect();
    let bar = |n| "█".repeat(n);
    assert_eq!(
        rows,
        [
            format!("      256 ns+          2 {}", bar(40)),
            "      512 ns+          0".to_owned(),
            "      1.0 µs+          0".to_owned(),
            "      2.0 µs+          0".to_owned(),
            "      4.1 µs+          0".to_owned(),
            format!("      8.2 µs+          1 {}", bar(20)),
        ]
    );
}

/// An inlined function's time is the function's it was inlined into, as
/// `perf report` counts self time, unless `--inline` asks for its frame.
#[test]
fn inlined_functions_count_to_their_caller_unless_asked() {
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/profile.ndjson");
    let path = profile.to_str().unwrap();
    let folded = |extra: &[&str]| {
        let args = [&["render", "-i", path, "-d", "cpu-folded"][..], extra].concat();
        let output = proctrace(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
    };
    let folded_in = folded(&[]);
    assert!(folded_in.contains(";main;work;spin 30\n"), "{folded_in}");
    assert!(!folded_in.contains("helper"), "{folded_in}");
    let shown = folded(&["--inline"]);
    assert!(shown.contains(";main;work;helper;spin 30\n"), "{shown}");
}

/// A kept number's histogram: a row per power of two from the lowest
/// bucket to the highest, negative ones and 0 included, as bpftrace's
/// `hist()` labels them; per test, the buckets hit on one line.
#[test]
fn kept_numbers_are_drawn_by_power_of_two() {
    let probes = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/probes.ndjson");
    let output = render(&probes, "probes");
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let bar = "█".repeat(40);
    let expected = [
        "uretprobe:libc.so.6:malloc (if retval != 0): 3 hits".to_owned(),
        "  (int32)retval (3 hits):".to_owned(),
        format!("     (-8, -4]          1 {bar}"),
        "     (-4, -2]          0".to_owned(),
        "     (-2, -1]          0".to_owned(),
        format!("          [0]          1 {bar}"),
        "       [1, 2)          0".to_owned(),
        format!("       [2, 4)          1 {bar}"),
    ];
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| *l == expected[0]).expect(&text);
    let histogram = lines[at..]
        .iter()
        .skip_while(|l| !l.starts_with("  (int32)"));
    let histogram: Vec<&str> = histogram.take(expected.len() - 1).copied().collect();
    assert_eq!(histogram, expected[1..], "{text}");
    assert!(
        text.contains("  arg2 by test (2 of 2):\n             3  t.py::test_b  [2, 4) 3\n"),
        "{text}"
    );
}

/// A `str(…)` value that did not read as text is kept as its number, an
/// address: no histogram is drawn of it.
#[test]
fn a_string_kept_as_its_address_draws_no_histogram() {
    let probes = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/probes.ndjson");
    let text = fs::read_to_string(probes).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let strings = dir.path().join("strings.ndjson");
    let values = "\"values\":[\"(int32)retval\"]";
    assert!(text.contains(values));
    fs::write(
        &strings,
        text.replace(values, "\"values\":[\"str(retval)\"]"),
    )
    .unwrap();
    let output = render(&strings, "probes");
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("uretprobe:libc.so.6:malloc (if retval != 0): 3 hits\n"),
        "{text}"
    );
    assert!(!text.contains("  str(retval) ("), "{text}");
}

/// `wall` and `offcpu-folded` of a real `record --off-cpu` of `sh -c
/// 'waits pipe 30; waits mutex 30; waits child 30'`: the three runs of
/// `waits` fold into one line, each wait in its function and named after
/// its waker (the mutex's, its holder thread), and the folded stacks end
/// in their reason.
/// The flame graphs of waiting draw what the recording measured: the
/// root of the waits' graph is their total, the wall-clock graph's adds
/// the time on a CPU; each merged line may lose under a microsecond.
#[test]
fn the_flame_graphs_of_waiting_add_up_to_the_recorded_times() {
    let offcpu = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/offcpu.ndjson");
    let (mut waited, mut ran, mut lines) = (0, 0, 0);
    for line in fs::read_to_string(&offcpu).unwrap().lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(wait) = record.get("OffCpu") {
            waited += wait["total_ns"].as_u64().unwrap();
            lines += 1;
        }
        if let Some(slice) = record.get("OnCpu") {
            ran += slice["ns"].as_u64().unwrap();
            lines += 1;
        }
    }
    for (mode, ns) in [
        ("offcpu-flamegraph", waited),
        ("wall-flamegraph", waited + ran),
    ] {
        let output = render(&offcpu, mode);
        assert!(output.status.success(), "{mode}: {}", stderr(&output));
        let svg = stdout(&output);
        let (_, root) = svg
            .split_once("<title>all (")
            .unwrap_or_else(|| panic!("{mode}: {svg}"));
        let us: u64 = root
            .split(' ')
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap();
        assert!(
            us <= ns / 1_000 && us + lines >= ns / 1_000,
            "{mode}: {us} µs drawn of {ns} ns"
        );
        assert!(svg.contains("<title>[lock] ("), "{mode}");
    }
}

#[test]
fn the_wall_view_folds_repeats_and_follows_wakers() {
    let offcpu = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/offcpu.ndjson");
    let output = render(&offcpu, "wall");
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let waits = text
        .lines()
        .find(|l| l.starts_with("  waits ×3: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        waits.contains("lock in take_lock woken by waits 29306 thread 29307"),
        "{waits}"
    );
    assert!(
        waits.contains("pipe in read_pipe woken by <fork> waits 29303"),
        "{waits}"
    );
    assert!(
        waits.contains("child in wait_child woken by <fork> waits 29314"),
        "{waits}"
    );
    // The shell waited for its child, which waited for its own thread's
    // lock: the chain goes through the child to the thread.
    let shell = text
        .lines()
        .find(|l| l.starts_with("  sh: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        shell.contains("child in dash+0xbcbf woken by waits 29306, which waited ")
            && shell.contains(" on lock for waits 29306 thread 29307 ("),
        "{shell}"
    );
    let folded = stdout(&render(&offcpu, "offcpu-folded"));
    let reasons: std::collections::BTreeSet<&str> = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().0.rsplit(';').next().unwrap())
        .collect();
    assert!(
        ["[lock]", "[pipe]", "[child]", "[sleep]", "[runnable]"]
            .iter()
            .all(|r| reasons.contains(r)),
        "{reasons:?}"
    );
    let pipe = folded
        .lines()
        .find(|l| l.contains(";read_pipe;") && l.contains("[pipe]"))
        .unwrap_or_else(|| panic!("{folded}"));
    assert!(pipe.starts_with("waits;_start;"), "{pipe}");
}

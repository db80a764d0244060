//! Hostile command lines: bytes that are not UTF-8, newlines, terminal
//! escape sequences, markup, Mermaid and Markdown syntax, huge and
//! countless arguments.
//! Recorded from real processes they come back byte for byte; rendered in
//! every mode they can neither break the output nor escape into it.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

use crate::common::*;
use proctrace::event::{Exec, Record};
use proctrace::text::shell_join;

const MODES: [&str; 13] = [
    "sequential",
    "by-process",
    "mermaid",
    "tree",
    "summary",
    "html",
    "perfetto",
    "leaks",
    "hang",
    "folded",
    "flamegraph",
    "markdown",
    "otlp",
];

/// An argv to break things with; the first is argv[0], so that it leads
/// every label (Mermaid's are cut short).
fn hostile_words() -> Vec<Vec<u8>> {
    let mut words: Vec<Vec<u8>> = [
        &b"<script>alert(1)</script>"[..],
        b"\xff\xfe not UTF-8 \xc3",
        b"cut short \xe6\x97",
        b"line one\nline two\r\n\ttabbed",
        b"\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b[2J\x1b[H \x7f\x08 \xc2\x9b1m \x9b",
        "\u{202e}txt.exe\u{2066}".as_bytes(),
        b"</script><!-- <img src=x onerror=alert(2)>",
        b"a: b # c; d %% e",
        b"```\n```mermaid\ngraph TD\n```",
        b"%%{init: {\"theme\": \"dark\"}}%%",
        b"#35; &amp; section x\ntitle y\ngantt",
        b"\"}]}\n{\"Exit\":{\"pid\":1}}",
        b"it's \"quoted\" $HOME `id` \\",
        b"| a | b |\\| c [x](javascript:alert(3)) ![i](x) **b** _i_ ~~s~~ $x$ &lt; &#60; \\`",
        b"",
    ]
    .map(<[u8]>::to_vec)
    .to_vec();
    words.push(b"\xff<\x1b\n".repeat(2000));
    words
}

fn os(bytes: &[u8]) -> OsString {
    OsStr::from_bytes(bytes).to_owned()
}

fn lossy(words: &[impl AsRef<[u8]>]) -> Vec<String> {
    words
        .iter()
        .map(|w| String::from_utf8_lossy(w.as_ref()).into_owned())
        .collect()
}

/// The execs of the root: `hostile`'s own, then the program's it ran.
fn both_execs(run: &Run) -> (&Exec, &Exec) {
    match run.execs(run.root())[..] {
        [workload, program] => (workload, program),
        ref other => panic!("expected two execs, got {other:?}\n{}", run.text),
    }
}

#[test]
fn hostile_arguments_are_recorded_exactly_and_rendered_safely() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir
        .path()
        .join(OsStr::from_bytes(b"true \xff\n\x1b[1m;:#%%`<b>"));
    std::os::unix::fs::symlink("/usr/bin/true", &link).unwrap();
    let words = hostile_words();
    let mut cmd: Vec<OsString> = vec![workload("hostile").into(), link.clone().into()];
    cmd.extend(words.iter().map(|w| os(w)));
    let run = record_in(dir, &Opts::new(Mode::Ring), &cmd);

    let (workload, program) = both_execs(&run);
    let cmd_bytes: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
    assert_eq!(workload.argv_bytes(), cmd_bytes, "{}", run.text);
    assert_eq!(program.filename_bytes(), link.as_os_str().as_bytes());
    assert_eq!(program.argv_bytes(), words, "{}", run.text);
    assert_eq!(program.argv, lossy(&words));
    assert!(!program.argv_truncated);
    assert!(!program.argv_raw.is_empty() && program.filename_raw.is_some());
    assert_eq!(run.exit(run.root()).exit_code, Some(0));

    let lines = render_every_mode(&run);
    assert!(
        lines["tree"].contains(r"\033[31mred\033[0m"),
        "escape sequences are shown, escaped:\n{}",
        lines["tree"]
    );
    assert_html_shows(&lines["html"], &program.argv);
    assert_perfetto_shows(&lines["perfetto"], &program.argv);
    assert_otlp_shows(&lines["otlp"], &program.argv);
}

/// 100,000 arguments: the first 32 KiB of them, each byte exact.
#[test]
fn a_hundred_thousand_arguments_keep_an_exact_prefix() {
    let cmd = [
        workload("hostile").into_os_string(),
        "--many".into(),
        "100000".into(),
        "/usr/bin/true".into(),
    ];
    let run = record(Mode::Ring, &cmd);
    let (_, program) = both_execs(&run);
    let mut full = vec!["/usr/bin/true".to_string()];
    full.extend((0..100_000).map(|i| format!("a{i}")));
    assert!(program.argv_truncated, "{}", run.text);
    assert_kept_prefix(&program.argv, &full);
    assert!(program.argv.len() > 3000);
    render_every_mode(&run);
}

/// An argument as long as Linux allows (128 KiB), of hostile bytes: its
/// first 32 KiB, exact, in the exec of `hostile` and of the program.
#[test]
fn a_huge_argument_keeps_an_exact_prefix() {
    let piece = b"\xff</script>\x1b[2J\n:#;";
    // MAX_ARG_STRLEN is 128 KiB, the NUL included.
    let huge = piece.repeat((128 * 1024 - 1) / piece.len());
    let cmd = [
        workload("hostile").into_os_string(),
        "/usr/bin/true".into(),
        "true".into(),
        os(&huge),
    ];
    let run = record(Mode::Ring, &cmd);
    let (workload, program) = both_execs(&run);
    let cmd_bytes: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
    assert!(workload.argv_truncated && program.argv_truncated);
    assert_kept_prefix(&workload.argv_bytes(), &cmd_bytes);
    assert_kept_prefix(&program.argv_bytes(), &[&b"true"[..], &huge]);
    render_every_mode(&run);
}

/// `cmdline` is a shell line that gives back argv byte for byte.
#[test]
fn cmdline_read_by_bash_is_argv_exactly() {
    let words = hostile_words();
    let line = shell_join(&words);
    assert!(!line.contains(|c: char| c.is_control()), "{line:?}");
    let printed = Command::new("bash")
        .arg("-c")
        .arg(format!(r"printf '%s\0' {line}"))
        .output()
        .expect("running bash");
    assert!(printed.status.success());
    let expected: Vec<u8> = words
        .iter()
        .flat_map(|w| [&w[..], b"\0"].concat())
        .collect();
    assert_eq!(printed.stdout, expected);
}

/// Renders the recording of `run` in every mode and checks each output
/// is whole and safe; returns the outputs by mode.
fn render_every_mode(run: &Run) -> std::collections::HashMap<&'static str, String> {
    let input = run.dir.path().join("rec.ndjson");
    assert_terminal_safe("the recording", &run.text);
    let mut outputs = std::collections::HashMap::new();
    let snapshots = run.records.iter().any(|r| matches!(r, Record::Snapshot(_)));
    for mode in MODES {
        let out = run.dir.path().join(format!("out.{mode}"));
        if mode == "hang" && !snapshots {
            // A view of nothing: refused, whatever the arguments hold.
            let args = ["render", "-i", input.to_str().unwrap(), "-d", mode];
            assert_eq!(proctrace(&args).status.code(), Some(2));
            continue;
        }
        render(&input, mode, &out);
        let bytes = std::fs::read(&out).unwrap();
        let text = String::from_utf8(bytes).unwrap_or_else(|e| panic!("{mode}: not UTF-8: {e}"));
        match mode {
            "sequential" => {
                assert_eq!(parse_lines(&text), run.records);
                assert_terminal_safe(mode, &text);
            }
            "by-process" => assert_by_process(&text),
            "mermaid" => assert_mermaid(&text, &out),
            "html" => assert_markup_is_own(mode, &text),
            "folded" => assert_folded(&text),
            "flamegraph" => assert_svg(&text, &out),
            "markdown" => assert_markdown(&text),
            "otlp" => assert_otlp(&text, &out),
            "perfetto" => {
                let _: serde_json::Value = serde_json::from_str(&text).expect("perfetto JSON");
            }
            _ => assert_terminal_safe(mode, &text),
        }
        outputs.insert(mode, text);
    }
    outputs
}

/// Text for a terminal (JSON lines too: they are printed to one) holds no
/// character a terminal would act on, but the newlines that end lines.
fn assert_terminal_safe(what: &str, text: &str) {
    if let Some((n, line)) = (text.lines().enumerate()).find(|(_, l)| l.contains(terminal_unsafe)) {
        panic!("{what}: line {} holds a control character: {line:?}", n + 1);
    }
}

/// Every line is one stack of non-empty frames and a count.
pub fn assert_folded(text: &str) {
    assert_terminal_safe("folded", text);
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("stack and count");
        count
            .parse::<u64>()
            .unwrap_or_else(|e| panic!("folded: count {count:?}: {e}"));
        assert!(
            stack.split(';').all(|frame| !frame.is_empty()),
            "folded: empty frame in {line:?}"
        );
    }
}

/// Headings are one-liners, every other line a record.
fn assert_by_process(text: &str) {
    assert_terminal_safe("by-process", text);
    for line in text.lines().filter(|l| !l.is_empty()) {
        if line.starts_with('{') {
            serde_json::from_str::<Record>(line)
                .unwrap_or_else(|e| panic!("by-process: not a record ({e}): {line}"));
        } else {
            assert!(line.starts_with("PID "), "by-process: stray line {line:?}");
        }
    }
}

/// Every line is a statement of the chart: its tasks' names hold nothing
/// Mermaid would read as syntax; Mermaid itself renders it, as text.
fn assert_mermaid(text: &str, chart: &Path) {
    assert_terminal_safe("mermaid", text);
    assert!(!text.contains('`'), "a line could close a Markdown fence");
    for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
        let statement = line.strip_prefix("    ").expect("indented statement");
        let name = match statement.split_once(' ') {
            Some(("title" | "section", name)) => name,
            Some(("dateFormat" | "axisFormat" | "todayMarker", _)) => continue,
            _ => statement.rsplit_once(" :").expect("a task").0,
        };
        let bare = strip_entities(name);
        assert!(
            !bare.contains([':', ';', '#', '%']),
            "mermaid: unescaped syntax in {name:?}"
        );
    }
    if !have_mermaid() {
        return;
    }
    let svg = mermaid_svg(chart);
    assert!(
        !svg.contains("<script") && !svg.contains("<img"),
        "markup got into the SVG"
    );
    assert!(
        unescape_xml(&svg).contains("<script>alert(1)</script>")
            || !text.contains("<script>alert(1)</script>"),
        "the chart's text is not shown as text"
    );
}

/// `name` without Mermaid's `#<decimal>;` escapes.
fn strip_entities(name: &str) -> String {
    let mut bare = String::new();
    let mut rest = name;
    while let Some(at) = rest.find('#') {
        bare.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && after[digits..].starts_with(';') {
            rest = &after[digits + 1..];
        } else {
            bare.push('#');
            rest = after;
        }
    }
    bare + rest
}

/// A page (`html`, `flamegraph`) whose markup is only its own: as many
/// scripts, comments and images as in the page of a benign recording.
fn assert_markup_is_own(mode: &str, page: &str) {
    let dir = tempfile::tempdir().unwrap();
    let benign_path = dir.path().join("benign");
    let sample = repo().join("tests/data/kernel-matrix-6.1-ring.ndjson");
    render(&sample, mode, &benign_path);
    let benign = std::fs::read_to_string(benign_path).unwrap();
    let count = |text: &str, what: &str| text.to_ascii_lowercase().matches(what).count();
    for tag in ["<script", "</script", "<!--", "<img", "<b>"] {
        assert_eq!(
            count(page, tag),
            count(&benign, tag),
            "{mode}: {tag} injected"
        );
    }
}

/// A well-formed SVG with no markup but its own.
fn assert_svg(svg: &str, path: &Path) {
    let parsed = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])",
        ])
        .arg(path)
        .output()
        .expect("running python3");
    assert!(
        parsed.status.success(),
        "flamegraph: not well-formed XML: {}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    assert_markup_is_own("flamegraph", svg);
}

/// The report's data, parsed as the page's script parses it.
fn report_data(page: &str) -> serde_json::Value {
    let start = page.find(r#"id="report-data">"#).expect("data element") + 17;
    let len = page[start..].find("</script>").expect("data element's end");
    serde_json::from_str(&page[start..start + len]).expect("report data is JSON")
}

fn assert_html_shows(page: &str, argv: &[String]) {
    let data = report_data(page);
    let shown = data["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["execs"].as_array().unwrap())
        .any(|e| e["argv"] == serde_json::json!(argv));
    assert!(shown, "html: the data lacks the exact argv");
}

/// Every line is one JSON request, safe on a terminal like every JSON
/// line proctrace writes, that the OTLP schema reads.
fn assert_otlp(text: &str, export: &Path) {
    assert_terminal_safe("otlp", text);
    for line in text.lines() {
        let request: serde_json::Value = serde_json::from_str(line).expect("otlp: JSON lines");
        assert!(request["resourceSpans"].is_array(), "otlp: {line}");
    }
    if have_otlp_schema() {
        otlp_schema_spans(export);
    }
}

/// Some span's exec event has the exact argv, as OTLP strings.
fn assert_otlp_shows(text: &str, argv: &[String]) {
    let values: Vec<serde_json::Value> = argv
        .iter()
        .map(|a| serde_json::json!({ "stringValue": a }))
        .collect();
    let shown = text.lines().any(|line| {
        let request: serde_json::Value = serde_json::from_str(line).unwrap();
        let spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array();
        let events = spans
            .into_iter()
            .flatten()
            .flat_map(|s| s["events"].as_array());
        let attributes = events.flatten().flat_map(|e| e["attributes"].as_array());
        attributes.flatten().any(|a| {
            a["key"] == "process.command_args"
                && a["value"]["arrayValue"]["values"] == serde_json::json!(values)
        })
    });
    assert!(shown, "otlp: no exec event has the exact argv");
}

fn assert_perfetto_shows(trace: &str, argv: &[String]) {
    let trace: serde_json::Value = serde_json::from_str(trace).unwrap();
    let shown = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["args"]["argv"] == serde_json::json!(argv));
    assert!(shown, "perfetto: no slice has the exact argv");
}

//! The Mermaid chart as Mermaid itself sees it: `proctrace render -d
//! mermaid` fed to the real mermaid-cli, whose SVG must show every task
//! label with its colons, '#' and ';' intact.

use crate::common::*;

#[test]
fn mermaid_cli_renders_every_label() {
    if !have_mermaid() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("chart.mmd");
    render(&repo().join("tests/data/demo.ndjson"), "mermaid", &chart);
    let text = unescape_xml(&mermaid_svg(&chart));
    for label in [
        "[1000] bash demo.sh",
        "[1000] <store>/bin/hello --greeting=x:y",
        "[1001] sleep 0.2",
        "[1002] <fork> bash demo.sh",
        "[1003] sh -c 'echo a:b # c; exit 1'",
        "[1004] curl -w '%{http_code}' 'http://localhost:8080/#top'",
    ] {
        assert!(text.contains(label), "the SVG lacks the task {label:?}");
    }
}

#[test]
fn xml_escapes_are_undone() {
    assert_eq!(unescape_xml("a&#58;b &lt;fork&gt; &#x23;"), "a:b <fork> #");
    assert_eq!(unescape_xml("&amp;amp;"), "&amp;");
    assert_eq!(unescape_xml("a & b"), "a & b");
}

/// A build of 2,000 processes: its repeated jobs fold into one task, and
/// the chart stays within what Mermaid renders by default; mermaid-cli
/// draws it.
#[test]
fn repeated_siblings_fold_and_a_big_tree_fits() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.ndjson");
    big_recording(&input, 2000);
    let chart = dir.path().join("chart.mmd");
    render(&input, "mermaid", &chart);
    let text = std::fs::read_to_string(&chart).unwrap();
    assert!(text.chars().count() <= 50_000, "{} characters", text.len());
    assert!(text.starts_with("gantt\n"), "{}", &text[..200]);
    // The 223 shells under make fold into one task (their scripts fold
    // word by word: `job 17` is `job N`), and what they started with them.
    let folded = "    [223 processes] sh -c job N :";
    assert!(text.contains(folded), "{text:.2000}");
    assert_eq!(text.matches("section").count(), 2, "{text:.2000}");
    if have_mermaid() {
        let svg = unescape_xml(&mermaid_svg(&chart));
        assert!(svg.contains("[223 processes] sh -c job N"), "not drawn");
    }
}

/// A chart longer than Mermaid's default limit says so on its first line,
/// with the setting that renders it.
#[test]
fn a_chart_past_mermaids_limit_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("wide.ndjson");
    let mut rec = Synthetic::new(1000, &["sh", "run"]);
    rec.exec(1000, 999, 1000, &["sh", "run"], 0);
    // Each child a program of its own name: nothing folds.
    let name = |i: usize| -> String {
        let letters: String = i
            .to_string()
            .bytes()
            .map(|d| char::from(b'a' + d - b'0'))
            .collect();
        format!("tool-{letters}-{}", "x".repeat(60))
    };
    for i in 0..800 {
        let pid = 1001 + i as i32;
        rec.fork(1000, pid, 1000, 1_000);
        rec.exec(pid, 1000, 1000, &[name(i).as_str()], 1_000);
        rec.exit(pid, 1000, 1000, 0, 1_000);
    }
    rec.exit(1000, 999, 1000, 0, 1_000);
    rec.write(&input);
    let chart = dir.path().join("chart.mmd");
    render(&input, "mermaid", &chart);
    let text = std::fs::read_to_string(&chart).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let length = rest.chars().count();
    assert!(length > 50_000, "{length}");
    assert_eq!(
        first,
        format!(
            "%% {length} characters, more than Mermaid's default maxTextSize of 50000: \
             render with {{\"maxTextSize\": {length}}} in its configuration (mmdc -c)"
        )
    );
}

//! The Mermaid chart as Mermaid itself sees it: `proctrace render -d
//! mermaid` fed to the real mermaid-cli, whose SVG must show every task
//! label with its colons, '#' and ';' intact.

use crate::common::*;

#[test]
fn mermaid_cli_renders_every_label() {
    if !mermaid_set_up() {
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
        "[1002] <fork>",
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

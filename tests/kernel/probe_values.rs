//! What a probe's hits keep and the filter the kernel applies to them
//! (`--probe 'SPEC keep VALUES if FILTER'`): a C program that calls
//! malloc, read and open with arguments known in advance, counted
//! exactly, by tuple and by power of two, per test too.

use std::collections::BTreeMap;

use proctrace::event::{ArgValue, ProbeHistogram};

use crate::common::*;
use crate::cpu_profile::refused;
use crate::probes::profile_of;

/// Rounds of tests/workloads/strings.c: a multiple of 20, so that each
/// of its 20 malloc sizes comes N / 20 times.
const N: i64 = 200;

/// Records `command` with one `--probe` per spec: no hit lost.
pub(crate) fn record_probes(specs: &[&str], command: &[&str]) -> Run {
    let mut opts = Opts::new(Mode::Ring);
    opts.args = specs
        .iter()
        .flat_map(|spec| ["--probe".to_owned(), spec.to_string()])
        .collect();
    let run = record_with(&opts, command);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(run.trailer().lost_probe_hits, 0);
    run
}

/// Probe `id`'s hits with each tuple of kept values.
fn tuples(run: &Run, id: u32) -> BTreeMap<Vec<ArgValue>, u64> {
    let profile = profile_of(run);
    let mut tuples = BTreeMap::new();
    for args in profile.probe_args.iter().filter(|a| a.probe == id) {
        *tuples.entry(args.args.clone()).or_default() += args.count;
    }
    tuples
}

/// Probe `id`'s histogram of its value `value`, over every process.
fn histogram(run: &Run, id: u32, value: u32) -> BTreeMap<i64, u64> {
    let profile = profile_of(run);
    let lines = profile.probe_histograms.iter();
    let lines = lines.filter(|h: &&ProbeHistogram| h.probe == id && h.value == value);
    let mut merged = BTreeMap::new();
    for (bucket, n) in lines.flat_map(|h| h.buckets.iter()) {
        *merged.entry(*bucket).or_default() += n;
    }
    merged
}

fn numbers(values: &[i64]) -> Vec<ArgValue> {
    values.iter().map(|&n| ArgValue::Number(n)).collect()
}

#[test]
fn a_filter_in_the_kernel_keeps_only_the_hits_that_pass() {
    let program = workload("strings");
    let program = program.to_str().unwrap();
    let run = record_probes(
        &[
            "uprobe:libc:malloc keep arg0 if arg0 >= 65536",
            "uretprobe:libc:read keep retval if retval < 0",
            "uretprobe:libc:read if retval == 8 && retval != 0",
        ],
        &[program, &N.to_string()],
    );
    // malloc's sizes from 64 KiB: 2^16 to 2^19, N / 20 times each; the C
    // library's own start-up asks for none that large.
    let large: BTreeMap<Vec<ArgValue>, u64> = (16..20)
        .map(|shift| (numbers(&[1 << shift]), (N / 20) as u64))
        .collect();
    assert_eq!(tuples(&run, 0), large);
    let powers: BTreeMap<i64, u64> = (16..20).map(|s| (1 << s, (N / 20) as u64)).collect();
    assert_eq!(histogram(&run, 0, 0), powers);
    // read of fd -1: N failures, -1 each; and N reads of 8 bytes, kept
    // by a filter of two conditions, with nothing kept but the count.
    assert_eq!(
        tuples(&run, 1),
        BTreeMap::from([(numbers(&[-1]), N as u64)])
    );
    assert_eq!(histogram(&run, 1, 0), BTreeMap::from([(-1, N as u64)]));
    let profile = profile_of(&run);
    let eights: u64 = profile
        .probe_hits
        .iter()
        .filter(|h| h.probe == 2)
        .map(|h| h.count)
        .sum();
    assert_eq!(eights, N as u64);
    assert!(tuples(&run, 2).is_empty());
    let header = &run.header().probes;
    assert_eq!(header[0].values, ["arg0"]);
    assert_eq!(header[0].filter.as_deref(), Some("arg0 >= 65536"));
    assert_eq!(
        header[2].filter.as_deref(),
        Some("retval == 8 && retval != 0")
    );
}

#[test]
fn a_kept_pointer_is_read_as_the_string_it_points_to() {
    let program = workload("strings");
    let program = program.to_str().unwrap();
    let run = record_probes(
        &["uprobe:libc:open keep str(arg0), (int32)arg1"],
        &[program, &N.to_string()],
    );
    // O_RDONLY | O_CLOEXEC on x86-64 and arm64 alike.
    let cloexec = 0o2000000;
    let expected = BTreeMap::from([
        (
            vec![ArgValue::Text("/dev/null".into()), ArgValue::Number(0)],
            N as u64,
        ),
        (
            vec![
                ArgValue::Text("/dev/zero".into()),
                ArgValue::Number(cloexec),
            ],
            1,
        ),
    ]);
    assert_eq!(tuples(&run, 0), expected);
    // Only the number has a histogram: value 1, the flags.
    assert_eq!(
        histogram(&run, 0, 1),
        BTreeMap::from([(0, N as u64), (cloexec, 1)])
    );
    assert!(histogram(&run, 0, 0).is_empty());
}

#[test]
fn histograms_are_split_by_test_in_the_probes_view() {
    let program = workload("strings");
    let program = program.to_str().unwrap();
    let script = format!(
        "PYTEST_CURRENT_TEST='t.py::test_a (call)' {program} 20; \
         PYTEST_CURRENT_TEST='t.py::test_b (call)' {program} 40"
    );
    let run = record_probes(
        &["uprobe:libc:malloc keep arg0 if arg0 >= 262144"],
        &["sh", "-c", &script],
    );
    let text = crate::hang::render_as(&run.dir.path().join("rec.ndjson"), "probes");
    let bar = "█".repeat(40);
    for line in [
        "  arg0 (6 hits):\n".to_owned(),
        format!("    [256K, 512K)          3 {bar}\n"),
        format!("      [512K, 1M)          3 {bar}\n"),
        "  arg0 by test (2 of 2):\n".to_owned(),
        format!(
            "    {:>10}  t.py::test_b  [256K, 512K) 2, [512K, 1M) 2\n",
            4
        ),
        format!(
            "    {:>10}  t.py::test_a  [256K, 512K) 1, [512K, 1M) 1\n",
            2
        ),
    ] {
        assert!(text.contains(&line), "{line:?} not in:\n{text}");
    }
}

#[test]
fn bad_values_and_filters_are_one_clear_line() {
    for (spec, says) in [
        (
            "uretprobe:libc:malloc keep arg0",
            "a uretprobe has the function's return value, retval, not \"arg0\"",
        ),
        (
            "uprobe:libc:malloc if arg6 > 1",
            "a uprobe has the function's arguments arg0 to arg5, not \"arg6\"",
        ),
        ("uprobe:libc:malloc if arg0 >> 1", "\"> 1\" is not a number"),
        ("uprobe:libc:malloc if str(arg0) == 1", "compares numbers"),
        (
            "uprobe:libc:open keep str(arg0), str(arg1), str(arg2), str(arg3)",
            "at most 3 strings",
        ),
    ] {
        let (code, stderr) = refused(&["--probe", spec]);
        assert_eq!(code, Some(2), "{spec}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{spec}: one line:\n{stderr}");
        assert!(stderr.contains(says), "{spec}: {stderr}");
        assert!(stderr.contains(&format!("{spec:?}")), "{stderr}");
    }
}

//! Probes of the kernel (`record --probe tracepoint:…`): counted per
//! process and per test with the kernel and user stacks, their fields
//! read by name from the kernel's format, checked against perf's own
//! count of the same tracepoint and against programs whose calls are
//! known, in a pytest suite too.

use std::collections::BTreeMap;
use std::process::Command;

use proctrace::event::{ArgValue, Record};

use crate::common::*;
use crate::cpu_profile::refused;
use crate::probe_values::record_probes;
use crate::probes::profile_of;

/// Probe `id`'s hits in all, and by the tuple of values they kept, per
/// test (`None`: outside any).
fn by_test(run: &Run, id: u32) -> BTreeMap<(Option<String>, Vec<ArgValue>), u64> {
    let profile = profile_of(run);
    let mut tuples = BTreeMap::new();
    for args in profile.probe_args.iter().filter(|a| a.probe == id) {
        *tuples
            .entry((args.test.clone(), args.args.clone()))
            .or_default() += args.count;
    }
    tuples
}

/// The count `perf stat -x,` wrote to `file` for `event`.
fn perf_count(file: &std::path::Path, event: &str) -> u64 {
    let stat = std::fs::read_to_string(file).unwrap();
    let line = stat
        .lines()
        .find(|l| l.contains(event))
        .unwrap_or_else(|| panic!("{stat}"));
    line.split(',').next().unwrap().trim().parse().unwrap()
}

/// perf counts the same tracepoint in the same program while proctrace
/// records it: the two counts agree, and proctrace's program hides none
/// of the events from perf's.
#[test]
fn a_tracepoints_hits_are_perfs_count() {
    if !prerequisite(
        Command::new("perf").arg("--version").output().is_ok(),
        "perf",
    ) {
        return;
    }
    let program = workload("strings");
    let program = program.to_str().unwrap();
    let stat = tempfile::NamedTempFile::new().unwrap();
    let event = "syscalls:sys_enter_openat";
    let stat_path = stat.path().to_str().unwrap();
    let command = ["perf", "stat", "-x,", "-o", stat_path, "-e", event, "--"];
    let command: Vec<&str> = command.into_iter().chain([program, "70"]).collect();
    let run = record_probes(
        &["tracepoint:syscalls:sys_enter_openat keep str(filename)"],
        &command,
    );
    let perf = perf_count(stat.path(), event);
    let measured = run.child_with_argv(run.root(), &[program, "70"]);
    let profile = profile_of(&run);
    let hits = profile.probe_hits.iter().filter(|h| h.pid == measured);
    assert_eq!(hits.map(|h| h.count).sum::<u64>(), perf);
    // The loader's own (more under cargo's LD_LIBRARY_PATH), then 70 of
    // /dev/null and one of /dev/zero.
    let opened = |name: &str| -> u64 {
        let args = profile.probe_args.iter().filter(|a| a.pid == measured);
        let named = args.filter(|a| a.args == [ArgValue::Text(name.into())]);
        named.map(|a| a.count).sum()
    };
    assert_eq!((opened("/dev/null"), opened("/dev/zero")), (70, 1));
    assert!(perf >= 71, "{perf}");
}

#[test]
fn fields_are_read_by_name_as_numbers_and_text() {
    let program = workload("strings");
    let program = program.to_str().unwrap();
    let run = record_probes(
        &[
            "tracepoint:syscalls:sys_enter_openat keep str(filename), dfd if dfd == -100",
            "tracepoint:syscalls:sys_exit_read keep ret if ret < 0",
            "tracepoint:sched:sched_process_exec keep filename",
        ],
        &[
            "/bin/sh",
            "-c",
            &format!("/bin/true; /bin/true; {program} 40"),
        ],
    );
    let text = |s: &str| ArgValue::Text(s.into());
    let opens = by_test(&run, 0);
    let count = |name: &str| opens.get(&(None, vec![text(name), ArgValue::Number(-100)]));
    assert_eq!(
        (count("/dev/null"), count("/dev/zero")),
        (Some(&40), Some(&1))
    );
    // read(-1, …) fails with EBADF, 40 times; no other read fails.
    let reads = by_test(&run, 1);
    assert_eq!(
        reads,
        BTreeMap::from([((None, vec![ArgValue::Number(-9)]), 40)])
    );
    let execs: BTreeMap<Vec<ArgValue>, u64> = by_test(&run, 2)
        .into_iter()
        .map(|((_, args), n)| (args, n))
        .collect();
    assert_eq!(
        execs,
        BTreeMap::from([
            (vec![text("/bin/sh")], 1),
            (vec![text("/bin/true")], 2),
            // Kept text is cut at 63 bytes (docs/guide.md): a checkout's
            // path may be longer.
            (vec![text(&program[..program.len().min(63)])], 1),
        ])
    );
    // Each hit's stacks: the kernel's, then the program's through the
    // function that made the syscall.
    let folded = crate::hang::render_as(&run.dir.path().join("rec.ndjson"), "probe-folded");
    let line = folded
        .lines()
        .find(|l| l.contains(";opens;") && l.contains("sys_enter_openat"))
        .unwrap_or_else(|| panic!("{folded}"));
    assert!(
        line.ends_with(";tracepoint:syscalls:sys_enter_openat 40"),
        "{line}"
    );
    assert!(
        line.contains(";main;opens;") && line.contains("_[k];"),
        "{line}"
    );
}

/// A test that opens FILES files of known names, and one that opens
/// none of them.
const SUITE: &str = r#"
import os

def test_opens(tmp_path):
    os.chdir(tmp_path)
    for i in range(int(os.environ["FILES"])):
        open(f"known_{i}.txt", "w").close()

def test_none(tmp_path):
    os.chdir(tmp_path)
"#;

#[test]
fn openat_of_known_files_is_counted_in_the_test_that_opened_them() {
    if !have_tool("pytest-3") {
        return;
    }
    let suite = tempfile::tempdir().unwrap();
    let file = suite.path().join("test_files.py");
    std::fs::write(&file, SUITE).unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.env = vec![("FILES".into(), "17".into())];
    opts.args = strings(&[
        "--probe",
        "tracepoint:syscalls:sys_enter_openat keep str(filename)",
    ]);
    let run = record_with(&opts, &pytest(suite.path(), &file));
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let mut known: BTreeMap<Option<String>, BTreeMap<String, u64>> = BTreeMap::new();
    for ((test, args), n) in by_test(&run, 0) {
        if let [ArgValue::Text(name)] = &args[..] {
            if name.starts_with("known_") {
                *known
                    .entry(test)
                    .or_default()
                    .entry(name.clone())
                    .or_default() += n;
            }
        }
    }
    let expected: BTreeMap<String, u64> = (0..17).map(|i| (format!("known_{i}.txt"), 1)).collect();
    assert_eq!(
        known,
        BTreeMap::from([(Some("test_files.py::test_opens".to_owned()), expected)])
    );
}

/// Where tracefs is not mounted, as at this machine's boot, the recorder
/// mounts it where only a thread of its own sees it: the tracepoint is
/// counted, and the mounts it leaves are those it found.
#[test]
fn tracefs_is_mounted_for_the_recorder_alone_where_it_is_not() {
    if !have_tool("unshare") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.ndjson");
    // In a mount namespace of the test's own, without tracefs.
    // Every tracefs and debugfs, wherever it is (a chroot's /sys too),
    // deepest first; lazily, so a mount below one never keeps it.
    let script = r#"awk '$3 == "tracefs" || $3 == "debugfs" { print $2 }' /proc/self/mounts |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
grep -qw tracefs /proc/self/mounts && exit 97
"$0" record -o "$1" --probe 'tracepoint:sched:sched_process_exec keep filename' -- /bin/true || exit
grep -qw tracefs /proc/self/mounts && exit 98
exit 0"#;
    let recorded = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .arg(recorder_bin())
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&recorded.stderr);
    assert_eq!(recorded.status.code(), Some(0), "{stderr}");
    let execs: Vec<(Vec<ArgValue>, u64)> = read_records(&out)
        .into_iter()
        .filter_map(|r| match r {
            Record::ProbeArgs(a) => Some((a.args, a.count)),
            _ => None,
        })
        .collect();
    assert_eq!(execs, [(vec![ArgValue::Text("/bin/true".into())], 1)]);
}

#[test]
fn bad_tracepoints_are_one_clear_line() {
    for (spec, says) in [
        (
            "tracepoint:nope:nothing",
            "this kernel has no tracepoint \"nope:nothing\"",
        ),
        ("tracepoint:syscalls", "expected CATEGORY:NAME"),
        (
            "tracepoint:syscalls:sys_enter_openat keep nofield",
            "syscalls:sys_enter_openat has no field \"nofield\": its fields are __syscall_nr, dfd, filename, flags, mode",
        ),
        (
            "tracepoint:syscalls:sys_enter_openat keep common_pid",
            "common_pid is one of the fields every record starts with",
        ),
        (
            "tracepoint:sched:sched_process_exec if filename == 1",
            "filename is text: a filter compares numbers",
        ),
        ("kprobe:no_such_function_here", "this kernel has no function \"no_such_function_here\""),
        ("fentry:vfs_read+4", "no +OFFSET"),
    ] {
        let (code, stderr) = refused(&["--probe", spec]);
        assert_eq!(code, Some(2), "{spec}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{spec}: one line:\n{stderr}");
        assert!(stderr.contains(says), "{spec}: {stderr}");
        assert!(stderr.contains(&format!("{spec:?}")), "{stderr}");
    }
}

/// exec's security check, once for the command's exec: counted with its
/// return value where the kernel attaches kprobes (or BPF trampolines),
/// else refused in one line that says why and what to use. (This
/// machine's kernel has neither; the qemu matrix's kernels have both,
/// and scripts/kernel-matrix checks their counts.)
#[test]
fn kernel_functions_are_counted_or_refused_in_one_line() {
    require_root();
    let kprobes = std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists();
    for (entry, exit, why) in [
        (
            "kprobe",
            "kretprobe",
            "this kernel has no kprobes (built without CONFIG_KPROBES",
        ),
        (
            "fentry",
            "fexit",
            "this kernel does not load BPF trampoline programs",
        ),
    ] {
        let specs = [
            format!("{entry}:security_bprm_check"),
            format!("{exit}:security_bprm_check keep retval"),
        ];
        let args = ["--probe", &specs[0], "--probe", &specs[1]];
        let refusal = match entry {
            "kprobe" => (!kprobes).then_some(why),
            _ => None,
        };
        let (code, stderr) = refused(&args);
        if code == Some(0) && refusal.is_none() {
            let run = record_probes(&[&specs[0], &specs[1]], &["/bin/true"]);
            let returns: Vec<(Vec<ArgValue>, u64)> = profile_of(&run)
                .probe_args
                .iter()
                .filter(|a| a.probe == 1)
                .map(|a| (a.args.clone(), a.count))
                .collect();
            assert_eq!(returns, [(vec![ArgValue::Number(0)], 1)], "{entry}");
            continue;
        }
        assert_eq!(code, Some(2), "{entry}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{entry}: one line:\n{stderr}");
        assert!(stderr.contains(&format!("{:?}", specs[0])), "{stderr}");
        let expected = refusal.map_or(
            vec![why, "bpf_get_func_arg", "attach through a program each"],
            |why| vec![why],
        );
        assert!(
            expected.iter().any(|w| stderr.contains(w)),
            "{entry}: {stderr}"
        );
    }
}

/// `proctrace probes` takes a spec of the kernel's, as `bpftrace -l`
/// does: the tracepoints it names with the fields a spec can keep, or the
/// kernel functions; status 1 and a line where it names none.
#[test]
fn kernel_probes_are_listed_as_specs() {
    require_root();
    let listed = |spec: &str| {
        let out = Command::new(recorder_bin())
            .args(["probes", spec])
            .output()
            .unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (code, stdout, _) = listed("tracepoint:syscalls:sys_enter_openat");
    assert_eq!(code, Some(0));
    assert_eq!(
        stdout,
        "tracepoint:syscalls:sys_enter_openat  __syscall_nr, dfd, filename, flags, mode\n"
    );
    let (code, stdout, _) = listed("kprobe:security_bprm_chec?");
    assert_eq!(
        (code, stdout.as_str()),
        (Some(0), "kprobe:security_bprm_check\n")
    );
    let (code, stdout, stderr) = listed("tracepoint:nope:*");
    assert_eq!((code, stdout.as_str()), (Some(1), ""));
    assert_eq!(
        stderr,
        "proctrace: this kernel has nothing \"tracepoint:nope:*\" names\n"
    );
}

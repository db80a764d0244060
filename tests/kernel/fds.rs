//! The descriptors each program starts with, read in the kernel at exec.

use crate::common::*;
use proctrace::event::{Exec, FdKind};

fn exec_of<'a>(execs: &[&'a Exec], program: &str) -> &'a Exec {
    execs
        .iter()
        .find(|e| e.argv[0] == program)
        .unwrap_or_else(|| panic!("no exec of {program}"))
}

#[test]
fn each_program_records_what_it_inherits() {
    // fd 3 survives exec, fd 4 is close-on-exec; two cats share a pipe.
    let run = record(
        Mode::Ring,
        &[
            "sh",
            "-c",
            "exec 3</etc/hostname; exec 4</etc/hostname; cat /etc/hostname 4<&- | wc -c >/dev/null",
        ],
    );
    let execs = run.all_execs();
    let cat = exec_of(&execs, "cat");
    let wc = exec_of(&execs, "wc");
    let fd = |exec: &Exec, n: i32| exec.fds.iter().find(|f| f.fd == n).cloned();
    let hostname = fd(cat, 3).expect("cat inherits fd 3");
    assert_eq!(
        (hostname.kind, hostname.target.as_str()),
        (FdKind::File, "/etc/hostname")
    );
    assert_eq!(fd(cat, 4), None, "fd 4 was closed for cat");
    let (out, inp) = (fd(cat, 1).unwrap(), fd(wc, 0).unwrap());
    assert_eq!(out.kind, FdKind::Pipe);
    assert!(
        out.same_file(&inp),
        "cat's stdout is wc's stdin: {out:?} {inp:?}"
    );
    assert_eq!(out.target, format!("pipe:[{}]", out.ino));
    let null = fd(wc, 1).unwrap();
    assert_eq!(
        (null.kind, null.target.as_str()),
        (FdKind::Device, "/dev/null")
    );
}

/// In a chroot a path reads as the program sees it, the way
/// /proc/PID/fd shows it: the walk up stops at the process's root.
#[test]
fn paths_in_a_chroot_are_the_ones_it_sees() {
    if !have_tool("busybox") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("bin")).unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    // Copied, not linked: the chroot sees nothing outside it.
    let busybox = tool_path("busybox").unwrap();
    std::fs::copy(&busybox, root.path().join("bin/busybox")).unwrap();
    std::fs::write(root.path().join("etc/data"), "x").unwrap();
    let run = record(
        Mode::Ring,
        &[
            "chroot",
            root.path().to_str().unwrap(),
            "/bin/busybox",
            "sh",
            "-c",
            "exec 3</etc/data 4</; /bin/busybox true",
        ],
    );
    let execs = run.all_execs();
    let inner = exec_of(&execs, "/bin/busybox");
    let last = execs
        .iter()
        .rfind(|e| e.argv == ["/bin/busybox", "true"])
        .expect("the chroot's true");
    assert_eq!(inner.filename, "/bin/busybox");
    let fd = |n: i32| last.fds.iter().find(|f| f.fd == n).cloned().unwrap();
    assert_eq!(
        (fd(3).kind, fd(3).target.as_str()),
        (FdKind::File, "/etc/data")
    );
    assert_eq!((fd(4).kind, fd(4).target.as_str()), (FdKind::Dir, "/"));
}

/// A file held on several fds (dup'ed, or the same name opened again) is
/// walked once and named on each; the paths between keep their places,
/// and a path cut short is cut short on each fd that holds it.
#[test]
fn a_file_on_several_fds_is_named_on_each() {
    let dir = tempfile::tempdir().unwrap();
    let deep = (0..20).fold(dir.path().to_owned(), |path, i| path.join(format!("d{i}")));
    std::fs::create_dir_all(&deep).unwrap();
    let deep = deep.join("f");
    std::fs::write(&deep, "x").unwrap();
    let script = format!(
        "exec 3</etc/hostname 4</dev/null 5<&3 6</etc/passwd 7</etc/hostname 8>/dev/null \
         9<'{deep}' 10<'{deep}'; exec cat /dev/null",
        deep = deep.display()
    );
    let run = record(Mode::Ring, &["bash", "-c", &script]);
    let cat = exec_of(&run.all_execs(), "cat");
    let target = |n: i32| match cat.fds.iter().find(|f| f.fd == n) {
        Some(fd) => fd.target.clone(),
        None => panic!("no fd {n}: {:?}", cat.fds),
    };
    for (n, path) in [
        (3, "/etc/hostname"),
        (4, "/dev/null"),
        (5, "/etc/hostname"),
        (6, "/etc/passwd"),
        (7, "/etc/hostname"),
        (8, "/dev/null"),
    ] {
        assert_eq!(target(n), path, "fd {n}: {:?}", cat.fds);
    }
    let cut = target(9);
    assert!(cut.starts_with(".../") && cut.ends_with("/d19/f"), "{cut}");
    assert_eq!(target(10), cut);
}

#[test]
fn no_fds_turns_it_off() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.ndjson");
    proctrace_ok(&[
        "record",
        "--no-fds",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "true",
    ]);
    let records = read_records(&out);
    let execs: Vec<_> = records
        .iter()
        .filter_map(|r| {
            if let proctrace::event::Record::Exec(e) = r {
                Some(e)
            } else {
                None
            }
        })
        .collect();
    assert!(!execs.is_empty());
    assert!(execs.iter().all(|e| e.fds.is_empty()), "{execs:?}");
}

/// Closes every fd above 2 the test inherited, so that a script's own fds
/// are the only others its programs start with.
const CLOSE_INHERITED: &str =
    "for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ $fd -gt 2 ] && eval \"exec $fd>&-\"; done; ";

/// The fds of each `cat` of a bash `script`, in order, and whether each
/// was truncated; the script opens only /etc/hostname.
fn cats_fds(script: &str) -> Vec<(Vec<i32>, bool)> {
    let run = record(
        Mode::Ring,
        &["bash", "-c", &format!("{CLOSE_INHERITED}{script}")],
    );
    let execs = run.all_execs();
    let cats: Vec<&&Exec> = execs.iter().filter(|e| e.argv[0] == "cat").collect();
    // Each fd the script opens is a file, named as such.
    for fd in cats.iter().flat_map(|e| &e.fds).filter(|f| f.fd > 2) {
        assert_eq!(
            (fd.kind, fd.target.as_str()),
            (FdKind::File, "/etc/hostname"),
            "{}",
            run.text
        );
    }
    cats.iter()
        .map(|e| (e.fds.iter().map(|f| f.fd).collect(), e.fds_truncated))
        .collect()
}

/// High fds, as bats' 251, are recorded up to fd 1023 where the kernel has
/// bpf_loop, as this one does; an open fd past that is flagged instead.
#[test]
fn fds_above_63_are_recorded_and_past_the_limit_flagged() {
    let cats = cats_fds(
        "exec 251</etc/hostname 1000</etc/hostname; cat /dev/null; \
         exec 2000</etc/hostname; cat /dev/null",
    );
    let recorded = vec![0, 1, 2, 251, 1000];
    assert_eq!(cats, [(recorded.clone(), false), (recorded, true)]);
}

/// The first 16 open fds are recorded, a high one among them; one more
/// is flagged.
#[test]
fn fds_past_the_sixteenth_are_flagged() {
    let cats = cats_fds(
        "for fd in $(seq 3 14); do eval \"exec $fd</etc/hostname\"; done; \
         exec 1000</etc/hostname; cat /dev/null; exec 1001</etc/hostname; cat /dev/null",
    );
    let recorded: Vec<i32> = (0..15).chain([1000]).collect();
    assert_eq!(cats, [(recorded.clone(), false), (recorded, true)]);
}

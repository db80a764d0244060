//! argv as read in the kernel: odd bytes, long arguments, many arguments,
//! and the 32 KiB limit.

use crate::common::*;

/// `sh -c '"$@"; exit 0' sh ARGS...`: the root shell's argv holds ARGS,
/// and its forked child execs ARGS itself.
fn via_child(args: &[String]) -> Vec<String> {
    let mut cmd = strings(&["sh", "-c", r#""$@"; exit 0"#, "sh"]);
    cmd.extend(args.iter().cloned());
    cmd
}

fn odd_arguments(mode: Mode) {
    let mut args = strings(&[
        "/usr/bin/true",
        "héllo wörld",
        "",
        "日本",
        "it's \"quoted\" $HOME *",
        "tab\there\nnewline",
    ]);
    args.push("x".repeat(6000));
    args.push(String::new());
    args.push("end".into());
    let cmd = via_child(&args);
    let run = record(mode, &cmd);
    let root = run.root();
    assert_eq!(run.argvs(root), [cmd], "{}", run.text);
    assert!(!run.execs(root)[0].argv_truncated);
    let kids = run.children(root);
    assert_eq!(kids.len(), 1, "{}", run.text);
    assert_eq!(run.argvs(kids[0]), [args.clone()]);
    let exec = run.execs(kids[0])[0];
    assert!(!exec.argv_truncated);
    assert_eq!(exec.filename, "/usr/bin/true");
    assert_eq!(exec.cmdline, proctrace::text::shell_join(&args));
    assert_eq!(run.exit(kids[0]).exit_code, Some(0));
}

per_mode!(odd_arguments:
    odd_arguments_ring => Ring,
    odd_arguments_perf => Perf,
);

/// 3000 short arguments (about 17 KiB): all of them, in order.
#[test]
fn many_arguments() {
    let mut args = strings(&["/usr/bin/true"]);
    args.extend((0..3000).map(|i| format!("a{i}")));
    let run = record(Mode::Ring, &via_child(&args));
    let kids = run.children(run.root());
    assert_eq!(kids.len(), 1);
    let exec = run.execs(kids[0])[0];
    assert!(!exec.argv_truncated);
    assert_eq!(exec.argv.len(), 3001);
    assert_eq!(exec.argv, args);
}

/// Just under the limit (about 30 KB): kept whole.
#[test]
fn under_the_limit_is_whole() {
    let mut args = strings(&["/usr/bin/true"]);
    args.extend((0..6).map(|i| char::from(b'a' + i).to_string().repeat(4999)));
    let bytes: usize = args.iter().map(|a| a.len() + 1).sum();
    assert!(bytes < ARGV_LIMIT - 1024);
    let run = record(Mode::Ring, &args);
    let exec = run.execs(run.root())[0];
    assert!(!exec.argv_truncated, "{}", run.text);
    assert_eq!(exec.argv, args);
}

/// More than 32 KiB: argv_truncated and the kept prefix intact, for the
/// root's exec and a child's.
fn over_the_limit_is_truncated(mode: Mode) {
    let mut args = strings(&["/usr/bin/true"]);
    args.extend((0..10).map(|i| char::from(b'a' + i).to_string().repeat(5000)));
    let cmd = via_child(&args);
    let run = record(mode, &cmd);
    let root = run.execs(run.root())[0];
    assert!(root.argv_truncated, "{}", run.text);
    assert_kept_prefix(&root.argv, &cmd);
    let kids = run.children(run.root());
    assert_eq!(kids.len(), 1);
    let child = run.execs(kids[0])[0];
    assert!(child.argv_truncated);
    assert_kept_prefix(&child.argv, &args);
    assert_eq!(child.filename, "/usr/bin/true");
    assert_eq!(run.exit(kids[0]).exit_code, Some(0));
}

per_mode!(over_the_limit_is_truncated:
    over_the_limit_is_truncated_ring => Ring,
    over_the_limit_is_truncated_perf => Perf,
);

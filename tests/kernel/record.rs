//! Process trees: fork/exec/exit, exit statuses, daemons, sessions and
//! groups, PID namespaces, failed execs and processes outside the tree.

use crate::common::*;
use proctrace::event::{Pid, Record, SetPgid, SetSid, SyscallHook};

/// Root script: a child exiting 3, children killed by SIGKILL and SIGTERM,
/// a child with a grandchild; the root exits 9.
const TREE: &str = r#"sh -c 'exit 3'
sh -c 'kill -KILL $$'
sh -c 'kill -TERM $$'
sh -c 'sh -c "exit 5"; exit 6'
exit 9"#;

fn known_tree(mode: Mode) {
    let run = record(mode, &["sh", "-c", TREE]);
    let root = run.root();
    assert_eq!(run.argvs(root), [strings(&["sh", "-c", TREE])]);
    assert_eq!(run.execs(root)[0].filename, "/usr/bin/sh", "{}", run.text);
    assert_eq!(run.children(root).len(), 4, "{}", run.text);

    let c3 = run.child_with_argv(root, &["sh", "-c", "exit 3"]);
    let kill9 = run.child_with_argv(root, &["sh", "-c", "kill -KILL $$"]);
    let term = run.child_with_argv(root, &["sh", "-c", "kill -TERM $$"]);
    let c6 = run.child_with_argv(root, &["sh", "-c", r#"sh -c "exit 5"; exit 6"#]);
    let c5 = run.child_with_argv(c6, &["sh", "-c", "exit 5"]);
    assert_eq!(run.children(c6), [c5]);
    assert_eq!(run.pids(), [root, c3, kill9, term, c6, c5].into());
    for pid in [c3, kill9, term, c6, c5] {
        assert!(run.children(pid).is_empty() || pid == c6, "{}", run.text);
        assert_eq!(run.kinds(pid), ["Fork", "Exec", "Exit"], "{}", run.text);
        assert_eq!(run.execs(pid).len(), 1);
    }
    let status = |pid| {
        let e = run.exit(pid);
        (e.exit_code, e.signal, e.core_dumped)
    };
    assert_eq!(status(c3), (Some(3), None, false));
    assert_eq!(status(kill9), (None, Some(9), false));
    assert_eq!(status(term), (None, Some(15), false));
    assert_eq!(status(c5), (Some(5), None, false));
    assert_eq!(status(c6), (Some(6), None, false));
    assert_eq!(status(root), (Some(9), None, false));
    // Parent links as the children see them.
    for pid in [c3, kill9, term, c6] {
        assert_eq!(run.execs(pid)[0].ppid, root);
        assert_eq!(run.exit(pid).ppid, root);
    }
    assert_eq!(run.exit(c5).ppid, c6);
    // The last event is the root's exit; counts are exact.
    assert_eq!(run.events().last().and_then(|r| r.pid()), Some(root));
    assert_eq!(run.forks().len(), 5);
    assert_eq!(run.all_execs().len(), 6);
    assert_eq!(run.all_exits().len(), 6);
    assert_eq!(run.events().len(), 17);
    let trailer = run.trailer();
    assert!(!trailer.interrupted);
    assert_eq!(
        (trailer.root_exit_code, trailer.root_signal),
        (Some(9), None)
    );
    assert_eq!(run.code(), 9);
}

per_mode!(known_tree:
    known_tree_ring => Ring,
    known_tree_perf => Perf,
    known_tree_btf_tracepoints => BtfTp,
    known_tree_btf_tracepoints_perf => BtfTpPerf,
);

#[test]
fn exit_status_passthrough() {
    for (script, code, exit_code, signal) in [
        ("exit 0", 0, Some(0), None),
        ("exit 3", 3, Some(3), None),
        ("kill -9 $$", 137, None, Some(9)),
    ] {
        let run = record(Mode::Ring, &["sh", "-c", script]);
        assert_eq!(run.code(), code, "{script}\n{}", run.text);
        let exit = run.exit(run.root());
        assert_eq!((exit.exit_code, exit.signal), (exit_code, signal));
        let trailer = run.trailer();
        assert_eq!(
            (trailer.root_exit_code, trailer.root_signal),
            (exit_code, signal)
        );
        assert_eq!(run.events().len(), 2, "{}", run.text);
    }
}

/// proctrace turns transparent huge pages off for itself (its allocator's
/// arenas cost it a zeroed 2 MiB page for each few bytes touched); the
/// command, and what it starts, get them as proctrace found them.
#[test]
fn the_command_has_huge_pages_as_proctrace_found_them() {
    let thp = |status: &str| {
        let line = status.lines().find(|l| l.starts_with("THP_enabled:"));
        line.expect("THP_enabled in /proc/PID/status").to_string()
    };
    let ours = thp(&std::fs::read_to_string("/proc/self/status").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("status");
    let script = format!("sh -c 'cat /proc/self/status' > {}", seen.display());
    let run = record(Mode::Ring, &["sh", "-c", &script]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(thp(&std::fs::read_to_string(&seen).unwrap()), ours);
}

/// The kernel's BTF is cut down once a boot and kept (in /run/proctrace)
/// for later recordings; a damaged entry is passed over and made again.
/// Every one of them records the same tree exactly.
#[test]
fn the_cut_kernel_btf_is_kept_and_a_damaged_one_made_again() {
    let mut opts = Opts::new(Mode::Ring);
    opts.env.push(("PROCTRACE_DEBUG".into(), "1".into()));
    let script = "sh -c 'exit 3'; exit 4";
    let exact = |run: &Run| {
        assert_eq!(run.code(), 4, "{}", run.stderr);
        assert_eq!(run.forks().len(), 1, "{}", run.text);
        assert_eq!(run.all_execs().len(), 2, "{}", run.text);
        assert_eq!(run.all_exits().len(), 2, "{}", run.text);
    };
    exact(&record_with(&opts, &["sh", "-c", script]));
    let kept = record_with(&opts, &["sh", "-c", script]);
    exact(&kept);
    assert!(
        kept.stderr.contains("kept from an earlier run"),
        "{}",
        kept.stderr
    );
    // libbpf's narration, stamped with the time since start and the thread.
    assert!(
        kept.stderr
            .lines()
            .any(|line| line.starts_with("proctrace: +")
                && line.contains(" ms [")
                && line.contains("] libbpf: loading object")),
        "{}",
        kept.stderr
    );
    let entries = || {
        std::fs::read_dir("/run/proctrace")
            .expect("/run/proctrace")
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "btf"))
    };
    let sizes: Vec<_> = entries()
        .map(|path| (std::fs::metadata(&path).unwrap().len(), path))
        .collect();
    // Each damaged copy is renamed over its entry: written in place, it
    // would be read half-written by the recordings of tests running beside
    // this one, which hold the entry open.
    let damaged =
        std::path::Path::new("/run").join(format!("proctrace-damaged-{}", std::process::id()));
    for (size, path) in &sizes {
        std::fs::write(&damaged, vec![0u8; *size as usize / 2]).unwrap();
        std::fs::rename(&damaged, path).unwrap();
    }
    exact(&record_with(&opts, &["sh", "-c", script]));
    // This binary's entry is whole again (made by this run, or by a test
    // running beside it).
    assert!(
        entries().any(|path| {
            let data = std::fs::read(&path).unwrap();
            data.starts_with(&[0x9f, 0xeb])
                && sizes.iter().any(|(size, _)| *size == data.len() as u64)
        }),
        "no whole entry after a damaged one"
    );
}

/// vfork+exec, clone(CLONE_PARENT) from a child, clone3, posix_spawn.
fn every_kind_of_fork(mode: Mode) {
    let run = record(mode, &[workload("forks")]);
    let root = run.root();
    assert_eq!(run.code(), 0, "{}\n{}", run.stderr, run.text);
    let kids = run.children(root);
    assert_eq!(kids.len(), 4, "{}", run.text);
    let (v, c, k, s) = (kids[0], kids[1], kids[2], kids[3]);
    assert_eq!(run.argvs(v), [strings(&["sh", "-c", "exit 11"])]);
    assert_eq!(run.exit(v).exit_code, Some(11));
    assert!(run.execs(c).is_empty() && run.execs(k).is_empty());
    assert_eq!(run.exit(c).exit_code, Some(13));
    assert_eq!(run.exit(k).exit_code, Some(14));
    assert_eq!(run.argvs(s), [strings(&["sh", "-c", "exit 15"])]);
    assert_eq!(run.exit(s).exit_code, Some(15));
    // CLONE_PARENT: created by c, but a child of the root.
    let g = run.children(c);
    assert_eq!(g.len(), 1, "{}", run.text);
    let g = g[0];
    let fork_g = run.forks().into_iter().find(|f| f.child_pid == g).unwrap();
    assert_eq!(fork_g.parent_pid, c);
    assert_eq!(fork_g.child_ppid, Some(root), "{}", run.text);
    assert_eq!(run.exit(g).exit_code, Some(12));
    assert_eq!(run.exit(g).ppid, root);
    for f in run.forks() {
        if f.child_pid != g {
            assert!(f.child_ppid.is_none() || f.child_ppid == Some(f.parent_pid));
        }
    }
    assert_eq!(run.forks().len(), 5);
    assert_eq!(run.all_exits().len(), 6);
    assert_eq!(run.all_execs().len(), 3);
}

per_mode!(every_kind_of_fork:
    every_kind_of_fork_ring => Ring,
    every_kind_of_fork_perf => Perf,
);

/// A double-forked setsid daemon outlives the command; the recording lasts
/// until it exits.
fn daemon_outlives_command(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("daemon-done");
    let run = record_in(
        dir,
        &Opts::new(mode),
        &[workload("daemon").into_os_string(), done.clone().into()],
    );
    assert!(done.exists(), "proctrace ended before the daemon did");
    let root = run.root();
    let a = run.children(root);
    assert_eq!(a.len(), 1, "{}", run.text);
    let a = a[0];
    let d = run.children(a);
    assert_eq!(d.len(), 1, "{}", run.text);
    let d = d[0];
    assert_eq!(run.pids(), [root, a, d].into());
    assert_eq!(run.kinds(a), ["Fork", "SetSID", "Exit"], "{}", run.text);
    assert_eq!(run.kinds(d), ["Fork", "Exit"], "{}", run.text);
    let setsids: Vec<&SetSid> = run
        .events()
        .iter()
        .filter_map(|r| match r {
            Record::SetSid(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(setsids.len(), 1);
    assert_eq!((setsids[0].pid, setsids[0].sid), (a, a));
    assert_eq!(run.exit(a).exit_code, Some(0));
    assert_eq!(run.exit(root).exit_code, Some(0));
    let daemon = run.exit(d);
    assert_eq!(daemon.exit_code, Some(42));
    assert_eq!((daemon.sid, daemon.pgid), (Some(a), a));
    // The daemon's exit comes last, after the command's.
    assert_eq!(run.events().last().and_then(|r| r.pid()), Some(d));
    assert!(!run.trailer().interrupted);
    assert_eq!(run.trailer().root_exit_code, Some(0));
    assert_eq!(run.code(), 0);
}

per_mode!(daemon_outlives_command:
    daemon_outlives_command_ring => Ring,
    daemon_outlives_command_perf => Perf,
    daemon_outlives_command_sys_exit => SysExit,
    daemon_outlives_command_tracepoint => Tracepoint,
);

/// setpgid(0,0) on itself, setpgid(child, child) and setpgid(child2, child)
/// from the parent; failed setsid/setpgid calls give no events.
fn setpgid_self_and_children(mode: Mode) {
    let run = record(mode, &[workload("setpgid")]);
    assert_eq!(run.code(), 0, "workload failed: {}", run.text);
    let root = run.root();
    let kids = run.children(root);
    assert_eq!(kids.len(), 2, "{}", run.text);
    let (c1, c2) = (kids[0], kids[1]);
    let setpgids: Vec<&SetPgid> = run
        .events()
        .iter()
        .filter_map(|r| match r {
            Record::SetPgid(s) => Some(s),
            _ => None,
        })
        .collect();
    let got: Vec<(i32, i32)> = setpgids.iter().map(|s| (s.pid, s.pgid)).collect();
    assert_eq!(got, [(root, root), (c1, c1), (c2, c1)], "{}", run.text);
    assert!(
        !run.events().iter().any(|r| matches!(r, Record::SetSid(_))),
        "a failed setsid was recorded\n{}",
        run.text
    );
    assert_eq!(run.exit(c1).pgid, c1);
    assert_eq!(run.exit(c2).pgid, c1);
    assert_eq!(run.exit(root).pgid, root);
    let fork1 = run.forks()[0];
    assert_eq!((fork1.parent_pgid, fork1.child_pgid), (root, Some(root)));
    assert_eq!(run.events().len(), 9, "{}", run.text);
}

per_mode!(setpgid_self_and_children:
    setpgid_self_and_children_ring => Ring,
    setpgid_self_and_children_perf => Perf,
    setpgid_self_and_children_sys_exit => SysExit,
    setpgid_self_and_children_tracepoint => Tracepoint,
);

/// A parent's setpgid on its already-exited (zombie) child succeeds in the
/// kernel, after the child's Exit; the recording must not bring the child
/// back: its events are its Fork and its Exit, nothing after.
fn setpgid_on_an_exited_child(mode: Mode) {
    let run = record(mode, &[workload("late_setpgid")]);
    assert_eq!(run.code(), 0, "workload failed: {}", run.text);
    let root = run.root();
    let kids = run.children(root);
    assert_eq!(kids.len(), 1, "{}", run.text);
    assert_eq!(run.kinds(kids[0]), ["Fork", "Exit"], "{}", run.text);
    assert_eq!(run.kinds(root), ["Exec", "Exit"], "{}", run.text);
}

per_mode!(setpgid_on_an_exited_child:
    setpgid_on_an_exited_child_ring => Ring,
    setpgid_on_an_exited_child_perf => Perf,
    setpgid_on_an_exited_child_sys_exit => SysExit,
    setpgid_on_an_exited_child_tracepoint => Tracepoint,
);

/// A 32-bit program (tests/workloads/compat_setid.S) enters the kernel
/// through the 32-bit syscall ABI: its child's setsid and its own
/// setpgid(0, 0). fexit and sys_exit see both; the classic syscall
/// tracepoints see neither, and then the trailer and stderr say that a
/// 32-bit program ran.
fn a_32bit_program_sets_its_session_and_group(mode: Mode) {
    let run = record(mode, &[workload("compat_setid")]);
    assert_eq!(run.code(), 0, "workload failed: {}", run.text);
    let root = run.root();
    let kids = run.children(root);
    assert_eq!(kids.len(), 1, "{}", run.text);
    let child = kids[0];
    let blind = run.header().syscall_hook == Some(SyscallHook::Tracepoint);
    if blind {
        assert_eq!(run.kinds(child), ["Fork", "Exit"], "{}", run.text);
        assert_eq!(run.kinds(root), ["Exec", "Exit"], "{}", run.text);
        assert_eq!(run.trailer().unwatched_32bit_execs, 1, "{}", run.text);
        assert!(run.stderr.contains("32-bit programs ran"), "{}", run.stderr);
        return;
    }
    assert_eq!(run.kinds(child), ["Fork", "SetSID", "Exit"], "{}", run.text);
    assert_eq!(run.kinds(root), ["Exec", "SetPGID", "Exit"], "{}", run.text);
    assert_eq!(run.trailer().unwatched_32bit_execs, 0);
    let ids: Vec<(Pid, Pid)> = run
        .events()
        .iter()
        .filter_map(|r| match r {
            Record::SetSid(s) => Some((s.pid, s.sid)),
            Record::SetPgid(s) => Some((s.pid, s.pgid)),
            _ => None,
        })
        .collect();
    assert_eq!(ids, [(child, child), (root, root)], "{}", run.text);
    assert_eq!(run.exit(child).sid, Some(child));
}

per_mode!(a_32bit_program_sets_its_session_and_group:
    a_32bit_program_sets_its_session_and_group_ring => Ring,
    a_32bit_program_sets_its_session_and_group_sys_exit => SysExit,
    a_32bit_program_sets_its_session_and_group_tracepoint => Tracepoint,
);

/// env tries each PATH entry; only the successful exec is an event.
#[test]
fn failed_path_lookups_are_not_execs() {
    let cmd = ["env", "PATH=/nonexistent1:/nonexistent2:/usr/bin", "true"];
    let run = record(Mode::Ring, &cmd);
    let root = run.root();
    assert_eq!(
        run.argvs(root),
        [strings(&cmd), strings(&["true"])],
        "{}",
        run.text
    );
    assert_eq!(run.execs(root)[1].filename, "/usr/bin/true");
    assert!(run.forks().is_empty());
    assert_eq!(run.kinds(root), ["Exec", "Exec", "Exit"]);
    assert_eq!(run.exit(root).exit_code, Some(0));
}

/// A busy loop outside the tree never shows up in a filtered recording.
#[test]
fn processes_outside_the_tree_are_not_recorded() {
    let busy = Background::sh("while :; do /bin/true; done");
    let script = "for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; done";
    let run = record(Mode::Ring, &["sh", "-c", script]);
    drop(busy);
    // check() already proved the tree closed; the counts are exact too.
    let root = run.root();
    let kids = run.children(root);
    assert_eq!(kids.len(), 10, "{}", run.text);
    for kid in kids {
        assert_eq!(run.argvs(kid), [strings(&["/bin/true"])]);
        assert_eq!(run.exit(kid).exit_code, Some(0));
    }
    assert_eq!(run.forks().len(), 10);
    assert_eq!(run.all_execs().len(), 11);
    assert_eq!(run.all_exits().len(), 11);
    assert_eq!(run.events().len(), 32);
}

/// `--raw` records every process on the machine, the tree included.
#[test]
fn raw_records_everything() {
    let busy = Background::sh("while :; do /bin/true; done");
    let busy_pid = busy.pid();
    let mut opts = Opts::new(Mode::Ring);
    opts.raw = true;
    let script = "sh -c 'exit 3'; for i in 1 2 3 4 5; do /bin/true; done";
    let run = record_with(&opts, &["sh", "-c", script]);
    drop(busy);
    assert!(run.header().raw);
    let root = run.root();
    // The tree's events are all there.
    assert_eq!(run.argvs(root), [strings(&["sh", "-c", script])]);
    let kids = run.children(root);
    assert_eq!(kids.len(), 6, "{}", run.text);
    assert_eq!(run.argvs(kids[0]), [strings(&["sh", "-c", "exit 3"])]);
    assert_eq!(run.exit(kids[0]).exit_code, Some(3));
    for &kid in &kids[1..] {
        assert_eq!(run.argvs(kid), [strings(&["/bin/true"])]);
        assert_eq!(run.exit(kid).exit_code, Some(0));
    }
    assert_eq!(run.exit(root).exit_code, Some(0));
    assert_eq!(run.code(), 0);
    // The spawner outside the tree is there too.
    let outside: Vec<_> = run
        .forks()
        .into_iter()
        .filter(|f| f.parent_pid == busy_pid)
        .map(|f| f.child_pid)
        .collect();
    assert!(
        !outside.is_empty(),
        "no fork of the busy loop in a raw recording"
    );
    assert!(
        outside
            .iter()
            .any(|&p| run.argvs(p).contains(&strings(&["/bin/true"]))),
        "no exec of the busy loop's children"
    );
}

/// A PID namespace inside the tree: pids as the root namespace sees them.
fn pid_namespace(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("inner-pid");
    let script = format!(
        r#"sh -c "exit 4"; setsid sh -c "exit 6"; echo $$ > {}; exit 5"#,
        inner.display()
    );
    let cmd = ["unshare", "-pf", "sh", "-c", &script];
    let run = record_in(dir, &Opts::new(mode), &cmd);
    // It really ran in a namespace of its own: it saw itself as pid 1.
    assert_eq!(std::fs::read_to_string(&inner).unwrap().trim(), "1");
    let root = run.root();
    assert_eq!(run.argvs(root), [strings(&cmd)]);
    let init = run.children(root);
    assert_eq!(init.len(), 1, "{}", run.text);
    let init = init[0];
    assert_eq!(run.argvs(init), [strings(&["sh", "-c", &script])]);
    let c4 = run.child_with_argv(init, &["sh", "-c", "exit 4"]);
    let c6 = run.child_with_argv(init, &["sh", "-c", "exit 6"]);
    assert_eq!(run.children(init), [c4, c6]);
    assert_eq!(
        run.argvs(c6),
        [
            strings(&["setsid", "sh", "-c", "exit 6"]),
            strings(&["sh", "-c", "exit 6"])
        ]
    );
    for pid in [init, c4, c6] {
        assert!(
            pid > 1 && pid != root,
            "namespace pid {pid} recorded\n{}",
            run.text
        );
    }
    // Parent links and ids in root-namespace terms.
    let exec = |pid| run.execs(pid)[0];
    assert_eq!(exec(init).ppid, root);
    assert_eq!(exec(c4).ppid, init);
    assert_eq!(run.exit(c4).ppid, init);
    assert_eq!(exec(init).pgid, exec(root).pgid);
    assert_eq!(exec(init).sid, exec(root).sid);
    assert_eq!(run.exit(c6).sid, Some(c6));
    let setsids: Vec<(i32, i32)> = run
        .events()
        .iter()
        .filter_map(|r| match r {
            Record::SetSid(s) => Some((s.pid, s.sid)),
            _ => None,
        })
        .collect();
    assert_eq!(setsids, [(c6, c6)], "{}", run.text);
    assert_eq!(run.exit(c4).exit_code, Some(4));
    assert_eq!(run.exit(c6).exit_code, Some(6));
    assert_eq!(run.exit(init).exit_code, Some(5));
    assert_eq!(run.exit(root).exit_code, Some(5));
    assert_eq!(run.code(), 5);
    assert_eq!(run.pids(), [root, init, c4, c6].into());
}

per_mode!(pid_namespace:
    pid_namespace_ring => Ring,
    pid_namespace_perf => Perf,
);

/// 200 concurrent children on both CPUs, and a chain of 30 nested
/// subshells: every fork, exec and exit, each in causal order (check()).
fn many_processes(mode: Mode) {
    let script = "for i in $(seq 200); do /bin/true & done; wait
f() { if [ $1 -gt 0 ]; then (f $(($1 - 1))); fi; }; f 30";
    let run = record(mode, &["sh", "-c", script]);
    let root = run.root();
    let kids = run.children(root);
    assert_eq!(kids.len(), 202, "{}", run.stderr);
    let seq = run.child_with_argv(root, &["seq", "200"]);
    let trues: Vec<_> = kids
        .iter()
        .copied()
        .filter(|&k| run.argvs(k) == [strings(&["/bin/true"])])
        .collect();
    assert_eq!(trues.len(), 200);
    for &k in &trues {
        assert_eq!(run.kinds(k), ["Fork", "Exec", "Exit"]);
        assert_eq!(run.exit(k).exit_code, Some(0));
    }
    assert_eq!(run.exit(seq).exit_code, Some(0));
    // The chain: each subshell forks the next, none execs.
    let mut link = *kids.last().unwrap();
    let mut depth = 1;
    while let [next] = run.children(link)[..] {
        assert!(run.execs(link).is_empty());
        link = next;
        depth += 1;
    }
    assert!(run.children(link).is_empty());
    assert_eq!(depth, 30, "chain of subshells");
    assert_eq!(run.forks().len(), 231);
    assert_eq!(run.all_exits().len(), 232);
    assert_eq!(run.code(), 0);
}

per_mode!(many_processes:
    many_processes_ring => Ring,
    many_processes_perf => Perf,
    many_processes_btf_tracepoints_perf => BtfTpPerf,
);

/// A child killed by SIGSEGV with core dumps on: core_dumped.
#[test]
fn core_dump_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        r#"cd {} && ulimit -c unlimited && sh -c 'kill -SEGV $$'; exit 0"#,
        dir.path().display()
    );
    let run = record_in(dir, &Opts::new(Mode::Ring), &["sh", "-c", &script]);
    let root = run.root();
    let child = run.child_with_argv(root, &["sh", "-c", "kill -SEGV $$"]);
    let exit = run.exit(child);
    assert_eq!(
        (exit.exit_code, exit.signal),
        (None, Some(11)),
        "{}",
        run.text
    );
    assert_eq!(
        exit.core_dumped,
        std::fs::read_to_string("/proc/sys/kernel/core_pattern")
            .unwrap()
            .trim()
            == "core",
        "core_dumped (core_pattern-dependent)"
    );
    assert_eq!(run.code(), 0);
}

/// A relay of 2000 processes, each forking the next and exiting at once:
/// the tree is never empty, so the recording must hold every hop and end
/// only after the last one. (Fails: proctrace ends the recording early,
/// see the report; the daemon test above can fail the same way.)
fn relay_is_recorded_to_the_end(mode: Mode) {
    const HOPS: usize = 2000;
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("relay-done");
    let cmd = [
        workload("relay").into_os_string(),
        HOPS.to_string().into(),
        done.clone().into(),
    ];
    let mut live = Live::start(dir, &Opts::new(mode), &cmd);
    let status = wait_bounded(&mut live.child, "proctrace record");
    let last_ran = done.exists();
    let run = live.finish(status);
    let trailer = run.trailer();
    assert!(!trailer.interrupted);
    assert_eq!(
        (run.forks().len(), run.all_exits().len(), last_ran),
        (HOPS, HOPS + 1, true),
        "(forks, exits, last process done before proctrace ended); trailer {trailer:?}"
    );
    run.check();
    let mut link = run.root();
    for _ in 0..HOPS {
        let next = run.children(link);
        assert_eq!(next.len(), 1);
        assert_eq!(run.exit(link).exit_code, Some(0));
        link = next[0];
    }
    assert_eq!(run.exit(link).exit_code, Some(0));
    assert_eq!(run.code(), 0);
}

per_mode!(relay_is_recorded_to_the_end:
    relay_is_recorded_to_the_end_ring => Ring,
    relay_is_recorded_to_the_end_perf => Perf,
);

/// A reader of `-o -` that goes away (`| head`) ends the recording's
/// output, quietly: the tree runs to its end and proctrace exits with the
/// command's status, as the command alone would, with nothing on stderr.
#[test]
fn a_closed_stdout_ends_the_output_not_the_recording() {
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("done");
    let script = format!("sleep 0.2; echo > {}; exit 3", done.display());
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let stderr = dir.path().join("stderr");
    let mut child = std::process::Command::new(recorder_bin())
        .args(["record", "-o", "-", "--", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .stdout(write)
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, "proctrace record -o - into a closed pipe");
    let stderr = std::fs::read_to_string(stderr).unwrap();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert_eq!(stderr, "");
    assert!(done.exists(), "the command did not run to its end");
}

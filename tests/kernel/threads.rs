//! Threads are not processes: no events of their own; a thread's fork,
//! exec and exit_group belong to its process.

use crate::common::*;

/// Four pthreads that exit and are joined: one process, three events.
fn threads_are_invisible(mode: Mode) {
    let bin = workload("threads");
    let run = record(mode, &[bin.to_str().unwrap(), "join"]);
    let root = run.root();
    assert_eq!(run.kinds(root), ["Exec", "Exit"], "{}", run.text);
    assert_eq!(run.events().len(), 2, "{}", run.text);
    assert_eq!(run.exit(root).exit_code, Some(0));
    assert_eq!(run.code(), 0);
}

per_mode!(threads_are_invisible:
    threads_are_invisible_ring => Ring,
    threads_are_invisible_perf => Perf,
);

/// The main thread leaves first (pthread_exit); a remaining thread calls
/// exit(3) once the leader is a zombie: one Exit, when the whole group is
/// gone, with that thread's status.
fn leader_exits_first(mode: Mode) {
    let bin = workload("threads");
    let run = record(mode, &[bin.to_str().unwrap(), "leader-first"]);
    let root = run.root();
    assert_eq!(run.kinds(root), ["Exec", "Exit"], "{}", run.text);
    assert_eq!(run.events().len(), 2, "{}", run.text);
    let exit = run.exit(root);
    assert_eq!(
        (exit.exit_code, exit.signal),
        (Some(3), None),
        "{}",
        run.text
    );
    assert_eq!(run.code(), 3);
}

per_mode!(leader_exits_first:
    leader_exits_first_ring => Ring,
    leader_exits_first_perf => Perf,
);

/// A non-leader thread forks: the child is the process's child.
fn thread_forks(mode: Mode) {
    let run = record(mode, &[workload("thread_fork")]);
    let root = run.root();
    assert_eq!(run.code(), 0, "workload saw a wrong status: {}", run.text);
    let forks = run.forks();
    assert_eq!(forks.len(), 1, "{}", run.text);
    assert_eq!(forks[0].parent_pid, root);
    let child = forks[0].child_pid;
    assert_eq!(run.argvs(child), [strings(&["sh", "-c", "exit 4"])]);
    assert_eq!(run.execs(child)[0].filename, "/bin/sh");
    assert_eq!(run.execs(child)[0].ppid, root);
    assert_eq!(run.kinds(child), ["Fork", "Exec", "Exit"]);
    assert_eq!(run.exit(child).exit_code, Some(4));
    assert_eq!(run.exit(child).ppid, root);
    assert_eq!(run.kinds(root), ["Exec", "Exit"]);
    assert_eq!(run.events().len(), 5, "{}", run.text);
}

per_mode!(thread_forks:
    thread_forks_ring => Ring,
    thread_forks_perf => Perf,
);

/// A non-leader thread execs: one Exec of the new program with the
/// process's pid, no exit in between, one Exit.
fn exec_from_non_leader_thread(mode: Mode) {
    let bin = workload("thread_exec");
    let run = record(mode, &[bin.to_str().unwrap(), "/bin/sh", "-c", "exit 5"]);
    let root = run.root();
    assert!(run.forks().is_empty(), "{}", run.text);
    assert_eq!(run.kinds(root), ["Exec", "Exec", "Exit"], "{}", run.text);
    assert_eq!(run.events().len(), 3, "{}", run.text);
    let execs = run.execs(root);
    assert_eq!(
        execs[0].argv,
        strings(&[bin.to_str().unwrap(), "/bin/sh", "-c", "exit 5"])
    );
    assert_eq!(execs[1].argv, strings(&["/bin/sh", "-c", "exit 5"]));
    assert_eq!(execs[1].filename, "/bin/sh");
    assert_eq!(execs[1].ppid, execs[0].ppid);
    assert_eq!(run.exit(root).exit_code, Some(5));
    assert_eq!(run.code(), 5);
}

per_mode!(exec_from_non_leader_thread:
    exec_from_non_leader_thread_ring => Ring,
    exec_from_non_leader_thread_perf => Perf,
    exec_from_non_leader_thread_btf_tracepoints => BtfTp,
);

/// exit(7) (exit_group) from a non-leader thread while main sleeps.
fn exit_group_from_non_leader_thread(mode: Mode) {
    let run = record(mode, &[workload("thread_exit")]);
    let root = run.root();
    assert_eq!(run.kinds(root), ["Exec", "Exit"], "{}", run.text);
    assert_eq!(run.events().len(), 2, "{}", run.text);
    let exit = run.exit(root);
    assert_eq!((exit.exit_code, exit.signal), (Some(7), None));
    assert_eq!(run.trailer().root_exit_code, Some(7));
    assert_eq!(run.code(), 7);
}

per_mode!(exit_group_from_non_leader_thread:
    exit_group_from_non_leader_thread_ring => Ring,
    exit_group_from_non_leader_thread_perf => Perf,
    exit_group_from_non_leader_thread_btf_tracepoints => BtfTp,
);

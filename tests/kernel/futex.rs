//! Issue #40, locks the kernel names no owner of: a futex in memory
//! shared over fork, held by one process while another waits, and
//! threads of one process deadlocked on two mutexes. The owner is read
//! from the lock word where it records one; else the processes that map
//! the memory are the candidates. The waiter is never the culprit.

use std::fs;

use crate::common::{have_tool, workload, Run};
use crate::hang::render_as;
use crate::waits::{answers, hung, the_culprit};
use proctrace::event::Pid;

/// The holder and the waiter `shared_lock KIND` forked, in that order.
fn holder_and_waiter(run: &Run) -> (Pid, Pid) {
    let children = run.children(run.root());
    assert_eq!(children.len(), 2, "{}", run.text);
    (children[0], children[1])
}

/// `shared_lock KIND` hung: its holder is the one culprit, holding a lock
/// whose word names it, which its waiter waits for.
fn owner_is_named(kind: &str, lock: &str) {
    let (run, view) = hung(&[workload("shared_lock").to_str().unwrap(), kind]);
    let (holder, waiter) = holder_and_waiter(&run);
    let culprit = the_culprit(&view, holder);
    assert!(culprit.contains("blocked in pause"), "{view}");
    let held = format!("; holds the {lock} at 0x");
    assert!(culprit.contains(&held), "{view}");
    let by = format!(" in shared anonymous memory (its thread {holder}) that {waiter} ");
    assert!(
        culprit.ends_with(" waits for") && culprit.contains(&by),
        "{view}"
    );
    // The command after it is cut to the view's width where the checkout's
    // path is long: the pid and `<fork>` say which line it is.
    let waits = format!("{waiter} <fork> ");
    let line = view.lines().find(|l| l.trim_start().starts_with(&waits));
    let line = line.unwrap_or_else(|| panic!("{view}"));
    assert!(
        line.contains(&format!(", owned by thread {holder} ")),
        "{view}"
    );
    assert!(line.ends_with("; held by:"), "{view}");
    assert!(answers(&view, "deadlock: ").is_empty(), "{view}");
}

#[test]
fn a_process_shared_mutex_names_the_process_holding_it() {
    owner_is_named("mutex", "lock");
}

#[test]
fn a_robust_mutex_names_the_process_holding_it() {
    owner_is_named("robust", "lock");
}

#[test]
fn a_priority_inheriting_mutex_names_the_process_holding_it() {
    owner_is_named("pi", "PI lock");
}

/// The culprit line of a wait on a word that records no owner: the one
/// other process that maps it is the culprit, said to be a candidate.
fn candidate_is_named(run: &Run, view: &str, call: &str, memory: &str) {
    let (holder, waiter) = holder_and_waiter(run);
    let culprit = the_culprit(view, holder);
    assert!(culprit.contains(&format!(", blocked in {call}")), "{view}");
    assert!(culprit.contains("; maps the word at 0x"), "{view}");
    assert!(culprit.contains(&format!(" in {memory}")), "{view}");
    assert!(
        culprit.contains(&format!(" that {waiter} <fork> ")),
        "{view}"
    );
    let tail = " waits for (no owner recorded: 1 process of the tree maps it)";
    assert!(culprit.ends_with(tail), "{view}");
    assert!(
        view.contains("(it records no owner) (")
            && view.contains("; no owner is known, it may be held by:"),
        "{view}"
    );
}

#[test]
fn a_shared_semaphore_has_the_other_mapper_as_its_candidate() {
    let (run, view) = hung(&[workload("shared_lock").to_str().unwrap(), "sem"]);
    candidate_is_named(&run, &view, "pause", "shared anonymous memory");
}

#[test]
fn futex_waitv_on_a_shared_word_has_the_other_mapper_as_its_candidate() {
    let (run, view) = hung(&[workload("shared_lock").to_str().unwrap(), "waitv"]);
    assert!(
        view.contains(" blocked in futex_waitv on the word at 0x"),
        "{view}"
    );
    candidate_is_named(&run, &view, "pause", "shared anonymous memory");
}

#[test]
fn a_multiprocessing_lock_held_by_one_child_blames_it_not_the_waiter() {
    let script = "import multiprocessing as mp, os, time\n\
                  ctx = mp.get_context('fork')\n\
                  lock = ctx.Lock()\n\
                  r, w = os.pipe()\n\
                  def hold():\n\
                  \x20   lock.acquire(); os.write(w, b'x'); time.sleep(1000)\n\
                  h = ctx.Process(target=hold); h.start(); os.read(r, 1)\n\
                  b = ctx.Process(target=lock.acquire); b.start(); b.join()\n";
    let (run, view) = hung(&["/usr/bin/python3", "-c", script]);
    // A POSIX semaphore, unlinked from /dev/shm once made.
    candidate_is_named(&run, &view, "clock_nanosleep", "/dev/shm/sem.");
}

#[test]
fn threads_that_take_two_mutexes_in_opposite_order_are_a_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let told = dir.path().join("tids");
    let (run, view) = hung(&[
        workload("lock_order").to_str().unwrap(),
        told.to_str().unwrap(),
    ]);
    let told = fs::read_to_string(&told).unwrap();
    let told: Vec<&str> = told.split_whitespace().collect();
    let [first, second, a, b] = told[..] else {
        panic!("{told:?}")
    };
    let root = run.root();
    let deadlocks = answers(&view, "deadlock: ");
    assert_eq!(deadlocks.len(), 1, "{view}");
    // The command as the view shortens it, from the process's own line.
    let named = view.lines().nth(1).unwrap().trim_start();
    let command = named.split(" (alive").next().unwrap();
    let expected = format!(
        "deadlock: 2 threads of {command} wait for each other: \
         thread {first} \"first\" (futex on the lock at {b}, owned by its thread {second} \"second\"); \
         thread {second} \"second\" (futex on the lock at {a}, owned by its thread {first} \"first\")"
    );
    assert!(command.starts_with(&format!("{root} ")), "{view}");
    assert_eq!(deadlocks[0], expected, "{view}");
    // The same answer wherever the hang's is: stderr, summary, OTLP, and
    // markdown, which shortens it.
    let recording = run.dir.path().join("rec.ndjson");
    assert!(
        run.stderr.contains(&format!("proctrace: {expected}\n")),
        "{}",
        run.stderr
    );
    let summary = render_as(&recording, "summary");
    assert!(summary.contains(&format!("  {expected}\n")), "{summary}");
    let otlp = render_as(&recording, "otlp");
    let quoted = serde_json::to_string(&expected).unwrap();
    assert!(otlp.contains(&quoted), "{otlp}");
    let markdown = render_as(&recording, "markdown");
    let head = format!("- **Deadlock:** 2 threads of {root} ");
    assert!(markdown.contains(&head), "{markdown}");
    // The process is the one culprit, told as waiting on its threads,
    // not merely "blocked in futex".
    let culprit = the_culprit(&view, root);
    let joins = format!(", blocked in futex for its thread {first} \"first\" to end and ");
    assert!(culprit.contains(&joins), "{view}");
    assert!(!view.contains("blocked in futex ("), "{view}");
}

#[test]
fn twenty_waiters_on_one_semaphore_fold_into_one_line_with_a_count() {
    let (run, view) = hung(&[workload("shared_lock").to_str().unwrap(), "sem", "20"]);
    let children = run.children(run.root());
    assert_eq!(children.len(), 21, "{}", run.text);
    let culprit = the_culprit(&view, children[0]);
    assert!(culprit.contains(" that 20 × <fork> "), "{view}");
    let tail = " waits for (no owner recorded: 1 process of the tree maps it)";
    assert!(culprit.ends_with(tail), "{view}");
    let waiting: Vec<&str> = view.lines().filter(|l| l.contains("in futex")).collect();
    assert_eq!(waiting.len(), 1, "one line in the chain:\n{view}");
    assert!(
        waiting[0].trim_start().starts_with("20 × <fork> "),
        "{view}"
    );
}

#[test]
fn two_processes_each_holding_the_shared_mutex_the_other_waits_for_are_a_deadlock() {
    let (run, view) = hung(&[workload("shared_lock").to_str().unwrap(), "deadlock"]);
    let (first, second) = holder_and_waiter(&run);
    assert!(answers(&view, "culprit: ").is_empty(), "{view}");
    let deadlocks = answers(&view, "deadlock: ");
    assert_eq!(deadlocks.len(), 1, "{view}");
    let line = deadlocks[0];
    let head = format!("deadlock: 2 processes wait for each other: {first} <fork> ");
    assert!(line.starts_with(&head), "{view}");
    // Each waits on the lock the other holds (its wchan varies by kernel).
    for (waiter, holder) in [(first, second), (second, first)] {
        let from = line.find(&format!("{waiter} <fork> ")).unwrap();
        let own = &line[from..];
        let own = own.split("; ").next().unwrap();
        let owned = format!(" in shared anonymous memory, owned by thread {holder} (");
        assert!(own.contains(&owned), "{view}");
        assert!(own.ends_with(&format!(", waits for {holder})")), "{view}");
    }
}

#[test]
fn a_lock_word_of_another_pid_namespace_names_candidates_not_a_stranger() {
    if !have_tool("unshare") {
        return;
    }
    // The word holds the holder's tid in the new namespace, which names
    // another process, or none, in proctrace's.
    let lock = workload("shared_lock");
    let argv = [
        "unshare",
        "--pid",
        "--fork",
        lock.to_str().unwrap(),
        "mutex",
    ];
    let (run, view) = hung(&argv);
    let inner = run.children(run.root());
    assert_eq!(inner.len(), 1, "{}", run.text);
    let (holder, waiter) = match run.children(inner[0])[..] {
        [holder, waiter] => (holder, waiter),
        _ => panic!("{}", run.text),
    };
    let culprit = the_culprit(&view, holder);
    assert!(
        culprit.contains(&format!(" that {waiter} <fork> ")),
        "{view}"
    );
    let tail = " waits for (no owner recorded: 1 process of the tree maps it)";
    assert!(culprit.ends_with(tail), "{view}");
    assert!(!view.contains("owned by"), "{view}");
}

//! The tree's waits (`record --off-cpu`): the long waits the kernel sent
//! with their stacks, joined to the stacks of the threads that woke them,
//! counted by thread, test, reason and stack; the kernel's totals of
//! every wait, less those long ones, counted by their call alone; the
//! time each thread ran; and the longest waits one by one, for the chains
//! of wakers. A total is counted under the test its process had when the
//! marks before it were sent (the kernel keys its totals by them).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use super::stack_ids::StackIds;
use super::tally::Test;
use crate::event::{LongWait, OffCpu, OnCpu, Pid, Record, WaitReason, Waker};
use crate::recorder::frames::{Names, Place};
use crate::recorder::wire::{Mark, Wait, WaitKey, Wakeup};

/// Long waits written one by one at the most (the longest are kept):
/// the chains of wakers follow them; the rest are in the totals.
const LONG_WAITS_KEPT: usize = 20_000;

/// A total as the kernel kept it: nanoseconds, stretches, the longest.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Total {
    pub ns: u64,
    pub count: u64,
    pub max_ns: u64,
}

impl Total {
    fn add(&mut self, ns: u64) {
        self.ns += ns;
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
    }
}

/// What the kernel added up, read when the tree is gone.
pub(crate) struct KernelTotals {
    pub totals: Vec<(WaitKey, Total)>,
    /// The names of the processes outside the tree that woke its threads.
    pub outsiders: HashMap<Pid, String>,
}

/// The line a long wait is counted on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LongLine {
    key: WaitKey,
    test: Test,
    places: Vec<Place>,
    /// The stack of the thread of the tree that woke it.
    waker_places: Option<Vec<Place>>,
}

#[derive(Default)]
pub(super) struct Waits {
    /// Each process's test by the marks: from which mark on (its epoch),
    /// which test; in the order they changed.
    tests: HashMap<Pid, Vec<(u32, Test)>>,
    /// The newest mark's number applied.
    epoch: u32,
    /// The wakers' stacks, until their wait comes: by the wakee and the
    /// wakeup's time.
    wakers: HashMap<(Pid, u64), Vec<Place>>,
    /// The long waits, by line: the key stripped of its epoch, which the
    /// test replaces.
    long: HashMap<LongLine, Total>,
    /// What the long waits added to the kernel's totals, to take out.
    taken: HashMap<WaitKey, Total>,
    /// The longest waits, shortest on top.
    kept: BinaryHeap<Reverse<(u64, LongWaitOrd)>>,
    pub(super) long_count: u64,
    pub(super) left_out: u64,
    kernel: Option<KernelTotals>,
}

/// A [`LongWait`] with an order, for the heap.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LongWaitOrd(LongWait);

impl PartialOrd for LongWaitOrd {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LongWaitOrd {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let key = |w: &LongWait| (w.off, w.tid, w.on);
        key(&self.0).cmp(&key(&other.0))
    }
}

impl Waits {
    /// A process's word on its test.
    pub(super) fn mark(&mut self, mark: &Mark) {
        self.epoch = self.epoch.max(mark.epoch);
        let test = mark.test.as_deref().map(Arc::from);
        self.tests
            .entry(mark.pid)
            .or_default()
            .push((mark.epoch, test));
    }

    /// A fork starts in its parent's test.
    pub(super) fn fork(&mut self, parent: Pid, child: Pid) {
        let test = self.test_of(parent, self.epoch);
        self.set(child, test);
    }

    /// A new program, or a process gone: no test marked any more.
    pub(super) fn forget(&mut self, pid: Pid) {
        if self.tests.contains_key(&pid) {
            self.set(pid, None);
        }
    }

    fn set(&mut self, pid: Pid, test: Test) {
        let epoch = self.epoch;
        self.tests.entry(pid).or_default().push((epoch, test));
    }

    /// The test `pid` had after the marks up to `epoch`.
    fn test_of(&self, pid: Pid, epoch: u32) -> Test {
        let changes = self.tests.get(&pid)?;
        let at = changes.partition_point(|(from, _)| *from <= epoch);
        changes.get(at.checked_sub(1)?)?.1.clone()
    }

    /// A thread of the tree woke a long wait: its stack, for the wait.
    pub(super) fn wakeup(&mut self, wakeup: &Wakeup, places: Vec<Place>) {
        let at = wakeup.stacks.timestamp;
        self.wakers.insert((wakeup.wakee_tid, at), places);
    }

    /// A long wait and the places of its stacks.
    pub(super) fn wait(&mut self, wait: &Wait, places: Vec<Place>) {
        self.long_count += 1;
        let key = wait.key;
        let line = LongLine {
            key: WaitKey { epoch: 0, ..key },
            test: self.test_of(key.pid, key.epoch),
            places,
            waker_places: self.wakers.remove(&(key.tid, wait.woken)),
        };
        self.long.entry(line).or_default().add(wait.waited_ns);
        self.take(wait);
        self.keep(wait);
    }

    /// Takes a long wait out of the totals the kernel also counted it in,
    /// under its key. The time runnable after it stays in the kernel's
    /// runnable total, where every wakeup's is.
    fn take(&mut self, wait: &Wait) {
        if wait.waited_ns > 0 {
            self.taken.entry(wait.key).or_default().add(wait.waited_ns);
        }
    }

    fn keep(&mut self, wait: &Wait) {
        let key = &wait.key;
        let tree_waker = key.waker_pid != 0 && !key.by_interrupt();
        let long = LongWait {
            pid: key.pid,
            tid: key.tid,
            reason: key.reason(),
            off: wait.off,
            woken: (wait.woken > 0).then_some(wait.woken),
            on: wait.on,
            waker_pid: tree_waker.then_some(key.waker_pid),
            waker_tid: tree_waker.then_some(key.waker_tid),
        };
        self.kept.push(Reverse((
            wait.waited_ns + wait.runnable_ns,
            LongWaitOrd(long),
        )));
        if self.kept.len() > LONG_WAITS_KEPT {
            self.kept.pop();
            self.left_out += 1;
        }
    }

    /// The kernel's totals, read once the tree is gone.
    pub(super) fn totals(&mut self, totals: KernelTotals) {
        self.kernel = Some(totals);
    }

    /// Every place the long waits and their wakers were in.
    pub(super) fn places(&self) -> impl Iterator<Item = &Place> {
        self.long
            .keys()
            .flat_map(|line| line.places.iter().chain(line.waker_places.iter().flatten()))
    }

    /// Stretches off the CPU the kernel counted.
    pub(super) fn counted(&self) -> u64 {
        let totals = self.kernel.iter().flat_map(|k| &k.totals);
        totals
            .filter(|(key, _)| !key.running())
            .map(|(_, total)| total.count)
            .sum()
    }

    /// The OffCpu, OnCpu and LongWait lines, the stacks numbered in
    /// `stacks`.
    pub(super) fn into_records(mut self, names: &Names, stacks: &mut StackIds) -> Vec<Record> {
        let kernel = self.kernel.take().unwrap_or(KernelTotals {
            totals: Vec::new(),
            outsiders: HashMap::new(),
        });
        // Every process of the tree that ran has a total; those the
        // collector saw forked are in it too.
        let ran = kernel.totals.iter().map(|(key, _)| key.pid);
        let tree: HashSet<Pid> = ran.chain(self.tests.keys().copied()).collect();
        let mut lines: Vec<Record> = Vec::new();
        for (line, total) in &self.long {
            let reason = refine(line.key.reason(), names, &line.places);
            let mut waker = waker_of(&line.key, &tree, &kernel.outsiders);
            if let (Some(Waker::Tree { stack, .. }), Some(places)) =
                (&mut waker, &line.waker_places)
            {
                *stack = Some(stacks.of(names, places));
            }
            lines.push(Record::OffCpu(OffCpu {
                stack: Some(stacks.of(names, &line.places)),
                ..off_cpu(&line.key, &line.test, reason, waker, total)
            }));
        }
        let (short, ran) = short_lines(&self, &kernel, &tree);
        lines.extend(short);
        lines.extend(ran);
        sort_lines(&mut lines);
        let mut kept: Vec<LongWait> = self.kept.into_iter().map(|Reverse((_, w))| w.0).collect();
        for wait in &mut kept {
            if wait.waker_pid.is_some_and(|pid| !tree.contains(&pid)) {
                (wait.waker_pid, wait.waker_tid) = (None, None);
            }
        }
        kept.sort_by_key(|w| (w.off, w.tid));
        lines.extend(kept.into_iter().map(Record::LongWait));
        lines
    }
}

/// An interrupt's wakeup, where the key says so.
fn interrupt(key: &WaitKey) -> Option<Waker> {
    key.by_interrupt().then_some(Waker::Interrupt)
}

fn off_cpu(
    key: &WaitKey,
    test: &Test,
    reason: WaitReason,
    waker: Option<Waker>,
    total: &Total,
) -> OffCpu {
    OffCpu {
        pid: key.pid,
        tid: key.tid,
        test: test.as_ref().map(|t| t.to_string()),
        reason,
        call: key.call().map(str::to_owned),
        stack: None,
        waker,
        count: total.count,
        total_ns: total.ns,
        max_ns: total.max_ns,
    }
}

/// The kernel's totals less the long waits: the short waits by their
/// call, without stacks; and each thread's time on the CPU per test.
fn short_lines(
    waits: &Waits,
    kernel: &KernelTotals,
    tree: &HashSet<Pid>,
) -> (Vec<Record>, Vec<Record>) {
    let mut short: HashMap<(WaitKey, Test), Total> = HashMap::new();
    let mut ran: HashMap<(Pid, Pid, Test), Total> = HashMap::new();
    for (key, total) in &kernel.totals {
        let taken = waits.taken.get(key).copied().unwrap_or_default();
        let left = Total {
            ns: total.ns.saturating_sub(taken.ns),
            count: total.count.saturating_sub(taken.count),
            // Of those left, the longest is known where none was taken.
            max_ns: if taken.count == 0 { total.max_ns } else { 0 },
        };
        if left.count == 0 {
            continue;
        }
        let test = waits.test_of(key.pid, key.epoch);
        if key.running() {
            let sum = ran.entry((key.pid, key.tid, test)).or_default();
            sum.ns += left.ns;
            sum.count += left.count;
            continue;
        }
        let sum = short
            .entry((WaitKey { epoch: 0, ..*key }, test))
            .or_default();
        sum.ns += left.ns;
        sum.count += left.count;
        sum.max_ns = sum.max_ns.max(left.max_ns);
    }
    let short = short.into_iter().map(|((key, test), total)| {
        let waker = waker_of(&key, tree, &kernel.outsiders);
        Record::OffCpu(off_cpu(&key, &test, key.reason(), waker, &total))
    });
    let ran = ran.into_iter().map(|((pid, tid, test), total)| {
        Record::OnCpu(OnCpu {
            pid,
            tid,
            test: test.map(|t| t.to_string()),
            ns: total.ns,
            slices: total.count,
        })
    });
    (short.collect(), ran.collect())
}

/// Who woke the waits of `key`: a process of the `tree` (every process
/// that ran has a total), else one outside it, by the name the kernel
/// kept of it.
fn waker_of(key: &WaitKey, tree: &HashSet<Pid>, outsiders: &HashMap<Pid, String>) -> Option<Waker> {
    if key.waker_pid == 0 {
        return interrupt(key);
    }
    Some(if tree.contains(&key.waker_pid) {
        Waker::Tree {
            pid: key.waker_pid,
            tid: key.waker_tid,
            stack: None,
        }
    } else {
        let name = outsiders.get(&key.waker_pid);
        Waker::Outside {
            pid: key.waker_pid,
            name: name.cloned().unwrap_or_else(|| "?".into()),
        }
    })
}

/// By thread and test, the longest first; each thread's CPU line first.
fn sort_lines(lines: &mut [Record]) {
    lines.sort_by_cached_key(|record| match record {
        Record::OnCpu(r) => (r.pid, r.tid, r.test.clone(), 0, Reverse(r.ns), 0),
        Record::OffCpu(r) => (
            r.pid,
            r.tid,
            r.test.clone(),
            1,
            Reverse(r.total_ns),
            r.stack.map_or(0, |s| u64::from(s) + 1),
        ),
        _ => (0, 0, None, 2, Reverse(0), 0),
    });
}

/// A long wait's reason, sharpened by the kernel functions it waited in:
/// a wait outside a system call in the page fault handler, a sleep in a
/// kernel lock, an I/O wait where its call told nothing.
fn refine(reason: WaitReason, names: &Names, places: &[Place]) -> WaitReason {
    let kernel: Vec<&str> = places
        .iter()
        .filter(|p| matches!(p, Place::Kernel(_)))
        .flat_map(|p| names.frames(p))
        .filter_map(|&id| names.table.get(id as usize)?.function.as_deref())
        .collect();
    let any = |names: &[&str]| {
        kernel
            .iter()
            .any(|f| names.iter().any(|n| f.starts_with(n)))
    };
    if any(&[
        "exc_page_fault",
        "do_page_fault",
        "handle_mm_fault",
        "do_mem_abort",
    ]) {
        return WaitReason::PageFault;
    }
    match reason {
        WaitReason::Other | WaitReason::Disk | WaitReason::Device
            if any(&[
                "mutex_lock",
                "__mutex_lock",
                "rwsem_down",
                "down_read",
                "down_write",
            ]) =>
        {
            WaitReason::Lock
        }
        WaitReason::Other if any(&["io_schedule", "folio_wait", "wait_on_page", "blk_"]) => {
            WaitReason::Disk
        }
        WaitReason::Other if any(&["pipe_read", "pipe_write", "wait_for_partner"]) => {
            WaitReason::Pipe
        }
        other => other,
    }
}

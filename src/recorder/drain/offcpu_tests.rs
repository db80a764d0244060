//! The waits (`--off-cpu`) through the drain and the collector, fed the
//! waits ring's records and the kernel's totals as the BPF side makes
//! them, with no kernel: the long waits counted with their stacks and
//! their wakers', taken out of the totals, which give the short waits,
//! the time on the CPU, and their tests.

use super::tests::{fork, frames_of, header, routed, sampled_here, CHILD, ROOT};
use crate::bpf::types::{
    event_kind, mark_event, offcpu_flags, offcpu_state, wait_event, wait_key, waker_event,
};
use crate::event::{LongWait, OffCpu, OnCpu, Pid, Record, WaitReason, Waker};
use crate::recorder::collect::{KernelTotals, Total};
use crate::recorder::wire::{bytes_of, WaitKey};
use crate::syscalls;

const MS: u64 = 1_000_000;

fn nr(call: &str) -> i32 {
    let found = syscalls::NATIVE.iter().find(|(_, name)| *name == call);
    found
        .map(|(nr, _)| *nr as i32)
        .expect("a call of the table")
}

/// The key of a wait of ROOT in `call`, woken by `waker` (0: an
/// interrupt), under the marks up to `epoch`.
fn key(call: &str, file_type: u16, waker: Pid, epoch: u32) -> wait_key {
    wait_key {
        pid: ROOT,
        tid: ROOT,
        epoch,
        syscall: nr(call),
        waker_pid: waker,
        waker_tid: waker,
        file_type,
        state: offcpu_state::OFFCPU_SLEEPING.0 as u8,
        flags: if waker == 0 {
            offcpu_flags::OFFCPU_WOKEN_BY_IRQ.0 as u8
        } else {
            0
        },
        _pad: 0,
    }
}

/// A long wait as the kernel sends it: from `off` to its wakeup and on
/// to `on`, with this thread's stack as the stash copied it.
fn wait(key: wait_key, off: u64, woken: u64, on: u64) -> Vec<u8> {
    let (regs, stack) = sampled_here();
    let fixed = std::mem::offset_of!(wait_event, stack);
    let e = wait_event {
        header: header(event_kind::EVENT_WAIT, key.pid, on),
        key,
        off_at: off,
        woken_at: woken,
        stack_len: stack.len() as u32,
        ip: regs.ip,
        sp: regs.sp,
        fp: regs.fp,
        lr: regs.lr,
        ..Default::default()
    };
    let mut data = bytes_of(&e)[..fixed].to_vec();
    data.extend_from_slice(&stack);
    data
}

/// CHILD, as it woke ROOT at `at`.
fn wakeup(at: u64) -> Vec<u8> {
    let (regs, stack) = sampled_here();
    let fixed = std::mem::offset_of!(waker_event, stack);
    let e = waker_event {
        header: header(event_kind::EVENT_WAKER, CHILD, at),
        tid: CHILD,
        wakee_tid: ROOT,
        stack_len: stack.len() as u32,
        ip: regs.ip,
        sp: regs.sp,
        fp: regs.fp,
        lr: regs.lr,
        ..Default::default()
    };
    let mut data = bytes_of(&e)[..fixed].to_vec();
    data.extend_from_slice(&stack);
    data
}

/// ROOT's mark of its test, the first of the tree's (epoch 1).
fn mark(timestamp: u64, value: &str) -> Vec<u8> {
    let mut e = mark_event {
        header: header(event_kind::EVENT_TEST_MARK, ROOT, timestamp),
        tid: ROOT,
        set: 1,
        epoch: 1,
        ..Default::default()
    };
    for (to, from) in e.value.iter_mut().zip(value.bytes()) {
        *to = from as _;
    }
    bytes_of(&e)
}

fn total(ns: u64, count: u64) -> Total {
    Total {
        ns,
        count,
        max_ns: ns,
    }
}

fn bare(state: offcpu_state, epoch: u32) -> WaitKey {
    WaitKey::of(&wait_key {
        pid: ROOT,
        tid: ROOT,
        epoch,
        syscall: -1,
        state: state.0 as u8,
        ..Default::default()
    })
}

/// What the drain and collector make of a long sleep in a test, a pipe
/// read CHILD's write ended before it, and the kernel's totals.
fn recorded() -> Vec<Record> {
    let sleep = key("clock_nanosleep", 0, 0, 1);
    // A pipe (file type 1) read that CHILD's write ended.
    let pipe = key("read", 1, CHILD, 0);
    let (records, _) = routed(|router| {
        // CHILD shares ROOT's mappings, in which its stack is unwound.
        router.record(&fork(ROOT, CHILD, 5));
        router.hit(&mark(10, "t.py::test_a (call)"));
        router.wait(&wait(sleep, 100, 100 + 5 * MS, 100 + 5 * MS + 100));
        router.wait(&wakeup(30 * MS));
        router.wait(&wait(pipe, 20 * MS, 30 * MS, 31 * MS));
        // What the kernel added up: the long waits too, and two short
        // sleeps, the time runnable and on the CPU.
        let totals = vec![
            (WaitKey::of(&sleep), total(5 * MS + 2 * MS, 3)),
            (WaitKey::of(&pipe), total(10 * MS, 1)),
            (bare(offcpu_state::OFFCPU_RUNNABLE, 1), total(100, 1)),
            (bare(offcpu_state::OFFCPU_RUNNABLE, 0), total(MS + 50, 2)),
            (bare(offcpu_state::OFFCPU_RUNNING, 1), total(4 * MS, 7)),
        ];
        let totals = KernelTotals {
            totals,
            outsiders: Default::default(),
        };
        router.collector().expect("a collector").wait_totals(totals);
    });
    records
}

/// The OffCpu lines of `records`.
fn off_cpu(records: &[Record]) -> Vec<&OffCpu> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::OffCpu(r) => Some(r),
            _ => None,
        })
        .collect()
}

#[test]
fn waits_are_counted_with_their_stacks_wakers_and_tests() {
    let records = recorded();
    let off = off_cpu(&records);
    let of = |reason: WaitReason, stacked: bool| {
        let found = off
            .iter()
            .find(|r| r.reason == reason && r.stack.is_some() == stacked);
        *found.unwrap_or_else(|| panic!("{reason:?} {stacked} in {off:#?}"))
    };
    let test = Some("t.py::test_a".to_owned());

    // The long sleep, with its stack, woken by the timer, in the test the
    // mark before it named.
    let long = of(WaitReason::Sleep, true);
    assert_eq!(
        (long.count, long.total_ns, &long.test, &long.waker),
        (1, 5 * MS, &test, &Some(Waker::Interrupt))
    );
    assert_eq!(long.call.as_deref(), Some("clock_nanosleep"));
    let frames = frames_of(&records, long.stack.unwrap());
    assert!(
        frames
            .last()
            .is_some_and(|f| f.ends_with("::tests::sampled_here")),
        "{frames:?}"
    );
    // The two short ones: the kernel's total less the long one.
    let short = of(WaitReason::Sleep, false);
    assert_eq!((short.count, short.total_ns), (2, 2 * MS));

    // The pipe, woken by CHILD, whose stack came before it; before the
    // mark's epoch, in no test.
    let pipe = of(WaitReason::Pipe, true);
    assert_eq!((pipe.count, pipe.total_ns, &pipe.test), (1, 10 * MS, &None));
    let Some(Waker::Tree { pid, stack, .. }) = &pipe.waker else {
        panic!("{pipe:?}")
    };
    assert_eq!(*pid, CHILD);
    assert!(frames_of(&records, stack.expect("the waker's stack")).len() > 1);
    assert!(!off
        .iter()
        .any(|r| r.reason == WaitReason::Pipe && r.stack.is_none()));
}

#[test]
fn runnable_time_on_cpu_time_and_long_waits_are_written() {
    let records = recorded();
    let off = off_cpu(&records);
    let test = Some("t.py::test_a".to_owned());
    // Runnable: every wakeup's, the long waits' too, by test.
    let runnable: Vec<(u64, u64, &Option<String>)> = off
        .iter()
        .filter(|r| r.reason == WaitReason::Runnable)
        .map(|r| (r.count, r.total_ns, &r.test))
        .collect();
    assert_eq!(runnable.len(), 2, "{runnable:?}");
    assert!(runnable.contains(&(1, 100, &test)), "{runnable:?}");
    assert!(runnable.contains(&(2, MS + 50, &None)), "{runnable:?}");
    let ran: Vec<&OnCpu> = records
        .iter()
        .filter_map(|r| match r {
            Record::OnCpu(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(ran.len(), 1);
    assert_eq!((ran[0].ns, ran[0].slices, &ran[0].test), (4 * MS, 7, &test));

    let long_waits: Vec<&LongWait> = records
        .iter()
        .filter_map(|r| match r {
            Record::LongWait(r) => Some(r),
            _ => None,
        })
        .collect();
    let times: Vec<_> = long_waits
        .iter()
        .map(|w| (w.reason, w.off, w.woken, w.on, w.waker_pid))
        .collect();
    assert_eq!(
        times,
        [
            (
                WaitReason::Sleep,
                100,
                Some(100 + 5 * MS),
                100 + 5 * MS + 100,
                None
            ),
            (
                WaitReason::Pipe,
                20 * MS,
                Some(30 * MS),
                31 * MS,
                Some(CHILD)
            ),
        ]
    );
}

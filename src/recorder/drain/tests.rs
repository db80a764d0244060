//! The drain's routing and the collector, fed records as the kernel
//! writes them, with no kernel: the test process plays a sampled one.

use std::hint::black_box;

use crossbeam_channel::Receiver;

use super::route::Router;
use crate::bpf::types::{
    event_header, event_kind, exec_event, exit_event, fork_event, hit_event, id_event, mark_event,
    sample_event,
};
use crate::event::{CpuSamples, Pid, ProbeHits, Record};
use crate::recorder::collect::{Announcer, Collector, Counted, Setup};
use crate::recorder::lineage::Lineage;
use crate::recorder::wire::{bytes_of, mappings::maps_line, Seen};
use crate::stacks::test_support::{capture_regs, read_self};
use crate::stacks::unwind::Regs;

pub(super) const ROOT: Pid = 4242;
pub(super) const CHILD: Pid = 4243;

/// The mappings of this process, announced as the root's.
struct Announced(Vec<Seen>);

impl Announcer for Announced {
    fn drain(&mut self, each: &mut dyn FnMut(Seen)) {
        self.0.drain(..).for_each(each);
    }

    fn lost(&self) -> u64 {
        0
    }
}

pub(super) fn header(kind: event_kind, pid: Pid, timestamp: u64) -> event_header {
    event_header {
        kind: kind.0,
        pid,
        timestamp,
    }
}

fn exec(pid: Pid, timestamp: u64) -> Vec<u8> {
    let (name, args) = (b"/bin/true\0", b"true\0");
    let mut e = exec_event {
        header: header(event_kind::EVENT_EXEC, pid, timestamp),
        filename_len: name.len() as u32,
        args_len: args.len() as u32,
        ..Default::default()
    };
    e.ppid = 1;
    let mut data = bytes_of(&e);
    data.extend_from_slice(name);
    data.extend_from_slice(args);
    data
}

pub(super) fn fork(parent: Pid, child: Pid, timestamp: u64) -> Vec<u8> {
    bytes_of(&fork_event {
        header: header(event_kind::EVENT_FORK, child, timestamp),
        parent_pid: parent,
        child_ppid: parent,
        ..Default::default()
    })
}

fn exit(pid: Pid, timestamp: u64) -> Vec<u8> {
    bytes_of(&exit_event {
        header: header(event_kind::EVENT_EXIT, pid, timestamp),
        ppid: ROOT,
        ..Default::default()
    })
}

fn setsid(pid: Pid, timestamp: u64) -> Vec<u8> {
    bytes_of(&id_event {
        header: header(event_kind::EVENT_SETSID, pid, timestamp),
        id: pid,
        ..Default::default()
    })
}

fn mark(pid: Pid, timestamp: u64, value: &str) -> Vec<u8> {
    let mut e = mark_event {
        header: header(event_kind::EVENT_TEST_MARK, pid, timestamp),
        tid: pid,
        set: 1,
        ..Default::default()
    };
    for (to, from) in e.value.iter_mut().zip(value.bytes()) {
        *to = from as _;
    }
    bytes_of(&e)
}

/// A sample with no user stack.
fn bare_sample(pid: Pid, timestamp: u64) -> Vec<u8> {
    let fixed = std::mem::offset_of!(sample_event, stack);
    let e = sample_event {
        header: header(event_kind::EVENT_SAMPLE, pid, timestamp),
        tid: pid,
        ..Default::default()
    };
    bytes_of(&e)[..fixed].to_vec()
}

/// A sample of this thread taken in `sampled_here`, as the kernel copies
/// one: the registers and the top 8 KiB of the stack.
fn sample(pid: Pid, timestamp: u64) -> Vec<u8> {
    let (regs, stack) = under_a_big_frame();
    let fixed = std::mem::offset_of!(sample_event, stack);
    let e = sample_event {
        header: header(event_kind::EVENT_SAMPLE, pid, timestamp),
        tid: pid,
        ip: regs.ip,
        sp: regs.sp,
        fp: regs.fp,
        lr: regs.lr,
        stack_len: stack.len() as u32,
        ..Default::default()
    };
    let mut data = bytes_of(&e)[..fixed].to_vec();
    data.extend_from_slice(&stack);
    data
}

/// `sampled_here`'s sample, taken under a frame bigger than the copy:
/// the copy ends in it however the test was built (optimized, the rest
/// of the thread's stack fits in 8 KiB).
#[inline(never)]
fn under_a_big_frame() -> (Regs, Vec<u8>) {
    let pad = black_box([0u8; 16 << 10]);
    let sampled = sampled_here();
    black_box(&pad);
    sampled
}

/// A small frame: the copy reaches past it to its callers'.
#[inline(never)]
pub(super) fn sampled_here() -> (Regs, Vec<u8>) {
    let regs = capture_regs!();
    black_box((regs, read_self(regs.sp, 8192)))
}

fn hit(pid: Pid, timestamp: u64, probe: u32) -> Vec<u8> {
    let fixed = std::mem::offset_of!(hit_event, stack);
    let e = hit_event {
        header: header(event_kind::EVENT_HIT, pid, timestamp),
        tid: pid,
        probe,
        ..Default::default()
    };
    bytes_of(&e)[..fixed].to_vec()
}

/// Everything the router gave out, in order, and what it counted.
pub(super) fn routed(feed: impl FnOnce(&Router)) -> (Vec<Record>, Counted) {
    let (events, received): (_, Receiver<Record>) = crossbeam_channel::unbounded();
    let (notices, _) = crossbeam_channel::unbounded();
    let collector = Collector::start(Setup::default(), events.clone()).unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let announced = maps
        .lines()
        .filter_map(|line| maps_line(ROOT, 1, line))
        .map(Seen::Mapped)
        .collect();
    collector.watch(Box::new(Announced(announced)), Vec::new());
    let mut router = Router::new(0, Vec::new(), Some(collector), events, notices);
    feed(&router);
    let mut lineage = Lineage::new(ROOT);
    assert!(router.release(None, &mut lineage).is_some());
    let counted = router.finish().expect("a collector");
    drop(router);
    (received.iter().collect(), counted)
}

#[test]
fn records_go_through_the_drain_and_collector_in_the_kernels_order() {
    let (records, counted) = routed(|router| {
        // As perf buffers interleave CPUs: out of time order.
        router.record(&fork(ROOT, CHILD, 200));
        router.record(&exec(ROOT, 100));
        router.record(&exit(CHILD, 300));
        router.record(&setsid(ROOT, 150));
        router.sample(&sample(ROOT, 500));
        router.hit(&hit(ROOT, 450, 3));
        router.hit(&mark(ROOT, 400, "t.py::test_a (call)"));
        router.sample(&bare_sample(ROOT, 350));
    });
    let events: Vec<_> = records
        .iter()
        .take_while(|r| !r.is_profile())
        .map(|r| (r.seq(), r.kind(), r.timestamp()))
        .collect();
    assert_eq!(
        events,
        [
            (Some(0), "Exec", Some(100)),
            (Some(1), "SetSID", Some(150)),
            (Some(2), "Fork", Some(200)),
            (Some(3), "Exit", Some(300)),
        ]
    );
    assert!(records[events.len()..].iter().all(Record::is_profile));
    assert_eq!((counted.samples, counted.hits), (2, 1));

    // The sample before the test's mark is the process's own; the one
    // after it is the test's, unwound through the function it was taken
    // in, named from the file.
    let samples: Vec<&CpuSamples> = records
        .iter()
        .filter_map(|r| match r {
            Record::CpuSamples(s) => Some(s),
            _ => None,
        })
        .collect();
    let of = |test: Option<&str>| {
        let found = samples.iter().find(|s| s.test.as_deref() == test);
        found.unwrap_or_else(|| panic!("{test:?} in {samples:#?}"))
    };
    assert_eq!(
        (of(None).pid, of(None).count, of(None).first),
        (ROOT, 1, 350)
    );
    let in_test = of(Some("t.py::test_a"));
    assert_eq!((in_test.count, in_test.first), (1, 500));
    // Unwound from the leaf to its caller, in whose frame the copy ends.
    let functions = frames_of(&records, in_test.stack);
    let [cut, .., caller, leaf] = &functions[..] else {
        panic!("{functions:?}")
    };
    // The copy ends long before the thread's first frame: said so.
    assert_eq!(cut, "[stack cut short]", "{functions:?}");
    assert!(leaf.ends_with("::tests::sampled_here"), "{functions:?}");
    assert!(
        caller.ends_with("::tests::under_a_big_frame"),
        "{functions:?}"
    );

    let hits: Vec<&ProbeHits> = records
        .iter()
        .filter_map(|r| match r {
            Record::ProbeHits(h) => Some(h),
            _ => None,
        })
        .collect();
    assert_eq!(hits.len(), 1);
    let hit = hits[0];
    assert_eq!(
        (hit.pid, hit.test.as_deref(), hit.probe, hit.count),
        (ROOT, Some("t.py::test_a"), 3, 1)
    );
}

/// The functions of stack `id`, the outermost first.
pub(super) fn frames_of(records: &[Record], id: u32) -> Vec<String> {
    let stack = records.iter().find_map(|r| match r {
        Record::Stack(s) if s.id == id => Some(s),
        _ => None,
    });
    let frames = &stack.expect("the stack is written").frames;
    frames
        .iter()
        .map(|&frame| {
            let found = records.iter().find_map(|r| match r {
                Record::Frame(f) if f.id == frame => f.function.clone(),
                _ => None,
            });
            found.unwrap_or_default()
        })
        .collect()
}

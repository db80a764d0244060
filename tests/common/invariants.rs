//! What every recording must satisfy, checked on every run a test makes:
//! whole lines, one header and one trailer, gapless seq in time order, no
//! event of a process before its Fork or after its Exit, one Exit per
//! process, the profile's lines after the events and consistent.

use std::collections::{BTreeMap, BTreeSet};

use proctrace::event::{power_bucket, Pid, Record, Waker};
use proctrace::text::shell_join;

use super::*;

impl Run {
    /// The CPU profile's invariants: its lines come together after the
    /// events, frames before the stacks that name them and stacks before
    /// the samples, every id once; the samples are of processes of the
    /// tree and add up to the trailer's count.
    fn check_profile(&self, ctx: &dyn Fn() -> String) {
        let lines = self.profile_lines();
        assert!(
            lines.iter().all(Record::is_profile),
            "profile lines interleaved\n{}",
            ctx()
        );
        let header = self.header();
        if header.cpu_profile.is_none() && header.probes.is_empty() && header.off_cpu.is_none() {
            assert!(
                lines.is_empty(),
                "profile lines without a profile or probes\n{}",
                ctx()
            );
        }
        let probes = self.header().probes.len() as u32;
        let (mut frames, mut stacks) = (BTreeSet::new(), BTreeSet::new());
        let known: BTreeSet<Pid> = self
            .events()
            .iter()
            .filter_map(Record::pid)
            .chain([self.root()])
            .collect();
        let (mut samples, mut hits, mut waits, mut long_waits) = (0, 0, 0, 0);
        for line in lines {
            match line {
                Record::Frame(f) => assert!(frames.insert(f.id), "frame {} twice\n{}", f.id, ctx()),
                Record::Stack(s) => {
                    assert!(stacks.insert(s.id), "stack {} twice\n{}", s.id, ctx());
                    assert!(
                        s.frames.iter().all(|f| frames.contains(f)),
                        "stack {} names an unknown frame\n{}",
                        s.id,
                        ctx()
                    );
                }
                Record::CpuSamples(c) => {
                    assert!(stacks.contains(&c.stack), "{c:?}: no such stack\n{}", ctx());
                    assert!(
                        known.contains(&c.pid),
                        "{c:?}: not a process of the tree\n{}",
                        ctx()
                    );
                    assert!(c.count > 0 && c.first <= c.last, "{c:?}\n{}", ctx());
                    assert!(c.test.as_ref().is_none_or(|t| !t.is_empty()), "{c:?}");
                    samples += c.count;
                }
                Record::ProbeHits(h) => {
                    assert!(
                        h.stack.is_none_or(|s| stacks.contains(&s)),
                        "{h:?}: no such stack\n{}",
                        ctx()
                    );
                    assert!(h.probe < probes, "{h:?}: no such probe\n{}", ctx());
                    assert!(known.contains(&h.pid), "{h:?}: not of the tree\n{}", ctx());
                    assert!(h.count > 0 && h.first <= h.last, "{h:?}\n{}", ctx());
                    assert!(h.test.as_ref().is_none_or(|t| !t.is_empty()), "{h:?}");
                    hits += h.count;
                }
                Record::ProbeLatency(l) => {
                    assert!(l.probe < probes && l.ret < probes, "{l:?}\n{}", ctx());
                    assert!(known.contains(&l.pid), "{l:?}: not of the tree\n{}", ctx());
                    let calls: u64 = l.buckets.iter().map(|[_, n]| n).sum();
                    assert!(calls == l.count && l.min <= l.max, "{l:?}\n{}", ctx());
                }
                Record::ProbeArgs(a) => {
                    assert!(a.probe < probes, "{a:?}: no such probe\n{}", ctx());
                    assert!(known.contains(&a.pid), "{a:?}: not of the tree\n{}", ctx());
                    assert!(a.count > 0, "{a:?}\n{}", ctx());
                    assert!(a.test.as_ref().is_none_or(|t| !t.is_empty()), "{a:?}");
                }
                Record::ProbeHistogram(h) => {
                    assert!(h.probe < probes, "{h:?}: no such probe\n{}", ctx());
                    assert!(known.contains(&h.pid), "{h:?}: not of the tree\n{}", ctx());
                    let sorted = h.buckets.windows(2).all(|w| w[0].0 < w[1].0);
                    assert!(sorted && h.buckets.iter().all(|b| b.1 > 0), "{h:?}");
                    let bounds = h.buckets.iter().all(|b| power_bucket(b.0) == b.0);
                    assert!(bounds, "{h:?}: not a power of two's bucket");
                }
                Record::OffCpu(w) => {
                    let stacked = w.stack.into_iter().chain(match &w.waker {
                        Some(Waker::Tree { stack, .. }) => *stack,
                        _ => None,
                    });
                    assert!(
                        stacked.into_iter().all(|s| stacks.contains(&s)),
                        "{w:?}: no such stack\n{}",
                        ctx()
                    );
                    assert!(known.contains(&w.pid), "{w:?}: not of the tree\n{}", ctx());
                    assert!(w.count > 0 && w.max_ns <= w.total_ns, "{w:?}\n{}", ctx());
                    assert!(w.test.as_ref().is_none_or(|t| !t.is_empty()), "{w:?}");
                    waits += w.count;
                }
                Record::OnCpu(r) => {
                    assert!(known.contains(&r.pid), "{r:?}: not of the tree\n{}", ctx());
                    assert!(r.slices > 0, "{r:?}\n{}", ctx());
                }
                Record::LongWait(w) => {
                    assert!(known.contains(&w.pid), "{w:?}: not of the tree\n{}", ctx());
                    let woken = w.woken.unwrap_or(w.off);
                    assert!(w.off <= woken && woken <= w.on, "{w:?}\n{}", ctx());
                    long_waits += 1;
                }
                Record::TestAttempt(a) => {
                    let pids = std::iter::once(a.pid).chain(a.test_pid);
                    assert!(
                        pids.into_iter().all(|p| known.contains(&p)),
                        "{a:?}\n{}",
                        ctx()
                    );
                    let (start, end) = (a.start.unwrap_or(0), a.end.unwrap_or(u64::MAX));
                    assert!(start <= end, "{a:?}\n{}", ctx());
                }
                _ => unreachable!(),
            }
        }
        assert_eq!(samples, self.trailer().samples, "{}", ctx());
        assert_eq!(hits, self.trailer().probe_hits, "{}", ctx());
        // Every wait counted is on an OffCpu line; every long one kept
        // is a LongWait, or said left out.
        let trailer = self.trailer();
        assert_eq!(waits, trailer.waits, "{}", ctx());
        assert_eq!(
            long_waits + trailer.long_waits_left_out,
            trailer.long_waits,
            "{}",
            ctx()
        );
    }

    /// The invariants every finished recording satisfies.
    pub fn check(&self) {
        let ctx = || format!("stderr:\n{}\nrecording:\n{}", self.stderr, self.text);
        assert!(self.records.len() >= 2, "{}", ctx());
        let header = self.header();
        let trailer = self.trailer();
        for (i, r) in self.records.iter().enumerate() {
            let edge = i == 0 || i == self.records.len() - 1;
            assert_eq!(
                matches!(r, Record::Header(_) | Record::Trailer(_)),
                edge,
                "header/trailer out of place at line {}\n{}",
                i + 1,
                ctx()
            );
        }
        assert_eq!(header.command, self.command, "{}", ctx());
        assert_eq!(header.raw, self.opts.raw, "{}", ctx());
        assert_eq!(header.buffer, self.opts.mode.buffer(), "{}", ctx());
        if let Some(hook) = self.opts.mode.syscall_hook() {
            assert_eq!(header.syscall_hook, Some(hook), "{}", ctx());
        }
        assert_eq!(trailer.events, self.events().len() as u64, "{}", ctx());
        assert_eq!(
            (
                trailer.lost,
                trailer.lost_buffer_full,
                trailer.lost_tracking_full
            ),
            (0, 0, 0),
            "{}",
            ctx()
        );
        // One gapless global order; timestamps never go back.
        let mut last_ts = 0;
        for (i, r) in self.events().iter().enumerate() {
            assert_eq!(r.seq(), Some(i as u64), "seq gap\n{}", ctx());
            let ts = r.timestamp().unwrap();
            assert!(ts >= last_ts, "timestamp goes back at seq {i}\n{}", ctx());
            last_ts = ts;
        }
        assert!(trailer.end_timestamp >= last_ts, "{}", ctx());
        self.check_profile(&ctx);
        for e in self.all_execs() {
            assert_eq!(e.cmdline, shell_join(&e.argv_bytes()), "{}", ctx());
        }
        for e in self.all_exits() {
            assert!(
                e.exit_code.is_some() != e.signal.is_some(),
                "exit needs exactly one of code/signal: {e:?}\n{}",
                ctx()
            );
            assert!(!e.core_dumped || e.signal.is_some(), "{e:?}");
        }
        // An --on-hang run is about a culprit as its snapshot saw it, and
        // ends after it: its process may be gone by then.
        for r in self.events() {
            if let Record::OnHang(run) = r {
                let in_snapshot = self.events().iter().any(|s| {
                    matches!(s, Record::Snapshot(s) if s.pid == run.pid && s.timestamp == run.snapshot)
                });
                assert!(
                    in_snapshot,
                    "{run:?} names no snapshot's process\n{}",
                    ctx()
                );
                assert!(run.timestamp >= run.snapshot, "{run:?}\n{}", ctx());
            }
        }
        // Causal order per process: Fork, then Exec/SetSID/SetPGID, Exit last.
        let mut seen: BTreeMap<Pid, Vec<&'static str>> = BTreeMap::new();
        for r in self.events().iter().filter(|r| r.kind() != "OnHang") {
            let pid = r.pid().unwrap();
            let history = seen.entry(pid).or_default();
            let k = r.kind();
            if !self.header().raw {
                assert!(
                    k != "Fork" || history.is_empty(),
                    "second fork of pid {pid}\n{}",
                    ctx()
                );
            }
            assert!(
                !history.contains(&"Exit") || (self.header().raw && k == "Fork"),
                "{k} of {pid} after its exit\n{}",
                ctx()
            );
            if self.header().raw && k == "Fork" {
                history.clear();
            }
            history.push(k);
        }
        if self.header().raw {
            return;
        }
        // The tree is closed: the root and children of known processes only.
        let root = self.root();
        assert!(
            !self.kinds(root).contains(&"Fork"),
            "root forked\n{}",
            ctx()
        );
        assert_eq!(
            self.events().first().map(Record::kind),
            Some("Exec"),
            "the root's exec comes first\n{}",
            ctx()
        );
        let first = self.execs(root);
        assert!(!first.is_empty(), "{}", ctx());
        let mut alive: BTreeSet<Pid> = [root].into();
        let mut known: BTreeSet<Pid> = [root].into();
        for r in self.events().iter().filter(|r| r.kind() != "OnHang") {
            match r {
                Record::Fork(f) => {
                    assert!(
                        alive.contains(&f.parent_pid),
                        "fork by {} which is not a live process of the tree\n{}",
                        f.parent_pid,
                        ctx()
                    );
                    assert!(known.insert(f.child_pid), "{}", ctx());
                    alive.insert(f.child_pid);
                }
                Record::Exit(e) => {
                    assert!(alive.remove(&e.pid), "exit of unknown {}\n{}", e.pid, ctx());
                }
                other => {
                    let pid = other.pid().unwrap();
                    // Not before its Fork, nor after its Exit.
                    assert!(
                        alive.contains(&pid),
                        "{} of {pid} outside its life in the tree\n{}",
                        other.kind(),
                        ctx()
                    );
                }
            }
        }
        if !trailer.interrupted {
            assert!(alive.is_empty(), "no exit for {alive:?}\n{}", ctx());
            let root_exit = self.exit(root);
            assert_eq!(trailer.root_exit_code, root_exit.exit_code, "{}", ctx());
            assert_eq!(trailer.root_signal, root_exit.signal, "{}", ctx());
            // timeout(1)'s status when `--timeout` ended the tree.
            let expected = match trailer.timed_out {
                true => Some(124),
                false => root_exit.shell_status(),
            };
            assert_eq!(
                self.status.code(),
                expected,
                "proctrace's status is the command's\n{}",
                ctx()
            );
        }
    }
}

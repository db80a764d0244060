//! The collector: its own thread takes the samples and probe hits as the
//! drain reads them, the tree's forks, execs and exits as the drain
//! releases them, and the executable mappings as the kernel announces
//! them; puts them in one time order ([`timeline`]), turns each sample
//! into places against the mappings in force when it was taken
//! ([`crate::recorder::frames`]), and counts stacks per process and test
//! ([`tally`]), calls per function ([`calls`]) and a runner's test
//! attempts ([`attempts`]), and with `--off-cpu` the tree's waits
//! ([`offcpu`]). At the end it names every frame once and sends the
//! profile's records on after the events ([`records`]).

mod attempts;
mod calls;
mod node_maps;
mod offcpu;
mod records;
mod roots;
mod stack_ids;
mod tally;
mod timeline;

use std::cell::Cell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::bpf::types::{py_binary_key, py_layout};
use crate::event::{Pid, Record};
use crate::recorder::frames::Frames;
use crate::recorder::probes::AttemptProbe;
use crate::recorder::watch::MmapWatch;
use crate::recorder::wire::{Hit, Mapping, Mark, PyCode, Sample, Seen, Wait, Wakeup};
use crate::stacks::cache::NameCache;
use attempts::Attempts;
use calls::Calls;
use node_maps::NodeMaps;
use offcpu::Waits;
pub(crate) use offcpu::{KernelTotals, Total};
use roots::Roots;
use tally::Tally;
use timeline::{Happened, Timeline, FORGET_AFTER};

/// How often the mappings are read between two `Upto`s: the kernel's
/// rings for them are small, and a build maps thousands of files.
const READ_MAPPINGS_EVERY: Duration = Duration::from_millis(10);

/// How often the places of new stacks are handed to be named while the
/// command runs, when nothing waits to be counted (see
/// [`Frames::name_ahead`]).
const NAME_AHEAD_EVERY: Duration = Duration::from_millis(50);

/// Bytes of hits' stack copies waiting to be counted past which hits lose
/// their stacks: a hot probe outruns the unwinding for a while (a batch
/// of 100 ms is counted at once, after the reorder window), and is held
/// in memory up to this.
const MAX_BACKLOG_BYTES: usize = 64 << 20;

/// Stack copies kept for reuse at the most: those of a burst of samples
/// or hits.
const SPARE_STACKS: usize = 1024;

/// The largest buffer kept for reuse: room for a hit's copy (8 KiB) as a
/// vector grows it, and for most samples'. A deeper sample's (up to 64
/// KiB) is freed, or a burst of them would stay held as spares.
const SPARE_STACK_BYTES: usize = 16 << 10;

/// What announces the tree's execs and executable mappings: the kernel's
/// perf rings ([`MmapWatch`]), or a list a test made.
pub(crate) trait Announcer: Send {
    /// Hands what was announced since the last call to `each`, with the
    /// times on the monotonic clock.
    fn drain(&mut self, each: &mut dyn FnMut(Seen));

    /// Announcements lost or garbled so far: frames in the mappings
    /// they were are `[unknown]`.
    fn lost(&self) -> u64;
}

impl Announcer for MmapWatch {
    fn drain(&mut self, each: &mut dyn FnMut(Seen)) {
        MmapWatch::drain(self, each);
    }

    fn lost(&self) -> u64 {
        MmapWatch::lost(self) + self.garbled()
    }
}

/// What the collector is told, in the order it happened.
enum Told {
    /// Announces the mappings of a process and its descendants, with
    /// those it has already.
    Watch(Box<dyn Announcer>, Vec<Mapping>),
    Sample(Sample),
    /// Known at once: the samples after it need it.
    PyCode(PyCode),
    Hit(Hit),
    Mark(Mark),
    Wait(Wait),
    Wakeup(Wakeup),
    /// The kernel's totals of every wait, once the tree is gone.
    WaitTotals(KernelTotals),
    Fork {
        parent: Pid,
        child: Pid,
        at: u64,
    },
    Exec {
        pid: Pid,
        at: u64,
    },
    Exit {
        pid: Pid,
        at: u64,
    },
    /// Everything up to here has been told: process it.
    Upto(u64),
}

/// What the collector counts, and how it names.
#[derive(Default)]
pub(crate) struct Setup {
    /// The monotonic time the recording began, which the mappings' times
    /// are made relative to.
    pub start: u64,
    /// The (uprobe, uretprobe) ids whose hits time calls.
    pub pairs: Vec<(u32, u32)>,
    /// The probes whose hits tell a runner's tests.
    pub attempts: HashMap<u32, AttemptProbe>,
    /// Where names learned are kept between recordings.
    pub names: NameCache,
    /// The kernel addresses of proctrace's own programs, left out of the
    /// kernel stacks taken inside them.
    pub own_code: Vec<std::ops::Range<u64>>,
    /// The kernel's maps of the processes that run a CPython interpreter
    /// and of the interpreters, where the collector puts each one it
    /// finds (see `frames::python`).
    pub python: Option<PythonMaps>,
    /// The programs the command's first execs run: an interpreter among
    /// them is read before the command starts (see `preload_python`).
    pub first_programs: Vec<PathBuf>,
    /// Whether the perf maps the tree's Node processes write are there
    /// because proctrace asked for them, to be removed once read.
    pub node_perf_maps_ours: bool,
    /// The process exits when the recording ends (see
    /// [`crate::recorder::Recorder::exits_after`]).
    pub exits_after: bool,
}

/// The kernel's `python_processes` and `python_binaries` maps.
pub(crate) struct PythonMaps {
    pub processes: MapHandle,
    pub binaries: MapHandle,
}

impl PythonMaps {
    /// The interpreter whose file is `key` is laid out as `layout` in
    /// every process that execs it.
    fn binary(&self, key: &py_binary_key, layout: &py_layout) {
        // SAFETY: plain C structs of integers.
        let (key, value) = unsafe { (plain::as_bytes(key), plain::as_bytes(layout)) };
        let _ = self.binaries.update(key, value, MapFlags::ANY);
    }
}

/// A handle on the collector's thread.
pub(crate) struct Collector {
    to: Sender<Told>,
    /// The stack copies of samples and hits counted, handed back to be
    /// filled again: the drain allocates nothing for them once warm.
    spare: Receiver<Vec<u8>>,
    thread: JoinHandle<Counted>,
    /// Hits counted without their stacks (see [`Collector::hit`]).
    stackless: Cell<u64>,
    /// Bytes of hits' stack copies told and not yet counted.
    backlog: Arc<AtomicUsize>,
}

/// What the collector counted; its records went on after the events.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counted {
    /// Samples counted.
    pub samples: u64,
    /// Probe hits counted.
    pub hits: u64,
    /// Mappings the kernel could not announce (its ring was full): frames
    /// in them are `[unknown]`.
    pub lost_mappings: u64,
    /// Probe hits counted without their stacks: they came faster than
    /// they could be unwound.
    pub stackless_hits: u64,
    /// Stretches off the CPU the kernel counted, the long waits sent
    /// with their stacks, and those of them not written one by one.
    pub waits: u64,
    pub long_waits: u64,
    pub long_waits_left_out: u64,
    /// Python frames named `[python]`: their code object could not be
    /// read while the process lived.
    pub unnamed_python: u64,
}

impl Collector {
    /// Starts the thread; the profile's records go to `records` when it
    /// finishes.
    pub fn start(mut setup: Setup, records: Sender<Record>) -> std::io::Result<Collector> {
        let (to, told) = crossbeam_channel::unbounded();
        let (give_back, spare) = crossbeam_channel::bounded(SPARE_STACKS);
        let backlog = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&backlog);
        let first_programs = std::mem::take(&mut setup.first_programs);
        let mut collecting = Collecting::new(setup, give_back, counted);
        let started = std::time::Instant::now();
        collecting.preload_python(&first_programs);
        log::debug!(
            "looked for an interpreter in {:?} in {:.1} ms",
            first_programs,
            started.elapsed().as_secs_f64() * 1e3
        );
        let thread = std::thread::Builder::new()
            .name("proctrace-collect".into())
            .spawn(move || collecting.run(told, records))?;
        Ok(Collector {
            to,
            spare,
            thread,
            stackless: Cell::new(0),
            backlog,
        })
    }

    /// Reads the mappings `announcer` announces from now on, after
    /// `mapped`, those its process has already.
    pub fn watch(&self, announcer: Box<dyn Announcer>, mapped: Vec<Mapping>) {
        let _ = self.to.send(Told::Watch(announcer, mapped));
    }

    /// A buffer for the stack copy of the next sample or hit.
    pub fn buffer(&self) -> Vec<u8> {
        self.spare.try_recv().unwrap_or_default()
    }

    /// A sample, as soon as it is read.
    pub fn sample(&self, sample: Sample) {
        let _ = self.to.send(Told::Sample(sample));
    }

    /// A code object of a process's Python frames, as soon as it is read.
    pub fn py_code(&self, code: PyCode) {
        let _ = self.to.send(Told::PyCode(code));
    }

    /// A process's word on its current test, as soon as it is read.
    pub fn mark(&self, mark: Mark) {
        let _ = self.to.send(Told::Mark(mark));
    }

    /// A probe's hit, as soon as it is read.
    pub fn hit(&self, mut hit: Hit) {
        // A hot probe outruns the unwinding: past the backlog, a hit is
        // counted without its stack copy rather than held in memory; its
        // registers still name where it was, and its stack is said to be
        // cut there.
        let bytes = hit.sample.stack.len();
        if bytes > 0 && self.backlog.fetch_add(bytes, Ordering::Relaxed) + bytes > MAX_BACKLOG_BYTES
        {
            self.backlog.fetch_sub(bytes, Ordering::Relaxed);
            hit.sample.stack = Vec::new();
            self.stackless.set(self.stackless.get() + 1);
        }
        let _ = self.to.send(Told::Hit(hit));
    }

    /// A released event of the tree: a fork starts a process with its
    /// parent's mappings, which the kernel does not announce again (it
    /// announces execs itself, before the new program's mappings).
    pub fn event(&self, record: &Record) {
        let told = match record {
            Record::Fork(fork) => Told::Fork {
                parent: fork.parent_pid,
                child: fork.child_pid,
                at: fork.timestamp,
            },
            Record::Exec(exec) => Told::Exec {
                pid: exec.pid,
                at: exec.timestamp,
            },
            Record::Exit(exit) => Told::Exit {
                pid: exit.pid,
                at: exit.timestamp,
            },
            _ => return,
        };
        let _ = self.to.send(told);
    }

    /// A long wait, or the waker of one, as soon as it is read.
    pub fn wait(&self, wait: Wait) {
        let _ = self.to.send(Told::Wait(wait));
    }

    pub fn wakeup(&self, wakeup: Wakeup) {
        let _ = self.to.send(Told::Wakeup(wakeup));
    }

    /// The kernel's totals of the tree's waits, read once it is gone.
    pub fn wait_totals(&self, totals: KernelTotals) {
        let _ = self.to.send(Told::WaitTotals(totals));
    }

    /// Every event up to `at` has been released.
    pub fn upto(&self, at: u64) {
        let _ = self.to.send(Told::Upto(at));
    }

    /// Processes what is left, sends the profile's records and says what
    /// was counted.
    pub fn finish(self) -> Counted {
        let _ = self.to.send(Told::Upto(u64::MAX));
        drop(self.to);
        let counted = self.thread.join().unwrap_or_default();
        Counted {
            stackless_hits: self.stackless.get(),
            ..counted
        }
    }
}

/// The collector's thread's state.
struct Collecting {
    /// Where stack copies go once counted.
    give_back: Sender<Vec<u8>>,
    /// Bytes of hits' stack copies told and not yet counted.
    backlog: Arc<AtomicUsize>,
    announcers: Vec<Box<dyn Announcer>>,
    /// The roots of processes in a chroot, to reach their files.
    roots: Roots,
    start: u64,
    frames: Frames,
    timeline: Timeline,
    tally: Tally,
    calls: Calls,
    attempts: Attempts,
    waits: Waits,
    /// The kernel's maps of the processes that run CPython.
    python: Option<PythonMaps>,
    /// The Node processes whose perf maps proctrace asked for.
    node_maps: Option<NodeMaps>,
}

impl Collecting {
    fn new(setup: Setup, give_back: Sender<Vec<u8>>, backlog: Arc<AtomicUsize>) -> Collecting {
        Collecting {
            give_back,
            backlog,
            announcers: Vec::new(),
            roots: Roots::default(),
            start: setup.start,
            frames: Frames::new(setup.names, setup.own_code, setup.exits_after),
            timeline: Timeline::default(),
            tally: Tally::default(),
            calls: Calls::new(setup.pairs),
            attempts: Attempts::new(setup.attempts),
            waits: Waits::default(),
            python: setup.python,
            node_maps: setup.node_perf_maps_ours.then(NodeMaps::default),
        }
    }

    /// Hands `stack`'s buffer back to the drain to be filled again.
    fn give_back(&self, stack: Vec<u8>) {
        if stack.capacity() <= SPARE_STACK_BYTES {
            let _ = self.give_back.try_send(stack);
        }
    }

    fn run(mut self, told: Receiver<Told>, records: Sender<Record>) -> Counted {
        let mut named = Instant::now();
        loop {
            match told.recv_timeout(READ_MAPPINGS_EVERY) {
                Ok(Told::Upto(at)) => {
                    self.read_mappings();
                    self.apply_upto(at);
                }
                Ok(told) => self.take(told),
                Err(RecvTimeoutError::Timeout) => self.read_mappings(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
            // Not while a flood waits: the naming thread would take the
            // core the collector needs to keep the hits' stacks.
            if told.is_empty() && named.elapsed() >= NAME_AHEAD_EVERY {
                self.frames.name_ahead(self.tally.stacks.take_new());
                named = Instant::now();
            }
        }
        self.read_mappings();
        self.apply_upto(u64::MAX);
        self.finish(&records)
    }

    /// Holds what was told until its time comes.
    fn take(&mut self, told: Told) {
        let (at, happened) = match told {
            Told::Watch(announcer, mapped) => {
                self.announcers.push(announcer);
                for m in mapped {
                    self.noticed(&Seen::Mapped(m.clone()));
                    self.frames.mapped(m);
                }
                return;
            }
            Told::PyCode(code) => return self.frames.py_code(code),
            Told::Sample(sample) => (sample.timestamp, Happened::Sample(sample)),
            Told::Hit(hit) => (hit.sample.timestamp, Happened::Hit(hit)),
            Told::Mark(mark) => (mark.timestamp, Happened::Mark(mark)),
            // After its waker's stacks; unwound against the mappings of
            // when it left the CPU, which are kept that long.
            Told::Wait(wait) => (wait.on, Happened::Wait(wait)),
            Told::Wakeup(wakeup) => (wakeup.stacks.timestamp, Happened::Wakeup(wakeup)),
            Told::WaitTotals(totals) => {
                self.waits.totals(totals);
                return;
            }
            Told::Fork { parent, child, at } => (at, Happened::Fork { parent, child }),
            Told::Exec { pid, at } => (at, Happened::Exec(pid)),
            Told::Exit { pid, at } => (at.saturating_add(FORGET_AFTER), Happened::Exit { pid, at }),
            Told::Upto(_) => return,
        };
        self.timeline.wait(at, happened);
    }

    /// The mappings the kernel has announced: every one made before a
    /// sample that was read is in by now.
    fn read_mappings(&mut self) {
        let mut seen = Vec::new();
        for announcer in &mut self.announcers {
            announcer.drain(&mut |s| seen.push(s));
        }
        for mut s in seen {
            match &mut s {
                Seen::Exec { pid, .. } => self.roots.exec(*pid),
                Seen::Mapped(mapping) => self.roots.reach(mapping),
            }
            self.noticed(&s);
            // The recording's own time, as the samples and events have it.
            let at = match &mut s {
                Seen::Exec { time, .. } => time,
                Seen::Mapped(mapping) => &mut mapping.time,
            };
            *at = at.saturating_sub(self.start);
            let at = *at;
            self.timeline.wait(at, Happened::Seen(s));
        }
    }

    /// What a new mapping says at once: a CPython interpreter, or Node.
    fn noticed(&mut self, seen: &Seen) {
        if let (Some(node), Seen::Mapped(mapping)) = (&mut self.node_maps, seen) {
            node.mapped(mapping);
        }
        self.find_python(seen);
    }

    /// Tells the kernel at once of a process that maps a CPython
    /// interpreter: its samples from then on have their Python frames;
    /// those of every later exec of an interpreter at fixed addresses too.
    fn find_python(&mut self, seen: &Seen) {
        let (Some(map), Seen::Mapped(mapping)) = (&self.python, seen) else {
            return;
        };
        let Some((layout, binary)) = self.frames.python_mapped(mapping) else {
            return;
        };
        // SAFETY: plain C structs of integers.
        let value = unsafe { plain::as_bytes(&layout) };
        let _ = map
            .processes
            .update(&mapping.pid.to_ne_bytes(), value, MapFlags::ANY);
        if let Some(key) = binary {
            map.binary(&key, &layout);
        }
    }

    /// Tells the kernel, before the command starts, of the interpreters
    /// at fixed addresses among `programs`: a process that execs one has
    /// its Python frames from its first instruction, where one found by
    /// its mapping has them only once the collector has read it (~10 ms
    /// on; a short test's whole life).
    fn preload_python(&mut self, programs: &[PathBuf]) {
        let Some(map) = &self.python else {
            return;
        };
        for program in programs {
            if let Some((layout, key)) = self.frames.python_preload(program) {
                map.binary(&key, &layout);
            }
        }
    }

    fn apply_upto(&mut self, at: u64) {
        while let Some((time, happened)) = self.timeline.next_upto(at) {
            match happened {
                Happened::Fork { parent, child } => {
                    self.frames.fork(parent, child, time);
                    self.tally.fork(parent, child);
                    self.waits.fork(parent, child);
                }
                Happened::Exec(pid) => {
                    self.tally.forget(pid);
                    self.waits.forget(pid);
                }
                Happened::Seen(seen) => self.frames.seen(seen),
                Happened::Sample(sample) => {
                    let places = self.frames.places(&sample);
                    self.tally.sample(sample.pid, sample.timestamp, places);
                    self.give_back(sample.stack);
                }
                Happened::Hit(mut hit) => {
                    let places = self.frames.places(&hit.sample);
                    self.calls.hit(&hit);
                    self.attempts.hit(&hit);
                    let stack = std::mem::take(&mut hit.sample.stack);
                    self.tally.hit(hit, places);
                    self.backlog.fetch_sub(stack.len(), Ordering::Relaxed);
                    self.give_back(stack);
                }
                Happened::Mark(mark) => {
                    self.waits.mark(&mark);
                    self.tally.mark(mark);
                }
                Happened::Wait(wait) => {
                    let places = self.frames.places(&wait.stacks);
                    self.waits.wait(&wait, places.to_vec());
                }
                Happened::Wakeup(wakeup) => {
                    let places = self.frames.places(&wakeup.stacks);
                    self.waits.wakeup(&wakeup, places.to_vec());
                }
                Happened::Exit { pid, at } => {
                    if let Some(node) = &mut self.node_maps {
                        node.exit(pid);
                    }
                    self.tally.forget(pid);
                    self.waits.forget(pid);
                    self.frames.exit(pid, at);
                }
            }
        }
    }

    /// Names every place once and sends the profile's records on.
    fn finish(mut self, to: &Sender<Record>) -> Counted {
        let counted = Counted {
            samples: self.tally.sample_total,
            hits: self.tally.hit_total,
            lost_mappings: self.announcers.iter().map(|a| a.lost()).sum(),
            stackless_hits: 0,
            waits: self.waits.counted(),
            long_waits: self.waits.long_count,
            long_waits_left_out: self.waits.left_out,
            unnamed_python: 0,
        };
        let by_id = self.tally.stacks.by_id();
        let places = by_id.into_iter().flatten().chain(self.waits.places());
        let names = self.frames.name(places);
        let counted = Counted {
            unnamed_python: self.frames.unnamed_python(),
            ..counted
        };
        if let Some(node) = self.node_maps.take() {
            node.remove();
        }
        let latencies = self.calls.into_records().into_iter();
        let attempts = self.attempts.into_records().into_iter();
        let records = records::records(self.tally, self.waits, names)
            .into_iter()
            .chain(latencies.map(Record::ProbeLatency))
            .chain(attempts.map(Record::TestAttempt));
        for record in records {
            if to.send(record).is_err() {
                break;
            }
        }
        counted
    }
}

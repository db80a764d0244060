//! A recording's CPU profile and probe hits as read back: every frame and
//! stack once, the samples of each process in each stack, and its hits of
//! each probe.

use std::collections::HashMap;

use crate::event::{
    CpuSamples, Frame, LongWait, OffCpu, OnCpu, Pid, ProbeArgs, ProbeHistogram, ProbeHits,
    ProbeLatency, Record,
};

/// The profile of a recording made with `record --cpu-profile`, and the
/// hits of one made with `record --probe`; empty for any other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    frames: HashMap<u32, Frame>,
    stacks: HashMap<u32, Vec<u32>>,
    /// Samples per process and stack, in the order they were written.
    pub samples: Vec<CpuSamples>,
    /// Probe hits per process, probe and stack (`record --probe`).
    pub probe_hits: Vec<ProbeHits>,
    /// USDT hits per process, probe and arguments.
    pub probe_args: Vec<ProbeArgs>,
    /// Kept numbers per process, probe and value, by power of two.
    pub probe_histograms: Vec<ProbeHistogram>,
    /// Calls per process from a uprobe to its uretprobe, by time taken.
    pub probe_latency: Vec<ProbeLatency>,
    /// The threads' waits (`record --off-cpu`).
    pub off_cpu: Vec<OffCpu>,
    /// The threads' time on the CPU, from their context switches.
    pub on_cpu: Vec<OnCpu>,
    /// The longest waits one by one.
    pub long_waits: Vec<LongWait>,
}

impl Profile {
    /// Keeps `record` if it is one of the profile's lines; hands any other
    /// back.
    pub fn take(&mut self, record: Record) -> Option<Record> {
        match record {
            Record::Frame(frame) => {
                self.frames.insert(frame.id, frame);
            }
            Record::Stack(stack) => {
                self.stacks.insert(stack.id, stack.frames);
            }
            Record::CpuSamples(samples) => self.samples.push(samples),
            Record::ProbeHits(hits) => self.probe_hits.push(hits),
            Record::ProbeArgs(args) => self.probe_args.push(args),
            Record::ProbeHistogram(histogram) => self.probe_histograms.push(histogram),
            Record::ProbeLatency(latency) => self.probe_latency.push(latency),
            Record::OffCpu(waits) => self.off_cpu.push(waits),
            Record::OnCpu(ran) => self.on_cpu.push(ran),
            Record::LongWait(wait) => self.long_waits.push(wait),
            other => return Some(other),
        }
        None
    }

    /// Leaves the frames of inlined functions out of every stack: their
    /// code is counted to the function they were inlined into, as a
    /// symbol table (and so `perf report`'s self time) counts it.
    pub fn fold_inlined(&mut self) {
        let frames = &self.frames;
        let inlined = |id: &u32| frames.get(id).is_some_and(|f| f.inlined);
        for stack in self.stacks.values_mut() {
            stack.retain(|id| !inlined(id));
        }
    }

    /// Whether the recording has no sample.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// All samples taken (saturating: a hostile recording's counts may
    /// add up past u64).
    pub fn total(&self) -> u64 {
        self.samples
            .iter()
            .fold(0, |sum, s| sum.saturating_add(s.count))
    }

    /// The frames of stack `id`, the outermost caller first; a frame id
    /// the recording does not name (a cut-off recording) is left out.
    pub fn stack(&self, id: u32) -> Vec<&Frame> {
        let ids = self.stacks.get(&id).map_or(&[][..], Vec::as_slice);
        ids.iter().filter_map(|f| self.frames.get(f)).collect()
    }

    /// The samples of process `pid`.
    pub fn of(&self, pid: Pid) -> impl Iterator<Item = &CpuSamples> {
        self.samples.iter().filter(move |s| s.pid == pid)
    }
}

impl Frame {
    /// The frame as people read it: its function, else its file and
    /// offset, never nothing; kernel frames end in `_[k]`, as FlameGraph's
    /// tools mark them.
    pub fn label(&self) -> String {
        let name = match (&self.function, self.offset) {
            (Some(function), _) => function.clone(),
            (None, Some(offset)) => format!("{}+{offset:#x}", file_name(&self.module)),
            (None, None) => file_name(&self.module).to_owned(),
        };
        if self.kernel {
            format!("{name}_[k]")
        } else {
            name
        }
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

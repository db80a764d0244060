//! The off-CPU side (`record --off-cpu`, `src/bpf/offcpu.bpf.h`): its
//! maps sized and its programs chosen before the load, attached after,
//! and what the kernel added up read once the tree is gone.

use std::collections::HashMap;

use libbpf_rs::{Link, MapCore, MapFlags, OpenMapMut};

use super::attach::attach_loaded;
use super::{KernelConfig, Probe, Settings};
use crate::bpf::types::{
    offcpu_loss, offcpu_sizes, offcpu_state, offcpu_thread, wait_key, wait_total,
};
use crate::bpf::{OpenProctraceSkel, ProctraceSkel};
use crate::event::{OffCpuSettings, Pid};
use crate::recorder::collect::{KernelTotals, Total};
use crate::recorder::error::RecordError;
use crate::recorder::wire::{copy, fd_call_bits, WaitKey};

/// The waits ring: a long wait with its stack copy is up to 9 KiB; 4 MiB
/// hold ~450 between two reads (every 50 ms), 9,000 a second.
const WAITS_RING_BYTES: u32 = 4 << 20;

/// Where the kernel allocates a hash map's every entry at its creation
/// (before 6.1: no BPF_F_NO_PREALLOC for tracing programs), the maps are
/// this many times smaller: a few MiB rather than hundreds.
const PREALLOCATED_SHARE: u32 = 8;

fn total_of(total: &wait_total) -> Total {
    Total {
        ns: total.ns,
        count: total.count,
        max_ns: total.max_ns,
    }
}

/// What a thread still alive at `now` kept of its time, as the kernel
/// would add it to the totals (`flush` in offcpu.bpf.h), with the stretch
/// it is on a CPU for: read between its process's exit and its last
/// switch, a child that computed for 400 ms had its last 47 ms left out
/// (once, on a loaded machine).
fn kept_by(thread: &offcpu_thread, now: u64) -> Vec<(WaitKey, Total)> {
    let mut ran = thread.ran;
    if thread.on_at != 0 && now > thread.on_at {
        let stretch = now - thread.on_at;
        ran.ns += stretch;
        ran.count += 1;
        ran.max_ns = ran.max_ns.max(stretch);
    }
    let bare = |state: offcpu_state| wait_key {
        pid: thread.pid,
        tid: thread.pending_key.tid,
        epoch: thread.epoch,
        syscall: -1,
        state: state.0 as u8,
        ..Default::default()
    };
    [
        (thread.pending_key, &thread.pending),
        (bare(offcpu_state::OFFCPU_RUNNING), &ran),
        (bare(offcpu_state::OFFCPU_RUNNABLE), &thread.runnable),
    ]
    .into_iter()
    .filter(|(_, total)| total.count > 0)
    .map(|(key, total)| (WaitKey::of(&key), total_of(total)))
    .collect()
}

/// Sets the off-CPU side's read-only data, map sizes and programs: all
/// of it a page or an entry, and nothing loaded, without `--off-cpu`.
pub(super) fn configure(
    open: &mut OpenProctraceSkel<'_>,
    config: &KernelConfig,
    settings: &Settings,
    page: u32,
) -> Result<(), RecordError> {
    let wanted = config.off_cpu.is_some();
    if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
        rodata.offcpu_threshold_ns = config.off_cpu.unwrap_or(0);
        rodata.offcpu_user_stacks = wanted;
        rodata.wait_wakeup_bytes = u64::from(WAITS_RING_BYTES / 2);
        rodata.fd_calls = fd_call_bits();
    }
    let ring = if wanted { WAITS_RING_BYTES } else { page };
    let size = |entries: offcpu_sizes| match (wanted, settings.tracked_flags) {
        (false, _) => 1,
        (true, 0) => entries.0 / PREALLOCATED_SHARE,
        (true, _) => entries.0,
    };
    let maps = &mut open.maps;
    let sized = |map: &mut OpenMapMut<'_>, entries: u32| {
        map.set_max_entries(entries)
            .and_then(|()| map.set_map_flags(map.map_flags() | settings.tracked_flags))
    };
    sized(&mut maps.wait_totals, size(offcpu_sizes::OFFCPU_TOTALS))
        .and_then(|()| sized(&mut maps.offcpu_threads, size(offcpu_sizes::OFFCPU_THREADS)))
        .and_then(|()| sized(&mut maps.wait_stashes, size(offcpu_sizes::OFFCPU_STASHES)))
        .and_then(|()| {
            maps.waker_comms
                .set_max_entries(if wanted { 4096 } else { 1 })
        })
        .and_then(|()| maps.waits.set_max_entries(ring))
        .map_err(RecordError::bpf("sizing the off-CPU maps"))?;
    let progs = &mut open.progs;
    for prog in [
        &mut progs.offcpu_switch,
        &mut progs.offcpu_waking,
        &mut progs.offcpu_wakeup_new,
        &mut progs.offcpu_exec,
        &mut progs.offcpu_irq_entry,
        &mut progs.offcpu_irq_exit,
        &mut progs.offcpu_softirq_entry,
        &mut progs.offcpu_softirq_exit,
        &mut progs.offcpu_timer_entry,
        &mut progs.offcpu_timer_exit,
    ] {
        prog.set_autoload(wanted);
    }
    Ok(())
}

/// Attaches the off-CPU programs that loaded; what they follow, for the
/// header.
pub(super) fn attach(
    skel: &ProctraceSkel<'_>,
    config: &KernelConfig,
) -> Result<(Vec<Link>, Option<OffCpuSettings>), RecordError> {
    let Some(threshold_ns) = config.off_cpu else {
        return Ok((Vec::new(), None));
    };
    let progs = &skel.progs;
    // The interrupt counters first, each exit before its entry: an entry
    // whose exit was missed would count every later wakeup on its CPU as
    // an interrupt's; an exit without its entry counts nothing.
    let links = attach_loaded([
        &progs.offcpu_irq_exit,
        &progs.offcpu_irq_entry,
        &progs.offcpu_softirq_exit,
        &progs.offcpu_softirq_entry,
        &progs.offcpu_timer_exit,
        &progs.offcpu_timer_entry,
        &progs.offcpu_waking,
        &progs.offcpu_wakeup_new,
        &progs.offcpu_exec,
        &progs.offcpu_switch,
    ])?;
    Ok((links, Some(OffCpuSettings { threshold_ns })))
}

impl Probe<'_> {
    /// Follows the threads `pid` has now (the command, held before its
    /// exec; a process attached to), which the kernel side did not see
    /// start: the tree's threads are those it knows.
    pub fn follow_threads(&self, pid: Pid) -> Result<(), RecordError> {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map_err(RecordError::system(format!("listing the threads of {pid}")))?;
        for tid in tasks.filter_map(|t| t.ok()?.file_name().to_str()?.parse::<Pid>().ok()) {
            let mut thread = offcpu_thread {
                pid,
                ..Default::default()
            };
            thread.pending_key.tid = tid;
            // SAFETY: a plain C struct of integers.
            let value = unsafe { plain::as_bytes(&thread) };
            let followed =
                self.skel
                    .maps
                    .offcpu_threads
                    .update(&tid.to_ne_bytes(), value, MapFlags::NO_EXIST);
            match followed {
                // Already there: the kernel saw it start.
                Err(err) if err.kind() != libbpf_rs::ErrorKind::AlreadyExists => {
                    return Err(RecordError::bpf(format!("following the threads of {pid}"))(
                        err,
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// What the kernel added up of the tree's time, with the names of
    /// the processes outside it that woke it; read once it is gone. The
    /// threads still alive hold some of it yet.
    pub fn wait_totals(&self) -> KernelTotals {
        let maps = &self.skel.maps;
        let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
            t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
        });
        let mut totals: Vec<(WaitKey, Total)> = maps
            .wait_totals
            .keys()
            .filter_map(|key| {
                let value = maps.wait_totals.lookup(&key, MapFlags::ANY).ok()??;
                let key: wait_key = copy(&key)?;
                let total: wait_total = copy(&value)?;
                Some((WaitKey::of(&key), total_of(&total)))
            })
            .collect();
        for value in maps
            .offcpu_threads
            .keys()
            .filter_map(|key| maps.offcpu_threads.lookup(&key, MapFlags::ANY).ok()?)
        {
            if let Some(thread) = copy::<offcpu_thread>(&value) {
                totals.extend(kept_by(&thread, now));
            }
        }
        let outsiders: HashMap<Pid, String> = maps
            .waker_comms
            .keys()
            .filter_map(|key| {
                let comm = maps.waker_comms.lookup(&key, MapFlags::ANY).ok()??;
                let pid = Pid::from_ne_bytes(key.get(..4)?.try_into().ok()?);
                let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
                Some((pid, String::from_utf8_lossy(&comm[..end]).into_owned()))
            })
            .collect();
        KernelTotals { totals, outsiders }
    }

    /// (long waits sent without their stacks, or without their user
    /// stack, stretches not counted).
    pub fn wait_losses(&self) -> (u64, u64) {
        let lost = |kind: offcpu_loss| {
            let per_cpu = self
                .skel
                .maps
                .offcpu_lost
                .lookup_percpu(&kind.0.to_ne_bytes(), MapFlags::ANY);
            let values = per_cpu.ok().flatten().into_iter().flatten();
            values
                .filter_map(|b| Some(u64::from_ne_bytes(b.get(..8)?.try_into().ok()?)))
                .sum::<u64>()
        };
        (
            lost(offcpu_loss::OFFCPU_LOST_STACKS) + lost(offcpu_loss::OFFCPU_LOST_USER_STACK),
            lost(offcpu_loss::OFFCPU_LOST_TOTAL) + lost(offcpu_loss::OFFCPU_LOST_THREAD),
        )
    }
}

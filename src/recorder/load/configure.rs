//! What is set in the opened object before it loads, from the kernel it
//! runs on and what was asked: its read-only data, its maps' sizes and
//! flags, and the programs that load.

use std::os::fd::AsFd;
use std::path::Path;

use libbpf_rs::{MapHandle, MapType, OpenMapMut, ProgramType};

use super::preload::Preload;
use super::{offcpu, probes};
use super::{BufferChoice, KernelConfig, Settings};
use crate::bpf::{OpenProctraceProgs, OpenProctraceSkel};
use crate::event::{BufferKind, SyscallHook};
use crate::recorder::error::RecordError;

/// The CPU profile's ring: at 999 Hz on two busy CPUs a second of samples
/// (the drain reads it every 50 ms); a page where nothing samples.
const SAMPLES_RING_BYTES: u32 = 8 << 20;
/// Without a profile, the code objects the Python frames of probe hits
/// and long waits ran: 500 first met between two reads, a suite's
/// imports at its start.
const PY_CODES_RING_BYTES: u32 = 1 << 20;

/// The probes' hits ring: a thousand hits with their stack copies between
/// two reads of it (every 50 ms); a page without probes.
const HITS_RING_BYTES: u32 = 16 << 20;
/// With a runner's test probes or test marks alone: a few per test.
const RUNNER_HITS_RING_BYTES: u32 = 1 << 20;

/// The initial PID namespace's inode (include/linux/proc_ns.h).
pub(super) const PROC_PID_INIT_INO: u32 = 0xEFFF_FFFC;

pub(super) fn choose_buffer(choice: BufferChoice) -> BufferKind {
    let ring = choice == BufferChoice::Auto && MapType::RingBuf.is_supported().unwrap_or(false);
    if ring {
        BufferKind::Ring
    } else {
        BufferKind::Perf
    }
}

pub(super) fn configure(
    open: &mut OpenProctraceSkel<'_>,
    config: &KernelConfig,
    settings: &Settings,
    preload: &Preload,
    hook: SyscallHook,
) -> Result<(), RecordError> {
    let rings = Rings::of(config);
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .expect("rodata is memory-mapped by libbpf");
    set_rodata(rodata, config, settings, &rings);
    size_maps(open, config, settings, preload, &rings)?;
    choose_programs(&mut open.progs, config, settings, hook);
    probes::configure(open, &config.probes, settings.cookies)?;
    offcpu::configure(open, config, settings, page_size())
}

/// The sizes of the samples and hits rings: a page where nothing is
/// sent on them.
struct Rings {
    samples: u32,
    hits: u32,
}

impl Rings {
    fn of(config: &KernelConfig) -> Rings {
        let samples = if config.cpu_profile.is_some() {
            SAMPLES_RING_BYTES
        } else if config.python_frames() {
            PY_CODES_RING_BYTES
        } else {
            page_size()
        };
        let hits = if config.probes.iter().any(|p| !p.optional) {
            HITS_RING_BYTES
        } else if !config.probes.is_empty() || config.test_marks.is_some() {
            RUNNER_HITS_RING_BYTES
        } else {
            page_size()
        };
        Rings { samples, hits }
    }
}

/// The program's read-only settings.
fn set_rodata(
    rodata: &mut crate::bpf::types::rodata,
    config: &KernelConfig,
    settings: &Settings,
    rings: &Rings,
) {
    let (min_level, inum) = settings.pidns;
    rodata.use_ringbuf = settings.buffer == BufferKind::Ring;
    rodata.raw_mode = config.raw;
    rodata.pidns_is_init = inum == PROC_PID_INIT_INO;
    rodata.pidns_min_level = min_level;
    rodata.pidns_inum = inum;
    rodata.capture_fds = config.capture_fds;
    rodata.capture_env = !config.env_names.is_empty();
    rodata.wakeup_bytes = u64::from(config.ring_bytes / 2);
    rodata.sample_wakeup_bytes = u64::from(rings.samples / 2);
    rodata.hit_wakeup_bytes = u64::from(rings.hits / 2);
    rodata.hit_stacks = config.probe_stacks;
}

/// The maps' sizes and flags, and the maps made ahead reused.
fn size_maps(
    open: &mut OpenProctraceSkel<'_>,
    config: &KernelConfig,
    settings: &Settings,
    preload: &Preload,
    rings: &Rings,
) -> Result<(), RecordError> {
    let map_error = RecordError::bpf("sizing the BPF maps");
    let tracked = &mut open.maps.tracked;
    tracked
        .set_max_entries(config.max_processes)
        .and_then(|()| tracked.set_map_flags(tracked.map_flags() | settings.tracked_flags))
        .map_err(map_error)?;
    let cpus = libbpf_rs::num_possible_cpus().map_err(RecordError::bpf("counting CPUs"))?;
    // A sample's slot holds a whole stack copy: only the sampler uses it.
    let samplers = if config.cpu_profile.is_some() {
        cpus
    } else {
        1
    };
    open.maps
        .exec_scratch
        .set_max_entries(cpus as u32)
        .and_then(|()| open.maps.sample_scratch.set_max_entries(samplers as u32))
        .map_err(RecordError::bpf("sizing the BPF maps"))?;
    if settings.buffer == BufferKind::Ring {
        let events = &mut open.maps.events;
        let mut ring = || -> libbpf_rs::Result<()> {
            events.set_type(MapType::RingBuf)?;
            events.set_key_size(0)?;
            events.set_value_size(0)?;
            events.set_max_entries(config.ring_bytes)
        };
        ring().map_err(RecordError::bpf("setting up the ring buffer"))?;
    }
    let reuse = |map: &mut OpenMapMut<'_>, made: &Option<MapHandle>| match made {
        Some(made) => map.reuse_fd(made.as_fd()),
        None => Ok(()),
    };
    reuse(&mut open.maps.events, &preload.ring)
        .and_then(|()| reuse(&mut open.maps.tracked, &preload.tracked))
        .map_err(RecordError::bpf("reusing the maps made ahead"))?;
    open.maps
        .samples
        .set_max_entries(rings.samples)
        .map_err(RecordError::bpf("sizing the samples ring"))?;
    open.maps
        .hits
        .set_max_entries(rings.hits)
        .map_err(RecordError::bpf("sizing the probe hits ring"))?;
    // Hash maps are allocated whole as they are made: the interpreters'
    // layouts and the code objects sent are 7.6 MB of kernel memory, and
    // about a millisecond of the start, that a recording without stacks
    // never reads or writes (no interpreter is told to the kernel).
    if !config.python_frames() {
        let maps = &mut open.maps;
        for map in [
            &mut maps.python_processes,
            &mut maps.python_binaries,
            &mut maps.python_codes_sent,
        ] {
            map.set_max_entries(1)
                .map_err(RecordError::bpf("sizing the Python maps"))?;
        }
    }
    Ok(())
}

/// The lifecycle programs that load: BTF-typed or raw, the exec program
/// with or without bpf_loop, the hook for setsid and setpgid, the CPU
/// sampler and the test marks.
fn choose_programs(
    progs: &mut OpenProctraceProgs<'_>,
    config: &KernelConfig,
    settings: &Settings,
    hook: SyscallHook,
) {
    let (btf_hooks, looped) = (settings.btf_hooks, settings.bpf_loop);
    progs.cpu_sample.set_autoload(config.cpu_profile.is_some());
    let marking = config.test_marks.is_some();
    let (apart, multi) = (
        marking && !settings.uprobe_multi,
        marking && settings.uprobe_multi,
    );
    progs.mark_setenv.set_autoload(apart);
    progs.mark_unsetenv.set_autoload(apart);
    progs.mark_multi.set_autoload(multi);
    for (btf, raw, wanted) in [
        (&mut progs.fork_btf, &mut progs.fork_raw, true),
        (&mut progs.exec_btf, &mut progs.exec_raw, !looped),
        (&mut progs.exec_btf_loop, &mut progs.exec_raw_loop, looped),
        (&mut progs.exit_btf, &mut progs.exit_raw, true),
        (
            &mut progs.sys_exit_btf,
            &mut progs.sys_exit_raw,
            hook == SyscallHook::SysExit,
        ),
    ] {
        btf.set_autoload(wanted && btf_hooks);
        raw.set_autoload(wanted && !btf_hooks);
    }
    let fexit = hook == SyscallHook::Fexit;
    let tracepoint = hook == SyscallHook::Tracepoint;
    progs.setsid_fexit.set_autoload(fexit);
    progs.setpgid_fexit.set_autoload(fexit);
    progs
        .setpgid_compat_fexit
        .set_autoload(fexit && has_compat_syscalls());
    progs.setsid_tracepoint.set_autoload(tracepoint);
    progs.setpgid_tracepoint.set_autoload(tracepoint);
}

/// The tracked map's own flags: from 6.1 (bpf_mem_alloc) a hash map that
/// tracing programs fill need not have all its entries allocated up
/// front (BENCHMARKS.md: what that costs at every start); before, the verifier warns with a
/// kernel backtrace about one that is not.
pub(super) fn tracked_map_flags() -> u32 {
    let release = nix::sys::utsname::uname().ok();
    let version = release
        .as_ref()
        .and_then(|uname| uname.release().to_str())
        .map(kernel_version);
    if version.is_some_and(|version| version >= (6, 1)) {
        libbpf_rs::libbpf_sys::BPF_F_NO_PREALLOC
    } else {
        0
    }
}

/// The major and minor version at the start of `uname -r`'s `release`.
fn kernel_version(release: &str) -> (u32, u32) {
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// Whether the kernel runs 32-bit programs (CONFIG_IA32_EMULATION), whose
/// setpgid enters the kernel elsewhere: the sysctl comes with it. On arm64
/// AArch32's setpgid enters through the native function, which the native
/// program already watches.
pub(super) fn has_compat_syscalls() -> bool {
    cfg!(target_arch = "x86_64") && Path::new("/proc/sys/abi/vsyscall32").exists()
}

/// Whether the kernel has bpf_loop: probed with a program of a few
/// instructions, far cheaper than the verifier time it saves.
pub(super) fn has_bpf_loop() -> bool {
    ProgramType::RawTracepoint
        .is_helper_supported(libbpf_rs::libbpf_sys::BPF_FUNC_loop)
        .unwrap_or(false)
}

/// The page size, the smallest ring the kernel takes.
fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(size).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_are_read_from_distribution_releases() {
        assert_eq!(kernel_version("5.10.0-35-amd64"), (5, 10));
        assert_eq!(kernel_version("6.1.0-rc3+"), (6, 1));
        assert_eq!(kernel_version("6.18.44-fc-v782"), (6, 18));
        assert_eq!(kernel_version("garbage"), (0, 0));
    }
}

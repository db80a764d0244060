//! The CPU profile's perf events: one sampling event per online CPU, each
//! running the `cpu_sample` program, which keeps the tree's samples only.

use std::fs;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};

use libbpf_rs::libbpf_sys::{
    perf_event_attr, PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC,
    PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE,
};
use libbpf_rs::Link;

use crate::bpf::ProctraceSkel;
use crate::event::SampleClock;
use crate::recorder::error::RecordError;
use crate::recorder::wire::cpus::online_cpus;

/// Opens a sampling event at `hz` on every online CPU and attaches the
/// sampling program to each: CPU cycles where the machine has a PMU, else
/// the software cpu-clock, which every kernel has.
pub(super) fn attach_sampler(
    skel: &ProctraceSkel<'_>,
    hz: u32,
) -> Result<(Vec<Link>, SampleClock), RecordError> {
    check_rate(hz)?;
    let cpus = online_cpus().map_err(RecordError::system("listing the online CPUs"))?;
    let clock = [SampleClock::Cycles, SampleClock::CpuClock]
        .into_iter()
        .find(|&clock| open(clock, hz, cpus[0]).is_ok())
        .unwrap_or(SampleClock::CpuClock);
    let mut links = Vec::with_capacity(cpus.len());
    for &cpu in &cpus {
        let fd = open(clock, hz, cpu).map_err(|source| RecordError::PerfEvent { cpu, source })?;
        let link = skel
            .progs
            .cpu_sample
            .attach_perf_event(fd.into_raw_fd())
            .map_err(RecordError::bpf("attaching the CPU sampler"))?;
        links.push(link);
    }
    Ok((links, clock))
}

/// Refuses a rate of 0, or above what the kernel takes, before anything
/// loads.
pub(crate) fn check_rate(hz: u32) -> Result<(), RecordError> {
    let max = max_sample_rate();
    if hz == 0 || max.is_some_and(|max| hz > max) {
        return Err(RecordError::SampleRate {
            hz,
            max: max.filter(|_| hz > 0),
        });
    }
    Ok(())
}

/// A perf event on `cpu` that samples whatever runs there `hz` times a
/// second of its clock.
fn open(clock: SampleClock, hz: u32, cpu: u32) -> io::Result<OwnedFd> {
    let (kind, config) = match clock {
        SampleClock::Cycles => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
        SampleClock::CpuClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK),
    };
    let mut attr = perf_event_attr {
        type_: kind,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: u64::from(config),
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_freq = u64::from(hz);
    attr.set_freq(1);
    // SAFETY: a valid attr for the call's whole duration; pid -1 with a
    // CPU samples every task on that CPU.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const perf_event_attr,
            -1,
            cpu as libc::c_int,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd the kernel just gave, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The most samples a second the kernel takes (it refuses more with a
/// bare EINVAL), where it says.
fn max_sample_rate() -> Option<u32> {
    fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()
        .and_then(|text| text.trim().parse().ok())
}

//! The exec program verified on a core of its own. The kernel verifies an
//! object's programs one after another, and the exec program (its fd and
//! path walks) is half of that work: a second object holding only it, with
//! every map of the first, is verified beside the others (what that saves
//! on two cores: BENCHMARKS.md). Once attached, the program needs
//! nothing of its object: the link holds it, and it holds its maps.
//!
//! Where the sched tracepoints are BTF-typed only because fexit made
//! libbpf read the kernel's BTF anyway, the second object takes the raw
//! exec program, which sees the same and spares it reading the BTF again.

use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use crossbeam_channel::Receiver;
use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{AsRawLibbpf, Link};

use super::attach::attach_loaded;
use super::jited::own_code;
use super::open_object;
use crate::bpf::{OpenProctraceProgs, OpenProctraceSkel, ProctraceSkel};
use crate::recorder::error::RecordError;

/// Which of the four exec programs the second object loads.
#[derive(Clone, Copy)]
pub(super) struct ExecProgram {
    /// BTF-typed (tp_btf) rather than raw.
    pub btf: bool,
    /// The fd walk in bpf_loop (5.17+).
    pub looped: bool,
}

/// Whether a second core can verify the exec program beside the rest.
pub(super) fn worth_it() -> bool {
    std::thread::available_parallelism().is_ok_and(|cpus| cpus.get() > 1)
}

/// The exec program as loaded apart: its link, and where the kernel put
/// its code (see [`super::jited`]), asked before its object is dropped.
#[derive(Default)]
pub(super) struct Loaded {
    pub links: Vec<Link>,
    pub code: Vec<Range<u64>>,
}

/// Loads `open` without its exec programs and `exec` in a second object
/// that shares its maps, on another thread; returns the first object and
/// the exec program.
pub(super) fn load<'obj>(
    mut open: OpenProctraceSkel<'obj>,
    btf: Option<&Path>,
    exec: ExecProgram,
) -> Result<(ProctraceSkel<'obj>, Loaded), RecordError> {
    for prog in exec_programs(&mut open.progs) {
        prog.set_autoload(false);
    }
    let (fds_tx, fds_rx) = crossbeam_channel::bounded(1);
    let here = nix::sched::sched_getcpu().ok();
    std::thread::scope(|scope| {
        // Named, for `top -H`, perf and PROCTRACE_DEBUG's narration.
        let alone = std::thread::Builder::new()
            .name("proctrace-exec".into())
            .spawn_scoped(scope, move || {
                leave_cpu(here);
                load_alone(btf, exec, fds_rx)
            })
            .map_err(RecordError::system("starting the exec program's loader"))?;
        // Maps made, programs not loaded yet.
        // SAFETY: the object is open and not loaded; libbpf checks its state.
        let prepared = unsafe {
            libbpf_rs::libbpf_sys::bpf_object__prepare(
                open.open_object_mut().as_libbpf_object().as_ptr(),
            )
        };
        if prepared != 0 {
            drop(fds_tx);
            let _ = alone.join();
            return Err(RecordError::bpf("loading the BPF program into the kernel")(
                libbpf_rs::Error::from_raw_os_error(-prepared),
            ));
        }
        let _ = fds_tx.send(map_fds(&open));
        let loaded = open
            .load()
            .map_err(RecordError::bpf("loading the BPF program into the kernel"));
        let exec = alone.join().map_err(|_| RecordError::System {
            context: "loading the exec program".into(),
            source: std::io::Error::other("its thread panicked"),
        })?;
        Ok((loaded?, exec?))
    })
}

/// Moves this thread off `cpu`, where the first object is loading. A new
/// thread may start on its creator's core when the other looks busy for a
/// moment (a thread of the start-up still exiting there); the scheduler
/// then spreads the two only at its next balancing, and half the time the
/// two loads shared one core for a while, slower than one after the other.
/// The thread ends with the load, so its affinity is not restored.
fn leave_cpu(cpu: Option<usize>) {
    let this = nix::unistd::Pid::from_raw(0);
    let Some((cpu, mut allowed)) = cpu.zip(nix::sched::sched_getaffinity(this).ok()) else {
        return;
    };
    let others = (0..nix::sched::CpuSet::count())
        .filter(|&other| other != cpu && allowed.is_set(other).unwrap_or(false))
        .count();
    if others > 0 && allowed.unset(cpu).is_ok() {
        let _ = nix::sched::sched_setaffinity(this, &allowed);
    }
}

/// Every map of a prepared object, by name, with a copy of its fd (a
/// failed load closes the object's own).
fn map_fds(open: &OpenProctraceSkel<'_>) -> Vec<(OsString, OwnedFd)> {
    open.open_object()
        .maps()
        .filter_map(|map| {
            // SAFETY: a map of a live object; bpf_map__fd only reads it,
            // and the fd stays open while the object is.
            let fd = unsafe {
                let fd = libbpf_rs::libbpf_sys::bpf_map__fd(map.as_libbpf_object().as_ptr());
                BorrowedFd::borrow_raw(fd)
            };
            Some((map.name().to_owned(), fd.try_clone_to_owned().ok()?))
        })
        .collect()
}

/// Opens an object with only the `exec` program, gives it the maps of the
/// first object (copies of their fds, from `fds`), loads it and attaches
/// the program; nothing when the first object failed.
fn load_alone(
    btf: Option<&Path>,
    exec: ExecProgram,
    fds: Receiver<Vec<(OsString, OwnedFd)>>,
) -> Result<Loaded, RecordError> {
    let mut storage = MaybeUninit::uninit();
    let mut open = open_object(btf, &mut storage)?;
    for mut prog in open.open_object_mut().progs_mut() {
        prog.set_autoload(false);
    }
    let progs = &mut open.progs;
    let wanted = match (exec.btf, exec.looped) {
        (true, true) => &mut progs.exec_btf_loop,
        (true, false) => &mut progs.exec_btf,
        (false, true) => &mut progs.exec_raw_loop,
        (false, false) => &mut progs.exec_raw,
    };
    wanted.set_autoload(true);
    // The first object could not be prepared: its error is the one told.
    let Ok(fds) = fds.recv() else {
        return Ok(Loaded::default());
    };
    for mut map in open.open_object_mut().maps_mut() {
        let Some((_, fd)) = fds.iter().find(|(name, _)| name.as_os_str() == map.name()) else {
            continue;
        };
        map.reuse_fd(fd.as_fd())
            .map_err(RecordError::bpf("sharing the maps with the exec program"))?;
    }
    let skel = open
        .load()
        .map_err(RecordError::bpf("loading the BPF program into the kernel"))?;
    let progs = &skel.progs;
    let links = attach_loaded([
        &progs.exec_btf,
        &progs.exec_btf_loop,
        &progs.exec_raw,
        &progs.exec_raw_loop,
    ])?;
    Ok(Loaded {
        links,
        code: own_code(&skel),
    })
}

/// The four exec programs, which the first object leaves to the second.
fn exec_programs<'a, 'obj>(
    progs: &'a mut OpenProctraceProgs<'obj>,
) -> [&'a mut libbpf_rs::OpenProgramMut<'obj>; 4] {
    [
        &mut progs.exec_btf,
        &mut progs.exec_btf_loop,
        &mut progs.exec_raw,
        &mut progs.exec_raw_loop,
    ]
}

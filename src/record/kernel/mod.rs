//! Loading, configuring and attaching the BPF program, and reading its maps.

mod exec_apart;
mod memory;

use std::fs;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{
    AsRawLibbpf, Link, MapCore, MapFlags, MapHandle, MapType, OpenMapMut, OpenObject, ProgramMut,
    ProgramType,
};

use super::cut_btf::CutBtf;
use super::{tracefs, RecordError, Warning};
use crate::bpf::types::{defaults, loss_kind};
use crate::bpf::{OpenProctraceSkel, ProctraceSkel, ProctraceSkelBuilder};
use crate::event::{BufferKind, Pid, SyscallHook};
use exec_apart::ExecProgram;

const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";
/// The initial PID namespace's inode (include/linux/proc_ns.h).
const PROC_PID_INIT_INO: u32 = 0xEFFF_FFFC;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Which kernel-to-user buffer to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BufferChoice {
    /// The ring buffer where the kernel has one, else the perf buffer.
    #[default]
    Auto,
    /// Always the per-CPU perf buffer.
    Perf,
}

/// How the sched tracepoints are hooked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HookChoice {
    /// BTF-typed tracepoints (tp_btf) where fexit hooks setsid and setpgid,
    /// else raw ones. Either sees the same; but tp_btf programs make libbpf
    /// read all of the kernel's BTF to find their targets (a quarter of
    /// `record -- true`), which fexit has it do anyway.
    #[default]
    Auto,
    /// Raw tracepoints, as on kernels whose BTF comes from a file.
    Raw,
    /// BTF-typed tracepoints wherever the kernel has BTF.
    Btf,
}

/// Kernel-side settings of a recording.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    pub buffer: BufferChoice,
    pub hooks: HookChoice,
    /// How setsid and setpgid are hooked; `None`: the cheapest that loads.
    pub syscall_hook: Option<SyscallHook>,
    pub raw: bool,
    pub max_processes: u32,
    pub ring_bytes: u32,
    pub perf_pages: usize,
    pub btf: Option<PathBuf>,
    pub capture_fds: bool,
    /// The environment variables kept at exec; the kernel copies the
    /// environment only when there are some.
    pub env_names: Vec<String>,
    /// Hand the links that are slow to detach to a child process at the
    /// end (see [`detach_in_child`]), for a process about to exit.
    pub detach_in_child: bool,
}

/// The loaded and attached program.
pub struct Probe<'obj> {
    pub skel: ProctraceSkel<'obj>,
    /// The `.bss` counters the kernel side keeps (`forked`, `exited`) and
    /// the one userspace keeps for it (`seeded`), in their shared mapping.
    counters: Counters<'obj>,
    pub buffer: BufferKind,
    /// What sees setsid and setpgid; `None` when nothing could attach.
    pub syscall_hook: Option<SyscallHook>,
    /// Events that cannot be recorded on this kernel, said once at start.
    pub warnings: Vec<Warning>,
    /// Detached one by one when dropped: detaching tracepoints from several
    /// threads at once soft-locks Linux 5.10 and oopses 6.12 (seen in the
    /// kernel matrix), though it would share the RCU waits.
    _links: Vec<Link>,
    /// The classic tracepoints' links, each an RCU grace period to detach.
    slow_links: Vec<Link>,
    detach_in_child: bool,
}

impl Probe<'_> {
    /// A handle of its own on the tracked map, for the embedder
    /// ([`crate::record::LiveRecording::tracked_map`]).
    pub fn tracked_map(&self) -> Result<MapHandle, RecordError> {
        MapHandle::try_from(&self.skel.maps.tracked)
            .map_err(RecordError::bpf("sharing the tracked map"))
    }
}

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        let slow = std::mem::take(&mut self.slow_links);
        if self.detach_in_child && !slow.is_empty() {
            detach_in_child(slow);
        }
    }
}

/// Closing a classic tracepoint's perf event waits out an RCU grace period
/// (perf_trace_event_unreg, tens of milliseconds each), and a process
/// cannot finish exiting while one of its closes waits. A child process
/// takes over the links: it holds their fds while this process drops its
/// own, which then costs nothing, and closes them itself afterwards.
fn detach_in_child(links: Vec<Link>) {
    let Ok((done, finished)) = nix::unistd::pipe() else {
        return;
    };
    let mut keep: Vec<RawFd> = links.iter().map(|link| link.as_fd().as_raw_fd()).collect();
    keep.push(done.as_raw_fd());
    keep.sort_unstable();
    // SAFETY: the child makes only async-signal-safe calls (the other
    // threads' locks are copied as they were) and never returns.
    if unsafe { libc::fork() } == 0 {
        unsafe { take_over(&keep, done.as_raw_fd()) }
    }
    drop(done);
    drop(links);
    drop(finished);
}

/// The child of [`detach_in_child`]: closes every fd but the links' (a
/// pipe or terminal held here would keep a reader waiting), waits until
/// its parent has dropped the links, then closes them.
///
/// # Safety
/// Only in a child just forked; `keep` sorted.
unsafe fn take_over(keep: &[RawFd], done: RawFd) -> ! {
    // SAFETY: plain system calls on integers and a local byte.
    unsafe {
        let close_range = |low: RawFd, high: libc::c_uint| {
            libc::syscall(libc::SYS_close_range, low as libc::c_uint, high, 0)
        };
        let mut low = 0;
        for &fd in keep {
            if fd > low {
                close_range(low, (fd - 1) as libc::c_uint);
            }
            low = fd + 1;
        }
        close_range(low, libc::c_uint::MAX);
        let mut byte = 0u8;
        while libc::read(done, (&raw mut byte).cast(), 1) < 0 {}
        for &fd in keep {
            libc::close(fd);
        }
        libc::_exit(0)
    }
}

/// Checks privileges and BTF, then opens, configures, loads and attaches.
pub fn load<'obj>(
    config: &KernelConfig,
    storage: &'obj mut MaybeUninit<OpenObject>,
) -> Result<Probe<'obj>, RecordError> {
    let status = fs::read_to_string("/proc/self/status")
        .map_err(RecordError::system("reading /proc/self/status"))?;
    check_privileges(&status)?;
    let pidns = pid_namespace(&status)?;
    let kernel_btf = Path::new(KERNEL_BTF).exists();
    if let Some(path) = &config.btf {
        check_btf(path)?;
    } else if !kernel_btf {
        return Err(RecordError::NoBtf);
    }
    raise_memlock_limit();

    let btf_hooks = config.hooks != HookChoice::Raw && kernel_btf;
    let settings = Settings {
        pidns,
        buffer: choose_buffer(config.buffer),
        btf_hooks,
        bpf_loop: has_bpf_loop(),
        tracked_flags: tracked_map_flags(),
    };
    if settings.buffer == BufferKind::Ring {
        memory::check_ring_size(config.ring_bytes)?;
    }
    let hooks = syscall_hooks(config, kernel_btf, btf_hooks);
    let started = Instant::now();
    let preload = Preload::make(
        config,
        &settings,
        hooks.first() == Some(&SyscallHook::Tracepoint),
    )?;
    log::debug!(
        "made ahead in {:.1} ms: {}",
        millis(started),
        match &preload.cut {
            Some(cut) => format!(
                "the kernel's BTF cut to {} bytes{}",
                cut.len(),
                if cut.kept {
                    ", kept from an earlier run"
                } else {
                    ""
                }
            ),
            None => "no cut of the kernel's BTF".into(),
        }
    );
    let btf = config
        .btf
        .clone()
        .or_else(|| preload.cut.as_ref().map(CutBtf::path));
    let mut storage = Some(storage);
    let mut failure = None;
    for hook in hooks {
        // A failed attempt keeps its storage borrowed for 'obj; the rare
        // retry after it (a kernel that refuses fexit late) gets storage
        // of its own, a few words left behind for the process's life.
        let storage = storage
            .take()
            .unwrap_or_else(|| Box::leak(Box::new(MaybeUninit::uninit())));
        let settings = settings.with_hook(config.hooks, hook);
        match load_with(config, &settings, &preload, btf.as_deref(), hook, storage) {
            Ok(probe) => return Ok(probe),
            Err(err) => {
                log::debug!("the {hook} hook for setsid/setpgid failed: {err}");
                failure = Some(err);
            }
        }
    }
    let failure = failure.expect("sys_exit is always tried");
    Err(match config.syscall_hook {
        Some(hook) => RecordError::SyscallHook {
            hook,
            source: Box::new(failure),
        },
        None => failure,
    })
}

/// What is settled before the program is opened.
#[derive(Clone, Copy)]
struct Settings {
    pidns: (u32, u32),
    buffer: BufferKind,
    /// Whether the sched tracepoints are BTF-typed; before a hook for
    /// setsid/setpgid is chosen, whether they may be.
    btf_hooks: bool,
    /// The kernel has bpf_loop (5.17+), which the exec programs use for
    /// the fd walk where they can.
    bpf_loop: bool,
    /// Flags of the tracked map beyond the program's ([`tracked_map_flags`]).
    tracked_flags: u32,
}

impl Settings {
    /// The settings of an attempt with `hook` for setsid/setpgid.
    fn with_hook(self, hooks: HookChoice, hook: SyscallHook) -> Settings {
        let btf_hooks = self.btf_hooks && (hooks == HookChoice::Btf || hook == SyscallHook::Fexit);
        Settings { btf_hooks, ..self }
    }
}

/// The hooks for setsid and setpgid to try, cheapest first. Each is only
/// tried where a probe of a few microseconds says it may load: fexit
/// where the kernel verifies tracing programs (it may still refuse them
/// at load or attach), the syscall tracepoints where BPF can read a
/// task's saved registers (5.15+, and typed pointers need kernel BTF).
fn syscall_hooks(config: &KernelConfig, kernel_btf: bool, btf_hooks: bool) -> Vec<SyscallHook> {
    if let Some(hook) = config.syscall_hook {
        return vec![hook];
    }
    // fexit attaches by the running kernel's own BTF ids.
    let fexit =
        btf_hooks && config.btf.is_none() && ProgramType::Tracing.is_supported().unwrap_or(false);
    let tracepoint = kernel_btf
        && ProgramType::Tracepoint
            .is_helper_supported(libbpf_rs::libbpf_sys::BPF_FUNC_task_pt_regs)
            .unwrap_or(false);
    [
        (SyscallHook::Fexit, fexit),
        (SyscallHook::Tracepoint, tracepoint),
        (SyscallHook::SysExit, true),
    ]
    .into_iter()
    .filter_map(|(hook, possible)| possible.then_some(hook))
    .collect()
}

/// What is made before the object loads, on two threads at once, a few
/// milliseconds each: the kernel's BTF cut down to what the program's
/// relocations can use (see [`CutBtf`]; `None`, and libbpf reads all of it,
/// where that fails or `--btf` names another); the two largest maps (the
/// ring's pages are charged to the memory cgroup one by one), which the
/// object then reuses; and, where they are the hook to try first, the
/// syscall tracepoints' ids (tracefs may have to be mounted). A ring the
/// kernel refuses for want of memory ends it: libbpf would only try again
/// and report the failure without saying which map or why.
#[derive(Default)]
struct Preload {
    cut: Option<CutBtf>,
    ring: Option<MapHandle>,
    tracked: Option<MapHandle>,
    tracepoint_ids: Option<[u64; 2]>,
}

impl Preload {
    fn make(
        config: &KernelConfig,
        settings: &Settings,
        tracepoints: bool,
    ) -> Result<Preload, RecordError> {
        // The program's own BTF and map definitions are only reachable
        // through an opened object, and the BTF libbpf relocates against is
        // fixed when one opens: this one is opened to be read (half a
        // millisecond).
        let mut storage = MaybeUninit::uninit();
        let Ok(open) = ProctraceSkelBuilder::default().open(&mut storage) else {
            return Ok(Preload::default());
        };
        let local = config.btf.is_none().then(|| local_btf(&open)).flatten();
        std::thread::scope(|scope| {
            // Each is a millisecond of zeroed pages: the ring's, and the
            // tracked map's buckets.
            let events = MapSpec::like(&open.maps.events, MapType::RingBuf, config.ring_bytes, 0);
            let mut making =
                (settings.buffer == BufferKind::Ring).then(|| scope.spawn(move || events.create()));
            // A ring larger than any default may be more than the memory
            // left: it is made before anything else allocates, as the
            // allocations of a thread beside it could wake the OOM killer
            // while it holds the memory it then gives back.
            let alone = making
                .take_if(|_| config.ring_bytes > defaults::MAX_DEFAULT_RING_MIB.0 << 20)
                .map(|ring| ring.join());
            let cutting =
                local.map(|local| scope.spawn(move || CutBtf::new(Path::new(KERNEL_BTF), &local)));
            // Beside the maps: where tracefs is not mounted, this waits for
            // the thread that mounts it.
            let reading = tracepoints.then(|| scope.spawn(tracefs::syscall_exit_ids));
            let tracked = &open.maps.tracked;
            let tracked = MapSpec::like(
                tracked,
                tracked.map_type(),
                config.max_processes,
                settings.tracked_flags,
            )
            .create()
            .ok();
            let ring = match alone.or_else(|| making.map(|ring| ring.join())) {
                Some(Ok(Ok(ring))) => Some(ring),
                Some(Ok(Err(err))) => match memory::ring_refused(&err, config.ring_bytes) {
                    Some(refused) => return Err(refused),
                    None => None,
                },
                _ => None,
            };
            let tracepoint_ids = reading.and_then(|reading| reading.join().ok()?.ok());
            let cut = cutting.and_then(|cutting| cutting.join().ok().flatten());
            if cut.is_none() && config.btf.is_none() {
                log::debug!("the kernel's BTF could not be cut down: libbpf reads all of it");
            }
            Ok(Preload {
                cut,
                ring,
                tracked,
                tracepoint_ids,
            })
        })
    }
}

/// A copy of the program's own BTF, as the opened object holds it.
fn local_btf(open: &OpenProctraceSkel<'_>) -> Option<Vec<u8>> {
    let object = open.open_object().as_libbpf_object();
    // SAFETY: the BTF belongs to the object, alive while `open` is;
    // btf__raw_data returns `size` bytes it keeps for the BTF's lifetime.
    unsafe {
        let btf = libbpf_rs::libbpf_sys::bpf_object__btf(object.as_ptr());
        if btf.is_null() {
            return None;
        }
        let mut size = 0;
        let data = libbpf_rs::libbpf_sys::btf__raw_data(btf, &mut size);
        (!data.is_null())
            .then(|| std::slice::from_raw_parts(data.cast::<u8>(), size as usize).to_vec())
    }
}

/// A map to make ahead: one like a map of the open object, of another
/// kind or size; made on any thread, as the open object cannot be shared.
struct MapSpec {
    kind: MapType,
    name: std::ffi::OsString,
    key: u32,
    value: u32,
    entries: u32,
    flags: u32,
}

impl MapSpec {
    /// Like `like` (its name, key, value and flags, with `flags` added),
    /// of `kind` with `entries`.
    fn like(like: &OpenMapMut<'_>, kind: MapType, entries: u32, flags: u32) -> MapSpec {
        let (key, value) = match kind {
            MapType::RingBuf => (0, 0),
            _ => (like.key_size(), like.value_size()),
        };
        MapSpec {
            kind,
            name: like.name().to_owned(),
            key,
            value,
            entries,
            flags: like.map_flags() | flags,
        }
    }

    /// A failure leaves it to libbpf, unless it says why.
    fn create(self) -> libbpf_rs::Result<MapHandle> {
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: self.flags,
            ..Default::default()
        };
        let name = self.name.as_os_str();
        MapHandle::create(
            self.kind,
            Some(name),
            self.key,
            self.value,
            self.entries,
            &opts,
        )
    }
}

/// Opens, configures, loads and attaches with `hook` for setsid/setpgid,
/// relocating against `btf` where given (else the kernel's own).
fn load_with<'obj>(
    config: &KernelConfig,
    settings: &Settings,
    preload: &Preload,
    btf: Option<&Path>,
    hook: SyscallHook,
    storage: &'obj mut MaybeUninit<OpenObject>,
) -> Result<Probe<'obj>, RecordError> {
    // Read before anything loads: without them the attempt is over.
    let tracepoints = match (hook, preload.tracepoint_ids) {
        (SyscallHook::Tracepoint, Some(ids)) => Some(ids),
        (SyscallHook::Tracepoint, None) => Some(tracefs::syscall_exit_ids()?),
        _ => None,
    };
    let mut open = open_object(btf, storage)?;
    configure(&mut open, config, settings, preload, hook)?;

    let started = Instant::now();
    let (mut skel, exec_links) = if exec_apart::worth_it() {
        let exec = ExecProgram {
            btf: settings.btf_hooks && config.hooks == HookChoice::Btf,
            looped: settings.bpf_loop,
        };
        exec_apart::load(open, btf, exec)?
    } else {
        let skel = open
            .load()
            .map_err(RecordError::bpf("loading the BPF program into the kernel"))?;
        (skel, Vec::new())
    };
    let loaded = Instant::now();
    let counters = Counters::take(&mut skel);
    let mut links = attach_sched(&skel, settings.btf_hooks)?;
    links.extend(exec_links);
    let mut slow_links = Vec::new();
    let mut warnings = Vec::new();
    let attached = match tracepoints {
        Some(ids) => attach_tracepoints(&skel, ids),
        None => attach_syscalls(&skel, settings.btf_hooks, hook),
    };
    let syscall_hook = match attached {
        Ok(syscall_links) if hook == SyscallHook::Tracepoint => {
            slow_links = syscall_links;
            Some(hook)
        }
        Ok(syscall_links) => {
            links.extend(syscall_links);
            Some(hook)
        }
        // Without it the tree is still followed: a warning, not an error.
        Err(why) if hook == SyscallHook::SysExit => {
            warnings.push(Warning::NoSyscallHook {
                reason: why.to_string(),
            });
            None
        }
        Err(why) => return Err(why),
    };
    log::debug!(
        "libbpf loaded the object (relocation, maps, verifier) in {:.1} ms; attached in {:.1} ms",
        (loaded - started).as_secs_f64() * 1e3,
        millis(loaded)
    );
    Ok(Probe {
        skel,
        counters,
        buffer: settings.buffer,
        syscall_hook,
        warnings,
        _links: links,
        slow_links,
        detach_in_child: config.detach_in_child,
    })
}

/// Opens the object, relocating against `btf` where given (else the
/// kernel's own BTF).
pub(super) fn open_object<'obj>(
    btf: Option<&Path>,
    storage: &'obj mut MaybeUninit<OpenObject>,
) -> Result<OpenProctraceSkel<'obj>, RecordError> {
    let mut builder = ProctraceSkelBuilder::default();
    if let Some(path) = btf {
        builder
            .obj_builder
            .btf_custom_path(path)
            .map_err(RecordError::bpf("using the BTF file"))?;
    }
    builder
        .open(storage)
        .map_err(RecordError::bpf("opening the BPF object"))
}

fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Checks a `--btf` file before libbpf sees it: given a file that is not
/// BTF, libbpf fails late and with a bare error code.
fn check_btf(path: &Path) -> Result<(), RecordError> {
    let error = |source| RecordError::BtfFile {
        path: path.to_owned(),
        source,
    };
    fs::File::open(path).map_err(error)?;
    libbpf_rs::btf::Btf::from_path(path).map_err(|_| {
        error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not BTF type information (such as /sys/kernel/btf/vmlinux, or a vmlinux with a .BTF section)",
        ))
    })?;
    Ok(())
}

fn choose_buffer(choice: BufferChoice) -> BufferKind {
    let ring = choice == BufferChoice::Auto && MapType::RingBuf.is_supported().unwrap_or(false);
    if ring {
        BufferKind::Ring
    } else {
        BufferKind::Perf
    }
}

fn configure(
    open: &mut OpenProctraceSkel<'_>,
    config: &KernelConfig,
    settings: &Settings,
    preload: &Preload,
    hook: SyscallHook,
) -> Result<(), RecordError> {
    let Settings {
        pidns: (min_level, inum),
        buffer,
        btf_hooks,
        bpf_loop: looped,
        tracked_flags,
    } = *settings;
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .expect("rodata is memory-mapped by libbpf");
    rodata.use_ringbuf = buffer == BufferKind::Ring;
    rodata.raw_mode = config.raw;
    rodata.pidns_is_init = inum == PROC_PID_INIT_INO;
    rodata.pidns_min_level = min_level;
    rodata.pidns_inum = inum;
    rodata.capture_fds = config.capture_fds;
    rodata.capture_env = !config.env_names.is_empty();
    rodata.wakeup_bytes = u64::from(config.ring_bytes / 2);

    let map_error = RecordError::bpf("sizing the BPF maps");
    let tracked = &mut open.maps.tracked;
    tracked
        .set_max_entries(config.max_processes)
        .and_then(|()| tracked.set_map_flags(tracked.map_flags() | tracked_flags))
        .map_err(map_error)?;
    let cpus = libbpf_rs::num_possible_cpus().map_err(RecordError::bpf("counting CPUs"))?;
    open.maps
        .exec_scratch
        .set_max_entries(cpus as u32)
        .map_err(RecordError::bpf("sizing the BPF maps"))?;
    if buffer == BufferKind::Ring {
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
    let progs = &mut open.progs;
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
    Ok(())
}

/// The tracked map's own flags: from 6.1 (bpf_mem_alloc) a hash map that
/// tracing programs fill need not have all its entries allocated up
/// front (BENCHMARKS.md: what that costs at every start); before, the verifier warns with a
/// kernel backtrace about one that is not.
fn tracked_map_flags() -> u32 {
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
fn has_compat_syscalls() -> bool {
    cfg!(target_arch = "x86_64") && Path::new("/proc/sys/abi/vsyscall32").exists()
}

/// Whether the kernel has bpf_loop: probed with a program of a few
/// instructions, far cheaper than the verifier time it saves.
fn has_bpf_loop() -> bool {
    ProgramType::RawTracepoint
        .is_helper_supported(libbpf_rs::libbpf_sys::BPF_FUNC_loop)
        .unwrap_or(false)
}

fn attach_sched(skel: &ProctraceSkel<'_>, btf_hooks: bool) -> Result<Vec<Link>, RecordError> {
    let progs = &skel.progs;
    let sched = if btf_hooks {
        [
            &progs.fork_btf,
            &progs.exec_btf,
            &progs.exec_btf_loop,
            &progs.exit_btf,
        ]
    } else {
        [
            &progs.fork_raw,
            &progs.exec_raw,
            &progs.exec_raw_loop,
            &progs.exit_raw,
        ]
    };
    // Of the two exec programs, one was loaded.
    attach_loaded(sched)
}

/// Attaches those of `programs` that were loaded.
pub(super) fn attach_loaded<'a, 'obj: 'a>(
    programs: impl IntoIterator<Item = &'a ProgramMut<'obj>>,
) -> Result<Vec<Link>, RecordError> {
    programs
        .into_iter()
        .filter(|prog| prog.autoload())
        .map(|prog| {
            let name = prog.name().to_string_lossy().into_owned();
            prog.attach()
                .map_err(RecordError::bpf(format!("attaching {name}")))
        })
        .collect()
}

/// Attaches the fexit or sys_exit programs for setsid and setpgid.
fn attach_syscalls(
    skel: &ProctraceSkel<'_>,
    btf_hooks: bool,
    hook: SyscallHook,
) -> Result<Vec<Link>, RecordError> {
    let progs = &skel.progs;
    let programs = match hook {
        SyscallHook::Fexit => vec![
            &progs.setsid_fexit,
            &progs.setpgid_fexit,
            &progs.setpgid_compat_fexit,
        ],
        _ if btf_hooks => vec![&progs.sys_exit_btf],
        _ => vec![&progs.sys_exit_raw],
    };
    attach_loaded(programs)
}

/// Attaches the programs at the classic tracepoints of setsid's and
/// setpgid's exits, whose ids tracefs gave. Each is a perf event, which
/// its link owns.
fn attach_tracepoints(
    skel: &ProctraceSkel<'_>,
    [setsid, setpgid]: [u64; 2],
) -> Result<Vec<Link>, RecordError> {
    let progs = &skel.progs;
    let mut links = Vec::new();
    for (prog, id) in [
        (&progs.setsid_tracepoint, setsid),
        (&progs.setpgid_tracepoint, setpgid),
    ] {
        let event = tracefs::open_tracepoint(id)
            .map_err(RecordError::system(format!("opening tracepoint {id}")))?;
        let link = prog
            .attach_perf_event(event.as_raw_fd())
            .map_err(RecordError::bpf(format!("attaching to tracepoint {id}")))?;
        // The link closes it.
        let _ = event.into_raw_fd();
        links.push(link);
    }
    Ok(links)
}

/// Before Linux 5.11, BPF memory counts against RLIMIT_MEMLOCK. Raising it
/// needs CAP_SYS_RESOURCE, which not every root has; where the raise is
/// refused the kernel is either new enough not to care or the load fails
/// with its own error, so a refusal is never fatal here.
fn raise_memlock_limit() {
    let _ = nix::sys::resource::setrlimit(
        nix::sys::resource::Resource::RLIMIT_MEMLOCK,
        nix::sys::resource::RLIM_INFINITY,
        nix::sys::resource::RLIM_INFINITY,
    );
}

/// Checks the effective capabilities in `status` (/proc/self/status).
fn check_privileges(status: &str) -> Result<(), RecordError> {
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let has = |cap: u32| effective & (1 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        Ok(())
    } else {
        Err(RecordError::Permission)
    }
}

/// proctrace's PID namespace, so the kernel side can report pids as
/// proctrace sees them: a lower bound of its nesting level (NSpid counts
/// the levels from /proc's namespace down, and /proc need not belong to
/// the initial namespace: `unshare --mount-proc`, containers), and its
/// inode number.
fn pid_namespace(status: &str) -> Result<(u32, u32), RecordError> {
    let level = status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .map_or(0, |ids| ids.split_whitespace().count().saturating_sub(1));
    let inum = fs::metadata("/proc/self/ns/pid")
        .map_err(RecordError::system("reading /proc/self/ns/pid"))?
        .ino();
    Ok((level as u32, inum as u32))
}

/// The `.bss` counters, in the mapping the kernel updates too: taken out
/// of the skeleton so that every access to them is atomic.
struct Counters<'obj> {
    forked: &'obj AtomicU64,
    exited: &'obj AtomicU64,
    seeded: &'obj AtomicU64,
    compat_execs: &'obj AtomicU64,
}

impl<'obj> Counters<'obj> {
    fn take(skel: &mut ProctraceSkel<'obj>) -> Self {
        let bss = skel
            .maps
            .bss_data
            .take()
            .expect(".bss is memory-mapped by libbpf");
        // SAFETY: aligned u64s that nothing else in this process refers to
        // any more; the BPF side uses atomic adds and plain loads on them.
        let atomic = |field: &'obj mut u64| unsafe { AtomicU64::from_ptr(field) };
        Counters {
            forked: atomic(&mut bss.forked),
            exited: atomic(&mut bss.exited),
            seeded: atomic(&mut bss.seeded),
            compat_execs: atomic(&mut bss.compat_execs),
        }
    }
}

impl Probe<'_> {
    /// Starts following `pid` and everything it creates from now on.
    pub fn track(&self, pid: Pid) -> Result<(), RecordError> {
        self.skel
            .maps
            .tracked
            .update(&pid.to_ne_bytes(), &[1], MapFlags::ANY)
            .map_err(RecordError::bpf(format!("tracking pid {pid}")))?;
        self.counters.seeded.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Stops following `pid` (a seed that turned out to be gone already).
    pub fn untrack(&self, pid: Pid) {
        if self.skel.maps.tracked.delete(&pid.to_ne_bytes()).is_ok() {
            self.counters.seeded.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether every tracked process is gone. A child is counted before
    /// its parent can exit, so reading the exits before the forks can
    /// only overcount the living, never see none too early.
    pub fn tree_is_gone(&self) -> bool {
        let exited = self.counters.exited.load(Ordering::SeqCst);
        let forked = self.counters.forked.load(Ordering::SeqCst);
        let seeded = self.counters.seeded.load(Ordering::SeqCst);
        seeded + forked <= exited
    }

    /// Execs of 32-bit programs so far, where the syscall hook cannot see
    /// their setsid and setpgid; 0 where it can.
    pub fn unwatched_32bit_execs(&self) -> u64 {
        match self.syscall_hook {
            Some(SyscallHook::Tracepoint) => self.counters.compat_execs.load(Ordering::SeqCst),
            _ => 0,
        }
    }

    /// Events lost in the kernel so far: (buffer full, tracking map full).
    pub fn losses(&self) -> (u64, u64) {
        let count = |kind: loss_kind| -> u64 {
            let per_cpu = self
                .skel
                .maps
                .losses
                .lookup_percpu(&kind.0.to_ne_bytes(), MapFlags::ANY);
            per_cpu
                .ok()
                .flatten()
                .into_iter()
                .flatten()
                .filter_map(|bytes| {
                    bytes
                        .get(..8)
                        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
                })
                .sum()
        };
        (
            count(loss_kind::LOSS_OUTPUT),
            count(loss_kind::LOSS_TRACKING_FULL),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_relocates_against_a_cut_of_the_kernel_btf() {
        if !Path::new(KERNEL_BTF).exists() {
            assert!(std::env::var_os("CI").is_none(), "CI needs kernel BTF");
            return;
        }
        let settings = Settings {
            pidns: (0, PROC_PID_INIT_INO),
            buffer: BufferKind::Ring,
            btf_hooks: false,
            bpf_loop: false,
            tracked_flags: 0,
        };
        let preload = Preload::make(&KernelConfig::default(), &settings, false).unwrap();
        let cut = preload.cut.expect("the kernel's BTF cut down");
        let btf = libbpf_rs::btf::Btf::from_path(cut.path()).expect("libbpf reads the cut");
        for name in [
            "task_struct",
            "signal_struct",
            "files_struct",
            "dentry",
            "upid",
        ] {
            assert!(
                btf.type_by_name::<libbpf_rs::btf::types::Struct<'_>>(name)
                    .is_some(),
                "{name} is in the cut"
            );
        }
    }

    #[test]
    fn kernel_versions_are_read_from_distribution_releases() {
        assert_eq!(kernel_version("5.10.0-35-amd64"), (5, 10));
        assert_eq!(kernel_version("6.1.0-rc3+"), (6, 1));
        assert_eq!(kernel_version("6.18.44-fc-v782"), (6, 18));
        assert_eq!(kernel_version("garbage"), (0, 0));
    }
}

//! Loading the BPF program: privileges and BTF checked, the object opened
//! against the kernel's BTF (or a cut of it), configured, loaded and
//! attached, with the hooks that load on this kernel.
//!
//! - [`preload`]: what is made ahead, on two threads: the cut BTF, the
//!   largest maps, the syscall tracepoints' ids;
//! - [`configure`]: the read-only data and map sizes set before the load;
//! - [`attach`]: attaching the programs, and detaching the slow ones;
//! - [`counters`]: the kernel side's counters and the tracked map, read
//!   and written while the recording runs;
//! - [`checks`]: privileges and the PID namespace, checked first;
//! - [`sampling`]: the CPU profile's perf events, one per CPU;
//! - [`probes`]: the `--probe` uprobes and USDT probes;
//! - [`offcpu`]: the `--off-cpu` programs, and the totals they keep;
//! - [`marks`], [`uprobe_multi`], [`jump`]: the test marks' uprobes on
//!   libc, registered while the object loads.

mod attach;
mod checks;
mod configure;
mod counters;
mod cut_btf;
mod cut_cache;
mod exec_apart;
mod jited;
mod jump;
mod marks;
mod memory;
mod offcpu;
mod preload;
mod probes;
mod sampling;
pub(super) mod tracefs;
mod uprobe_multi;

use std::fs;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::time::Instant;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapHandle, OpenObject, ProgramType};

use crate::bpf::types::defaults;
use crate::bpf::{OpenProctraceSkel, ProctraceSkel, ProctraceSkelBuilder};
use crate::event::{BufferKind, CpuProfile, OffCpuSettings, SyscallHook};
use crate::recorder::error::{Degraded, RecordError};
use crate::recorder::probes::runner::TestMarks;
use crate::recorder::probes::Resolved;
use attach::{attach_sched, attach_syscalls, attach_tracepoints, detach_in_child};
use checks::{check_privileges, pid_namespace, raise_memlock_limit};
use configure::{choose_buffer, configure, has_bpf_loop, tracked_map_flags};
use counters::Counters;
use cut_btf::CutBtf;
use exec_apart::ExecProgram;
use marks::{Early, MarksChild};
use preload::Preload;
pub(crate) use probes::kernel_has_cookies as probes_supported;
use sampling::attach_sampler;
pub(crate) use sampling::check_rate;
use uprobe_multi::EarlyLink;

const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// How many processes of the tree can be alive at once, unless
/// `Recorder::max_processes` says otherwise.
pub const DEFAULT_MAX_PROCESSES: u32 = defaults::DEFAULT_MAX_PROCESSES.0;

/// The ring buffer's size in MiB, unless `Recorder::ring_bytes` says
/// otherwise: 2 MiB per CPU, from 4 to 16 MiB.
pub fn default_ring_mib() -> u32 {
    let cpus = libbpf_rs::num_possible_cpus().unwrap_or(1) as u32;
    cpus.saturating_mul(defaults::RING_MIB_PER_CPU.0)
        .next_power_of_two()
        .clamp(defaults::MIN_RING_MIB.0, defaults::MAX_DEFAULT_RING_MIB.0)
}

/// Which kernel-to-user buffer to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BufferChoice {
    /// The ring buffer where the kernel has one, else the perf buffer.
    #[default]
    Auto,
    /// Always the per-CPU perf buffer.
    Perf,
}

/// How the sched tracepoints are hooked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
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
    /// The process exits when the recording ends: the links that are
    /// slow to detach go to a child process (see [`detach_in_child`]),
    /// and the names' parsed files are not freed.
    pub exits_after: bool,
    /// Samples per second of the CPU profile; `None`: no profile.
    pub cpu_profile: Option<u32>,
    /// The probes to attach (`--probe`), resolved.
    pub probes: Vec<Resolved>,
    /// Copy the user stack at each probe hit, to unwind.
    pub probe_stacks: bool,
    /// Keep the names frames are given between recordings, and look
    /// there first ([`crate::stacks::cache`]).
    pub name_cache: bool,
    /// Where the tree's processes say which test runs in them (pytest's
    /// variable), followed when stacks or hits are counted, to split them
    /// by test.
    pub test_marks: Option<TestMarks>,
    /// Arm the test marks as one uprobe.multi link where the kernel has
    /// them (6.6+); else, or off, as two perf-event uprobes.
    pub uprobe_multi: bool,
    /// Follow the tree's waits (`--off-cpu`), keeping the stacks of those
    /// of at least this many nanoseconds; `None`: not followed.
    pub off_cpu: Option<u64>,
}

impl KernelConfig {
    /// Whether the kernel walks the Python frames of the stacks it takes
    /// (a CPU profile's samples, probe hits with stacks, long waits and
    /// their wakers), sending the code objects they ran on the samples
    /// ring.
    pub fn python_frames(&self) -> bool {
        self.cpu_profile.is_some()
            || self.off_cpu.is_some()
            || (self.probe_stacks && !self.probes.is_empty())
    }
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            buffer: BufferChoice::Auto,
            hooks: HookChoice::Auto,
            syscall_hook: None,
            raw: false,
            max_processes: DEFAULT_MAX_PROCESSES,
            ring_bytes: default_ring_mib() << 20,
            // 1 MiB per CPU: bursts of thousands of processes between polls.
            perf_pages: 256,
            btf: None,
            capture_fds: true,
            env_names: crate::event::RUNNER_VARIABLES
                .iter()
                .map(|n| n.to_string())
                .collect(),
            exits_after: false,
            cpu_profile: None,
            probes: Vec::new(),
            probe_stacks: true,
            name_cache: true,
            test_marks: None,
            uprobe_multi: true,
            off_cpu: None,
        }
    }
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
    pub warnings: Vec<Degraded>,
    /// How the CPU profile samples, when there is one.
    pub cpu_profile: Option<CpuProfile>,
    /// How the tree's waits are followed, with `--off-cpu`.
    pub off_cpu: Option<OffCpuSettings>,
    /// Where the kernel put the code of every program loaded, the exec
    /// program's second object's too.
    own_code: Vec<std::ops::Range<u64>>,
    /// Detached one by one when dropped: detaching tracepoints from several
    /// threads at once soft-locks Linux 5.10 and oopses 6.12 (seen in the
    /// kernel matrix), though it would share the RCU waits.
    _links: Vec<Link>,
    /// The classic tracepoints' links, each an RCU grace period to detach,
    /// and the uprobes'.
    slow_links: Vec<Link>,
    /// The child that holds the test marks' uprobes: let go when dropped.
    marks: Option<MarksChild>,
    /// The test marks' link, where it was made while the object loaded.
    early_marks: Option<EarlyLink>,
    detach_in_child: bool,
}

impl Probe<'_> {
    /// Returns once the test marks' uprobes are armed, where there are
    /// any: the command's first tests are named only then. Says why not.
    pub fn wait_for_marks(&self) -> Option<Degraded> {
        let why = self.marks.as_ref()?.wait_armed().err()?;
        Some(Degraded::TestMarks { reason: why })
    }

    /// A handle of its own on the tracked map, for the embedder
    /// ([`crate::recorder::LiveRecording::tracked_map`]).
    pub fn tracked_map(&self) -> Result<MapHandle, RecordError> {
        MapHandle::try_from(&self.skel.maps.tracked)
            .map_err(RecordError::bpf("sharing the tracked map"))
    }

    /// Where the kernel put the loaded programs' code, whose frames a
    /// stack taken inside one of them is left without.
    pub fn own_code(&self) -> Vec<std::ops::Range<u64>> {
        self.own_code.clone()
    }
}

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        let slow = std::mem::take(&mut self.slow_links);
        // Its slot is emptied here, as its fd closes.
        let early = self.early_marks.take().map(|early| early.link);
        if self.detach_in_child && (!slow.is_empty() || early.is_some()) {
            detach_in_child(slow, early);
        }
    }
}

/// Checks privileges and BTF, then opens, configures, loads and attaches.
pub fn load<'obj>(
    config: &KernelConfig,
    storage: &'obj mut MaybeUninit<OpenObject>,
) -> Result<Probe<'obj>, RecordError> {
    let (settings, kernel_btf) = settle(config)?;
    let early = (config.test_marks.as_ref()).and_then(|m| Early::start(m, settings.uprobe_multi));
    let hooks = syscall_hooks(config, kernel_btf, settings.btf_hooks);
    let started = Instant::now();
    let preload = Preload::make(
        config,
        &settings,
        hooks.first() == Some(&SyscallHook::Tracepoint),
    )?;
    log::debug!(
        "made ahead in {:.1} ms: {}",
        millis(started),
        preload.describe()
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
        match load_with(
            config,
            &settings,
            &preload,
            early.as_ref(),
            btf.as_deref(),
            hook,
            storage,
        ) {
            Ok(mut probe) => {
                if let Some(Early::Link(arming)) = early {
                    probe.early_marks = arming.into_link();
                }
                return Ok(probe);
            }
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

/// Checks privileges, BTF and what this kernel can do for the probes,
/// and settles what does not depend on the hook for setsid/setpgid; also
/// whether the kernel has BTF of its own.
fn settle(config: &KernelConfig) -> Result<(Settings, bool), RecordError> {
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
    if config.off_cpu.is_some() && !kernel_btf {
        return Err(RecordError::OffCpuNeedsBtf);
    }
    let cookies = !config.probes.is_empty() && probes::kernel_has_cookies();
    if !config.probes.is_empty() {
        probes::check_kernel(&config.probes, cookies)?;
    }
    raise_memlock_limit();
    let settings = Settings {
        pidns,
        buffer: choose_buffer(config.buffer),
        btf_hooks: config.hooks != HookChoice::Raw && kernel_btf,
        bpf_loop: has_bpf_loop(),
        tracked_flags: tracked_map_flags(),
        cookies,
        uprobe_multi: config.uprobe_multi
            && config.test_marks.is_some()
            && uprobe_multi::kernel_has_uprobe_multi(),
    };
    if settings.buffer == BufferKind::Ring {
        memory::check_ring_size(config.ring_bytes)?;
    }
    // The kernel's own refusal of an empty map is a bare EINVAL.
    if config.max_processes == 0 {
        return Err(RecordError::MaxProcesses);
    }
    Ok((settings, kernel_btf))
}

/// What is settled before the program is opened.
#[derive(Clone, Copy)]
pub(super) struct Settings {
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
    /// With probes, the kernel has BPF cookies (5.15+) to tell them apart
    /// by; else each uprobe has a copy of the program of its own.
    cookies: bool,
    /// With test marks, the kernel has uprobe.multi links (6.6+), which
    /// hold both marks as one link (see `marks`).
    uprobe_multi: bool,
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

/// Opens, configures, loads and attaches with `hook` for setsid/setpgid,
/// relocating against `btf` where given (else the kernel's own).
fn load_with<'obj>(
    config: &KernelConfig,
    settings: &Settings,
    preload: &Preload,
    early_marks: Option<&Early>,
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
    let (mut skel, exec) = if exec_apart::worth_it() {
        let exec = ExecProgram {
            btf: settings.btf_hooks && config.hooks == HookChoice::Btf,
            looped: settings.bpf_loop,
        };
        exec_apart::load(open, btf, exec)?
    } else {
        let skel = open
            .load()
            .map_err(RecordError::bpf("loading the BPF program into the kernel"))?;
        (skel, exec_apart::Loaded::default())
    };
    let loaded = Instant::now();
    let counters = Counters::take(&mut skel);
    let attached = attach(&skel, config, settings, early_marks, hook, tracepoints)?;
    log::debug!(
        "libbpf loaded the object (relocation, maps, verifier) in {:.1} ms; attached in {:.1} ms",
        (loaded - started).as_secs_f64() * 1e3,
        millis(loaded)
    );
    let mut links = attached.links;
    links.extend(exec.links);
    let mut own_code = jited::own_code(&skel);
    own_code.extend(exec.code);
    Ok(Probe {
        skel,
        counters,
        buffer: settings.buffer,
        syscall_hook: attached.syscall_hook,
        warnings: attached.warnings,
        cpu_profile: attached.cpu_profile,
        off_cpu: attached.off_cpu,
        own_code,
        _links: links,
        slow_links: attached.slow_links,
        marks: attached.marks,
        early_marks: None,
        detach_in_child: config.exits_after,
    })
}

/// What attaching gave.
struct Attached {
    links: Vec<Link>,
    /// Those that wait out an RCU grace period each to detach.
    slow_links: Vec<Link>,
    /// The child that holds the test marks' uprobes.
    marks: Option<MarksChild>,
    syscall_hook: Option<SyscallHook>,
    warnings: Vec<Degraded>,
    cpu_profile: Option<CpuProfile>,
    off_cpu: Option<OffCpuSettings>,
}

/// Attaches the loaded programs: the sched tracepoints, the sampler, the
/// probes and test marks, and `hook` for setsid/setpgid (the syscall
/// tracepoints by their `tracepoints` ids), the marks through `early`
/// where it was made.
fn attach(
    skel: &ProctraceSkel<'_>,
    config: &KernelConfig,
    settings: &Settings,
    early: Option<&Early>,
    hook: SyscallHook,
    tracepoints: Option<[u64; 2]>,
) -> Result<Attached, RecordError> {
    let mut links = attach_sched(skel, settings.btf_hooks)?;
    let cpu_profile = match config.cpu_profile {
        Some(hz) => {
            let (sampling, clock) = attach_sampler(skel, hz)?;
            links.extend(sampling);
            Some(CpuProfile { hz, clock })
        }
        None => None,
    };
    let (waiting, off_cpu) = offcpu::attach(skel, config)?;
    links.extend(waiting);
    // Unregistering a uprobe waits for the tasks in it (~100 ms a link on
    // 6.18): detached as the tracepoints are.
    let mut slow_links = probes::attach(skel, &config.probes, settings.cookies)?;
    let mut warnings = Vec::new();
    let attached = match tracepoints {
        Some(ids) => attach_tracepoints(skel, ids),
        None => attach_syscalls(skel, settings.btf_hooks, hook),
    };
    // After the tracepoints: a child forked here (where none could be
    // forked early) holds the kernel's event_mutex through an RCU grace
    // period (~20 ms here) as it registers its uprobes, which the
    // tracepoints' perf_event_open would wait out.
    let marks = match (config.test_marks.as_ref(), early) {
        (Some(m), early) if settings.uprobe_multi => {
            let arming = early.and_then(Early::arming);
            marks::attach_multi(skel, m, arming).map(|link| {
                slow_links.extend(link);
                None
            })
        }
        (Some(m), Some(Early::Child(child))) => marks::attach_early(skel, m, child).map(Some),
        (Some(m), _) => marks::attach_apart(skel, m).map(Some),
        (None, _) => Ok(None),
    };
    let marks = marks.unwrap_or_else(|reason| {
        warnings.push(Degraded::TestMarks { reason });
        None
    });
    let syscall_hook = match attached {
        Ok(syscall_links) if hook == SyscallHook::Tracepoint => {
            slow_links.extend(syscall_links);
            Some(hook)
        }
        Ok(syscall_links) => {
            links.extend(syscall_links);
            Some(hook)
        }
        // Without it the tree is still followed: a warning, not an error.
        Err(why) if hook == SyscallHook::SysExit => {
            warnings.push(Degraded::NoSyscallHook {
                reason: why.to_string(),
            });
            None
        }
        Err(why) => return Err(why),
    };
    Ok(Attached {
        links,
        slow_links,
        marks,
        syscall_hook,
        warnings,
        cpu_profile,
        off_cpu,
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

#[cfg(test)]
mod tests {
    use super::configure::PROC_PID_INIT_INO;
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
            cookies: false,
            uprobe_multi: false,
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
}

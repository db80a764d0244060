//! The test binary as a sampled process: its own executable mappings and
//! stack, read as the recorder reads another process's.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::unwind::Module;

/// The executable file mappings of this process, from `/proc/self/maps`.
pub fn self_modules() -> Vec<Module> {
    let maps = fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines().filter_map(parse_maps_line).collect()
}

/// The libc this process maps.
pub fn self_libc() -> PathBuf {
    let modules = self_modules().into_iter().map(|m| m.path);
    let mut libc = modules.filter(|p| p.file_name().is_some_and(|n| n == "libc.so.6"));
    libc.next().expect("this process maps libc.so.6")
}

/// `start-end perms offset dev inode path`, for an executable mapping of
/// a file.
fn parse_maps_line(line: &str) -> Option<Module> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let executable = fields.next()?.contains('x');
    let file_offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let ino = fields.next()?.parse().ok()?;
    let path = fields.next().filter(|p| p.starts_with('/') && executable)?;
    let hex = |field| u64::from_str_radix(field, 16).ok();
    Some(Module {
        start: hex(start)?,
        end: hex(end)?,
        file_offset,
        path: path.into(),
        dev: hex(major)? << 20 | hex(minor)?,
        ino,
        build_id: None,
    })
}

/// Up to `len` bytes of this process's memory from `addr`, through
/// `/proc/self/mem` as the kernel copies a sampled stack: short at the end
/// of the mapping.
pub fn read_self(addr: u64, len: usize) -> Vec<u8> {
    let mem = File::open("/proc/self/mem").expect("/proc/self/mem");
    let mut buf = vec![0; len];
    let n = mem.read_at(&mut buf, addr).expect("the stack is readable");
    buf.truncate(n);
    buf
}

/// The registers here, as a sample would catch them in the function the
/// macro is expanded in (a macro, not a function, for that).
macro_rules! capture_regs {
    () => {{
        let (ip, sp, fp, lr): (u64, u64, u64, u64);
        // SAFETY: reads registers into outputs, touching no memory.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {fp}, rbp",
                "xor {lr:e}, {lr:e}",
                ip = out(reg) ip,
                sp = out(reg) sp,
                fp = out(reg) fp,
                lr = out(reg) lr,
                options(nomem, nostack),
            );
        }
        // SAFETY: as above.
        #[cfg(target_arch = "aarch64")]
        unsafe {
            std::arch::asm!(
                "adr {ip}, .",
                "mov {sp}, sp",
                "mov {fp}, x29",
                "mov {lr}, x30",
                ip = out(reg) ip,
                sp = out(reg) sp,
                fp = out(reg) fp,
                lr = out(reg) lr,
                options(nomem, nostack, preserves_flags),
            );
        }
        $crate::stacks::unwind::Regs { ip, sp, fp, lr }
    }};
}
pub(crate) use capture_regs;

/// Runs `program` with `args` (a compiler, binutils), which must succeed.
pub fn run(program: &str, args: &[&Path]) {
    let status = Command::new(program).args(args).status();
    assert!(status.is_ok_and(|s| s.success()), "{program} {args:?}");
}

//! The cut of the kernel's BTF that libbpf opens (see [`crate::recorder::wire::btf`]):
//! the one kept by an earlier run (see [`CutCache`]), else made now.

use std::fs::File;
use std::io::Write;
use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

use super::cut_cache::CutCache;
use crate::recorder::wire::btf::cut_down;

/// The cut-down BTF, in a file for libbpf to open by path: kept from an
/// earlier run (see [`CutCache`]), else a memory file.
pub struct CutBtf {
    file: File,
    /// Whether an earlier run made it.
    pub kept: bool,
}

impl CutBtf {
    /// Cuts the kernel BTF at `kernel` (the running kernel's) down for the
    /// program whose own BTF is `local`, or finds it cut earlier.
    pub fn new(kernel: &Path, local: &[u8]) -> Option<CutBtf> {
        let cache = CutCache::new(local);
        if let Some(file) = cache.as_ref().and_then(CutCache::open) {
            return Some(CutBtf { file, kept: true });
        }
        let kernel = KernelBtf::open(kernel)?;
        let cut = cut_down(kernel.bytes(), local)?;
        let file = match cache.and_then(|cache| cache.store(&cut)) {
            Some(file) => file,
            None => in_memory(&cut)?,
        };
        Some(CutBtf { file, kept: false })
    }

    pub fn len(&self) -> u64 {
        self.file.metadata().map_or(0, |meta| meta.len())
    }

    pub fn path(&self) -> PathBuf {
        format!("/proc/self/fd/{}", self.file.as_raw_fd()).into()
    }
}

fn in_memory(data: &[u8]) -> Option<File> {
    // SAFETY: a plain system call on a constant name.
    let fd = unsafe { libc::memfd_create(c"proctrace-btf".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a new descriptor, owned from here on.
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.write_all(data).ok()?;
    Some(file)
}

/// The kernel's BTF: mapped where sysfs allows it (6.16+), which spares
/// copying its 5 MB, else read.
enum KernelBtf {
    Mapped(NonNull<libc::c_void>, usize),
    Read(Vec<u8>),
}

impl KernelBtf {
    fn open(path: &Path) -> Option<Self> {
        let file = File::open(path).ok()?;
        let len = NonZeroUsize::new(file.metadata().ok()?.len() as usize)?;
        // SAFETY: a private, read-only mapping, unmapped on drop; the
        // kernel's BTF never changes.
        let mapped = unsafe {
            mmap(
                None,
                len,
                ProtFlags::PROT_READ,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_POPULATE,
                &file,
                0,
            )
        };
        Some(match mapped {
            Ok(start) => KernelBtf::Mapped(start, len.get()),
            Err(_) => KernelBtf::Read(std::fs::read(path).ok()?),
        })
    }

    fn bytes(&self) -> &[u8] {
        match self {
            // SAFETY: `len` bytes mapped at `start` until drop.
            KernelBtf::Mapped(start, len) => unsafe {
                std::slice::from_raw_parts(start.as_ptr().cast(), *len)
            },
            KernelBtf::Read(bytes) => bytes,
        }
    }
}

impl Drop for KernelBtf {
    fn drop(&mut self) {
        if let KernelBtf::Mapped(start, len) = *self {
            // SAFETY: mapped by `open`, and no slice of it outlives self.
            let _ = unsafe { munmap(start, len) };
        }
    }
}

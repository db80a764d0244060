//! Files mapped in a chroot, by the paths that reach them from here.
//!
//! The kernel names a mapped file by its path from the mapping process's
//! root. For a process under `chroot DIR`, that path reaches another
//! file here, or none: the unwinder, the names and the interpreters'
//! layouts would read the host's `/usr/lib/.../libc.so.6` for the
//! chroot's. Such a mapping's path becomes `DIR` joined to it, which
//! still reaches the file once the process is gone (names are read at
//! the end), and says where the code was.
//!
//! A path is only changed where the file it then reaches is the one
//! mapped (same device and inode) and the kernel's path does not: a
//! process may chroot after mapping its first files, and its root is
//! read later than it mapped them. Where the root is not reachable from
//! here (a container's own mount namespace, `/proc/PID/root` reads as
//! `/`) or the process is already gone, the path stays as it was.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::event::Pid;
use crate::recorder::wire::Mapping;

/// Processes whose root is remembered at the most; past it they are
/// all forgotten, and read again.
const REMEMBERED: usize = 4096;

/// The root directory of each process that mapped files, as reached from
/// here; `None` for this process's own root or one not reachable.
#[derive(Default)]
pub(super) struct Roots {
    of: HashMap<Pid, Option<PathBuf>>,
}

impl Roots {
    /// `pid` exec'd: it may have changed its root before.
    pub(super) fn exec(&mut self, pid: Pid) {
        self.of.remove(&pid);
    }

    /// Points `mapping` at its file through its process's root, where
    /// only that path reaches the file mapped.
    pub(super) fn reach(&mut self, mapping: &mut Mapping) {
        let (Some((major, minor)), Some(ino)) = (mapping.dev, mapping.ino) else {
            return;
        };
        if !mapping.path.starts_with('/') || mapping.path.starts_with("//") {
            return;
        }
        let Some(root) = self.root(mapping.pid) else {
            return;
        };
        let mapped = (libc::makedev(major, minor), ino);
        let is_mapped =
            |path: &Path| fs::metadata(path).is_ok_and(|meta| (meta.dev(), meta.ino()) == mapped);
        let inside = root.join(mapping.path.trim_start_matches('/'));
        if !is_mapped(Path::new(&mapping.path)) && is_mapped(&inside) {
            if let Some(inside) = inside.to_str() {
                mapping.path = inside.to_owned();
            }
        }
    }

    /// The root of `pid` where it is not this process's.
    fn root(&mut self, pid: Pid) -> Option<&Path> {
        if self.of.len() >= REMEMBERED && !self.of.contains_key(&pid) {
            self.of.clear();
        }
        self.of
            .entry(pid)
            .or_insert_with(|| {
                let root = fs::read_link(format!("/proc/{pid}/root")).ok()?;
                (root != Path::new("/")).then_some(root)
            })
            .as_deref()
    }
}

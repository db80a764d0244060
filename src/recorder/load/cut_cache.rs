//! Cuts of the kernel's BTF kept for the rest of the boot, in a directory
//! only this user can write.
//!
//! A cut costs a few milliseconds of every start (the kernel's 5 MB of BTF
//! read through); its inputs cannot change until the machine boots
//! again or proctrace is rebuilt, so the cut made once serves every later
//! recording. An entry is named by all that decides its contents: the
//! boot, the executable (its device, inode, size and modification time)
//! and the program's own BTF. Anything that does not check out (a
//! directory or file another user could have written, a file that is not
//! whole BTF) is passed over, and the cut is made again.

use std::fs::{self, File};
use std::hash::Hasher;
use std::io::{Read, Seek};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::private_files::{open_owned, private_dir, write_whole};
use crate::recorder::wire::btf::{is_whole_btf, FnvHasher};

/// tmpfs on systemd machines, and root's alone.
const DIR: &str = "/run/proctrace";
/// Entries kept at most; more are the leftovers of earlier builds.
const KEEP: usize = 8;

/// Where the cut for the program whose own BTF is `local` is kept.
pub struct CutCache {
    entry: PathBuf,
}

impl CutCache {
    /// The entry for this boot, executable and `local`; `None` where there
    /// is no directory this user alone can write.
    pub fn new(local: &[u8]) -> Option<CutCache> {
        CutCache::within(Path::new(DIR), local)
    }

    fn within(dir: &Path, local: &[u8]) -> Option<CutCache> {
        let boot = fs::read("/proc/sys/kernel/random/boot_id").ok()?;
        let exe = fs::metadata("/proc/self/exe").ok()?;
        let mut hasher = FnvHasher::default();
        hasher.write(&boot);
        for number in [exe.dev(), exe.ino(), exe.size()] {
            hasher.write_u64(number);
        }
        hasher.write_i64(exe.mtime());
        hasher.write_i64(exe.mtime_nsec());
        hasher.write(local);
        let dir = private_dir(dir)?;
        Some(CutCache {
            entry: dir.join(format!("{:016x}.btf", hasher.finish())),
        })
    }

    /// The cut kept earlier, if it is there and whole.
    pub fn open(&self) -> Option<File> {
        let mut file = open_owned(&self.entry)?;
        let mut data = Vec::new();
        file.read_to_end(&mut data).ok()?;
        file.rewind().ok()?;
        is_whole_btf(&data).then_some(file)
    }

    /// Keeps `cut`, written whole before it is renamed into place, and
    /// returns it opened; removes the other entries once there are too
    /// many.
    pub fn store(&self, cut: &[u8]) -> Option<File> {
        if !write_whole(&self.entry, cut) {
            return None;
        }
        self.prune();
        File::open(&self.entry).ok()
    }

    fn prune(&self) {
        let Some(dir) = self.entry.parent() else {
            return;
        };
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        let others: Vec<PathBuf> = entries
            .filter_map(|entry| Some(entry.ok()?.path()))
            .filter(|path| path != &self.entry)
            .collect();
        if others.len() >= KEEP {
            for path in others {
                let _ = fs::remove_file(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs::DirBuilder;
    use std::os::unix::fs::DirBuilderExt;

    use super::*;

    fn some_btf() -> Vec<u8> {
        fs::read("/sys/kernel/btf/vmlinux").expect("the kernel's BTF")
    }

    #[test]
    fn a_stored_cut_is_found_whole_and_a_damaged_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let btf = some_btf();
        let cache = CutCache::within(dir.path(), b"local").unwrap();
        assert!(cache.open().is_none());
        cache.store(&btf).unwrap();
        let mut kept = Vec::new();
        cache.open().unwrap().read_to_end(&mut kept).unwrap();
        assert!(kept == btf, "the entry differs from what was stored");
        // Another program's BTF is another entry.
        assert!(CutCache::within(dir.path(), b"other")
            .unwrap()
            .open()
            .is_none());
        fs::write(&cache.entry, &btf[..btf.len() - 1]).unwrap();
        assert!(cache.open().is_none(), "a cut-off entry was used");
    }

    #[test]
    fn a_directory_others_can_write_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        DirBuilder::new().mode(0o777).create(&shared).unwrap();
        fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        assert!(CutCache::within(&shared, b"local").is_none());
    }

    #[test]
    fn old_entries_are_removed_once_there_are_too_many() {
        let dir = tempfile::tempdir().unwrap();
        let btf = some_btf();
        for n in 0..KEEP {
            fs::write(dir.path().join(format!("{n}.btf")), b"old").unwrap();
        }
        let cache = CutCache::within(dir.path(), b"local").unwrap();
        cache.store(&btf).unwrap();
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1);
        assert!(cache.open().is_some());
    }
}

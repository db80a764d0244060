//! Files kept between recordings in a directory only this user can write:
//! the cut of the kernel's BTF, the names frames were given. Anything that
//! does not check out (a directory or file another user could have
//! written, a symlink) is passed over. A reader never trusts a torn file:
//! a file that cannot tell by itself whether it was read whole is written
//! into a file of its own and renamed into place, so that a reader sees
//! the old one or the new one; one that can (an entry with its checksum),
//! or that does no harm torn (a count), is written in place: see
//! [`overwrite`].

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// `dir`, made if needed, if only this user can write it.
pub(crate) fn private_dir(dir: &Path) -> Option<PathBuf> {
    let _ = DirBuilder::new().recursive(true).mode(0o700).create(dir);
    let meta = fs::symlink_metadata(dir).ok()?;
    (meta.is_dir() && owned_by_us(&meta)).then(|| dir.to_owned())
}

/// The file at `path` opened for reading, if it is this user's alone.
pub(crate) fn open_owned(path: &Path) -> Option<File> {
    open_ours(OpenOptions::new().read(true), path)
}

/// The file at `path` opened to be read and written in place, made empty
/// where it is missing, if it is this user's alone.
pub(crate) fn open_owned_rw(path: &Path) -> Option<File> {
    open_ours(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600),
        path,
    )
}

/// The file at `path` opened with `options`, never through a symlink, if
/// it is this user's alone.
fn open_ours(options: &mut OpenOptions, path: &Path) -> Option<File> {
    let file = options.custom_flags(libc::O_NOFOLLOW).open(path).ok()?;
    let meta = file.metadata().ok()?;
    (meta.is_file() && owned_by_us(&meta)).then_some(file)
}

/// The bytes of the file at `path`, if it is this user's alone.
pub(crate) fn read_owned(path: &Path) -> Option<Vec<u8>> {
    let mut file = open_owned(path)?;
    let mut data = Vec::new();
    file.read_to_end(&mut data).ok()?;
    Some(data)
}

/// Writes `data` over the file at `path`, in place where it is this user's
/// alone (else as [`write_whole`] does): replacing the file would free its
/// blocks, which on a filesystem mounted `-o discard` waits for the disk,
/// about a millisecond a file. A reader may see the file torn: what is
/// written this way must say whether it is whole.
pub(crate) fn overwrite(path: &Path, data: &[u8]) -> bool {
    let Some(file) = open_ours(OpenOptions::new().write(true), path) else {
        return write_whole(path, data);
    };
    if file.write_all_at(data, 0).is_err() {
        return false;
    }
    let len = data.len() as u64;
    let longer = file.metadata().map_or(true, |meta| meta.len() > len);
    !longer || file.set_len(len).is_ok()
}

/// Writes `data` to `path` whole: into a file of its own, then renamed
/// into place; false where it could not be.
pub(crate) fn write_whole(path: &Path, data: &[u8]) -> bool {
    let partial = path.with_extension(format!("{}.partial", std::process::id()));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&partial)
        .and_then(|mut file| file.write_all(data))
        .and_then(|()| fs::rename(&partial, path));
    if written.is_err() {
        let _ = fs::remove_file(&partial);
    }
    written.is_ok()
}

/// Whether `meta` is this user's and no one else may write it.
fn owned_by_us(meta: &fs::Metadata) -> bool {
    // SAFETY: a plain system call without arguments.
    let uid = unsafe { libc::geteuid() };
    meta.uid() == uid && meta.mode() & 0o022 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_written_over_holds_just_the_new_bytes_and_keeps_its_inode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entry");
        assert!(overwrite(&path, b"made where it was missing"));
        let inode = fs::metadata(&path).unwrap().ino();
        for data in [&b"longer than what it writes over"[..], b"short", b""] {
            assert!(overwrite(&path, data));
            assert_eq!(fs::read(&path).unwrap(), data);
        }
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode);
    }
}

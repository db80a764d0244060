//! What naming frames learned, kept across recordings: the frames of each
//! file offset of each file, and of each kernel address of this boot.
//!
//! Naming is most of what a profile costs after its command: a library
//! with debug information has its DWARF parsed on every run (libc's,
//! where its debug package is installed), and kallsyms is read whole.
//! Debug files with compressed DWARF are kept here inflated as well (see
//! the `inflated` module).
//!
//! A suite runs the same code run after run, so the same offsets come
//! back; the fifteen `cc1` of a build are one file. Each file's
//! names are kept under the identity of its contents, never its path: its
//! GNU build id, or where it has none its device, inode, size and
//! modification time, so a file replaced at the same path starts afresh.
//! Kernel names are kept for the boot and the modules loaded.
//!
//! The entries live in `$XDG_CACHE_HOME/proctrace/names` (else
//! `~/.cache/proctrace/names`), in a directory only this user can write;
//! an entry that is not this user's, or does not parse, is passed over.
//! The directory is kept under [`LIMIT`] bytes, the entries used least
//! recently removed first. Pruning stats every entry, slow where their
//! inodes are no longer cached, so it waits until the entries have grown
//! by [`PRUNE_AFTER`] since the last prune, a count kept in the file
//! `.grown`: the directory never holds more than the two together.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::hash::Hasher;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use memmap2::Mmap;
use object::read::ReadCache;
use object::Object;

use super::ksyms::Ksyms;
use super::texts::{put_u32s, put_u64s, Texts, Words};
use crate::private_files::{
    open_owned, open_owned_rw, overwrite, private_dir, read_owned, write_whole,
};

/// The most the entries take together.
pub const LIMIT: u64 = 64 << 20;

/// How much the entries grow before they are pruned again.
pub const PRUNE_AFTER: u64 = LIMIT / 16;

/// The file that counts the bytes the entries grew by since the last
/// prune: eight little-endian bytes, written in place.
const GROWN: &str = ".grown";

/// Where names are kept; a cache that is off keeps nothing.
#[derive(Debug, Clone, Default)]
pub struct NameCache {
    dir: Option<PathBuf>,
}

/// One frame as kept: the function, and its source file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Named {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// The names of one file (or of the kernel) as kept, and what was learned
/// since it was read.
#[derive(Debug, Default)]
pub(crate) struct Entry {
    /// Where it is kept; `None` for a cache that is off.
    path: Option<PathBuf>,
    kept: Kept,
    /// The size of the file `kept` was read from.
    kept_len: u64,
    /// By offset (or kernel address): the frames, caller first.
    learned: BTreeMap<u64, Vec<Named>>,
}

impl NameCache {
    /// The user's cache, or none where no directory only this user can
    /// write can be had.
    pub fn open() -> NameCache {
        NameCache {
            dir: cache_home().and_then(|home| private_dir(&home.join("proctrace/names"))),
        }
    }

    /// A cache in `dir`, made if needed: for tests.
    pub fn within(dir: &Path) -> NameCache {
        NameCache {
            dir: private_dir(dir),
        }
    }

    /// A cache that keeps nothing (`--no-cache`).
    pub fn off() -> NameCache {
        NameCache::default()
    }

    /// The entry of the file at `path` as it is now.
    pub(crate) fn file(&self, path: &Path) -> Entry {
        match (&self.dir, file_key(path)) {
            (Some(dir), Some(key)) => Entry::read(dir.join(key)),
            _ => Entry::default(),
        }
    }

    /// The entry of the kernel's symbols, this boot with these modules.
    pub(crate) fn kernel(&self) -> Entry {
        match (&self.dir, kernel_key()) {
            (Some(dir), Some(key)) => Entry::read(dir.join(key)),
            _ => Entry::default(),
        }
    }

    /// The symbols of the kernel's core text kept this boot (see
    /// [`Ksyms`]).
    pub(crate) fn kernel_text(&self) -> Option<Ksyms> {
        let path = self.dir.as_ref()?.join(kernel_text_key()?);
        // Mapped, not read: 4 MB copied once less. It is only ever
        // replaced whole (`keep_kernel_text`), never changed in place.
        // SAFETY: read-only, of a file no one truncates; see above.
        let data = unsafe { Mmap::map(&open_owned(&path)?) }.ok()?;
        let table = Ksyms::from_bytes(&data)?;
        used(&path);
        Some(table)
    }

    /// Keeps `table`, the symbols of the kernel's core text, for the boot.
    pub(crate) fn keep_kernel_text(&self, table: &Ksyms) {
        if let (Some(dir), Some(key)) = (&self.dir, kernel_text_key()) {
            let bytes = table.to_bytes();
            if write_whole(&dir.join(key), &bytes) {
                self.grew(bytes.len() as u64);
            }
        }
    }

    /// The path of the kept file `name`, made from what `make` gives
    /// where it is not kept yet; `None` where the cache is off, or there
    /// is nothing to keep.
    pub(crate) fn keep(
        &self,
        name: &str,
        make: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Option<PathBuf> {
        let path = self.dir.as_ref()?.join(name);
        if open_owned(&path).is_some() {
            used(&path);
            return Some(path);
        }
        let bytes = make()?;
        if !write_whole(&path, &bytes) {
            return None;
        }
        self.grew(bytes.len() as u64);
        Some(path)
    }

    /// Counts `bytes` more kept, and prunes once the entries have grown
    /// by [`PRUNE_AFTER`] since the last prune, or where there is no
    /// count (a cache an older proctrace kept). Two recordings that end
    /// at once may each miss the other's growth: the count is a bound
    /// kept cheaply, not a ledger.
    pub(crate) fn grew(&self, bytes: u64) {
        let Some(dir) = &self.dir else { return };
        if bytes == 0 {
            return;
        }
        let Some(mut count) = open_owned_rw(&dir.join(GROWN)) else {
            return self.prune();
        };
        let mut word = [0u8; 8];
        let counted = count.read_exact(&mut word).is_ok();
        let grown = u64::from_le_bytes(word).saturating_add(bytes);
        let grown = if counted && grown < PRUNE_AFTER {
            grown
        } else {
            self.prune();
            0
        };
        let _ = count.write_all_at(&grown.to_le_bytes(), 0);
    }

    /// Removes the entries used least recently until all of them fit in
    /// [`LIMIT`].
    pub(crate) fn prune(&self) {
        let Some(dir) = &self.dir else { return };
        let Ok(read) = fs::read_dir(dir) else { return };
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = read
            .filter_map(|e| {
                let e = e.ok().filter(|e| e.file_name() != GROWN)?;
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = entries.iter().map(|(_, len, _)| len).sum();
        entries.sort();
        for (_, len, path) in entries {
            if total <= LIMIT {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

impl Entry {
    fn read(path: PathBuf) -> Entry {
        let data = read_owned(&path).unwrap_or_default();
        let kept = Kept::from_bytes(&data).unwrap_or_default();
        if !kept.offsets.is_empty() {
            used(&path);
        }
        Entry {
            path: Some(path),
            kept,
            // The file's size, even where it did not parse (an older
            // layout, or torn): the growth counted at the next store is
            // then what the file grew by, which is what prunes the cache.
            kept_len: data.len() as u64,
            learned: BTreeMap::new(),
        }
    }

    /// The frames kept for `offset`.
    pub(crate) fn get(&self, offset: u64) -> Option<Cow<'_, [Named]>> {
        match self.learned.get(&offset) {
            Some(frames) => Some(Cow::Borrowed(frames)),
            None => self.kept.get(offset).map(Cow::Owned),
        }
    }

    /// Whether frames are kept for `offset`.
    pub(crate) fn has(&self, offset: u64) -> bool {
        self.learned.contains_key(&offset) || self.kept.at(offset).is_some()
    }

    /// Keeps what naming `offset` found.
    pub(crate) fn learn(&mut self, offset: u64, frames: Vec<Named>) {
        self.learned.insert(offset, frames);
    }

    /// Writes the entry back if it learned something, over the old one
    /// (an entry read torn fails its checksum, and is read as empty).
    /// Returns how many bytes the entry grew by.
    pub(crate) fn store(self) -> u64 {
        let Some(path) = self.path.filter(|_| !self.learned.is_empty()) else {
            return 0;
        };
        let bytes = self.kept.with(&self.learned).to_bytes();
        let len = bytes.len() as u64;
        if overwrite(&path, &bytes) {
            len.saturating_sub(self.kept_len)
        } else {
            0
        }
    }
}

/// What an entry's file starts with: its layout's version. An older one
/// is read as empty. Version 1 held each frame's texts in full (an
/// interpreter's entry, the same names at thousands of offsets, took
/// 1.9 MB); 2 held each text once, in JSON, but parsing it into a map of
/// strings, and writing it back, cost `cc1`'s 61,000 offsets 25 ms on
/// every recording of a build; 3 was renamed into place whole, where 4
/// is written over the old entry and ends with the CRC-32 of the rest;
/// 4's entries may name code after a symbol version (see
/// `Plt::is_version`), which 5's do not.
const MAGIC: &[u8; 8] = b"ptnames5";

/// An entry's names as its file holds them, looked up where they lie:
/// the offsets in order, where each one's frames start, each frame's
/// function and source file (indexes into `texts` from 1, 0 for none)
/// and line (0 for none), and each text once.
#[derive(Debug, Default, PartialEq, Eq)]
struct Kept {
    offsets: Vec<u64>,
    /// Each offset's first frame, and after the last, the count.
    starts: Vec<u32>,
    frames: Vec<[u32; 3]>,
    texts: Texts,
}

impl Kept {
    /// Where `offset` is among the offsets.
    fn at(&self, offset: u64) -> Option<usize> {
        self.offsets.binary_search(&offset).ok()
    }

    /// The frames of the `i`th offset.
    fn frames_of(&self, i: usize) -> &[[u32; 3]] {
        &self.frames[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    fn get(&self, offset: u64) -> Option<Vec<Named>> {
        let frames = self.frames_of(self.at(offset)?);
        let text = |i: u32| Some(self.texts.get((i as usize).checked_sub(1)?)?.to_owned());
        let named = |&[function, file, line]: &[u32; 3]| Named {
            function: text(function),
            file: text(file),
            line: (line != 0).then_some(line),
        };
        Some(frames.iter().map(named).collect())
    }

    /// These names with `learned`'s merged in, in order, each text still
    /// once; a name learned again replaces the one kept.
    fn with(mut self, learned: &BTreeMap<u64, Vec<Named>>) -> Kept {
        let texts = std::mem::take(&mut self.texts);
        let mut index: HashMap<String, u32> = texts.iter().map(str::to_owned).zip(1..).collect();
        let mut out = Kept {
            texts,
            starts: vec![0],
            ..Kept::default()
        };
        let mut new = learned.iter().peekable();
        for (i, &offset) in self.offsets.iter().enumerate() {
            while let Some((&at, named)) = new.next_if(|(&at, _)| at <= offset) {
                out.push_named(at, named, &mut index);
            }
            if out.offsets.last() != Some(&offset) {
                out.push(offset, self.frames_of(i));
            }
        }
        for (&at, named) in new {
            out.push_named(at, named, &mut index);
        }
        out
    }

    fn push(&mut self, offset: u64, frames: &[[u32; 3]]) {
        self.offsets.push(offset);
        self.frames.extend_from_slice(frames);
        self.starts.push(self.frames.len() as u32);
    }

    /// Adds `named` at `offset`, its texts found in `index` or added.
    fn push_named(&mut self, offset: u64, named: &[Named], index: &mut HashMap<String, u32>) {
        let texts = &mut self.texts;
        let mut text = |t: &Option<String>| -> u32 {
            let Some(t) = t else { return 0 };
            if let Some(&i) = index.get(t) {
                return i;
            }
            texts.push(t);
            index.insert(t.clone(), texts.len() as u32);
            texts.len() as u32
        };
        let frames: Vec<[u32; 3]> = named
            .iter()
            .map(|f| [text(&f.function), text(&f.file), f.line.unwrap_or(0)])
            .collect();
        self.push(offset, &frames);
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        put_u64s(&mut out, [self.offsets.len() as u64]);
        put_u64s(&mut out, self.offsets.iter().copied());
        put_u32s(&mut out, self.starts.iter().copied());
        put_u32s(&mut out, self.frames.iter().flatten().copied());
        self.texts.write(&mut out);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// An entry [`Kept::to_bytes`] wrote; `None` for anything else, or
    /// anything that does not hold together.
    fn from_bytes(data: &[u8]) -> Option<Kept> {
        let (data, crc) = data.split_last_chunk::<4>()?;
        if crc32fast::hash(data) != u32::from_le_bytes(*crc) {
            return None;
        }
        let mut words = Words::after(data, MAGIC)?;
        let count = words.count()?;
        let offsets = words.u64s(count)?;
        let starts = words.u32s(count.checked_add(1)?)?;
        let frames: Vec<[u32; 3]> = words
            .u32s(3 * *starts.last()? as usize)?
            .chunks_exact(3)
            .map(|w| [w[0], w[1], w[2]])
            .collect();
        let texts = Texts::read(&mut words)?;
        let whole = offsets.windows(2).all(|w| w[0] < w[1])
            && starts.first() == Some(&0)
            && starts.windows(2).all(|w| w[0] <= w[1])
            && frames
                .iter()
                .all(|&[function, file, _]| function.max(file) as usize <= texts.len())
            && words.is_empty();
        whole.then_some(Kept {
            offsets,
            starts,
            frames,
            texts,
        })
    }
}

/// What tells the contents of the file at a path apart from those an
/// earlier or later file there had: its device, inode, size and
/// modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Stamp([u64; 5]);

impl Stamp {
    /// The stamp of the file at `path` now; `None` where it is gone.
    pub(crate) fn of(path: &Path) -> Option<Stamp> {
        fs::metadata(path).ok().map(|meta| Stamp::from(&meta))
    }

    fn from(meta: &fs::Metadata) -> Stamp {
        let mtime = (meta.mtime() as u64, meta.mtime_nsec() as u64);
        Stamp([meta.dev(), meta.ino(), meta.size(), mtime.0, mtime.1])
    }
}

/// Marks the kept file at `path` used now: the last to go when the cache
/// is pruned.
fn used(path: &Path) {
    let _ = File::open(path).and_then(|f| f.set_modified(SystemTime::now()));
}

/// The name of a file's entry: its build id, else what tells its
/// contents apart at its path.
fn file_key(path: &Path) -> Option<String> {
    let file = File::open(path).ok()?;
    let Stamp([dev, ino, size, mtime, mtime_nsec]) = Stamp::from(&file.metadata().ok()?);
    let data = ReadCache::new(file);
    let build_id = object::File::parse(&data)
        .ok()
        .and_then(|elf| elf.build_id().ok().flatten().map(hex));
    Some(match build_id {
        Some(id) => format!("b-{id}"),
        None => format!("f-{dev:x}-{ino:x}-{size:x}-{mtime:x}.{mtime_nsec:x}"),
    })
}

/// The name of the kernel's entry: this boot, and the modules loaded where
/// they are (a module loaded again moves).
fn kernel_key() -> Option<String> {
    let modules = fs::read("/proc/modules").unwrap_or_default();
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(&modules);
    Some(format!("k-{}-{:016x}", boot_id()?, hasher.finish()))
}

/// The name of the kept symbols of the kernel's core text: this boot.
fn kernel_text_key() -> Option<String> {
    Some(format!("t-{}", boot_id()?))
}

fn boot_id() -> Option<String> {
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(boot.trim().to_owned())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `$XDG_CACHE_HOME`, else `~/.cache`, of the user proctrace runs as.
fn cache_home() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    xdg.or_else(|| home().map(|home| home.join(".cache")))
}

/// The home of the effective user: under sudo, `$HOME` may still be the
/// invoking user's, whose directories root should not fill.
fn home() -> Option<PathBuf> {
    // SAFETY: getpwuid returns a pointer into static storage or null; it
    // is read at once, on this thread.
    let dir = unsafe {
        let entry = libc::getpwuid(libc::geteuid());
        if entry.is_null() || (*entry).pw_dir.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr((*entry).pw_dir)
    };
    Some(PathBuf::from(dir.to_string_lossy().into_owned()))
}

/// Kept names by file, for a symbolizer's life: each file's entry read
/// once, and again for a new file at the same path (a test suite that
/// builds a program again between its runs).
#[derive(Default)]
pub(crate) struct Entries {
    files: HashMap<(PathBuf, Option<Stamp>), Entry>,
    kernel: Option<Entry>,
}

impl Entries {
    /// The entry of the file at `path`, stamped `stamp`, read from
    /// `cache` the first time.
    pub(crate) fn file(
        &mut self,
        cache: &NameCache,
        path: &Path,
        stamp: Option<Stamp>,
    ) -> &mut Entry {
        self.files
            .entry((path.to_owned(), stamp))
            .or_insert_with(|| cache.file(path))
    }

    /// The kernel's entry, read from `cache` the first time.
    pub(crate) fn kernel(&mut self, cache: &NameCache) -> &mut Entry {
        self.kernel.get_or_insert_with(|| cache.kernel())
    }

    /// Writes back every entry that learned something; returns how many
    /// bytes they grew by.
    pub(crate) fn store(self) -> u64 {
        self.files
            .into_values()
            .chain(self.kernel)
            .map(Entry::store)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::symbolize::Symbolizer;

    fn this_binary() -> PathBuf {
        std::env::current_exe().unwrap()
    }

    #[test]
    fn names_learned_are_found_by_the_next_symbolizer_and_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let cache = NameCache::within(dir.path());
        // An entry as an earlier recording left it, with a name no file
        // has: the symbolizer must answer from it.
        let mut entry = cache.file(&this_binary());
        let named = Named {
            function: Some("kept::from::before".into()),
            file: Some("kept.rs".into()),
            line: Some(7),
        };
        entry.learn(0x10, vec![named]);
        entry.store();
        let mut symbolizer = Symbolizer::with_cache(cache.clone());
        let frames = symbolizer.user(&this_binary(), &[0x10, 0x20]);
        assert_eq!(frames[0][0].function.as_deref(), Some("kept::from::before"));
        assert_eq!(
            (frames[0][0].file.as_deref(), frames[0][0].line),
            (Some("kept.rs"), Some(7))
        );
        symbolizer.save();
        // What it named afresh is kept too.
        assert!(cache.file(&this_binary()).get(0x20).is_some());
    }

    #[test]
    fn an_entry_keeps_each_text_once_and_reads_back_what_it_kept() {
        let frame = |function: Option<&str>, file: Option<&str>, line| Named {
            function: function.map(str::to_owned),
            file: file.map(str::to_owned),
            line,
        };
        let first: BTreeMap<u64, Vec<Named>> = [
            (3, vec![frame(Some("f"), Some("a.c"), Some(3))]),
            (
                7,
                vec![
                    frame(Some("f"), None, None),
                    frame(Some("g"), Some("a.c"), Some(9)),
                ],
            ),
            (9, Vec::new()),
        ]
        .into();
        let kept = Kept::default().with(&first);
        assert_eq!(kept.texts.iter().collect::<Vec<_>>(), ["f", "a.c", "g"]);
        let old = kept.to_bytes();
        // A later run's names merge in order, before, between and after,
        // and one learned again replaces the kept.
        let second: BTreeMap<u64, Vec<Named>> = [
            (1, vec![frame(Some("g"), Some("b.c"), Some(1))]),
            (5, vec![frame(None, Some("a.c"), Some(4))]),
            (7, vec![frame(Some("h"), None, None)]),
            (10, vec![frame(Some("f"), None, Some(2))]),
        ]
        .into();
        let bytes = kept.with(&second).to_bytes();
        let read = Kept::from_bytes(&bytes).unwrap();
        assert_eq!(
            read.texts.iter().collect::<Vec<_>>(),
            ["f", "a.c", "g", "b.c", "h"]
        );
        let mut all = first.clone();
        all.extend(second.clone());
        assert_eq!(read.offsets, all.keys().copied().collect::<Vec<_>>());
        for (offset, named) in &all {
            assert_eq!(read.get(*offset).as_ref(), Some(named), "{offset}");
        }
        assert_eq!(read.get(4), None);
        // Any cut of the file, or anything after it, is not an entry.
        for len in 0..bytes.len() {
            assert_eq!(Kept::from_bytes(&bytes[..len]), None, "cut at {len}");
        }
        assert_eq!(Kept::from_bytes(&[&bytes[..], b"x"].concat()), None);
        // Nor is one read while it was written over the last, the new
        // entry's start then the old one's rest, unless that is the old.
        for len in 0..old.len() {
            let torn = [&bytes[..len], &old[len..]].concat();
            let read = Kept::from_bytes(&torn);
            assert!(torn == old || read.is_none(), "torn at {len}");
        }
    }

    #[test]
    fn a_file_is_known_by_its_contents_not_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let cache = NameCache::within(dir.path());
        let copy = dir.path().join("copy");
        fs::copy(this_binary(), &copy).unwrap();
        // A copy is the same build: one entry.
        assert_eq!(file_key(&copy), file_key(&this_binary()));
        // Another file at the same path is another entry, build id or not.
        fs::write(&copy, b"not elf").unwrap();
        let other = file_key(&copy).unwrap();
        assert_ne!(Some(other.clone()), file_key(&this_binary()));
        assert!(other.starts_with("f-"), "{other}");
        let mut entry = cache.file(&copy);
        entry.learn(1, Vec::new());
        entry.store();
        std::thread::sleep(std::time::Duration::from_millis(10));
        fs::write(&copy, b"not elf, changed").unwrap();
        assert!(cache.file(&copy).get(1).is_none());
    }

    #[test]
    fn a_file_built_again_while_a_symbolizer_lives_is_named_anew() {
        let dir = tempfile::tempdir().unwrap();
        let cache = NameCache::within(dir.path().join("names").as_path());
        let program = dir.path().join("program");
        let build = |contents: &str, function: &str| {
            fs::write(&program, contents).unwrap();
            let mut entry = cache.file(&program);
            let named = Named {
                function: Some(function.into()),
                file: None,
                line: None,
            };
            entry.learn(0x10, vec![named]);
            entry.store();
        };
        let mut symbolizer = Symbolizer::with_cache(cache.clone());
        let name = |symbolizer: &mut Symbolizer| {
            let frames = symbolizer.user(&program, &[0x10]);
            frames[0][0].function.clone()
        };
        build("first", "first_build");
        assert_eq!(name(&mut symbolizer).as_deref(), Some("first_build"));
        // A suite's next `make` writes the program again at its path.
        std::thread::sleep(std::time::Duration::from_millis(10));
        build("second build", "second_build");
        assert_eq!(name(&mut symbolizer).as_deref(), Some("second_build"));
    }

    #[test]
    fn a_bpf_programs_name_kept_by_address_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let cache = NameCache::within(dir.path());
        let named = |function: &str| Named {
            function: Some(function.into()),
            file: None,
            line: None,
        };
        // Addresses no kernel symbol covers, as an older proctrace kept
        // them: a module's function, and a program loaded since unloaded.
        let mut entry = cache.kernel();
        entry.learn(0x2000, vec![named("ext4_readdir")]);
        entry.learn(0x3000, vec![named("bpf_prog_0123456789abcdef_gone")]);
        entry.store();
        let frames = Symbolizer::with_cache(cache.clone()).kernel(&[0x2000, 0x3000]);
        assert_eq!(frames[0].function.as_deref(), Some("ext4_readdir"));
        assert_eq!(frames[1].function, None);
    }

    #[test]
    fn the_cache_keeps_under_its_limit_dropping_the_least_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = NameCache::within(dir.path());
        let big = vec![b'x'; (LIMIT / 2 + 1) as usize];
        for name in ["old", "new"] {
            fs::write(dir.path().join(name), &big).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let old = File::open(dir.path().join("old")).unwrap();
        old.set_modified(SystemTime::UNIX_EPOCH).unwrap();
        cache.prune();
        assert!(!dir.path().join("old").exists());
        assert!(dir.path().join("new").exists());
    }

    #[test]
    fn the_cache_is_pruned_once_it_grew_by_a_sixteenth_of_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let cache = NameCache::within(dir.path());
        let big = vec![b'x'; (LIMIT / 2 + 1) as usize];
        let write = |name: &str, age: u64| {
            fs::write(dir.path().join(name), &big).unwrap();
            let file = File::open(dir.path().join(name)).unwrap();
            let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(age);
            file.set_modified(at).unwrap();
        };
        write("first", 1);
        write("second", 2);
        // No count yet (a cache an older proctrace kept): pruned at once.
        cache.grew(1);
        assert!(!dir.path().join("first").exists());
        write("third", 3);
        cache.grew(PRUNE_AFTER - 1);
        assert!(
            dir.path().join("second").exists(),
            "pruned before it was due"
        );
        cache.grew(1);
        assert!(!dir.path().join("second").exists());
        assert!(dir.path().join("third").exists());
        assert_eq!(
            fs::read(dir.path().join(GROWN)).unwrap(),
            0u64.to_le_bytes()
        );
    }

    #[test]
    fn an_entry_another_user_could_write_is_passed_over() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = NameCache::within(dir.path());
        let mut entry = cache.file(&this_binary());
        entry.learn(0x30, Vec::new());
        entry.store();
        let key = file_key(&this_binary()).unwrap();
        let path = dir.path().join(key);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
        assert!(cache.file(&this_binary()).get(0x30).is_none());
    }
}

//! The kernel's symbols, from `/proc/kallsyms`, and those of its core
//! text kept for the boot.
//!
//! Reading kallsyms costs ~50 ms in the kernel, which formats each of
//! its ~120,000 lines, and as much again to parse; a profile with one
//! kernel address the names cache did not have paid it every recording.
//! The core kernel's text (`_stext` to `_etext`) does not move until the
//! next boot, and holds no module or BPF program, so its symbols are kept
//! once, compactly, and later recordings look there first. Addresses
//! elsewhere (modules, BPF programs, trampolines, which come and go) are
//! named from kallsyms as read now.

use std::fs;
use std::ops::Range;

use super::texts::{put_u64s, Texts, Words};

/// Symbols by address: each one's start and name.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Ksyms {
    addrs: Vec<u64>,
    names: Texts,
    /// The addresses the table answers for; others are not its.
    covers: Range<u64>,
}

/// What a kept table's file starts with (its layout's version).
const MAGIC: &[u8; 8] = b"ptksym2\n";

impl Ksyms {
    /// kallsyms as it is now; empty where it shows no addresses
    /// (`kernel.kptr_restrict`).
    pub(crate) fn read() -> Ksyms {
        let text = fs::read("/proc/kallsyms").unwrap_or_default();
        Ksyms::parse(&String::from_utf8_lossy(&text))
    }

    /// The symbols of kallsyms' text, sorted by address (the first
    /// listed of those at one address first).
    pub(crate) fn parse(text: &str) -> Ksyms {
        let mut symbols: Vec<(u64, &str)> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_ascii_whitespace();
                let addr = u64::from_str_radix(fields.next()?, 16).ok()?;
                let name = fields.nth(1)?;
                (addr != 0).then_some((addr, name))
            })
            .collect();
        symbols.sort_by_key(|&(addr, _)| addr);
        let mut table = Ksyms {
            covers: 0..u64::MAX,
            ..Ksyms::default()
        };
        for (addr, name) in symbols {
            table.push(addr, name);
        }
        table
    }

    fn push(&mut self, addr: u64, name: &str) {
        self.addrs.push(addr);
        self.names.push(name);
    }

    /// Whether the table has no symbol: kallsyms hid its addresses, or
    /// no table was kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// The symbol `addr` is in: the last to start at or before it.
    /// `None` outside what the table covers.
    pub(crate) fn name(&self, addr: u64) -> Option<&str> {
        if !self.covers.contains(&addr) {
            return None;
        }
        let after = self.addrs.partition_point(|&a| a <= addr);
        let i = after.checked_sub(1)?;
        // The first of the symbols at that address.
        let i = self.addrs[..=i].partition_point(|&a| a < self.addrs[i]);
        self.names.get(i)
    }

    /// The symbols of the core kernel's text, `_stext` to `_etext`.
    pub(crate) fn core_text(&self) -> Option<Ksyms> {
        let at = |symbol: &str| {
            let i = (0..self.addrs.len()).find(|&i| self.name_at(i) == symbol)?;
            Some(self.addrs[i])
        };
        let covers = at("_stext")?..at("_etext")?;
        let mut core = Ksyms {
            covers: covers.clone(),
            ..Ksyms::default()
        };
        for i in 0..self.addrs.len() {
            if covers.contains(&self.addrs[i]) {
                core.push(self.addrs[i], self.name_at(i));
            }
        }
        Some(core)
    }

    fn name_at(&self, i: usize) -> &str {
        self.names.get(i).unwrap_or_default()
    }

    /// The table as kept: the range it covers, each symbol's start, then
    /// the names.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        let (start, end, count) = (self.covers.start, self.covers.end, self.addrs.len());
        put_u64s(&mut out, [start, end, count as u64]);
        put_u64s(&mut out, self.addrs.iter().copied());
        self.names.write(&mut out);
        out
    }

    /// A table [`Ksyms::to_bytes`] wrote; `None` for anything else.
    pub(crate) fn from_bytes(data: &[u8]) -> Option<Ksyms> {
        let mut words = Words::after(data, MAGIC)?;
        let covers = words.u64()?..words.u64()?;
        let count = words.count()?;
        let addrs = words.u64s(count)?;
        let names = Texts::read(&mut words)?;
        let sorted = addrs.windows(2).all(|w| w[0] <= w[1]);
        (sorted && names.len() == count && words.is_empty()).then_some(Ksyms {
            addrs,
            names,
            covers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
0000000000000000 A fixed_percpu_data
ffffffff81000000 T _stext
ffffffff81000000 T startup_64
ffffffff81000100 t secondary_startup
ffffffff81000200 T do_syscall_64
ffffffff81000300 T _etext
ffffffffc0000000 t ext4_readdir\t[ext4]
ffffffffc0001000 t bpf_prog_1234_handler\t[bpf]
";

    #[test]
    fn an_address_is_in_the_last_symbol_to_start_at_or_before_it() {
        let all = Ksyms::parse(KALLSYMS);
        assert_eq!(all.name(0xffffffff81000250), Some("do_syscall_64"));
        assert_eq!(all.name(0xffffffff81000000), Some("_stext"));
        assert_eq!(all.name(0xffffffffc0000010), Some("ext4_readdir"));
        assert_eq!(all.name(0x1000), None);
    }

    #[test]
    fn the_kept_core_text_answers_only_for_itself_and_reads_back_whole() {
        let core = Ksyms::parse(KALLSYMS).core_text().unwrap();
        assert_eq!(core.name(0xffffffff81000150), Some("secondary_startup"));
        // A module's or a BPF program's address is not the core's to name.
        assert_eq!(core.name(0xffffffffc0001010), None);
        assert_eq!(core.name(0xffffffff81000300), None);
        let bytes = core.to_bytes();
        assert_eq!(Ksyms::from_bytes(&bytes), Some(core));
        assert_eq!(Ksyms::from_bytes(&bytes[..bytes.len() - 1]), None);
        assert_eq!(Ksyms::from_bytes(b"ptksym2\nshort"), None);
    }

    #[test]
    fn kallsyms_without_addresses_is_an_empty_table() {
        let hidden = "0000000000000000 T _stext\n0000000000000000 T do_syscall_64\n";
        let table = Ksyms::parse(hidden);
        assert_eq!(
            table,
            Ksyms {
                covers: 0..u64::MAX,
                ..Ksyms::default()
            }
        );
        assert_eq!(table.name(0xffffffff81000000), None);
        assert!(table.core_text().is_none());
    }

    /// The oracle: blazesym's own reading of kallsyms names every address
    /// as the table does (both nothing where kallsyms hides them).
    #[test]
    fn the_table_names_what_blazesym_names() {
        use blazesym::symbolize::source::{Kernel, Source};
        use blazesym::symbolize::{Input, Symbolized, Symbolizer};
        use blazesym::MaybeDefault;
        let live = Ksyms::read();
        let addrs: Vec<u64> = live.addrs.iter().step_by(97).map(|a| a + 1).collect();
        let kernel = Kernel {
            kallsyms: MaybeDefault::Default,
            vmlinux: MaybeDefault::None,
            ..Kernel::default()
        };
        let blaze = Symbolizer::new();
        let theirs = blaze
            .symbolize(&Source::Kernel(kernel), Input::AbsAddr(&addrs))
            .unwrap();
        let core = live.core_text();
        for (addr, theirs) in addrs.iter().zip(theirs) {
            let theirs = match theirs {
                Symbolized::Sym(sym) => Some(sym.name.to_string()),
                _ => None,
            };
            let ours = live.name(*addr);
            // Symbols at one address are aliases: either names the code.
            let start = live.addrs[live.addrs.partition_point(|&a| a <= *addr) - 1];
            let alias = |name: &str| {
                (0..live.addrs.len()).any(|i| live.addrs[i] == start && live.name_at(i) == name)
            };
            assert!(
                ours == theirs.as_deref() || theirs.as_deref().is_some_and(alias),
                "{addr:x}: ours {ours:?}, blazesym's {theirs:?}"
            );
            if let Some(core) = core.as_ref().and_then(|c| c.name(*addr)) {
                assert_eq!(Some(core), ours, "{addr:x}");
            }
        }
    }
}

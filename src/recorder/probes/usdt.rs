//! The USDT probes a file ships: `<sys/sdt.h>` writes one `.note.stapsdt`
//! note per probe site, with its provider, name, address, semaphore and
//! argument specs (`-4@%eax`: a signed 4-byte value in eax). What
//! `proctrace probes` lists, and what `usdt:` specs are checked against;
//! libbpf reads the same notes to attach.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use object::read::ReadCache;
use object::{Object, ObjectSection};

use super::attempt::{AttemptProbe, NEXTEST};
use super::pattern::{glob_match, is_pattern};

/// The arguments the kernel reads as strings at the most (proctrace.h's
/// PROBE_STRING_ARGS), of its first PROBE_ARGS.
const STRING_ARGS: usize = 3;

/// The note type of a USDT probe (`NT_STAPSDT`).
const NT_STAPSDT: u32 = 3;

/// One probe site of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsdtProbe {
    /// Its provider (`python`).
    pub provider: String,
    /// Its name (`function__entry`).
    pub name: String,
    /// The probe's address (in the file's own addresses, as linked).
    pub address: u64,
    /// The address of its semaphore, 0 for a probe that is always on.
    pub semaphore: u64,
    /// The argument specs, space-separated (`8@%rdi -4@%eax`).
    pub args: String,
}

/// Every probe site of `file`, in the order of its notes.
pub fn probes(file: &Path) -> Result<Vec<UsdtProbe>, String> {
    // Read in the parts the notes need: cargo-nextest is 23 MB.
    let data = ReadCache::new(fs::File::open(file).map_err(|err| err.to_string())?);
    let elf = object::File::parse(&data).map_err(|err| err.to_string())?;
    let Some(section) = elf.section_by_name(".note.stapsdt") else {
        return Ok(Vec::new());
    };
    let notes = section.data().map_err(|err| err.to_string())?;
    Ok(parse_notes(notes, elf.is_little_endian()))
}

/// One probe a `usdt:` spec matched: its provider and name, its
/// arguments that are read as strings, and what they say of a test
/// where it is a runner's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Matched {
    pub provider: String,
    pub name: String,
    /// Bit i: argument i is read as the C string it points to.
    pub strings: u32,
    pub attempt: Option<AttemptProbe>,
}

/// The distinct `(provider, name)` pairs of `file` that `provider` and the
/// name pattern `name` match, in order.
pub(super) fn matching(file: &Path, provider: &str, name: &str) -> Result<Vec<Matched>, String> {
    let mut pairs: BTreeMap<(String, String), Matched> = BTreeMap::new();
    for probe in probes(file)? {
        let wanted = if is_pattern(name) {
            glob_match(name, &probe.name)
        } else {
            probe.name == name
        };
        if probe.provider != provider || !wanted {
            continue;
        }
        let specs: Vec<&str> = probe.args.split_whitespace().collect();
        let attempt = match provider {
            NEXTEST => AttemptProbe::nextest(&probe.name, specs.len()),
            _ => None,
        };
        let strings = attempt.map_or_else(|| string_args(&specs), |a| a.strings());
        let key = (probe.provider.clone(), probe.name.clone());
        let matched = pairs.entry(key).or_insert(Matched {
            provider: probe.provider,
            name: probe.name,
            strings,
            attempt,
        });
        // Every site of the probe must pass a pointer there, and in the
        // same layout.
        matched.strings &= strings;
        if matched.attempt != attempt {
            matched.attempt = None;
        }
    }
    Ok(pairs.into_values().collect())
}

/// Bit i set where argument i may point to a C string: `<sys/sdt.h>`
/// writes a pointer as an unsigned 8-byte value (`8@%rbx`), numbers as
/// signed ones (`-8@`, `-4@`) unless declared unsigned. The kernel reads
/// the first [`STRING_ARGS`] so marked.
fn string_args(specs: &[&str]) -> u32 {
    specs
        .iter()
        .enumerate()
        .filter(|(_, spec)| spec.starts_with("8@"))
        .take(STRING_ARGS)
        .fold(0, |mask, (i, _)| mask | 1 << i)
}

fn parse_notes(mut notes: &[u8], little: bool) -> Vec<UsdtProbe> {
    let word = |bytes: &[u8], at: usize| -> Option<u64> {
        let b: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
        Some(if little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    };
    let half = |bytes: &[u8], at: usize| -> Option<u32> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let pad = |n: usize| n.div_ceil(4) * 4;
    let mut probes = Vec::new();
    while let (Some(namesz), Some(descsz), Some(kind)) =
        (half(notes, 0), half(notes, 4), half(notes, 8))
    {
        let (namesz, descsz) = (namesz as usize, descsz as usize);
        let desc_at = 12 + pad(namesz);
        let Some(desc) = notes.get(desc_at..desc_at + descsz) else {
            break;
        };
        let owner = notes.get(12..12 + namesz).unwrap_or_default();
        if kind == NT_STAPSDT && owner.starts_with(b"stapsdt") {
            if let Some(probe) = parse_desc(desc, word) {
                probes.push(probe);
            }
        }
        notes = notes.get(desc_at + pad(descsz)..).unwrap_or_default();
    }
    probes
}

fn parse_desc(desc: &[u8], word: impl Fn(&[u8], usize) -> Option<u64>) -> Option<UsdtProbe> {
    let address = word(desc, 0)?;
    let semaphore = word(desc, 16)?;
    let mut strings = desc.get(24..)?.split(|&b| b == 0);
    let mut next = || {
        strings
            .next()
            .map(|s| String::from_utf8_lossy(s).into_owned())
    };
    Some(UsdtProbe {
        provider: next()?,
        name: next()?,
        address,
        semaphore,
        args: next().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_read_as_sdt_h_writes_them() {
        let mut note = Vec::new();
        let desc = [
            &0x1139u64.to_le_bytes()[..],
            &0x2004u64.to_le_bytes(),
            &0x4010u64.to_le_bytes(),
            b"app\0tick\0-4@%eax 8@%rdx\0",
        ]
        .concat();
        note.extend(8u32.to_le_bytes());
        note.extend((desc.len() as u32).to_le_bytes());
        note.extend(3u32.to_le_bytes());
        note.extend(b"stapsdt\0");
        note.extend(&desc);
        note.resize(note.len().div_ceil(4) * 4, 0);
        let twice = [note.clone(), note].concat();
        let probes = parse_notes(&twice, true);
        assert_eq!(probes.len(), 2);
        assert_eq!(
            probes[0],
            UsdtProbe {
                provider: "app".into(),
                name: "tick".into(),
                address: 0x1139,
                semaphore: 0x4010,
                args: "-4@%eax 8@%rdx".into(),
            }
        );
        assert_eq!(string_args(&["-4@%eax", "8@%rdx"]), 0b10);
        assert_eq!(string_args(&["8@%rbp", "8@%r12", "-4@%eax"]), 0b11);
        assert_eq!(
            string_args(&["-4@%eax", "8@%r1", "8@%r2", "8@%r3", "8@%r4"]),
            0b1110
        );
        // Cut short: no probe, no panic.
        assert!(parse_notes(&twice[..20], true).is_empty());
    }
}

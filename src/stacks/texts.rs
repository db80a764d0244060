//! Strings kept end to end in one buffer, and the little-endian words of
//! the files that keep them (the kernel's core text, the names cache):
//! read back with one allocation per table, not one per string, and
//! checked whole before anything is looked up in them.

/// Strings by index, each once, in one buffer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Texts {
    blob: String,
    /// Where each string ends in `blob`.
    ends: Vec<u32>,
}

impl Texts {
    /// Adds `text` at the next index.
    pub(crate) fn push(&mut self, text: &str) {
        self.blob.push_str(text);
        self.ends.push(self.blob.len() as u32);
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn get(&self, i: usize) -> Option<&str> {
        let start = i
            .checked_sub(1)
            .map_or(Some(0), |j| self.ends.get(j).copied())?;
        self.blob.get(start as usize..*self.ends.get(i)? as usize)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Appends the table: the count, each end, the buffer's length and
    /// the buffer.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        put_u64s(out, [self.ends.len() as u64]);
        put_u32s(out, self.ends.iter().copied());
        put_u64s(out, [self.blob.len() as u64]);
        out.extend_from_slice(self.blob.as_bytes());
    }

    /// A table [`Texts::write`] wrote; `None` where it does not hold
    /// together (each string ends after the one before, on a character).
    pub(crate) fn read(words: &mut Words) -> Option<Texts> {
        let count = words.count()?;
        let ends = words.u32s(count)?;
        let len = words.count()?;
        let blob = std::str::from_utf8(words.take(len)?).ok()?;
        let ordered = ends.windows(2).all(|w| w[0] <= w[1])
            && ends.last().is_none_or(|&e| e as usize == blob.len())
            && ends.iter().all(|&e| blob.is_char_boundary(e as usize));
        ordered.then(|| Texts {
            blob: blob.to_owned(),
            ends,
        })
    }
}

/// Appends `words` little-endian, as [`Words::u64s`] reads them.
pub(crate) fn put_u64s(out: &mut Vec<u8>, words: impl IntoIterator<Item = u64>) {
    words
        .into_iter()
        .for_each(|w| out.extend_from_slice(&w.to_le_bytes()));
}

/// Appends `words` little-endian, as [`Words::u32s`] reads them.
pub(crate) fn put_u32s(out: &mut Vec<u8>, words: impl IntoIterator<Item = u32>) {
    words
        .into_iter()
        .for_each(|w| out.extend_from_slice(&w.to_le_bytes()));
}

/// A kept file read from the front, little-endian; every read is checked
/// against what is left.
pub(crate) struct Words<'a>(&'a [u8]);

impl<'a> Words<'a> {
    /// The words of `data` after its `magic`; `None` where it does not
    /// start so.
    pub(crate) fn after(data: &'a [u8], magic: &[u8]) -> Option<Words<'a>> {
        data.strip_prefix(magic).map(Words)
    }

    pub(crate) fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        Some(head)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A count of items that follow.
    pub(crate) fn count(&mut self) -> Option<usize> {
        usize::try_from(self.u64()?).ok()
    }

    pub(crate) fn u64s(&mut self, n: usize) -> Option<Vec<u64>> {
        let bytes = self.take(n.checked_mul(8)?)?;
        let words = bytes.chunks_exact(8).map(|b| b.try_into().ok());
        words.map(|b| b.map(u64::from_le_bytes)).collect()
    }

    pub(crate) fn u32s(&mut self, n: usize) -> Option<Vec<u32>> {
        let bytes = self.take(n.checked_mul(4)?)?;
        let words = bytes.chunks_exact(4).map(|b| b.try_into().ok());
        words.map(|b| b.map(u32::from_le_bytes)).collect()
    }

    /// Whether all of it was read: a file with more is not one this
    /// layout wrote.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_reads_back_whole_and_no_cut_of_it_reads() {
        let mut texts = Texts::default();
        for t in ["", "memcpy", "é", "a.c"] {
            texts.push(t);
        }
        let mut out = b"magic".to_vec();
        texts.write(&mut out);
        let read = Texts::read(&mut Words::after(&out, b"magic").unwrap()).unwrap();
        assert_eq!(read, texts);
        assert_eq!(read.iter().collect::<Vec<_>>(), ["", "memcpy", "é", "a.c"]);
        assert_eq!(read.get(4), None);
        for len in 5..out.len() {
            let words = Words::after(&out[..len], b"magic");
            assert_eq!(Texts::read(&mut words.unwrap()), None, "cut at {len}");
        }
        // An end inside a character.
        let at = b"magic".len() + 8 + 2 * 4;
        out[at] -= 1;
        assert_eq!(
            Texts::read(&mut Words::after(&out, b"magic").unwrap()),
            None
        );
    }
}

//! The recording's stacks, each numbered once by the frames its places
//! are named by: the CPU samples', the probes' and the waits' share them.

use std::collections::HashMap;

use crate::event::{Record, Stack};
use crate::recorder::frames::{Names, Place};

/// The stacks of the recording, each numbered once by its frames.
#[derive(Default)]
pub(super) struct StackIds(HashMap<Vec<u32>, u32>);

impl StackIds {
    /// The id of the stack of `places` (leaf first, as unwound; the
    /// record's stacks start at the root).
    pub(super) fn of(&mut self, names: &Names, places: &[Place]) -> u32 {
        let frames: Vec<u32> = places
            .iter()
            .rev()
            .flat_map(|place| names.frames(place))
            .copied()
            .collect();
        let next = self.0.len() as u32;
        *self.0.entry(frames).or_insert(next)
    }

    pub(super) fn into_records(self) -> impl Iterator<Item = Record> {
        let mut stacks: Vec<Stack> = self
            .0
            .into_iter()
            .map(|(frames, id)| Stack { id, frames })
            .collect();
        stacks.sort_by_key(|s| s.id);
        stacks.into_iter().map(Record::Stack)
    }
}

//! Every place named, as the recording's frames: a place with inlined
//! calls is several, and alike frames share one number.

use std::collections::HashMap;

use super::Place;
use crate::event::Frame;

/// Frames are functions: every address a symbol names is one frame; an
/// address no symbol names is a frame of its own.
type FrameKey = (String, Option<String>, Option<u64>, bool, bool);

/// The frames of every place named so far.
#[derive(Default)]
pub(crate) struct Names {
    /// The recording's frames, by id.
    pub table: Vec<Frame>,
    /// Each frame's id by what makes it the same frame (see [`FrameKey`]).
    ids: HashMap<FrameKey, u32>,
    of: HashMap<Place, Vec<u32>>,
}

impl Names {
    /// Numbers `frames` (one per function, the outermost first) as the
    /// frames of `place`; alike frames share a number.
    pub(crate) fn add(&mut self, place: Place, frames: Vec<Frame>) {
        let ids = frames
            .into_iter()
            .map(|mut frame| {
                let key = (
                    frame.module.clone(),
                    frame.function.clone(),
                    frame.offset,
                    frame.kernel,
                    frame.inlined,
                );
                let next = self.table.len() as u32;
                let id = *self.ids.entry(key).or_insert(next);
                if id == next {
                    frame.id = id;
                    self.table.push(frame);
                }
                id
            })
            .collect();
        self.of.insert(place, ids);
    }

    /// Whether `place` is named.
    pub(crate) fn has(&self, place: &Place) -> bool {
        self.of.contains_key(place)
    }

    /// The frame ids of `place`, the outermost first.
    pub(crate) fn frames(&self, place: &Place) -> &[u32] {
        self.of.get(place).map_or(&[], Vec::as_slice)
    }
}

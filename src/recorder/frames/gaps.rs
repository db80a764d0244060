//! Where a stack's frames stop short, said by a frame of its own at its
//! outermost end, so a folded line never passes for a whole stack:
//! `prog;[stack cut short];f3;f2;f1`.

use super::{At, Modules, Naming, Place, Source};
use crate::event::Frame;
use crate::recorder::wire::Mapping;

/// Why a stack's outer frames are missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Gap {
    /// Unwinding stopped before the thread's first frame: the copy of
    /// the stack ended (or was not kept: a hit past the collector's
    /// backlog), or the most frames were reached.
    Cut,
}

impl Gap {
    fn label(self) -> &'static str {
        match self {
            Gap::Cut => "[stack cut short]",
        }
    }
}

/// The gaps of the samples' stacks.
pub(crate) struct Gaps;

impl Source for Gaps {
    /// No mapping: a gap is where there is no address to look at.
    fn claims(&self, _: Option<&Mapping>) -> bool {
        false
    }

    fn places(&mut self, _: &At<'_>, _: &mut Modules, _: &mut Vec<Place>) {}

    fn name(&mut self, places: &[Place], naming: &mut Naming<'_>) {
        for place in places {
            if let Place::Gap(gap) = *place {
                let frame = Frame {
                    id: 0,
                    function: Some(gap.label().into()),
                    module: "[proctrace]".into(),
                    offset: None,
                    kernel: false,
                    inlined: false,
                };
                naming.names.add(*place, vec![frame]);
            }
        }
    }
}

//! The recording's clock: the kernel stamps records with CLOCK_MONOTONIC,
//! and a recording's times are nanoseconds since it started.

/// When a recording started, on the monotonic clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    start_ns: u64,
}

impl Clock {
    /// A recording that starts now.
    pub(crate) fn start() -> Clock {
        Clock {
            start_ns: monotonic_ns(),
        }
    }

    /// When it started, on the monotonic clock.
    pub(crate) fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// Nanoseconds since it started.
    pub(crate) fn elapsed(&self) -> u64 {
        monotonic_ns().saturating_sub(self.start_ns)
    }
}

/// The monotonic clock, in nanoseconds.
pub(crate) fn monotonic_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC always exists");
    now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64
}

//! Shared harness of the integration tests, by what it helps with:
//!
//! - [`harness`]: the binary, root, tools, workloads and bounded waits;
//! - [`run`]: recording with the real `proctrace record` against the real
//!   kernel, in each mode, and reading what it wrote;
//! - [`invariants`]: what every recording must satisfy, checked on every
//!   run;
//! - [`commands`]: any `proctrace` subcommand as a user runs it;
//! - [`synthetic`]: recordings built without recording;
//! - [`processes`]: what a test starts or mounts, cleaned up;
//! - [`text`]: text the tests compare;
//! - [`browser`], [`terminal`]: chromium and tmux, to see what a page or
//!   a terminal shows;
//! - the peers of the exports: an OTLP collector ([`collector`],
//!   [`otlp`]), mermaid-cli ([`mermaid`]), a markdown check ([`markdown`]).

#[macro_use]
mod run;
pub mod browser;
mod collector;
mod commands;
mod harness;
mod invariants;
mod markdown;
mod mermaid;
mod otlp;
mod processes;
mod synthetic;
pub mod terminal;
mod text;
#[allow(unused_imports)]
pub use collector::*;
#[allow(unused_imports)]
pub use commands::*;
#[allow(unused_imports)]
pub use harness::*;
#[allow(unused_imports)]
pub use markdown::*;
#[allow(unused_imports)]
pub use mermaid::*;
#[allow(unused_imports)]
pub use otlp::*;
#[allow(unused_imports)]
pub use processes::*;
#[allow(unused_imports)]
pub use run::*;
#[allow(unused_imports)]
pub use synthetic::*;
#[allow(unused_imports)]
pub use text::*;

//! `proctrace export otlp` and `record --otlp`: the spans of `render -d
//! otlp` sent to an OpenTelemetry collector, configured as the OTLP
//! exporter specification says (`OTEL_EXPORTER_OTLP_*`), flags first.

mod config;
mod grpc;
mod http;
mod proto;

use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};

use proctrace::recording::{Keep, Recording};
use proctrace::render::otlp::{Context, Export};
use proctrace::text::count;

use super::files::{open_seekable_input, print_warnings};
pub use config::OtlpFlags;
use config::{Config, Protocol};

/// Arguments of `proctrace export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(subcommand)]
    to: ExportTo,
}

#[derive(Debug, Subcommand)]
enum ExportTo {
    /// Send the spans of recordings (one per process, one per test) to an OpenTelemetry
    /// collector over OTLP, configured by the OTEL_EXPORTER_OTLP_* variables and these
    /// flags. Exit status 1 if any span was not accepted.
    Otlp(OtlpArgs),
}

#[derive(Debug, Args)]
struct OtlpArgs {
    /// The recordings to send.
    #[arg(required = true, value_name = "REC")]
    recordings: Vec<PathBuf>,
    #[command(flatten)]
    flags: OtlpFlags,
}

/// Runs `proctrace export otlp`; 1 if any span was not accepted.
pub fn run(args: ExportArgs) -> Result<i32> {
    let ExportTo::Otlp(args) = args.to;
    let mut exporter = Exporter::new(&args.flags)?;
    let mut all_accepted = true;
    for path in &args.recordings {
        let sent = exporter.send_file(path)?;
        say!(
            "proctrace: {}: {}",
            path.display(),
            sent.describe(&exporter.config)
        );
        all_accepted &= sent.all_accepted();
    }
    Ok(if all_accepted { 0 } else { 1 })
}

/// `record --otlp`: sends the recording at `path`, configured by the
/// environment alone; a failure is a warning, never the command's status.
pub fn after_record(path: &Path, quiet: bool) {
    let sent = Exporter::new(&OtlpFlags::default()).and_then(|mut e| {
        let sent = e.send_file(path)?;
        Ok((sent.describe(&e.config), sent.all_accepted()))
    });
    match sent {
        Ok((what, true)) if !quiet => say!("proctrace: {what}"),
        Ok((_, true)) => {}
        Ok((what, false)) => say!(
            "proctrace: warning: {what}; the recording is kept in {}",
            path.display()
        ),
        Err(err) => say!(
            "proctrace: warning: no spans sent to the collector: {err:#}; the recording is kept in {}",
            path.display()
        ),
    }
}

/// One collector, one connection, the environment's trace context.
struct Exporter {
    config: Config,
    transport: Box<dyn Transport>,
    context: Context,
}

impl Exporter {
    fn new(flags: &OtlpFlags) -> Result<Self> {
        let var = |name: &str| std::env::var(name).ok();
        let config = Config::new(flags, &var)?;
        let (context, warnings) = Context::from_env(&var);
        for warning in warnings {
            say!("proctrace: warning: {warning}");
        }
        let transport: Box<dyn Transport> = match config.protocol {
            Protocol::Grpc => Box::new(grpc::Grpc::new(&config)?),
            Protocol::HttpProtobuf | Protocol::HttpJson => Box::new(http::Http::new(&config)?),
        };
        Ok(Exporter {
            config,
            transport,
            context,
        })
    }

    fn send_file(&mut self, path: &Path) -> Result<Sent> {
        let mut reader = open_seekable_input(Some(path))?;
        let recording = Recording::read(&mut reader, Keep::Processes);
        print_warnings(&reader);
        let recording = recording?;
        let export = Export::new(&recording, &self.context)
            .with_context(|| format!("reading {}", path.display()))?;
        let requests = match self.config.protocol {
            Protocol::HttpJson => export
                .json_requests()?
                .into_iter()
                .map(|r| (r.spans, r.body))
                .collect(),
            _ => proto::requests(&export),
        };
        Ok(self.send(requests))
    }

    /// Sends each request, retrying what may pass later; stops at the
    /// first request that fails for good, since the next would too.
    fn send(&mut self, requests: Vec<(usize, Vec<u8>)>) -> Sent {
        let mut sent = Sent::default();
        for (spans, body) in requests {
            if sent.error.is_some() {
                sent.not_sent += spans;
                continue;
            }
            let body = match self.config.gzip {
                true => config::gzip(&body),
                false => body,
            };
            match self.send_one(&body) {
                Ok(rejected) => {
                    sent.requests += 1;
                    sent.spans += spans;
                    sent.rejected += rejected.0;
                    sent.rejections.extend(rejected.1);
                }
                Err(err) => {
                    sent.not_sent += spans;
                    sent.error = Some(err);
                }
            }
        }
        sent
    }

    /// One request, retried with exponential backoff (or after what the
    /// collector's Retry-After says) until the timeout; returns the spans
    /// it rejected and why.
    fn send_one(&mut self, body: &[u8]) -> Result<(u64, Option<String>), String> {
        let deadline = Instant::now() + self.config.timeout;
        let mut backoff = Duration::from_millis(250);
        loop {
            let why = match self.transport.send(body, deadline) {
                Attempt::Accepted { rejected, message } => return Ok((rejected, message)),
                Attempt::Failed(why) => return Err(why),
                Attempt::Retry { after, why } => {
                    let wait = after.unwrap_or(backoff);
                    if Instant::now() + wait < deadline {
                        sleep(wait);
                        backoff = (backoff * 2).min(Duration::from_secs(8));
                        continue;
                    }
                    why
                }
            };
            let timeout = humantime::format_duration(self.config.timeout);
            return Err(format!("{why} (gave up after the {timeout} timeout)"));
        }
    }
}

/// What one attempt to send a request came to.
enum Attempt {
    /// The collector took it, but for `rejected` spans.
    Accepted {
        rejected: u64,
        message: Option<String>,
    },
    /// Worth another try, `after` this long if the collector says.
    Retry {
        after: Option<Duration>,
        why: String,
    },
    /// Refused for good.
    Failed(String),
}

/// A way to a collector: sends one request body (already compressed
/// where the configuration says so), by `deadline`.
trait Transport {
    fn send(&mut self, body: &[u8], deadline: Instant) -> Attempt;
}

/// What became of a recording's spans.
#[derive(Debug, Default)]
struct Sent {
    spans: usize,
    requests: usize,
    rejected: u64,
    rejections: Vec<String>,
    not_sent: usize,
    error: Option<String>,
}

impl Sent {
    fn all_accepted(&self) -> bool {
        self.rejected == 0 && self.not_sent == 0
    }

    fn describe(&self, config: &Config) -> String {
        let mut text = format!(
            "sent {} spans in {} to {} ({})",
            self.spans,
            count(self.requests, "request", "requests"),
            config.url,
            config.protocol,
        );
        if self.rejected > 0 {
            let why = self.rejections.first().map_or("", String::as_str);
            text += &format!("; the collector rejected {} of them: {why}", self.rejected);
        }
        if let Some(error) = &self.error {
            text += &format!("; {} spans not sent: {error}", self.not_sent);
        }
        text
    }
}

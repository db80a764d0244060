//! The exporter's configuration: flags, then the `OTEL_EXPORTER_OTLP_*`
//! variables (the traces-specific one before the general one), then the
//! specification's defaults.

use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::Args;

use proctrace::render::otlp::parse_pairs;

/// The exporter's flags, shared by `export otlp`; each overrides its
/// variable.
#[derive(Debug, Args, Default)]
pub struct OtlpFlags {
    /// The collector (OTEL_EXPORTER_OTLP_ENDPOINT): over HTTP the spans go to its
    /// /v1/traces [default: http://localhost:4318, gRPC http://localhost:4317].
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// grpc, http/protobuf or http/json (OTEL_EXPORTER_OTLP_PROTOCOL) [default:
    /// http/protobuf].
    #[arg(long, value_name = "PROTOCOL")]
    protocol: Option<String>,
    /// A header to send, KEY=VALUE (repeatable; OTEL_EXPORTER_OTLP_HEADERS).
    #[arg(long = "header", value_name = "KEY=VALUE")]
    headers: Vec<String>,
    /// gzip or none (OTEL_EXPORTER_OTLP_COMPRESSION) [default: none].
    #[arg(long, value_name = "COMPRESSION")]
    compression: Option<String>,
    /// How long each request may take, retries included (OTEL_EXPORTER_OTLP_TIMEOUT, in
    /// milliseconds); 0 is no limit, as for timeout(1) [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = crate::cli::duration)]
    timeout: Option<Duration>,
    /// The PEM file of the certificate authorities to trust for the collector's TLS
    /// certificate (OTEL_EXPORTER_OTLP_CERTIFICATE) [default: the Mozilla roots].
    #[arg(long, value_name = "FILE")]
    certificate: Option<PathBuf>,
}

/// The wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
    HttpJson,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
        })
    }
}

/// A timeout of 0 asks for none: a century stands for it, which every
/// clock and header below takes.
pub const NO_LIMIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Where and how the spans go.
pub struct Config {
    pub protocol: Protocol,
    /// The traces URL for HTTP; for gRPC the collector's.
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub gzip: bool,
    pub timeout: Duration,
    pub tls: Arc<rustls::ClientConfig>,
}

impl Config {
    /// The configuration `flags` and the variables `var` reads give; an
    /// invalid value is an error that names its variable or flag.
    pub fn new(flags: &OtlpFlags, var: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        // The traces-specific variable, else the general one.
        let setting = |name: &str| {
            let specific = format!("OTEL_EXPORTER_OTLP_TRACES_{name}");
            let general = format!("OTEL_EXPORTER_OTLP_{name}");
            let value = var(&specific).map(|v| (specific, v));
            value
                .or_else(|| var(&general).map(|v| (general, v)))
                .filter(|(_, v)| !v.trim().is_empty())
        };
        let protocol = match flags.protocol.clone().map(|p| ("--protocol".into(), p)) {
            Some(given) => Some(given),
            None => setting("PROTOCOL"),
        };
        let protocol = match protocol {
            None => Protocol::HttpProtobuf,
            Some((from, value)) => match value.trim() {
                "grpc" => Protocol::Grpc,
                "http/protobuf" => Protocol::HttpProtobuf,
                "http/json" => Protocol::HttpJson,
                other => {
                    bail!("{from}: unknown protocol {other:?} (grpc, http/protobuf or http/json)")
                }
            },
        };
        let compression = match flags.compression.clone() {
            Some(value) => Some(("--compression".into(), value)),
            None => setting("COMPRESSION"),
        };
        let gzip = match compression {
            None => false,
            Some((from, value)) => match value.trim() {
                "gzip" => true,
                "none" => false,
                other => bail!("{from}: unknown compression {other:?} (gzip or none)"),
            },
        };
        let timeout = match (flags.timeout, setting("TIMEOUT")) {
            (Some(timeout), _) => timeout,
            (None, Some((from, value))) => match value.trim().parse() {
                Ok(ms) => Duration::from_millis(ms),
                Err(_) => bail!("{from}: {value:?} is not a number of milliseconds"),
            },
            (None, None) => Duration::from_secs(10),
        };
        let timeout = if timeout.is_zero() { NO_LIMIT } else { timeout };
        let certificate = match &flags.certificate {
            Some(path) => Some(path.clone()),
            None => setting("CERTIFICATE").map(|(_, path)| path.into()),
        };
        Ok(Config {
            url: url(protocol, flags.endpoint.as_deref(), var),
            headers: headers(&flags.headers, var)?,
            protocol,
            gzip,
            timeout,
            tls: tls(certificate)?,
        })
    }
}

/// The specification's rules: the traces endpoint as it is; the general
/// one (and `--endpoint`) with `/v1/traces` appended for HTTP, as it is
/// for gRPC, where the path is the service's.
fn url(protocol: Protocol, flag: Option<&str>, var: &dyn Fn(&str) -> Option<String>) -> String {
    let specific = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").filter(|_| flag.is_none());
    if let Some(url) = specific.filter(|u| !u.trim().is_empty()) {
        return url.trim().to_string();
    }
    let general = flag
        .map(str::to_string)
        .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
    let general = general.filter(|u| !u.trim().is_empty());
    match (protocol, general) {
        (Protocol::Grpc, Some(url)) => url.trim().to_string(),
        (Protocol::Grpc, None) => "http://localhost:4317".into(),
        (_, Some(url)) => format!("{}/v1/traces", url.trim().trim_end_matches('/')),
        (_, None) => "http://localhost:4318/v1/traces".into(),
    }
}

/// The general headers, the traces-specific ones over them, the flags'
/// over both.
fn headers(
    flags: &[String],
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>> {
    let mut all: Vec<(String, String)> = Vec::new();
    let mut add = |from: &str, text: &str| -> Result<()> {
        let pairs = parse_pairs(text).map_err(|bad| anyhow::anyhow!("{from}: {bad}"))?;
        for (key, value) in pairs {
            all.retain(|(k, _)| !k.eq_ignore_ascii_case(&key));
            all.push((key, value));
        }
        Ok(())
    };
    for name in [
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    ] {
        add(name, &var(name).unwrap_or_default())?;
    }
    for flag in flags {
        add("--header", flag)?;
    }
    Ok(all)
}

/// rustls with ring; the certificate authorities of the file, else the
/// Mozilla roots compiled in.
fn tls(certificate: Option<PathBuf>) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    match certificate {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            let pem =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            for cert in rustls_pemfile::certs(&mut &pem[..]) {
                let cert = cert.with_context(|| format!("{}: not PEM", path.display()))?;
                roots
                    .add(cert)
                    .with_context(|| format!("{}: not a CA certificate", path.display()))?;
            }
            if roots.is_empty() {
                bail!("{}: no certificate in it", path.display());
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("setting up TLS")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The body gzipped, as `OTEL_EXPORTER_OTLP_COMPRESSION=gzip` asks.
pub fn gzip(body: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(body).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(flags: &OtlpFlags, vars: &[(&str, &str)]) -> Result<Config> {
        Config::new(flags, &|name| {
            let found = vars.iter().find(|(key, _)| *key == name);
            found.map(|(_, value)| value.to_string())
        })
    }

    #[test]
    fn the_traces_endpoint_is_taken_as_it_is_the_general_one_gets_the_path() {
        let flags = OtlpFlags::default();
        let general = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/base/")];
        assert_eq!(
            config(&flags, &general).unwrap().url,
            "http://c:4318/base/v1/traces"
        );
        let both = [
            general[0],
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/x"),
        ];
        assert_eq!(config(&flags, &both).unwrap().url, "http://t:1/x");
        let grpc = [general[0], ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")];
        let grpc = config(&flags, &grpc).unwrap();
        assert_eq!(
            (grpc.protocol, grpc.url.as_str()),
            (Protocol::Grpc, "http://c:4318/base/")
        );
        assert_eq!(
            config(&flags, &[]).unwrap().url,
            "http://localhost:4318/v1/traces"
        );
        let flag = OtlpFlags {
            endpoint: Some("http://f:2".into()),
            ..OtlpFlags::default()
        };
        assert_eq!(config(&flag, &both).unwrap().url, "http://f:2/v1/traces");
    }

    #[test]
    fn settings_come_from_flags_then_traces_variables_then_general_ones() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=x%20y"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "a=2"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1500"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        let got = config(&OtlpFlags::default(), &vars).unwrap();
        assert_eq!(got.protocol, Protocol::HttpJson);
        assert!(got.gzip);
        assert_eq!(got.timeout, Duration::from_millis(1500));
        let unlimited = [("OTEL_EXPORTER_OTLP_TIMEOUT", "0")];
        let none = config(&OtlpFlags::default(), &unlimited).unwrap();
        assert_eq!(none.timeout, NO_LIMIT, "0 is no limit");
        let headers = [("b".into(), "x y".into()), ("a".into(), "2".into())];
        assert_eq!(got.headers, headers);
        let flags = OtlpFlags {
            headers: vec!["a=3".into()],
            compression: Some("none".into()),
            ..OtlpFlags::default()
        };
        let got = config(&flags, &vars).unwrap();
        assert!(!got.gzip);
        assert_eq!(got.headers[1], ("a".into(), "3".into()));
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        let bad = |vars: &[(&str, &str)]| {
            config(&OtlpFlags::default(), vars)
                .err()
                .unwrap()
                .to_string()
        };
        let protocol = bad(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "udp")]);
        assert_eq!(protocol, "OTEL_EXPORTER_OTLP_PROTOCOL: unknown protocol \"udp\" (grpc, http/protobuf or http/json)");
        assert!(bad(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")])
            .starts_with("OTEL_EXPORTER_OTLP_TIMEOUT:"));
        assert!(bad(&[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")])
            .starts_with("OTEL_EXPORTER_OTLP_HEADERS:"));
        let missing = bad(&[("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent.pem")]);
        assert_eq!(missing, "cannot read /nonexistent.pem");
    }
}

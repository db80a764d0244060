//! OTLP/HTTP: one POST per request, protobuf or JSON, on ureq with rustls.

use std::io::Read;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::config::{Config, Protocol};
use super::{proto, Attempt, Transport};

/// Most bytes of a response read: a partial success and its message.
const RESPONSE_BYTES: u64 = 64 << 10;

pub struct Http {
    agent: ureq::Agent,
    url: String,
    json: bool,
    headers: Vec<(String, String)>,
    gzip: bool,
}

impl Http {
    pub fn new(config: &Config) -> Result<Self> {
        let agent = ureq::AgentBuilder::new()
            .tls_config(config.tls.clone())
            .user_agent(concat!("proctrace/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Http {
            agent,
            url: config.url.clone(),
            json: config.protocol == Protocol::HttpJson,
            headers: config.headers.clone(),
            gzip: config.gzip,
        })
    }

    fn request(&self, deadline: Instant) -> ureq::Request {
        let left = deadline.saturating_duration_since(Instant::now());
        let content_type = match self.json {
            true => "application/json",
            false => "application/x-protobuf",
        };
        let mut request = self
            .agent
            .post(&self.url)
            .timeout(left.max(Duration::from_millis(1)))
            .set("Content-Type", content_type);
        if self.gzip {
            request = request.set("Content-Encoding", "gzip");
        }
        for (key, value) in &self.headers {
            request = request.set(key, value);
        }
        request
    }

    /// The rejected spans of a response: `partialSuccess` in JSON, or the
    /// protobuf message.
    fn rejected(&self, response: ureq::Response) -> (u64, Option<String>) {
        let mut body = Vec::new();
        let read = response
            .into_reader()
            .take(RESPONSE_BYTES)
            .read_to_end(&mut body);
        if read.is_err() || !self.json {
            return proto::rejected(&body);
        }
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let partial = &json["partialSuccess"];
        let rejected = &partial["rejectedSpans"];
        let count = rejected
            .as_u64()
            .or_else(|| rejected.as_str().and_then(|s| s.parse().ok()));
        let message = partial["errorMessage"].as_str().filter(|m| !m.is_empty());
        (count.unwrap_or(0), message.map(str::to_string))
    }
}

impl Transport for Http {
    fn send(&mut self, body: &[u8], deadline: Instant) -> Attempt {
        match self.request(deadline).send_bytes(body) {
            Ok(response) => {
                let (rejected, message) = self.rejected(response);
                Attempt::Accepted { rejected, message }
            }
            Err(ureq::Error::Status(code, response)) => {
                let after = response
                    .header("Retry-After")
                    .and_then(|s| s.trim().parse().ok())
                    .map(Duration::from_secs);
                let text = response.into_string().unwrap_or_default();
                let text: String = text.trim().chars().take(200).collect();
                let why = format!("{} answered HTTP {code} {text}", self.url);
                match code {
                    429 | 502 | 503 | 504 => Attempt::Retry { after, why },
                    _ => Attempt::Failed(why.trim_end().to_string()),
                }
            }
            Err(ureq::Error::Transport(err)) => Attempt::Retry {
                after: None,
                why: err.to_string(),
            },
        }
    }
}

//! OTLP/gRPC: the one unary call `TraceService/Export`, by hand on the h2
//! crate (HTTP/2, what tonic runs on) in a current-thread tokio runtime.
//! A unary call is a HEADERS frame, one length-prefixed message and the
//! trailers' `grpc-status`: tonic's tower and hyper layers would add some
//! 40 crates for it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _, Result};
use bytes::Bytes;
use h2::client::SendRequest;
use http::{HeaderMap, Request, Uri};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

use super::config::Config;
use super::{proto, Attempt, Transport};

const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

pub struct Grpc {
    /// Only the runtime's own `block_on` drives its timers and sockets.
    runtime: Runtime,
    channel: Channel,
}

/// The collector and the connection to it.
struct Channel {
    uri: Uri,
    host: String,
    port: u16,
    tls: Option<Arc<rustls::ClientConfig>>,
    headers: Vec<(String, String)>,
    gzip: bool,
    /// The connection, made at the first request and kept.
    client: Option<SendRequest<Bytes>>,
}

/// What a call ended in, when it got an answer.
struct Answer {
    status: Option<u32>,
    message: String,
    body: Vec<u8>,
}

impl Grpc {
    pub fn new(config: &Config) -> Result<Self> {
        let uri: Uri = config
            .url
            .parse()
            .with_context(|| format!("not a URL: {}", config.url))?;
        let https = uri.scheme_str() == Some("https");
        let host = uri
            .host()
            .ok_or_else(|| anyhow!("no host in {}", config.url))?;
        let mut tls = (*config.tls).clone();
        tls.alpn_protocols = vec![b"h2".to_vec()];
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the gRPC client")?;
        let channel = Channel {
            host: host.trim_matches(['[', ']']).to_string(),
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
            uri,
            tls: https.then(|| Arc::new(tls)),
            headers: config.headers.clone(),
            gzip: config.gzip,
            client: None,
        };
        Ok(Grpc { runtime, channel })
    }
}

impl Channel {
    async fn connect(&self) -> Result<SendRequest<Bytes>, String> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.uri))?;
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return handshake(tcp).await;
        };
        let name = rustls::pki_types::ServerName::try_from(self.host.clone())
            .map_err(|e| format!("{}: {e}", self.host))?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {}: {e}", self.uri))?;
        handshake(stream).await
    }

    async fn call(&mut self, body: &[u8], left: Duration) -> Result<Answer, String> {
        if self.client.is_none() {
            self.client = Some(self.connect().await?);
        }
        let client = self.client.clone().expect("connected");
        let mut client = client.ready().await.map_err(|e| e.to_string())?;
        let (response, mut stream) = client
            .send_request(self.request(left)?, false)
            .map_err(|e| e.to_string())?;
        // gRPC's framing: compressed or not, the length, the message.
        let mut message = Vec::with_capacity(5 + body.len());
        message.push(u8::from(self.gzip));
        message.extend((body.len() as u32).to_be_bytes());
        message.extend(body);
        stream
            .send_data(message.into(), true)
            .map_err(|e| e.to_string())?;
        answer(response.await.map_err(|e| e.to_string())?).await
    }

    /// The HEADERS of one call of `TraceService/Export`.
    fn request(&self, left: Duration) -> Result<Request<()>, String> {
        let uri = format!(
            "{}://{}{EXPORT}",
            self.uri.scheme_str().unwrap_or("http"),
            self.uri.authority().map_or("", |a| a.as_str())
        );
        let mut request = Request::post(uri)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("grpc-timeout", grpc_timeout(left))
            .header(
                "user-agent",
                concat!("proctrace/", env!("CARGO_PKG_VERSION")),
            );
        if self.gzip {
            request = request.header("grpc-encoding", "gzip");
        }
        for (key, value) in &self.headers {
            request = request.header(key.to_ascii_lowercase(), value);
        }
        request.body(()).map_err(|e| format!("a header: {e}"))
    }
}

/// The status, message and body of a call's response.
async fn answer(response: http::Response<h2::RecvStream>) -> Result<Answer, String> {
    let (parts, mut body) = response.into_parts();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.map_err(|e| e.to_string())?;
    // A trailers-only answer has its status in the headers.
    let status = trailers
        .as_ref()
        .and_then(grpc_status)
        .or(grpc_status(&parts.headers));
    let message = trailers.as_ref().or(Some(&parts.headers)).and_then(|h| {
        let message = h.get("grpc-message")?.to_str().ok()?;
        Some(message.to_string())
    });
    let http = parts.status;
    Ok(Answer {
        status: status.or((!http.is_success()).then_some(UNAVAILABLE)),
        message: message.unwrap_or_else(|| format!("HTTP {http}")),
        body: data,
    })
}

async fn handshake<T>(io: T) -> Result<SendRequest<Bytes>, String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (client, connection) = h2::client::handshake(io)
        .await
        .map_err(|e| format!("HTTP/2: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

fn grpc_status(headers: &HeaderMap) -> Option<u32> {
    headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

const UNAVAILABLE: u32 = 14;

/// The codes the OTLP specification calls retryable: CANCELLED,
/// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, OUT_OF_RANGE,
/// UNAVAILABLE, DATA_LOSS.
const RETRYABLE: [u32; 7] = [1, 4, 8, 10, 11, 14, 15];

impl Transport for Grpc {
    fn send(&mut self, body: &[u8], deadline: Instant) -> Attempt {
        let left = deadline.saturating_duration_since(Instant::now());
        let channel = &mut self.channel;
        let answer = self.runtime.block_on(async {
            match tokio::time::timeout(left, channel.call(body, left)).await {
                Ok(answer) => answer,
                Err(_) => Err("no answer in time".to_string()),
            }
        });
        let answer = match answer {
            Ok(answer) => answer,
            Err(why) => {
                channel.client = None;
                return Attempt::Retry { after: None, why };
            }
        };
        let why = || {
            format!(
                "{} answered gRPC status {} {}",
                channel.uri,
                answer.status.unwrap_or(2),
                answer.message
            )
        };
        match answer.status {
            Some(0) => {
                // The response message, after its 5-byte prefix.
                let (rejected, message) = proto::rejected(answer.body.get(5..).unwrap_or_default());
                Attempt::Accepted { rejected, message }
            }
            Some(code) if RETRYABLE.contains(&code) => {
                channel.client = None;
                Attempt::Retry {
                    after: None,
                    why: why(),
                }
            }
            _ => Attempt::Failed(why()),
        }
    }
}

/// `left` as gRPC's timeout header: at most 8 digits, so in the finest
/// unit that fits (a century is 876,000 hours).
fn grpc_timeout(left: Duration) -> String {
    let millis = left.as_millis().max(1);
    [(1, 'm'), (1000, 'S'), (3_600_000, 'H')]
        .into_iter()
        .map(|(per, unit)| (millis.div_ceil(per), unit))
        .find(|&(value, _)| value <= 99_999_999)
        .map_or_else(
            || "99999999H".into(),
            |(value, unit)| format!("{value}{unit}"),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_header_has_at_most_eight_digits() {
        assert_eq!(grpc_timeout(Duration::from_millis(1500)), "1500m");
        assert_eq!(grpc_timeout(Duration::ZERO), "1m");
        assert_eq!(grpc_timeout(Duration::from_secs(200_000)), "200000S");
        assert_eq!(grpc_timeout(super::super::config::NO_LIMIT), "876000H");
    }
}

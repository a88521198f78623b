//! Prometheus metrics over plain HTTP: `GET /metrics` answers a
//! [`Registry`] in the text exposition format (the `prometheus` crate's
//! encoder writes it). The coordinator serves one on `--metrics-listen`,
//! and a rank on `metrics_port`.
//!
//! The endpoint is an open port on a cluster network, so it is bounded like
//! every other: HTTP/1 only, headers within hyper's limits and read within
//! [`HEADER_TIMEOUT`], at most [`MAX_CONNECTIONS`] connections at once
//! (more wait in the kernel's backlog), one request per connection, each
//! connection closed [`CONNECTION_DEADLINE`] after it opened whatever it
//! is doing (a client that pipelines requests and never reads the answers
//! holds a slot that long at most), and request bodies are never read.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

pub use prometheus;

/// The path metrics are served at.
pub const PATH: &str = "/metrics";
/// How long a client may take to send its request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The longest a connection is kept, its answer's write included.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(15);

/// The registry's metrics in the text exposition format.
pub fn render(registry: &Registry) -> String {
    let mut out = Vec::new();
    let families = registry.gather();
    if let Err(error) = TextEncoder::new().encode(&families, &mut out) {
        tracing::warn!(%error, "cannot encode the metrics");
    }
    String::from_utf8(out).unwrap_or_default()
}

/// A metrics endpoint serving in the background; stops when dropped.
#[derive(Debug)]
pub struct MetricsServer {
    address: SocketAddr,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Binds `address` (`host:port`; port 0 picks a free one) and serves
    /// `registry` there until dropped.
    pub async fn bind(address: &str, registry: Registry) -> std::io::Result<Self> {
        let listener = TcpListener::bind(address).await?;
        Ok(Self::serve(listener, registry))
    }

    /// Serves `registry` on `listener` until dropped.
    pub fn serve(listener: TcpListener, registry: Registry) -> Self {
        let address = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let task = tokio::spawn(serve(listener, registry, std::future::pending()));
        Self { address, task }
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `registry` at [`PATH`] on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    registry: Registry,
    shutdown: impl Future<Output = ()> + Send,
) {
    let registry = Arc::new(registry);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (stop, stopped) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "metrics endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let registry = Arc::clone(&registry);
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = service_fn(move |request| {
                let registry = Arc::clone(&registry);
                async move { Ok::<_, Infallible>(answer(&request, &registry)) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let served = tokio::time::timeout(CONNECTION_DEADLINE, async {
                tokio::select! {
                    result = connection.as_mut() => result,
                    _ = async { drop(stopped.wait_for(|s| *s).await) } => {
                        connection.as_mut().graceful_shutdown();
                        connection.as_mut().await
                    }
                }
            });
            match served.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "metrics endpoint: connection ended")
                }
                Err(_) => tracing::debug!(%peer, "metrics endpoint: connection past its deadline"),
            }
        });
    }
    let _ = stop.send(true);
}

fn answer(request: &Request<Incoming>, registry: &Registry) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response
    };
    if request.uri().path() != PATH {
        return reply(
            StatusCode::NOT_FOUND,
            format!("Tributary serves its metrics at {PATH}\n"),
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = reply(StatusCode::METHOD_NOT_ALLOWED, String::new());
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let mut response = reply(StatusCode::OK, render(registry));
    if let Ok(kind) = HeaderValue::from_str(TextEncoder::new().format_type()) {
        response.headers_mut().insert(CONTENT_TYPE, kind);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::IntCounter;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn get(address: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("request");
        let mut out = String::new();
        stream.read_to_string(&mut out).await.expect("response");
        out
    }

    #[tokio::test]
    async fn serves_the_registry_at_metrics_and_nothing_elsewhere() {
        let registry = Registry::new();
        let counter = IntCounter::new("tributary_test_total", "A test counter.").expect("counter");
        registry
            .register(Box::new(counter.clone()))
            .expect("register");
        counter.inc_by(7);
        let server = MetricsServer::bind("127.0.0.1:0", registry)
            .await
            .expect("bind");
        let close = "Connection: close\r\n\r\n";
        let ok = get(
            server.address(),
            &format!("GET /metrics HTTP/1.1\r\n{close}"),
        )
        .await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(ok.contains("text/plain; version=0.0.4"), "{ok}");
        assert!(ok.contains("\ntributary_test_total 7\n"), "{ok}");
        let missing = get(server.address(), &format!("GET /other HTTP/1.1\r\n{close}")).await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let post = get(
            server.address(),
            &format!("POST /metrics HTTP/1.1\r\n{close}"),
        )
        .await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        let garbage = get(server.address(), "\x00\x01 not http\r\n\r\n").await;
        assert!(
            garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"),
            "{garbage}"
        );
    }

    #[tokio::test]
    async fn clients_that_pipeline_requests_and_never_read_do_not_block_a_scrape() {
        let registry = Registry::new();
        let counter = IntCounter::new("tributary_test_total", "A test counter.").expect("counter");
        registry.register(Box::new(counter)).expect("register");
        let server = MetricsServer::bind("127.0.0.1:0", registry)
            .await
            .expect("bind");
        let mut hogs = Vec::new();
        for _ in 0..(MAX_CONNECTIONS + 6) {
            let mut hog = TcpStream::connect(server.address()).await.expect("connect");
            let pipelined = "GET /metrics HTTP/1.1\r\n\r\n".repeat(100);
            hog.write_all(pipelined.as_bytes()).await.expect("pipeline");
            hogs.push(hog);
        }
        let scrape = tokio::time::timeout(
            HEADER_TIMEOUT,
            get(server.address(), "GET /metrics HTTP/1.1\r\n\r\n"),
        )
        .await
        .expect("a scrape is answered while the hogs hold their connections");
        assert!(scrape.starts_with("HTTP/1.1 200"), "{scrape}");
        drop(hogs);
    }
}

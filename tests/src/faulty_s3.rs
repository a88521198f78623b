//! A small S3-compatible-enough HTTP server on loopback that misbehaves on
//! command.
//!
//! It serves objects held in memory to `GET` (whole, or one `Range`) and
//! `HEAD`, path-style (`/bucket/key`), with `ETag`, `Last-Modified`,
//! `Content-Range` and `If-Match` as S3 sends and honours them; it checks no
//! signature. object_store's S3 backend talks to it exactly as it talks to
//! S3, so tests exercise the client code production runs.
//!
//! [`Fault`] rules, matched against request paths, make chosen requests
//! fail: an error status, a reset or a clean close mid-body, a slow or
//! stalled body, a `Content-Length` that lies. Every request is logged, with
//! the fault it got, so tests can assert what the client asked for.
//!
//! The server is hand-written over tokio's TCP so that it can break HTTP in
//! ways a well-behaved server library would not let it.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Longest request head the server reads.
const MAX_HEAD: usize = 16 << 10;

/// One way to break a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status (500, 503, ...) and an S3 error document.
    Status(u16),
    /// Send the headers and this many body bytes, then reset the connection.
    ResetAfter(u64),
    /// Send the headers and this many body bytes, then close the connection
    /// cleanly (FIN): the body is shorter than its `Content-Length`.
    CloseAfter(u64),
    /// Send the body in pieces of `chunk` bytes with `pause` between them.
    Slow { chunk: usize, pause: Duration },
    /// Send the headers and this many body bytes, then send nothing more
    /// and keep the connection open until the client gives up.
    StallAfter(u64),
    /// Declare a `Content-Length` this many bytes short of the body, send the
    /// whole body, then close: the client sees a clean, short body.
    ShortLength(u64),
    /// Declare this `Content-Length` whatever the body, send the real body,
    /// then close.
    ClaimLength(u64),
}

/// What a rule applies to and how often.
#[derive(Debug, Clone)]
struct Rule {
    /// A substring of the request path (`""` matches every path).
    path: String,
    fault: Fault,
    /// GETs left to break; `None`: every one.
    remaining: Option<u32>,
}

/// One request the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    pub method: String,
    pub path: String,
    /// The byte range asked for (end exclusive), if any.
    pub range: Option<Range<u64>>,
    pub fault: Option<Fault>,
}

#[derive(Debug, Default)]
struct State {
    objects: Mutex<HashMap<String, Object>>,
    rules: Mutex<Vec<Rule>>,
    log: Mutex<Vec<Logged>>,
}

#[derive(Debug, Clone)]
struct Object {
    data: Arc<[u8]>,
    etag: String,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running server; it stops when dropped.
#[derive(Debug)]
pub struct FaultyS3 {
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultyS3 {
    /// Binds 127.0.0.1:0 and serves on the current tokio runtime.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(State::default());
        let task = tokio::spawn(serve(listener, Arc::clone(&state)));
        Ok(Self {
            endpoint,
            state,
            task,
        })
    }

    /// Stores `data` as `bucket/key`.
    pub fn put(&self, bucket: &str, key: &str, data: Vec<u8>) {
        let etag = format!("\"{:016x}\"", fnv1a(&data));
        let object = Object {
            data: data.into(),
            etag,
        };
        lock(&self.state.objects).insert(format!("/{bucket}/{key}"), object);
    }

    /// Stores every file under `dir` as `bucket/prefix/<relative path>`.
    pub fn put_dir(&self, bucket: &str, prefix: &str, dir: &Path) -> std::io::Result<usize> {
        let mut count = 0;
        let mut pending = vec![dir.to_path_buf()];
        while let Some(at) = pending.pop() {
            for entry in std::fs::read_dir(&at)? {
                let path = entry?.path();
                if path.is_dir() {
                    pending.push(path);
                    continue;
                }
                let relative = path
                    .strip_prefix(dir)
                    .map_err(std::io::Error::other)?
                    .to_string_lossy()
                    .replace('\\', "/");
                self.put(
                    bucket,
                    &format!("{prefix}/{relative}"),
                    std::fs::read(&path)?,
                );
                count += 1;
            }
        }
        Ok(count)
    }

    /// Breaks the next `times` GETs of the object `path` names (the end of
    /// its path) with `fault`.
    pub fn fail(&self, path: &str, fault: Fault, times: u32) {
        self.add_rule(path, fault, Some(times));
    }

    /// Breaks every GET of the object `path` names (the end of its path)
    /// with `fault`.
    pub fn fail_always(&self, path: &str, fault: Fault) {
        self.add_rule(path, fault, None);
    }

    fn add_rule(&self, path: &str, fault: Fault, remaining: Option<u32>) {
        lock(&self.state.rules).push(Rule {
            path: path.to_owned(),
            fault,
            remaining,
        });
    }

    /// Removes every rule: from now on the server behaves.
    pub fn heal(&self) {
        lock(&self.state.rules).clear();
    }

    /// The requests answered so far, in arrival order.
    pub fn log(&self) -> Vec<Logged> {
        lock(&self.state.log).clone()
    }

    /// Forgets the requests answered so far.
    pub fn clear_log(&self) {
        lock(&self.state.log).clear();
    }
}

impl Drop for FaultyS3 {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every
        // connection task.
        self.task.abort();
    }
}

/// FNV-1a, for ETags: deterministic, dependency-free.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

async fn serve(listener: TcpListener, state: Arc<State>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                // Small pieces of a body must leave when written, not when
                // Nagle's algorithm decides.
                if stream.set_nodelay(true).is_err() {
                    continue;
                }
                connections.spawn(connection(stream, Arc::clone(&state)));
            }
            Some(_) = connections.join_next() => {}
        }
    }
}

/// A parsed request head.
#[derive(Debug)]
struct Request {
    method: String,
    path: String,
    range: Option<(u64, Option<u64>)>,
    if_match: Option<String>,
    body_bytes: u64,
}

/// Serves requests on one connection until the client closes it or a
/// fault ends it.
async fn connection(mut stream: TcpStream, state: Arc<State>) {
    let mut buf = Vec::new();
    loop {
        let request = match read_head(&mut stream, &mut buf).await {
            Ok(Some(request)) => request,
            Ok(None) | Err(_) => return,
        };
        // Bodies are not supported; skip one if sent so framing holds.
        if request.body_bytes > 0 {
            let _ = respond_status(&mut stream, 501, "NotImplemented", true).await;
            return;
        }
        match respond(&mut stream, &state, request).await {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
    }
}

/// Reads one request head; `None` when the client closed the connection.
async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<Request>> {
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too long"));
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end + 4);
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let target = first.next().unwrap_or_default();
    let path = percent_decode(target.split('?').next().unwrap_or_default());
    let mut request = Request {
        method,
        path,
        range: None,
        if_match: None,
        body_bytes: 0,
    };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "range" => request.range = parse_range(value),
            "if-match" => request.if_match = Some(value.to_owned()),
            "content-length" => request.body_bytes = value.parse().unwrap_or(0),
            _ => {}
        }
    }
    Ok(Some(request))
}

/// `bytes=START-END` (END inclusive, optional).
fn parse_range(value: &str) -> Option<(u64, Option<u64>)> {
    let (start, end) = value.strip_prefix("bytes=")?.split_once('-')?;
    let end = if end.is_empty() {
        None
    } else {
        Some(end.parse().ok()?)
    };
    Some((start.parse().ok()?, end))
}

fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `path` (`/bucket/prefix/name`) is the object `name` names: its
/// last parts, whole (so a shard's rule leaves its `.idx` alone).
fn names(path: &str, name: &str) -> bool {
    path == name
        || path
            .strip_suffix(name)
            .is_some_and(|rest| rest.ends_with('/'))
}

/// The fault for a GET of `path`, if a rule applies (and uses it up).
fn take_fault(state: &State, path: &str) -> Option<Fault> {
    let mut rules = lock(&state.rules);
    let rule = rules
        .iter_mut()
        .find(|r| names(path, &r.path) && r.remaining != Some(0))?;
    if let Some(n) = rule.remaining.as_mut() {
        *n -= 1;
    }
    Some(rule.fault.clone())
}

/// Answers one request; `Ok(true)` when the connection can serve another.
async fn respond(stream: &mut TcpStream, state: &State, request: Request) -> std::io::Result<bool> {
    let head_only = match request.method.as_str() {
        "GET" => false,
        "HEAD" => true,
        _ => return respond_status(stream, 501, "NotImplemented", false).await,
    };
    let object = lock(&state.objects).get(&request.path).cloned();
    let size = object.as_ref().map_or(0, |o| o.data.len() as u64);
    let range = request.range.map(|(start, end)| {
        let end = end.map_or(size, |e| e.saturating_add(1).min(size));
        start..end
    });
    let fault = if head_only {
        None
    } else {
        take_fault(state, &request.path)
    };
    lock(&state.log).push(Logged {
        method: request.method.clone(),
        path: request.path.clone(),
        range: range.clone(),
        fault: fault.clone(),
    });
    let Some(object) = object else {
        return respond_status(stream, 404, "NoSuchKey", head_only).await;
    };
    if let Some(Fault::Status(status)) = fault {
        return respond_status(stream, status, "InternalError", head_only).await;
    }
    if request.if_match.as_ref().is_some_and(|m| *m != object.etag) {
        return respond_status(stream, 412, "PreconditionFailed", head_only).await;
    }
    let (status, body) = match &range {
        Some(r) if r.start >= r.end || r.start >= size => {
            return respond_status(stream, 416, "InvalidRange", head_only).await;
        }
        Some(r) => ("206 Partial Content", r.clone()),
        None => ("200 OK", 0..size),
    };
    let body = &object.data[body.start as usize..body.end as usize];
    let length = match &fault {
        Some(Fault::ShortLength(short)) => (body.len() as u64).saturating_sub(*short),
        Some(Fault::ClaimLength(claimed)) => *claimed,
        _ => body.len() as u64,
    };
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {length}\r\nETag: {}\r\n\
         Last-Modified: Mon, 23 Nov 2026 00:00:00 GMT\r\nAccept-Ranges: bytes\r\n\
         Content-Type: application/octet-stream\r\n",
        object.etag
    );
    if let Some(r) = &range {
        head += &format!("Content-Range: bytes {}-{}/{size}\r\n", r.start, r.end - 1);
    }
    head += "\r\n";
    stream.write_all(head.as_bytes()).await?;
    if head_only {
        return Ok(true);
    }
    let prefix = |n: u64| &body[..body.len().min(usize::try_from(n).unwrap_or(usize::MAX))];
    match fault {
        None | Some(Fault::Status(_)) => {
            stream.write_all(body).await?;
            Ok(true)
        }
        Some(Fault::ResetAfter(n)) => {
            stream.write_all(prefix(n)).await?;
            stream.flush().await?;
            // SO_LINGER 0: closing sends RST, not FIN.
            stream.set_zero_linger()?;
            Ok(false)
        }
        Some(Fault::CloseAfter(n)) => {
            stream.write_all(prefix(n)).await?;
            stream.shutdown().await?;
            Ok(false)
        }
        Some(Fault::Slow { chunk, pause }) => {
            for piece in body.chunks(chunk.max(1)) {
                stream.write_all(piece).await?;
                stream.flush().await?;
                tokio::time::sleep(pause).await;
            }
            Ok(true)
        }
        Some(Fault::StallAfter(n)) => {
            stream.write_all(prefix(n)).await?;
            stream.flush().await?;
            // Hold the connection until the client closes it.
            let mut sink = [0u8; 1024];
            while stream.read(&mut sink).await? > 0 {}
            Ok(false)
        }
        Some(Fault::ShortLength(_) | Fault::ClaimLength(_)) => {
            stream.write_all(body).await?;
            stream.shutdown().await?;
            Ok(false)
        }
    }
}

async fn respond_status(
    stream: &mut TcpStream,
    status: u16,
    code: &str,
    head_only: bool,
) -> std::io::Result<bool> {
    let reason = match status {
        404 => "Not Found",
        412 => "Precondition Failed",
        416 => "Range Not Satisfiable",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>{reason}</Message></Error>"
    );
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if !head_only {
        stream.write_all(body.as_bytes()).await?;
    }
    Ok(true)
}

//! A replica's listening sockets, bounded: at most [`Limits::connections`]
//! connections at once (one more is closed as it is accepted), and a
//! connection that has not made a valid call within
//! [`Limits::first_call_within`] of opening is closed, whatever it sent: a
//! TLS handshake that stalls, an HTTP/2 preface and nothing more, or calls
//! the token check refused. A connection proves itself with its first call
//! that passes the token check ([`Proof::prove`]); from then on HTTP/2
//! keep-alive pings (`server::run`) judge whether its peer is alive.
//!
//! The health port's connections never prove themselves: a probe's call
//! takes milliseconds, and each probe opens a connection of its own.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tonic::transport::server::Connected;

/// The bounds of one listening socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once.
    pub connections: usize,
    /// How long a connection may go without a valid call.
    pub first_call_within: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connections: 16_384,
            first_call_within: Duration::from_secs(10),
        }
    }
}

/// A connection's proof that it made a valid call: the request extension
/// the token check finds (`auth::TokenCheck`), shared with the connection.
#[derive(Debug, Clone)]
pub struct Proof {
    proven: Arc<AtomicBool>,
    /// The peer, for messages.
    pub peer: SocketAddr,
}

impl Proof {
    /// The connection made a valid call: it stays open.
    pub fn prove(&self) {
        self.proven.store(true, Ordering::Relaxed);
    }
}

/// An accepted connection under the listener's bounds.
pub struct Conn {
    io: TcpStream,
    proof: Proof,
    /// Until the first valid call; `None` after it.
    deadline: Option<Pin<Box<Sleep>>>,
    within: Duration,
    _slot: OwnedSemaphorePermit,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("peer", &self.proof.peer)
            .field("proven", &self.proof.proven.load(Ordering::Relaxed))
            .finish()
    }
}

impl Connected for Conn {
    type ConnectInfo = Proof;

    fn connect_info(&self) -> Proof {
        self.proof.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(deadline) = &mut this.deadline {
            if this.proof.proven.load(Ordering::Relaxed) {
                this.deadline = None;
            } else if deadline.as_mut().poll(cx).is_ready() {
                tracing::debug!(peer = %this.proof.peer, "closing a connection that made no valid call");
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no valid call within {:?} of connecting", this.within),
                )));
            }
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The connections `listener` accepts, under `limits`. Refused ones (over
/// the cap) are counted in `refused` and closed at once; accept errors
/// (out of file descriptors) pause accepting for a moment instead of
/// ending the stream.
pub fn incoming(
    listener: TcpListener,
    limits: Limits,
    refused: Arc<AtomicU64>,
) -> impl Stream<Item = io::Result<Conn>> {
    let slots = Arc::new(Semaphore::new(limits.connections));
    futures::stream::unfold(
        (listener, slots, refused),
        move |(listener, slots, refused)| async move {
            loop {
                let (io, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "accept failed; pausing 100 ms");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    if refused.fetch_add(1, Ordering::Relaxed) % 1000 == 0 {
                        tracing::warn!(
                            %peer,
                            cap = limits.connections,
                            "refusing connections: the cap on open connections is reached"
                        );
                    }
                    continue;
                };
                let _ = io.set_nodelay(true);
                let conn = Conn {
                    io,
                    proof: Proof {
                        proven: Arc::new(AtomicBool::new(false)),
                        peer,
                    },
                    deadline: Some(Box::pin(tokio::time::sleep(limits.first_call_within))),
                    within: limits.first_call_within,
                    _slot: slot,
                };
                return Some((Ok(conn), (listener, slots, refused)));
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn listener() -> (TcpListener, SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        (listener, address)
    }

    #[tokio::test]
    async fn a_connection_without_a_valid_call_is_cut_at_the_deadline_and_a_proven_one_is_not() {
        let (listener, address) = listener().await;
        let limits = Limits {
            connections: 8,
            first_call_within: Duration::from_millis(200),
        };
        let mut accepted = Box::pin(incoming(listener, limits, Arc::default()));
        let mut idle_peer = TcpStream::connect(address).await.expect("connect");
        let mut idle = accepted.next().await.expect("one").expect("accepted");
        let mut proven_peer = TcpStream::connect(address).await.expect("connect");
        let mut proven = accepted.next().await.expect("one").expect("accepted");
        proven.connect_info().prove();
        // The idle peer sends a few bytes, then nothing: the read after
        // them fails at the deadline.
        idle_peer.write_all(b"PRI").await.expect("write");
        let mut buf = [0u8; 3];
        idle.read_exact(&mut buf).await.expect("the bytes sent");
        let error = idle.read(&mut buf).await.expect_err("cut at the deadline");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
        // Both deadlines have passed now: the proven connection still reads.
        proven_peer.write_all(b"abc").await.expect("write");
        proven
            .read_exact(&mut buf)
            .await
            .expect("a proven connection stays");
        assert_eq!(&buf, b"abc");
    }

    #[tokio::test]
    async fn connections_over_the_cap_are_closed_as_they_are_accepted() {
        let (listener, address) = listener().await;
        let limits = Limits {
            connections: 2,
            first_call_within: Duration::from_secs(60),
        };
        let refused = Arc::new(AtomicU64::new(0));
        let mut accepted = Box::pin(incoming(listener, limits, Arc::clone(&refused)));
        let mut peers = Vec::new();
        let mut held = Vec::new();
        for _ in 0..2 {
            peers.push(TcpStream::connect(address).await.expect("connect"));
            held.push(accepted.next().await.expect("one").expect("accepted"));
        }
        // The third is closed by the server: its read sees EOF.
        let mut third = TcpStream::connect(address).await.expect("connect");
        let next = tokio::spawn(async move { accepted.next().await.map(|c| c.is_ok()) });
        let mut buf = [0u8; 1];
        assert_eq!(third.read(&mut buf).await.expect("eof"), 0);
        assert_eq!(refused.load(Ordering::Relaxed), 1);
        // A slot freed is taken by the next connection.
        drop(held.pop());
        let _fourth = TcpStream::connect(address).await.expect("connect");
        assert_eq!(next.await.expect("task"), Some(true));
    }
}

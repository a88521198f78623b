//! A TCP proxy that adds latency, for `bench/run.sh` (this kernel has no
//! `tc netem`): every chunk read on one side is written to the other side
//! `rtt / 2` after it arrived, in each direction, so a request/response
//! round trip costs `rtt` more while bandwidth is unchanged.
//!
//! ```text
//! cargo run --release --example delay_proxy -- 127.0.0.1:9100 127.0.0.1:9000 20
//! ```
//!
//! TCP_NODELAY is set on both sides: small responses must not wait for
//! delayed ACKs, or the proxy would add far more than it says. It is written
//! in Rust so that on a 2-core machine it takes little of the CPU the loader
//! under test needs.

#![allow(
    clippy::print_stdout,
    reason = "a command line tool prints its address"
)]

use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, to, rtt_ms] = args.as_slice() else {
        anyhow::bail!("usage: delay_proxy LISTEN_ADDR UPSTREAM_ADDR RTT_MS");
    };
    let rtt_ms: f64 = rtt_ms.parse().context("RTT_MS is not a number")?;
    let one_way = Duration::from_secs_f64(rtt_ms / 2000.0);
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!("delay proxy {listen} -> {to}, +{rtt_ms} ms per round trip");
    loop {
        let (client, _) = listener.accept().await?;
        let to = to.clone();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(&to).await else {
                return;
            };
            for socket in [&client, &server] {
                let _ = socket.set_nodelay(true);
            }
            let (client_r, client_w) = client.into_split();
            let (server_r, server_w) = server.into_split();
            tokio::join!(
                pipe(client_r, server_w, one_way),
                pipe(server_r, client_w, one_way)
            );
        });
    }
}

/// Forwards `from` to `to`, each chunk (and the end of the stream) `delay`
/// after it was read.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    // Chunks held back at most: 64 MiB, beyond which reading waits.
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(1024);
    let read = async move {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let chunk = match from.read(&mut buf).await {
                Ok(0) | Err(_) => Vec::new(), // the end, forwarded late too
                Ok(n) => buf[..n].to_vec(),
            };
            let end = chunk.is_empty();
            if tx.send((Instant::now() + delay, chunk)).await.is_err() || end {
                return;
            }
        }
    };
    let forward = async move {
        while let Some((due, chunk)) = rx.recv().await {
            sleep_until(due).await;
            if chunk.is_empty() || to.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, forward);
}

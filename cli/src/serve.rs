//! `tributary coordinator`: one coordinator replica. With `--etcd` its state
//! lives in etcd and replicas elect a leader there; without, it runs alone
//! on the in-memory store (state is lost when it stops).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tributary_coordinator::store::{Election, EtcdElection, EtcdStore, MetaStore};
use tributary_coordinator::{keys, ServerConfig};

use crate::storage::StoreArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: String,
    /// Address clients reach this replica at (default: the bound address).
    #[arg(long)]
    advertise: Option<String>,
    /// etcd endpoints, comma-separated (host:port or http://host:port).
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// Leader lease time to live: how long a dead leader holds on.
    #[arg(long, default_value_t = 3)]
    leader_ttl_s: u64,
    /// Group-commit window for store writes, in milliseconds.
    #[arg(long, default_value_t = 50)]
    flush_ms: u64,
    #[command(flatten)]
    store: StoreArgs,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let bound = listener.local_addr()?;
    let advertise = args.advertise.clone().unwrap_or_else(|| bound.to_string());
    let (store, election): (Arc<dyn MetaStore>, Arc<dyn Election>) = if args.etcd.is_empty() {
        tracing::warn!(
            "no --etcd given: running alone on the in-memory store; state is lost on exit"
        );
        eprintln!(
            "coordinator: no --etcd given, using the in-memory store (state is lost on exit)"
        );
        tributary_coordinator::local::memory_store()
    } else {
        let store = EtcdStore::connect(&args.etcd)
            .await
            .with_context(|| format!("cannot reach etcd at {}", args.etcd.join(",")))?;
        let election = EtcdElection::new(
            store.clone(),
            keys::ELECTION.to_owned(),
            Duration::from_secs(args.leader_ttl_s.max(1)),
        );
        (Arc::new(store), Arc::new(election))
    };
    let mut config = ServerConfig::new(advertise.clone());
    config.flush_interval = Duration::from_millis(args.flush_ms);
    config.store_options = args.store.options("s3://");
    eprintln!("coordinator: listening on {bound} (advertised as {advertise})");
    tributary_coordinator::run(listener, store, election, config, shutdown()).await?;
    Ok(())
}

async fn shutdown() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

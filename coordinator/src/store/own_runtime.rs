//! [`OwnRuntime`]: an [`Election`] that runs on a thread of its own.
//!
//! A replica answering thousands of calls a second keeps its runtime's
//! workers busy; an election lease renewed from the same workers waits in
//! their queues, and a lease that expires because its holder was busy
//! deposes a leader that was serving well. Here the campaign, the lease's
//! renewals and the watch of the leader key run on a runtime of one thread
//! that nothing else uses, over a connection made on it (so its I/O is
//! driven there too): the operating system schedules that thread beside the
//! busy ones, and a renewal waits for no call.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::runtime::{Builder, Handle, Runtime};

use super::{Election, Leadership, StoreError, StoreResult};

/// The election thread's name.
pub const THREAD: &str = "tributary-election";

/// An election whose work runs on its own runtime (see the module's docs).
#[derive(Debug)]
pub struct OwnRuntime {
    inner: Arc<dyn Election>,
    handle: Handle,
    /// Shut down (in the background) when this is dropped.
    runtime: Option<Runtime>,
}

impl OwnRuntime {
    /// Starts the election's thread and runs `build` on it: what it
    /// connects is driven by that thread.
    pub async fn start<F>(build: F) -> StoreResult<Self>
    where
        F: Future<Output = StoreResult<Arc<dyn Election>>> + Send + 'static,
    {
        let runtime = Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(THREAD)
            .enable_all()
            .build()
            .map_err(|e| StoreError::Other(format!("cannot start the election's thread: {e}")))?;
        let inner = runtime.spawn(build).await.map_err(|e| {
            StoreError::Other(format!("the election's thread failed to start it: {e}"))
        })??;
        Ok(Self {
            inner,
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
        })
    }

    /// Runs `work` on the election's thread and waits for it.
    async fn on_thread<T: Send + 'static>(
        &self,
        work: impl Future<Output = StoreResult<T>> + Send + 'static,
    ) -> StoreResult<T> {
        self.handle
            .spawn(work)
            .await
            .map_err(|e| StoreError::Other(format!("the election's thread stopped: {e}")))?
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Callable from async code, unlike dropping a runtime.
            runtime.shutdown_background();
        }
    }
}

#[async_trait]
impl Election for OwnRuntime {
    async fn campaign(&self, candidate: &str) -> StoreResult<Leadership> {
        let (inner, candidate) = (Arc::clone(&self.inner), candidate.to_owned());
        self.on_thread(async move { inner.campaign(&candidate).await })
            .await
    }

    async fn leader(&self) -> StoreResult<Option<String>> {
        let inner = Arc::clone(&self.inner);
        self.on_thread(async move { inner.leader().await }).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::store::{MemoryElection, MemoryStore};

    /// A memory election that notes the thread each call ran on, and keeps
    /// noting it from a renewal task its campaign spawns.
    #[derive(Debug)]
    struct Noted {
        inner: MemoryElection,
        threads: Arc<Mutex<Vec<String>>>,
    }

    fn here(threads: &Mutex<Vec<String>>) {
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        threads.lock().expect("threads").push(name);
    }

    #[async_trait]
    impl Election for Noted {
        async fn campaign(&self, candidate: &str) -> StoreResult<Leadership> {
            here(&self.threads);
            let threads = Arc::clone(&self.threads);
            tokio::spawn(async move {
                loop {
                    here(&threads);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
            self.inner.campaign(candidate).await
        }
        async fn leader(&self) -> StoreResult<Option<String>> {
            here(&self.threads);
            self.inner.leader().await
        }
    }

    /// On a runtime of one thread that a call then blocks, the election's
    /// renewals go on: they run on the election's own thread.
    #[tokio::test(flavor = "current_thread")]
    async fn campaigns_and_what_they_spawn_run_on_the_elections_thread() {
        let threads = Arc::new(Mutex::new(Vec::new()));
        let noted = Arc::clone(&threads);
        let election = OwnRuntime::start(async move {
            let store = MemoryStore::new();
            let inner = MemoryElection::new(store, crate::keys::ELECTION);
            Ok(Arc::new(Noted {
                inner,
                threads: noted,
            }) as Arc<dyn Election>)
        })
        .await
        .expect("start");
        let _leading = election.campaign("here:1").await.expect("campaign");
        assert_eq!(
            election.leader().await.expect("leader").as_deref(),
            Some("here:1")
        );
        let before = threads.lock().expect("threads").len();
        // The caller's only thread is busy (a handler that blocks).
        std::thread::sleep(Duration::from_millis(200));
        let seen = threads.lock().expect("threads").clone();
        assert!(seen.len() > before + 5, "renewals stopped: {seen:?}");
        assert!(seen.iter().all(|t| t == THREAD), "{seen:?}");
        drop(election);
    }
}

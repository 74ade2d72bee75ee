//! Server-wide state shared by every connection and background task.

use crate::commands::config::Knobs;
use crate::config::Config;
use crate::exec::blocking::Blocked;
use crate::metrics::Metrics;
use crate::store::Store;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;
use tokio::sync::watch;

/// Most SCAN cursors remembered; the oldest is forgotten first.
pub const MAX_CURSORS: usize = 16_384;

/// SCAN cursors: each names the key a scan resumes at.
#[derive(Default)]
pub struct Cursors {
    inner: Mutex<CursorTable>,
}

#[derive(Default)]
struct CursorTable {
    next_id: u64,
    keys: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

impl Cursors {
    /// Remembers `key` and returns its (non-zero) cursor.
    pub fn save(&self, key: Vec<u8>) -> u64 {
        let mut t = self.inner.lock();
        t.next_id += 1;
        let id = t.next_id;
        t.keys.insert(id, key);
        t.order.push_back(id);
        while t.order.len() > MAX_CURSORS {
            if let Some(old) = t.order.pop_front() {
                t.keys.remove(&old);
            }
        }
        id
    }

    /// The key cursor `id` resumes at, if remembered.
    pub fn resume(&self, id: u64) -> Option<Vec<u8>> {
        self.inner.lock().keys.get(&id).cloned()
    }
}

/// See the module documentation.
pub struct Shared {
    /// The configuration in force (CONFIG SET changes only what lives elsewhere: appendfsync).
    pub config: Config,
    /// The keyspace.
    pub store: Store,
    /// Counters and histograms.
    pub metrics: Metrics,
    /// SCAN cursors.
    pub cursors: Cursors,
    /// Clients blocked on keys.
    pub blocked: Blocked,
    /// Redis settings CONFIG SET remembers.
    pub knobs: Knobs,
    /// When the server started.
    pub started: Instant,
    /// A random-looking id of this run (INFO run_id).
    pub run_id: String,
    /// Connected clients now.
    pub clients: AtomicUsize,
    /// Connection ids.
    pub next_client_id: AtomicU64,
    /// The port actually bound (differs from the configuration when it asked for 0).
    pub port: AtomicU64,
    /// Set once shutdown starts.
    pub shutting_down: AtomicBool,
    /// Fires when shutdown starts.
    pub shutdown_tx: watch::Sender<bool>,
    /// Unix seconds of the last WAL sync.
    pub last_sync: AtomicU64,
    /// On a cluster node: the replica's runtime, stopped at shutdown.
    pub cluster: Mutex<Option<crate::cluster::Cluster>>,
}

impl Shared {
    /// Starts a graceful shutdown (idempotent).
    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        let _ = self.shutdown_tx.send(true);
    }
}
